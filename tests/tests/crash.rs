//! Crash consistency, in every mode.
//!
//! What a node's `sync` acknowledged survives a SIGKILL of the directory:
//! a node runs a write-heavy loop of shell commands, each iteration
//! `write /c/fI TEXT_I` (a file of its own), `append /c/log LINE_I` and
//! `sync`; an iteration counts as acknowledged once the shell answered
//! `ok` to its `sync`. A thread SIGKILLs the directory's QEMU in the middle
//! of the loop. Then the cluster is stopped and the image is checked on the
//! host (`inspect --check`, every acknowledged file byte-exact, the log
//! starts with every acknowledged line); in `strong` mode a new cluster
//! booted on the same image also reads the acknowledged files back.
//!
//! What a SIGKILL of a node loses: in `strong` mode nothing a write
//! returned (its bytes sit in the failed owner's frames, which the
//! directory writes back when it fails the node), and never zeros that
//! nobody wrote. (`private`, `net` and `relaxed`: `dirty.rs`.) And in
//! `relaxed` mode a node that lost its private copies unwritten (a failed
//! write-back, then a rejoin) does not keep the size they had extended the
//! file to.
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
    inspect, mkfs, repo_root, unique_run_dir, with_cluster, ClusterOpts, Error, Instance,
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
    synced_writes_survive_a_directory_sigkill_in("strong");
}

#[test]
fn relaxed_synced_writes_survive_a_directory_sigkill() {
    synced_writes_survive_a_directory_sigkill_in("relaxed");
}

#[test]
fn private_synced_writes_survive_a_directory_sigkill() {
    synced_writes_survive_a_directory_sigkill_in("private");
}

#[test]
fn net_synced_writes_survive_a_directory_sigkill() {
    synced_writes_survive_a_directory_sigkill_in("net");
}

fn synced_writes_survive_a_directory_sigkill_in(mode: &str) {
    let run_dir = unique_run_dir(&format!("crash-{mode}")).expect("run dir");
    let image = run_dir.join("crash.img");
    let sample = repo_root().join("tools/sample");
    mkfs(&image, 64, sample.is_dir().then_some(sample.as_path())).expect("mkfs");
    let mut acked: Vec<u32> = Vec::new();
    let opts = ClusterOpts::new(&format!("crash-{mode}"))
        .ctl(CTL)
        .mode(mode)
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
        "crash ({mode}): {} iterations acknowledged before the kill",
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

    // A new cluster on the same image reads them back (once: the image
    // is the same whatever mode wrote it).
    if mode != "strong" {
        let _ = fs::remove_dir_all(&run_dir);
        return;
    }
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

fn fail(msg: impl Into<String>) -> Error {
    Error::Usage(msg.into())
}

/// The directory's heartbeat timeout in the node-failure tests: short, so
/// a killed or paused node is declared failed within a second.
const HB: &str = "hb_timeout_ms=600";

/// Strong mode: node 1 writes small files (one new, one overwritten in
/// place and extended, no sync) and is SIGKILLed. Its writes sit in its
/// frames of the shared region, which survived it: the directory writes
/// them back when it fails the node, so node 2 reads them and so does the
/// disk; never zeros of the right size.
#[test]
fn strong_killed_owners_completed_writes_survive() {
    let name = "crash-owner";
    let run_dir = unique_run_dir(name).expect("run dir");
    let image = run_dir.join("test.img");
    mkfs(&image, 16, None).expect("mkfs");
    let small = "written by node 1, never synced";
    let opts = ClusterOpts::new(name)
        .ctl(CTL)
        .mode("strong")
        .nodes(2)
        .append_extra(HB)
        .run_dir(&run_dir)
        .disk(&image);
    with_cluster(opts, |c| {
        c.keep_run_dir(); // the image is examined after the cluster stops
        c.exec_ok(1, "write /old synced line")?;
        c.exec_ok(1, "sync")?;
        c.exec_ok(1, "cache drop")?;
        // Node 1 now holds /old in its frame (a fill), then appends to it
        // and writes a new file; no sync.
        c.exec_ok(1, "cat /old")?;
        c.exec_ok(1, "append /old appended by node 1")?;
        c.exec_ok(1, &format!("write /small {small}"))?;
        c.kill_node(1)?;
        c.wait_log("dir", r"node 1 failed", Duration::from_secs(30))?;
        let out = c.exec_ok(2, "cat /small")?;
        if out.lines != vec![small.to_string()] {
            return Err(fail(format!("n2 reads /small as {:?}", out.lines)));
        }
        let out = c.exec_ok(2, "cat /old")?;
        if out.lines != vec!["synced line", "appended by node 1"] {
            return Err(fail(format!("n2 reads /old as {:?}", out.lines)));
        }
        c.exec_ok(2, "sync")?;
        c.stop()?;
        Ok(())
    });
    let out = inspect(&image, &["--check"]).expect("inspect");
    assert_eq!(out.code, Some(0), "inspect --check: {}", out.text());
    for (path, want) in [
        ("/small", format!("{small}\n")),
        ("/old", "synced line\nappended by node 1\n".to_string()),
    ] {
        let out = inspect(&image, &["--cat", path]).expect("inspect");
        assert_eq!(out.code, Some(0), "inspect --cat {path}: {}", out.text());
        assert_eq!(out.stdout_text(), want, "{path} on disk");
    }
    let _ = fs::remove_dir_all(&run_dir);
}

/// The `size=` of `stat PATH` on `node`.
fn stat_size(c: &mut onecopy_tests::Cluster, node: u8, path: &str) -> onecopy_tests::Result<u64> {
    let out = c.exec_ok(node, &format!("stat {path}"))?;
    out.text()
        .split_whitespace()
        .find_map(|w| w.strip_prefix("size="))
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| fail(format!("n{node}: stat {path}: {out:?}")))
}

/// Relaxed mode, a full disk: node 2's `append` past the last block of a
/// file lands in a private copy (its size local) whose write-back fails
/// at close (no space); node 2 is then paused long enough to be declared
/// failed, and rejoins, which drops the copy. It must not keep the larger
/// size (the file would read as zeros past the directory's end, and its
/// next append would write those zeros to the disk): it reports the
/// directory's size, and once space is freed its next append lands right
/// after the file's bytes. The cluster runs with `fence=0`: with fencing
/// on, the fencer kills a node declared failed, so a paused node never
/// comes back to rejoin (the rejoin path after a lost session is also
/// taken when a session breaks; host tests cover both).
#[test]
fn relaxed_lost_private_copies_leave_no_phantom_size() {
    let name = "crash-phantom";
    let run_dir = unique_run_dir(name).expect("run dir");
    let image = run_dir.join("test.img");
    mkfs(&image, 16, None).expect("mkfs");
    let opts = ClusterOpts::new(name)
        .ctl(CTL)
        .mode("relaxed")
        .nodes(2)
        .append_extra(&format!("{HB} fence=0"))
        .run_dir(&run_dir)
        .disk(&image);
    let page = 4096usize;
    with_cluster(opts, |c| {
        c.keep_run_dir();
        // One full block: an append needs a new one.
        c.exec_ok(1, &format!("fill /f {page}"))?;
        c.exec_ok(1, "sync")?;
        // Fill the disk (the partial file stays).
        let out = c.exec(1, "fill /big 33554432")?;
        if out.is_ok() {
            return Err(fail("a 32 MiB file fit on a 16 MiB disk"));
        }
        // The failed write-back of its last batch left blocks free: fill
        // them too, a block at a time.
        let full = (0..64).find(|i| {
            c.exec(1, &format!("fill /pad{i} {page}"))
                .is_ok_and(|o| !o.is_ok())
        });
        if full.is_none() {
            return Err(fail("64 more blocks fit on the full disk"));
        }
        let out = c.exec(2, "append /f world")?;
        if out.is_ok() {
            return Err(fail("node 2's append was written back on a full disk"));
        }
        // Paused past the heartbeat timeout: declared failed; it rejoins
        // when resumed.
        let pid = c.run().pid(Instance::Node(2)).expect("node 2 pid");
        let signal = |sig: &str| {
            Command::new("kill")
                .args([sig, &pid.to_string()])
                .status()
                .map(|s| s.success())
                .unwrap_or(false)
        };
        assert!(signal("-STOP"), "kill -STOP node 2");
        let failed = c.wait_log("dir", r"node 2 failed", Duration::from_secs(30));
        assert!(signal("-CONT"), "kill -CONT node 2");
        failed?;
        c.wait_log("node2", r"rejoining", Duration::from_secs(30))?;
        let size = stat_size(c, 2, "/f")?;
        if size != page as u64 {
            return Err(fail(format!(
                "n2 reports /f as {size} bytes after losing its append; the file holds {page}"
            )));
        }
        c.exec_ok(1, "rm /big")?;
        c.exec_ok(2, "append /f again")?;
        c.exec_ok(2, "sync")?;
        let size = stat_size(c, 1, "/f")?;
        if size != page as u64 + 6 {
            return Err(fail(format!("n1 sees /f as {size} bytes")));
        }
        c.stop()?;
        Ok(())
    });
    let out = inspect(&image, &["--check"]).expect("inspect");
    assert_eq!(out.code, Some(0), "inspect --check: {}", out.text());
    let out = inspect(&image, &["--cat", "/f"]).expect("inspect");
    let mut want = vec![0u8; page];
    userland::pattern::fill(&mut want, 0);
    want.extend_from_slice(b"again\n");
    assert!(
        out.stdout == want,
        "/f on disk: {} bytes, want {}; its tail {:?}",
        out.stdout.len(),
        want.len(),
        String::from_utf8_lossy(&out.stdout[out.stdout.len().saturating_sub(12)..])
    );
    let _ = fs::remove_dir_all(&run_dir);
}
