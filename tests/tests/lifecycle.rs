//! Integration tests of the launcher's own life cycle: `qemu-run.sh`
//! refuses bad flags before starting anything, runs `-e` commands and
//! stops the cluster it started, and leaves nothing behind when
//! interrupted (no process, no shared region).
//!
//! Needs the release kernel and host tools (`tests/run.sh` builds them):
//!
//! ```text
//! cargo build --release -p onecopy-kernel --target x86_64-unknown-none
//! cargo build --release -p flatfs --bins
//! cargo test -p onecopy-tests --test lifecycle -- --test-threads=1
//! ```

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use onecopy_tests::{qemu_run, repo_root, serial_guard, unique_run_dir, Instance, RunDir};

const CTL: &str = env!("CARGO_BIN_EXE_onecopy-ctl");

/// `/dev/shm/onecopy-*` files that exist now.
fn shm_files() -> BTreeSet<PathBuf> {
    fs::read_dir("/dev/shm")
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("onecopy-"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Pids of live processes whose command line mentions `needle`.
fn processes_mentioning(needle: &str) -> Vec<u32> {
    let me = std::process::id();
    let mut pids = Vec::new();
    let Ok(rd) = fs::read_dir("/proc") else {
        return pids;
    };
    for e in rd.filter_map(|e| e.ok()) {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me || !onecopy_tests::run::pid_alive(pid) {
            continue;
        }
        if let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) {
            if String::from_utf8_lossy(&cmdline).contains(needle) {
                pids.push(pid);
            }
        }
    }
    pids
}

/// Asserts that nothing of the cluster in `run_dir` is left: no process
/// mentions it and its shared region is gone.
fn assert_nothing_left(run_dir: &Path, shm_before: &BTreeSet<PathBuf>) {
    let needle = format!("{}/", run_dir.display());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = processes_mentioning(&needle);
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "processes left behind for {}: {left:?}",
            run_dir.display()
        );
        thread::sleep(Duration::from_millis(100));
    }
    // New regions that no live process uses (another cluster running on
    // this machine at the same time keeps its own region, named on its
    // QEMU command lines).
    let new: Vec<_> = shm_files()
        .difference(shm_before)
        .filter(|f| processes_mentioning(&f.display().to_string()).is_empty())
        .cloned()
        .collect();
    assert!(new.is_empty(), "shared memory files left behind: {new:?}");
}

// --------------------------------------------------------------------- (f)

#[test]
fn launcher_rejects_bad_flags() {
    let shm_before = shm_files();
    let run_dir = onecopy_tests::target_dir()
        .join("test-runs")
        .join(format!("never-created-{}", std::process::id()));
    let rd = run_dir.to_string_lossy().into_owned();
    let cases: Vec<Vec<&str>> = vec![
        vec!["--nodes", "0"],
        vec!["--nodes", "x"],
        vec!["--nodes", "17"],
        vec!["--nodes"],
        vec!["--bogus"],
        vec!["-e", "nonsense"],
        vec!["-e", "3: ls"],
        vec!["--accel", "foo"],
        vec!["--mode", "nfs"],
        vec!["--storage", "floppy"],
        vec!["--shm-mb", "24"],
        vec!["--mem-mb", "abc"],
        vec!["--console", "9"],
        vec!["--disk", "/nonexistent/disk.img"],
        vec!["stray-argument"],
    ];
    for case in cases {
        let mut args = vec!["--no-build", "--run-dir", &rd];
        args.extend(&case);
        let out = qemu_run(&args, Path::new(CTL), Duration::from_secs(60)).expect("qemu-run.sh");
        let err = out.stderr_text();
        assert_eq!(
            out.code,
            Some(2),
            "{case:?}: exit status; output: {}",
            out.text()
        );
        assert!(
            err.starts_with("qemu-run.sh: error: ") && err.contains("(see ./qemu-run.sh --help)"),
            "{case:?}: stderr {err:?}"
        );
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "{case:?}: one line: {err:?}"
        );
        assert!(
            out.stdout.is_empty(),
            "{case:?}: stdout {:?}",
            out.stdout_text()
        );
        assert!(!run_dir.exists(), "{case:?}: created the run dir");
    }
    let help = qemu_run(&["--help"], Path::new(CTL), Duration::from_secs(30)).expect("help");
    assert_eq!(help.code, Some(0));
    let text = help.stdout_text();
    for flag in [
        "--nodes",
        "--accel",
        "--disk",
        "--shm-mb",
        "--mem-mb",
        "--run-dir",
        "--detach",
        "--console",
        "--gdb",
        "--no-build",
        "-e",
        "stop",
    ] {
        assert!(text.contains(flag), "--help does not document {flag}");
    }
    assert_nothing_left(&run_dir, &shm_before);
}

// --------------------------------------------------------------- -e path

#[test]
fn exec_flag_runs_commands_and_stops() {
    let _serial = serial_guard();
    let shm_before = shm_files();
    let run_dir = unique_run_dir("exec").expect("run dir");
    let rd = run_dir.to_string_lossy().into_owned();

    let out = qemu_run(
        &[
            "--no-build",
            "--run-dir",
            &rd,
            "-e",
            "1: write /x hi",
            "-e",
            "2: cat /x",
        ],
        Path::new(CTL),
        Duration::from_secs(300),
    )
    .expect("qemu-run.sh");
    let text = out.text();
    assert_eq!(out.code, Some(0), "qemu-run.sh -e: {text}");
    assert!(
        text.lines().any(|l| l == "[n2] hi"),
        "no `[n2] hi` in: {text}"
    );
    assert!(
        text.lines().any(|l| l == "[n1] ok"),
        "no `[n1] ok` in: {text}"
    );
    assert_nothing_left(&run_dir, &shm_before);

    let out = qemu_run(
        &[
            "--no-build",
            "--run-dir",
            &rd,
            "-e",
            "1: cat /does/not/exist",
            "-e",
            "1: uptime",
        ],
        Path::new(CTL),
        Duration::from_secs(300),
    )
    .expect("qemu-run.sh");
    let text = out.text();
    assert_eq!(out.code, Some(1), "a failing -e command: {text}");
    assert!(
        text.lines().any(|l| l.starts_with("[n1] error: ")),
        "no `[n1] error:` in: {text}"
    );
    assert_nothing_left(&run_dir, &shm_before);
    let _ = fs::remove_dir_all(&run_dir);
}

#[test]
fn interrupt_leaves_nothing_behind() {
    let _serial = serial_guard();
    let shm_before = shm_files();
    let run_dir = unique_run_dir("sigint").expect("run dir");
    let run = RunDir::new(&run_dir);
    // A shell cannot trap a signal ignored when it started, and a parent
    // without job control (a CI script's `cmd &`) starts its children
    // with SIGINT ignored: restore its default first (`env` then execs
    // bash, so the pid is the launcher's).
    let mut cmd = Command::new("env");
    cmd.args(["--default-signal=INT", "bash"])
        .arg(repo_root().join("qemu-run.sh"))
        .args(["--no-build", "--run-dir"])
        .arg(&run_dir)
        .args(["--cmd-timeout", "600"]);
    // Keep node 1 busy for far longer than the test waits.
    for _ in 0..100 {
        cmd.args(["-e", "1: bench ring 1000000"]);
    }
    cmd.env("ONECOPY_CTL", CTL)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().expect("spawn qemu-run.sh");
    // Wait until the cluster is up (every node joined), then interrupt.
    let deadline = Instant::now() + Duration::from_secs(120);
    let up = loop {
        if onecopy_tests::ready::evaluate(
            &run.log(Instance::Dir),
            &[run.log(Instance::Node(1)), run.log(Instance::Node(2))],
        )
        .is_ready()
        {
            break true;
        }
        if Instant::now() >= deadline || child.try_wait().ok().flatten().is_some() {
            break false;
        }
        thread::sleep(Duration::from_millis(50));
    };
    thread::sleep(Duration::from_millis(500));
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break Some(st);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        thread::sleep(Duration::from_millis(50));
    };
    // Whatever happened, clean up before asserting.
    let _ = qemu_run(
        &["stop", "--run-dir", &run_dir.to_string_lossy()],
        Path::new(CTL),
        Duration::from_secs(60),
    );
    assert!(up, "the cluster did not come up");
    let status = status.expect("qemu-run.sh did not exit within 30 s of SIGINT");
    assert_eq!(status.code(), Some(130), "exit status after SIGINT");
    assert_nothing_left(&run_dir, &shm_before);
    let _ = fs::remove_dir_all(&run_dir);
}
