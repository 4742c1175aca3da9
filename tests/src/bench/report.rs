//! results.json and report.md: ratios vs private measured in the same run,
//! and DPC's published ratios next to ours.

use std::fmt::Write as _;
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use super::model::{
    fmt_ratio, fmt_value, scenario_desc, Figure, Kind, Status, ENGINES, GROUP_BIG, GROUP_DIR,
    GROUP_FIO, GROUP_HOST, GROUP_INV, SCENARIOS, WORKLOADS,
};
use super::opts::size_human;
use super::parse;
use super::runner::Runner;
use crate::run_with_timeout;

/// DPC's published figures (DPC §6.2, Fig. 6-9, §6.2.5): the only numbers
/// of the report that this run did not measure.
pub const DPC_REFS: &[(&str, &str, f64)] = &[
    (
        "cmr-latency",
        "CM-R read latency 2.6x lower than the baseline's (Virtiofs) (DPC 6.2.1, Fig. 6a)",
        2.6,
    ),
    (
        "chr-bandwidth",
        "CH-R read bandwidth 4.5x the baseline's (DPC 6.2.1, Fig. 6b)",
        4.5,
    ),
    (
        "chr-iops",
        "CH-R read IOPS up to 72.8x the baseline's (DPC 6.2.1, Fig. 6c)",
        72.8,
    ),
    (
        "mmap-write-chr",
        "mmap write CH-R latency 23.3x lower than the baseline's (DPC 6.2.4, Fig. 9a)",
        23.3,
    ),
    (
        "invalidation",
        "synchronous invalidation: 99.7 us with sharers vs 11 us baseline = 9.1x (DPC 6.2.5)",
        99.7 / 11.0,
    ),
];

/// The machine the run was on.
pub fn machine() -> Value {
    let sh = |cmd: &str| -> String {
        let mut c = Command::new("sh");
        c.arg("-c").arg(cmd);
        match run_with_timeout(c, Duration::from_secs(20)) {
            Ok(o) if o.code == Some(0) => o.stdout_text().trim_end().to_string(),
            Ok(o) => format!("error: {cmd}: exit {:?}: {}", o.code, o.text().trim()),
            Err(e) => format!("error: {cmd}: {e}"),
        }
    };
    json!({
        "nproc": sh("nproc"),
        "free_g": sh("free -g"),
        "uname": sh("uname -a"),
        "qemu": sh("qemu-system-x86_64 --version | head -n 1"),
        "cpu": sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'"),
    })
}

/// The figure with an id.
fn find<'a>(figs: &'a [Figure], id: &str) -> Option<&'a Figure> {
    figs.iter().find(|f| f.id == id)
}

/// metric / same metric in private mode, oriented so that > 1 is better
/// (latency: private / this; bandwidth, IOPS: this / private).
pub fn ratio_vs_private(figs: &[Figure], f: &Figure) -> Option<f64> {
    if f.mode == "private" || f.group == GROUP_HOST {
        return None;
    }
    let base = find(figs, &f.id_in_mode("private"))?.value()?;
    better_ratio(f.value()?, base, f.lower_is_better)
}

/// How much better `v` is than `base` (> 1: better).
pub fn better_ratio(v: f64, base: f64, lower_is_better: bool) -> Option<f64> {
    if !(v > 0.0 && base > 0.0) {
        return None;
    }
    let r = if lower_is_better { base / v } else { v / base };
    r.is_finite().then_some(r)
}

/// One row of the headline table.
#[derive(Debug, Clone, PartialEq)]
pub struct Headline {
    /// Key into [`DPC_REFS`].
    pub key: &'static str,
    /// Mode measured.
    pub mode: String,
    /// What is compared.
    pub what: String,
    /// Our ratio (None: n/a).
    pub ratio: Option<f64>,
    /// The two numbers, or why n/a.
    pub detail: String,
}

fn fio_value(figs: &[Figure], mode: &str, w: &str, e: &str, sc: &str) -> (Option<f64>, String) {
    value_of(
        figs,
        &super::model::figure_id(GROUP_FIO, mode, w, Some(e), sc),
    )
}

/// Short text for a figure that has no value.
fn na_text(f: &Figure) -> String {
    match &f.status {
        Status::NotApplicable(m) | Status::Failed(m) if parse::is_unsupported(m) => {
            "n/a (not supported in this mode)".into()
        }
        Status::Failed(m) => format!("n/a (failed: {})", short(m, 80)),
        _ => "n/a".into(),
    }
}

fn value_of(figs: &[Figure], id: &str) -> (Option<f64>, String) {
    match find(figs, id) {
        Some(f) => (
            f.value(),
            f.value()
                .map(|v| format!("{} {}", fmt_value(v), f.unit))
                .unwrap_or_else(|| na_text(f)),
        ),
        None => (None, "n/a (not measured)".into()),
    }
}

fn compare(
    key: &'static str,
    mode: &str,
    what: &str,
    ours: (Option<f64>, String),
    base: (Option<f64>, String),
    lower_is_better: bool,
) -> Headline {
    let ratio = match (ours.0, base.0) {
        (Some(a), Some(b)) => better_ratio(a, b, lower_is_better),
        _ => None,
    };
    Headline {
        key,
        mode: mode.into(),
        what: what.into(),
        ratio,
        detail: format!("{} vs {}", ours.1, base.1),
    }
}

/// The headline comparisons with DPC's published ratios, for every
/// single-copy mode of the run.
pub fn headlines(figs: &[Figure], modes: &[String]) -> Vec<Headline> {
    let mut out = Vec::new();
    for m in modes.iter().filter(|m| *m != "private") {
        let m = m.as_str();
        let v = |w: &str, e: &str, sc: &str| fio_value(figs, m, w, e, sc);
        let p = |w: &str, e: &str, sc: &str| fio_value(figs, "private", w, e, sc);
        out.push(compare(
            "cmr-latency",
            m,
            "read-lat libaio CM-R mean latency: private / this",
            v("read-lat", "libaio", "CM-R"),
            p("read-lat", "libaio", "CM-R"),
            true,
        ));
        out.push(compare(
            "cmr-latency",
            m,
            "read-lat libaio mean latency in this mode: CM / CM-R",
            v("read-lat", "libaio", "CM-R"),
            v("read-lat", "libaio", "CM"),
            true,
        ));
        out.push(compare(
            "chr-bandwidth",
            m,
            "read-bw libaio CH-R: this / private CH-R (private: its own local copy)",
            v("read-bw", "libaio", "CH-R"),
            p("read-bw", "libaio", "CH-R"),
            false,
        ));
        out.push(compare(
            "chr-bandwidth",
            m,
            "read-bw libaio CH-R: this / private CM-R (private reading through the storage server)",
            v("read-bw", "libaio", "CH-R"),
            p("read-bw", "libaio", "CM-R"),
            false,
        ));
        out.push(compare(
            "chr-iops",
            m,
            "read-iops libaio CH-R: this / private CH-R",
            v("read-iops", "libaio", "CH-R"),
            p("read-iops", "libaio", "CH-R"),
            false,
        ));
        out.push(compare(
            "chr-iops",
            m,
            "read-iops libaio CH-R: this / private CM-R",
            v("read-iops", "libaio", "CH-R"),
            p("read-iops", "libaio", "CM-R"),
            false,
        ));
        out.push(compare(
            "mmap-write-chr",
            m,
            "write-lat mmap CH-R mean latency: private mmap / this",
            v("write-lat", "mmap", "CH-R"),
            p("write-lat", "mmap", "CH-R"),
            true,
        ));
        out.push(compare(
            "mmap-write-chr",
            m,
            "write-lat mmap CH-R: private libaio CH-R / this (private has no mmap; different engine)",
            v("write-lat", "mmap", "CH-R"),
            p("write-lat", "libaio", "CH-R"),
            true,
        ));
        let inv = |sc: &str| {
            value_of(
                figs,
                &super::model::figure_id(GROUP_INV, m, "bench inv", None, sc),
            )
        };
        for sc in ["1 sharer", "2 sharers"] {
            let ours = inv(sc);
            let base = inv("0 sharers");
            let ratio = match (ours.0, base.0) {
                (Some(a), Some(b)) if a > 0.0 && b > 0.0 => Some(a / b),
                _ => None,
            };
            out.push(Headline {
                key: "invalidation",
                mode: m.into(),
                what: format!(
                    "bench inv median: {sc} / 0 sharers (cost factor, like DPC's 99.7/11)"
                ),
                ratio,
                detail: format!("{} vs {}", ours.1, base.1),
            });
        }
    }
    out
}

fn dpc_ref(key: &str) -> (&'static str, f64) {
    DPC_REFS
        .iter()
        .find(|(k, _, _)| *k == key)
        .map(|(_, d, r)| (*d, *r))
        .unwrap_or(("", f64::NAN))
}

/// results.json.
pub fn results_json(r: &Runner, machine: &Value, plots: &[String], problems: &[String]) -> Value {
    let figs: Vec<Value> = r
        .figures
        .iter()
        .map(|f| {
            let mut j = f.to_json();
            j["ratio_vs_private"] = json!(ratio_vs_private(&r.figures, f));
            j
        })
        .collect();
    let heads: Vec<Value> = headlines(&r.figures, &r.opts.modes)
        .into_iter()
        .map(|h| {
            let (d, dr) = dpc_ref(h.key);
            json!({"key": h.key, "mode": h.mode, "what": h.what, "ratio": h.ratio,
                   "detail": h.detail, "dpc_published": d, "dpc_ratio": dr})
        })
        .collect();
    json!({
        "tool": "onecopy-bench",
        "quick": r.opts.quick,
        "modes": r.opts.modes,
        "storage": r.opts.storage,
        "cxl_latency_ns": r.opts.cxl_latency_ns,
        "accel": first_accel(r),
        "params": r.params.to_json(),
        "machine": machine,
        "seconds": r.elapsed(),
        "phases": r.phases.iter().map(|(n, s)| json!({"phase": n, "seconds": s})).collect::<Vec<_>>(),
        "figures": figs,
        "headlines": heads,
        "dpc_reference": DPC_REFS.iter().map(|(k, d, v)| json!({"key": k, "published": d, "ratio": v})).collect::<Vec<_>>(),
        "clusters": r.clusters,
        "notes": r.notes,
        "plots": plots,
        "problems": problems,
        "complete": problems.is_empty(),
    })
}

fn first_accel(r: &Runner) -> String {
    r.figures
        .iter()
        .map(|f| f.context.accel.as_str())
        .find(|a| !a.is_empty())
        .unwrap_or("unknown")
        .to_string()
}

fn cell(f: Option<&Figure>) -> String {
    match f {
        None => "n/a (not measured)".into(),
        Some(f) => match &f.status {
            Status::Ok(v) if v.is_finite() => fmt_value(*v),
            _ => "n/a".into(),
        },
    }
}

fn note_cell(f: Option<&Figure>) -> String {
    match f.and_then(|f| f.status.note()) {
        None => String::new(),
        Some(n) => md_escape(&short(&node_answer(&n), 140)),
    }
}

/// The node's answer in an error (`n2: CMD: error: MSG` -> `error: MSG`).
fn node_answer(note: &str) -> String {
    note.rsplit_once(": error: ")
        .map(|(_, m)| format!("error: {m}"))
        .unwrap_or_else(|| note.to_string())
}

fn short(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let t: String = s.chars().take(n).collect();
        format!("{t}...")
    }
}

fn md_escape(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn range_cell(f: Option<&Figure>) -> String {
    let vals: Vec<f64> = f
        .and_then(|f| f.params.get("values"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default();
    match vals.len() {
        0 => "n/a".into(),
        1 => "1 run".into(),
        n => {
            let lo = vals.iter().copied().fold(f64::MAX, f64::min);
            let hi = vals.iter().copied().fold(f64::MIN, f64::max);
            format!("{n}: {} - {}", fmt_value(lo), fmt_value(hi))
        }
    }
}

fn ratio_cell(figs: &[Figure], f: Option<&Figure>) -> String {
    match f {
        Some(f) if f.mode == "private" && f.value().is_some() => "1 (baseline)".into(),
        Some(f) => ratio_vs_private(figs, f)
            .map(fmt_ratio)
            .unwrap_or_else(|| "n/a".into()),
        None => "n/a".into(),
    }
}

/// report.md.
pub fn report_md(r: &Runner, machine: &Value, plots: &[String], problems: &[String]) -> String {
    let figs = &r.figures;
    let p = &r.params;
    let mut s = String::new();
    let kind = if r.opts.quick {
        "--quick (scaled down)"
    } else {
        "full"
    };
    let _ = writeln!(s, "# onecopy benchmark report\n");
    let _ = writeln!(
        s,
        "Run: {kind}, {} ({}), modes {}, storage profile `{}`, CXL latency {} ns. \
         Every number below was measured in this run, except the DPC column of the \
         headline table (DPC's published ratios, labelled as such). A measurement that \
         failed or does not exist in a mode is shown as n/a with its error.\n",
        super::iso(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0)
        ),
        super::fmt_secs(r.elapsed()),
        r.opts.modes.join(", "),
        r.opts.storage,
        r.opts.cxl_latency_ns
    );
    if problems.is_empty() {
        let _ = writeln!(s, "Complete: every expected figure is a number (n/a only where private mode has no such operation).\n");
    } else {
        let _ = writeln!(
            s,
            "**Incomplete: {} expected figure(s) missing or failed** (listed at the end).\n",
            problems.len()
        );
    }

    // Machine.
    let m = |k: &str| machine[k].as_str().unwrap_or("").to_string();
    let _ = writeln!(s, "## Machine\n");
    let _ = writeln!(s, "| what | value |\n| --- | --- |");
    let _ = writeln!(s, "| `nproc` | {} |", m("nproc"));
    let _ = writeln!(s, "| CPU | {} |", md_escape(&m("cpu")));
    let _ = writeln!(s, "| `uname -a` | {} |", md_escape(&m("uname")));
    let _ = writeln!(s, "| QEMU | {} |", md_escape(&m("qemu")));
    let _ = writeln!(s, "| accelerator | {} |", md_escape(&first_accel(r)));
    let _ = writeln!(s, "| storage profile | {} |", r.opts.storage);
    let _ = writeln!(s, "| CXL latency | {} ns |", r.opts.cxl_latency_ns);
    let _ = writeln!(
        s,
        "| instances | one cluster at a time: 1 directory + 2 nodes (fio, larger-than-pool read), 1 directory + 3 nodes (invalidation, directory microbenchmarks); one vCPU each, the directory pinned to CPU 0, the nodes to the other CPUs; busy during a measurement: the node running it and the directory |"
    );
    let _ = writeln!(s, "\n`free -g`:\n\n```\n{}\n```\n", m("free_g"));
    let _ = writeln!(s, "Clusters booted:\n");
    let _ = writeln!(
        s,
        "| cluster | nodes | shared region | pool per node | accel | time | failed figures |\n| --- | --- | --- | --- | --- | --- | --- |"
    );
    for c in &r.clusters {
        let _ = writeln!(
            s,
            "| {} | {} | {} MiB | {:.1} MiB | {} | {:.1} s | {} |",
            c["name"].as_str().unwrap_or(""),
            c["nodes"],
            c["shm_mb"],
            c["pool_mib_per_node"].as_f64().unwrap_or(f64::NAN),
            md_escape(c["accel"].as_str().unwrap_or("")),
            c["seconds"].as_f64().unwrap_or(0.0),
            c["failed_figures"].as_array().map(Vec::len).unwrap_or(0)
        );
    }

    // Parameters.
    let _ = writeln!(s, "\n## Parameters (actual, {kind})\n");
    let _ = writeln!(
        s,
        "| workload | fio options | files | DPC |\n| --- | --- | --- | --- |"
    );
    for w in WORKLOADS {
        let _ = writeln!(
            s,
            "| {} | `--rw={} --bs={} --iodepth={} --numjobs={}` | {} x {} | bs={}, qd={}, jobs={} ({} / {}) |",
            w.key,
            w.rw,
            super::opts::size_arg(w.bs),
            w.iodepth(p),
            w.jobs(p),
            w.jobs(p),
            size_human(w.size(p)),
            super::opts::size_arg(w.bs),
            if w.kind == Kind::Latency { 1 } else { 32 },
            if w.kind == Kind::Latency { 1 } else { 8 },
            w.dpc_figure("libaio"),
            w.dpc_figure("mmap")
        );
    }
    let _ = writeln!(
        s,
        "\nEach workload's whole procedure (below) ran {} time(s) per mode and engine; a figure is \
         the median of its runs (every run's value is in results.json, `params.values`; the \
         tables show the range).",
        p.repeats
    );
    let _ = writeln!(
        s,
        "\nEvery fio run is size-based (one pass over each file, every block once; no \
         `--time_based`, so CM-R really is a first touch) with `--invalidate=0`; the caches \
         are emptied with `cache drop`. The `libaio` engine submits each job's `--iodepth` \
         I/Os as one batch (`effective_iodepth` in the RESULT json says how many were in \
         flight); the jobs of one run interleave round-robin on one vCPU. Mean latency is \
         DPC's latency metric (for a batch, its completion time); bandwidth is MiB/s over \
         all jobs.\n"
    );
    let _ = writeln!(s, "Scenarios:\n");
    for sc in SCENARIOS {
        let _ = writeln!(s, "- **{sc}**: {}.", scenario_desc(sc));
    }
    let _ = writeln!(
        s,
        "\nPer workload: node 1 lays the files out and reads them (`--rw=read --bs=128k`), `sync`, \
         `cache drop` on both nodes; CM = node 2 runs the workload; then `sync`, `cache drop` on both, \
         node 1 reads the files again; CM-R = node 2 runs it; CH-R = node 2 runs it again. The files are \
         removed afterwards."
    );

    // Headlines.
    let _ = writeln!(s, "\n## Headline ratios next to DPC's published ones\n");
    let _ = writeln!(
        s,
        "Ratios are oriented so that > 1 means this mode is better (faster, more), except the \
         invalidation rows (a cost factor, as DPC's 99.7 us / 11 us). Our baseline is `private` \
         (independent per-node caches filled through the storage server, virtiofs-like).\n"
    );
    let _ = writeln!(
        s,
        "| mode | comparison | ours | measured (this vs baseline) | DPC published |\n| --- | --- | --- | --- | --- |"
    );
    for h in headlines(figs, &r.opts.modes) {
        let (_, dr) = dpc_ref(h.key);
        let n = DPC_REFS
            .iter()
            .position(|(k, _, _)| *k == h.key)
            .unwrap_or(0)
            + 1;
        let _ = writeln!(
            s,
            "| {} | {} | **{}** | {} | {} [{n}] |",
            h.mode,
            md_escape(&h.what),
            h.ratio.map(fmt_ratio).unwrap_or_else(|| "n/a".into()),
            md_escape(&short(&h.detail, 160)),
            fmt_ratio(dr),
        );
    }
    let _ = writeln!(s, "\nDPC's published figures (not measured here):\n");
    for (i, (_, d, _)) in DPC_REFS.iter().enumerate() {
        let _ = writeln!(s, "{}. {d}", i + 1);
    }
    let _ = writeln!(
        s,
        "\nReading them: private's CH-R is a hit on its own local copy (a second copy of the page \
         in the cluster), while strong/relaxed CH-R copies from the owner's frame, so \"CH-R vs \
         private CH-R\" is the price of keeping one copy; \"vs private CM-R\" compares with \
         private fetching the page through the storage server, which is what the single copy \
         saves. DPC's Virtiofs runs on Linux with a real SSD array; here the \"disk\" is QEMU's \
         host-page-cached image (storage profile `{}`) and everything runs under {}.",
        r.opts.storage,
        first_accel(r)
    );

    // fio tables.
    let _ = writeln!(s, "\n## fio: latency, bandwidth, IOPS (DPC Fig. 6-9)\n");
    let _ = writeln!(
        s,
        "\"ratio vs private\" = the same metric in private mode, measured in this run \
         (latency: private / this; bandwidth, IOPS: this / private; > 1 = better).\n"
    );
    for w in WORKLOADS {
        for e in ENGINES {
            let _ = writeln!(
                s,
                "### {} ({e}) - {}: {} `--rw={} --bs={}`, {} job(s) x {}, iodepth {}\n",
                w.title,
                w.dpc_figure(e),
                w.kind.metric(),
                w.rw,
                super::opts::size_arg(w.bs),
                w.jobs(p),
                size_human(w.size(p)),
                w.iodepth(p)
            );
            let png = super::plot::fio_png_name(w.key, e);
            if plots.iter().any(|x| x == &png) {
                let _ = writeln!(
                    s,
                    "![{} {e}]({png})\n\n(groups: CM, CM-R, CH-R; bars: {} in that order)\n",
                    w.title,
                    r.opts.modes.join(", ")
                );
            }
            let lat = w.kind == Kind::Latency;
            let _ = writeln!(
                s,
                "| scenario | mode | {} ({}) |{} runs: min - max | ratio vs private | busy instances | note |",
                w.kind.metric(),
                w.kind.unit(),
                if lat { " p50 / p99 (us) |" } else { "" }
            );
            let _ = writeln!(
                s,
                "| --- | --- | --- |{} --- | --- | --- | --- |",
                if lat { " --- |" } else { "" }
            );
            for sc in SCENARIOS {
                for mode in &r.opts.modes {
                    let id = super::model::figure_id(GROUP_FIO, mode, w.key, Some(e), sc);
                    let f = find(figs, &id);
                    let pct = if lat {
                        let dir = if w.read { "read" } else { "write" };
                        let q = |k: &str| {
                            f.filter(|f| f.value().is_some())
                                .and_then(|f| f.raw.pointer(&format!("/{dir}/lat_ns/{k}")))
                                .and_then(Value::as_f64)
                                .map(|ns| fmt_value(ns / 1000.0))
                                .unwrap_or_else(|| "n/a".into())
                        };
                        format!(" {} / {} |", q("p50"), q("p99"))
                    } else {
                        String::new()
                    };
                    let _ = writeln!(
                        s,
                        "| {sc} | {mode} | {} |{pct} {} | {} | {} | {} |",
                        cell(f),
                        range_cell(f),
                        ratio_cell(figs, f),
                        f.and_then(|f| f.busy_instances)
                            .map(|b| b.to_string())
                            .unwrap_or_else(|| "n/a".into()),
                        note_cell(f)
                    );
                }
            }
            let _ = writeln!(s);
        }
    }

    // Reclaim.
    let _ = writeln!(s, "## Reclaim cost (DPC 6.2.5)\n");
    let inv_size = size_human(p.inv_size);
    let _ = writeln!(
        s,
        "`bench inv` on node 1 of a 1 directory + 3 nodes cluster: a synchronous invalidation of \
         every page of a {inv_size} file node 1 owns, one page at a time, while 2, 1 or 0 other \
         nodes map it (they idle at their prompt; an idle kernel wakes on its 1 kHz tick). \
         Median per page.\n"
    );
    if plots.iter().any(|x| x == "reclaim-inv.png") {
        let _ = writeln!(
            s,
            "![invalidation](reclaim-inv.png)\n\n(groups: 2, 1, 0 sharers; bars: modes)\n"
        );
    }
    table(
        &mut s,
        r,
        GROUP_INV,
        "bench inv",
        None,
        &["2 sharers", "1 sharer", "0 sharers"],
    );
    let _ = writeln!(
        s,
        "\nSequential read (`--bs=128k`, 1 job, libaio) by node 2 of a {} file, larger than a \
         node's pool (shared region {} MiB, pool {:.1} MiB per node with 2 nodes), so reading it \
         reclaims pages all along.\n",
        size_human(p.big_file),
        p.big_shm_mb,
        super::runner::pool_mib(p.big_shm_mb, 2)
    );
    if plots.iter().any(|x| x == "reclaim-bigfile.png") {
        let _ = writeln!(s, "![larger than pool](reclaim-bigfile.png)\n");
    }
    table(
        &mut s,
        r,
        GROUP_BIG,
        "seq read > pool",
        Some("libaio"),
        &[
            "pass 1: cached nowhere",
            "pass 2: same node again",
            "after node 1 read it",
        ],
    );

    // Directory.
    let _ = writeln!(s, "\n## Directory microbenchmarks\n");
    let (host, host_s) = value_of(
        figs,
        &super::model::figure_id(GROUP_HOST, "host", "ping-pong", None, "median"),
    );
    let _ = writeln!(
        s,
        "Host ping-pong (two host threads bouncing a cache line, `onecopy-pingpong {}` x{}, median of medians): **{host_s}**.\n",
        p.pingpong_rounds, p.pingpong_repeats
    );
    let _ = writeln!(
        s,
        "| benchmark | scenario | mode | value | unit | ratio vs private | vs host ping-pong | note |\n| --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    let rows: [(&str, &str); 6] = [
        ("bench ring", "empty round trip"),
        ("bench read", "CM-R"),
        ("bench read", "CH-R"),
        ("bench read", "local hit"),
        ("bench read", "CM"),
        ("bench dir", "batched (32 per request)"),
    ];
    for (b, sc) in rows {
        for mode in &r.opts.modes {
            let f = find(figs, &super::model::figure_id(GROUP_DIR, mode, b, None, sc));
            let vs_host = match (f.and_then(Figure::value), host, b) {
                (Some(v), Some(h), "bench ring") if h > 0.0 => fmt_ratio(v / h),
                _ => String::new(),
            };
            let _ = writeln!(
                s,
                "| {b} | {sc} | {mode} | {} | {} | {} | {vs_host} | {} |",
                cell(f),
                f.map(|f| f.unit.as_str()).unwrap_or(""),
                ratio_cell(figs, f),
                note_cell(f)
            );
        }
    }
    let _ = writeln!(
        s,
        "\n`bench ring`: {} empty requests through the rings, x{} (median of the medians). \
         `bench read` CM-R is the one-page lookup (one directory round trip, then a mapping); \
         `bench dir` maps and drops every page of a file another node owns in batches of 32, {} rounds. \
         `bench ring` runs the same code in every mode, so its \"ratio vs private\" shows the \
         run-to-run noise of this machine.",
        p.ring_rounds, p.ring_repeats, p.dir_rounds
    );

    // Timing, notes, problems.
    let _ = writeln!(s, "\n## Time\n\n| phase | seconds |\n| --- | --- |");
    for (n, t) in &r.phases {
        let _ = writeln!(s, "| {n} | {t:.1} |");
    }
    let _ = writeln!(s, "| total | {:.1} |", r.elapsed());
    if !r.notes.is_empty() {
        let _ = writeln!(s, "\n## Notes\n");
        for n in &r.notes {
            let _ = writeln!(s, "- {}", md_escape(n));
        }
    }
    let na: Vec<&Figure> = figs
        .iter()
        .filter(|f| matches!(f.status, Status::NotApplicable(_)))
        .collect();
    if !na.is_empty() {
        let _ = writeln!(s, "\n## n/a by design\n");
        let mut reasons: Vec<(&str, &str)> = na
            .iter()
            .map(|f| (f.mode.as_str(), super::model::na_reason(&f.group, &f.mode)))
            .collect();
        reasons.sort();
        reasons.dedup();
        for (m, why) in reasons {
            let _ = writeln!(s, "- {m}: {why}.");
        }
        let _ = writeln!(s, "\nThe nodes' answers (full commands in results.json):\n");
        for f in na {
            let answer = node_answer(&f.status.note().unwrap_or_default());
            let _ = writeln!(s, "- `{}`: {}", f.id, md_escape(&answer));
        }
    }
    if !problems.is_empty() {
        let _ = writeln!(s, "\n## Missing or failed figures\n");
        for p in problems {
            let _ = writeln!(s, "- {}", md_escape(p));
        }
        let _ = writeln!(
            s,
            "\nSerial logs of the clusters with failures are in `logs/`; every command and its \
             output in `transcripts/`."
        );
    }
    let _ = writeln!(
        s,
        "\nEverything (every figure with its parameters, context and raw RESULT json) is in \
         `results.json`; every command sent to the nodes with its output in `transcripts/`."
    );
    s
}

fn table(s: &mut String, r: &Runner, group: &str, bench: &str, engine: Option<&str>, scs: &[&str]) {
    let figs = &r.figures;
    let unit = figs
        .iter()
        .find(|f| f.group == group)
        .map(|f| f.unit.clone())
        .unwrap_or_default();
    let _ = writeln!(
        s,
        "| scenario | mode | value ({unit}) | ratio vs private | note |\n| --- | --- | --- | --- | --- |"
    );
    for sc in scs {
        for mode in &r.opts.modes {
            let f = find(
                figs,
                &super::model::figure_id(group, mode, bench, engine, sc),
            );
            let _ = writeln!(
                s,
                "| {sc} | {mode} | {} | {} | {} |",
                cell(f),
                ratio_cell(figs, f),
                note_cell(f)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::model::figure_id;
    use super::*;

    fn fig(mode: &str, w: &str, e: &str, sc: &str, v: Status, lower: bool) -> Figure {
        let mut f = Figure::new(GROUP_FIO, mode, w, Some(e), sc, "m", "u", lower);
        f.status = v;
        f
    }

    #[test]
    fn ratios() {
        let figs = vec![
            fig(
                "strong",
                "read-lat",
                "libaio",
                "CM-R",
                Status::Ok(10.0),
                true,
            ),
            fig(
                "private",
                "read-lat",
                "libaio",
                "CM-R",
                Status::Ok(30.0),
                true,
            ),
            fig(
                "strong",
                "read-bw",
                "libaio",
                "CH-R",
                Status::Ok(400.0),
                false,
            ),
            fig(
                "private",
                "read-bw",
                "libaio",
                "CH-R",
                Status::Ok(100.0),
                false,
            ),
            fig("strong", "write-lat", "mmap", "CH-R", Status::Ok(5.0), true),
            fig(
                "private",
                "write-lat",
                "mmap",
                "CH-R",
                Status::NotApplicable("not supported".into()),
                true,
            ),
        ];
        assert_eq!(ratio_vs_private(&figs, &figs[0]), Some(3.0));
        assert_eq!(ratio_vs_private(&figs, &figs[1]), None);
        assert_eq!(ratio_vs_private(&figs, &figs[2]), Some(4.0));
        assert_eq!(ratio_vs_private(&figs, &figs[4]), None);
        assert_eq!(better_ratio(0.0, 1.0, true), None);
        let h = headlines(&figs, &["strong".into(), "private".into()]);
        assert!(h.iter().all(|h| h.mode == "strong"));
        assert_eq!(h[0].ratio, Some(3.0));
        assert_eq!(h[2].ratio, Some(4.0));
        let mmap = h.iter().find(|h| h.key == "mmap-write-chr").unwrap();
        assert_eq!(mmap.ratio, None);
        assert!(
            mmap.detail.contains("n/a (not supported in this mode)"),
            "{}",
            mmap.detail
        );
        assert!(h
            .iter()
            .any(|h| h.key == "invalidation" && h.ratio.is_none()));
        assert_eq!(
            figure_id(GROUP_FIO, "strong", "read-lat", Some("libaio"), "CM-R"),
            figs[0].id
        );
    }

    #[test]
    fn answers() {
        assert_eq!(
            node_answer("n2: fio --x: error: fio: ioengine=mmap not supported in this mode"),
            "error: fio: ioengine=mmap not supported in this mode"
        );
        assert_eq!(node_answer("boot failed"), "boot failed");
    }

    #[test]
    fn dpc_refs_are_labelled() {
        for (k, d, v) in DPC_REFS {
            assert!(d.contains("DPC"), "{k}");
            assert!(*v > 1.0);
        }
    }
}
