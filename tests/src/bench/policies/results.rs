//! results.json of `--policies`: the same data as report.md ("tiering":
//! one object per mode whose run gave figures, each with its "mode").
//! Pure.

use serde_json::{json, Value};

use super::parse::{ClusterRow, PolicyRow, Promote, Span};
use super::published::{CACHE_EXT, SOURCE};
use super::section::{Part, Section};

fn span(s: Option<Span>) -> Value {
    match s {
        None => Value::Null,
        Some(s) if s.lo == s.hi => json!(s.lo),
        Some(s) => json!({ "min": s.lo, "max": s.hi }),
    }
}

fn policy_row(r: &PolicyRow) -> Value {
    json!({
        "workload": r.workload,
        "policy": r.policy,
        "unit": r.unit,
        "runs": r.runs,
        "hit_ratio": span(r.hit_ratio),
        "throughput": span(r.throughput),
        "per_cpu_s": span(r.per_cpu_s),
        "vs_fifo": r.vs_fifo,
        "per_cpu_vs_fifo": r.per_cpu_vs_fifo,
        "extra": r.extra,
    })
}

fn cluster_row(r: &ClusterRow) -> Value {
    json!({
        "row": r.kind,
        "round": r.round,
        "policy": r.policy,
        "ops_per_s": r.ops,
        "misses": r.misses,
        "misses_per_op": r.misses_per_op,
        "invalidations_received": r.invalidations,
        "ops_vs_first": r.ops_vs_first,
        "misses_per_op_vs_first": r.misses_per_op_vs_first,
    })
}

fn promote(p: &Promote) -> Value {
    json!({
        "mode": p.mode,
        "cxl_latency_ns": p.cxl_latency_ns,
        "threshold": p.threshold,
        "size": p.size,
        "runtime_s": p.runtime_s,
        "rounds": p.rounds,
        "off_mean_ns": p.off_mean_ns,
        "on_mean_ns": p.on_mean_ns,
        "mean_on_over_off": p.mean_ratio(),
        "off_p50_ns": p.off_p50_ns,
        "on_p50_ns": p.on_p50_ns,
        "p50_on_over_off": p.p50_ratio(),
        "replica_pages": p.replica_pages,
        "replica_kib": p.replica_kib(),
    })
}

fn part(p: &Part) -> Value {
    json!({
        "script": format!("tools/{}", p.step.kind.script()),
        "command": p.step.command_line(),
        "timeout_s": p.step.timeout.as_secs(),
        "seconds": p.outcome.seconds,
        "exit_code": p.outcome.code,
        "timed_out": p.outcome.timed_out,
        "ok": p.outcome.ok(),
        "failure": p.outcome.failure(),
        "log": p.log,
        "result": p.result(),
    })
}

/// results.json.
pub fn results_json(s: &Section, machine: &Value, run_label: &str, seconds: f64) -> Value {
    json!({
        "study": "eviction policies",
        "run": run_label,
        "quick": s.quick,
        "machine": machine,
        "seconds": seconds,
        "parts": s.parts.iter().map(part).collect::<Vec<_>>(),
        "workloads": s.apps.iter().map(policy_row).collect::<Vec<_>>(),
        "multi_node": s.cluster.iter().map(cluster_row).collect::<Vec<_>>(),
        "tiering": s.promote.iter().map(promote).collect::<Vec<_>>(),
        "cache_ext_published": {
            "source": SOURCE,
            "figures": CACHE_EXT.iter().map(|p| json!({
                "workload": p.workload,
                "policy": p.policy,
                "ratio": p.ratio,
                "what": p.what,
            })).collect::<Vec<_>>(),
        },
        "problems": s.problems,
        "notes": s.notes,
        "complete": s.problems.is_empty(),
    })
}
