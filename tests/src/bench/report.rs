//! results.json and report.md: ratios vs private measured in the same run,
//! and DPC's published ratios next to ours.

use std::fmt::Write as _;
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use super::model::{fmt_ratio, fmt_value, Figure, Status, GROUP_DIR, GROUP_HOST};
use super::opts::BASELINES;
use super::parse;
use super::runner::{Runner, RPC_SCENARIO};
use crate::run_with_timeout;

mod headline;
pub(super) mod versus;

pub use headline::{
    headline_bars, headline_table, headlines, Headline, HEADLINE_PNG, HEADLINE_ROWS,
};
pub(super) use headline::{headline_dpc, value_of};

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
        "doorbell": r.opts.doorbell,
        "dilation": r.opts.dilation,
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
        "complete": problems.is_empty() && r.partial.is_none(),
        "partial": super::runner::Partial::to_json(r.partial.as_ref()),
        "resumed_from": r.resume.as_ref().map(|x| json!({
            "dir": x.dir.display().to_string(),
            "seconds": x.seconds,
            "provenance": x.provenance,
        })),
    })
}

pub fn first_accel(r: &Runner) -> String {
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
mod tests;
