//! Command line of `onecopy-bench` and the parameters of a run.

use std::path::PathBuf;
use std::time::Duration;

use clap::builder::PossibleValuesParser;
use clap::error::ErrorKind;
use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches, Parser};
use serde_json::{json, Value};

/// What the runner does (the top of `--help`).
const ABOUT: &str = "\
Boots one cluster at a time (1 directory + 2 nodes; 3 nodes for the
2-sharer invalidation) in every mode and measures DPC's microbenchmarks:
fio latency / bandwidth / IOPS, reads and writes, libaio and mmap, in the
residency scenarios CM, CM-R and CH-R (DPC Fig. 6-9); the reclaim cost
(bench inv with 0, 1, 2 sharers; sequential read of a file larger than
the node's pool, DPC 6.2.5); the directory microbenchmarks (bench ring,
bench rpc: an empty file-server request over the mode's transport, the
rings or TCP; bench read CM-R, bench dir) next to the host ping-pong.
Baselines: private (independent per-node caches filled through the
directory's file server over the shared-memory rings, virtiofs-like) and
net (the same over TCP/IP on virtio-net, NFS-like).";

/// The forms of the command line (clap's usage line).
const SYNOPSIS: &str = "\
onecopy-bench [--quick] [--out DIR] [--modes strong,relaxed,private,net]
                     [--storage none|nvme|sata-ssd|sas-raid] [--cxl-latency-ns N]
                     [--doorbell on|off] [--dilation off|auto|D]
                     [--accel auto|tcg|tcg-multi|kvm]
                     [--jobs N] [--job-size SIZE] [--lat-size SIZE] [--repeats N]
                     [--baseline-writes back|through] [--keep-runs]
       onecopy-bench --resume DIR [the interrupted run's options]
       onecopy-bench --apps [--quick] [--apps-nodes 1,2,4] [--apps-runtime S]
                     [--apps-warmup S] [--apps-list kv,ann,...] [--policy NAME]
                     [--modes ...] [--storage P] [--dilation off|auto|D]
                     [--out DIR] [--keep-runs]
       onecopy-bench --policies [--quick] [--out DIR]
       onecopy-bench --render DIR";

/// The end of `--help`: outputs and exit status.
const AFTER_HELP: &str = "\
Writes DIR/results.json, DIR/report.md, DIR/params.json (the command
line and the parameters) and DIR/*.png (--policies: no charts); every
report records its provenance: commit (and whether the tree had
uncommitted changes), UTC dates, the command line, the host (CPUs, CPU
model, QEMU, accelerator) and the load during the run. One progress line
per step on stderr (and in DIR/progress.log): the step (figure or app,
mode, N), the time elapsed and an estimate of the time left.

Exit status: 0 every expected figure is a number, 1 some figure is
missing or failed (the report is still written, failures shown as n/a
with their error; --policies: a script failed or gave no row), 2 wrong
usage, 130 / 143 interrupted by SIGINT / SIGTERM: every cluster and
script it started is stopped and the report written so far is marked
partial (report.md: \"partial: interrupted at <step>\", results.json:
\"partial\"). Needs the release kernel, mkfs and onecopy-ctl built
(tools/bench-report.sh builds them).";

/// The command line as clap sees it; [`parse_args`] turns it into
/// [`BenchOpts`].
#[derive(Debug, Parser)]
#[command(
    name = "onecopy-bench",
    about = ABOUT,
    override_usage = SYNOPSIS,
    after_help = AFTER_HELP,
    args_override_self = true,
    disable_version_flag = true,
    max_term_width = 100
)]
struct Cli {
    /// Scaled down: 2 jobs x 1 MiB, a 1 MiB latency file, one run of each
    /// workload (about 80 s); also a smoke test. Default: 8 jobs x 1 MiB,
    /// an 8 MiB latency file, 5 runs of each workload (median)
    #[arg(long)]
    quick: bool,
    /// Results folder (default results/<YYYY-MM-DD-HHMMSS>/ under the
    /// repository root, UTC)
    #[arg(long, value_name = "DIR", value_parser = folder)]
    out: Option<PathBuf>,
    /// Comma-separated modes (default strong,relaxed,private,net); ratios
    /// vs private / vs net need that mode in the list
    #[arg(long, value_name = "LIST", value_parser = modes_list)]
    modes: Option<Names>,
    /// qemu-run.sh --storage profile (default none; --apps: sas-raid)
    #[arg(long, value_name = "P", value_parser = PossibleValuesParser::new(STORAGE))]
    storage: Option<String>,
    /// qemu-run.sh --cxl-latency-ns: emulated CXL latency of copies from
    /// a peer's frame
    #[arg(long, value_name = "N", default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(0..=100_000))]
    cxl_latency_ns: u32,
    /// qemu-run.sh --doorbell: interrupts between instances and tickless
    /// kernels (on), or polling on the 1 kHz tick (off)
    #[arg(long, value_name = "on|off", default_value = "on",
          value_parser = PossibleValuesParser::new(["on", "off"]))]
    doorbell: String,
    /// qemu-run.sh --dilation: the storage and CXL models scaled by the
    /// guest's slowdown D (default off); auto measures D at the first boot
    /// and every later cluster of the run uses that D; recorded in the
    /// report
    #[arg(long, value_name = "off|auto|D", default_value = "off", value_parser = dilation)]
    dilation: String,
    /// qemu-run.sh --accel of every cluster of the run (default auto: the
    /// launcher's choice, and tcg-multi for daxfs, which needs atomics
    /// across instances); give tcg-multi to measure every mode under the
    /// accelerator daxfs runs under; recorded in the report
    #[arg(long, value_name = "A", default_value = "auto",
          value_parser = PossibleValuesParser::new(ACCELS))]
    accel: String,
    /// Jobs of the bandwidth / IOPS workloads (1..=64)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    jobs: Option<u32>,
    /// File per job of the bandwidth / IOPS workloads (4k..256m)
    #[arg(long, value_name = "SIZE", value_parser = size)]
    job_size: Option<u64>,
    /// File of the latency workloads (4k..256m)
    #[arg(long, value_name = "SIZE", value_parser = size)]
    lat_size: Option<u64>,
    /// Runs of each fio workload, the figure is the median (1..=21)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=21))]
    repeats: Option<u32>,
    /// How private and net write (boot option baseline_writes): back =
    /// buffered in the node's page cache, written back at fsync, close,
    /// sync and under pressure (as the baselines DPC measured); through =
    /// every write to the file server
    #[arg(long, value_name = "W", default_value = "back",
          value_parser = PossibleValuesParser::new(["back", "through"]))]
    baseline_writes: String,
    /// Strong mode: boot with delegation=1 (nodes ask for delegations of
    /// the file ranges they write whole)
    #[arg(long)]
    delegation: bool,
    /// Keep the clusters' run folders (logs) under target/
    #[arg(long)]
    keep_runs: bool,
    /// Continue the interrupted (or incomplete) microbenchmark run in DIR
    /// from its results.json: the steps whose figures were all measured
    /// are kept, the others measured; give the same options as that run
    /// (refused, naming them, if they differ)
    #[arg(long, value_name = "DIR", value_parser = folder,
          conflicts_with_all = ["out", "apps", "policies"])]
    resume: Option<PathBuf>,
    /// The application study instead (DPC 6.3, Fig. 10): per mode and N,
    /// one cluster of N nodes runs the same `app` on every node at once
    /// over one dataset built on the host; per-node throughput normalized
    /// to single-node private. Storage defaults to sas-raid here. With
    /// --quick: N = 1, 2 and 1 s per app (a smoke test)
    #[arg(long)]
    apps: bool,
    /// Node counts of the application study (default 1,2,4; --quick 1,2);
    /// each in 1..=8, 1 is needed (the baseline)
    #[arg(long, value_name = "LIST", value_parser = node_list, requires = "apps")]
    apps_nodes: Option<Nodes>,
    /// --runtime of every app run, seconds (1..=600; default 5, --quick 1)
    #[arg(long, value_name = "S", requires = "apps",
          value_parser = clap::value_parser!(u32).range(1..=600))]
    apps_runtime: Option<u32>,
    /// Warm-up of every app run before its measured phase, seconds, not
    /// counted in its figures (0..=600, 0: none; default 2, --quick 1)
    #[arg(long, value_name = "S", requires = "apps",
          value_parser = clap::value_parser!(u32).range(0..=600))]
    apps_warmup: Option<u32>,
    /// Only these apps (default all: kv,ann,infer,webserver,fileserver,
    /// varmail)
    #[arg(long, value_name = "LIST", value_parser = apps_list, requires = "apps")]
    apps_list: Option<Names>,
    /// Eviction policy of every node (qemu-run.sh --policy: fifo, lru,
    /// clock, lfu, mru, s3fifo, sieve, arc, get-scan, cluster; default
    /// fifo); it orders the single-copy modes' owned pages (private and
    /// net have their own LRU page cache)
    #[arg(long, value_name = "NAME", value_parser = policy, requires = "apps")]
    policy: Option<String>,
    /// The eviction-policy section instead: runs tools/bench-policy-apps.sh
    /// (cache_ext's YCSB-C, GET-SCAN and file search under every policy,
    /// ratios to FIFO), tools/bench-cluster-policy.sh (webserver on 4
    /// nodes, lru vs cluster) and tools/bench-promote.sh twice, in relaxed
    /// and in strong mode (CH-R latency, promotion off / on,
    /// --cxl-latency-ns 250) one after the other, each with a time limit,
    /// their output in DIR/policies/*.log; report.md's "Eviction policies"
    /// section puts cache_ext's published figures beside ours. With
    /// --quick: 6 policies, 1-2 s runs, 2 nodes (about 90 s, a smoke
    /// test). Takes only --quick and --out
    #[arg(long, conflicts_with = "apps")]
    policies: bool,
    /// Re-draw a microbenchmark report's charts and report.md from its
    /// DIR/results.json with this build's chart and report code (nothing
    /// is measured; the provenance keeps the run's commit and records the
    /// render's)
    #[arg(long, value_name = "DIR", value_parser = folder, exclusive = true)]
    render: Option<PathBuf>,
}

/// A list of names given as one comma-separated value.
#[derive(Debug, Clone)]
struct Names(Vec<String>);

/// A list of node counts given as one comma-separated value.
#[derive(Debug, Clone)]
struct Nodes(Vec<u8>);

fn folder(v: &str) -> Result<PathBuf, String> {
    if v.is_empty() {
        return Err("needs a folder".into());
    }
    Ok(PathBuf::from(v))
}

fn modes_list(v: &str) -> Result<Names, String> {
    name_list("mode", v, MODES).map(Names)
}

fn apps_list(v: &str) -> Result<Names, String> {
    let known: Vec<&str> = crate::bench::apps::list::APPS
        .iter()
        .map(|a| a.name)
        .collect();
    name_list("app", v, &known).map(Names)
}

fn node_list(v: &str) -> Result<Nodes, String> {
    let mut ns: Vec<u8> = Vec::new();
    for t in v.split(',').map(str::trim) {
        let n = int_arg(t, 1, 8)? as u8;
        if !ns.contains(&n) {
            ns.push(n);
        }
    }
    ns.sort_unstable();
    if ns.first() != Some(&1) {
        return Err("must include 1 (the single-node baseline)".into());
    }
    Ok(Nodes(ns))
}

fn policy(v: &str) -> Result<String, String> {
    if fabric::config::PolicyName::parse(v).is_none() {
        return Err(format!(
            "unknown policy '{v}' ({})",
            fabric::config::PolicyName::names()
        ));
    }
    Ok(v.to_string())
}

fn dilation(v: &str) -> Result<String, String> {
    if !valid_dilation(v) {
        return Err("must be off, auto or a factor in 0.1..100 with at most two decimals".into());
    }
    Ok(v.to_string())
}

fn size(v: &str) -> Result<u64, String> {
    parse_size(v)
        .ok_or_else(|| "must be a size like 512k or 4m (a multiple of 4k, 4k..256m)".into())
}

/// The whole `--help` text.
pub fn help_text() -> String {
    Cli::command().render_help().to_string()
}

/// The flags `--policies` goes with (clap's ids).
const POLICIES_FLAGS: &[&str] = &["policies", "quick", "out"];

/// The page-cache modes onecopy-bench knows.
pub const MODES: &[&str] = &["strong", "relaxed", "private", "net", "daxfs"];

/// The modes a run measures unless `--modes` says otherwise: `daxfs` is
/// asked for by name (its clusters boot with `--accel tcg-multi`, and the
/// report has no section of its own yet).
pub const DEFAULT_MODES: &[&str] = &["strong", "relaxed", "private", "net"];

/// The baselines (independent per-node caches, no single copy): ratios
/// are given against them, in this order.
pub const BASELINES: &[&str] = &["private", "net"];

/// `off`, `auto` or a factor qemu-run.sh's `--dilation` takes (0.1..100,
/// at most two decimals).
pub fn valid_dilation(v: &str) -> bool {
    if v == "off" || v == "auto" {
        return true;
    }
    let (int, frac) = v.split_once('.').unwrap_or((v, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() || int.len() > 4 || frac.len() > 2 || !digits(int) || !digits(frac) {
        return false;
    }
    if v.contains('.') && frac.is_empty() {
        return false;
    }
    let pct = int.parse::<u32>().unwrap_or(u32::MAX).saturating_mul(100)
        + format!("{frac:0<2}").parse::<u32>().unwrap_or(0);
    (10..=10_000).contains(&pct)
}

/// Accelerators of qemu-run.sh's `--accel`.
pub const ACCELS: &[&str] = &["auto", "tcg", "tcg-multi", "kvm"];

/// Storage profiles of qemu-run.sh.
pub const STORAGE: &[&str] = &["none", "nvme", "sata-ssd", "sas-raid"];

/// Parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchOpts {
    /// Scaled-down run.
    pub quick: bool,
    /// Results folder (None: the default under results/).
    pub out: Option<PathBuf>,
    /// Modes, in order.
    pub modes: Vec<String>,
    /// Storage profile.
    pub storage: String,
    /// Emulated CXL latency (ns).
    pub cxl_latency_ns: u32,
    /// qemu-run.sh `--doorbell` (true: on).
    pub doorbell: bool,
    /// qemu-run.sh `--dilation`: `off`, `auto` (until the first boot has
    /// measured it) or a factor.
    pub dilation: String,
    /// qemu-run.sh `--accel` of every cluster (`auto`: the launcher's
    /// choice, `tcg-multi` for daxfs).
    pub accel: String,
    /// Keep run folders.
    pub keep_runs: bool,
    /// `--jobs`.
    pub jobs: Option<u32>,
    /// `--job-size` (bytes).
    pub job_size: Option<u64>,
    /// `--lat-size` (bytes).
    pub lat_size: Option<u64>,
    /// `--repeats`.
    pub repeats: Option<u32>,
    /// `--baseline-writes`: `back` or `through`.
    pub baseline_writes: String,
    /// `--delegation`: boot option `delegation=1`.
    pub delegation: bool,
    /// `--storage` was given (the application study's default differs).
    pub storage_set: bool,
    /// `--apps`: the application study.
    pub apps: bool,
    /// `--apps-nodes`.
    pub apps_nodes: Option<Vec<u8>>,
    /// `--apps-runtime` (seconds).
    pub apps_runtime: Option<u32>,
    /// `--apps-warmup` (seconds).
    pub apps_warmup: Option<u32>,
    /// `--apps-list`: the apps to run (None: all).
    pub apps_list: Option<Vec<String>>,
    /// `--policy`: every node's eviction policy (None: the default).
    pub policy: Option<String>,
    /// `--policies`: the eviction-policy section (the three scripts).
    pub policies: bool,
    /// `--resume`: the interrupted run's results folder.
    pub resume: Option<PathBuf>,
}

impl Default for BenchOpts {
    fn default() -> Self {
        BenchOpts {
            quick: false,
            out: None,
            modes: DEFAULT_MODES.iter().map(|m| m.to_string()).collect(),
            storage: "none".into(),
            cxl_latency_ns: 0,
            doorbell: true,
            dilation: "off".into(),
            accel: "auto".into(),
            keep_runs: false,
            jobs: None,
            job_size: None,
            lat_size: None,
            repeats: None,
            baseline_writes: "back".into(),
            delegation: false,
            storage_set: false,
            apps: false,
            apps_nodes: None,
            apps_runtime: None,
            apps_warmup: None,
            apps_list: None,
            policy: None,
            policies: false,
            resume: None,
        }
    }
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    /// `--help`.
    Help,
    /// `--render DIR`.
    Render(PathBuf),
    /// A run.
    Run(Box<BenchOpts>),
}

/// Parses the arguments (without the program name). An error is clap's
/// message: `error: ...`, the usage line and where to find more.
pub fn parse_args(args: &[String]) -> Result<Parsed, String> {
    let argv = std::iter::once("onecopy-bench".to_string()).chain(args.iter().cloned());
    let m = match Cli::command().try_get_matches_from(argv) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::DisplayHelp => return Ok(Parsed::Help),
        Err(e) => return Err(e.render().to_string()),
    };
    let refuse = |msg: String| {
        Cli::command()
            .error(ErrorKind::ArgumentConflict, msg)
            .render()
            .to_string()
    };
    let cli = Cli::from_arg_matches(&m).map_err(|e| e.render().to_string())?;
    if let Some(dir) = cli.render {
        return Ok(Parsed::Render(dir));
    }
    let given = |id: &str| m.value_source(id) == Some(ValueSource::CommandLine);
    if cli.policies {
        if let Some(other) = m
            .ids()
            .map(|i| i.as_str())
            .filter(|i| Cli::command().get_arguments().any(|a| a.get_id() == *i))
            .find(|i| given(i) && !POLICIES_FLAGS.contains(i))
        {
            return Err(refuse(format!(
                "--policies takes only --quick and --out, not --{} (the scripts' parameters \
                 are fixed: see --help)",
                other.replace('_', "-")
            )));
        }
    }
    let d = BenchOpts::default();
    let modes = cli.modes.map(|n| n.0).unwrap_or(d.modes);
    if cli.accel == "tcg" && modes.iter().any(|m| m == "daxfs") {
        return Err(refuse(
            "--accel tcg cannot run daxfs (it needs atomics across instances): \
             use --accel tcg-multi or kvm, or leave daxfs out of --modes"
                .into(),
        ));
    }
    Ok(Parsed::Run(Box::new(BenchOpts {
        quick: cli.quick,
        out: cli.out,
        modes,
        storage_set: cli.storage.is_some(),
        storage: cli.storage.unwrap_or(d.storage),
        cxl_latency_ns: cli.cxl_latency_ns,
        doorbell: cli.doorbell == "on",
        dilation: cli.dilation,
        accel: cli.accel,
        keep_runs: cli.keep_runs,
        jobs: cli.jobs,
        job_size: cli.job_size,
        lat_size: cli.lat_size,
        repeats: cli.repeats,
        baseline_writes: cli.baseline_writes,
        delegation: cli.delegation,
        apps: cli.apps,
        apps_nodes: cli.apps_nodes.map(|n| n.0),
        apps_runtime: cli.apps_runtime,
        apps_warmup: cli.apps_warmup,
        apps_list: cli.apps_list.map(|n| n.0),
        policy: cli.policy,
        policies: cli.policies,
        resume: cli.resume,
    })))
}

/// A comma-separated list of names out of `known`, in the given order,
/// each once; an unknown one is an error naming the valid ones.
fn name_list(what: &str, v: &str, known: &[&str]) -> Result<Vec<String>, String> {
    let mut list: Vec<String> = Vec::new();
    for t in v.split(',').map(str::trim) {
        if !known.contains(&t) {
            return Err(format!("unknown {what} '{t}' ({})", known.join(", ")));
        }
        if !list.iter().any(|x| x == t) {
            list.push(t.to_string());
        }
    }
    Ok(list)
}

fn int_arg(v: &str, lo: u32, hi: u32) -> Result<u32, String> {
    match v.parse::<u32>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(format!("must be an integer {lo}..={hi}, got '{v}'")),
    }
}

impl BenchOpts {
    /// The `--accel` a cluster of `mode` boots with (`None`: the
    /// launcher's choice).
    pub fn accel_for(&self, mode: &str) -> Option<&str> {
        if self.accel != "auto" {
            Some(&self.accel)
        } else if mode == "daxfs" {
            // The launcher refuses it without atomics across instances.
            Some("tcg-multi")
        } else {
            None
        }
    }
}

/// Parses `4k`, `1m`, `1536k` or bytes: a multiple of 4 KiB, 4k..=256m.
pub fn parse_size(v: &str) -> Option<u64> {
    let v = v.trim();
    let (num, mul) = match v.char_indices().last()? {
        (i, 'k' | 'K') => (&v[..i], 1u64 << 10),
        (i, 'm' | 'M') => (&v[..i], MIB),
        _ => (v, 1),
    };
    let n: u64 = num.parse().ok()?;
    let b = n.checked_mul(mul)?;
    ((4096..=256 * MIB).contains(&b) && b.is_multiple_of(4096)).then_some(b)
}

/// Sizes and counts of one run: `--quick` scales everything down. Every
/// value is recorded in results.json and report.md.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// Bytes of the one file of the latency workloads (4k, 1 job).
    pub lat_size: u64,
    /// Jobs of the bandwidth and IOPS workloads (DPC: 8).
    pub jobs: u32,
    /// Bytes of each job's file in the bandwidth and IOPS workloads.
    pub job_size: u64,
    /// Runs of every fio workload's CM, CM-R, CH-R procedure; the figure
    /// is the median.
    pub repeats: u32,
    /// iodepth passed to fio for bandwidth / IOPS (DPC: 32; effective 1).
    pub iodepth: u32,
    /// Shared region (MiB) of the fio clusters.
    pub fio_shm_mb: u32,
    /// Disk image (MiB) of every cluster.
    pub disk_mb: u32,
    /// File of the larger-than-pool sequential read.
    pub big_file: u64,
    /// Shared region (MiB) of that cluster (small pools).
    pub big_shm_mb: u32,
    /// File of `bench inv` / `bench read` / `bench dir`.
    pub inv_size: u64,
    /// `bench ring` round trips per run.
    pub ring_rounds: u32,
    /// `bench ring` runs (median of their medians is the figure).
    pub ring_repeats: u32,
    /// `bench rpc` round trips per run (an empty file-server request over
    /// the mode's transport: far slower over TCP than through the rings).
    pub rpc_rounds: u32,
    /// `bench rpc` runs (median of their medians is the figure).
    pub rpc_repeats: u32,
    /// `bench dir` rounds.
    pub dir_rounds: u32,
    /// Host ping-pong rounds per run.
    pub pingpong_rounds: u32,
    /// Host ping-pong runs (median of medians).
    pub pingpong_repeats: u32,
    /// Limit of one shell command.
    pub cmd_timeout: Duration,
    /// Limit of a cluster's boot.
    pub boot_timeout: Duration,
    /// Write policy of the private-cache modes (`back` or `through`).
    pub baseline_writes: String,
}

const MIB: u64 = 1 << 20;

/// Pool per node (MiB) for a region of `shm_mb` shared by `nodes` nodes.
pub fn pool_mib(shm_mb: u32, nodes: u8) -> f64 {
    fabric::layout::Layout::compute((shm_mb as usize) << 20, u32::from(nodes))
        .map(|l| l.pool_frames as f64 * fabric::PAGE_SIZE as f64 / MIB as f64)
        .unwrap_or(f64::NAN)
}

impl Params {
    /// The parameters of a quick or a full run.
    pub fn new(quick: bool) -> Params {
        if quick {
            Params {
                lat_size: MIB,
                jobs: 2,
                job_size: MIB,
                repeats: 1,
                iodepth: 32,
                fio_shm_mb: 64,
                disk_mb: 64,
                big_file: 12 * MIB,
                big_shm_mb: 16,
                inv_size: 256 << 10,
                ring_rounds: 20_000,
                ring_repeats: 3,
                rpc_rounds: 1000,
                rpc_repeats: 3,
                dir_rounds: 3,
                pingpong_rounds: 200_000,
                pingpong_repeats: 3,
                cmd_timeout: Duration::from_secs(300),
                boot_timeout: Duration::from_secs(90),
                baseline_writes: "back".into(),
            }
        } else {
            Params {
                lat_size: 8 * MIB,
                jobs: 8,
                job_size: MIB,
                repeats: 5,
                iodepth: 32,
                fio_shm_mb: 64,
                disk_mb: 64,
                big_file: 12 * MIB,
                big_shm_mb: 16,
                inv_size: MIB,
                ring_rounds: 20_000,
                ring_repeats: 3,
                rpc_rounds: 2000,
                rpc_repeats: 3,
                dir_rounds: 10,
                pingpong_rounds: 200_000,
                pingpong_repeats: 3,
                cmd_timeout: Duration::from_secs(900),
                boot_timeout: Duration::from_secs(120),
                baseline_writes: "back".into(),
            }
        }
    }

    /// The parameters of a run with the command line's overrides; the
    /// shared region and the disk grow with the files (each node's pool
    /// holds twice the largest workload, the disk three times).
    pub fn from_opts(o: &BenchOpts) -> Params {
        let mut p = Params::new(o.quick);
        if let Some(j) = o.jobs {
            p.jobs = j;
        }
        if let Some(s) = o.job_size {
            p.job_size = s;
        }
        if let Some(s) = o.lat_size {
            p.lat_size = s;
        }
        if let Some(r) = o.repeats {
            p.repeats = r;
        }
        p.baseline_writes = o.baseline_writes.clone();
        let need = p.lat_size.max(u64::from(p.jobs) * p.job_size);
        while (pool_mib(p.fio_shm_mb, 2) * MIB as f64) < 2.0 * need as f64 && p.fio_shm_mb < 4096 {
            p.fio_shm_mb *= 2;
        }
        let disk_need = (3 * need / MIB) as u32 + 32;
        p.disk_mb = p.disk_mb.max(disk_need);
        p
    }

    /// The parameters as JSON.
    pub fn to_json(&self) -> Value {
        json!({
            "lat_size_bytes": self.lat_size,
            "jobs": self.jobs,
            "job_size_bytes": self.job_size,
            "repeats": self.repeats,
            "iodepth": self.iodepth,
            "fio_shm_mb": self.fio_shm_mb,
            "disk_mb": self.disk_mb,
            "big_file_bytes": self.big_file,
            "big_shm_mb": self.big_shm_mb,
            "inv_size_bytes": self.inv_size,
            "ring_rounds": self.ring_rounds,
            "ring_repeats": self.ring_repeats,
            "rpc_rounds": self.rpc_rounds,
            "rpc_repeats": self.rpc_repeats,
            "dir_rounds": self.dir_rounds,
            "pingpong_rounds": self.pingpong_rounds,
            "pingpong_repeats": self.pingpong_repeats,
            "cmd_timeout_s": self.cmd_timeout.as_secs(),
            "boot_timeout_s": self.boot_timeout.as_secs(),
            "baseline_writes": self.baseline_writes,
        })
    }
}

/// A byte count as fio and the shell take it: `4k`, `128k`, `1m`, or bytes.
pub fn size_arg(bytes: u64) -> String {
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{}m", bytes / MIB)
    } else if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{}k", bytes / 1024)
    } else {
        bytes.to_string()
    }
}

/// A byte count for people: `4 KiB`, `1 MiB`, `1.5 MiB`.
pub fn size_human(bytes: u64) -> String {
    if bytes >= MIB {
        let m = bytes as f64 / MIB as f64;
        if bytes.is_multiple_of(MIB) {
            format!("{} MiB", bytes / MIB)
        } else {
            format!("{m:.1} MiB")
        }
    } else if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}

#[cfg(test)]
mod tests;
