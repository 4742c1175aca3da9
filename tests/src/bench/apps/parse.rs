//! Reading what the nodes print: an `app`'s `RESULT {json}` line, the
//! boot log's node cache size, and a QEMU process's CPU time. Pure.

use serde_json::Value;

/// What one node's `app` run reported.
#[derive(Debug, Clone, PartialEq)]
pub struct AppResult {
    /// `app` in the RESULT line.
    pub app: String,
    /// Node that ran it.
    pub node: u8,
    /// Mode it reported.
    pub mode: String,
    /// Headline throughput.
    pub throughput: f64,
    /// Its metric (`geomean_flowop_ops_per_s`, ...).
    pub metric: String,
    /// Its unit.
    pub unit: String,
    /// Top-level operations.
    pub operations: u64,
    /// The whole RESULT document.
    pub raw: Value,
}

/// Parses the `RESULT {json}` line of an `app` run's output; checks that
/// it is the app, node and mode asked for and that its throughput is a
/// finite number.
pub fn app_result(text: &str, app: &str, node: u8, mode: &str) -> Result<AppResult, String> {
    let line = text
        .lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix("RESULT "))
        .ok_or_else(|| format!("n{node}: no RESULT line in app {app}'s output"))?;
    let v: Value = serde_json::from_str(line)
        .map_err(|e| format!("n{node}: app {app}: RESULT is not JSON ({e})"))?;
    let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    let got_app = s("app").ok_or_else(|| format!("n{node}: RESULT has no app"))?;
    if got_app != app {
        return Err(format!("n{node}: RESULT is for app {got_app}, not {app}"));
    }
    let got_node = v.get("node").and_then(Value::as_u64);
    if got_node != Some(u64::from(node)) {
        return Err(format!("n{node}: RESULT says node {got_node:?}"));
    }
    let got_mode = s("mode").unwrap_or_default();
    if got_mode != mode {
        return Err(format!(
            "n{node}: RESULT says mode '{got_mode}', not {mode}"
        ));
    }
    let throughput = v
        .get("throughput")
        .and_then(Value::as_f64)
        .filter(|t| t.is_finite() && *t >= 0.0)
        .ok_or_else(|| format!("n{node}: app {app}: RESULT has no throughput number"))?;
    Ok(AppResult {
        app: got_app,
        node,
        mode: got_mode,
        throughput,
        metric: s("metric").unwrap_or_default(),
        unit: s("unit").unwrap_or_default(),
        operations: v.get("operations").and_then(Value::as_u64).unwrap_or(0),
        raw: v,
    })
}

/// The page count of a boot log line `... node cache: N pages (...)`.
pub fn node_cache_pages(line: &str) -> Option<usize> {
    let rest = &line[line.find("node cache: ")? + "node cache: ".len()..];
    let (n, tail) = rest.split_once(' ')?;
    tail.starts_with("pages").then(|| n.parse().ok()).flatten()
}

/// utime + stime (clock ticks) of a `/proc/PID/stat` line. The command
/// name (field 2) is in parentheses and may hold spaces, so the fields
/// are counted after its closing parenthesis.
pub fn proc_cpu_ticks(stat: &str) -> Option<u64> {
    let after = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = after.split_whitespace().collect();
    // after ')': state(3) ppid(4) ... utime is field 14, stime 15.
    let utime: u64 = f.get(14 - 3)?.parse().ok()?;
    let stime: u64 = f.get(15 - 3)?.parse().ok()?;
    Some(utime + stime)
}
