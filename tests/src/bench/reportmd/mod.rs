//! report.md, one function per section (the fio and directory sections
//! in `fio` and `dir`).

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

mod dir;
mod fio;

use dir::{directory_section, host_dir_section};
use fio::{fio_section, readahead_section, reclaim_section};

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
        dir::dir_stats_bytes(r).as_deref(),
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
