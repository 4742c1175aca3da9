//! The application study (`onecopy-bench --apps`, `tools/bench-report.sh
//! --apps`): DPC §6.3, Fig. 10. N = 1, 2, 4 nodes run the same `app` at
//! the same time over one dataset built on the host; per-node
//! throughput averaged over the nodes, normalized to single-node
//! `private`.
//!
//! * [`list`]: the apps.
//! * [`plan`]: apps, node counts, the node cache and the dataset sizes.
//! * [`parse`]: RESULT lines, the boot log's node cache, CPU time.
//! * [`table`]: normalization, geomeans, the goals.
//! * [`runner`]: the clusters.
//! * [`report`]: chart, report.md, results.json.

pub mod list;
pub mod parity;
pub mod parse;
pub mod plan;
pub mod report;
pub mod runner;
pub mod table;

#[cfg(test)]
mod tests;

use std::path::Path;

use crate::bench::opts::BenchOpts;
use crate::bench::provenance::{self, Recorder};

/// Runs the study into `out`: 0 complete, 1 some cell missing or failed
/// (the report is written anyway), 2 a usage problem.
pub fn run(opts: BenchOpts, out: &Path, now_label: &str, prov: Recorder) -> u8 {
    let plan = match plan::Plan::from_opts(&opts) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("onecopy-bench: error: {e}");
            return 2;
        }
    };
    eprintln!(
        "onecopy-bench: application study ({}), N = {:?}, modes {}, {} s per app, storage {}, node cache {} pages, datasets {} each -> {}",
        if opts.quick { "quick" } else { "full" },
        plan.nodes,
        plan.modes.join(","),
        plan.runtime_s,
        plan.storage,
        plan.cache_pages,
        crate::bench::opts::size_human(plan.dataset_bytes),
        out.display()
    );
    let mut r = runner::AppsRunner::new(opts, plan, out.to_path_buf());
    r.run_all();
    let machine = crate::bench::report::machine();
    let label = format!(
        "{} run {now_label}",
        if r.opts.quick {
            "--apps --quick"
        } else {
            "--apps"
        }
    );
    let chart = match report::draw(&r, out, &label) {
        Ok(c) => Some(c),
        Err(e) => {
            r.notes.push(format!("chart not drawn: {e}"));
            None
        }
    };
    let instances = r.plan.nodes.iter().copied().max().map(|n| u64::from(n) + 1);
    let prov = prov.finish(instances, None);
    let mut json = report::results_json(&r, &machine, chart.as_deref());
    json["provenance"] = prov.clone();
    let mut md = provenance::insert_md(
        &report::report_md(&r, &machine, chart.as_deref(), &label, &prov),
        &prov,
    );
    json["partial"] = match &r.partial {
        None => serde_json::json!(false),
        Some((step, sig)) => serde_json::json!({"interrupted_at": step, "signal": sig}),
    };
    if let Some((step, sig)) = &r.partial {
        md = crate::bench::partial_md(&md, step, sig);
        json["complete"] = serde_json::json!(false);
    }
    let params = provenance::params_json(&prov, &json["plan"]);
    let mut status = u8::from(
        !crate::bench::write_outputs(out, &json, md) || !crate::bench::write_params(out, &params),
    );
    let problems = report::problems(&r);
    eprintln!(
        "onecopy-bench: application study: {} cells, {:.1} s; report: {}",
        r.study.cells.len(),
        r.elapsed(),
        out.join("report.md").display()
    );
    if status == 0 {
        println!("{}", out.join("report.md").display());
    }
    if !problems.is_empty() {
        eprintln!(
            "onecopy-bench: {} cell(s) missing or failed:",
            problems.len()
        );
        for p in &problems {
            eprintln!("  {p}");
        }
        status = 1;
    }
    if let Some((step, sig)) = &r.partial {
        eprintln!("onecopy-bench: partial report: interrupted at {step} by {sig}");
        status = crate::bench::interrupt::exit_status(
            crate::bench::interrupt::interrupted().unwrap_or(2),
        );
    }
    status
}
