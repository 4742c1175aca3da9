//! report.md, one function per section.

use std::fmt::Write as _;

use serde_json::Value;

use super::model::{
    fmt_ratio, fmt_value, scenario_desc, Figure, Kind, Status, ENGINES, GROUP_BIG, GROUP_DIR,
    GROUP_FIO, GROUP_HOST, GROUP_INV, SCENARIOS, WORKLOADS,
};
use super::opts::size_human;
use super::report::{
    cell, find, first_accel, headline_dpc, headline_table, headlines, md_escape, node_answer,
    note_cell, range_cell, ratio_bases, ratio_cells, ratio_heads, rpc_sentence, short, table,
    value_of, DPC_REFS, HEADLINE_PNG,
};
use super::runner::{host_dir_figures, Runner, HOST_DIR_BENCH, RPC_SCENARIO};

/// report.md: one section after the other.
pub fn report_md(r: &Runner, machine: &Value, plots: &[String], problems: &[String]) -> String {
    let mut s = String::new();
    intro(&mut s, r, problems);
    machine_section(&mut s, r, machine);
    params_section(&mut s, r);
    headlines_section(&mut s, r, plots);
    fio_section(&mut s, r, plots);
    readahead_section(&mut s, r);
    reclaim_section(&mut s, r, plots);
    directory_section(&mut s, r, plots);
    super::report::versus::section(
        &mut s,
        &r.opts.modes,
        &r.figures,
        dir_stats_bytes(r).as_deref(),
    );
    host_dir_section(&mut s, r);
    tail_section(&mut s, r, problems);
    s
}

/// "full" or "--quick (scaled down)".
fn run_kind(r: &Runner) -> &'static str {
    if r.opts.quick {
        "--quick (scaled down)"
    } else {
        "full"
    }
}

/// Title, what the run was, complete or not.
fn intro(s: &mut String, r: &Runner, problems: &[String]) {
    let kind = run_kind(r);
    let _ = writeln!(s, "# onecopy benchmark report\n");
    if let Some(p) = &r.partial {
        let _ = writeln!(
            s,
            "**partial: interrupted at {}** ({}): the steps after it were not run, and the \
             figures of that step may be missing or failed. `onecopy-bench --resume {}` with \
             the same options measures the rest.\n",
            p.step,
            p.signal,
            r.out.display()
        );
    }
    if let Some(x) = &r.resume {
        let _ = writeln!(
            s,
            "Resumed from the interrupted run in `{}` ({}): the steps it had measured \
             completely are kept as it measured them.\n",
            x.dir.display(),
            super::fmt_secs(x.seconds)
        );
    }
    let _ = writeln!(
        s,
        "Run: {kind}, {} ({}), modes {}, storage profile `{}`, CXL latency {} ns. \
         Every number below was measured in this run, except the DPC column of the \
         headline table (DPC's published ratios, labelled as such). A measurement that \
         failed or does not exist in a mode is shown as n/a with its error.\n",
        r.started_utc,
        super::fmt_secs(r.elapsed()),
        r.opts.modes.join(", "),
        r.opts.storage,
        r.opts.cxl_latency_ns
    );
    if problems.is_empty() {
        let _ = writeln!(s, "Complete: every expected figure is a number (n/a only where a mode has no such operation: private and net have no mmap and no page directory).\n");
    } else {
        let _ = writeln!(
            s,
            "**Incomplete: {} expected figure(s) missing or failed** (listed at the end).\n",
            problems.len()
        );
    }
}

/// The machine and the clusters booted.
fn machine_section(s: &mut String, r: &Runner, machine: &Value) {
    let m = |k: &str| machine[k].as_str().unwrap_or("").to_string();
    let _ = writeln!(s, "## Machine\n");
    let _ = writeln!(s, "| what | value |\n| --- | --- |");
    let _ = writeln!(s, "| `nproc` | {} |", m("nproc"));
    let _ = writeln!(s, "| CPU | {} |", md_escape(&m("cpu")));
    let _ = writeln!(s, "| `uname -a` | {} |", md_escape(&m("uname")));
    let _ = writeln!(s, "| QEMU | {} |", md_escape(&m("qemu")));
    let _ = writeln!(s, "| accelerator | {} |", md_escape(&first_accel(r)));
    let _ = writeln!(s, "| storage profile | {} |", r.opts.storage);
    let _ = writeln!(
        s,
        "| CXL latency | {} ns (before the dilation) |",
        r.opts.cxl_latency_ns
    );
    let _ = writeln!(
        s,
        "| time dilation | {} |",
        if r.opts.dilation == "off" {
            "off: storage and CXL models in wall-clock time".to_string()
        } else {
            format!(
                "{}: storage latency and CXL latency x D, rates / D",
                r.opts.dilation
            )
        }
    );
    let _ = writeln!(
        s,
        "| doorbells | {} |",
        if r.opts.doorbell {
            "on: interrupts between instances (MSI-X), tickless kernels"
        } else {
            "off: polling on the 1 kHz tick"
        }
    );
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
}

/// The workloads' actual parameters and the procedure.
fn params_section(s: &mut String, r: &Runner) {
    let p = &r.params;
    let kind = run_kind(r);
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
         are emptied with `cache drop`. Every job is a task on the node's one vCPU: the \
         I/Os of all waiting jobs go out together (`psync`: one per job; `libaio`: each \
         job's `--iodepth` I/Os); `effective_iodepth` and `max_iodepth` in the RESULT json \
         say how many were in flight (mean per flush, rounded, and most). Mean latency is \
         DPC's latency metric (for a batch, its completion time); bandwidth is MiB/s over \
         all jobs.\n"
    );
    let _ = writeln!(
        s,
        "Baseline writes (`private`, `net`; boot option `baseline_writes`): **{}** ({}).\n",
        p.baseline_writes,
        if p.baseline_writes == "through" {
            "every write goes to the file server, which writes the disk before answering"
        } else {
            "buffered in the node's page cache, written back at fsync, close, sync and under \
             memory pressure, as the Linux page cache under virtiofs and NFS that DPC measured"
        }
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
}

/// Headline ratios next to DPC's.
fn headlines_section(s: &mut String, r: &Runner, plots: &[String]) {
    let figs = &r.figures;
    let heads = headlines(figs, &r.opts.modes);
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
        if plots.iter().any(|x| x == HEADLINE_PNG) {
            let _ = writeln!(
                s,
                "![headline ratios beside DPC's published ones]({HEADLINE_PNG})\n\nThe \
                 chart: one bar per (single-copy mode, baseline) pair, DPC's published ratio \
                 as a black diamond beside them; the values are in the table below.\n"
            );
        }
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
}

/// One table per fio workload and engine.
fn fio_section(s: &mut String, r: &Runner, plots: &[String]) {
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
                super::opts::size_arg(w.bs),
                w.jobs(p),
                size_human(w.size(p)),
                w.iodepth(p)
            );
            let png = super::charts::fio_png_name(w.key, e);
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
}

/// One row of the readahead comparison: (scenario, mode, engine, on,
/// off); None where a figure is missing or n/a.
pub type RaRow = (String, String, String, Option<f64>, Option<f64>);

/// Fig. 6b/7b with readahead on and off, measured in the same run (the
/// same cluster, one after the other): every (scenario, mode, engine).
pub fn readahead_rows(figs: &[Figure], modes: &[String]) -> Vec<RaRow> {
    use super::model::{READ_BW, READ_BW_RA_OFF};
    let mut out = Vec::new();
    for e in ENGINES {
        for sc in SCENARIOS {
            for m in modes {
                let v = |key: &str| {
                    find(
                        figs,
                        &super::model::figure_id(GROUP_FIO, m, key, Some(e), sc),
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
fn readahead_section(s: &mut String, r: &Runner) {
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
fn reclaim_section(s: &mut String, r: &Runner, plots: &[String]) {
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
        super::runner::pool_mib(p.big_shm_mb, 2)
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

/// Round trips and `bench dir`.
fn directory_section(s: &mut String, r: &Runner, plots: &[String]) {
    let figs = &r.figures;
    let p = &r.params;
    let bases = ratio_bases(&r.opts.modes);
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
    if plots.iter().any(|x| x == super::charts::ROUND_TRIPS_PNG) {
        let _ = writeln!(
            s,
            "![round trips]({})\n\n(groups: bench ring, bench rpc, bench read CM-R, in us; bars: {} in that order)\n",
            super::charts::ROUND_TRIPS_PNG,
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
}

/// Time per phase, notes, n/a reasons, missing figures.
fn tail_section(s: &mut String, r: &Runner, problems: &[String]) {
    let figs = &r.figures;
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
}

/// The page directory's code on the host next to `bench dir` in the
/// guest, per batch size, and the directory's bytes per cached page.
fn host_dir_section(s: &mut String, r: &Runner) {
    let figs = &r.figures;
    let host = |sc: &str| {
        find(
            figs,
            &super::model::figure_id(GROUP_HOST, "host", HOST_DIR_BENCH, None, sc),
        )
    };
    let _ = writeln!(s, "\n## Page directory: host vs in-guest\n");
    let any = host_dir_figures().first().and_then(|(sc, _)| host(sc));
    let param = |k: &str| {
        any.and_then(|f| f.params.get(k))
            .map(|v| v.to_string().trim_matches('"').to_string())
            .unwrap_or_else(|| "n/a".into())
    };
    let _ = writeln!(
        s,
        "`pagedir-bench` drives the same `PageDir` code the directory runs, by plain calls on \
         the host ({} build, {} pages of one file, {} rounds, a 4-node layout; no rings, no \
         guest): the gap to `bench dir` is what the rings, the guest and the node's side cost. \
         Host page-directory state measured there: {} bytes per cached page.\n",
        param("profile"),
        param("pages"),
        param("rounds"),
        param("bytes_per_entry")
    );
    let _ = writeln!(s, "| operation | host ops/s |\n| --- | --- |");
    for (sc, _) in host_dir_figures()
        .iter()
        .filter(|(sc, _)| !sc.starts_with("batch"))
    {
        let _ = writeln!(s, "| {sc} | {} |", cell(host(sc)));
    }
    let modes: Vec<&String> = r
        .opts
        .modes
        .iter()
        .filter(|m| m.as_str() == "strong" || m.as_str() == "relaxed")
        .collect();
    let _ = writeln!(
        s,
        "\n`bench dir` (map + drop of pages another node owns, in batches) against the same \
         loop on the host; ratio = host / in-guest.\n"
    );
    let mut head = String::from("| batch | host ops/s |");
    let mut rule = String::from("| --- | --- |");
    for m in &modes {
        let _ = write!(head, " in-guest {m} | host / {m} |");
        rule.push_str(" --- | --- |");
    }
    let _ = writeln!(s, "{head}\n{rule}");
    for b in super::model::DIR_BATCHES {
        let sc = super::model::dir_batch_scenario(b);
        let h = host(&sc);
        let mut row = format!("| {b} | {} |", cell(h));
        for m in &modes {
            let g = find(
                figs,
                &super::model::figure_id(GROUP_DIR, m, "bench dir", None, &sc),
            );
            let ratio = match (h.and_then(Figure::value), g.and_then(Figure::value)) {
                (Some(h), Some(g)) if g > 0.0 => fmt_ratio(h / g),
                _ => "n/a".into(),
            };
            let _ = write!(row, " {} | {ratio} |", cell(g));
        }
        let _ = writeln!(s, "{row}");
    }
    let guest = dir_stats_bytes(r);
    let _ = writeln!(
        s,
        "\n`dir stats` in the guest reports {} bytes per entry (the layout for up to 32 nodes, \
         files cached whole).",
        guest.unwrap_or_else(|| "n/a".into())
    );
}

/// The `bytes per entry` line of the first `dir stats` the run saved.
pub fn dir_stats_bytes(r: &Runner) -> Option<String> {
    fn scan(v: &Value) -> Option<String> {
        match v {
            Value::String(l) => {
                let rest = l.trim().strip_prefix("bytes per entry")?;
                Some(rest.trim().to_string())
            }
            Value::Array(a) => a.iter().find_map(scan),
            Value::Object(o) => o.values().find_map(scan),
            _ => None,
        }
    }
    r.clusters.iter().find_map(scan)
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
