//! results.json and report.md: ratios vs private measured in the same run,
//! and DPC's published ratios next to ours.

use std::fmt::Write as _;
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use super::model::{
    fmt_ratio, fmt_value, Figure, Status, GROUP_DIR, GROUP_FIO, GROUP_HOST, GROUP_INV,
};
use super::opts::BASELINES;
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
pub(super) fn find<'a>(figs: &'a [Figure], id: &str) -> Option<&'a Figure> {
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

pub(super) fn value_of(figs: &[Figure], id: &str) -> (Option<f64>, String) {
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
pub(super) fn headline_dpc(h: &Headline) -> Option<usize> {
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

pub(super) fn first_accel(r: &Runner) -> String {
    r.figures
        .iter()
        .map(|f| f.context.accel.as_str())
        .find(|a| !a.is_empty())
        .unwrap_or("unknown")
        .to_string()
}

pub(super) fn cell(f: Option<&Figure>) -> String {
    match f {
        None => "n/a (not measured)".into(),
        Some(f) => match &f.status {
            Status::Ok(v) if v.is_finite() => fmt_value(*v),
            _ => "n/a".into(),
        },
    }
}

pub(super) fn note_cell(f: Option<&Figure>) -> String {
    match f.and_then(|f| f.status.note()) {
        None => String::new(),
        Some(n) => md_escape(&short(&node_answer(&n), 140)),
    }
}

/// The node's answer in an error (`n2: CMD: error: MSG` -> `error: MSG`).
pub(super) fn node_answer(note: &str) -> String {
    note.rsplit_once(": error: ")
        .map(|(_, m)| format!("error: {m}"))
        .unwrap_or_else(|| note.to_string())
}

pub(super) fn short(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let t: String = s.chars().take(n).collect();
        format!("{t}...")
    }
}

pub(super) fn md_escape(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

pub(super) fn range_cell(f: Option<&Figure>) -> String {
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
pub(super) fn ratio_heads(bases: &[&str]) -> String {
    bases.iter().map(|b| format!(" ratio vs {b} |")).collect()
}

/// The ratio cells of a figure, one per baseline (` 2.1x | 0.9x |`).
pub(super) fn ratio_cells(figs: &[Figure], f: Option<&Figure>, bases: &[&str]) -> String {
    bases
        .iter()
        .map(|b| format!(" {} |", ratio_cell(figs, f, b)))
        .collect()
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

pub(super) fn table(
    s: &mut String,
    r: &Runner,
    group: &str,
    bench: &str,
    engine: Option<&str>,
    scs: &[&str],
) {
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
