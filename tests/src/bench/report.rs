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
use super::opts::{size_human, BASELINES};
use super::parse;
use super::runner::{Runner, RPC_SCENARIO};
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
    ratio_vs(figs, f, "private")
}

/// metric / same metric in mode `base` (same run), oriented so that > 1
/// is better; None for the baseline itself, the host figure, or a value
/// missing on either side.
pub fn ratio_vs(figs: &[Figure], f: &Figure, base: &str) -> Option<f64> {
    if f.mode == base || f.group == GROUP_HOST {
        return None;
    }
    let b = find(figs, &f.id_in_mode(base))?.value()?;
    better_ratio(f.value()?, b, f.lower_is_better)
}

/// The baselines of a run that ratios are given against (private, net;
/// private alone when the run has neither, so the tables keep their
/// "ratio vs private" column, n/a).
pub fn ratio_bases(modes: &[String]) -> Vec<&'static str> {
    let b: Vec<&'static str> = BASELINES
        .iter()
        .copied()
        .filter(|b| modes.iter().any(|m| m == b))
        .collect();
    if b.is_empty() {
        vec!["private"]
    } else {
        b
    }
}

/// How much better `v` is than `base` (> 1: better).
pub fn better_ratio(v: f64, base: f64, lower_is_better: bool) -> Option<f64> {
    if !(v > 0.0 && base > 0.0) {
        return None;
    }
    let r = if lower_is_better { base / v } else { v / base };
    r.is_finite().then_some(r)
}

/// The rows of the headline table: (label, DPC reference key if DPC
/// published a ratio for that comparison). "the baseline" is private or
/// net (a column each); rows without a baseline compare within the mode.
pub const HEADLINE_ROWS: &[(&str, Option<&str>)] = &[
    (ROW_CMR_LAT, Some("cmr-latency")),
    (ROW_CM_CMR, None),
    (ROW_BW_CHR, Some("chr-bandwidth")),
    (ROW_BW_CMR, None),
    (ROW_IOPS_CHR, Some("chr-iops")),
    (ROW_IOPS_CMR, None),
    (ROW_MMAP, Some("mmap-write-chr")),
    (ROW_MMAP_LIBAIO, None),
    (ROW_INV_BASE, Some("invalidation")),
    (ROW_INV1, None),
    (ROW_INV2, None),
    (ROW_RPC, None),
];

const ROW_CMR_LAT: &str = "CM-R read latency (libaio mean, 4k qd1): baseline CM-R / this CM-R";
const ROW_CM_CMR: &str = "same, CM / CM-R within the mode";
const ROW_BW_CHR: &str =
    "CH-R read bandwidth: this / baseline CH-R (the baseline's own local copy)";
const ROW_BW_CMR: &str =
    "CH-R read bandwidth: this / baseline CM-R (the baseline fetching from the file server)";
const ROW_IOPS_CHR: &str = "CH-R read IOPS: this / baseline CH-R";
const ROW_IOPS_CMR: &str = "CH-R read IOPS: this / baseline CM-R";
const ROW_MMAP: &str = "mmap write CH-R latency: baseline mmap / this";
const ROW_MMAP_LIBAIO: &str =
    "mmap write CH-R latency: baseline libaio CH-R / this (the baselines have no mmap)";
const ROW_INV_BASE: &str = "synchronous invalidation, this with 1 sharer / the baseline's (dropping its own copy) (cost factor; idle sharer, 1 kHz tick)";
const ROW_INV1: &str = "same, 1 sharer / 0 sharers within the mode";
const ROW_INV2: &str = "same, 2 sharers / 0 sharers within the mode";
const ROW_RPC: &str = "empty file-server request round trip (`bench rpc` median): baseline / this";

/// One row of the headline table.
#[derive(Debug, Clone, PartialEq)]
pub struct Headline {
    /// Key into [`DPC_REFS`] (`rpc`: no DPC counterpart).
    pub key: &'static str,
    /// Row of [`HEADLINE_ROWS`].
    pub row: &'static str,
    /// Mode measured.
    pub mode: String,
    /// Baseline mode compared with (`private`, `net`), empty for a
    /// comparison within the mode.
    pub baseline: String,
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

/// One comparison: `ours` vs `base` (both with their text).
struct Cmp<'a> {
    key: &'static str,
    row: &'static str,
    mode: &'a str,
    baseline: &'a str,
    what: String,
}

impl Cmp<'_> {
    fn better(
        self,
        ours: (Option<f64>, String),
        base: (Option<f64>, String),
        lower_is_better: bool,
    ) -> Headline {
        let ratio = match (ours.0, base.0) {
            (Some(a), Some(b)) => better_ratio(a, b, lower_is_better),
            _ => None,
        };
        self.headline(ratio, ours.1, base.1)
    }

    /// A cost factor: ours / base (> 1: ours costs more).
    fn factor(self, ours: (Option<f64>, String), base: (Option<f64>, String)) -> Headline {
        let ratio = match (ours.0, base.0) {
            (Some(a), Some(b)) if a > 0.0 && b > 0.0 => Some(a / b),
            _ => None,
        };
        self.headline(ratio, ours.1, base.1)
    }

    fn headline(self, ratio: Option<f64>, ours: String, base: String) -> Headline {
        Headline {
            key: self.key,
            row: self.row,
            mode: self.mode.into(),
            baseline: self.baseline.into(),
            what: self.what,
            ratio,
            detail: format!("{ours} vs {base}"),
        }
    }
}

/// The headline comparisons with DPC's published ratios: every
/// single-copy mode of the run against every baseline of the run (private:
/// independent caches through the rings, virtiofs-like; net: the same over
/// TCP/IP, NFS-like), and net against private.
pub fn headlines(figs: &[Figure], modes: &[String]) -> Vec<Headline> {
    let bases: Vec<&str> = BASELINES
        .iter()
        .copied()
        .filter(|b| modes.iter().any(|m| m == b))
        .collect();
    let mut out = Vec::new();
    for m in modes.iter().map(String::as_str) {
        let single = !BASELINES.contains(&m);
        // A single-copy mode against every baseline; a baseline against
        // the baselines before it (net against private).
        let vs: Vec<&str> = if single {
            bases.clone()
        } else {
            bases.iter().copied().take_while(|b| *b != m).collect()
        };
        if !single && vs.is_empty() {
            continue;
        }
        let v = |mode: &str, w: &str, e: &str, sc: &str| fio_value(figs, mode, w, e, sc);
        let cmp = |key: &'static str, row: &'static str, b: &'static str, what: String| Cmp {
            key,
            row,
            mode: m,
            baseline: b,
            what,
        };
        for &b in &vs {
            out.push(
                cmp(
                    "cmr-latency",
                    ROW_CMR_LAT,
                    b,
                    format!("read-lat libaio CM-R mean latency: {b} / this"),
                )
                .better(
                    v(m, "read-lat", "libaio", "CM-R"),
                    v(b, "read-lat", "libaio", "CM-R"),
                    true,
                ),
            );
        }
        if single {
            out.push(
                cmp(
                    "cmr-latency",
                    ROW_CM_CMR,
                    "",
                    "read-lat libaio mean latency in this mode: CM / CM-R".into(),
                )
                .better(
                    v(m, "read-lat", "libaio", "CM-R"),
                    v(m, "read-lat", "libaio", "CM"),
                    true,
                ),
            );
        }
        for (key, w, row_chr, row_cmr) in [
            ("chr-bandwidth", "read-bw", ROW_BW_CHR, ROW_BW_CMR),
            ("chr-iops", "read-iops", ROW_IOPS_CHR, ROW_IOPS_CMR),
        ] {
            for &b in &vs {
                let how = if b == "net" {
                    "over TCP/IP"
                } else {
                    "through the rings"
                };
                out.push(
                    cmp(
                        key,
                        row_chr,
                        b,
                        format!("{w} libaio CH-R: this / {b} CH-R ({b}: its own local copy)"),
                    )
                    .better(
                        v(m, w, "libaio", "CH-R"),
                        v(b, w, "libaio", "CH-R"),
                        false,
                    ),
                );
                out.push(
                    cmp(
                        key,
                        row_cmr,
                        b,
                        format!(
                            "{w} libaio CH-R: this / {b} CM-R ({b} reading from the file server {how})"
                        ),
                    )
                    .better(
                        v(m, w, "libaio", "CH-R"),
                        v(b, w, "libaio", "CM-R"),
                        false,
                    ),
                );
            }
        }
        if single {
            for &b in &vs {
                out.push(
                    cmp(
                        "mmap-write-chr",
                        ROW_MMAP,
                        b,
                        format!("write-lat mmap CH-R mean latency: {b} mmap / this"),
                    )
                    .better(
                        v(m, "write-lat", "mmap", "CH-R"),
                        v(b, "write-lat", "mmap", "CH-R"),
                        true,
                    ),
                );
                out.push(
                    cmp(
                        "mmap-write-chr",
                        ROW_MMAP_LIBAIO,
                        b,
                        format!(
                            "write-lat mmap CH-R: {b} libaio CH-R / this ({b} has no mmap; different engine)"
                        ),
                    )
                    .better(
                        v(m, "write-lat", "mmap", "CH-R"),
                        v(b, "write-lat", "libaio", "CH-R"),
                        true,
                    ),
                );
            }
            let inv = |mode: &str, sc: &str| {
                value_of(
                    figs,
                    &super::model::figure_id(GROUP_INV, mode, "bench inv", None, sc),
                )
            };
            for &b in &vs {
                out.push(
                    cmp(
                        "invalidation",
                        ROW_INV_BASE,
                        b,
                        format!(
                            "bench inv median: this with 1 sharer / {b} (drops a page of its own copy) (cost factor, like DPC's 99.7/11)"
                        ),
                    )
                    .factor(inv(m, "1 sharer"), inv(b, "0 sharers")),
                );
            }
            for (sc, row) in [("1 sharer", ROW_INV1), ("2 sharers", ROW_INV2)] {
                out.push(
                    cmp(
                        "invalidation",
                        row,
                        "",
                        format!("bench inv median: {sc} / 0 sharers within the mode (cost factor)"),
                    )
                    .factor(inv(m, sc), inv(m, "0 sharers")),
                );
            }
        }
        let rpc = |mode: &str| {
            value_of(
                figs,
                &super::model::figure_id(GROUP_DIR, mode, "bench rpc", None, RPC_SCENARIO),
            )
        };
        for &b in &vs {
            out.push(
                cmp(
                    "rpc",
                    ROW_RPC,
                    b,
                    format!(
                        "bench rpc median (empty request over {} / over {}): {b} / this",
                        parse::rpc_transport(m),
                        parse::rpc_transport(b)
                    ),
                )
                .better(rpc(m), rpc(b), true),
            );
        }
    }
    out
}

/// The index into [`DPC_REFS`] of the ratio DPC published for a headline
/// comparison: only a single-copy mode's row that has a DPC counterpart
/// (DPC gives no ratio between two baselines, nor within a mode).
fn headline_dpc(h: &Headline) -> Option<usize> {
    if BASELINES.contains(&h.mode.as_str()) {
        return None;
    }
    let key = HEADLINE_ROWS.iter().find(|(r, _)| *r == h.row)?.1?;
    DPC_REFS.iter().position(|(k, _, _)| *k == key)
}

/// The headline table's columns: `(mode, baseline)` pairs in order.
fn headline_columns(heads: &[Headline]) -> Vec<(String, String)> {
    let mut cols: Vec<(String, String)> = Vec::new();
    for h in heads.iter().filter(|h| !h.baseline.is_empty()) {
        let c = (h.mode.clone(), h.baseline.clone());
        if !cols.contains(&c) {
            cols.push(c);
        }
    }
    cols
}

/// The compact headline table (markdown): one row per comparison, one
/// column per (mode, baseline), DPC's published ratio (against Virtiofs)
/// last. A comparison within a mode shows in each of that mode's columns.
pub fn headline_table(heads: &[Headline]) -> String {
    let cols = headline_columns(heads);
    let mut s = String::new();
    let _ = write!(s, "| comparison |");
    for (m, b) in &cols {
        let _ = write!(s, " {m} vs {b} |");
    }
    let _ = writeln!(s, " DPC published (vs Virtiofs) |");
    let _ = writeln!(s, "|{}", " --- |".repeat(cols.len() + 2));
    for (row, dpc) in HEADLINE_ROWS {
        if !heads.iter().any(|h| h.row == *row) {
            continue;
        }
        let _ = write!(s, "| {} |", md_escape(row));
        for (m, b) in &cols {
            let cell = heads
                .iter()
                .find(|h| {
                    h.row == *row && &h.mode == m && (&h.baseline == b || h.baseline.is_empty())
                })
                .map(|h| h.ratio.map(fmt_ratio).unwrap_or_else(|| "n/a".into()))
                .unwrap_or_else(|| "-".into());
            let _ = write!(s, " {cell} |");
        }
        let d = dpc
            .map(|k| fmt_ratio(dpc_ref(k).1))
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(s, " {d} |");
    }
    s
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
            j["ratio_vs_net"] = json!(ratio_vs(&r.figures, f, "net"));
            j
        })
        .collect();
    let heads: Vec<Value> = headlines(&r.figures, &r.opts.modes)
        .into_iter()
        .map(|h| {
            let (d, dr) = dpc_ref(h.key);
            json!({"key": h.key, "row": h.row, "mode": h.mode, "baseline": h.baseline,
                   "what": h.what, "ratio": h.ratio, "detail": h.detail,
                   "dpc_published": d, "dpc_ratio": dr.is_finite().then_some(dr)})
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

fn ratio_cell(figs: &[Figure], f: Option<&Figure>, base: &str) -> String {
    match f {
        Some(f) if f.mode == base && f.value().is_some() => "1 (baseline)".into(),
        Some(f) => ratio_vs(figs, f, base)
            .map(fmt_ratio)
            .unwrap_or_else(|| "n/a".into()),
        None => "n/a".into(),
    }
}

/// ` ratio vs private | ratio vs net |` for the baselines of the run.
fn ratio_heads(bases: &[&str]) -> String {
    bases.iter().map(|b| format!(" ratio vs {b} |")).collect()
}

/// The ratio cells of a figure, one per baseline (` 2.1x | 0.9x |`).
fn ratio_cells(figs: &[Figure], f: Option<&Figure>, bases: &[&str]) -> String {
    bases
        .iter()
        .map(|b| format!(" {} |", ratio_cell(figs, f, b)))
        .collect()
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
        let _ = writeln!(s, "Complete: every expected figure is a number (n/a only where a mode has no such operation: private and net have no mmap and no page directory; relaxed cannot store into a peer's frame through a mapping).\n");
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
    let heads = headlines(figs, &r.opts.modes);
    let bases = ratio_bases(&r.opts.modes);
    let _ = writeln!(s, "\n## Headline ratios next to DPC's published ones\n");
    let _ = writeln!(
        s,
        "Ratios are oriented so that > 1 means this mode is better (faster, more), except the \
         invalidation rows (a cost factor, as DPC's 99.7 us / 11 us). Two baselines, both with \
         independent per-node caches (no single copy, no mmap, no page directory; their \
         invalidation drops a page of the node's own copy, as Linux does): `private` fills \
         them from the directory's file server through the shared-memory rings (virtiofs-like: \
         virtqueues), `net` from the same file server over TCP/IP (smoltcp on virtio-net, \
         NFS-like). DPC publishes its ratios against Virtiofs (its Fig. 6-9 also show NFS). \
         Modes in this run: {}; a column is shown for every (mode, baseline) pair measured; \
         within-mode rows repeat in each of the mode's columns.\n",
        r.opts.modes.join(", ")
    );
    if heads.is_empty() {
        let _ = writeln!(
            s,
            "(No comparison: the run has no single-copy mode or no baseline.)\n"
        );
    } else {
        let _ = writeln!(s, "{}", headline_table(&heads));
    }
    let _ = writeln!(s, "Every comparison with its two numbers:\n");
    let _ = writeln!(
        s,
        "| mode | baseline | comparison | ours | measured (this vs baseline) | DPC published |\n| --- | --- | --- | --- | --- | --- |"
    );
    for h in &heads {
        let dpc = match headline_dpc(h) {
            Some(i) => format!("{} [{}]", fmt_ratio(DPC_REFS[i].2), i + 1),
            None => "-".into(),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | **{}** | {} | {dpc} |",
            h.mode,
            if h.baseline.is_empty() {
                "(within the mode)"
            } else {
                h.baseline.as_str()
            },
            md_escape(&h.what),
            h.ratio.map(fmt_ratio).unwrap_or_else(|| "n/a".into()),
            md_escape(&short(&h.detail, 160)),
        );
    }
    let _ = writeln!(s, "\nDPC's published figures (not measured here):\n");
    for (i, (_, d, _)) in DPC_REFS.iter().enumerate() {
        let _ = writeln!(s, "{}. {d}", i + 1);
    }
    let _ = writeln!(
        s,
        "\nReading them: a baseline's CH-R is a hit on its own local copy (a second copy of the \
         page in the cluster), while strong/relaxed CH-R copies from the owner's frame, so \"CH-R \
         vs baseline CH-R\" is the price of keeping one copy; \"vs baseline CM-R\" compares with \
         the baseline fetching the page from the file server (private through the rings, net \
         over TCP/IP), which is what the single copy saves. \"net vs private\" is what the \
         network transport costs against the rings with the same caches. DPC's Virtiofs runs on \
         Linux with a real SSD array; here the \"disk\" is QEMU's host-page-cached image \
         (storage profile `{}`), the TCP link a unix socket between two QEMUs, and everything \
         runs under {}.",
        r.opts.storage,
        first_accel(r)
    );

    // fio tables.
    let _ = writeln!(s, "\n## fio: latency, bandwidth, IOPS (DPC Fig. 6-9)\n");
    let _ = writeln!(
        s,
        "\"ratio vs {0}\" = the same metric in {0} mode, measured in this run \
         (latency: {0} / this; bandwidth, IOPS: this / {0}; > 1 = better); one column per \
         baseline of the run ({1}).\n",
        bases[0],
        bases.join(", ")
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
                "| scenario | mode | {} ({}) |{} runs: min - max |{} busy instances | note |",
                w.kind.metric(),
                w.kind.unit(),
                if lat { " p50 / p99 (us) |" } else { "" },
                ratio_heads(&bases)
            );
            let _ = writeln!(
                s,
                "| --- | --- | --- |{} --- |{} --- | --- |",
                if lat { " --- |" } else { "" },
                " --- |".repeat(bases.len())
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
                        "| {sc} | {mode} | {} |{pct} {} |{} {} | {} |",
                        cell(f),
                        range_cell(f),
                        ratio_cells(figs, f, &bases),
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
         Median per page. In private and net mode (independent caches) the same command drops \
         each page of node 1's own cached copy, with no protocol: the baseline's invalidation \
         (DPC's 11 us Virtiofs figure), the same whatever the other nodes cache; \"ratio vs \
         private / net\" is then the single copy's invalidation against the baseline's.\n"
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
    if plots.iter().any(|x| x == super::plot::ROUND_TRIPS_PNG) {
        let _ = writeln!(
            s,
            "![round trips]({})\n\n(groups: bench ring, bench rpc, bench read CM-R, in us; bars: {} in that order)\n",
            super::plot::ROUND_TRIPS_PNG,
            r.opts.modes.join(", ")
        );
    }
    let _ = writeln!(
        s,
        "| benchmark | scenario | mode | value | unit |{} vs host ping-pong | note |\n| --- | --- | --- | --- | --- |{} --- | --- |",
        ratio_heads(&bases),
        " --- |".repeat(bases.len())
    );
    let mut rows: Vec<(&str, String)> = vec![
        ("bench ring", "empty round trip".to_string()),
        ("bench rpc", RPC_SCENARIO.to_string()),
        ("bench read", "CM-R".to_string()),
        ("bench read", "CH-R".to_string()),
        ("bench read", "local hit".to_string()),
        ("bench read", "CM".to_string()),
    ];
    rows.extend(
        super::model::DIR_BATCHES
            .iter()
            .map(|&b| ("bench dir", super::model::dir_batch_scenario(b))),
    );
    for (b, sc) in rows {
        let sc = sc.as_str();
        for mode in &r.opts.modes {
            let f = find(figs, &super::model::figure_id(GROUP_DIR, mode, b, None, sc));
            let vs_host = match (f.and_then(Figure::value), host, b) {
                (Some(v), Some(h), "bench ring" | "bench rpc") if h > 0.0 => fmt_ratio(v / h),
                _ => String::new(),
            };
            // bench rpc: which transport it went over.
            let sc_text = match f
                .and_then(|f| f.params.get("transport"))
                .and_then(Value::as_str)
            {
                Some(t) if b == "bench rpc" && !t.is_empty() => format!("{sc} over {t}"),
                _ => sc.to_string(),
            };
            let _ = writeln!(
                s,
                "| {b} | {sc_text} | {mode} | {} | {} |{} {vs_host} | {} |",
                cell(f),
                f.map(|f| f.unit.as_str()).unwrap_or(""),
                ratio_cells(figs, f, &bases),
                note_cell(f)
            );
        }
    }
    let _ = writeln!(
        s,
        "\n`bench ring`: {} empty requests through the control rings, x{} (median of the medians). \
         `bench rpc`: {} empty requests to the file server over the mode's file transport, x{} \
         (median of the medians): the shared-memory rings in strong, relaxed and private, TCP/IP \
         (smoltcp on virtio-net, a unix-socket link between the two QEMUs) in net. \
         `bench read` CM-R is the one-page lookup (one directory round trip, then a mapping; in \
         private and net a fetch of the page from the file server); \
         `bench dir` maps and drops every page of a file another node owns, {} rounds, with the \
         page requests published in batches of 1 to 64 (the data path uses 32). \
         `bench ring` runs the same code in every mode, so its \"ratio vs private\" shows the \
         run-to-run noise of this machine.",
        p.ring_rounds, p.ring_repeats, p.rpc_rounds, p.rpc_repeats, p.dir_rounds
    );
    let _ = writeln!(s, "\n{}", rpc_sentence(figs, &r.opts.modes));

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

/// One sentence comparing the empty-request round trip over the rings
/// and over TCP in this run.
pub fn rpc_sentence(figs: &[Figure], modes: &[String]) -> String {
    let rpc = |m: &str| {
        find(
            figs,
            &super::model::figure_id(GROUP_DIR, m, "bench rpc", None, RPC_SCENARIO),
        )
        .and_then(Figure::value)
    };
    let ring: Vec<(String, f64)> = modes
        .iter()
        .filter(|m| *m != "net")
        .filter_map(|m| Some((m.clone(), rpc(m)?)))
        .collect();
    let ring_text: Vec<String> = ring
        .iter()
        .map(|(m, v)| format!("{m} {} ns", fmt_value(*v)))
        .collect();
    match (
        parse::median(&ring.iter().map(|x| x.1).collect::<Vec<_>>()),
        rpc("net"),
    ) {
        (Some(r), Some(t)) => format!(
            "Empty file-server request, same run: over the rings {} (median {} ns), over TCP \
             (net) {} ns: TCP / rings = **{}**.",
            ring_text.join(", "),
            fmt_value(r),
            fmt_value(t),
            fmt_ratio(t / r)
        ),
        (Some(r), None) => format!(
            "Empty file-server request over the rings: {} (median {} ns); no TCP figure in this \
             run (net mode not run or failed).",
            ring_text.join(", "),
            fmt_value(r)
        ),
        (None, Some(t)) => format!(
            "Empty file-server request over TCP (net): {} ns; no ring figure in this run.",
            fmt_value(t)
        ),
        _ => "No `bench rpc` figure in this run.".into(),
    }
}

fn table(s: &mut String, r: &Runner, group: &str, bench: &str, engine: Option<&str>, scs: &[&str]) {
    let figs = &r.figures;
    let bases = ratio_bases(&r.opts.modes);
    let unit = figs
        .iter()
        .find(|f| f.group == group)
        .map(|f| f.unit.clone())
        .unwrap_or_default();
    let _ = writeln!(
        s,
        "| scenario | mode | value ({unit}) |{} note |\n| --- | --- | --- |{} --- |",
        ratio_heads(&bases),
        " --- |".repeat(bases.len())
    );
    for sc in scs {
        for mode in &r.opts.modes {
            let f = find(
                figs,
                &super::model::figure_id(group, mode, bench, engine, sc),
            );
            let _ = writeln!(
                s,
                "| {sc} | {mode} | {} |{} {} |",
                cell(f),
                ratio_cells(figs, f, &bases),
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
    fn net_baseline() {
        let modes: Vec<String> = ["strong", "relaxed", "private", "net"]
            .iter()
            .map(|m| m.to_string())
            .collect();
        let mut figs = Vec::new();
        // read-lat CM-R (us), read-bw CH-R / CM-R (MiB/s), read-iops.
        for (m, lat, bw_chr, bw_cmr, iops_chr, iops_cmr) in [
            ("strong", 10.0, 400.0, 300.0, 4000.0, 3000.0),
            ("relaxed", 20.0, 200.0, 150.0, 2000.0, 1500.0),
            ("private", 30.0, 100.0, 8.0, 1000.0, 50.0),
            ("net", 100.0, 100.0, 2.0, 1000.0, 10.0),
        ] {
            figs.push(fig(m, "read-lat", "libaio", "CM-R", Status::Ok(lat), true));
            figs.push(fig(
                m,
                "read-bw",
                "libaio",
                "CH-R",
                Status::Ok(bw_chr),
                false,
            ));
            figs.push(fig(
                m,
                "read-bw",
                "libaio",
                "CM-R",
                Status::Ok(bw_cmr),
                false,
            ));
            figs.push(fig(
                m,
                "read-iops",
                "libaio",
                "CH-R",
                Status::Ok(iops_chr),
                false,
            ));
            figs.push(fig(
                m,
                "read-iops",
                "libaio",
                "CM-R",
                Status::Ok(iops_cmr),
                false,
            ));
            let mut r = Figure::new(
                GROUP_DIR,
                m,
                "bench rpc",
                None,
                RPC_SCENARIO,
                "m",
                "ns",
                true,
            );
            r.status = Status::Ok(if m == "net" { 500_000.0 } else { 2000.0 });
            figs.push(r);
        }
        for m in ["private", "net"] {
            figs.push(fig(
                m,
                "write-lat",
                "mmap",
                "CH-R",
                Status::NotApplicable("fio: ioengine=mmap not supported in this mode".into()),
                true,
            ));
        }
        // Every figure of net has its ratio vs private, and strong vs net.
        let net_lat = &figs[18];
        assert_eq!(
            (net_lat.mode.as_str(), net_lat.workload.as_str()),
            ("net", "read-lat")
        );
        assert_eq!(ratio_vs_private(&figs, net_lat), Some(0.3));
        assert_eq!(ratio_vs(&figs, net_lat, "net"), None);
        assert_eq!(ratio_vs(&figs, &figs[0], "net"), Some(10.0));
        assert_eq!(ratio_vs(&figs, &figs[2], "net"), Some(150.0));
        assert_eq!(ratio_bases(&modes), vec!["private", "net"]);
        assert_eq!(ratio_bases(&["strong".to_string()]), vec!["private"]);
        assert_eq!(
            ratio_cell(&figs, Some(net_lat), "net"),
            "1 (baseline)".to_string()
        );
        assert_eq!(
            ratio_cells(&figs, Some(net_lat), &["private", "net"]),
            " 0.30x | 1 (baseline) |"
        );

        for (m, sc, v) in [
            ("strong", "1 sharer", 1000.0),
            ("strong", "0 sharers", 10.0),
            ("private", "0 sharers", 4.0),
            ("net", "0 sharers", 2.0),
        ] {
            let mut f = Figure::new(GROUP_INV, m, "bench inv", None, sc, "m", "us", true);
            f.status = Status::Ok(v);
            figs.push(f);
        }
        let h = headlines(&figs, &modes);
        let get = |mode: &str, base: &str, row: &str| {
            h.iter()
                .find(|x| x.mode == mode && x.baseline == base && x.row == row)
                .unwrap_or_else(|| panic!("{mode} vs {base}: {row}"))
        };
        assert_eq!(get("strong", "private", ROW_CMR_LAT).ratio, Some(3.0));
        assert_eq!(get("strong", "net", ROW_CMR_LAT).ratio, Some(10.0));
        assert_eq!(get("strong", "net", ROW_BW_CHR).ratio, Some(4.0));
        assert_eq!(get("strong", "net", ROW_BW_CMR).ratio, Some(200.0));
        assert_eq!(get("strong", "net", ROW_IOPS_CMR).ratio, Some(400.0));
        assert_eq!(get("relaxed", "net", ROW_IOPS_CHR).ratio, Some(2.0));
        assert_eq!(get("strong", "net", ROW_RPC).ratio, Some(250.0));
        assert_eq!(get("net", "private", ROW_RPC).ratio, Some(0.004));
        assert_eq!(get("net", "private", ROW_BW_CMR).ratio, Some(12.5));
        assert_eq!(get("strong", "private", ROW_INV_BASE).ratio, Some(250.0));
        assert_eq!(get("strong", "net", ROW_INV_BASE).ratio, Some(500.0));
        assert_eq!(get("strong", "", ROW_INV1).ratio, Some(100.0));
        assert_eq!(get("relaxed", "net", ROW_INV_BASE).ratio, None);
        assert_eq!(headline_dpc(get("strong", "net", ROW_CMR_LAT)), Some(0));
        assert_eq!(headline_dpc(get("strong", "net", ROW_BW_CMR)), None);
        assert_eq!(headline_dpc(get("strong", "", ROW_CM_CMR)), None);
        assert_eq!(
            headline_dpc(get("strong", "private", ROW_INV_BASE)),
            Some(4)
        );
        assert_eq!(headline_dpc(get("net", "private", ROW_CMR_LAT)), None);
        let mmap = get("strong", "net", ROW_MMAP);
        assert_eq!(mmap.ratio, None);
        assert!(mmap.detail.contains("not supported"), "{}", mmap.detail);
        // net is a baseline: no within-mode rows, no invalidation, no mmap,
        // never compared with itself; private is never the compared mode.
        assert!(h
            .iter()
            .all(|x| x.mode != "private" && x.mode != x.baseline));
        assert!(!h
            .iter()
            .any(|x| x.mode == "net" && (x.baseline != "private" || x.key == "invalidation")));
        assert_eq!(
            headline_columns(&h),
            vec![
                ("strong".to_string(), "private".to_string()),
                ("strong".into(), "net".into()),
                ("relaxed".into(), "private".into()),
                ("relaxed".into(), "net".into()),
                ("net".into(), "private".into()),
            ]
        );
        let t = headline_table(&h);
        assert!(t.starts_with(
            "| comparison | strong vs private | strong vs net | relaxed vs private | relaxed vs net | net vs private | DPC published (vs Virtiofs) |"
        ), "{t}");
        let row = t.lines().find(|l| l.contains("CM-R read latency")).unwrap();
        assert_eq!(
            row,
            format!("| {ROW_CMR_LAT} | 3.00x | 10.0x | 1.50x | 5.00x | 0.30x | 2.60x |")
        );
        // A within-mode row shows in both of the mode's columns, "-" for net.
        let row = t
            .lines()
            .find(|l| l.starts_with("| same, CM / CM-R"))
            .unwrap();
        assert_eq!(row.matches("n/a").count(), 4, "{row}");
        assert!(row.ends_with("| - | - |"), "{row}");
        let row = t
            .lines()
            .find(|l| l.contains("this with 1 sharer"))
            .unwrap();
        assert!(
            row.ends_with("| 250x | 500x | n/a | n/a | - | 9.06x |"),
            "{row}"
        );
        let rpc = rpc_sentence(&figs, &modes);
        assert!(rpc.contains("over TCP (net) 500000 ns"), "{rpc}");
        assert!(rpc.contains("**250x**"), "{rpc}");
        assert_eq!(
            rpc_sentence(&[], &modes),
            "No `bench rpc` figure in this run."
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
