//! report.md's "Directory vs decentralized" section: DPC's directory
//! (`strong`) beside DaxFS's CAS slot cache (`daxfs`), measured in the
//! same run: read latency of a miss, of a first touch of a page another
//! node cached, of a hit, and what each design keeps in shared memory per
//! cached page.

use std::fmt::Write as _;

use super::super::model::{figure_id, fmt_ratio, fmt_value, Figure, GROUP_FIO};
use super::find;

/// Bytes of region metadata per slot of `daxfs` mode's page cache (the
/// slot word and the aux word).
pub const DAX_SLOT_BYTES: usize = daxcache::pcache::SLOT_WORDS * 8;
/// Fixed region bytes of the slot cache: its header and the pin records.
pub const DAX_FIXED_BYTES: usize = (daxcache::pcache::HEADER_WORDS
    + daxcache::pcache::MAX_OWNERS * daxcache::pcache::PINS_PER_OWNER)
    * 8;
/// Region bits per pool frame in the single-copy modes (export and
/// replica bitmaps).
pub const STRONG_BITMAP_BITS: usize = 2;

/// The rows: scenario, what it is in each design.
const ROWS: &[(&str, &str)] = &[
    (
        "CM",
        "miss: the page is cached nowhere (strong: the directory fills a frame from the disk and maps it; daxfs: a CAS claim, the directory fills the slot, then a pin and a copy)",
    ),
    (
        "CM-R",
        "first touch of a page another node cached (strong: one directory round trip, then a mapping of the owner's frame; daxfs: a hit in the shared slot, no directory)",
    ),
    (
        "CH-R",
        "hit: this node read the page before (strong: a load through its mapping; daxfs: probe, pin CAS, 4 KiB copy, unpin)",
    ),
];

fn value(figs: &[Figure], mode: &str, sc: &str) -> Option<f64> {
    find(
        figs,
        &figure_id(GROUP_FIO, mode, "read-lat", Some("libaio"), sc),
    )
    .and_then(Figure::value)
}

fn accel(figs: &[Figure], mode: &str) -> String {
    figs.iter()
        .find(|f| f.mode == mode && !f.context.accel.is_empty())
        .map(|f| f.context.accel.clone())
        .unwrap_or_else(|| "unknown".into())
}

/// The section, if the run measured both `strong` and `daxfs`;
/// `entry_bytes`: the directory's bytes per page entry (`dir stats`).
pub fn section(s: &mut String, modes: &[String], figs: &[Figure], entry_bytes: Option<&str>) {
    if !(modes.iter().any(|m| m == "strong") && modes.iter().any(|m| m == "daxfs")) {
        return;
    }
    let (sa, da) = (accel(figs, "strong"), accel(figs, "daxfs"));
    let accels = if sa == da {
        format!(
            "Both modes ran under one accelerator, {sa} (the run's \
             `--accel`): the ratios compare the designs under one emulation."
        )
    } else {
        format!(
            "Accelerators: strong {sa}, daxfs {da} (daxfs needs atomics across \
             instances, so `--accel tcg-multi`: about 1.3x per atomic, and its \
             own vCPU threads; the two columns do not share one accelerator: \
             `--accel tcg-multi` runs every mode under it)."
        )
    };
    let _ = writeln!(
        s,
        "\n## Directory vs decentralized (strong vs daxfs)\n\n\
         DPC's page directory (`strong`) beside DaxFS's shared slot cache \
         claimed and published by compare-and-swap (`daxfs`), in this run. \
         fio `read-lat` (4 KiB, libaio, iodepth 1), mean latency in us; \
         ratio daxfs / strong (above 1: daxfs slower). {accels}\n"
    );
    let _ = writeln!(
        s,
        "| read | strong | daxfs | daxfs / strong |\n| --- | --- | --- | --- |"
    );
    for (sc, what) in ROWS {
        let a = value(figs, "strong", sc);
        let b = value(figs, "daxfs", sc);
        let show = |v: Option<f64>| v.map_or_else(|| "n/a".to_string(), fmt_value);
        let ratio = match (a, b) {
            (Some(a), Some(b)) if a > 0.0 => fmt_ratio(b / a),
            _ => "n/a".into(),
        };
        let _ = writeln!(s, "| {sc}: {what} | {} | {} | {ratio} |", show(a), show(b));
    }
    let entry = entry_bytes.unwrap_or("n/a");
    let _ = writeln!(
        s,
        "\nShared memory per cached page: **strong** 4096 B (the frame) + {} \
         bits of the export and replica bitmaps in the region, and {entry} B \
         of page-directory entry in the directory's own memory; **daxfs** \
         4096 B (the slot's frame) + {} B of slot metadata (slot word and aux \
         word) in the region, nothing in the directory, plus {} KiB per \
         cache for its header and every participant's pin records. Both keep \
         one copy of a page cluster-wide; daxfs trades the directory's round \
         trip on a first touch for a CAS claim and a copy out of the slot on \
         every hit (no mapping). In daxfs `cache drop` frees the shared slots \
         the node filled (unless another node has them pinned), so a CM \
         after every node's drop misses as in strong.",
        STRONG_BITMAP_BITS,
        DAX_SLOT_BYTES,
        DAX_FIXED_BYTES.div_ceil(1024)
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::model::Status;

    fn fig(mode: &str, sc: &str, v: f64) -> Figure {
        let mut f = Figure::new(
            GROUP_FIO,
            mode,
            "read-lat",
            Some("libaio"),
            sc,
            "mean latency",
            "us",
            true,
        );
        f.status = Status::Ok(v);
        f.context.accel = format!("{mode}-accel");
        f
    }

    #[test]
    fn only_with_both_modes_and_ratios_daxfs_over_strong() {
        let figs = vec![
            fig("strong", "CM", 200.0),
            fig("daxfs", "CM", 300.0),
            fig("strong", "CM-R", 40.0),
            fig("daxfs", "CM-R", 10.0),
            fig("strong", "CH-R", 5.0),
        ];
        let mut s = String::new();
        section(&mut s, &["strong".into(), "private".into()], &figs, None);
        assert!(s.is_empty(), "no daxfs in the run: no section");
        section(
            &mut s,
            &["strong".into(), "daxfs".into()],
            &figs,
            Some("14.0"),
        );
        assert!(s.contains("## Directory vs decentralized"), "{s}");
        assert!(s.contains("strong strong-accel, daxfs daxfs-accel"), "{s}");
        assert!(!s.contains("Both modes ran under"), "{s}");
        assert!(s.contains("| 200.0 | 300.0 | 1.50x |"), "{s}");
        assert!(s.contains("| 40.00 | 10.00 | 0.25x |"), "{s}");
        assert!(s.contains("| 5.000 | n/a | n/a |"), "{s}");
        assert!(s.contains("14.0 B of page-directory entry"), "{s}");
        assert!(s.contains("+ 16 B of slot metadata"), "{s}");
        assert!(s.contains("plus 9 KiB per cache"), "{s}");
    }

    #[test]
    fn one_accelerator_for_both_is_said_so() {
        let mut figs = vec![fig("strong", "CM", 200.0), fig("daxfs", "CM", 300.0)];
        for f in &mut figs {
            f.context.accel = "tcg-multi".into();
        }
        let mut s = String::new();
        section(&mut s, &["strong".into(), "daxfs".into()], &figs, None);
        assert!(
            s.contains("Both modes ran under one accelerator, tcg-multi"),
            "{s}"
        );
        assert!(!s.contains("do not share one accelerator"), "{s}");
    }
}
