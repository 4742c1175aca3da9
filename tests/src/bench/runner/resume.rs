//! `--resume DIR`: what an interrupted run measured, read back from its
//! results.json, and the check that the new run measures the same way.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::bench::model::Figure;
use crate::bench::opts::{BenchOpts, Params};

/// An interrupted (or incomplete) run to continue.
#[derive(Debug, Clone)]
pub struct Resume {
    /// Its results folder.
    pub dir: PathBuf,
    /// Its figures.
    pub figures: Vec<Figure>,
    /// Its clusters' records.
    pub clusters: Vec<Value>,
    /// Its phases.
    pub phases: Vec<(String, f64)>,
    /// Its length, seconds.
    pub seconds: f64,
    /// Its provenance.
    pub provenance: Value,
    /// The dilation its clusters ran with when it was `auto` (measured
    /// at its first boot; the rest of the run uses the same).
    pub dilation: Option<String>,
}

/// What decides how a run measures, by name: two runs compare only if
/// these are equal (`--out`, `--keep-runs` and `--resume` do not count).
pub fn measure_key(o: &BenchOpts) -> Vec<(&'static str, Value)> {
    vec![
        ("--quick", json!(o.quick)),
        ("--modes", json!(o.modes.join(","))),
        ("--storage", json!(o.storage)),
        ("--cxl-latency-ns", json!(o.cxl_latency_ns)),
        ("--doorbell", json!(if o.doorbell { "on" } else { "off" })),
        ("--dilation", json!(o.dilation)),
        ("--accel", json!(o.accel)),
        ("--baseline-writes", json!(o.baseline_writes)),
        ("parameters", Params::from_opts(o).to_json()),
    ]
}

/// Where `now` measures differently from `then` (empty: the same).
pub fn differences(then: &BenchOpts, now: &BenchOpts) -> Vec<String> {
    measure_key(then)
        .into_iter()
        .zip(measure_key(now))
        .filter(|((_, a), (_, b))| a != b)
        .map(|((k, a), (_, b))| {
            if k == "parameters" {
                let keys: Vec<String> = a
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(k, v)| b.get(k.as_str()) != Some(v))
                    .map(|(k, v)| format!("{k} {v} (now {})", b[k.as_str()]))
                    .collect();
                format!("parameters: {}", keys.join(", "))
            } else {
                format!("{k} {a} (now {b})")
            }
        })
        .collect()
}

/// Reads the run in `dir` to continue it with the options `now`; an
/// error says why it cannot be (no results.json, not a microbenchmark
/// run, a complete run, other parameters).
pub fn load(dir: &Path, now: &BenchOpts) -> Result<Resume, String> {
    let path = dir.join("results.json");
    let text = fs::read_to_string(&path)
        .map_err(|e| format!("--resume: {}: {e} (nothing to resume)", path.display()))?;
    let j: Value =
        serde_json::from_str(&text).map_err(|e| format!("--resume: {}: {e}", path.display()))?;
    if j.get("study").is_some() || j.get("figures").is_none() {
        return Err(format!(
            "--resume: {} is not a microbenchmark report (--apps and --policies runs are run again)",
            path.display()
        ));
    }
    if j["complete"] == json!(true) && j["partial"].as_object().is_none() {
        return Err(format!(
            "--resume: {} is a complete run: nothing to resume",
            dir.display()
        ));
    }
    let then = crate::bench::render::opts_of(&j)
        .map_err(|e| format!("--resume: {}: its options: {e}", path.display()))?;
    let diff = differences(&then, now);
    if !diff.is_empty() {
        let cmd = j["provenance"]["command"]
            .as_str()
            .unwrap_or("(not recorded)");
        return Err(format!(
            "--resume: {} was measured with other parameters: {}; give the options it ran with \
             (its command: {cmd})",
            dir.display(),
            diff.join("; ")
        ));
    }
    let mut figures = Vec::new();
    for (i, f) in j["figures"].as_array().into_iter().flatten().enumerate() {
        figures.push(
            Figure::from_json(f)
                .ok_or_else(|| format!("--resume: {}: figure {i} unreadable", path.display()))?,
        );
    }
    let phases = j["phases"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| Some((p["phase"].as_str()?.to_string(), p["seconds"].as_f64()?)))
        .collect();
    let dilation = (now.dilation == "auto")
        .then(|| {
            figures
                .iter()
                .map(|f| f.context.dilation.clone())
                .find(|d| crate::bench::opts::valid_dilation(d) && d != "auto")
        })
        .flatten();
    Ok(Resume {
        dir: dir.to_path_buf(),
        figures,
        clusters: j["clusters"].as_array().cloned().unwrap_or_default(),
        phases,
        seconds: j["seconds"].as_f64().unwrap_or(0.0),
        provenance: j["provenance"].clone(),
        dilation,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::model::{Status, GROUP_FIO};
    use crate::bench::opts::{parse_args, Parsed};
    use crate::bench::report;
    use crate::bench::runner::Runner;

    fn opts(args: &[&str]) -> BenchOpts {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        match parse_args(&args).unwrap() {
            Parsed::Run(o) => *o,
            _ => unreachable!(),
        }
    }

    /// A results.json of a run with `args`, interrupted or not.
    fn write_run(dir: &Path, args: &[&str], partial: bool) {
        let mut r = Runner::new(opts(args), dir.to_path_buf());
        let mut f = Figure::new(
            GROUP_FIO,
            "strong",
            "read-lat",
            Some("libaio"),
            "CM",
            "m",
            "us",
            true,
        );
        f.status = Status::Ok(7.0);
        r.figures.push(f);
        if partial {
            r.partial = Some(super::super::Partial {
                signal: "SIGINT".into(),
                step: "fio read-lat/mmap, mode strong, N=2".into(),
            });
        }
        let mut j = report::results_json(&r, &json!({}), &[], &[]);
        j["provenance"] =
            json!({"args": args, "command": format!("onecopy-bench {}", args.join(" "))});
        fs::create_dir_all(dir).unwrap();
        fs::write(dir.join("results.json"), j.to_string()).unwrap();
    }

    #[test]
    fn same_parameters_resume_others_are_refused_by_name() {
        let dir = crate::unique_run_dir("bench-resume-unit").unwrap();
        write_run(&dir, &["--quick", "--modes", "strong"], true);
        let now = opts(&[
            "--quick",
            "--modes",
            "strong",
            "--resume",
            "x",
            "--keep-runs",
        ]);
        let r = load(&dir, &now).unwrap();
        assert_eq!(r.figures.len(), 1);
        let e = load(&dir, &opts(&["--quick", "--modes", "strong,private"])).unwrap_err();
        assert!(
            e.contains("--modes \"strong\" (now \"strong,private\")"),
            "{e}"
        );
        assert!(e.contains("onecopy-bench --quick --modes strong"), "{e}");
        let e = load(&dir, &opts(&["--modes", "strong"])).unwrap_err();
        assert!(e.contains("--quick true (now false)"), "{e}");
        assert!(e.contains("parameters: "), "{e}");
        let e = load(
            &dir,
            &opts(&["--quick", "--modes", "strong", "--repeats", "3"]),
        )
        .unwrap_err();
        assert!(e.contains("repeats 1 (now 3)"), "{e}");
        // A complete run has nothing to resume; no run, nothing either.
        write_run(&dir, &["--quick", "--modes", "strong"], false);
        let j: Value =
            serde_json::from_str(&fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
        assert_eq!(j["partial"], json!(false));
        assert_eq!(j["complete"], json!(true));
        assert!(load(&dir, &now).unwrap_err().contains("complete run"));
        fs::remove_dir_all(&dir).unwrap();
        assert!(load(&dir, &now).unwrap_err().contains("nothing to resume"));
    }
}
