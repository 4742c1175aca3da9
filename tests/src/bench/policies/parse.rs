//! Reading the scripts' machine-readable lines: `ROW {json}` (one per
//! table row) and `RESULT {json}` (parameters, per-run figures). Pure;
//! nothing here panics on what a script printed: a line that does not
//! decode is skipped and noted.

use serde_json::Value;

use super::plan::TierMode;

/// The `ROW` and `RESULT` documents of one script's output.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Lines {
    /// Every `ROW` object, in order.
    pub rows: Vec<Value>,
    /// Every `RESULT` object, in order.
    pub results: Vec<Value>,
    /// What was skipped and why.
    pub malformed: Vec<String>,
}

fn clip(s: &str) -> String {
    let t: String = s.chars().take(120).collect();
    if t.len() < s.len() {
        format!("{t}...")
    } else {
        t
    }
}

/// The `ROW` / `RESULT` lines of `text`: only lines that start with the
/// tag (a node's `[n1] RESULT` echoed in an error dump is not ours).
pub fn scan(text: &str) -> Lines {
    let mut l = Lines::default();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_end();
        let (tag, body) = line.split_once(' ').unwrap_or((line, ""));
        if tag != "ROW" && tag != "RESULT" {
            continue;
        }
        match serde_json::from_str::<Value>(body) {
            Ok(v @ Value::Object(_)) => {
                if tag == "ROW" {
                    l.rows.push(v);
                } else {
                    l.results.push(v);
                }
            }
            Ok(_) => l.malformed.push(format!(
                "line {}: {tag} is not a JSON object: {}",
                i + 1,
                clip(body)
            )),
            Err(e) => l.malformed.push(format!(
                "line {}: {tag} is not JSON ({e}): {}",
                i + 1,
                clip(body)
            )),
        }
    }
    l
}

/// A number, or a range of them (the FIFO row: its runs' spread).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    /// Smallest.
    pub lo: f64,
    /// Largest (= `lo` for one value).
    pub hi: f64,
}

/// A finite number under `key`.
pub fn num(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64).filter(|x| x.is_finite())
}

/// A string under `key`.
pub fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// `key` as one number, or `key_min`..`key_max`.
fn span(v: &Value, key: &str) -> Option<Span> {
    if let Some(x) = num(v, key) {
        return Some(Span { lo: x, hi: x });
    }
    let lo = num(v, &format!("{key}_min"))?;
    let hi = num(v, &format!("{key}_max"))?;
    Some(Span { lo, hi })
}

/// One row of bench-policy-apps.sh's tables.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyRow {
    /// `YCSB-C`, `GET-SCAN` or `search`.
    pub workload: String,
    /// Throughput unit (`lookups/s`, ...).
    pub unit: String,
    /// The policy.
    pub policy: String,
    /// FIFO's row: how many runs it spans (1 for the others).
    pub runs: u32,
    /// Hit ratio.
    pub hit_ratio: Option<Span>,
    /// Throughput (wall clock).
    pub throughput: Option<Span>,
    /// Throughput per CPU-second of the QEMUs.
    pub per_cpu_s: Option<Span>,
    /// Throughput / the paired FIFO run's.
    pub vs_fifo: Option<f64>,
    /// Per CPU-second / the paired FIFO run's.
    pub per_cpu_vs_fifo: Option<f64>,
    /// The script's extra column (scans run; MB/s/matches).
    pub extra: String,
}

/// A `ROW` of bench-policy-apps.sh, or why not.
pub fn policy_row(v: &Value) -> Result<PolicyRow, String> {
    if text(v, "bench").as_deref() != Some("policy-apps") {
        return Err("not a policy-apps row".into());
    }
    let need = |k: &str| text(v, k).ok_or_else(|| format!("policy-apps ROW without {k}"));
    Ok(PolicyRow {
        workload: need("workload")?,
        unit: text(v, "unit").unwrap_or_default(),
        policy: need("policy")?,
        runs: v
            .get("runs")
            .and_then(Value::as_u64)
            .map_or(1, |r| r.min(u64::from(u32::MAX)) as u32),
        hit_ratio: span(v, "hit_ratio"),
        throughput: span(v, "throughput"),
        per_cpu_s: span(v, "per_cpu_s"),
        vs_fifo: num(v, "vs_fifo"),
        per_cpu_vs_fifo: num(v, "per_cpu_vs_fifo"),
        extra: text(v, "extra").unwrap_or_default(),
    })
}

/// One row of bench-cluster-policy.sh: a round, or a policy's medians.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterRow {
    /// `round` or `median`.
    pub kind: String,
    /// The round (1-based), for a round's row.
    pub round: Option<u32>,
    /// The policy.
    pub policy: String,
    /// Cluster ops/s (sum over the nodes).
    pub ops: Option<f64>,
    /// Misses (page requests to the directory).
    pub misses: Option<f64>,
    /// Misses per op.
    pub misses_per_op: Option<f64>,
    /// Invalidations the nodes received.
    pub invalidations: Option<f64>,
    /// Median ops/s / the first policy's.
    pub ops_vs_first: Option<f64>,
    /// Median misses per op / the first policy's.
    pub misses_per_op_vs_first: Option<f64>,
}

/// A `ROW` of bench-cluster-policy.sh, or why not.
pub fn cluster_row(v: &Value) -> Result<ClusterRow, String> {
    if text(v, "bench").as_deref() != Some("cluster-policy") {
        return Err("not a cluster-policy row".into());
    }
    let kind = text(v, "row").ok_or("cluster-policy ROW without row")?;
    if kind != "round" && kind != "median" {
        return Err(format!("cluster-policy ROW of unknown kind '{kind}'"));
    }
    Ok(ClusterRow {
        round: v
            .get("round")
            .and_then(Value::as_u64)
            .and_then(|r| u32::try_from(r).ok()),
        kind,
        policy: text(v, "policy").ok_or("cluster-policy ROW without policy")?,
        ops: num(v, "ops"),
        misses: num(v, "misses"),
        misses_per_op: num(v, "misses_per_op"),
        invalidations: num(v, "invalidations"),
        ops_vs_first: num(v, "ops_vs_first"),
        misses_per_op_vs_first: num(v, "misses_per_op_vs_first"),
    })
}

/// bench-promote.sh's RESULT.
#[derive(Debug, Clone, PartialEq)]
pub struct Promote {
    /// The cluster mode (`relaxed`, `strong`); `relaxed` when the RESULT
    /// has none (the scripts before `--mode` ran only that).
    pub mode: String,
    /// Emulated CXL latency (ns).
    pub cxl_latency_ns: Option<f64>,
    /// `promote=T`.
    pub threshold: Option<f64>,
    /// File size (`1m`).
    pub size: String,
    /// Seconds per fio run.
    pub runtime_s: Option<f64>,
    /// Rounds (off, on).
    pub rounds: Option<f64>,
    /// Median of the runs' mean latency, promotion off (ns).
    pub off_mean_ns: Option<f64>,
    /// The same, promotion on.
    pub on_mean_ns: Option<f64>,
    /// Median of the runs' p50, promotion off (ns).
    pub off_p50_ns: Option<f64>,
    /// The same, promotion on.
    pub on_p50_ns: Option<f64>,
    /// Replica pages node 2 held after the last run.
    pub replica_pages: Option<f64>,
}

impl Promote {
    /// Mean latency on / off (< 1: promotion helps).
    pub fn mean_ratio(&self) -> Option<f64> {
        ratio(self.on_mean_ns, self.off_mean_ns)
    }

    /// p50 on / off.
    pub fn p50_ratio(&self) -> Option<f64> {
        ratio(self.on_p50_ns, self.off_p50_ns)
    }

    /// The replicas' node memory (4 KiB a page).
    pub fn replica_kib(&self) -> Option<f64> {
        self.replica_pages.map(|p| p * 4.0)
    }
}

/// a / b when both are numbers and b > 0.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// A promote RESULT's `mode`: missing or null is relaxed; anything but a
/// string is an error.
fn promote_mode(v: &Value) -> Result<String, String> {
    match v.get("mode") {
        None | Some(Value::Null) => Ok(TierMode::Relaxed.name().into()),
        Some(Value::String(m)) => Ok(m.clone()),
        Some(other) => Err(format!(
            "promote RESULT with mode {}",
            clip(&other.to_string())
        )),
    }
}

/// bench-promote.sh's RESULT, or why not.
pub fn promote(v: &Value) -> Result<Promote, String> {
    if text(v, "bench").as_deref() != Some("promote") {
        return Err("not a promote RESULT".into());
    }
    Ok(Promote {
        mode: promote_mode(v)?,
        cxl_latency_ns: num(v, "cxl_latency_ns"),
        threshold: num(v, "threshold"),
        size: text(v, "size").unwrap_or_default(),
        runtime_s: num(v, "runtime_s"),
        rounds: num(v, "rounds"),
        off_mean_ns: num(v, "off_mean_ns"),
        on_mean_ns: num(v, "on_mean_ns"),
        off_p50_ns: num(v, "off_p50_ns"),
        on_p50_ns: num(v, "on_p50_ns"),
        replica_pages: num(v, "replica_pages"),
    })
}

/// The last RESULT whose `bench` is `bench`.
pub fn result_of<'a>(l: &'a Lines, bench: &str) -> Option<&'a Value> {
    l.results
        .iter()
        .rev()
        .find(|v| text(v, "bench").as_deref() == Some(bench))
}
