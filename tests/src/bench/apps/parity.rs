//! One node, where the time goes: per app and mode at N = 1, the misses
//! and hits per operation and the CPU each operation cost the node and the
//! directory, from every node's RESULT counters and the instances' CPU
//! shares. A single node has nothing to share, so a mode that differs from
//! `private` here differs by its path, not by the single copy.

use std::fmt::Write as _;

use serde_json::Value;
use userland::stats::keys::cache as keys;

use super::table::{Cell, Study};

/// One (app, mode) at N = 1.
#[derive(Debug, Clone, PartialEq)]
pub struct Parity {
    pub app: String,
    pub mode: String,
    /// Throughput over `private`'s at N = 1.
    pub vs_private: Option<f64>,
    pub misses_per_op: Option<f64>,
    /// Hits (local, remote, private copies) over hits and misses.
    pub hit_ratio: Option<f64>,
    /// Pages read from the disk per operation.
    pub disk_pages_per_op: Option<f64>,
    /// The node's CPU time per operation (ms).
    pub node_cpu_ms_per_op: Option<f64>,
    /// The directory's CPU time per operation (ms).
    pub dir_cpu_ms_per_op: Option<f64>,
    /// The directory's CPU time per miss (us).
    pub dir_cpu_us_per_miss: Option<f64>,
}

fn counter(r: &Value, key: &str) -> f64 {
    r["cache"][key].as_f64().unwrap_or(0.0)
}

/// The parity figures of one N = 1 cell (`private`: the baseline's cell).
pub fn parity(c: &Cell, private: Option<&Cell>) -> Parity {
    let r = c.results.first().filter(|_| c.error.is_none());
    let ops = r
        .and_then(|r| r["operations"].as_f64())
        .filter(|&n| n > 0.0);
    let misses = r.map(|r| counter(r, keys::MISSES));
    let hits = r.map(|r| {
        counter(r, keys::HITS_LOCAL)
            + counter(r, keys::HITS_REMOTE)
            + counter(r, keys::HITS_PRIVATE)
    });
    let disk = r.map(|r| counter(r, keys::DISK_READS_PAGES) + counter(r, keys::DISK_READS_FILLS));
    let per_op = |v: Option<f64>| Some(v? / ops?);
    let node_cpu_s = c.cpu_nodes.first().map(|s| s * c.wall_s);
    let dir_cpu_s = c.cpu_dir.map(|s| s * c.wall_s);
    Parity {
        app: c.app.clone(),
        mode: c.mode.clone(),
        vs_private: match (c.per_node_mean(), private.and_then(Cell::per_node_mean)) {
            (Some(a), Some(b)) if b > 0.0 => Some(a / b),
            _ => None,
        },
        misses_per_op: per_op(misses),
        hit_ratio: match (hits, misses) {
            (Some(h), Some(m)) if h + m > 0.0 => Some(h / (h + m)),
            _ => None,
        },
        disk_pages_per_op: per_op(disk),
        node_cpu_ms_per_op: per_op(node_cpu_s.map(|s| s * 1e3)),
        dir_cpu_ms_per_op: per_op(dir_cpu_s.map(|s| s * 1e3)),
        dir_cpu_us_per_miss: match (dir_cpu_s, misses) {
            (Some(s), Some(m)) if m > 0.0 => Some(s * 1e6 / m),
            _ => None,
        },
    }
}

/// Every (app, mode) of the study at N = 1, apps in `apps` order.
pub fn parity_rows(st: &Study, apps: &[&str], modes: &[String]) -> Vec<Parity> {
    let mut out = Vec::new();
    for a in apps {
        let private = st.cell(a, "private", 1);
        for m in modes {
            if let Some(c) = st.cell(a, m, 1) {
                out.push(parity(c, private));
            }
        }
    }
    out
}

fn fmt(v: Option<f64>, digits: usize) -> String {
    v.map_or("n/a".into(), |v| format!("{v:.digits$}"))
}

/// The section of report.md.
pub fn parity_md(s: &mut String, rows: &[Parity]) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n## One node: where the time goes (N = 1)\n");
    let _ = writeln!(s, "At one node nothing is shared, so a mode that differs from `private` differs by its path. Per operation of the app: misses, pages read from the disk, and the CPU time of the node and of the directory (their CPU share over the run times its wall time); the hit ratio counts local, remote and private-copy hits.\n");
    let _ = writeln!(s, "| app | mode | vs private | misses/op | hit ratio | disk pages/op | node CPU ms/op | directory CPU ms/op | directory CPU us/miss |");
    let _ = writeln!(s, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for p in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            p.app,
            p.mode,
            p.vs_private.map_or("n/a".into(), |v| format!("{v:.2}x")),
            fmt(p.misses_per_op, 2),
            fmt(p.hit_ratio, 2),
            fmt(p.disk_pages_per_op, 2),
            fmt(p.node_cpu_ms_per_op, 2),
            fmt(p.dir_cpu_ms_per_op, 2),
            fmt(p.dir_cpu_us_per_miss, 0),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cell(mode: &str, tput: f64, ops: u64, misses: u64, hits: u64, cpu: (f64, f64)) -> Cell {
        Cell {
            app: "webserver".into(),
            mode: mode.into(),
            nodes: 1,
            per_node: vec![tput],
            cpu_nodes: vec![cpu.0],
            cpu_dir: Some(cpu.1),
            wall_s: 10.0,
            unit: "ops/s".into(),
            error: None,
            results: vec![json!({"operations": ops, "cache": {
                keys::MISSES: misses, keys::HITS_LOCAL: hits, keys::DISK_READS_PAGES: misses}})],
        }
    }

    #[test]
    fn figures_per_operation_and_per_miss() {
        let private = cell("private", 200.0, 2000, 4000, 4000, (0.5, 0.25));
        let strong = cell("strong", 100.0, 1000, 3000, 1000, (0.5, 0.5));
        let p = parity(&strong, Some(&private));
        assert_eq!(p.vs_private, Some(0.5));
        assert_eq!(p.misses_per_op, Some(3.0));
        assert_eq!(p.hit_ratio, Some(0.25));
        assert_eq!(p.disk_pages_per_op, Some(3.0));
        // 0.5 of a core over 10 s is 5 s: 5 ms per operation of 1000.
        assert_eq!(p.node_cpu_ms_per_op, Some(5.0));
        assert_eq!(p.dir_cpu_ms_per_op, Some(5.0));
        // The directory's 5 s over 3000 misses.
        assert!((p.dir_cpu_us_per_miss.unwrap() - 5e6 / 3000.0).abs() < 1e-6);
        let mut md = String::new();
        parity_md(&mut md, &[p]);
        assert!(
            md.contains("| webserver | strong | 0.50x | 3.00 | 0.25 | 3.00 | 5.00 | 5.00 | 1667 |"),
            "{md}"
        );
    }

    #[test]
    fn a_failed_cell_has_no_figures() {
        let mut c = cell("strong", 100.0, 1000, 3000, 1000, (0.5, 0.5));
        c.error = Some("timed out".into());
        c.per_node.clear();
        let p = parity(&c, None);
        assert_eq!(p.vs_private, None);
        assert_eq!(p.misses_per_op, None);
        assert_eq!(p.hit_ratio, None);
    }
}
