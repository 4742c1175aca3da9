//! Integration tests of `daxfs` mode (DaxFS's decentralized design: the
//! nodes share one page cache of slots in the region, claimed and
//! published by compare-and-swap; the directory only fills misses): the
//! launcher's refusal without atomics across instances, and two nodes
//! reading one file at once through one filled copy per page, then
//! seeing each other's writes. The clusters boot with `--accel tcg-multi`.
//!
//! Needs the release kernel and host tools (`tests/run.sh` builds them):
//!
//! ```text
//! cargo test -p onecopy-tests --test daxfs -- --test-threads=1
//! ```
//!
//! Tests assert on behaviour (contents, counters, errors), never on timing.

use std::path::Path;
use std::time::Duration;

use onecopy_tests::shell::{parse_sum, pattern_crc32};
use onecopy_tests::{qemu_run, serial_guard, unique_run_dir, with_cluster, ClusterOpts};
use userland::stats::keys::cache;

const CTL: &str = env!("CARGO_BIN_EXE_onecopy-ctl");

fn opts(name: &str) -> ClusterOpts {
    ClusterOpts::new(name)
        .ctl(CTL)
        .mode("daxfs")
        .accel("tcg-multi")
        .cmd_timeout(Duration::from_secs(120))
        .boot_timeout(Duration::from_secs(120))
}

/// Single-threaded TCG does not make `lock cmpxchg` atomic across
/// instances: the launcher refuses `--mode daxfs` with it, in one line,
/// before it builds or starts anything.
#[test]
fn daxfs_without_atomics_across_instances_is_refused() {
    let _serial = serial_guard();
    let run_dir = unique_run_dir("daxfs-refused").expect("run dir");
    std::fs::remove_dir(&run_dir).expect("remove the empty run dir");
    let rd = run_dir.to_string_lossy().into_owned();
    let args = [
        "--no-build",
        "--run-dir",
        &rd,
        "--mode",
        "daxfs",
        "--accel",
        "tcg",
        "-e",
        "1: uptime",
    ];
    let out = qemu_run(&args, Path::new(CTL), Duration::from_secs(60)).expect("run qemu-run.sh");
    let err = out.stderr_text();
    assert_eq!(out.code, Some(2), "exit status; output:\n{}", out.text());
    assert!(out.stdout.is_empty(), "stdout: {}", out.stdout_text());
    let line = err.trim_end();
    assert_eq!(line.lines().count(), 1, "one line: {err:?}");
    for needle in [
        "qemu-run.sh: error: ",
        "--mode daxfs",
        "atomics",
        "tcg-multi",
    ] {
        assert!(line.contains(needle), "no {needle:?} in {line:?}");
    }
    assert!(!run_dir.exists(), "created the run dir");
}

/// Two nodes read the same 256 KiB file at once: both get the right
/// bytes, and the directory filled each page once (the loser of a claim
/// waits for the winner's fill or hits the published slot). A write on
/// one node is then read on the other, although the other had the old
/// page in a slot.
#[test]
fn two_nodes_read_one_filled_copy_and_see_each_others_writes() {
    with_cluster(opts("daxfs-read"), |c| {
        let size = 256 * 1024u64;
        let pages = size / 4096;
        c.exec_ok(1, "fill /f 256k")?;
        let outs = c.exec_together(&[(1, "sum /f"), (2, "sum /f")])?;
        let want = (pattern_crc32(size), size);
        for (k, out) in outs.iter().enumerate() {
            let got = parse_sum(&out.text())
                .unwrap_or_else(|| panic!("n{}: sum printed no crc: {out:?}", k + 1));
            assert_eq!(got, want, "n{} sum /f", k + 1);
        }
        let mut claims = 0;
        for k in 1..=2 {
            let s = c.stats(k, "cache stats")?;
            let t = &s.text;
            assert_eq!(s.get(cache::MODE), "daxfs", "n{k}: {t}");
            assert_eq!(
                s.num(cache::DAXFS_FILLS),
                pages,
                "n{k}: one fill per page: {t}"
            );
            assert_eq!(s.num(cache::RESIDENT_PRIVATE), 0, "n{k}: {t}");
            claims += s.num(cache::DAXFS_CLAIMS);
        }
        assert_eq!(claims, pages, "one claim per page cluster-wide");

        // Publish/observe through the file server's write path.
        c.exec_ok(1, "write /w first-version")?;
        assert_eq!(c.exec_ok(2, "cat /w")?.text().trim(), "first-version");
        c.exec_ok(1, "write /w second-version-longer")?;
        assert_eq!(
            c.exec_ok(2, "cat /w")?.text().trim(),
            "second-version-longer"
        );
        c.exec_ok(2, "write /w from-node-2")?;
        assert_eq!(c.exec_ok(1, "cat /w")?.text().trim(), "from-node-2");
        Ok(())
    });
}
