//! `app NAME [options]`: application workloads on a node (DPC
//! §6.3), each over a dataset built on the host (see [`dataset`]),
//! its threads running as tasks ([`crate::task`]) whose I/Os go out
//! together, and one summary plus one `RESULT {json}` line at the end.
//!
//! * [`webserver`], [`fileserver`], [`varmail`]: Filebench's
//!   personalities (shared parts in [`fileset`]).
//! * [`kv`]: RocksDB `db_bench readrandom` over one sorted table.
//! * [`infer`]: mixture-of-experts inference over a memory-mapped
//!   weights file.
//! * [`ann`]: DiskANN-style beam search over a disk-resident graph.
//! * [`search`]: cache_ext's file search, a grep over a fileset, pass
//!   after pass.
//!
//! Shared options ([`options`]): `--runtime S` (10 s), `--threads N`
//! (the workload's default), `--seed X` (1), `--ops N` (stop after N
//! top-level operations), `--warmup S` (0: run S first, uncounted: the
//! report covers the measured phase only), `--dir PATH` (`/apps/NAME`),
//! `--group NAME` (the task group its tasks run in, see `cache groups`).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::RefCell;
use core::fmt;

use crate::fio::RunEnv;
use crate::os::Os;
use crate::task::{Stalled, Tasks};

pub mod ann;
pub mod dataset;
pub mod fileserver;
pub mod fileset;
pub mod infer;
pub mod kv;
pub mod meter;
pub mod options;
pub mod report;
pub use datasets::rng;
pub mod scan;
pub mod search;
pub mod varmail;
pub mod webserver;

#[cfg(test)]
mod tests;

use meter::{geomean_milli, Meter};
use options::Options;
use report::{cache_delta, miss_time_delta, Baseline, Report};

/// The workloads, as `app NAME` takes them.
pub use datasets::NAMES;

/// The command's usage line.
pub const USAGE: &str =
    "app NAME [--runtime S] [--warmup S] [--threads N] [--seed X] [--ops N] [--dir PATH] [--group NAME] [workload options]";

/// Why a workload did not run or did not finish (shown as `app: ...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppError {
    msg: String,
}

impl AppError {
    /// An error with `msg`.
    pub fn new(msg: String) -> AppError {
        AppError { msg }
    }

    /// The message without the `app: ` prefix.
    pub fn message(&self) -> &str {
        &self.msg
    }
}

impl fmt::Display for AppError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "app: {}", self.msg)
    }
}

/// One run's settings, shared by its tasks.
pub struct Run {
    /// Where it runs.
    pub env: RunEnv,
    /// Tasks.
    pub threads: u32,
    /// `--seed`.
    pub seed: u64,
    /// Dataset directory.
    pub dir: String,
    /// `--runtime` in ns.
    pub runtime_ns: u64,
    /// `--ops` (0: none).
    pub ops: u64,
    /// `--warmup` in ns (0: none).
    pub warmup_ns: u64,
    cache0: RefCell<Baseline>,
}

impl Run {
    /// Start measuring: the counters now, and a meter from now (its
    /// warm-up first, if any).
    pub fn meter(&self, ex: &Tasks<'_>, names: &'static [&'static str]) -> Meter {
        *self.cache0.borrow_mut() = ex.with_os(Baseline::start);
        Meter::with_warmup(
            names,
            ex.uptime_ns(),
            self.warmup_ns,
            self.runtime_ns,
            self.ops,
        )
    }

    /// May a thread start another top-level operation? ([`Meter::begin`]
    /// at the clock's time; when the measured phase starts there, the
    /// counters' baselines are taken again, so that the report covers
    /// only the measured phase.)
    pub fn begin(&self, ex: &Tasks<'_>, m: &Meter) -> bool {
        let go = m.begin(ex.uptime_ns());
        if m.take_measuring() {
            *self.cache0.borrow_mut() = ex.with_os(Baseline::start);
        }
        go
    }

    /// [`Meter::record`], taking the counters' baseline if that started
    /// the measured phase (for workloads whose top-level operations are
    /// long: their [`Run::begin`] may not come for a while).
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &self,
        ex: &Tasks<'_>,
        m: &Meter,
        op: usize,
        lat_ns: u64,
        read: u64,
        written: u64,
        end_ns: u64,
    ) {
        m.record(op, lat_ns, read, written, end_ns);
        if m.take_measuring() {
            *self.cache0.borrow_mut() = ex.with_os(Baseline::start);
        }
    }

    /// The report of a run whose tasks returned `result`, `cleanup`
    /// being what came after (its error counts if the run succeeded).
    pub fn finish<T>(
        &self,
        ex: &Tasks<'_>,
        app: &'static str,
        result: Result<Vec<T>, Stalled>,
        m: &Meter,
        cleanup: Result<(), AppError>,
    ) -> Result<Report, AppError> {
        result.map_err(|e| AppError::new(format!("internal: {e}")))?;
        if let Some(e) = m.take_error() {
            return Err(e);
        }
        cleanup?;
        if m.warming() {
            return Err(AppError::new(format!(
                "the run ended within its warm-up of {} ms: nothing was measured (a shorter --warmup, or more --passes)",
                m.warmup_ns() / 1_000_000
            )));
        }
        let after = ex.with_os(Baseline::end);
        let mut r = Report::from_meter(app, self.env.clone(), m);
        r.threads = self.threads;
        r.seed = self.seed;
        r.dir = self.dir.clone();
        r.flush = ex.stats();
        r.meta = ex.meta_stats();
        let before = self.cache0.borrow();
        r.cache = cache_delta(&before.cache, &after.cache);
        r.dir_counters = cache_delta(&before.dir, &after.dir);
        r.miss_time = match (&before.miss, &after.miss) {
            (Some(b), Some(a)) => Some(miss_time_delta(b, a)),
            _ => None,
        };
        r.warmup_ns = m.warmup_ns();
        Ok(r)
    }
}

impl Report {
    /// Headline = the geometric mean of the per-kind rates (Filebench).
    pub fn with_geomean(mut self) -> Report {
        let rates: Vec<u64> = (0..self.ops.len()).map(|i| self.rate_milli(i)).collect();
        self.metric = "geomean_flowop_ops_per_s";
        self.unit = "ops/s";
        self.throughput_milli = geomean_milli(&rates);
        self
    }
}

fn usage() -> AppError {
    AppError::new(format!("usage: {USAGE} (NAME: {})", NAMES.join(", ")))
}

/// Parse `args` (`NAME [options]`) and run the workload on `os`; the
/// text to print (summary and `RESULT` line).
pub fn command(os: &mut dyn Os, args: &[&str]) -> Result<String, AppError> {
    let Some((&name, rest)) = args.split_first() else {
        return Err(usage());
    };
    let (known, default_threads) = match name {
        "webserver" => (webserver::OPTIONS, webserver::DEFAULT_THREADS),
        "fileserver" => (fileserver::OPTIONS, fileserver::DEFAULT_THREADS),
        "varmail" => (varmail::OPTIONS, varmail::DEFAULT_THREADS),
        "kv" => (kv::OPTIONS, kv::DEFAULT_THREADS),
        "infer" => (infer::OPTIONS, infer::DEFAULT_THREADS),
        "ann" => (ann::OPTIONS, ann::DEFAULT_THREADS),
        "search" => (search::OPTIONS, search::DEFAULT_THREADS),
        _ => {
            return Err(AppError::new(format!(
                "unknown app '{}' (one of {})",
                name.chars().take(48).collect::<String>(),
                NAMES.join(", ")
            )))
        }
    };
    let opts = Options::parse(rest, known)?;
    // The workload's own options are checked before anything runs.
    match name {
        "kv" => {
            kv::Params::from(&opts)?;
        }
        "infer" => {
            infer::Params::from(&opts)?;
        }
        "ann" => {
            ann::Params::from(&opts)?;
        }
        "search" => {
            search::Params::from(&opts)?;
        }
        _ => {}
    }
    match opts.group.clone() {
        Some(g) => crate::os::in_group(os, &g, |os| run_named(os, name, &opts, default_threads))
            .map_err(|e| AppError::new(format!("--group {g}: {e}")))?,
        None => run_named(os, name, &opts, default_threads),
    }
}

/// Run workload `name` (known) with checked `opts`.
fn run_named(
    os: &mut dyn Os,
    name: &str,
    opts: &Options,
    default_threads: u32,
) -> Result<String, AppError> {
    let env = RunEnv::from_os(os);
    let run = Run {
        env,
        threads: opts.threads.unwrap_or(default_threads),
        seed: opts.seed,
        dir: opts.dir_for(name),
        runtime_ns: opts.runtime_ns,
        ops: opts.ops,
        warmup_ns: opts.warmup_ns,
        cache0: RefCell::new(Baseline::default()),
    };
    let ex = Tasks::new(os);
    let report = match name {
        "webserver" => webserver::run(&ex, &run, opts),
        "fileserver" => fileserver::run(&ex, &run, opts),
        "varmail" => varmail::run(&ex, &run, opts),
        "kv" => kv::run(&ex, &run, opts),
        "infer" => infer::run(&ex, &run, opts),
        "search" => search::run(&ex, &run, opts),
        _ => ann::run(&ex, &run, opts),
    }?;
    Ok(report.render())
}
