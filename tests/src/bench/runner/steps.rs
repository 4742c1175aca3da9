//! The steps of a microbenchmark run (one progress line each, the unit
//! that `--resume` keeps or measures again) and the progress arithmetic.

use crate::bench::model::{
    dir_batch_scenario, figure_id, Figure, Status, Workload, DIR_BATCHES, ENGINES, GROUP_BIG,
    GROUP_DIR, GROUP_FIO, GROUP_HOST, GROUP_INV, SCENARIOS, WORKLOADS,
};

use super::{host_dir_figures, HOST_DIR_BENCH, RPC_SCENARIO};

/// What a step measures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StepKind {
    /// The host ping-pong.
    Pingpong,
    /// `pagedir-bench` on the host.
    Pagedir,
    /// One fio workload with one engine (CM, CM-R, CH-R) on the mode's
    /// fio cluster.
    Fio(&'static Workload, &'static str),
    /// The invalidation + directory cluster.
    Inv,
    /// The larger-than-pool read cluster.
    Big,
}

/// One step: a kind in a mode (`host` for the host figures).
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// What it measures.
    pub kind: StepKind,
    /// Its mode.
    pub mode: String,
}

impl Step {
    /// Nodes of the step's cluster (0: on the host).
    pub fn nodes(&self) -> u8 {
        match self.kind {
            StepKind::Pingpong | StepKind::Pagedir => 0,
            StepKind::Fio(..) | StepKind::Big => 2,
            StepKind::Inv => 3,
        }
    }

    /// `fio read-lat/libaio`, `invalidation + directory`, ...
    pub fn what(&self) -> String {
        match self.kind {
            StepKind::Pingpong => "host ping-pong".into(),
            StepKind::Pagedir => "host page directory".into(),
            StepKind::Fio(w, e) => format!("fio {}/{e}", w.key),
            StepKind::Inv => "invalidation + directory".into(),
            StepKind::Big => "larger-than-pool read".into(),
        }
    }

    /// The step named for people: `fio read-lat/libaio, mode strong, N=2`.
    pub fn label(&self) -> String {
        match self.nodes() {
            0 => self.what(),
            n => format!("{}, mode {}, N={n}", self.what(), self.mode),
        }
    }

    /// Relative cost: about the seconds the step takes on the 2-core
    /// machine with TCG (the committed reports' phases), in a full or a
    /// `--quick` run; the ETA scales it by the rate this run has measured
    /// so far. The host ping-pong is as long in both.
    pub fn weight(&self, repeats: u32, quick: bool) -> f64 {
        let extra = 2.0 * f64::from(repeats.saturating_sub(1));
        match (self.kind, quick) {
            (StepKind::Pingpong, _) => 16.0,
            (StepKind::Pagedir, false) => 5.0,
            (StepKind::Pagedir, true) => 2.0,
            (StepKind::Fio(..), false) => 20.0 + extra,
            (StepKind::Fio(..), true) => 1.5 + extra,
            (StepKind::Inv, false) => 40.0,
            (StepKind::Inv, true) => 6.0,
            (StepKind::Big, false) => 20.0,
            (StepKind::Big, true) => 4.0,
        }
    }

    /// The figure ids the step produces, in the order it records them.
    pub fn ids(&self) -> Vec<String> {
        let m = self.mode.as_str();
        match self.kind {
            StepKind::Pingpong => vec![figure_id(GROUP_HOST, "host", "ping-pong", None, "median")],
            StepKind::Pagedir => host_dir_figures()
                .into_iter()
                .map(|(sc, _)| figure_id(GROUP_HOST, "host", HOST_DIR_BENCH, None, &sc))
                .collect(),
            StepKind::Fio(w, e) => SCENARIOS
                .iter()
                .map(|sc| figure_id(GROUP_FIO, m, w.key, Some(e), sc))
                .collect(),
            StepKind::Inv => {
                let mut ids = Vec::new();
                for sc in ["CM", "local hit", "CM-R", "CH-R"] {
                    ids.push(figure_id(GROUP_DIR, m, "bench read", None, sc));
                }
                for sc in ["2 sharers", "1 sharer", "0 sharers"] {
                    ids.push(figure_id(GROUP_INV, m, "bench inv", None, sc));
                }
                ids.push(figure_id(
                    GROUP_DIR,
                    m,
                    "bench ring",
                    None,
                    "empty round trip",
                ));
                ids.push(figure_id(GROUP_DIR, m, "bench rpc", None, RPC_SCENARIO));
                for b in DIR_BATCHES {
                    ids.push(figure_id(
                        GROUP_DIR,
                        m,
                        "bench dir",
                        None,
                        &dir_batch_scenario(b),
                    ));
                }
                ids
            }
            StepKind::Big => [
                "pass 1: cached nowhere",
                "pass 2: same node again",
                "after node 1 read it",
            ]
            .iter()
            .map(|sc| figure_id(GROUP_BIG, m, "seq read > pool", Some("libaio"), sc))
            .collect(),
        }
    }
}

/// Every step of a run over `modes`, in measuring order.
pub fn plan(modes: &[String]) -> Vec<Step> {
    let host = |kind| Step {
        kind,
        mode: "host".into(),
    };
    let mut v = vec![host(StepKind::Pingpong), host(StepKind::Pagedir)];
    for m in modes {
        let step = |kind| Step {
            kind,
            mode: m.clone(),
        };
        for w in WORKLOADS {
            for e in ENGINES {
                v.push(step(StepKind::Fio(w, e)));
            }
        }
        v.push(step(StepKind::Inv));
        v.push(step(StepKind::Big));
    }
    v
}

/// A figure that needs no new measurement: a number, or n/a where the
/// mode has no such operation.
pub fn measured(f: &Figure) -> bool {
    match &f.status {
        Status::Ok(v) => v.is_finite(),
        Status::NotApplicable(_) => {
            crate::bench::model::na_allowed(&f.group, &f.mode, &f.workload, f.engine.as_deref())
        }
        Status::Failed(_) => false,
    }
}

/// The figures of `step` in `previous` if every one of them was measured
/// (the step is then kept, not run again), in the step's order.
pub fn kept(step: &Step, previous: &[Figure]) -> Option<Vec<Figure>> {
    step.ids()
        .iter()
        .map(|id| {
            previous
                .iter()
                .find(|f| &f.id == id)
                .filter(|f| measured(f))
                .cloned()
        })
        .collect()
}

/// Progress of a run: which steps are done, how fast they went.
#[derive(Debug, Clone)]
pub struct Progress {
    /// Each step's weight.
    weights: Vec<f64>,
    /// Steps that will not be measured (kept from the resumed run).
    skip: Vec<bool>,
    /// Weight and seconds of the steps measured so far.
    measured_weight: f64,
    measured_secs: f64,
}

impl Progress {
    /// Progress over steps of these weights, the `skip` ones kept.
    pub fn new(weights: Vec<f64>, skip: Vec<bool>) -> Progress {
        Progress {
            weights,
            skip,
            measured_weight: 0.0,
            measured_secs: 0.0,
        }
    }

    /// Steps in the run.
    pub fn len(&self) -> usize {
        self.weights.len()
    }

    /// No steps.
    pub fn is_empty(&self) -> bool {
        self.weights.is_empty()
    }

    /// Step `i` was measured in `secs`.
    pub fn measured(&mut self, i: usize, secs: f64) {
        if let Some(w) = self.weights.get(i) {
            self.measured_weight += w;
            self.measured_secs += secs.max(0.0);
        }
    }

    /// Seconds left before step `i` starts: the weight of the steps from
    /// `i` on that will be measured, times the seconds per unit of weight
    /// measured so far (before any: the weights' own estimate, times
    /// `scale`).
    pub fn eta(&self, i: usize, scale: f64) -> f64 {
        let left: f64 = self
            .weights
            .iter()
            .zip(&self.skip)
            .skip(i)
            .filter(|(_, s)| !**s)
            .map(|(w, _)| w)
            .sum();
        let rate = if self.measured_weight > 0.0 {
            self.measured_secs / self.measured_weight
        } else {
            scale
        };
        left * rate
    }
}

/// One progress line: `step 3/40: fio read-lat/libaio, mode strong, N=2;
/// elapsed 1m02s, about 25m10s left`.
pub fn progress_line(i: usize, total: usize, label: &str, elapsed: f64, eta: f64) -> String {
    format!(
        "step {}/{total}: {label}; elapsed {}, about {} left",
        i + 1,
        super::super::fmt_secs(elapsed),
        super::super::fmt_secs(eta)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modes(m: &[&str]) -> Vec<String> {
        m.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn plan_covers_every_expected_figure_once() {
        let p = plan(&modes(&["strong", "net"]));
        assert_eq!(p.len(), 2 + 2 * (14 + 2));
        assert_eq!(p[0].label(), "host ping-pong");
        assert_eq!(p[2].label(), "fio read-lat/libaio, mode strong, N=2");
        assert_eq!(p[16].label(), "invalidation + directory, mode strong, N=3");
        let ids: Vec<String> = p.iter().flat_map(Step::ids).collect();
        let mut uniq = ids.clone();
        uniq.sort();
        uniq.dedup();
        assert_eq!(uniq.len(), ids.len(), "an id in two steps");
        assert_eq!(ids.len(), 1 + 12 + 2 * (42 + 4 + 3 + 2 + 7 + 3));
    }

    #[test]
    fn eta_follows_the_measured_rate() {
        let mut p = Progress::new(vec![10.0, 20.0, 30.0, 40.0], vec![false; 4]);
        // Nothing measured: the weights, scaled.
        assert_eq!(p.eta(0, 1.0), 100.0);
        assert_eq!(p.eta(0, 0.5), 50.0);
        // The first step took twice its weight: the rest will too.
        p.measured(0, 20.0);
        assert_eq!(p.eta(1, 1.0), 180.0);
        p.measured(1, 10.0);
        // 30 s for 30 units: 1 s per unit.
        assert_eq!(p.eta(2, 1.0), 70.0);
        assert_eq!(p.eta(4, 1.0), 0.0);
        // Kept steps cost nothing.
        let mut k = Progress::new(vec![10.0, 20.0, 30.0], vec![false, true, false]);
        k.measured(0, 5.0);
        assert_eq!(k.eta(1, 1.0), 15.0);
        assert_eq!(
            progress_line(2, 40, "fio read-lat/libaio, mode strong, N=2", 62.0, 1510.0),
            "step 3/40: fio read-lat/libaio, mode strong, N=2; elapsed 1m02s, about 25m10s left"
        );
    }

    #[test]
    fn a_step_is_kept_only_when_every_figure_was_measured() {
        let step = &plan(&modes(&["private"]))[3];
        assert_eq!(step.label(), "fio read-lat/mmap, mode private, N=2");
        let ids = step.ids();
        let fig = |id: &str, st: Status| {
            let p: Vec<&str> = id.split('/').collect();
            let mut f = Figure::new(p[0], p[1], p[2], Some(p[3]), p[4], "m", "us", true);
            f.status = st;
            f
        };
        let all_na: Vec<Figure> = ids
            .iter()
            .map(|id| fig(id, Status::NotApplicable("no mmap".into())))
            .collect();
        // n/a is a measurement where the mode has no such operation.
        assert_eq!(kept(step, &all_na), Some(all_na.clone()));
        let mut one_failed = all_na.clone();
        one_failed[1].status = Status::Failed("interrupted by SIGINT".into());
        assert_eq!(kept(step, &one_failed), None);
        assert_eq!(kept(step, &all_na[..2]), None, "one missing");
        // n/a is not a measurement where the operation exists.
        let libaio = &plan(&modes(&["private"]))[2];
        let na: Vec<Figure> = libaio
            .ids()
            .iter()
            .map(|id| fig(id, Status::NotApplicable("x".into())))
            .collect();
        assert_eq!(kept(libaio, &na), None);
        let ok: Vec<Figure> = libaio
            .ids()
            .iter()
            .map(|id| fig(id, Status::Ok(3.0)))
            .collect();
        assert_eq!(kept(libaio, &ok).map(|v| v.len()), Some(3));
    }
}
