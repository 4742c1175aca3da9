//! report.md's fio sections: the tables per workload and engine,
//! readahead on and off side by side, invalidation cost and reclaim.

use super::*;

/// One table per fio workload and engine.
pub(super) fn fio_section(s: &mut String, r: &Runner, plots: &[String]) {
    let figs = &r.figures;
    let p = &r.params;
    let bases = ratio_bases(&r.opts.modes);
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
                crate::bench::opts::size_arg(w.bs),
                w.jobs(p),
                size_human(w.size(p)),
                w.iodepth(p)
            );
            let png = crate::bench::charts::fio_png_name(w.key, e);
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
                    let id = crate::bench::model::figure_id(GROUP_FIO, mode, w.key, Some(e), sc);
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
}

/// One row of the readahead comparison: (scenario, mode, engine, on,
/// off); None where a figure is missing or n/a.
pub type RaRow = (String, String, String, Option<f64>, Option<f64>);

/// Fig. 6b/7b with readahead on and off, measured in the same run (the
/// same cluster, one after the other): every (scenario, mode, engine).
pub fn readahead_rows(figs: &[Figure], modes: &[String]) -> Vec<RaRow> {
    use crate::bench::model::{READ_BW, READ_BW_RA_OFF};
    let mut out = Vec::new();
    for e in ENGINES {
        for sc in SCENARIOS {
            for m in modes {
                let v = |key: &str| {
                    find(
                        figs,
                        &crate::bench::model::figure_id(GROUP_FIO, m, key, Some(e), sc),
                    )
                    .and_then(Figure::value)
                };
                let (on, off) = (v(READ_BW), v(READ_BW_RA_OFF));
                if on.is_none() && off.is_none() {
                    continue;
                }
                out.push((sc.to_string(), m.clone(), e.to_string(), on, off));
            }
        }
    }
    out
}

/// Readahead may not make the sequential 128 KiB reads of CM-R and CH-R
/// slower: the rows where it did (beyond `tolerance`, a fraction).
pub fn readahead_regressions(rows: &[RaRow], tolerance: f64) -> Vec<String> {
    rows.iter()
        .filter(|(sc, ..)| sc == "CM-R" || sc == "CH-R")
        .filter_map(|(sc, m, e, on, off)| match (on, off) {
            (Some(on), Some(off)) if *off > 0.0 && on / off < 1.0 - tolerance => {
                Some(format!("{sc} {m} {e}: {on:.1} MiB/s on, {off:.1} off"))
            }
            _ => None,
        })
        .collect()
}

/// Fig. 6b/7b side by side, readahead on and off.
pub(super) fn readahead_section(s: &mut String, r: &Runner) {
    let rows = readahead_rows(&r.figures, &r.opts.modes);
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\n## Fig. 6b/7b: sequential read bandwidth, readahead on and off\n"
    );
    let _ = writeln!(
        s,
        "The same workload (`read-bw`: 128 KiB sequential reads) measured twice on the same \
         cluster: with the kernel's readahead (`readahead_kb=128`) and mmap fault-around \
         (`faultaround_kb=64`), and as `read-bw-ra-off` after `cache readahead 0 0` on both \
         nodes. \"on / off\" > 1: readahead helps. CM-R and CH-R must not get slower with \
         readahead on (the pages are already cached in the cluster: a window brings nothing \
         a read would not).\n"
    );
    let _ = writeln!(
        s,
        "| engine | scenario | mode | on (MiB/s) | off (MiB/s) | on / off |\n| --- | --- | --- | --- | --- | --- |"
    );
    for (sc, m, e, on, off) in &rows {
        let v = |x: &Option<f64>| x.map_or("n/a".into(), fmt_value);
        let ratio = match (on, off) {
            (Some(a), Some(b)) if *b > 0.0 => fmt_ratio(a / b),
            _ => "n/a".into(),
        };
        let _ = writeln!(s, "| {e} | {sc} | {m} | {} | {} | {ratio} |", v(on), v(off));
    }
    let slower = readahead_regressions(&rows, 0.05);
    if slower.is_empty() {
        let _ = writeln!(
            s,
            "\nCM-R and CH-R: not slower with readahead on in any mode (within 5%; one run on a shared host).\n"
        );
    } else {
        let _ = writeln!(
            s,
            "\n**CM-R / CH-R slower with readahead on by more than 5%** (one run on a shared host: repeat before concluding): {}.\n",
            slower.join("; ")
        );
    }
}

/// Invalidation cost and the larger-than-pool read.
pub(super) fn reclaim_section(s: &mut String, r: &Runner, plots: &[String]) {
    let p = &r.params;
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
        s,
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
        crate::bench::runner::pool_mib(p.big_shm_mb, 2)
    );
    if plots.iter().any(|x| x == "reclaim-bigfile.png") {
        let _ = writeln!(s, "![larger than pool](reclaim-bigfile.png)\n");
    }
    table(
        s,
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(mode: &str, w: &str, e: &str, sc: &str, v: Status, lower: bool) -> Figure {
        let mut f = Figure::new(GROUP_FIO, mode, w, Some(e), sc, "m", "u", lower);
        f.status = v;
        f
    }
    #[test]
    fn readahead_on_and_off_side_by_side() {
        let st = |v: f64| Status::Ok(v);
        let figs = vec![
            fig("strong", "read-bw", "libaio", "CM", st(300.0), false),
            fig("strong", "read-bw-ra-off", "libaio", "CM", st(100.0), false),
            fig("strong", "read-bw", "libaio", "CH-R", st(90.0), false),
            fig(
                "strong",
                "read-bw-ra-off",
                "libaio",
                "CH-R",
                st(100.0),
                false,
            ),
            fig("strong", "read-bw", "mmap", "CM-R", st(200.0), false),
            fig("strong", "read-bw-ra-off", "mmap", "CM-R", st(198.0), false),
            fig(
                "private",
                "read-bw",
                "mmap",
                "CM-R",
                Status::NotApplicable("not supported".into()),
                false,
            ),
            fig(
                "private",
                "read-bw-ra-off",
                "mmap",
                "CM-R",
                Status::NotApplicable("not supported".into()),
                false,
            ),
        ];
        let rows = readahead_rows(&figs, &["strong".into(), "private".into()]);
        assert_eq!(
            rows,
            vec![
                (
                    "CM".into(),
                    "strong".into(),
                    "libaio".into(),
                    Some(300.0),
                    Some(100.0)
                ),
                (
                    "CH-R".into(),
                    "strong".into(),
                    "libaio".into(),
                    Some(90.0),
                    Some(100.0)
                ),
                (
                    "CM-R".into(),
                    "strong".into(),
                    "mmap".into(),
                    Some(200.0),
                    Some(198.0)
                ),
            ],
            "n/a pairs are left out"
        );
        // CM may gain or lose; CH-R 10% slower with readahead on is named,
        // CM-R within the tolerance is not.
        assert_eq!(
            readahead_regressions(&rows, 0.05),
            vec!["CH-R strong libaio: 90.0 MiB/s on, 100.0 off".to_string()]
        );
        assert!(readahead_regressions(&rows, 0.2).is_empty());
    }
}
