//! Recording figures, and checking the run for missing or failed ones.

use std::fs;
use std::io::Write;

use super::*;
use crate::bench::model::{Figure, Status};

impl Runner {
    pub(super) fn push(&mut self, f: Figure) {
        let shown = match &f.status {
            Status::Ok(v) => format!("{} {}", crate::bench::model::fmt_value(*v), f.unit),
            Status::NotApplicable(m) => format!("n/a ({m})"),
            Status::Failed(m) => format!("FAILED: {m}"),
        };
        let engine = f
            .engine
            .as_deref()
            .map(|e| format!("/{e}"))
            .unwrap_or_default();
        self.say(&format!(
            "{} {}{} {}: {shown}",
            f.context.cluster, f.workload, engine, f.scenario
        ));
        self.figures.push(f);
    }

    /// Writes a line to `progress.log` in the results folder.
    pub fn log_line(&self, line: &str) {
        if let Ok(mut f) = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.out.join("progress.log"))
        {
            let _ = writeln!(f, "{line}");
        }
    }

    /// The figure with an id.
    pub fn figure(&self, id: &str) -> Option<&Figure> {
        self.figures.iter().find(|f| f.id == id)
    }

    /// Every figure id the run must produce.
    pub fn expected_ids(&self) -> Vec<String> {
        super::steps::plan(&self.opts.modes)
            .iter()
            .flat_map(super::steps::Step::ids)
            .collect()
    }

    /// Problems that make the run incomplete: expected figures that are
    /// missing, failed or not a number (n/a is accepted only where the
    /// mode has no such operation: mmap and `bench dir` in private and net
    /// modes).
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        for id in self.expected_ids() {
            match self.figure(&id) {
                None => out.push(format!("{id}: missing")),
                Some(f) => match &f.status {
                    Status::Ok(v) if v.is_finite() => {}
                    Status::Ok(v) => out.push(format!("{id}: not a number ({v})")),
                    Status::NotApplicable(_)
                        if crate::bench::model::na_allowed(
                            &f.group,
                            &f.mode,
                            &f.workload,
                            f.engine.as_deref(),
                        ) => {}
                    Status::NotApplicable(m) => {
                        out.push(format!("{id}: n/a where the operation should exist: {m}"))
                    }
                    Status::Failed(m) => out.push(format!("{id}: {m}")),
                },
            }
        }
        out
    }
}
