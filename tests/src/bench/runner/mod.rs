//! Drives the clusters: one at a time, every figure recorded (measured,
//! n/a or failed with its error), every cluster stopped.

use std::path::PathBuf;
use std::time::Instant;

use serde_json::Value;

use super::model::{dir_batch_scenario, Figure, DIR_BATCHES};
pub use super::opts::pool_mib;
use super::opts::{BenchOpts, Params};
use crate::host_tool;

const MIB: f64 = 1_048_576.0;

/// Scenario of the `bench rpc` figure.
pub const RPC_SCENARIO: &str = "empty request round trip";

/// Everything one run measured.
#[derive(Debug)]
pub struct Runner {
    /// Command line.
    pub opts: BenchOpts,
    /// Sizes and counts.
    pub params: Params,
    /// Results folder.
    pub out: PathBuf,
    /// Every figure, in measuring order.
    pub figures: Vec<Figure>,
    /// One record per cluster (launch output, stats, duration, failures).
    pub clusters: Vec<Value>,
    /// Warnings that are not figures (a failed clean-up, ...).
    pub notes: Vec<String>,
    /// Seconds spent per phase.
    pub phases: Vec<(String, f64)>,
    /// The onecopy-ctl binary.
    pub ctl: PathBuf,
    /// Start of the run, `YYYY-MM-DD HH:MM:SS UTC`.
    pub started_utc: String,
    started: Instant,
    /// Length of a run read back from results.json (`--render`).
    recorded_seconds: Option<f64>,
}

/// `onecopy-ctl` next to this executable, else the harness's default.
pub fn find_ctl() -> PathBuf {
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            let p = dir.join("onecopy-ctl");
            if p.is_file() {
                return p;
            }
        }
    }
    crate::default_ctl()
}

/// `onecopy-pingpong` next to this executable, else target/release.
pub fn find_pingpong() -> PathBuf {
    find_tool("onecopy-pingpong")
}

/// A host tool next to this executable, else in target/release.
pub fn find_tool(name: &str) -> PathBuf {
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            for d in [Some(dir), dir.parent()].into_iter().flatten() {
                let p = d.join(name);
                if p.is_file() {
                    return p;
                }
            }
        }
    }
    host_tool(name)
}

/// Workload name of the host page-directory figures.
pub const HOST_DIR_BENCH: &str = "pagedir-bench";

/// Scenarios of the host page-directory figures, with where each is in
/// `pagedir-bench`'s RESULT json.
pub fn host_dir_figures() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = [
        ("lookup (READ hit -> Shared)", "/lookup"),
        ("map (READ miss -> Fill, filled)", "/map"),
        ("drop (DROP)", "/drop"),
        ("invalidate, 0 sharers", "/inv0"),
        ("invalidate, 1 sharer", "/inv1"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    v.extend(
        DIR_BATCHES
            .iter()
            .map(|&b| (dir_batch_scenario(b), format!("/batch/{b}"))),
    );
    v
}

pub(crate) fn one_line(s: &str) -> String {
    let mut t: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if t.len() > 600 {
        let mut cut = 600;
        while !t.is_char_boundary(cut) {
            cut -= 1;
        }
        t.truncate(cut);
        t.push_str("...");
    }
    t
}

impl Runner {
    /// A runner writing into `out`.
    pub fn new(opts: BenchOpts, out: PathBuf) -> Runner {
        let params = Params::from_opts(&opts);
        Runner {
            opts,
            params,
            out,
            figures: Vec::new(),
            clusters: Vec::new(),
            notes: Vec::new(),
            phases: Vec::new(),
            ctl: find_ctl(),
            started_utc: super::iso(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0),
            ),
            started: Instant::now(),
            recorded_seconds: None,
        }
    }

    /// A finished run read back from its results.json (`--render`): its
    /// figures, clusters, notes and phases, its length and start date.
    #[allow(clippy::too_many_arguments)]
    pub fn restored(
        opts: BenchOpts,
        out: PathBuf,
        figures: Vec<Figure>,
        clusters: Vec<Value>,
        notes: Vec<String>,
        phases: Vec<(String, f64)>,
        seconds: f64,
        started_utc: String,
    ) -> Runner {
        let mut r = Runner::new(opts, out);
        r.figures = figures;
        r.clusters = clusters;
        r.notes = notes;
        r.phases = phases;
        r.recorded_seconds = Some(seconds);
        r.started_utc = started_utc;
        r
    }

    /// Seconds since the start (a restored run: its recorded length).
    pub fn elapsed(&self) -> f64 {
        self.recorded_seconds
            .unwrap_or_else(|| self.started.elapsed().as_secs_f64())
    }

    fn say(&self, msg: &str) {
        eprintln!("[{:7.1}s] {msg}", self.elapsed());
    }

    /// Runs everything: host ping-pong, then per mode the fio cluster, the
    /// invalidation / directory cluster and the small-pool cluster.
    pub fn run_all(&mut self) {
        let t = Instant::now();
        self.host_pingpong();
        self.phases
            .push(("host ping-pong".into(), t.elapsed().as_secs_f64()));
        let t = Instant::now();
        self.host_pagedir();
        self.phases
            .push(("host page directory".into(), t.elapsed().as_secs_f64()));
        for mode in self.opts.modes.clone() {
            let t = Instant::now();
            self.fio_cluster(&mode);
            self.phases
                .push((format!("{mode}: fio"), t.elapsed().as_secs_f64()));
            let t = Instant::now();
            self.inv_cluster(&mode);
            self.phases.push((
                format!("{mode}: invalidation + directory"),
                t.elapsed().as_secs_f64(),
            ));
            let t = Instant::now();
            self.big_cluster(&mode);
            self.phases.push((
                format!("{mode}: larger-than-pool read"),
                t.elapsed().as_secs_f64(),
            ));
        }
    }
}

mod fio;
mod host;
mod micro;
mod reclaim;
mod record;
mod session;
pub(crate) use session::spawn_guard;

#[cfg(test)]
mod tests;
