//! Drives the clusters: one at a time, every figure recorded (measured,
//! n/a or failed with its error), every cluster stopped.

use std::path::PathBuf;
use std::time::Instant;

use serde_json::{json, Value};

use super::interrupt;
use super::model::{dir_batch_scenario, Figure, DIR_BATCHES, ENGINES, WORKLOADS};
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
    /// Set when a signal stopped the run: where.
    pub partial: Option<Partial>,
    /// The run `--resume` continues.
    pub resume: Option<resume::Resume>,
}

/// Where a signal stopped a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Partial {
    /// `SIGINT`, `SIGTERM`.
    pub signal: String,
    /// The step it was in (or about to start).
    pub step: String,
}

impl Partial {
    /// results.json's `partial` (false for a run that was not stopped).
    pub fn to_json(p: Option<&Partial>) -> Value {
        match p {
            None => json!(false),
            Some(p) => json!({"interrupted_at": p.step, "signal": p.signal}),
        }
    }

    /// The record read back (`--render`).
    pub fn from_json(j: &Value) -> Option<Partial> {
        Some(Partial {
            step: j["interrupted_at"].as_str()?.to_string(),
            signal: j["signal"].as_str().unwrap_or("a signal").to_string(),
        })
    }
}

/// The steps being walked through: their plan, the figures `--resume`
/// keeps, the progress.
struct Walk {
    steps: Vec<steps::Step>,
    kept: Vec<Option<Vec<Figure>>>,
    progress: steps::Progress,
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
            partial: None,
            resume: None,
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
    /// invalidation / directory cluster and the small-pool cluster; one
    /// progress line per step. A signal stops it after the step it is in
    /// (the run is then [`Runner::partial`]); with [`Runner::resume`] the
    /// steps whose figures were all measured are kept, not run again.
    pub fn run_all(&mut self) {
        let plan = steps::plan(&self.opts.modes);
        let previous = self
            .resume
            .as_ref()
            .map(|r| r.figures.clone())
            .unwrap_or_default();
        let kept: Vec<Option<Vec<Figure>>> =
            plan.iter().map(|s| steps::kept(s, &previous)).collect();
        let (repeats, quick) = (self.params.repeats, self.opts.quick);
        let progress = steps::Progress::new(
            plan.iter().map(|s| s.weight(repeats, quick)).collect(),
            kept.iter().map(Option::is_some).collect(),
        );
        let mut w = Walk {
            steps: plan,
            kept,
            progress,
        };
        if !self.host_step(&mut w, 0, "host ping-pong", Runner::host_pingpong)
            || !self.host_step(&mut w, 1, "host page directory", Runner::host_pagedir)
        {
            return;
        }
        let fio_steps = WORKLOADS.len() * ENGINES.len();
        let mut i = 2;
        for mode in self.opts.modes.clone() {
            let fio: Vec<usize> = (i..i + fio_steps).collect();
            if !self.fio_cluster(&mode, &mut w, &fio) {
                return;
            }
            i += fio_steps;
            let phase = format!("{mode}: invalidation + directory");
            if !self.cluster_step(&mut w, i, &phase, &format!("{mode}-inv"), |r| {
                r.inv_cluster(&mode)
            }) {
                return;
            }
            i += 1;
            let phase = format!("{mode}: larger-than-pool read");
            if !self.cluster_step(&mut w, i, &phase, &format!("{mode}-bigfile"), |r| {
                r.big_cluster(&mode)
            }) {
                return;
            }
            i += 1;
        }
    }

    /// A host step; false when the run stops here.
    fn host_step(&mut self, w: &mut Walk, i: usize, phase: &str, f: fn(&mut Runner)) -> bool {
        self.cluster_step(w, i, phase, "host", f)
    }

    /// A step that is one phase (one cluster, or the host); false when
    /// the run stops here.
    fn cluster_step(
        &mut self,
        w: &mut Walk,
        i: usize,
        phase: &str,
        cluster: &str,
        f: impl FnOnce(&mut Runner),
    ) -> bool {
        match self.step_begin(w, i) {
            None => false,
            Some(true) => {
                self.keep_phase(phase, cluster);
                true
            }
            Some(false) => {
                let t = Instant::now();
                f(self);
                self.phases
                    .push((phase.to_string(), t.elapsed().as_secs_f64()));
                self.step_end(w, i, t)
            }
        }
    }

    /// Before step `i`: None when a signal stopped the run (it stops
    /// there), else whether the step is kept from the resumed run (its
    /// figures are then recorded) rather than measured (its progress line
    /// printed).
    fn step_begin(&mut self, w: &mut Walk, i: usize) -> Option<bool> {
        let label = w.steps.get(i)?.label();
        if let Some(sig) = interrupt::interrupted() {
            self.mark_partial(sig, &label);
            return None;
        }
        if let Some(figs) = w.kept.get_mut(i).and_then(Option::take) {
            let line = format!(
                "step {}/{}: {label}: kept from the interrupted run ({} figures)",
                i + 1,
                w.steps.len(),
                figs.len()
            );
            self.say(&line);
            self.log_line(&line);
            self.figures.extend(figs);
            return Some(true);
        }
        let line = steps::progress_line(
            i,
            w.steps.len(),
            &label,
            self.elapsed(),
            w.progress.eta(i, 1.0),
        );
        eprintln!("onecopy-bench: {line}");
        self.log_line(&line);
        Some(false)
    }

    /// After measuring step `i` (started at `t`): false when a signal
    /// stopped the run in it.
    fn step_end(&mut self, w: &mut Walk, i: usize, t: Instant) -> bool {
        w.progress.measured(i, t.elapsed().as_secs_f64());
        match interrupt::interrupted() {
            Some(sig) => {
                let label = w.steps.get(i).map(steps::Step::label).unwrap_or_default();
                self.mark_partial(sig, &label);
                false
            }
            None => true,
        }
    }

    /// Records where a signal stopped the run (the first place only).
    fn mark_partial(&mut self, sig: i32, step: &str) {
        if self.partial.is_none() {
            let signal = interrupt::signal_name(sig);
            self.say(&format!(
                "interrupted by {signal} at {step}: no further step"
            ));
            self.partial = Some(Partial {
                signal,
                step: step.to_string(),
            });
        }
    }

    /// A phase kept whole from the resumed run: its time and its
    /// cluster's record as they were.
    fn keep_phase(&mut self, phase: &str, cluster: &str) {
        let Some(r) = &self.resume else { return };
        if let Some(p) = r.phases.iter().find(|(n, _)| n == phase) {
            self.phases.push(p.clone());
        }
        if let Some(c) = r.clusters.iter().find(|c| c["name"] == cluster) {
            self.clusters.push(c.clone());
        }
    }
}

mod fio;
mod host;
mod micro;
mod reclaim;
mod record;
pub mod resume;
mod session;
pub mod steps;
pub(crate) use session::spawn_guard;

#[cfg(test)]
mod tests;
