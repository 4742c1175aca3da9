//! Where a report comes from: the commit measured (and whether the tree
//! had uncommitted changes), the date, the exact command line, the host,
//! and how busy the machine was while the run lasted. Every report
//! (micro, `--apps`, `--policies`) carries it in results.json
//! (`provenance`) and in report.md (the "Provenance" section), so a
//! committed report says by itself what it measured.
//!
//! The load is sampled by a background thread (every
//! [`SAMPLE_EVERY`]): the 1-minute load average and the number of QEMU
//! processes on the host, which counts other people's clusters too (a
//! shared machine), not only this run's.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::run_with_timeout;

/// Interval of the load samples.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(10);

/// One load sample: 1-minute load average, QEMU processes on the host.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Seconds since the start of the run.
    pub t: f64,
    /// 1-minute load average.
    pub load1: f64,
    /// `qemu-system-*` processes on the host (every user's).
    pub qemu: u64,
}

/// The provenance being recorded; [`Recorder::finish`] gives the json.
pub struct Recorder {
    start: Value,
    unix_start: u64,
    samples: Arc<Mutex<Vec<Sample>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

fn sh(root: &Path, cmd: &str) -> Result<String, String> {
    let mut c = Command::new("sh");
    c.arg("-c").arg(cmd).current_dir(root);
    match run_with_timeout(c, Duration::from_secs(20)) {
        Ok(o) if o.code == Some(0) => Ok(o.stdout_text().trim_end().to_string()),
        Ok(o) => Err(format!("{cmd}: exit {:?}: {}", o.code, o.text().trim())),
        Err(e) => Err(format!("{cmd}: {e}")),
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// `/proc/loadavg`: the 1, 5 and 15-minute load averages.
pub fn loadavg() -> Option<[f64; 3]> {
    parse_loadavg(&std::fs::read_to_string("/proc/loadavg").ok()?)
}

/// The first three fields of a `/proc/loadavg` line.
pub fn parse_loadavg(text: &str) -> Option<[f64; 3]> {
    let mut it = text.split_whitespace().map(str::parse::<f64>);
    let a = it.next()?.ok()?;
    let b = it.next()?.ok()?;
    let c = it.next()?.ok()?;
    Some([a, b, c])
}

/// QEMU system emulators running on the host (any user), from /proc.
pub fn qemu_processes() -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut n = 0;
    for e in dir.flatten() {
        let name = e.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if let Ok(comm) = std::fs::read_to_string(e.path().join("comm")) {
            if comm.trim_start().starts_with("qemu-system") {
                n += 1;
            }
        }
    }
    n
}

/// The accelerator `qemu-run.sh --accel auto` (the runner's default)
/// picks on this host, and why: kvm when the CPU flags show vmx/svm and
/// /dev/kvm opens, else tcg.
pub fn auto_accel() -> (String, String) {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let virt = cpuinfo
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .any(|w| w == "vmx" || w == "svm");
    if !virt {
        return ("tcg".into(), "no vmx/svm in /proc/cpuinfo".into());
    }
    let opens = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok();
    if opens {
        (
            "kvm".into(),
            "vmx/svm in /proc/cpuinfo and /dev/kvm opens".into(),
        )
    } else {
        ("tcg".into(), "/dev/kvm cannot be opened".into())
    }
}

/// A shell word, quoted when it needs to be.
pub fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=,:+@%".contains(&b));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

impl Recorder {
    /// Records the start: commit, tree state, date, command line, host,
    /// load; starts sampling the load. `args` are the runner's arguments
    /// (without the program name).
    pub fn start(root: &Path, args: &[String]) -> Recorder {
        let unix_start = unix_now();
        let commit = sh(root, "git rev-parse HEAD").unwrap_or_else(|e| format!("unknown ({e})"));
        let branch = sh(root, "git rev-parse --abbrev-ref HEAD").unwrap_or_default();
        let (dirty, changed) = match sh(root, "git status --porcelain --untracked-files=no") {
            Ok(s) => {
                let files: Vec<String> = s.lines().map(|l| l.trim().to_string()).collect();
                (json!(!files.is_empty()), files)
            }
            Err(e) => (json!(format!("unknown ({e})")), Vec::new()),
        };
        let host_val = |r: Result<String, String>| r.unwrap_or_else(|e| format!("error: {e}"));
        let (accel, accel_why) = auto_accel();
        let command = std::iter::once("onecopy-bench".to_string())
            .chain(args.iter().map(|a| shell_quote(a)))
            .collect::<Vec<_>>()
            .join(" ");
        let load = loadavg();
        let qemu = qemu_processes();
        let start = json!({
            "commit": commit,
            "branch": branch,
            "dirty": dirty,
            "changed_files": changed,
            "date_utc": super::iso(unix_start),
            "unix_start": unix_start,
            "args": args,
            "command": command,
            "host": {
                "nproc": host_val(sh(root, "nproc")),
                "cpu": host_val(sh(root, "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'")),
                "qemu": host_val(sh(root, "qemu-system-x86_64 --version | head -n 1")),
                "kernel": host_val(sh(root, "uname -sr")),
                "accel_auto": accel,
                "accel_auto_why": accel_why,
            },
            "load_start": load,
            "qemu_processes_start": qemu,
        });
        let samples = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let samples = Arc::clone(&samples);
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("load-sampler".into())
                .spawn(move || {
                    let t0 = std::time::Instant::now();
                    let tick = Duration::from_millis(200);
                    let mut next = Duration::ZERO;
                    while !stop.load(Ordering::Relaxed) {
                        if t0.elapsed() >= next {
                            let s = Sample {
                                t: t0.elapsed().as_secs_f64(),
                                load1: loadavg().map_or(f64::NAN, |l| l[0]),
                                qemu: qemu_processes(),
                            };
                            if let Ok(mut v) = samples.lock() {
                                v.push(s);
                            }
                            next += SAMPLE_EVERY;
                        }
                        std::thread::sleep(tick);
                    }
                })
                .ok()
        };
        Recorder {
            start,
            unix_start,
            samples,
            stop,
            thread,
        }
    }

    /// Stops sampling; the provenance json. `instances_at_once`: the
    /// most QEMU instances this run had up at the same time; `accel`: the
    /// accelerator the clusters reported (None: not known, the host's
    /// auto choice is given).
    pub fn finish(mut self, instances_at_once: Option<u64>, accel: Option<&str>) -> Value {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let samples = self.samples.lock().map(|v| v.clone()).unwrap_or_default();
        let end = unix_now();
        let mut v = self.start.clone();
        v["date_end_utc"] = json!(super::iso(end));
        v["seconds"] = json!(end.saturating_sub(self.unix_start));
        v["load_end"] = json!(loadavg());
        v["qemu_processes_end"] = json!(qemu_processes());
        v["instances_at_once"] = json!(instances_at_once);
        v["accel"] = json!(accel
            .filter(|a| !a.is_empty() && *a != "unknown")
            .map(str::to_string)
            .unwrap_or_else(|| format!(
                "{} (qemu-run.sh --accel auto on this host)",
                v["host"]["accel_auto"].as_str().unwrap_or("unknown")
            )));
        v["load_samples"] = json!(summary(&samples));
        v
    }
}

fn stats(mut xs: Vec<f64>) -> Value {
    xs.retain(|x| x.is_finite());
    if xs.is_empty() {
        return Value::Null;
    }
    xs.sort_by(f64::total_cmp);
    let med = xs[xs.len() / 2];
    json!({"min": xs[0], "median": med, "max": xs[xs.len() - 1]})
}

/// min / median / max of the samples' load and QEMU count.
pub fn summary(samples: &[Sample]) -> Value {
    let load: Vec<f64> = samples.iter().map(|s| s.load1).collect();
    let qemu: Vec<f64> = samples.iter().map(|s| s.qemu as f64).collect();
    json!({
        "every_s": SAMPLE_EVERY.as_secs(),
        "count": samples.len(),
        "load1": stats(load),
        "qemu_processes": stats(qemu),
    })
}

fn load_text(v: &Value) -> String {
    match v.as_array() {
        Some(a) if a.len() == 3 => a
            .iter()
            .map(|x| x.as_f64().map_or("?".into(), |f| format!("{f:.2}")))
            .collect::<Vec<_>>()
            .join(" / "),
        _ => "unknown".into(),
    }
}

fn mmm(v: &Value, digits: usize) -> String {
    let f = |k: &str| {
        v[k].as_f64()
            .map_or("?".into(), |x| format!("{x:.digits$}"))
    };
    if v.is_null() {
        "no samples".into()
    } else {
        format!("{} / {} / {}", f("min"), f("median"), f("max"))
    }
}

/// report.md's "Provenance" section (a table, then the command).
pub fn md_section(p: &Value) -> String {
    let mut s = String::new();
    let t = |k: &str| p[k].as_str().unwrap_or("unknown").replace('|', "\\|");
    let h = |k: &str| {
        p["host"][k]
            .as_str()
            .unwrap_or("unknown")
            .replace('|', "\\|")
    };
    let dirty = match &p["dirty"] {
        Value::Bool(false) => "clean".to_string(),
        Value::Bool(true) => {
            let files: Vec<&str> = p["changed_files"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            format!(
                "**dirty**: uncommitted changes to {} tracked file(s): {}",
                files.len(),
                files.join(", ").replace('|', "\\|")
            )
        }
        v => v.as_str().unwrap_or("unknown").to_string(),
    };
    let _ = writeln!(s, "## Provenance\n");
    let _ = writeln!(s, "| what | value |\n| --- | --- |");
    let _ = writeln!(s, "| commit | `{}` ({}) |", t("commit"), t("branch"));
    let _ = writeln!(s, "| working tree | {dirty} |");
    let _ = writeln!(
        s,
        "| date (UTC) | {} to {} ({} s) |",
        t("date_utc"),
        t("date_end_utc"),
        p["seconds"]
    );
    let _ = writeln!(s, "| host | {} CPUs, {} |", h("nproc"), h("cpu"));
    let _ = writeln!(s, "| host kernel | {} |", h("kernel"));
    let _ = writeln!(s, "| QEMU | {} |", h("qemu"));
    let _ = writeln!(s, "| accelerator | {} |", t("accel"));
    let _ = writeln!(
        s,
        "| load average (1 / 5 / 15 min) | start {}; end {} |",
        load_text(&p["load_start"]),
        load_text(&p["load_end"])
    );
    let ls = &p["load_samples"];
    let _ = writeln!(
        s,
        "| 1-min load during the run (min / median / max, {} samples, every {} s) | {} |",
        ls["count"],
        ls["every_s"],
        mmm(&ls["load1"], 2)
    );
    let _ = writeln!(
        s,
        "| QEMU processes on the host, every user's (min / median / max) | {} (start {}, end {}) |",
        mmm(&ls["qemu_processes"], 0),
        p["qemu_processes_start"],
        p["qemu_processes_end"]
    );
    let _ = writeln!(
        s,
        "| this run's QEMU instances at once (most) | {} |",
        p["instances_at_once"]
            .as_u64()
            .map_or("unknown".into(), |n| n.to_string())
    );
    let _ = writeln!(
        s,
        "\nCommand (run from the repository root through `tools/bench-report.sh`, which builds \
         first and passes every argument on):\n\n```\n{}\n```\n",
        t("command")
    );
    if let Some(r) = p.get("rendered") {
        let _ = writeln!(
            s,
            "Charts and this file re-drawn from results.json by `onecopy-bench --render` at \
             commit `{}` on {}; the numbers are the run's.\n",
            r["commit"].as_str().unwrap_or("unknown"),
            r["date_utc"].as_str().unwrap_or("unknown")
        );
    }
    s
}

/// `md` with the provenance section inserted after its title (the first
/// `# ` line and the paragraph after it).
pub fn insert_md(md: &str, p: &Value) -> String {
    let section = md_section(p);
    // After the first "## " heading's start: the title and the intro stay
    // on top.
    match md.find("\n## ") {
        Some(i) => format!("{}{section}{}", &md[..=i], &md[i + 1..]),
        None => format!("{md}\n{section}"),
    }
}

/// The run's parameters file (`params.json`): the command line and the
/// parsed options, for a rerun with the same arguments.
pub fn params_json(p: &Value, opts: &Value) -> Value {
    json!({
        "command": p["command"],
        "args": p["args"],
        "commit": p["commit"],
        "options": opts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loadavg_parses() {
        assert_eq!(
            parse_loadavg("6.19 3.20 2.29 6/140 17654\n"),
            Some([6.19, 3.2, 2.29])
        );
        assert_eq!(parse_loadavg("x"), None);
        assert_eq!(parse_loadavg(""), None);
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("--out"), "--out");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn summary_of_samples() {
        let s = summary(&[
            Sample {
                t: 0.0,
                load1: 2.0,
                qemu: 3,
            },
            Sample {
                t: 10.0,
                load1: f64::NAN,
                qemu: 5,
            },
            Sample {
                t: 20.0,
                load1: 4.0,
                qemu: 4,
            },
        ]);
        assert_eq!(s["load1"]["min"], 2.0);
        assert_eq!(s["load1"]["max"], 4.0);
        assert_eq!(s["qemu_processes"]["median"], 4.0);
        assert!(summary(&[])["load1"].is_null());
    }

    #[test]
    fn section_goes_after_the_intro() {
        let md = "# title\n\nintro\n\n## Machine\n\nx\n";
        let p = json!({"commit": "abc", "dirty": true, "changed_files": ["M a.rs"],
                        "load_start": [1.0, 2.0, 3.0], "host": {"nproc": "2"}});
        let out = insert_md(md, &p);
        let prov = out.find("## Provenance").unwrap();
        assert!(out.find("intro").unwrap() < prov);
        assert!(prov < out.find("## Machine").unwrap());
        assert!(out.contains("`abc`"));
        assert!(out.contains("**dirty**"));
        assert!(out.contains("M a.rs"));
        assert!(out.contains("1.00 / 2.00 / 3.00"));
        assert!(!out.contains("\n\n\n"), "{out}");
    }
}
