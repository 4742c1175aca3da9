//! Job files: fio's ini syntax, refusals with the line, the sample job
//! files, and fio's own examples (when Debian's `fio-examples` is
//! installed).

use super::*;
use crate::fio::jobfile::parse_jobfile;

fn jobs(text: &str) -> Vec<JobSpec> {
    parse_jobfile("t.fio", text).unwrap_or_else(|e| panic!("{text}\n-> {e}"))
}

fn jerr(text: &str) -> String {
    match parse_jobfile("t.fio", text) {
        Ok(j) => panic!("accepted: {text}\n{j:?}"),
        Err(e) => format!("{e}"),
    }
}

#[test]
fn global_and_jobs_as_on_the_command_line() {
    let text = "; a comment\n# another\n\n[global]\nrw = randread ; trailing comment\nbs=8k\nsize=1m\nioengine=libaio\n\n[a]\niodepth=4\n\n[b]\nstonewall\nrw=write\nnumjobs=2\n";
    let j = jobs(text);
    assert_eq!(j.len(), 2);
    assert_eq!(
        j[0],
        p(&[
            "--name=a",
            "--rw=randread",
            "--bs=8k",
            "--size=1m",
            "--ioengine=libaio",
            "--iodepth=4"
        ])
    );
    assert_eq!(
        j[1],
        p(&[
            "--name=b",
            "--rw=write",
            "--bs=8k",
            "--size=1m",
            "--ioengine=libaio",
            "--numjobs=2"
        ])
    );
}

#[test]
fn every_command_line_option_is_accepted_in_a_file() {
    let values = |k: &str| -> Option<&'static str> {
        Some(match k {
            "name" => "x",
            "rw" | "readwrite" => "randrw",
            "rwmixread" | "rwmixwrite" => "30",
            "bs" | "blocksize" => "8k",
            "size" => "1m",
            "filename" => "f",
            "directory" => "/d",
            "numjobs" => "2",
            "iodepth" => "4",
            "runtime" | "ramp_time" => "2",
            "ioengine" => "libaio",
            "invalidate" => "0",
            "fsync" => "3",
            "randseed" => "7",
            "random_distribution" => "zipf:1.2",
            "description" => "some words",
            "direct" => "0",
            "buffered" => "1",
            _ => return None,
        })
    };
    let mut file = String::from("[job]\n");
    let mut args: Vec<String> = Vec::new();
    for k in crate::fio::options::option_names() {
        match values(k) {
            Some(v) => {
                file.push_str(&format!("{k}={v}\n"));
                args.push(format!("--{k}={v}"));
            }
            None => {
                file.push_str(&format!("{k}\n"));
                args.push(format!("--{k}"));
            }
        }
    }
    // The section names the job; a `name=` inside it overrides it.
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(jobs(&file), vec![p(&argv)]);
}

#[test]
fn refusals_name_the_option_and_line() {
    for (text, want) in [
        (
            "[j]\nsize=1m\nnorandommap\n",
            "fio: t.fio:3: unsupported option 'norandommap'",
        ),
        (
            "[j]\nsize=1m\ndirect=1\n",
            "fio: t.fio:3: bad value '1' for option 'direct' (only direct=0: every I/O goes through the page cache, which is what is measured)",
        ),
        (
            "[global]\nsize=1m\n[j]\nbs=3\n",
            "fio: t.fio:4: bad value '3' for option 'bs' (a multiple of 512 from 512 to 16m)",
        ),
        (
            "[j]\nsize=${SIZE}\n",
            "fio: t.fio:2: variables and expressions ('${VAR}', '$ncpus', ...) are not supported; write the value",
        ),
        (
            "size=1m\n[j]\n",
            "fio: t.fio:1: option 'size' outside a section ([global] or [NAME])",
        ),
        (
            "[a]\nsize=1m\n[b]\nsize=1m\n",
            "fio: t.fio:3: job 'b' would run alongside the jobs before it, but jobs run one at a time here: add 'stonewall' to it (or to [global])",
        ),
        (
            "[a]\nbs=4k\n",
            "fio: t.fio:1: job 'a': option '--size' is required (e.g. --size=64m)",
        ),
        ("[global]\nsize=1m\n", "fio: t.fio: no job section ([NAME] after [global])"),
        ("[a\n", "fio: t.fio:1: a section header is '[NAME]'"),
        (
            "include other.fio\n",
            "fio: t.fio:1: 'include' is not supported; put the options in this file",
        ),
        (
            "[j]\nsize=1m\nstonewall=2\n",
            "fio: t.fio:3: bad value '2' for option 'stonewall' (0 or 1, or no value)",
        ),
        (
            "[j]\nsize=1m\ntime_based=yes\n",
            "fio: t.fio:3: bad value 'yes' for option 'time_based' (0 or 1, or no value)",
        ),
        (
            "[j]\nsize=1m\nrw\n",
            "fio: t.fio:3: option 'rw' requires a value (rw=VALUE)",
        ),
        (
            "[a/b]\nsize=1m\n",
            "fio: t.fio:1: bad value 'a/b' for option 'name' (1 to 48 characters, no '/', not starting with '.')",
        ),
    ] {
        assert_eq!(jerr(text), want, "{text}");
    }
}

#[test]
fn stonewall_in_global_and_new_group() {
    let j = jobs("[global]\nsize=1m\nstonewall\n[a]\n[b]\nnew_group\n[c]\nwait_for_previous=1\n");
    assert_eq!(
        j.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["a", "b", "c"]
    );
    // `stonewall=0` in a job undoes the global one.
    assert!(
        jerr("[global]\nsize=1m\nstonewall\n[a]\n[b]\nstonewall=0\n")
            .starts_with("fio: t.fio:5: job 'b' would run alongside")
    );
    // A comment marker inside a word is part of it.
    assert_eq!(jobs("[a#1]\nsize=1m\n")[0].name, "a#1");
}

fn repo_file(rel: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(rel)
}

/// Every job file of `tools/sample/jobs` (copied into the default disk
/// image) parses, and runs on the fake OS.
#[test]
fn sample_job_files_parse_and_run() {
    let dir = repo_file("tools/sample/jobs");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "fio"))
        .collect();
    names.sort();
    assert!(names.len() >= 3, "{names:?}");
    for path in names {
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.file_name().unwrap().to_str().unwrap();
        let specs = parse_jobfile(name, &text).unwrap_or_else(|e| panic!("{e}"));
        assert!(!specs.is_empty());
        let mut os = FakeOs::new();
        let guest = format!("/jobs/{name}");
        os.dirs.insert("/jobs".to_string());
        os.files.insert(guest.clone(), text.into_bytes());
        let out = command(&mut os, &[guest.as_str()]).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            out.lines().filter(|l| l.starts_with("RESULT ")).count(),
            specs.len(),
            "{out}"
        );
        for (i, s) in specs.iter().enumerate() {
            assert!(
                out.contains(&format!("{}: (g={i}): rw={}", s.name, s.rw.as_str())),
                "{out}"
            );
        }
        assert_eq!(os.open_fds(), 0);
    }
}

/// The job files Debian's `fio-examples` package installs (fio's own
/// `examples/`), read where the package put them: each parses, or is
/// refused with `FILE:LINE: ` and a reason naming what is not supported.
#[test]
fn fio_examples_parse_or_are_refused_by_line() {
    let dir = std::path::Path::new("/usr/share/doc/fio/examples");
    let Ok(rd) = std::fs::read_dir(dir) else {
        std::eprintln!(
            "SKIP fio_examples_parse_or_are_refused_by_line: {} not found (install Debian's fio-examples: tools/setup.sh, or apt-get install fio-examples)",
            dir.display()
        );
        return;
    };
    let mut paths: Vec<_> = rd.map(|e| e.unwrap().path()).collect();
    paths.sort();
    let line_re = |msg: &str, name: &str| -> bool {
        let Some(rest) = msg.strip_prefix(&format!("fio: {name}:")) else {
            return false;
        };
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        digits > 0 && rest[digits..].starts_with(": ")
    };
    let (mut parsed, mut refused) = (Vec::new(), Vec::new());
    for path in paths {
        let fname = path.file_name().unwrap().to_str().unwrap().to_string();
        let text = if fname.ends_with(".fio") {
            std::fs::read_to_string(&path).unwrap()
        } else if fname.ends_with(".fio.gz") {
            let out = std::process::Command::new("gzip")
                .arg("-dc")
                .arg(&path)
                .output()
                .expect("gzip");
            assert!(out.status.success(), "gzip -dc {}", path.display());
            String::from_utf8(out.stdout).unwrap()
        } else {
            continue;
        };
        let name = fname.trim_end_matches(".gz");
        match parse_jobfile(name, &text) {
            Ok(specs) => {
                assert!(!specs.is_empty());
                parsed.push(name.to_string());
            }
            Err(e) => {
                let msg = format!("{e}");
                assert!(line_re(&msg, name), "{name}: no line number: {msg}");
                let reason = msg.splitn(4, ':').nth(3).unwrap_or("").trim();
                let clear = reason.contains('\'')
                    && (reason.starts_with("unsupported option '")
                        || reason.starts_with("bad value '")
                        || reason.starts_with("job '")
                        || reason.starts_with("option '")
                        || reason.starts_with("variables and expressions")
                        || reason.starts_with("'include'"));
                assert!(clear, "{name}: unclear refusal: {msg}");
                refused.push(msg);
            }
        }
    }
    assert!(
        parsed.len() + refused.len() > 0,
        "no job file in {}",
        dir.display()
    );
    std::eprintln!(
        "fio examples: {} job files, {} parse, {} refused",
        parsed.len() + refused.len(),
        parsed.len(),
        refused.len()
    );
    std::eprintln!("parsed: {parsed:?}");
    for r in &refused {
        std::eprintln!("refused: {r}");
    }
}
