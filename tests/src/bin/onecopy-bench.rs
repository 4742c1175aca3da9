//! `onecopy-bench`: DPC's microbenchmarks (§6.2, Fig. 6-9, §6.2.5) on real
//! onecopy clusters in every mode, written to results.json, report.md and
//! PNG charts; `--apps` the application study, `--policies` the
//! eviction-policy section. See `onecopy-bench --help` and
//! `onecopy_tests::bench`.
#![forbid(unsafe_code)]

use std::fs;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use onecopy_tests::bench::opts::{help_text, parse_args, Parsed};
use onecopy_tests::bench::runner::Runner;
use onecopy_tests::bench::{charts, plot, provenance, report, reportmd, stamp};
use onecopy_tests::{host_tool, repo_root, target_dir};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opts = match parse_args(&args) {
        Ok(Parsed::Help) => {
            println!("{}", help_text());
            return ExitCode::SUCCESS;
        }
        Ok(Parsed::Render(dir)) => {
            return match onecopy_tests::bench::render::render(&dir) {
                Ok(problems) => {
                    println!("{}", dir.join("report.md").display());
                    ExitCode::from(u8::from(!problems.is_empty()))
                }
                Err(e) => {
                    eprintln!("onecopy-bench: error: {e}");
                    ExitCode::from(2)
                }
            };
        }
        Ok(Parsed::Run(o)) => *o,
        Err(e) => {
            // clap's message: `error: ...`, the usage, where to look.
            eprint!("onecopy-bench: {e}");
            return ExitCode::from(2);
        }
    };
    // From here on a signal stops the clusters and the run writes its
    // report, marked partial.
    if let Err(e) = onecopy_tests::bench::interrupt::install() {
        eprintln!("onecopy-bench: error: {e}");
        return ExitCode::from(2);
    }
    let resume = match &opts.resume {
        None => None,
        Some(dir) => match onecopy_tests::bench::runner::resume::load(dir, &opts) {
            Ok(r) => Some(r),
            Err(e) => {
                eprintln!("onecopy-bench: error: {e}");
                return ExitCode::from(2);
            }
        },
    };
    let prov = provenance::Recorder::start(&repo_root(), &args);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let out: PathBuf = opts
        .resume
        .clone()
        .or_else(|| opts.out.clone())
        .unwrap_or_else(|| repo_root().join("results").join(stamp(now)));
    // What the clusters need, before anything is started.
    let kernel = target_dir().join("x86_64-unknown-none/release/onecopy-kernel");
    let mut missing = Vec::new();
    for p in [kernel, host_tool("mkfs")] {
        if !p.is_file() {
            missing.push(p.display().to_string());
        }
    }
    let ctl = onecopy_tests::bench::runner::find_ctl();
    if !ctl.is_file() {
        missing.push(ctl.display().to_string());
    }
    if !missing.is_empty() {
        eprintln!(
            "onecopy-bench: error: not built: {} (tools/bench-report.sh builds everything)",
            missing.join(", ")
        );
        return ExitCode::from(2);
    }
    if let Err(e) = fs::create_dir_all(&out) {
        eprintln!("onecopy-bench: error: cannot create {}: {e}", out.display());
        return ExitCode::from(2);
    }
    if opts.apps {
        let label = onecopy_tests::bench::iso(now);
        return ExitCode::from(onecopy_tests::bench::apps::run(opts, &out, &label, prov));
    }
    if opts.policies {
        let label = onecopy_tests::bench::iso(now);
        return ExitCode::from(onecopy_tests::bench::policies::run(
            &opts, &out, &label, prov,
        ));
    }
    eprintln!(
        "onecopy-bench: {} run{}, modes {}, storage {}, cxl latency {} ns -> {}",
        if opts.quick { "quick" } else { "full" },
        if resume.is_some() { " (resumed)" } else { "" },
        opts.modes.join(","),
        opts.storage,
        opts.cxl_latency_ns,
        out.display()
    );
    let mut r = Runner::new(opts, out.clone());
    if let Some(d) = resume.as_ref().and_then(|x| x.dilation.clone()) {
        eprintln!("onecopy-bench: dilation measured by the interrupted run: {d}");
        r.opts.dilation = d;
    }
    r.resume = resume;
    r.run_all();
    let machine = report::machine();
    let run_label = format!(
        "{} run {}",
        if r.opts.quick { "--quick" } else { "full" },
        onecopy_tests::bench::iso(now)
    );
    let (plots, plot_errors) =
        charts::draw_all(&out, &r.figures, &r.opts.modes, &r.params, &run_label);
    for e in &plot_errors {
        r.notes.push(format!("chart not drawn: {e}"));
    }
    if !plot::font_ready() {
        r.notes.push(
            "no TrueType font found (DejaVu Sans, Liberation Sans, ...): the charts have no text; \
             the labels are in this report"
                .into(),
        );
    }
    let mut problems = r.problems();
    for e in &plot_errors {
        problems.push(format!("chart: {e}"));
    }
    let instances = r
        .clusters
        .iter()
        .filter_map(|c| c["nodes"].as_u64())
        .max()
        .map(|n| n + 1);
    let accel = report::first_accel(&r);
    let prov = prov.finish(instances, Some(&accel));
    let mut json = report::results_json(&r, &machine, &plots, &problems);
    json["provenance"] = prov.clone();
    let md = provenance::insert_md(&reportmd::report_md(&r, &machine, &plots, &problems), &prov);
    let params = provenance::params_json(&prov, &r.params.to_json());
    let write_failed = !onecopy_tests::bench::write_outputs(&out, &json, md)
        || !onecopy_tests::bench::write_params(&out, &params);
    eprintln!(
        "onecopy-bench: {} figures, {} charts, {:.1} s; report: {}",
        r.figures.len(),
        plots.len(),
        r.elapsed(),
        out.join("report.md").display()
    );
    if write_failed {
        return ExitCode::from(1);
    }
    // stdout: the report's path, whether the run is complete or not.
    println!("{}", out.join("report.md").display());
    if let Some(p) = &r.partial {
        eprintln!(
            "onecopy-bench: partial report: interrupted at {} by {}; `--resume {}` with the same \
             options measures the rest",
            p.step,
            p.signal,
            out.display()
        );
        let sig = onecopy_tests::bench::interrupt::interrupted().unwrap_or(2);
        return ExitCode::from(onecopy_tests::bench::interrupt::exit_status(sig));
    }
    if !problems.is_empty() {
        eprintln!(
            "onecopy-bench: {} expected figure(s) missing or failed:",
            problems.len()
        );
        for p in &problems {
            eprintln!("  {p}");
        }
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
