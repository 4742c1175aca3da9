//! report.md of `--policies`: the "Eviction policies" section, one
//! function per table. Pure.

use std::fmt::Write as _;

use serde_json::Value;

use super::parse::{num, text, Promote, Span};
use super::plan::{Kind, TierMode};
use super::published::{self, CACHE_EXT, CAVEAT, SOURCE};
use super::section::{Part, Section, WORKLOADS};

/// `0.93x`, or n/a.
pub fn x(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |v| format!("{v:.2}x"))
}

/// A throughput-like number: no decimals from 100 up.
pub fn amount(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

fn opt(v: Option<f64>, f: fn(f64) -> String) -> String {
    v.map_or("n/a".into(), f)
}

/// A number or a range `lo..hi`, each through `f`.
pub fn span(v: Option<Span>, f: fn(f64) -> String) -> String {
    match v {
        None => "n/a".into(),
        Some(s) if s.lo == s.hi => f(s.lo),
        Some(s) => format!("{}..{}", f(s.lo), f(s.hi)),
    }
}

fn ratio3(v: f64) -> String {
    format!("{v:.3}")
}

fn us(ns: f64) -> String {
    format!("{:.2}", ns / 1000.0)
}

fn get(r: Option<&Value>, k: &str) -> String {
    r.and_then(|r| {
        text(r, k).or_else(|| {
            num(r, k).map(|v| {
                if v.fract() == 0.0 {
                    format!("{v:.0}")
                } else {
                    v.to_string()
                }
            })
        })
    })
    .unwrap_or_else(|| "?".into())
}

/// How promotion works in `m`, for the parameters.
fn tier_mode_note(m: TierMode) -> &'static str {
    match m {
        TierMode::Relaxed => "",
        TierMode::Strong => {
            " (the directory grants each replica and revokes the replicas before any write to the page)"
        }
    }
}

/// The parameters of one part, one list item.
pub fn params_line(p: &Part) -> String {
    let r = p.result();
    let g = |k: &str| get(r, k);
    let what = match p.step.kind {
        Kind::Apps => {
            let mib = r
                .and_then(|r| num(r, "limit"))
                .map_or("?".into(), |l| format!("{:.1}", l * 4096.0 / 1048576.0));
            format!(
                "1 directory + 1 node, {} mode; owned pages capped at {} ({mib} MiB), below the datasets kv:{} and search:{}; YCSB-C `app kv --dist zipf:{} --runtime {}`; GET-SCAN the same + `--scan-frac {} --scan-len {} --scan-group scan`; file search `app search --passes {}`; policies {}; each run from an empty cache, each policy's run paired with a FIFO run just before it. Busy: 1 node + the directory (2 instances)",
                g("mode"), g("limit"), g("kv_size"), g("search_size"), g("theta"), g("runtime"),
                g("scan_frac"), g("scan_len"), g("passes"), g("policies")
            )
        }
        Kind::Cluster => {
            let busy = r
                .and_then(|r| num(r, "nodes"))
                .map_or("?".into(), |n| format!("{:.0}", n + 1.0));
            format!(
                "1 directory + {n} nodes, {} mode; webserver:{} dataset; owned pages capped at {} per node; `app webserver --runtime {}` on all nodes at once from empty caches, {} round(s), policies in turn. Busy: all {n} nodes + the directory ({busy} instances)",
                g("mode"), g("size"), g("limit"), g("runtime_s"), g("rounds"), n = g("nodes")
            )
        }
        Kind::Promote(m) => format!(
            "1 directory + 2 nodes, {} mode{}, `--cxl-latency-ns {}`; node 2 reads a {} file node 1 owns (CH-R): fio 4k randread, libaio, iodepth 1, {} s per run, `promote=0` then `promote={}`, node 2's cache dropped before each pair, {} round(s) (medians). Busy: node 2 + the directory (2 of 3 instances)",
            m.name(), tier_mode_note(m), g("cxl_latency_ns"), g("size"), g("runtime_s"), g("threshold"), g("rounds")
        ),
    };
    format!(
        "- **{}** (`{}`): {what}.",
        p.step.kind.title(),
        p.step.command_line()
    )
}

/// The table of one workload.
pub fn workload_table(s: &Section, workload: &str, policies: &[String]) -> String {
    let mut t = String::new();
    let unit = s
        .apps
        .iter()
        .find(|r| r.workload == workload && !r.unit.is_empty())
        .map_or(String::new(), |r| format!(" ({})", r.unit));
    let _ = writeln!(
        t,
        "| policy | hit ratio | throughput{unit} | vs FIFO | per CPU-s vs FIFO | cache_ext (published) |"
    );
    let _ = writeln!(t, "| --- | --- | --- | --- | --- | --- |");
    for pol in policies {
        let Some(r) = s.apps_row(workload, pol) else {
            let _ = writeln!(
                t,
                "| {pol} | n/a | n/a | n/a | n/a | {} |",
                published::cell(workload, pol)
            );
            continue;
        };
        let name = if r.runs > 1 {
            format!("{pol} ({} runs)", r.runs)
        } else {
            pol.clone()
        };
        let _ = writeln!(
            t,
            "| {name} | {} | {} | {} | {} | {} |",
            span(r.hit_ratio, ratio3),
            span(r.throughput, amount),
            x(r.vs_fifo),
            x(r.per_cpu_vs_fifo),
            published::cell(workload, pol)
        );
    }
    if let Some(p) = published::for_workload(workload) {
        if !policies.iter().any(|q| q == p.policy) {
            let _ = writeln!(
                t,
                "| ({} not run) | | | | | {} ({:.2}x) |",
                p.policy, p.what, p.ratio
            );
        }
    }
    t
}

/// The multi-node table: per policy the medians and the ratio to the
/// first policy.
pub fn cluster_table(s: &Section) -> String {
    let mut t = String::new();
    let first = s
        .cluster
        .iter()
        .find(|r| r.kind == "median")
        .map_or("the first policy".to_string(), |r| {
            format!("`{}`", r.policy)
        });
    let _ = writeln!(
        t,
        "| policy | cluster ops/s (median) | misses/op (median) | invalidations received (median) | ops/s vs {first} | misses/op vs {first} | per round: ops/s |"
    );
    let _ = writeln!(t, "| --- | --- | --- | --- | --- | --- | --- |");
    for r in s.cluster.iter().filter(|r| r.kind == "median") {
        let rounds: Vec<String> = s
            .cluster
            .iter()
            .filter(|q| q.kind == "round" && q.policy == r.policy)
            .map(|q| opt(q.ops, amount))
            .collect();
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.policy,
            opt(r.ops, amount),
            opt(r.misses_per_op, amount),
            opt(r.invalidations, amount),
            x(r.ops_vs_first),
            x(r.misses_per_op_vs_first),
            rounds.join(" / ")
        );
    }
    t
}

/// One mode's row of the tiering table (n/a throughout without figures).
fn promote_row(mode: TierMode, p: Option<&Promote>) -> String {
    let f = |k: fn(&Promote) -> Option<f64>| p.and_then(k);
    let replicas = match (f(|p| p.replica_pages), f(Promote::replica_kib)) {
        (Some(n), Some(kib)) => format!("{n:.0} ({kib:.0} KiB)"),
        _ => "n/a".into(),
    };
    format!(
        "| {} | {} | {} | {} | {} | {} | {} | {replicas} |",
        mode.name(),
        opt(f(|p| p.off_mean_ns), us),
        opt(f(|p| p.on_mean_ns), us),
        x(f(Promote::mean_ratio)),
        opt(f(|p| p.off_p50_ns), us),
        opt(f(|p| p.on_p50_ns), us),
        x(f(Promote::p50_ratio)),
    )
}

/// The tiering table: one row per mode run, off / on, their ratio, the
/// replicas' memory.
pub fn promote_table(s: &Section) -> String {
    if s.promote.is_empty() {
        return "No figures (see Problems).\n".into();
    }
    let mut t = String::new();
    let _ = writeln!(
        t,
        "| mode | mean off (us) | mean on (us) | mean on / off | p50 off (us) | p50 on (us) | p50 on / off | replica pages on node 2 |"
    );
    let _ = writeln!(t, "| --- | --- | --- | --- | --- | --- | --- | --- |");
    for m in s.promote_modes() {
        let _ = writeln!(t, "{}", promote_row(m, s.promote_of(m)));
    }
    let _ = writeln!(
        t,
        "\nCH-R read latency on node 2, each the median of the rounds' mean or p50; on / off below 1: promotion helps. Replica pages: node 2's after the last run, the extra frames promotion used (4 KiB of node memory each)."
    );
    t
}

/// The section `## Eviction policies`.
pub fn section_md(s: &Section) -> String {
    let mut t = String::new();
    let _ = writeln!(t, "## Eviction policies\n");
    let _ = writeln!(
        t,
        "What cache_ext measured, as {} run: three scripts one after the other (bench-promote.sh twice, in relaxed and in strong mode), each run on its own cluster (QEMU, TCG); every ratio is within one script's run. Their full output: `policies/*.log`.\n",
        if s.quick { "a `--quick`" } else { "a full" }
    );
    let _ = writeln!(t, "### Parameters\n");
    for p in &s.parts {
        let _ = writeln!(t, "{}", params_line(p));
    }
    let _ = writeln!(
        t,
        "\n| script | wall time | status | log |\n| --- | --- | --- | --- |"
    );
    for p in &s.parts {
        let st = p.outcome.failure().unwrap_or_else(|| "ok".into());
        let _ = writeln!(
            t,
            "| {} | {:.0} s | {st} | `{}` |",
            p.step.kind.label(),
            p.outcome.seconds,
            p.log
        );
    }
    let pols = s
        .part(Kind::Apps)
        .map(Section::apps_policies)
        .unwrap_or_default();
    let apps_result = s.part(Kind::Apps).and_then(Part::result);
    let titles = [
        format!(
            "YCSB-C (`app kv`, zipfian keys, theta {})",
            get(apps_result, "theta")
        ),
        "GET-SCAN (YCSB-C + 0.05% scans)".to_string(),
        "File search (`app search`, every file read whole, in order)".to_string(),
    ];
    for (w, title) in WORKLOADS.iter().zip(titles) {
        let _ = writeln!(t, "\n### {title}\n");
        let _ = write!(t, "{}", workload_table(s, w, &pols));
    }
    let _ = writeln!(
        t,
        "\nHit ratio: 1 - misses / page accesses (GET-SCAN: the GETs' own, group `default`); vs FIFO: throughput / the paired FIFO run's; per CPU-s: throughput per second of the node's and directory's QEMU CPU time, the steadier figure on a shared host. The fifo row shows the range of its runs."
    );
    let nodes = get(s.part(Kind::Cluster).and_then(Part::result), "nodes");
    let _ = writeln!(
        t,
        "\n### Multi-node: `webserver` on {nodes} nodes, cluster-aware vs LRU\n"
    );
    let _ = write!(t, "{}", cluster_table(s));
    let _ = writeln!(
        t,
        "\n### Tiering: CH-R read latency, promotion off / on, per mode\n"
    );
    let _ = write!(t, "{}", promote_table(s));
    let _ = writeln!(t, "\n### cache_ext's published figures\n");
    let _ = writeln!(t, "Source: {SOURCE}. {CAVEAT}\n");
    for p in CACHE_EXT {
        let ours = s.apps_row(p.workload, p.policy);
        let _ = writeln!(
            t,
            "- {}: {} ({:.2}x); ours, `{}` on {}: {} throughput, {} per CPU-s vs FIFO.",
            p.workload,
            p.what,
            p.ratio,
            p.policy,
            p.workload,
            x(ours.and_then(|r| r.vs_fifo)),
            x(ours.and_then(|r| r.per_cpu_vs_fifo))
        );
    }
    let _ = writeln!(t, "\n### Problems\n");
    if s.problems.is_empty() {
        let _ = writeln!(
            t,
            "None: every script succeeded and every expected row is there."
        );
    }
    for p in &s.problems {
        let _ = writeln!(t, "- {p}");
    }
    if !s.notes.is_empty() {
        let _ = writeln!(t, "\n### Notes\n");
        for n in &s.notes {
            let _ = writeln!(t, "- {n}");
        }
    }
    t
}

/// The whole report.md.
pub fn report_md(s: &Section, machine: &Value, run_label: &str, seconds: f64) -> String {
    let m = |k: &str| machine[k].as_str().unwrap_or("?").to_string();
    let mut t = String::new();
    let _ = writeln!(t, "# onecopy: Eviction policies\n");
    let _ = writeln!(
        t,
        "{run_label}, {seconds:.0} s in all. {}\n",
        if s.problems.is_empty() {
            "Every part succeeded.".to_string()
        } else {
            format!(
                "**Incomplete: {} problem(s)** (listed under Problems).",
                s.problems.len()
            )
        }
    );
    let _ = writeln!(
        t,
        "Machine: {} CPUs ({}), {}; TCG, one vCPU per instance; the host may have run other work: only ratios within one script's run count.\n",
        m("nproc"),
        m("cpu"),
        m("qemu")
    );
    t.push_str(&section_md(s));
    t
}
