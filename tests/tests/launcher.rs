//! Integration tests of the launcher's guard rails, one section per guard:
//! each section's first test fails on a `qemu-run.sh` without that guard (the `--shm-mb` section also checks
//! that the maximum it accepts boots and works); and of `--dilation`
//! (the last section).
//!
//! Needs the release kernel and host tools (`tests/run.sh` builds them):
//!
//! ```text
//! cargo build --release -p onecopy-kernel --target x86_64-unknown-none
//! cargo build --release -p flatfs --bins
//! cargo test -p onecopy-tests --test launcher -- --test-threads=1
//! ```
//!
//! Tests that call `qemu-run.sh` themselves hold [`serial_guard`] (one
//! cluster at a time) and a [`Cleanup`], which stops and kills whatever the
//! launcher left in their run directory, even when the launcher under test
//! fails to.

use std::collections::BTreeSet;
use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use onecopy_tests::shell::{parse_sum, pattern_crc32};
use onecopy_tests::{
    qemu_run, serial_guard, unique_run_dir, with_cluster, ClusterOpts, HostOutput, Instance, RunDir,
};

const CTL: &str = env!("CARGO_BIN_EXE_onecopy-ctl");

/// The largest `--shm-mb` qemu-run.sh accepts (`SHM_MB_MAX`): measured to
/// boot and work with one node, whose pool is then the whole region.
const SHM_MB_MAX: u32 = 8192;

fn opts(name: &str) -> ClusterOpts {
    ClusterOpts::new(name).ctl(CTL)
}

fn run(args: &[&str]) -> HostOutput {
    qemu_run(args, Path::new(CTL), Duration::from_secs(300)).expect("run qemu-run.sh")
}

/// A fresh run directory path that does not exist (yet).
fn absent_run_dir(name: &str) -> PathBuf {
    let d = unique_run_dir(name).expect("run dir");
    fs::remove_dir(&d).expect("remove the empty run dir");
    d
}

/// Asserts that `out` is a refusal: exit status 2, nothing on stdout, one
/// `qemu-run.sh: error: ` line on stderr containing every needle. Returns
/// that line.
fn assert_refused(out: &HostOutput, what: &str, needles: &[&str]) -> String {
    let err = out.stderr_text();
    assert_eq!(
        out.code,
        Some(2),
        "{what}: exit status; output:\n{}",
        out.text()
    );
    assert!(
        out.stdout.is_empty(),
        "{what}: stdout {:?}",
        out.stdout_text()
    );
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "{what}: one line: {err:?}"
    );
    let line = err.trim_end().to_string();
    assert!(
        line.starts_with("qemu-run.sh: error: "),
        "{what}: stderr {line:?}"
    );
    for n in needles {
        assert!(line.contains(n), "{what}: no {n:?} in {line:?}");
    }
    line
}

/// Stops the cluster of a run directory when dropped, then SIGKILLs every
/// process still mentioning the run directory and removes every shared
/// region its processes or `cluster.env` named ([`Cleanup::note`] records
/// them while they exist). The run directory is removed unless the test
/// failed.
struct Cleanup {
    run: RunDir,
    shm: BTreeSet<PathBuf>,
}

impl Cleanup {
    fn new(dir: &Path) -> Cleanup {
        Cleanup {
            run: RunDir::new(dir),
            shm: BTreeSet::new(),
        }
    }

    /// Records the shared regions of the run directory's processes now.
    fn note(&mut self) {
        self.shm.extend(self.run.shm_paths());
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        self.note();
        let dir = self.run.path().to_string_lossy().into_owned();
        if self.run.path().is_dir() {
            let _ = qemu_run(
                &["stop", "--run-dir", &dir],
                Path::new(CTL),
                Duration::from_secs(60),
            );
        }
        for pid in self.run.processes() {
            eprintln!("cleanup: SIGKILL leftover pid {pid} of {dir}");
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.run.processes().is_empty() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(50));
        }
        for p in &self.shm {
            if p.exists() {
                eprintln!("cleanup: removing leftover {}", p.display());
                let _ = fs::remove_file(p);
            }
        }
        if !thread::panicking() {
            let _ = fs::remove_dir_all(self.run.path());
        }
    }
}

/// Asserts that no process mentions `run`'s directory and none of `shm`
/// exists.
fn assert_nothing_left(run: &RunDir, shm: &BTreeSet<PathBuf>) {
    // `stop` has returned: its processes are gone, give the kernel a moment
    // to reap them.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !run.processes().is_empty() && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        run.processes(),
        Vec::<u32>::new(),
        "processes left behind for {}",
        run.path().display()
    );
    let left: Vec<_> = shm.iter().filter(|p| p.exists()).collect();
    assert!(left.is_empty(), "shared regions left behind: {left:?}");
}

// ------------------------------------------------- 1. --shm-mb maximum

#[test]
fn shm_mb_beyond_the_kernel_heap_is_refused() {
    let _serial = serial_guard();
    let run_dir = absent_run_dir("shm-max");
    let rd = run_dir.to_string_lossy().into_owned();
    let mut clean = Cleanup::new(&run_dir);
    let max = SHM_MB_MAX.to_string();
    for mb in ["16384", "32768", "65536"] {
        let out = run(&[
            "--no-build",
            "--run-dir",
            &rd,
            "--nodes",
            "1",
            "--shm-mb",
            mb,
            "-e",
            "1: ls /",
        ]);
        clean.note();
        assert_refused(
            &out,
            &format!("--shm-mb {mb}"),
            &["--shm-mb", mb, &max, "HEAP_BYTES"],
        );
        assert!(!run_dir.exists(), "--shm-mb {mb}: created the run dir");
    }
}

#[test]
fn largest_shm_mb_boots_and_works() {
    // One node: its pool is the whole region, the worst case for the
    // node's per-frame bookkeeping on its kernel heap.
    with_cluster(opts("shm-max-ok").nodes(1).shm_mb(SHM_MB_MAX), |c| {
        c.exec_ok(1, "fill /f 64k")?;
        let sum = parse_sum(&c.exec_ok(1, "sum /f")?.text()).expect("sum output");
        assert_eq!(sum, (pattern_crc32(65536), 65536), "sum /f");
        let stats = c.stats(1, "cache stats")?;
        let pool = stats.get("pool frames free/total");
        let total: u64 = pool
            .split('/')
            .nth(1)
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or_else(|| panic!("pool frames free/total: {pool:?}"));
        assert!(
            total * 4096 > u64::from(SHM_MB_MAX - 16) << 20,
            "node 1's pool ({total} frames) is not the whole region"
        );
        // The directory serves the region too.
        c.stats(1, "dir stats")?;
        Ok(())
    });
}

// ------------------------------------------- 2. one cluster per run dir

#[test]
fn one_cluster_per_run_dir_and_stop_finds_everything() {
    let _serial = serial_guard();
    let run_dir = unique_run_dir("one-per-dir").expect("run dir");
    let rd = run_dir.to_string_lossy().into_owned();
    let mut clean = Cleanup::new(&run_dir);
    let launch_args = ["--no-build", "--run-dir", &rd, "--detach", "--nodes", "1"];
    // Two launches at once: whichever takes the run dir first boots, the
    // other is refused, whatever the interleaving.
    let (a, b) = thread::scope(|s| {
        let a = s.spawn(|| run(&launch_args));
        let b = s.spawn(|| run(&launch_args));
        (a.join().expect("launch a"), b.join().expect("launch b"))
    });
    clean.note();
    let both = format!("--- a ---\n{}\n--- b ---\n{}", a.text(), b.text());
    for out in [&a, &b] {
        let t = out.text();
        assert!(
            !t.contains("cannot stat") && !t.contains("mv:"),
            "raw error messages:\n{both}"
        );
    }
    let refused = match (a.code, b.code) {
        (Some(0), _) => &b,
        (_, Some(0)) => &a,
        _ => panic!("no launch succeeded:\n{both}"),
    };
    assert_refused(refused, "the concurrent launch", &["already", &rd]);

    // While the detached cluster runs, a later launch is refused too.
    let out = run(&launch_args);
    clean.note();
    assert_refused(&out, "a launch on a running cluster", &["already", &rd]);

    // The cluster that won works.
    let out = run(&["exec", "--run-dir", &rd, "-e", "1: uptime"]);
    assert_eq!(out.code, Some(0), "exec on the cluster: {}", out.text());
    clean.note();
    let shm = clean.shm.clone();
    assert_eq!(shm.len(), 1, "one cluster, one shared region: {shm:?}");
    assert!(
        !clean.run.processes().is_empty(),
        "no cluster process found"
    );

    let out = run(&["stop", "--run-dir", &rd]);
    assert_eq!(out.code, Some(0), "stop: {}", out.text());
    assert_nothing_left(&clean.run, &shm);
}

// ----------------------------------------- 3. status tells the truth

fn status(rd: &str) -> (Option<i32>, String) {
    let out = run(&["status", "--run-dir", rd]);
    assert!(
        out.stderr.is_empty(),
        "status stderr: {}",
        out.stderr_text()
    );
    (out.code, out.stdout_text())
}

/// The line of `status` output about instance `name`.
fn status_line<'a>(text: &'a str, name: &str) -> &'a str {
    let prefix = format!("{name}: ");
    text.lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} line in status:\n{text}"))
}

#[test]
fn status_reports_each_instance_real_state() {
    with_cluster(opts("status").nodes(2), |c| {
        let rd = c.run_dir().to_string_lossy().into_owned();
        let (code, text) = status(&rd);
        assert_eq!(code, Some(0), "status of a healthy cluster:\n{text}");
        for name in ["dir", "node1", "node2"] {
            assert!(
                status_line(&text, name).starts_with(&format!("{name}: running")),
                "{text}"
            );
        }

        // One instance gone: status says which and why, and fails.
        c.kill_node(2)?;
        assert_eq!(c.wait_exit("node2", Duration::from_secs(10))?, Some(137));
        let (code, text) = status(&rd);
        assert_ne!(code, Some(0), "status with node 2 dead:\n{text}");
        let l = status_line(&text, "node2");
        assert!(
            l.contains("exited with code 137") && l.contains("SIGKILL"),
            "{text}"
        );
        assert!(status_line(&text, "node1").starts_with("node1: running"));
        assert!(
            !text.lines().any(|l| l.starts_with("state running")),
            "status claims the cluster runs:\n{text}"
        );

        // The shared region shrinks under the running instances: each dies
        // of SIGBUS on its next access to it.
        let shm = c.run().env().get("SHM_PATH").cloned().expect("SHM_PATH");
        fs::OpenOptions::new()
            .write(true)
            .open(&shm)
            .and_then(|f| f.set_len(0))
            .expect("truncate the shared region");
        for name in ["dir", "node1"] {
            assert_eq!(
                c.wait_exit(name, Duration::from_secs(60))?,
                Some(135),
                "{name}'s exit status"
            );
        }
        let (code, text) = status(&rd);
        assert_ne!(code, Some(0), "status with every instance dead:\n{text}");
        for name in ["dir", "node1"] {
            let l = status_line(&text, name);
            assert!(
                l.contains("exited with code 135")
                    && l.contains("SIGBUS")
                    && l.contains("shared region shrank or vanished"),
                "{text}"
            );
        }
        assert!(
            text.lines()
                .any(|l| l.contains(shm.as_str()) && l.contains("0 bytes")),
            "status does not show the shrunken region:\n{text}"
        );
        // QEMU's own message file says it too.
        let err = c.run().stderr(Instance::Dir);
        assert!(err.contains("SIGBUS"), "dir.stderr: {err:?}");
        Ok(())
    });
}

// ------------------------------------------------ 4. -e validation

const BAD_SPECS: [&str; 5] = [
    "1: ls /\nx",
    "1: ls /\r",
    "1: ls\t/",
    "1: ls /\x1b[A",
    "1: ls /\x7f",
];

#[test]
fn exec_values_with_control_characters_are_refused() {
    {
        let _serial = serial_guard();
        let run_dir = absent_run_dir("bad-e");
        let rd = run_dir.to_string_lossy().into_owned();
        let mut clean = Cleanup::new(&run_dir);
        for bad in BAD_SPECS {
            let out = run(&["--no-build", "--run-dir", &rd, "--nodes", "1", "-e", bad]);
            clean.note();
            assert_refused(&out, &format!("launch -e {bad:?}"), &["-e"]);
            assert!(!run_dir.exists(), "-e {bad:?}: created the run dir");
        }
    }
    with_cluster(opts("bad-e-exec").nodes(1), |c| {
        let rd = c.run_dir().to_string_lossy().into_owned();
        for bad in BAD_SPECS {
            let out = run(&["exec", "--run-dir", &rd, "-e", bad]);
            assert_refused(&out, &format!("exec -e {bad:?}"), &["-e"]);
            let out = run(&["exec", "--run-dir", &rd, bad]);
            assert_refused(&out, &format!("exec {bad:?}"), &[]);
        }
        let out = run(&["exec", "--run-dir", &rd, "-e", "1: ls /"]);
        assert_eq!(out.code, Some(0), "exec -e '1: ls /': {}", out.text());
        assert!(out.stdout_text().lines().any(|l| l == "[n1] ok"));
        Ok(())
    });
}

// --------------------------------------------- 5. --gdb port in use

#[test]
fn gdb_port_in_use_is_refused_before_booting() {
    let _serial = serial_guard();
    let run_dir = absent_run_dir("gdb-port");
    let rd = run_dir.to_string_lossy().into_owned();
    let mut clean = Cleanup::new(&run_dir);
    let port = 1234 + 1;
    let addr = format!("127.0.0.1:{port}");
    let args = [
        "--no-build",
        "--run-dir",
        &rd,
        "--nodes",
        "1",
        "--gdb",
        "1",
        "-e",
        "1: uptime",
    ];
    // Hold the port (if something else already does, it is in use anyway).
    let holder = match TcpListener::bind(&addr) {
        Ok(l) => Some(l),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => None,
        Err(e) => panic!("bind {addr}: {e}"),
    };
    let out = run(&args);
    clean.note();
    assert_refused(&out, "--gdb 1 on a busy port", &[&addr, "in use"]);
    assert!(!out.text().contains("listens on"), "{}", out.text());
    assert!(!run_dir.exists(), "created the run dir");
    drop(holder);

    // A free port is accepted.
    if TcpListener::bind(&addr).is_err() {
        eprintln!("{addr} is used by another process: skipping the free-port check");
        return;
    }
    let out = run(&args);
    clean.note();
    assert_eq!(out.code, Some(0), "--gdb 1 on a free port: {}", out.text());
    assert!(
        out.stdout_text()
            .contains(&format!("gdb: node 1 listens on {addr}")),
        "{}",
        out.text()
    );
    let shm = clean.shm.clone();
    assert_nothing_left(&clean.run, &shm);
}

/// `--shm-path`: a region the user made is used, formatted by the
/// directory and left in place at stop; a missing or too small one is
/// refused before anything boots.
#[test]
fn shm_path_uses_and_keeps_the_users_region() {
    let run_dir = absent_run_dir("shm-path");
    let rd = run_dir.display().to_string();
    let region = PathBuf::from(format!("/dev/shm/onecopy-test-user-{}", std::process::id()));
    let small = PathBuf::from(format!("{}-small", region.display()));
    fs::File::create(&small)
        .and_then(|f| f.set_len(1 << 20))
        .expect("small region");
    let out = run(&[
        "--no-build",
        "--run-dir",
        &rd,
        "--shm-path",
        &small.display().to_string(),
    ]);
    assert_ne!(out.code, Some(0), "a 1 MiB region: {}", out.text());
    assert!(
        out.stderr_text().contains("--shm-mb 64 needs 67108864"),
        "{}",
        out.stderr_text()
    );
    let out = run(&[
        "--no-build",
        "--run-dir",
        &rd,
        "--shm-path",
        "/dev/shm/onecopy-test-none",
    ]);
    assert_ne!(out.code, Some(0), "a missing region: {}", out.text());
    assert!(
        out.stderr_text().contains("no such file"),
        "{}",
        out.stderr_text()
    );
    fs::remove_file(&small).ok();
    fs::File::create(&region)
        .and_then(|f| f.set_len(64 << 20))
        .expect("region");
    let out = run(&[
        "--no-build",
        "--run-dir",
        &rd,
        "--nodes",
        "2",
        "--shm-path",
        &region.display().to_string(),
        "-e",
        "1: write /x through the user's region",
        "-e",
        "2: cat /x",
    ]);
    let text = out.text();
    let kept = fs::read(&region).map(|b| b.get(..8).map(|m| m.to_vec()));
    fs::remove_file(&region).ok();
    assert_eq!(out.code, Some(0), "{text}");
    assert!(text.contains("[n2] through the user's region"), "{text}");
    assert!(text.contains("not removed at stop"), "{text}");
    assert_eq!(
        kept.ok().flatten().as_deref(),
        Some(&b"ONECOPY1"[..]),
        "the region survives the stop, formatted by the directory"
    );
    let _ = fs::remove_dir_all(&run_dir);
}

// ------------------------------------------------------ 6. time dilation

/// The number after `pattern` (a regex with one group) in `text`.
fn number_after(text: &str, pattern: &str) -> Option<f64> {
    regex::Regex::new(pattern)
        .ok()?
        .captures(text)?
        .get(1)?
        .as_str()
        .parse()
        .ok()
}

/// `--dilation auto` measures D before the boot (its `bench calibrate`
/// checksum is the host's: the same work), prints it in the `cluster up`
/// line and the directory's disk latency is the profile's times D;
/// `--dilation 3` takes D as given.
#[test]
fn dilation_scales_the_storage_model_by_the_measured_factor() {
    let host = Command::new(env!("CARGO_BIN_EXE_onecopy-calibrate"))
        .output()
        .expect("run onecopy-calibrate");
    let host = String::from_utf8_lossy(&host.stdout).into_owned();
    let checksum = |t: &str| {
        t.split_whitespace()
            .find_map(|w| w.strip_prefix("checksum="))
            .map(str::to_string)
    };
    let host_sum = checksum(&host).expect("host calibrate line");
    with_cluster(
        opts("dilation-auto")
            .nodes(1)
            .storage("sas-raid")
            .dilation("auto"),
        |c| {
            let launch = c.launch_output().to_string();
            let d = number_after(&launch, r"cluster up: .*, dilation (\d+\.\d\d)")
                .unwrap_or_else(|| panic!("no dilation in the cluster up line:\n{launch}"));
            assert!(d >= 0.1, "D = {d}");
            // sas-raid's 100 us per request, dilated.
            let lat = number_after(&c.log("dir"), r"access latency (\d+) us")
                .expect("the directory's disk latency line");
            assert!(
                (lat - 100.0 * d).abs() <= 1.0,
                "latency {lat} us with D = {d}"
            );
            let guest = c.exec_ok(1, "bench calibrate")?.text();
            assert_eq!(checksum(&guest), Some(host_sum.clone()), "{guest}");
            Ok(())
        },
    );
    with_cluster(
        opts("dilation-3")
            .nodes(1)
            .storage("sas-raid")
            .dilation("3"),
        |c| {
            let launch = c.launch_output().to_string();
            assert!(launch.contains(", dilation 3.00"), "{launch}");
            assert!(
                launch.contains("throttling.bps-total=1333333333,throttling.iops-total=133333"),
                "{launch}"
            );
            assert!(c.log("dir").contains("access latency 300 us"));
            Ok(())
        },
    );
}
