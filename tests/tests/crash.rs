//! Crash consistency: what a node's `sync` acknowledged survives a SIGKILL
//! of the directory.
//!
//! A node runs a write-heavy loop of shell commands, each iteration
//! `write /c/fI TEXT_I` (a file of its own), `append /c/log LINE_I` and
//! `sync`; an iteration counts as acknowledged once the shell answered
//! `ok` to its `sync`. A thread SIGKILLs the directory's QEMU in the middle
//! of the loop. Then the cluster is stopped and the image is checked on the
//! host (`inspect --check`, every acknowledged file byte-exact, the log
//! starts with every acknowledged line), and a new cluster booted on the
//! same image reads the acknowledged files back byte-exact.
//!
//! Needs the release kernel and host tools (`tests/run.sh` builds them):
//!
//! ```text
//! cargo test -p onecopy-tests --test crash -- --test-threads=1
//! ```

use std::fs;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use onecopy_tests::{
    inspect, mkfs, repo_root, unique_run_dir, with_cluster, ClusterOpts, Instance,
};

const CTL: &str = env!("CARGO_BIN_EXE_onecopy-ctl");

/// The text of iteration `i`'s file: identifies the iteration, ~200 bytes.
fn file_text(i: u32) -> String {
    format!("crash-iteration-{i}-").repeat(10)
}

fn log_line(i: u32) -> String {
    format!("line-{i}")
}

#[test]
fn synced_writes_survive_a_directory_sigkill() {
    let run_dir = unique_run_dir("crash").expect("run dir");
    let image = run_dir.join("crash.img");
    let sample = repo_root().join("tools/sample");
    mkfs(&image, 64, sample.is_dir().then_some(sample.as_path())).expect("mkfs");
    let mut acked: Vec<u32> = Vec::new();
    let opts = ClusterOpts::new("crash")
        .ctl(CTL)
        .nodes(1)
        .run_dir(&run_dir)
        .disk(&image);
    with_cluster(opts, |c| {
        c.keep_run_dir(); // the image is examined after the cluster stops
        c.exec_ok(1, "mkdir /c")?;
        c.exec_ok(1, "sync")?;
        let pid = c.run().pid(Instance::Dir).expect("directory pid");
        let killer = thread::spawn(move || {
            thread::sleep(Duration::from_millis(2500));
            Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status()
                .expect("run kill")
        });
        let started = Instant::now();
        for i in 0..2000u32 {
            let t = Duration::from_secs(30);
            let w = c.exec_timeout(1, format!("write /c/f{i} {}", file_text(i)).as_bytes(), t)?;
            let a = c.exec_timeout(1, format!("append /c/log {}", log_line(i)).as_bytes(), t)?;
            if !w.is_ok() || !a.is_ok() {
                break;
            }
            if !c.exec_timeout(1, b"sync", t)?.is_ok() {
                break;
            }
            acked.push(i);
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "the kill never landed"
            );
        }
        assert!(
            killer.join().expect("killer thread").success(),
            "kill -KILL"
        );
        c.stop()?;
        Ok(())
    });
    eprintln!(
        "crash: {} iterations acknowledged before the kill",
        acked.len()
    );
    assert!(
        !acked.is_empty(),
        "no iteration was acknowledged before the kill"
    );

    let out = inspect(&image, &["--check"]).expect("inspect");
    assert_eq!(out.code, Some(0), "inspect --check: {}", out.text());
    for &i in &acked {
        let out = inspect(&image, &["--cat", &format!("/c/f{i}")]).expect("inspect");
        assert_eq!(out.code, Some(0), "/c/f{i}: {}", out.stderr_text());
        assert_eq!(
            out.stdout_text(),
            format!("{}\n", file_text(i)),
            "/c/f{i} on disk"
        );
    }
    let out = inspect(&image, &["--cat", "/c/log"]).expect("inspect");
    assert_eq!(out.code, Some(0), "/c/log: {}", out.stderr_text());
    let want: String = acked
        .iter()
        .map(|&i| format!("{}\n", log_line(i)))
        .collect();
    assert!(
        out.stdout_text().starts_with(&want),
        "/c/log on disk does not start with the acknowledged lines: {:?}",
        out.stdout_text()
    );

    // A new cluster on the same image reads them back.
    let run2 = unique_run_dir("crash2").expect("run dir");
    let opts = ClusterOpts::new("crash2")
        .ctl(CTL)
        .nodes(1)
        .run_dir(&run2)
        .disk(&image);
    with_cluster(opts, |c| {
        for &i in &acked {
            let out = c.exec_ok(1, &format!("cat /c/f{i}"))?;
            assert_eq!(out.lines, vec![file_text(i)], "cat /c/f{i} after restart");
        }
        Ok(())
    });
    let _ = fs::remove_dir_all(&run_dir);
}
