//! The section's data: each script's outcome and rows, decoded and
//! checked for completeness. Pure: built from the scripts' outputs.

use serde_json::Value;

use super::child::Outcome;
use super::parse::{self, ClusterRow, Lines, PolicyRow, Promote};
use super::plan::{Kind, Step, TierMode};

/// cache_ext's workloads, in report order, as bench-policy-apps.sh names
/// them.
pub const WORKLOADS: &[&str] = &["YCSB-C", "GET-SCAN", "search"];

/// One script's run.
#[derive(Debug, Clone)]
pub struct Part {
    /// What ran.
    pub step: Step,
    /// How it ended, and its output.
    pub outcome: Outcome,
    /// Its `ROW` / `RESULT` lines.
    pub lines: Lines,
    /// Its log, relative to the results folder.
    pub log: String,
}

impl Part {
    /// A part from a step's outcome (its output scanned).
    pub fn new(step: Step, outcome: Outcome, log: String) -> Part {
        let lines = parse::scan(&outcome.text);
        Part {
            step,
            outcome,
            lines,
            log,
        }
    }

    /// Its RESULT (the last of its script's).
    pub fn result(&self) -> Option<&Value> {
        let bench = match self.step.kind {
            Kind::Apps => "policy-apps",
            Kind::Cluster => "cluster-policy",
            Kind::Promote(_) => "promote",
        };
        parse::result_of(&self.lines, bench)
    }
}

/// Everything the section shows.
#[derive(Debug, Clone, Default)]
pub struct Section {
    /// `--quick`.
    pub quick: bool,
    /// The scripts, in the order they ran.
    pub parts: Vec<Part>,
    /// bench-policy-apps.sh's rows.
    pub apps: Vec<PolicyRow>,
    /// bench-cluster-policy.sh's rows.
    pub cluster: Vec<ClusterRow>,
    /// bench-promote.sh's figures, one per mode whose run gave them, in
    /// the order they ran.
    pub promote: Vec<Promote>,
    /// What failed or is missing (each makes the exit status 1).
    pub problems: Vec<String>,
    /// Skipped lines and other remarks.
    pub notes: Vec<String>,
}

/// The line of a failed script's log that says most: its last line
/// naming an error, else its last non-empty line.
pub fn last_words(text: &str) -> Option<String> {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let l = lines
        .iter()
        .rev()
        .find(|l| l.contains("error"))
        .or(lines.last())?;
    let t: String = l.chars().take(300).collect();
    Some(t)
}

impl Section {
    /// Decodes and checks every part.
    pub fn collect(quick: bool, parts: Vec<Part>) -> Section {
        let mut s = Section {
            quick,
            ..Section::default()
        };
        for p in &parts {
            let script = format!("tools/{}", p.step.kind.label());
            for m in &p.lines.malformed {
                s.notes.push(format!("{script}: skipped {m}"));
            }
            for v in &p.lines.rows {
                let r = match p.step.kind {
                    Kind::Apps => parse::policy_row(v).map(|r| s.apps.push(r)),
                    Kind::Cluster => parse::cluster_row(v).map(|r| s.cluster.push(r)),
                    Kind::Promote(_) => Err("bench-promote.sh prints no ROW".into()),
                };
                if let Err(e) = r {
                    s.notes.push(format!("{script}: skipped a ROW: {e}"));
                }
            }
            if let Kind::Promote(mode) = p.step.kind {
                s.take_promote(p, mode, &script);
            }
            if let Some(f) = p.outcome.failure() {
                let why = last_words(&p.outcome.text)
                    .map(|l| format!("; last words: {l}"))
                    .unwrap_or_default();
                s.problems
                    .push(format!("{script} failed: {f} (log {}){why}", p.log));
                continue;
            }
            let missing = match p.step.kind {
                Kind::Apps => s.apps_missing(p),
                Kind::Cluster => s.cluster_missing(),
                Kind::Promote(mode) => s.promote_missing(mode),
            };
            s.problems
                .extend(missing.into_iter().map(|m| format!("{script}: {m}")));
        }
        s.parts = parts;
        s
    }

    /// The policies bench-policy-apps.sh ran: its RESULT's, else the
    /// `--policies` it was given.
    pub fn apps_policies(p: &Part) -> Vec<String> {
        let from_args = || {
            let a = &p.step.args;
            a.iter()
                .position(|x| x == "--policies")
                .and_then(|i| a.get(i + 1))
                .cloned()
        };
        p.result()
            .and_then(|r| parse::text(r, "policies"))
            .or_else(from_args)
            .map(|s| s.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default()
    }

    fn apps_missing(&self, p: &Part) -> Vec<String> {
        let mut m = Vec::new();
        if p.result().is_none() {
            m.push("no RESULT line (parameters unknown)".into());
        }
        let pols = Section::apps_policies(p);
        if pols.is_empty() {
            m.push("no policy list".into());
        }
        for w in WORKLOADS {
            for pol in &pols {
                match self.apps_row(w, pol) {
                    None => m.push(format!("{w} {pol}: no row")),
                    Some(r) => {
                        if r.hit_ratio.is_none() {
                            m.push(format!("{w} {pol}: hit ratio n/a"));
                        }
                        if r.throughput.is_none() {
                            m.push(format!("{w} {pol}: throughput n/a"));
                        }
                        if pol != "fifo" && (r.vs_fifo.is_none() || r.per_cpu_vs_fifo.is_none()) {
                            m.push(format!("{w} {pol}: ratio to FIFO n/a"));
                        }
                    }
                }
            }
        }
        m
    }

    fn cluster_missing(&self) -> Vec<String> {
        let mut m = Vec::new();
        let medians: Vec<&ClusterRow> =
            self.cluster.iter().filter(|r| r.kind == "median").collect();
        if medians.is_empty() {
            m.push("no median rows".into());
        }
        for r in &self.cluster {
            if r.kind == "round" && !medians.iter().any(|x| x.policy == r.policy) {
                m.push(format!("{}: rounds but no median row", r.policy));
            }
        }
        for r in &medians {
            if r.ops.is_none() || r.ops_vs_first.is_none() {
                m.push(format!("{}: median ops/s n/a", r.policy));
            }
        }
        m.dedup();
        m
    }

    /// Keeps the RESULT of `p`, a run in `mode`, if it decodes and is of
    /// that mode (else a note: it is then missing).
    fn take_promote(&mut self, p: &Part, mode: TierMode, script: &str) {
        match p.result().map(parse::promote) {
            Some(Ok(r)) if r.mode == mode.name() => self.promote.push(r),
            Some(Ok(r)) => self.notes.push(format!(
                "{script}: skipped a RESULT of {} mode, not {}",
                r.mode,
                mode.name()
            )),
            Some(Err(e)) => self.notes.push(format!("{script}: {e}")),
            None => {}
        }
    }

    fn promote_missing(&self, mode: TierMode) -> Vec<String> {
        let Some(p) = self.promote_of(mode) else {
            return vec!["no RESULT line".into()];
        };
        let mut m = Vec::new();
        for (k, v) in [
            ("off mean", p.off_mean_ns),
            ("on mean", p.on_mean_ns),
            ("off p50", p.off_p50_ns),
            ("on p50", p.on_p50_ns),
            ("replica pages", p.replica_pages),
        ] {
            if v.is_none() {
                m.push(format!("{k} n/a"));
            }
        }
        m
    }

    /// The row of (workload, policy).
    pub fn apps_row(&self, workload: &str, policy: &str) -> Option<&PolicyRow> {
        self.apps
            .iter()
            .find(|r| r.workload == workload && r.policy == policy)
    }

    /// The figures of the tiering run in `mode`, if it gave them.
    pub fn promote_of(&self, mode: TierMode) -> Option<&Promote> {
        self.promote.iter().rev().find(|p| p.mode == mode.name())
    }

    /// The modes of the tiering runs, in the order they ran.
    pub fn promote_modes(&self) -> Vec<TierMode> {
        self.parts
            .iter()
            .filter_map(|p| match p.step.kind {
                Kind::Promote(m) => Some(m),
                _ => None,
            })
            .collect()
    }

    /// The part of a script, if it ran.
    pub fn part(&self, kind: Kind) -> Option<&Part> {
        self.parts.iter().find(|p| p.step.kind == kind)
    }
}
