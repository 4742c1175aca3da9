//! A node killed with unsynced dirty pages, in the
//! modes whose writes a node buffers: `private`, `net` (buffered
//! baselines, `baseline_writes=back`) and `relaxed` (private copies).
//!
//! Node 2 writes file A (a line of text, then zeros up to its size: not
//! fio's data, which is the `fill` pattern at every offset, so an
//! overwrite that reached the disk shows) and syncs it. Then one fio run,
//! time based so that
//! it is still running when node 2's QEMU is SIGKILLed, overwrites the
//! first half of A (job 0) and writes a new file B (job 1) with 4 KiB
//! random writes, without fsync or close. Its working set (48 pages) is far
//! below the node's cache, so nothing reaches the file server: no fsync,
//! no close, no `sync`, no reclaim. docs/ARCHITECTURE.md ("Failure
//! guarantees") promises exactly that such data lives only in the node and is
//! lost with it, and that everything written back before is on the disk
//! with nothing else of the file touched. So, exactly:
//!
//! * node 1 keeps working and reads A as synced, and B as fio laid it out
//!   (its size, set through the file server before the run; zeros);
//! * after the cluster stops, `inspect --check` passes and `inspect --cat`
//!   shows A byte for byte as synced and B as `size` zero bytes.
//!
//! Needs the release kernel and host tools (`tests/run.sh` builds them):
//! `cargo test -p onecopy-tests --test dirty -- --test-threads=1`.

use std::time::Duration;

use onecopy_tests::shell::{crc32, parse_sum};
use onecopy_tests::{inspect, mkfs, unique_run_dir, with_cluster, ClusterOpts, Error, Result};

const CTL: &str = env!("CARGO_BIN_EXE_onecopy-ctl");
const KIB: usize = 1024;
/// File A: written and synced by node 2.
const A: &str = "/d/w.0.0";
const A_SIZE: usize = 192 * KIB;
/// File B: fio's job 1, laid out (truncated to its size) and then written
/// without sync.
const B: &str = "/d/w.1.0";
/// fio's `--size`: job 0 overwrites the first this-many bytes of A.
const JOB_SIZE: usize = 96 * KIB;

fn opts(name: &str) -> ClusterOpts {
    ClusterOpts::new(name)
        .ctl(CTL)
        .cmd_timeout(Duration::from_secs(60))
        .boot_timeout(Duration::from_secs(60))
        .append_extra("hb_timeout_ms=600")
}

fn fail(msg: impl Into<String>) -> Error {
    Error::Usage(msg.into())
}

/// The first line of A.
const A_TEXT: &str = "synced by node 2";

/// A as synced: its line, then zeros up to its size.
fn a_bytes() -> Vec<u8> {
    let mut v = format!("{A_TEXT}\n").into_bytes();
    v.resize(A_SIZE, 0);
    v
}

/// `len` bytes of the `fill` pattern.
fn pattern_bytes(len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    userland::pattern::fill(&mut v, 0);
    v
}

fn sum(c: &mut onecopy_tests::Cluster, node: u8, path: &str) -> Result<(u32, u64)> {
    let out = c.exec_ok(node, &format!("sum {path}"))?;
    parse_sum(&out.text()).ok_or_else(|| fail(format!("n{node}: sum {path}: {out:?}")))
}

fn killed_writer_loses_exactly_its_unsynced_pages(mode: &str) {
    let name = format!("dirty-{mode}");
    let run_dir = unique_run_dir(&name).expect("run dir");
    let image = run_dir.join("test.img");
    mkfs(&image, 64, None).expect("mkfs");
    let a = a_bytes();
    let b = vec![0u8; JOB_SIZE];
    with_cluster(opts(&name).mode(mode).run_dir(&run_dir).disk(&image), |c| {
        c.keep_run_dir(); // the image is examined after the cluster stops
        c.exec_ok(2, "mkdir /d")?;
        c.exec_ok(2, &format!("write {A} {A_TEXT}"))?;
        c.exec_ok(2, &format!("truncate {A} {A_SIZE}"))?;
        c.exec_ok(2, "sync")?;
        let got = sum(c, 2, A)?;
        if got != (crc32(&a), A_SIZE as u64) {
            return Err(fail(format!("n2 reads its synced A as {got:?}")));
        }
        // Both files through fio's jobs: job 0 on A (already larger than
        // --size: not laid out again), job 1 on B (created and truncated to
        // --size, then closed: that much reaches the directory). fio writes
        // the `fill` pattern: were any of it written back, A or B on the
        // disk would show it.
        c.start_command(
            2,
            &format!(
                "fio --name=w --directory=/d --numjobs=2 --rw=randwrite --bs=4k --size={}k \
                 --ioengine=psync --time_based --runtime=600",
                JOB_SIZE / KIB
            ),
            Duration::from_secs(4),
        )?;
        c.kill_node(2)?;
        c.wait_log("dir", r"node 2 failed", Duration::from_secs(30))?;
        // Node 1 keeps working: A as synced, B as laid out.
        let got = sum(c, 1, A)?;
        if got != (crc32(&a), A_SIZE as u64) {
            return Err(fail(format!(
                "n1 reads A as {got:?}, not as synced ({:08x}, {A_SIZE})",
                crc32(&a)
            )));
        }
        let got = sum(c, 1, B)?;
        if got != (crc32(&b), JOB_SIZE as u64) {
            return Err(fail(format!(
                "n1 reads B as {got:?}, not as laid out ({JOB_SIZE} zero bytes)"
            )));
        }
        c.exec_ok(1, "write /d/after alive")?;
        c.exec_ok(1, "sync")?;
        c.stop()?;
        Ok(())
    });
    let out = inspect(&image, &["--check"]).expect("inspect");
    assert_eq!(out.code, Some(0), "inspect --check: {}", out.text());
    for (path, want) in [(A, &a), (B, &b)] {
        let out = inspect(&image, &["--cat", path]).expect("inspect");
        assert_eq!(out.code, Some(0), "inspect --cat {path}: {}", out.text());
        assert_eq!(out.stdout.len(), want.len(), "{path}: size on disk");
        if let Some(i) = out.stdout.iter().zip(want.iter()).position(|(x, y)| x != y) {
            panic!(
                "{path} on disk differs from what was synced at byte {i} (page {}): \
                 an unsynced write of the killed node reached the disk",
                i / 4096
            );
        }
    }
    let out = inspect(&image, &["--cat", "/d/after"]).expect("inspect");
    assert_eq!(out.stdout, b"alive\n", "node 1's later write");
    let _ = std::fs::remove_dir_all(&run_dir);
}

#[test]
fn private_killed_writer_loses_exactly_its_unsynced_pages() {
    killed_writer_loses_exactly_its_unsynced_pages("private");
}

#[test]
fn net_killed_writer_loses_exactly_its_unsynced_pages() {
    killed_writer_loses_exactly_its_unsynced_pages("net");
}

#[test]
fn relaxed_killed_writer_loses_exactly_its_unsynced_pages() {
    killed_writer_loses_exactly_its_unsynced_pages("relaxed");
}

/// Reclaim of dirty pages under pressure in `private` mode (buffered
/// baseline): a node whose cache holds 2,048 pages (`--mem-mb 48`: the
/// smallest kernel heap) writes a 2,560-page file. The dirty pages that do
/// not fit go to the file server while the write runs (oldest first, 32 at
/// a time): the cache never holds more than its size, nothing is lost, and
/// after `sync` the image holds the file byte for byte. (The single-copy
/// modes' reclaim of dirty owned pages is `policy.rs`'s
/// `policy_switch_and_reclaim_keep_dirty_data`.)
#[test]
fn private_reclaim_under_pressure_writes_dirty_pages_back() {
    use userland::stats::keys::cache;
    let name = "dirty-reclaim";
    let run_dir = unique_run_dir(name).expect("run dir");
    let image = run_dir.join("test.img");
    mkfs(&image, 64, None).expect("mkfs");
    let pages = 2560usize;
    let size = pages * 4096;
    let want = pattern_bytes(size);
    with_cluster(
        opts(name)
            .mode("private")
            .mem_mb(48)
            .run_dir(&run_dir)
            .disk(&image),
        |c| {
            c.keep_run_dir();
            let limit: usize = c
                .log("node1")
                .lines()
                .find_map(|l| {
                    l.split("node cache: ")
                        .nth(1)
                        .and_then(|r| r.split(' ').next())
                        .and_then(|n| n.parse().ok())
                })
                .ok_or_else(|| fail("node 1 logged no `node cache: N pages`"))?;
            if limit >= pages {
                return Err(fail(format!(
                    "node cache of {limit} pages holds the whole {pages}-page file: no pressure"
                )));
            }
            c.exec_ok(1, &format!("fill /big {size}"))?;
            let s = c.stats(1, "cache stats")?;
            let resident = s.num(cache::RESIDENT_PRIVATE) as usize;
            if resident > limit || s.num(cache::DIRTY_PAGES) != 0 {
                return Err(fail(format!(
                    "n1 holds {resident} pages (cache {limit}) or dirty ones after close:\n{}",
                    s.text
                )));
            }
            if (s.num(cache::PAGES_WRITTEN_BACK) as usize) < pages {
                return Err(fail(format!(
                    "n1 wrote back fewer than {pages} pages:\n{}",
                    s.text
                )));
            }
            c.exec_ok(1, "sync")?;
            let got = sum(c, 2, "/big")?;
            if got != (crc32(&want), size as u64) {
                return Err(fail(format!("n2 reads /big as {got:?}")));
            }
            c.stop()?;
            Ok(())
        },
    );
    let out = inspect(&image, &["--cat", "/big"]).expect("inspect");
    assert_eq!(out.code, Some(0), "inspect --cat /big: {}", out.text());
    assert!(
        out.stdout == want,
        "/big on disk differs from what was written ({} bytes)",
        out.stdout.len()
    );
    let out = inspect(&image, &["--check"]).expect("inspect");
    assert_eq!(out.code, Some(0), "inspect --check: {}", out.text());
    let _ = std::fs::remove_dir_all(&run_dir);
}
