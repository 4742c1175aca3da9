//! The application study's outputs: the Fig. 10 chart, report.md and
//! results.json.

use std::fmt::Write as _;
use std::path::Path;

use plotters::style::RGBColor;
use serde_json::{json, Value};

use super::plan::{App, WORKING_SET_FACTOR};
use super::runner::AppsRunner;
use super::table::{goal_json, goals, Study, DPC_PUBLISHED};
use crate::bench::plot::{self, mode_color, Bars, Marker};

/// File name of the Fig. 10 chart.
pub const CHART: &str = "apps-fig10.png";

fn x(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |v| format!("{v:.2}x"))
}

fn num(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |v| {
        if v >= 100.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.1}")
        }
    })
}

/// `mode N=n` column label.
pub fn column(mode: &str, n: u8) -> String {
    format!("{mode} N={n}")
}

/// The bar colour of (mode, N): the mode's colour, lighter for fewer nodes.
pub fn shade(mode: &str, n: u8, max_n: u8) -> RGBColor {
    let RGBColor(r, g, b) = mode_color(mode);
    let f = if max_n <= 1 {
        0.0
    } else {
        0.6 * (1.0 - (f64::from(n).ln() / f64::from(max_n).ln()))
    };
    let l = |c: u8| (f64::from(c) + (255.0 - f64::from(c)) * f).round() as u8;
    RGBColor(l(r), l(g), l(b))
}

/// The chart's bars: groups = apps (+ geomean), bars = mode x N.
pub fn bars(r: &AppsRunner, run_label: &str) -> Bars {
    let p = &r.plan;
    let max_n = p.nodes.iter().copied().max().unwrap_or(1);
    let mut series = Vec::new();
    for m in &p.modes {
        for &n in &p.nodes {
            series.push((column(m, n), shade(m, n, max_n)));
        }
    }
    let mut groups: Vec<String> = p.apps.iter().map(app_label).collect();
    groups.push("geomean (DPC's 5)".into());
    let mut values = Vec::new();
    for a in &p.apps {
        values.push(cols(p, |m, n| r.study.normalized(a.name, m, n)));
    }
    values.push(cols(p, |m, n| {
        r.study
            .geomean_over(&p.apps, |a| r.study.normalized(a, m, n))
    }));
    // DPC's published 2-node geomeans (normalized to single-node
    // Virtiofs, as this chart), on the bars they compare with.
    let geo = groups.len() - 1;
    let markers = DPC_GEOMEAN_2
        .iter()
        .filter_map(|(mode, v)| {
            let si = series
                .iter()
                .position(|(name, _)| *name == column(mode, 2))?;
            Some(Marker {
                group: geo,
                series: Some(si),
                value: *v,
            })
        })
        .collect();
    Bars {
        title: "Applications (DPC Fig. 10): per-node throughput / single-node private".into(),
        subtitle: format!(
            "{run_label}; {} s per app after a {} s warm-up, storage {}, node cache {} pages in every mode",
            p.runtime_s, p.warmup_s, p.storage, p.cache_pages
        ),
        y_label: "per-node throughput / single-node private (x), higher is better".into(),
        x_label: "application (DPC's counterpart)".into(),
        groups,
        series,
        values,
        markers,
        marker_label: "DPC published, 2 nodes: DPC (relaxed) 2.8x, DPC_SC (strong) 2.5x".into(),
        ratio_labels: true,
        width: Some(1400),
    }
}

/// DPC's published 2-node geomean speedups over single-node Virtiofs
/// (DPC 6.3, Fig. 10): (our mode, value).
pub const DPC_GEOMEAN_2: &[(&str, f64)] = &[("relaxed", 2.8), ("strong", 2.5)];

/// `kv (RocksDB)`; an app outside DPC's set is said so once.
pub fn app_label(a: &App) -> String {
    format!("{} ({})", a.name, a.dpc_name)
}

fn cols(p: &super::plan::Plan, f: impl Fn(&str, u8) -> Option<f64>) -> Vec<Option<f64>> {
    let mut v = Vec::new();
    for m in &p.modes {
        for &n in &p.nodes {
            v.push(f(m, n));
        }
    }
    v
}

/// Draws the chart; the file name, or the error.
pub fn draw(r: &AppsRunner, dir: &Path, run_label: &str) -> Result<String, String> {
    plot::draw(&dir.join(CHART), &bars(r, run_label))?;
    Ok(CHART.into())
}

/// Every missing or failed cell.
pub fn problems(r: &AppsRunner) -> Vec<String> {
    let mut out = Vec::new();
    for n in &r.plan.nodes {
        for m in &r.plan.modes {
            for a in &r.plan.apps {
                match r.study.cell(a.name, m, *n) {
                    None => out.push(format!("{} {m} N={n}: missing", a.name)),
                    Some(c) => {
                        if let Some(e) = &c.error {
                            out.push(format!("{} {m} N={n}: {e}", a.name));
                        } else if c.per_node_mean().is_none() {
                            out.push(format!("{} {m} N={n}: no figure", a.name));
                        }
                    }
                }
            }
        }
    }
    out
}

fn table_rows(
    s: &mut String,
    study: &Study,
    apps: &[App],
    cols: &[(String, u8)],
    f: &dyn Fn(&str, &str, u8) -> Option<f64>,
) {
    let _ = write!(s, "| app |");
    for (m, n) in cols {
        let _ = write!(s, " {} |", column(m, *n));
    }
    let _ = write!(s, "\n| --- |");
    for _ in cols {
        let _ = write!(s, " --- |");
    }
    let _ = writeln!(s);
    for a in apps {
        let _ = write!(s, "| {} |", app_label(a));
        for (m, n) in cols {
            let _ = write!(s, " {} |", x(f(a.name, m, *n)));
        }
        let _ = writeln!(s);
    }
    let _ = write!(s, "| **geomean** (DPC's five) |");
    for (m, n) in cols {
        let g = study.geomean_over(apps, |a| f(a, m, *n));
        let _ = write!(s, " **{}** |", x(g));
    }
    let _ = writeln!(s);
}

/// report.md.
pub fn report_md(
    r: &AppsRunner,
    machine: &Value,
    chart: Option<&str>,
    run_label: &str,
    prov: &Value,
) -> String {
    let p = &r.plan;
    let mut s = String::new();
    let problems = problems(r);
    let _ = writeln!(s, "# onecopy: Applications (DPC Fig. 10)\n");
    let _ = writeln!(
        s,
        "{run_label}, {:.0} s in all. {}\n",
        r.elapsed(),
        if problems.is_empty() {
            "Every (app, mode, N) has a figure.".to_string()
        } else {
            format!(
                "**Incomplete: {} cells missing or failed** (listed at the end; shown as n/a).",
                problems.len()
            )
        }
    );
    setup_md(&mut s, r, machine, prov);
    if let Some(c) = chart {
        let _ = writeln!(s, "![Fig. 10]({c})\n");
    }
    let cols: Vec<(String, u8)> = p
        .modes
        .iter()
        .flat_map(|m| p.nodes.iter().map(move |&n| (m.clone(), n)))
        .collect();
    ratios_md(&mut s, r, &cols);
    let apps: Vec<&str> = p.apps.iter().map(|a| a.name).collect();
    super::parity::parity_md(
        &mut s,
        &super::parity::parity_rows(&r.study, &apps, &p.modes),
    );
    throughput_md(&mut s, r, &cols);
    cpu_md(&mut s, r, &cols);
    dpc_md(&mut s, r);
    goals_md(&mut s, r);
    clusters_md(&mut s, r, &problems);
    s
}

/// The setup: machine, clusters, cache capacity, datasets, storage, CPU.
fn setup_md(s: &mut String, r: &AppsRunner, machine: &Value, prov: &Value) {
    let p = &r.plan;
    let m = |k: &str| machine[k].as_str().unwrap_or("").to_string();
    let _ = writeln!(s, "## Setup\n");
    let max_n = p.nodes.iter().copied().max().unwrap_or(1);
    let cache_mib = p.cache_pages as f64 * 4096.0 / 1048576.0;
    let _ = writeln!(
        s,
        "- Machine: {} CPUs ({}), {}; accelerator {} (one vCPU per instance).",
        m("nproc"),
        m("cpu"),
        m("qemu"),
        prov["accel"].as_str().unwrap_or("unknown")
    );
    let _ = writeln!(
        s,
        "- Per (mode, N) one cluster of 1 directory + N nodes (N = {}), modes {}; every node runs the **same app at the same time** (`{}`, started together on all consoles), over **one shared dataset** built on the host (`mkfs --dataset`), a fresh copy of the image per cluster. Every app starts from empty caches (`cache drop` on every node first); {}",
        p.nodes.iter().map(u8::to_string).collect::<Vec<_>>().join(", "),
        p.modes.join(", "),
        p.command("NAME", 1).replace("--seed 1", "--seed K"),
        warmup_text(p.warmup_s, p.runtime_s)
    );
    let _ = writeln!(
        s,
        "- **Cache capacity per node, the same in every mode: {} pages ({cache_mib:.1} MiB)**: the `private`/`net` page cache is a third of the kernel heap ({} MiB RAM per instance, 24 MiB heap; checked against every node's boot log `node cache: N pages`), and the single-copy modes' owned pages are capped at the same count (`cache config limit={}` on every node; relaxed's private copies of written pages have the same bound besides). Shared region {} MiB for every cluster (pool per node {}), so the pool is never the limit.",
        p.cache_pages,
        p.mem_mb,
        p.cache_pages,
        p.shm_mb,
        p.nodes
            .iter()
            .map(|&n| format!("{:.1} MiB at N={n}", crate::bench::runner::pool_mib(p.shm_mb, n)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(
        s,
        "- Datasets: {} each ({WORKING_SET_FACTOR}x one node's cache: beyond one node, within the caches of 2 or more; DPC: 30-60 GB over 32 GB of RAM); built in {:.1} s: `{}`, with {} MiB free in the image for the files the apps write.",
        crate::bench::opts::size_human(p.dataset_bytes),
        r.mkfs_s,
        p.dataset_specs().join(","),
        p.disk_margin_mb
    );
    let _ = writeln!(
        s,
        "- Storage profile `{}`; time dilation {}; doorbells {}; `baseline_writes={}`; `delegation={}`; `--runtime {}` per app run; each app's default threads (tasks); eviction policy `{}` on every node (it orders the single-copy modes' owned pages); readahead on in every mode (the kernel's defaults: `readahead_kb=128`, `faultaround_kb=64`).",
        p.storage,
        if r.opts.dilation == "off" {
            "off (storage model in wall-clock time)".to_string()
        } else {
            format!("{} (storage latency x D, rates / D; `qemu-run.sh --dilation`)", r.opts.dilation)
        },
        if r.opts.doorbell { "on" } else { "off" },
        r.opts.baseline_writes,
        u8::from(r.opts.delegation),
        p.runtime_s,
        p.policy.as_deref().unwrap_or("fifo")
    );
    let _ = writeln!(
        s,
        "- **CPU**: the machine has {} cores. The directory is pinned to CPU 0 and the nodes share the other(s) (`--pin auto`), so at N={max_n} {max_n} busy nodes share one core and the directory a second: {} busy instances. Per-node throughput at N > 1 is bounded by that sharing in every mode alike, which is why each mode is also compared with `private` at the same N. The CPU share of every instance over each run (QEMU's utime + stime / wall time; 100% = one core) is in the CPU table below. The host ran other work during the run; only ratios within this run count.\n",
        m("nproc"),
        max_n + 1
    );
}

/// What the setup says of the warm-up.
pub fn warmup_text(warmup_s: u32, runtime_s: u32) -> String {
    if warmup_s == 0 {
        return "no warm-up (`--apps-warmup 0`): the figure covers the cold start, the same in every mode.".into();
    }
    format!(
        "**a warm-up of {warmup_s} s before the measured phase** (`--warmup {warmup_s}`, as Filebench and db_bench run; `--apps-warmup`): the app runs {warmup_s} s uncounted, then its figures, cache and directory counters and miss timers start from zero and the measured phase runs {runtime_s} s; the RESULT line covers only the measured phase (operations still in flight when it starts are counted in it, as Filebench's statistics cleared mid-run count them)."
    )
}

/// Fig. 10 normalized to single-node `private`, and each mode against
/// `private` at the same N.
fn ratios_md(s: &mut String, r: &AppsRunner, cols: &[(String, u8)]) {
    let (p, st) = (&r.plan, &r.study);
    let _ = writeln!(
        s,
        "## Fig. 10: per-node throughput normalized to single-node `private`\n"
    );
    let _ = writeln!(s, "DPC's metric: each node's throughput, averaged over the N nodes, divided by one node's throughput in `private` (our virtiofs-like baseline). > 1 = faster per node.\n");
    table_rows(s, st, &p.apps, cols, &|a, m, n| st.normalized(a, m, n));
    let sc_cols: Vec<(String, u8)> = cols
        .iter()
        .filter(|(m, _)| m != "private")
        .cloned()
        .collect();
    let _ = writeln!(s, "\n## Ratio vs `private` at the same N\n");
    let _ = writeln!(s, "Per-node throughput / `private`'s per-node throughput with the same number of nodes (the same CPU sharing on both sides).\n");
    table_rows(s, st, &p.apps, &sc_cols, &|a, m, n| {
        st.vs_private_same_n(a, m, n)
    });
}

/// Throughput per node (mean) and aggregate, with units.
fn throughput_md(s: &mut String, r: &AppsRunner, cols: &[(String, u8)]) {
    let (p, st) = (&r.plan, &r.study);
    let _ = writeln!(
        s,
        "\n## Throughput: per node (mean) / aggregate of the N nodes\n"
    );
    let _ = write!(s, "| app | unit |");
    for (m, n) in cols {
        let _ = write!(s, " {} |", column(m, *n));
    }
    let _ = write!(s, "\n| --- | --- |");
    for _ in cols {
        let _ = write!(s, " --- |");
    }
    let _ = writeln!(s);
    for a in &p.apps {
        let unit = p
            .modes
            .iter()
            .flat_map(|m| p.nodes.iter().map(move |&n| (m, n)))
            .find_map(|(m, n)| {
                st.cell(a.name, m, n)
                    .filter(|c| !c.unit.is_empty())
                    .map(|c| c.unit.clone())
            })
            .unwrap_or_default();
        let _ = write!(s, "| {} | {unit} |", a.name);
        for (m, n) in cols {
            let c = st.cell(a.name, m, *n);
            let _ = write!(
                s,
                " {} / {} |",
                num(c.and_then(|c| c.per_node_mean())),
                num(c.and_then(|c| c.aggregate()))
            );
        }
        let _ = writeln!(s);
    }
}

/// The CPU share of the nodes and of the directory over each run.
fn cpu_md(s: &mut String, r: &AppsRunner, cols: &[(String, u8)]) {
    let (p, st) = (&r.plan, &r.study);
    let _ = writeln!(
        s,
        "\n## CPU share over each run (mean of the nodes / the directory; 100% = one core)\n"
    );
    let _ = write!(s, "| app |");
    for (m, n) in cols {
        let _ = write!(s, " {} |", column(m, *n));
    }
    let _ = write!(s, "\n| --- |");
    for _ in cols {
        let _ = write!(s, " --- |");
    }
    let _ = writeln!(s);
    for a in &p.apps {
        let _ = write!(s, "| {} |", a.name);
        for (m, n) in cols {
            let cell = st.cell(a.name, m, *n);
            let node = cell.and_then(|c| super::table::mean(&c.cpu_nodes));
            let dir = cell.and_then(|c| c.cpu_dir);
            let pct = |v: Option<f64>| v.map_or("n/a".into(), |v| format!("{:.0}%", v * 100.0));
            let wall = cell.map_or(0.0, |c| c.wall_s);
            let _ = write!(s, " {} / {} ({wall:.1} s) |", pct(node), pct(dir));
        }
        let _ = writeln!(s);
    }
}

/// DPC's published numbers and ours beside them.
fn dpc_md(s: &mut String, r: &AppsRunner) {
    let (p, st) = (&r.plan, &r.study);
    let _ = writeln!(
        s,
        "\n## DPC's published numbers (seed 000, §6.3, Fig. 10)\n"
    );
    let _ = writeln!(s, "| DPC | published |\n| --- | --- |");
    for (k, v) in DPC_PUBLISHED {
        let _ = writeln!(s, "| {k} | {v} |");
    }
    let _ = writeln!(s, "\nOurs beside them: 2-node geomean (normalized) {}; best normalized figure per app at N > 1: {}.\n",
        p.modes.iter().filter(|m| *m != "private").map(|m| format!("{m} {}", x(st.geomean_over(&p.apps, |a| st.normalized(a, m, 2))))).collect::<Vec<_>>().join(", "),
        p.apps.iter().map(|a| {
            let best = p.modes.iter().filter(|m| *m != "private").flat_map(|m| p.nodes.iter().filter(|n| **n > 1).map(move |&n| (m, n)))
                .filter_map(|(m, n)| st.normalized(a.name, m, n).map(|v| (v, m.clone(), n)))
                .fold(None::<(f64, String, u8)>, |b, c| match b { Some(b) if b.0 >= c.0 => Some(b), _ => Some(c) });
            match best { Some((v, m, n)) => format!("{} {v:.2}x ({m} N={n})", a.name), None => format!("{} n/a", a.name) }
        }).collect::<Vec<_>>().join(", "));
}

/// The goals, judged on this run.
fn goals_md(s: &mut String, r: &AppsRunner) {
    let (p, st) = (&r.plan, &r.study);
    let _ = writeln!(s, "## Goals, judged on this run\n");
    let _ = writeln!(s, "| goal | ours | verdict |\n| --- | --- | --- |");
    for g in goals(st, &p.apps, &p.modes, &p.nodes) {
        let v = match g.met {
            Some(true) => "met",
            Some(false) => "**missed**",
            None => "not measured",
        };
        let _ = writeln!(s, "| {} | {} | {v} |", g.what, g.ours);
    }
}

/// The clusters' times, the notes, what is missing, where the rest is.
fn clusters_md(s: &mut String, r: &AppsRunner, problems: &[String]) {
    let _ = writeln!(s, "\n## Clusters\n");
    let _ = writeln!(s, "| cluster | time |\n| --- | --- |");
    for c in &r.clusters {
        let _ = writeln!(
            s,
            "| {} | {:.1} s{} |",
            c["name"].as_str().unwrap_or(""),
            c["seconds"].as_f64().unwrap_or(0.0),
            c["error"]
                .as_str()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        );
    }
    for n in &r.notes {
        let _ = writeln!(s, "\nNote: {n}");
    }
    if !problems.is_empty() {
        let _ = writeln!(s, "\n## Missing or failed\n");
        for pr in problems {
            let _ = writeln!(s, "- {pr}");
        }
    }
    let _ = writeln!(s, "\nEvery node's RESULT json (per-operation latency percentiles, bytes, cache counters) is in results.json; every command and its output in transcripts/.");
}

/// results.json.
pub fn results_json(r: &AppsRunner, machine: &Value, chart: Option<&str>) -> Value {
    let p = &r.plan;
    let st = &r.study;
    let problems = problems(r);
    let cells: Vec<Value> = st
        .cells
        .iter()
        .map(|c| {
            json!({
                "app": c.app,
                "mode": c.mode,
                "nodes": c.nodes,
                "unit": c.unit,
                "per_node": c.per_node,
                "per_node_mean": c.per_node_mean(),
                "aggregate": c.aggregate(),
                "normalized_to_1node_private": st.normalized(&c.app, &c.mode, c.nodes),
                "vs_private_same_n": st.vs_private_same_n(&c.app, &c.mode, c.nodes),
                "cpu_share_nodes": c.cpu_nodes.iter().map(|v| if v.is_finite() { json!(v) } else { Value::Null }).collect::<Vec<_>>(),
                "cpu_share_dir": c.cpu_dir,
                "busy_instances": u32::from(c.nodes) + 1,
                "wall_s": c.wall_s,
                "error": c.error,
                "results": c.results,
            })
        })
        .collect();
    let mut geo = serde_json::Map::new();
    for m in &p.modes {
        for &n in &p.nodes {
            geo.insert(
                column(m, n),
                json!({
                    "normalized": st.geomean_over(&p.apps, |a| st.normalized(a, m, n)),
                    "vs_private_same_n": st.geomean_over(&p.apps, |a| st.vs_private_same_n(a, m, n)),
                }),
            );
        }
    }
    json!({
        "study": "applications (DPC Fig. 10)",
        "quick": r.opts.quick,
        "plan": p.to_json(),
        "doorbell": r.opts.doorbell,
        "baseline_writes": r.opts.baseline_writes,
        "machine": machine,
        "seconds": r.elapsed(),
        "mkfs_seconds": r.mkfs_s,
        "cells": cells,
        "geomean_dpc_five": geo,
        "goals": goals(st, &p.apps, &p.modes, &p.nodes).iter().map(goal_json).collect::<Vec<_>>(),
        "dpc_published": DPC_PUBLISHED.iter().map(|(k, v)| json!({ "what": k, "published": v })).collect::<Vec<_>>(),
        "clusters": r.clusters,
        "notes": r.notes,
        "chart": chart,
        "problems": problems,
        "complete": problems.is_empty(),
    })
}
