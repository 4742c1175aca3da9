//! The headline table: this run's ratios against the baselines, next to
//! DPC's published ones.

use std::fmt::Write as _;

use crate::bench::model::{fmt_ratio, fmt_value, Figure, Status, GROUP_DIR, GROUP_FIO, GROUP_INV};
use crate::bench::opts::BASELINES;
use crate::bench::parse;
use crate::bench::runner::RPC_SCENARIO;

use super::*;

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

pub(super) const ROW_CMR_LAT: &str =
    "CM-R read latency (libaio mean, 4k qd1): baseline CM-R / this CM-R";
pub(super) const ROW_CM_CMR: &str = "same, CM / CM-R within the mode";
pub(super) const ROW_BW_CHR: &str =
    "CH-R read bandwidth: this / baseline CH-R (the baseline's own local copy)";
pub(super) const ROW_BW_CMR: &str =
    "CH-R read bandwidth: this / baseline CM-R (the baseline fetching from the file server)";
pub(super) const ROW_IOPS_CHR: &str = "CH-R read IOPS: this / baseline CH-R";
pub(super) const ROW_IOPS_CMR: &str = "CH-R read IOPS: this / baseline CM-R";
pub(super) const ROW_MMAP: &str = "mmap write CH-R latency: baseline mmap / this";
pub(super) const ROW_MMAP_LIBAIO: &str =
    "mmap write CH-R latency: baseline libaio CH-R / this (the baselines have no mmap)";
pub(super) const ROW_INV_BASE: &str = "synchronous invalidation, this with 1 sharer / the baseline's (dropping its own copy) (cost factor; idle sharer, 1 kHz tick)";
pub(super) const ROW_INV1: &str = "same, 1 sharer / 0 sharers within the mode";
pub(super) const ROW_INV2: &str = "same, 2 sharers / 0 sharers within the mode";
pub(super) const ROW_RPC: &str =
    "empty file-server request round trip (`bench rpc` median): baseline / this";

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
        &crate::bench::model::figure_id(GROUP_FIO, mode, w, Some(e), sc),
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

pub(in crate::bench) fn value_of(figs: &[Figure], id: &str) -> (Option<f64>, String) {
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
        let h = ModeHeadlines {
            figs,
            m,
            vs,
            single,
        };
        h.latency(&mut out);
        h.bandwidth_and_iops(&mut out);
        if single {
            h.mmap_writes(&mut out);
            h.invalidation(&mut out);
        }
        h.rpc(&mut out);
    }
    out
}

/// The headline comparisons of mode `m` against the baselines `vs`
/// (`single`: `m` is a single-copy mode).
struct ModeHeadlines<'a> {
    figs: &'a [Figure],
    m: &'a str,
    vs: Vec<&'a str>,
    single: bool,
}

impl<'a> ModeHeadlines<'a> {
    fn v(&self, mode: &str, w: &str, e: &str, sc: &str) -> (Option<f64>, String) {
        fio_value(self.figs, mode, w, e, sc)
    }

    fn cmp(&self, key: &'static str, row: &'static str, b: &'a str, what: String) -> Cmp<'a> {
        Cmp {
            key,
            row,
            mode: self.m,
            baseline: b,
            what,
        }
    }

    /// CM-R read latency against each baseline, and CM against CM-R
    /// within a single-copy mode.
    fn latency(&self, out: &mut Vec<Headline>) {
        let m = self.m;
        for &b in &self.vs {
            out.push(
                self.cmp(
                    "cmr-latency",
                    ROW_CMR_LAT,
                    b,
                    format!("read-lat libaio CM-R mean latency: {b} / this"),
                )
                .better(
                    self.v(m, "read-lat", "libaio", "CM-R"),
                    self.v(b, "read-lat", "libaio", "CM-R"),
                    true,
                ),
            );
        }
        if self.single {
            out.push(
                self.cmp(
                    "cmr-latency",
                    ROW_CM_CMR,
                    "",
                    "read-lat libaio mean latency in this mode: CM / CM-R".into(),
                )
                .better(
                    self.v(m, "read-lat", "libaio", "CM-R"),
                    self.v(m, "read-lat", "libaio", "CM"),
                    true,
                ),
            );
        }
    }

    /// CH-R bandwidth and IOPS against each baseline's CH-R and CM-R.
    fn bandwidth_and_iops(&self, out: &mut Vec<Headline>) {
        let m = self.m;
        for (key, w, row_chr, row_cmr) in [
            ("chr-bandwidth", "read-bw", ROW_BW_CHR, ROW_BW_CMR),
            ("chr-iops", "read-iops", ROW_IOPS_CHR, ROW_IOPS_CMR),
        ] {
            for &b in &self.vs {
                let how = if b == "net" {
                    "over TCP/IP"
                } else {
                    "through the rings"
                };
                out.push(
                    self.cmp(
                        key,
                        row_chr,
                        b,
                        format!("{w} libaio CH-R: this / {b} CH-R ({b}: its own local copy)"),
                    )
                    .better(
                        self.v(m, w, "libaio", "CH-R"),
                        self.v(b, w, "libaio", "CH-R"),
                        false,
                    ),
                );
                out.push(
                    self.cmp(
                        key,
                        row_cmr,
                        b,
                        format!(
                            "{w} libaio CH-R: this / {b} CM-R ({b} reading from the file server {how})"
                        ),
                    )
                    .better(
                        self.v(m, w, "libaio", "CH-R"),
                        self.v(b, w, "libaio", "CM-R"),
                        false,
                    ),
                );
            }
        }
    }

    /// CH-R mmap write latency against each baseline's mmap and libaio.
    fn mmap_writes(&self, out: &mut Vec<Headline>) {
        let m = self.m;
        for &b in &self.vs {
            out.push(
                self.cmp(
                    "mmap-write-chr",
                    ROW_MMAP,
                    b,
                    format!("write-lat mmap CH-R mean latency: {b} mmap / this"),
                )
                .better(
                    self.v(m, "write-lat", "mmap", "CH-R"),
                    self.v(b, "write-lat", "mmap", "CH-R"),
                    true,
                ),
            );
            out.push(
                self.cmp(
                    "mmap-write-chr",
                    ROW_MMAP_LIBAIO,
                    b,
                    format!(
                        "write-lat mmap CH-R: {b} libaio CH-R / this ({b} has no mmap; different engine)"
                    ),
                )
                .better(
                    self.v(m, "write-lat", "mmap", "CH-R"),
                    self.v(b, "write-lat", "libaio", "CH-R"),
                    true,
                ),
            );
        }
    }

    /// The cost of invalidating one page: against each baseline's own
    /// drop, and by sharers within the mode.
    fn invalidation(&self, out: &mut Vec<Headline>) {
        let m = self.m;
        let inv = |mode: &str, sc: &str| {
            value_of(
                self.figs,
                &crate::bench::model::figure_id(GROUP_INV, mode, "bench inv", None, sc),
            )
        };
        for &b in &self.vs {
            out.push(
                self.cmp(
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
                self.cmp(
                    "invalidation",
                    row,
                    "",
                    format!("bench inv median: {sc} / 0 sharers within the mode (cost factor)"),
                )
                .factor(inv(m, sc), inv(m, "0 sharers")),
            );
        }
    }

    /// An empty request's round trip against each baseline's transport.
    fn rpc(&self, out: &mut Vec<Headline>) {
        let m = self.m;
        let rpc = |mode: &str| {
            value_of(
                self.figs,
                &crate::bench::model::figure_id(GROUP_DIR, mode, "bench rpc", None, RPC_SCENARIO),
            )
        };
        for &b in &self.vs {
            out.push(
                self.cmp(
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
}

/// The index into [`DPC_REFS`] of the ratio DPC published for a headline
/// comparison: only a single-copy mode's row that has a DPC counterpart
/// (DPC gives no ratio between two baselines, nor within a mode).
pub(in crate::bench) fn headline_dpc(h: &Headline) -> Option<usize> {
    if BASELINES.contains(&h.mode.as_str()) {
        return None;
    }
    let key = HEADLINE_ROWS.iter().find(|(r, _)| *r == h.row)?.1?;
    DPC_REFS.iter().position(|(k, _, _)| *k == key)
}

/// The headline table's columns: `(mode, baseline)` pairs in order.
pub(super) fn headline_columns(heads: &[Headline]) -> Vec<(String, String)> {
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

/// File name of the headline ratio chart.
pub const HEADLINE_PNG: &str = "headline-ratios.png";

/// The comparisons DPC published a ratio for, as the headline chart's
/// groups: (headline row, DPC reference key, short label). The mmap row
/// compares with the baseline's libaio latency, since the baselines have
/// no mmap path.
const CHART_ROWS: &[(&str, &str, &str)] = &[
    (ROW_CMR_LAT, "cmr-latency", "CM-R read latency"),
    (ROW_BW_CHR, "chr-bandwidth", "CH-R read bandwidth"),
    (ROW_IOPS_CHR, "chr-iops", "CH-R read IOPS"),
    (
        ROW_MMAP_LIBAIO,
        "mmap-write-chr",
        "mmap write CH-R latency (baseline: libaio)",
    ),
    (
        ROW_INV_BASE,
        "invalidation",
        "invalidation with 1 sharer (cost factor)",
    ),
];

/// The headline chart: per comparison DPC published, our ratio for each
/// single-copy mode against each baseline (a bar each), DPC's published
/// ratio as a marker beside them.
pub fn headline_bars(
    figs: &[Figure],
    modes: &[String],
    run_label: &str,
) -> crate::bench::plot::Bars {
    use crate::bench::plot::{mode_color, Bars, Marker};
    let heads = headlines(figs, modes);
    // Series: (mode, baseline) pairs in the order the headlines give them,
    // single-copy modes only.
    let mut pairs: Vec<(String, String)> = Vec::new();
    for h in &heads {
        if h.baseline.is_empty() || BASELINES.contains(&h.mode.as_str()) {
            continue;
        }
        let p = (h.mode.clone(), h.baseline.clone());
        if !pairs.contains(&p) {
            pairs.push(p);
        }
    }
    let series = pairs
        .iter()
        .map(|(m, b)| {
            let plotters::style::RGBColor(r, g, bl) = mode_color(m);
            // Lighter against net, so the two baselines read apart.
            let c = if b == "net" {
                let l = |c: u8| (f64::from(c) + (255.0 - f64::from(c)) * 0.45).round() as u8;
                plotters::style::RGBColor(l(r), l(g), l(bl))
            } else {
                plotters::style::RGBColor(r, g, bl)
            };
            (format!("{m} vs {b}"), c)
        })
        .collect();
    let values = CHART_ROWS
        .iter()
        .map(|(row, _, _)| {
            pairs
                .iter()
                .map(|(m, b)| {
                    heads
                        .iter()
                        .find(|h| h.row == *row && &h.mode == m && &h.baseline == b)
                        .and_then(|h| h.ratio)
                })
                .collect()
        })
        .collect();
    let markers = CHART_ROWS
        .iter()
        .enumerate()
        .filter_map(|(gi, (_, key, _))| {
            let (_, r) = dpc_ref(key);
            r.is_finite().then_some(Marker {
                group: gi,
                series: None,
                value: r,
            })
        })
        .collect();
    Bars {
        title: "Headline ratios against the baselines, beside DPC's published ones".into(),
        subtitle: format!(
            "> 1: this mode better, except invalidation (> 1: costs more); baselines: private \
             (virtiofs-like), net (NFS-like); {run_label}"
        ),
        y_label: "ratio (x)".into(),
        x_label: "comparison DPC published (Fig. 6a, 6b, 6c, 9a; 6.2.5)".into(),
        groups: CHART_ROWS.iter().map(|(_, _, l)| l.to_string()).collect(),
        series,
        values,
        markers,
        marker_label: "DPC (published)".into(),
        ratio_labels: true,
        width: Some(1200),
    }
}
