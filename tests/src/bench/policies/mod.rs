//! The eviction-policy section (`onecopy-bench --policies`,
//! `tools/bench-report.sh --policies`; what cache_ext measured): the
//! three scripts that measure it run one after the other (bench-promote.sh
//! twice: relaxed, then strong mode), each with a time limit; their
//! `ROW {json}` / `RESULT {json}` lines become report.md's "Eviction
//! policies" section and results.json.
//!
//! * [`plan`]: the runs, their arguments (quick / full), time limits.
//! * [`child`]: one script in its own process group, killed on expiry.
//! * [`parse`]: the `ROW` / `RESULT` lines, decoded without panics.
//! * [`published`]: cache_ext's published figures, with their source.
//! * [`section`]: the decoded rows and what is missing.
//! * [`report`]: report.md; [`results`]: results.json.

pub mod child;
pub mod parse;
pub mod plan;
pub mod published;
pub mod report;
pub mod results;
pub mod section;

#[cfg(test)]
mod tests;

use std::fs;
use std::path::Path;
use std::time::Instant;

use serde_json::json;

use crate::bench::opts::BenchOpts;
use crate::bench::provenance::{self, Recorder};
use crate::repo_root;
use section::{Part, Section};

/// Runs the section into `out`: 0 complete, 1 some script failed or a
/// row is missing (the report is written anyway).
pub fn run(opts: &BenchOpts, out: &Path, now_label: &str, prov: Recorder) -> u8 {
    let t0 = Instant::now();
    let root = repo_root();
    let logs = out.join("policies");
    if let Err(e) = fs::create_dir_all(&logs) {
        eprintln!(
            "onecopy-bench: error: cannot create {}: {e}",
            logs.display()
        );
        return 1;
    }
    let steps = plan::steps(opts.quick);
    eprintln!(
        "onecopy-bench: eviction policies ({}), {} script runs -> {}",
        if opts.quick { "quick" } else { "full" },
        steps.len(),
        out.display()
    );
    let mut parts = Vec::new();
    let total = steps.len();
    let mut partial: Option<(String, String)> = None;
    for (i, step) in steps.into_iter().enumerate() {
        let name = step.kind.log_name();
        if let Some(sig) = crate::bench::interrupt::interrupted() {
            partial = Some((step.kind.label(), crate::bench::interrupt::signal_name(sig)));
            break;
        }
        eprintln!(
            "onecopy-bench: step {}/{total}: {}; elapsed {}",
            i + 1,
            step.kind.label(),
            crate::bench::fmt_secs(t0.elapsed().as_secs_f64())
        );
        eprintln!(
            "[{:7.1}s] {} (limit {} s)",
            t0.elapsed().as_secs_f64(),
            step.command_line(),
            step.timeout.as_secs()
        );
        let outcome = child::run_step(&root, &step, &logs.join(&name));
        eprintln!(
            "[{:7.1}s] {}: {} in {:.0} s",
            t0.elapsed().as_secs_f64(),
            step.kind.label(),
            outcome.failure().unwrap_or_else(|| "ok".into()),
            outcome.seconds
        );
        let label = step.kind.label();
        parts.push(Part::new(step, outcome, format!("policies/{name}")));
        if let Some(sig) = crate::bench::interrupt::interrupted() {
            partial = Some((label, crate::bench::interrupt::signal_name(sig)));
            break;
        }
    }
    let s = Section::collect(opts.quick, parts);
    let machine = crate::bench::report::machine();
    let label = format!(
        "{} run {now_label}",
        if opts.quick {
            "--policies --quick"
        } else {
            "--policies"
        }
    );
    let secs = t0.elapsed().as_secs_f64();
    let prov = prov.finish(None, None);
    let mut json = results::results_json(&s, &machine, &label, secs);
    json["provenance"] = prov.clone();
    json["partial"] = match &partial {
        None => json!(false),
        Some((step, sig)) => json!({"interrupted_at": step, "signal": sig}),
    };
    let mut md = provenance::insert_md(&report::report_md(&s, &machine, &label, secs), &prov);
    if let Some((step, sig)) = &partial {
        md = crate::bench::partial_md(&md, step, sig);
        json["complete"] = json!(false);
    }
    let params = provenance::params_json(&prov, &json!({"quick": opts.quick}));
    let mut status = u8::from(
        !crate::bench::write_outputs(out, &json, md) || !crate::bench::write_params(out, &params),
    );
    eprintln!(
        "onecopy-bench: eviction policies: {secs:.1} s; report: {}",
        out.join("report.md").display()
    );
    if status == 0 {
        println!("{}", out.join("report.md").display());
    }
    if !s.problems.is_empty() {
        eprintln!("onecopy-bench: {} problem(s):", s.problems.len());
        for p in &s.problems {
            eprintln!("  {p}");
        }
        status = 1;
    }
    if let Some((step, sig)) = &partial {
        eprintln!("onecopy-bench: partial report: interrupted at {step} by {sig}");
        status = crate::bench::interrupt::exit_status(
            crate::bench::interrupt::interrupted().unwrap_or(2),
        );
    }
    status
}
