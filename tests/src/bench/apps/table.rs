//! The Fig. 10 arithmetic: per-node throughput averaged over the nodes,
//! normalized to single-node `private` (DPC's metric), the ratio vs
//! `private` at the same N, geomeans over the apps, and the goals
//! (DPC's Fig. 10 figures as targets) judged on one run. Pure (host-tested).

use serde_json::{json, Value};

use super::plan::App;

/// One (app, mode, N) run: every node's figure, or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// `app NAME`.
    pub app: String,
    /// Mode.
    pub mode: String,
    /// Nodes that ran the app at once.
    pub nodes: u8,
    /// Each node's throughput, node 1 first (empty if it failed).
    pub per_node: Vec<f64>,
    /// Each node's QEMU CPU time over the run / wall time (1.0 = a core).
    pub cpu_nodes: Vec<f64>,
    /// The directory's CPU share over the run.
    pub cpu_dir: Option<f64>,
    /// Wall time of the run (every node's command, s).
    pub wall_s: f64,
    /// Unit of the throughput.
    pub unit: String,
    /// Why the cell has no figure.
    pub error: Option<String>,
    /// Every node's RESULT json.
    pub results: Vec<Value>,
}

impl Cell {
    /// Per-node throughput averaged over the nodes (None if it failed).
    pub fn per_node_mean(&self) -> Option<f64> {
        if self.error.is_some() || self.per_node.len() != usize::from(self.nodes) {
            return None;
        }
        mean(&self.per_node)
    }

    /// The nodes' throughputs added up.
    pub fn aggregate(&self) -> Option<f64> {
        self.per_node_mean().map(|m| m * f64::from(self.nodes))
    }
}

/// Arithmetic mean of finite values (None for none).
pub fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty() && v.iter().all(|x| x.is_finite()))
        .then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Geometric mean of positive finite values (None for none, or if one
/// is not positive: a zero throughput has no geomean).
pub fn geomean(v: &[f64]) -> Option<f64> {
    if v.is_empty() || v.iter().any(|x| !x.is_finite() || *x <= 0.0) {
        return None;
    }
    Some((v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp())
}

/// `a / b` where both exist and `b > 0`.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 && a.is_finite() => Some(a / b),
        _ => None,
    }
}

/// Every cell of a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Study {
    /// In measuring order.
    pub cells: Vec<Cell>,
}

impl Study {
    /// The cell of (app, mode, N).
    pub fn cell(&self, app: &str, mode: &str, n: u8) -> Option<&Cell> {
        self.cells
            .iter()
            .find(|c| c.app == app && c.mode == mode && c.nodes == n)
    }

    /// Per-node mean of (app, mode, N).
    pub fn per_node(&self, app: &str, mode: &str, n: u8) -> Option<f64> {
        self.cell(app, mode, n).and_then(Cell::per_node_mean)
    }

    /// DPC's figure: per-node mean / single-node `private`'s.
    pub fn normalized(&self, app: &str, mode: &str, n: u8) -> Option<f64> {
        ratio(
            self.per_node(app, mode, n),
            self.per_node(app, "private", 1),
        )
    }

    /// Per-node mean / `private`'s at the same N (the same CPU sharing
    /// applies to both).
    pub fn vs_private_same_n(&self, app: &str, mode: &str, n: u8) -> Option<f64> {
        ratio(
            self.per_node(app, mode, n),
            self.per_node(app, "private", n),
        )
    }

    /// Geomean of `f(app)` over the apps DPC counts (None if one is
    /// missing).
    pub fn geomean_over(&self, apps: &[App], f: impl Fn(&str) -> Option<f64>) -> Option<f64> {
        let v: Option<Vec<f64>> = apps
            .iter()
            .filter(|a| a.in_geomean)
            .map(|a| f(a.name))
            .collect();
        geomean(&v?)
    }
}

/// DPC's published numbers (seed 000, §6.3, Fig. 10 and the abstract),
/// shown beside ours: (what, value).
pub const DPC_PUBLISHED: &[(&str, &str)] = &[
    (
        "1 node, DPC and DPC_SC vs Virtiofs",
        "within 2% on every app",
    ),
    ("2 nodes, geomean over the apps, DPC (relaxed)", "2.8x"),
    ("2 nodes, geomean over the apps, DPC_SC (strong)", "2.5x"),
    ("2-4 nodes, DeepSeek (infer)", "up to 12.4x"),
    ("2-4 nodes, Webserver", "up to 16.2x"),
    ("2-4 nodes, Fileserver", "up to 15.2x"),
    ("geomean across workloads (abstract)", "5.6x"),
    ("per-node performance as nodes are added", "never drops"),
];

/// One goal (a DPC figure as the target), judged on this run.
#[derive(Debug, Clone, PartialEq)]
pub struct Goal {
    /// The goal.
    pub what: String,
    /// Our figure(s).
    pub ours: String,
    /// Met, missed, or not measured (None).
    pub met: Option<bool>,
}

fn fmt_x(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |x| format!("{x:.2}x"))
}

/// The goals (DPC's Fig. 10 figures as targets) for the single-copy
/// modes in `modes`.
pub fn goals(s: &Study, apps: &[App], modes: &[String], nodes: &[u8]) -> Vec<Goal> {
    let sc: Vec<&str> = modes
        .iter()
        .map(String::as_str)
        .filter(|m| *m == "strong" || *m == "relaxed")
        .collect();
    let mut out = Vec::new();
    for m in &sc {
        // 1 node: within 2% of private on every app (not slower by more).
        let rs: Vec<(String, Option<f64>)> = apps
            .iter()
            .map(|a| (a.name.to_string(), s.vs_private_same_n(a.name, m, 1)))
            .collect();
        let met = rs
            .iter()
            .map(|(_, r)| r.map(|r| r >= 0.98))
            .collect::<Option<Vec<bool>>>();
        out.push(Goal {
            what: format!("1 node: {m} within 2% of private on every app (ratio >= 0.98)"),
            ours: rs
                .iter()
                .map(|(a, r)| format!("{a} {}", fmt_x(*r)))
                .collect::<Vec<_>>()
                .join(", "),
            met: met.map(|v| v.iter().all(|x| *x)),
        });
    }
    if let Some(&top) = nodes.iter().filter(|n| **n > 1).max() {
        for m in &sc {
            let g = s.geomean_over(apps, |a| s.vs_private_same_n(a, m, top));
            out.push(Goal {
                what: format!(
                    "{top} nodes: {m} geomean over DPC's five apps >= 5.6x private at the same N"
                ),
                ours: fmt_x(g),
                met: g.map(|g| g >= 5.6),
            });
            let w = s.vs_private_same_n("webserver", m, top);
            out.push(Goal {
                what: format!("{top} nodes: {m} webserver >= 16.2x private at the same N"),
                ours: fmt_x(w),
                met: w.map(|w| w >= 16.2),
            });
        }
        let lower: Vec<u8> = nodes
            .iter()
            .copied()
            .filter(|n| *n > 1 && *n < top)
            .collect();
        if let Some(&mid) = lower.last() {
            for m in &sc {
                let pairs: Vec<(String, Option<f64>, Option<f64>)> = apps
                    .iter()
                    .map(|a| {
                        (
                            a.name.to_string(),
                            s.vs_private_same_n(a.name, m, mid),
                            s.vs_private_same_n(a.name, m, top),
                        )
                    })
                    .collect();
                let met = pairs
                    .iter()
                    .map(|(_, a, b)| match (a, b) {
                        (Some(a), Some(b)) => Some(b >= a),
                        _ => None,
                    })
                    .collect::<Option<Vec<bool>>>();
                out.push(Goal {
                    what: format!(
                        "{m}: per-node vs private not lower at {top} nodes than at {mid}"
                    ),
                    ours: pairs
                        .iter()
                        .map(|(a, x, y)| format!("{a} {} -> {}", fmt_x(*x), fmt_x(*y)))
                        .collect::<Vec<_>>()
                        .join(", "),
                    met: met.map(|v| v.iter().all(|x| *x)),
                });
            }
        }
    }
    out
}

/// A goal as JSON.
pub fn goal_json(g: &Goal) -> Value {
    json!({ "goal": g.what, "ours": g.ours, "met": g.met })
}
