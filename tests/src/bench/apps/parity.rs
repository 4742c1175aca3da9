//! One node, where the time goes: per app and mode at N = 1, the misses
//! and hits per operation, the directory requests and disk I/Os per
//! operation, the time per miss split into phases (the node's round trips
//! and installs, the directory's lookup / disk / fill / reply on its own
//! clock), and the CPU each operation cost the node and the directory,
//! from every node's RESULT counters and the instances' CPU shares. A
//! single node has nothing to share, so a mode that differs from
//! `private` here differs by its path, not by the single copy.

use std::fmt::Write as _;

use serde_json::Value;
use userland::stats::keys::cache as keys;
use userland::stats::keys::dir as dir_keys;

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
    /// Requests the directory served per operation (every kind: page
    /// requests, file-server reads and writes, metadata).
    pub dir_requests_per_op: Option<f64>,
    /// Disk blocks the directory read per operation.
    pub disk_blocks_read_per_op: Option<f64>,
    /// Disk blocks the directory wrote per operation.
    pub disk_blocks_written_per_op: Option<f64>,
    /// Pages readahead fetched beyond what reads asked for, per operation.
    pub readahead_pages_per_op: Option<f64>,
    /// Time per miss by phase (us).
    pub phases: Option<Phases>,
}

/// The time of one miss, phase by phase (us): sums over the run divided
/// by the node's misses. Misses of several tasks overlap, so each is a
/// share of the summed latency, not of the wall time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Phases {
    /// The node's CPU time per miss (all its work, the app's included).
    pub node_cpu: Option<f64>,
    /// The node's synchronous round trips to the directory (its clock):
    /// metadata, write-backs, the misses of a `read` call; the reads its
    /// tasks send without blocking are not in it (their time is the
    /// directory's phases and the wait for their answers).
    pub request: f64,
    /// The directory's lookup, fill and reply.
    pub directory: f64,
    /// The disk reads the directory waited for.
    pub disk: f64,
    /// The node installing the answers (page cache fill, mapping).
    pub install: f64,
}

fn counter(r: &Value, key: &str) -> f64 {
    r["cache"][key].as_f64().unwrap_or(0.0)
}

/// The operations a RESULT's figures are per: its top-level operations,
/// but infer's tokens (its metric; a top-level operation is a sequence
/// of tokens).
fn operations(r: &Value) -> Option<f64> {
    if r["app"] == "infer" {
        return r["ops"]["token"]["count"].as_f64();
    }
    r["operations"].as_f64()
}

/// The parity figures of one N = 1 cell (`private`: the baseline's cell).
pub fn parity(c: &Cell, private: Option<&Cell>) -> Parity {
    let r = c.results.first().filter(|_| c.error.is_none());
    let ops = r.and_then(operations).filter(|&n| n > 0.0);
    let misses = r.map(|r| counter(r, keys::MISSES));
    let hits = r.map(|r| {
        counter(r, keys::HITS_LOCAL)
            + counter(r, keys::HITS_REMOTE)
            + counter(r, keys::HITS_PRIVATE)
    });
    let disk = r.map(|r| counter(r, keys::DISK_READS_PAGES) + counter(r, keys::DISK_READS_FILLS));
    let per_op = |v: Option<f64>| Some(v? / ops?);
    let dir_counter = |key: &str| r.and_then(|r| r["dir"][key].as_f64());
    // The CPU shares are over the whole command (warm-up and set-up
    // included), the counters over the measured phase: a share times the
    // measured phase's length is the CPU time it took (the wall time
    // where the RESULT has no phase length).
    let secs = r
        .and_then(|r| r["elapsed_ns"].as_f64())
        .filter(|&ns| ns > 0.0)
        .map_or(c.wall_s, |ns| ns / 1e9);
    let node_cpu_s = c.cpu_nodes.first().map(|s| s * secs);
    let dir_cpu_s = c.cpu_dir.map(|s| s * secs);
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
        dir_requests_per_op: per_op(dir_counter(dir_keys::REQUESTS_SERVED)),
        disk_blocks_read_per_op: per_op(dir_counter(dir_keys::DISK_BLOCKS_READ)),
        disk_blocks_written_per_op: per_op(dir_counter(dir_keys::DISK_BLOCKS_WRITTEN)),
        readahead_pages_per_op: per_op(r.map(|r| counter(r, keys::READAHEAD_PAGES))),
        phases: match (r, misses) {
            (Some(r), Some(m)) if m > 0.0 && r["miss_time_ns"].is_object() => {
                let t = &r["miss_time_ns"];
                let ns = |k: &str| t[k].as_f64().unwrap_or(0.0);
                let service = ns("dir_lookup") + ns("dir_fill") + ns("dir_reply");
                let us = |v: f64| v / 1e3 / m;
                Some(Phases {
                    node_cpu: node_cpu_s.map(|s| s * 1e6 / m),
                    request: us(ns("round_trips")),
                    directory: us(service),
                    disk: us(ns("dir_disk")),
                    install: us(ns("install")),
                })
            }
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
    let _ = writeln!(s, "At one node nothing is shared, so a mode that differs from `private` differs by its path. Per operation of the app (measured phase only): misses, pages read from the disk, requests the directory served (page requests, file-server reads and writes, metadata), disk blocks it read and wrote, readahead pages, and the CPU time of the node and of the directory (their CPU share over the command times the measured phase's length); the hit ratio counts local, remote and private-copy hits. These counters do not depend on the host's noise; the times do.\n");
    let _ = writeln!(s, "| app | mode | vs private | misses/op | hit ratio | disk pages/op | directory requests/op | disk blocks read/op | disk blocks written/op | readahead pages/op | node CPU ms/op | directory CPU ms/op |");
    let _ = writeln!(
        s,
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for p in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            p.app,
            p.mode,
            p.vs_private.map_or("n/a".into(), |v| format!("{v:.2}x")),
            fmt(p.misses_per_op, 2),
            fmt(p.hit_ratio, 2),
            fmt(p.disk_pages_per_op, 2),
            fmt(p.dir_requests_per_op, 2),
            fmt(p.disk_blocks_read_per_op, 2),
            fmt(p.disk_blocks_written_per_op, 2),
            fmt(p.readahead_pages_per_op, 2),
            fmt(p.node_cpu_ms_per_op, 2),
            fmt(p.dir_cpu_ms_per_op, 2),
        );
    }
    let _ = writeln!(s, "\n**Time per miss, by phase (us)**: sums over the measured phase divided by the node's misses; the misses of several tasks overlap, so these are shares of summed latency, not of the wall time (disk: queueing included). node: the node's CPU time per miss (all its work, the app's included); requests: the node's synchronous round trips to the directory (metadata, write-backs, a `read` call's misses; its tasks' reads go out without blocking and are not in it); directory: its lookup, fill and reply of the misses it timed (page fills, file-server reads); disk: their disk reads; install: the node putting answers in place (page cache fill, mapping); directory CPU: its CPU time per miss. Per operation: infer's are tokens.\n");
    let _ = writeln!(
        s,
        "| app | mode | node (CPU) | requests | directory | disk | install | directory CPU |"
    );
    let _ = writeln!(s, "| --- | --- | --- | --- | --- | --- | --- | --- |");
    for p in rows {
        let ph = p.phases;
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            p.app,
            p.mode,
            fmt(ph.and_then(|x| x.node_cpu), 0),
            fmt(ph.map(|x| x.request), 0),
            fmt(ph.map(|x| x.directory), 0),
            fmt(ph.map(|x| x.disk), 0),
            fmt(ph.map(|x| x.install), 0),
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
                keys::MISSES: misses, keys::HITS_LOCAL: hits, keys::DISK_READS_PAGES: misses,
                keys::READAHEAD_PAGES: ops},
                "dir": {dir_keys::REQUESTS_SERVED: 2 * ops, dir_keys::DISK_BLOCKS_READ: misses,
                    dir_keys::DISK_BLOCKS_WRITTEN: 0},
                "miss_time_ns": {"round_trips": misses * 300_000, "install": misses * 5_000,
                    "dir_timed": misses, "dir_lookup": misses * 10_000, "dir_disk": misses * 200_000,
                    "dir_fill": misses * 20_000, "dir_reply": misses * 10_000}})],
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
        assert_eq!(p.dir_requests_per_op, Some(2.0));
        assert_eq!(p.disk_blocks_read_per_op, Some(3.0));
        assert_eq!(p.disk_blocks_written_per_op, Some(0.0));
        assert_eq!(p.readahead_pages_per_op, Some(1.0));
        // Per miss: 300 us of round trips; the directory's service
        // (40 us) and disk (200 us).
        let ph = p.phases.unwrap();
        assert!((ph.request - 300.0).abs() < 1e-9, "{ph:?}");
        assert!((ph.directory - 40.0).abs() < 1e-9, "{ph:?}");
        assert!((ph.disk - 200.0).abs() < 1e-9, "{ph:?}");
        assert!((ph.install - 5.0).abs() < 1e-9, "{ph:?}");
        assert!((ph.node_cpu.unwrap() - 5e6 / 3000.0).abs() < 1e-6);
        let mut md = String::new();
        parity_md(&mut md, &[p]);
        assert!(
            md.contains(
                "| webserver | strong | 0.50x | 3.00 | 0.25 | 3.00 | 2.00 | 3.00 | 0.00 | 1.00 | 5.00 | 5.00 |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| webserver | strong | 1667 | 300 | 40 | 200 | 5 | 1667 |"),
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
        assert_eq!(p.phases, None);
    }

    #[test]
    fn cpu_time_is_taken_over_the_measured_phase() {
        let mut c = cell("strong", 100.0, 1000, 3000, 1000, (0.5, 0.25));
        // 10 s of command, of which 4 s measured (a warm-up before).
        c.results[0]["elapsed_ns"] = json!(4_000_000_000u64);
        let p = parity(&c, None);
        assert_eq!(p.node_cpu_ms_per_op, Some(2.0));
        assert_eq!(p.dir_cpu_ms_per_op, Some(1.0));
    }

    #[test]
    fn infer_is_per_token() {
        let mut c = cell("strong", 10.0, 2, 3000, 1000, (0.5, 0.5));
        c.app = "infer".into();
        c.results[0]["app"] = json!("infer");
        c.results[0]["ops"] = json!({"token": {"count": 300}});
        assert_eq!(parity(&c, None).misses_per_op, Some(10.0));
    }
}
