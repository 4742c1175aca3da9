//! Integration tests: boot real onecopy clusters (QEMU) through
//! `qemu-run.sh` and check them through their shells, logs and disks.
//!
//! Needs the release kernel and host tools (`tests/run.sh` builds them):
//!
//! ```text
//! cargo build --release -p onecopy-kernel --target x86_64-unknown-none
//! cargo build --release -p flatfs --bins
//! cargo test -p onecopy-tests --test cluster -- --test-threads=1
//! ```
//!
//! Every test boots its own cluster in its own run directory under
//! `target/test-runs/`; clusters are stopped when the test ends, whatever
//! happens, and a failing test prints every instance's log.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use onecopy_tests::shell::{crc32, parse_stat, parse_sum, pattern_bytes, pattern_crc32};
use onecopy_tests::{
    inspect, mkfs, qemu_run, repo_root, run_with_timeout, serial_guard, unique_run_dir,
    with_cluster, ClusterOpts, Error, Result,
};
use regex::Regex;

const CTL: &str = env!("CARGO_BIN_EXE_onecopy-ctl");

fn opts(name: &str) -> ClusterOpts {
    ClusterOpts::new(name).ctl(CTL)
}

fn sample_dir() -> PathBuf {
    repo_root().join("tools/sample")
}

/// A fresh 64 MiB image from tools/sample at `path`.
fn fresh_image(path: &Path) -> Result<()> {
    let sample = sample_dir();
    mkfs(path, 64, sample.is_dir().then_some(sample.as_path()))
}

/// The line of `nodes` output describing node `k` (`  2    up  heartbeat=..`).
fn node_line(nodes_out: &str, k: u8) -> Option<String> {
    let re = Regex::new(&format!(r"^\s*\*?\s*(?:node\s*|n)?{k}\s+\S")).expect("regex");
    nodes_out
        .lines()
        .find(|l| re.is_match(l))
        .map(str::to_string)
}

fn is_up(line: &str) -> bool {
    Regex::new(r"\bup\b").expect("regex").is_match(line)
}

// --------------------------------------------------------------------- (a)

#[test]
fn cluster_boots_and_nodes_join() {
    with_cluster(opts("boot").nodes(2), |c| {
        assert!(
            Regex::new(r"cluster up: 1 directory \+ 2 nodes joined in \d+ ms")
                .unwrap()
                .is_match(c.launch_output()),
            "launch output: {}",
            c.launch_output()
        );
        c.wait_log("dir", "directory ready:", Duration::from_secs(5))?;
        for k in 1..=2 {
            c.wait_log(
                &format!("node{k}"),
                &format!("node {k} joined cluster epoch [0-9]+"),
                Duration::from_secs(5),
            )?;
        }
        let out = c.exec_ok(1, "nodes")?;
        let text = out.text();
        let n2 = node_line(&text, 2).unwrap_or_else(|| panic!("no line for node 2 in:\n{text}"));
        assert!(is_up(&n2), "node 2 is not up according to node 1: {n2:?}");
        let n1 = node_line(&text, 1).unwrap_or_else(|| panic!("no line for node 1 in:\n{text}"));
        assert!(is_up(&n1), "node 1 is not up according to itself: {n1:?}");
        // Both shells answer.
        c.exec_ok(2, "uptime")?;
        Ok(())
    });
}

// --------------------------------------------------------------------- (b)

#[test]
fn file_written_on_node1_reads_back_on_node2() {
    with_cluster(opts("rw").nodes(2), |c| {
        let text = "hello from node 1: onecopy keeps one copy";
        c.exec_ok(1, "mkdir /t")?;
        c.exec_ok(1, &format!("write /t/hello.txt {text}"))?;
        let out = c.exec_ok(2, "cat /t/hello.txt")?;
        assert_eq!(out.lines, vec![text.to_string()], "cat on node 2");
        // Byte-exact, newline included (`write` appends one).
        let expected = format!("{text}\n");
        let (crc, size) =
            parse_sum(&c.exec_ok(2, "sum /t/hello.txt")?.text()).expect("sum output on node 2");
        assert_eq!(size, expected.len() as u64);
        assert_eq!(
            crc,
            crc32(expected.as_bytes()),
            "crc of /t/hello.txt on node 2"
        );

        c.exec_ok(1, "fill /big 200k")?;
        let st = parse_stat(&c.exec_ok(1, "stat /big")?.text()).expect("stat output");
        assert!(
            st.size == 200_000 || st.size == 204_800,
            "fill /big 200k gave size {}",
            st.size
        );
        assert_eq!(st.kind, "file");
        let sum1 = parse_sum(&c.exec_ok(1, "sum /big")?.text()).expect("sum on node 1");
        let sum2 = parse_sum(&c.exec_ok(2, "sum /big")?.text()).expect("sum on node 2");
        assert_eq!(sum1, sum2, "node 1 and node 2 disagree on /big");
        assert_eq!(sum2, (pattern_crc32(st.size), st.size), "host pattern crc");
        Ok(())
    });
}

// --------------------------------------------------------------------- (c)

#[test]
fn synced_data_reaches_the_disk() {
    let run_dir = unique_run_dir("persist").expect("run dir");
    let image = run_dir.join("test.img");
    fresh_image(&image).expect("mkfs");
    let text = "persisted by node 1";
    let mut big_size = 0;
    with_cluster(opts("persist").run_dir(&run_dir).disk(&image), |c| {
        c.keep_run_dir(); // the image is examined after the cluster stops
        c.exec_ok(1, "mkdir /t")?;
        c.exec_ok(1, &format!("write /t/persist.txt {text}"))?;
        c.exec_ok(2, "fill /t/big 100k")?;
        big_size = parse_stat(&c.exec_ok(2, "stat /t/big")?.text())
            .expect("stat output")
            .size;
        c.exec_ok(1, "sync")?;
        c.exec_ok(2, "sync")?;
        for k in 1..=2u8 {
            let out = c.exec_ok(k, "shutdown")?;
            assert!(out.closed, "n{k}: console still open after shutdown");
            let st = c.wait_exit(&format!("node{k}"), Duration::from_secs(30))?;
            assert_eq!(st, Some(1), "node{k} exit status (1 = clean shutdown)");
        }
        c.stop()?;
        Ok(())
    });

    let out = inspect(&image, &["--cat", "/t/persist.txt"]).expect("inspect");
    assert_eq!(out.code, Some(0), "inspect --cat: {}", out.text());
    assert_eq!(out.stdout, format!("{text}\n").into_bytes(), "file on disk");
    let out = inspect(&image, &["--cat", "/t/big"]).expect("inspect");
    assert_eq!(
        out.code,
        Some(0),
        "inspect --cat /t/big: {}",
        out.stderr_text()
    );
    assert_eq!(out.stdout.len() as u64, big_size);
    assert!(
        out.stdout == pattern_bytes(big_size as usize),
        "/t/big on disk differs from the pattern"
    );
    let hello = sample_dir().join("hello.txt");
    if let Ok(expected) = fs::read(&hello) {
        let out = inspect(&image, &["--cat", "/hello.txt"]).expect("inspect");
        assert_eq!(out.stdout, expected, "sample file /hello.txt on disk");
    }
    let out = inspect(&image, &["--check"]).expect("inspect");
    assert_eq!(out.code, Some(0), "inspect --check: {}", out.text());
    let out = inspect(&image, &["--cat", "/t/nope"]).expect("inspect");
    assert_eq!(out.code, Some(1), "inspect --cat of a missing file");
    let _ = fs::remove_dir_all(&run_dir);
}

// --------------------------------------------------------------------- (d)

#[test]
fn corrupted_image_is_refused_and_untouched() {
    let run_dir = unique_run_dir("badimg").expect("run dir");
    let image = run_dir.join("bad.img");
    fresh_image(&image).expect("mkfs");
    // Overwrite the first 4 KiB with deterministic garbage.
    let mut bytes = fs::read(&image).expect("read image");
    let mut x: u32 = 0x1234_5678;
    for b in bytes.iter_mut().take(4096) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *b = x as u8;
    }
    fs::write(&image, &bytes).expect("write image");
    let check = inspect(&image, &["--check"]).expect("inspect");
    assert_eq!(
        check.code,
        Some(1),
        "inspect --check of the corrupted image"
    );

    with_cluster(
        opts("badimg")
            .run_dir(&run_dir)
            .disk(&image)
            .expect_ready(false)
            .cmd_timeout(Duration::from_secs(60)),
        |c| {
            c.keep_run_dir();
            let line = c.wait_log("dir", "directory: mount failed:", Duration::from_secs(30))?;
            assert!(
                line.len() > "directory: mount failed:".len() + 2,
                "no reason given: {line:?}"
            );
            let start = Instant::now();
            let out = c.exec(1, "ls /")?;
            let msg = out
                .error_message()
                .unwrap_or_else(|| panic!("ls / succeeded on a cluster without a disk: {out:?}"));
            assert!(
                msg.contains("directory unavailable"),
                "unexpected error for ls /: {msg:?}"
            );
            assert!(start.elapsed() < Duration::from_secs(60));
            // The shell still works.
            c.exec_ok(1, "uptime")?;
            let out = c.exec(2, "cat /hello.txt")?;
            assert!(!out.is_ok(), "cat on node 2 succeeded: {out:?}");
            c.stop()?;
            Ok(())
        },
    );
    let after = fs::read(&image).expect("read image");
    assert!(after == bytes, "the refused image was modified");
    let check = inspect(&image, &["--check"]).expect("inspect");
    assert_eq!(check.code, Some(1), "inspect --check after the run");
    let _ = fs::remove_dir_all(&run_dir);
}

// --------------------------------------------------------------------- (e)

#[test]
fn garbage_shell_input_gives_errors() {
    with_cluster(opts("garbage").nodes(1), |c| {
        let mut inputs: Vec<(String, Vec<u8>)> = [
            "frobnicate",
            "cat",
            "stat",
            "mkdir",
            "fill /x",
            "fill /x abc",
            "fill /x -5",
            "fill /x 99999999999999999999999999",
            "fill /x 12q",
            "truncate /x lots",
            "sum /no/such/file",
            "cat /no/such/file",
            "rmdir /no/such/dir",
            "bench ring abc",
            "ls /no/such/dir",
        ]
        .iter()
        .map(|s| (s.to_string(), s.as_bytes().to_vec()))
        .collect();
        inputs.push((
            "binary junk".into(),
            b"\xff\xfe\x80\x81zz\x01\x02~\xc3\x28\x7f\x7f!#".to_vec(),
        ));
        inputs.push(("5000-char word".into(), vec![b'x'; 5000]));
        inputs.push((
            "long ls".into(),
            format!("ls /{}", "a/".repeat(3000)).into_bytes(),
        ));
        for (what, bytes) in &inputs {
            let out = c.exec_bytes(1, bytes)?;
            assert!(!out.is_ok(), "{what:?} was answered ok: {:?}", out.lines);
            // The shell is still there.
            c.exec_ok(1, "uptime")?;
        }
        Ok(())
    });
}

// ------------------------------------------------------------ node killed

#[test]
fn killed_node_is_detected_and_others_keep_working() {
    with_cluster(opts("kill").nodes(2), |c| {
        c.exec_ok(1, "write /before.txt written before the kill")?;
        c.kill_node(2)?;
        let st = c.wait_exit("node2", Duration::from_secs(10))?;
        assert_ne!(
            st,
            Some(1),
            "a SIGKILLed node cannot have shut down cleanly"
        );
        // Node 1 and the directory carry on.
        assert_eq!(
            c.exec_ok(1, "cat /before.txt")?.lines,
            vec!["written before the kill".to_string()]
        );
        c.exec_ok(1, "write /after.txt still working")?;
        // The directory notices the silent node.
        c.wait_log("dir", r"node 2 failed", Duration::from_secs(60))?;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let text = c.exec_ok(1, "nodes")?.text();
            match node_line(&text, 2) {
                Some(l) if !is_up(&l) => break,
                _ if Instant::now() >= deadline => {
                    return Err(Error::Usage(format!(
                        "node 1 still sees node 2 up:\n{text}"
                    )))
                }
                _ => thread::sleep(Duration::from_millis(500)),
            }
        }
        c.exec_ok(1, "uptime")?;
        Ok(())
    });
}

// ---------------------------------------------------------- harness sanity

#[test]
fn host_tools_exist() {
    for tool in ["mkfs", "inspect"] {
        let p = onecopy_tests::host_tool(tool);
        assert!(
            p.is_file(),
            "{} missing: run cargo build --release -p flatfs --bins",
            p.display()
        );
    }
    let kernel = onecopy_tests::target_dir().join("x86_64-unknown-none/release/onecopy-kernel");
    assert!(
        kernel.is_file(),
        "{} missing: run cargo build --release -p onecopy-kernel --target x86_64-unknown-none",
        kernel.display()
    );
    let mut cmd = Command::new(CTL);
    cmd.arg("--help");
    let out = run_with_timeout(cmd, Duration::from_secs(10)).expect("onecopy-ctl --help");
    assert_eq!(out.code, Some(0));
}

// ------------------------------------------------------- data checksums

/// Flip one byte of block `block` of file `path` in `image` (through
/// `inspect --blocks`, which says where the file's blocks are).
fn flip_data_byte(image: &Path, path: &str, block: usize) -> u64 {
    let out = inspect(image, &["--blocks", path]).expect("inspect --blocks");
    assert_eq!(out.code, Some(0), "inspect --blocks: {}", out.text());
    let text = out.stdout_text();
    let line = text
        .lines()
        .nth(block)
        .unwrap_or_else(|| panic!("{path} has no block {block}: {text}"));
    let f: Vec<u64> = line
        .split_whitespace()
        .map(|x| x.parse().expect("number"))
        .collect();
    let mut bytes = fs::read(image).expect("read image");
    bytes[f[2] as usize + 100] ^= 0x01;
    fs::write(image, &bytes).expect("write image");
    f[1]
}

#[test]
fn corrupted_data_block_is_an_io_error() {
    let run_dir = unique_run_dir("baddata").expect("run dir");
    let image = run_dir.join("test.img");
    fresh_image(&image).expect("mkfs");
    with_cluster(
        opts("baddata").nodes(1).run_dir(&run_dir).disk(&image),
        |c| {
            c.keep_run_dir();
            c.exec_ok(1, "fill /f 20k")?;
            c.exec_ok(1, "write /small.txt hello")?;
            c.exec_ok(1, "sync")?;
            c.exec_ok(1, "shutdown")?;
            c.wait_exit("node1", Duration::from_secs(30))?;
            c.stop()?;
            Ok(())
        },
    );
    let out = inspect(&image, &["--check"]).expect("inspect");
    assert_eq!(out.code, Some(0), "inspect --check before: {}", out.text());
    let lba_f = flip_data_byte(&image, "/f", 2);
    let lba_s = flip_data_byte(&image, "/small.txt", 0);
    // inspect names every bad block and fails.
    let out = inspect(&image, &["--check"]).expect("inspect");
    let text = out.text();
    assert_eq!(
        out.code,
        Some(1),
        "inspect --check after the damage: {text}"
    );
    let f_line = format!("(/f) block 2 (device block {lba_f}): data checksum mismatch");
    let s_line = format!("(/small.txt) block 0 (device block {lba_s}): data checksum mismatch");
    assert!(text.contains(&f_line), "no {f_line:?} in: {text}");
    assert!(text.contains(&s_line), "no {s_line:?} in: {text}");
    assert!(text.contains("2 bad data block(s)"), "{text}");

    // The cluster serves the damaged blocks as I/O errors, never as bytes.
    with_cluster(
        opts("baddata2").nodes(1).run_dir(&run_dir).disk(&image),
        |c| {
            c.keep_run_dir();
            for cmd in ["sum /f", "cat /small.txt"] {
                let out = c.exec(1, cmd)?;
                let msg = out
                    .error_message()
                    .unwrap_or_else(|| panic!("{cmd} succeeded on damaged data: {out:?}"));
                assert!(msg.contains("I/O error"), "{cmd}: {msg:?}");
            }
            c.wait_log("dir", "data checksum mismatch", Duration::from_secs(10))?;
            let log = c.log("dir");
            assert!(
                log.contains(&format!(
                    "block 2 (device block {lba_f}): data checksum mismatch"
                )),
                "directory log does not name /f's block: {log}"
            );
            // Undamaged files still read.
            if sample_dir().join("hello.txt").is_file() {
                c.exec_ok(1, "cat /hello.txt")?;
            }
            c.stop()?;
            Ok(())
        },
    );
    let _ = fs::remove_dir_all(&run_dir);
}

#[test]
fn old_format_images_are_recreated_or_refused() {
    let _serial = serial_guard();
    let run_dir = unique_run_dir("oldfmt").expect("run dir");
    let rd = run_dir.to_string_lossy().into_owned();
    // A version 2 image (one checksum per block; the version field is
    // checked before anything else, so changing it is enough).
    let old = run_dir.join("old.img");
    fresh_image(&old).expect("mkfs");
    let mut bytes = fs::read(&old).expect("read image");
    bytes[8..12].copy_from_slice(&2u32.to_le_bytes());
    fs::write(&old, &bytes).expect("write image");
    let out = inspect(&old, &[]).expect("inspect");
    assert_eq!(out.code, Some(1));
    assert!(
        out.text()
            .contains("unsupported format version 2 (this build reads version 3): re-create the image with mkfs"),
        "{}",
        out.text()
    );
    // --disk of an old format: refused before anything starts.
    let old_s = old.to_string_lossy().into_owned();
    let out = qemu_run(
        &[
            "--no-build",
            "--run-dir",
            &rd,
            "--disk",
            &old_s,
            "-e",
            "1: ls /",
        ],
        Path::new(CTL),
        Duration::from_secs(120),
    )
    .expect("qemu-run.sh");
    let text = out.text();
    assert_ne!(out.code, Some(0), "{text}");
    assert!(
        text.contains("unsupported format version 2") && text.contains("mkfs"),
        "{text}"
    );
    assert_eq!(fs::read(&old).expect("read"), bytes, "old image modified");
    // The default RUN/disk.img of an old format: kept aside, re-created.
    fs::rename(&old, run_dir.join("disk.img")).expect("rename");
    let out = qemu_run(
        &["--no-build", "--run-dir", &rd, "-e", "1: ls /"],
        Path::new(CTL),
        Duration::from_secs(300),
    )
    .expect("qemu-run.sh");
    let text = out.text();
    assert_eq!(out.code, Some(0), "{text}");
    assert!(text.contains("kept it as"), "{text}");
    assert_eq!(fs::read(run_dir.join("disk.img.old")).expect("read"), bytes);
    let out = inspect(&run_dir.join("disk.img"), &["--check"]).expect("inspect");
    assert_eq!(out.code, Some(0), "{}", out.text());
    let _ = fs::remove_dir_all(&run_dir);
}
