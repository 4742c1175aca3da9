//! Integration tests of the single-copy page cache: one copy of each file
//! page cluster-wide (owner frames mapped by the other nodes), coherent
//! writes, eviction with sharers, invalidation, and failures of an owner
//! node or of the directory.
//!
//! Needs the release kernel and host tools (`tests/run.sh` builds them):
//!
//! ```text
//! cargo build --release -p onecopy-kernel --target x86_64-unknown-none
//! cargo build --release -p flatfs --bins
//! cargo test -p onecopy-tests --test pagecache -- --test-threads=1
//! ```
//!
//! Every test boots its own cluster; the harness stops it whatever happens
//! and prints every instance's log when a test fails. Tests assert on
//! behaviour (outputs and counters), never on timing; every wait has a
//! limit.

use std::time::Duration;

use onecopy_tests::shell::{crc32, parse_sum, pattern_crc32, Stats};
use onecopy_tests::{
    inspect, mkfs, unique_run_dir, with_cluster, Cluster, ClusterOpts, Error, Result,
};
use regex::Regex;
use userland::stats::keys::{cache, dir};

const CTL: &str = env!("CARGO_BIN_EXE_onecopy-ctl");

/// Default limit for one shell command (TCG is slow, but no command of
/// these tests should come near it).
const CMD_TIMEOUT: Duration = Duration::from_secs(30);

fn opts(name: &str) -> ClusterOpts {
    ClusterOpts::new(name)
        .ctl(CTL)
        .cmd_timeout(CMD_TIMEOUT)
        .boot_timeout(Duration::from_secs(60))
}

/// A failed expectation as a harness error (keeps `?` usable in closures).
fn fail(msg: impl Into<String>) -> Error {
    Error::Usage(msg.into())
}

// ------------------------------------------------------------- helpers

fn cache_stats(c: &mut Cluster, node: u8) -> Result<Stats> {
    c.stats(node, "cache stats")
}

fn dir_stats(c: &mut Cluster, node: u8) -> Result<Stats> {
    c.stats(node, "dir stats")
}

/// `sum PATH` (or `mmap-read PATH`) on `node`: `(crc, size)`.
fn crc_cmd(c: &mut Cluster, node: u8, cmd: &str, path: &str) -> Result<(u32, u64)> {
    let out = c.exec_ok(node, &format!("{cmd} {path}"))?;
    parse_sum(&out.text())
        .ok_or_else(|| fail(format!("n{node}: `{cmd} {path}` printed no crc: {out:?}")))
}

fn sum(c: &mut Cluster, node: u8, path: &str) -> Result<(u32, u64)> {
    crc_cmd(c, node, "sum", path)
}

fn mmap_read(c: &mut Cluster, node: u8, path: &str) -> Result<(u32, u64)> {
    crc_cmd(c, node, "mmap-read", path)
}

/// What `sum` prints for `len` bytes of the fill pattern.
fn pattern(len: u64) -> (u32, u64) {
    (pattern_crc32(len), len)
}

fn show(x: (u32, u64)) -> String {
    format!("crc32={:08x} size={}", x.0, x.1)
}

/// Asserts `sum PATH` on `node` gives `want`.
fn check_sum(c: &mut Cluster, node: u8, path: &str, want: (u32, u64)) -> Result<()> {
    let got = sum(c, node, path)?;
    assert_eq!(
        got,
        want,
        "n{node}: sum {path}: got {}, want {}",
        show(got),
        show(want)
    );
    Ok(())
}

/// Parses `invalidated N owned pages, dropped M remote mappings`.
fn parse_cache_drop(text: &str) -> Option<(u64, u64)> {
    let re =
        Regex::new(r"invalidated (\d+) owned pages, dropped (\d+) remote mappings").expect("regex");
    let c = re.captures(text)?;
    Some((c[1].parse().ok()?, c[2].parse().ok()?))
}

const KIB: u64 = 1024;
const PAGE: u64 = fabric::PAGE_SIZE as u64;

// ------------------------------------------------- 1. single copy proof

/// Node 1 writes and reads a 256 KiB file; node 2 reads it through remote
/// mappings of node 1's frames: no disk read, one copy cluster-wide.
fn single_copy_proof(mode: &str) {
    with_cluster(opts(&format!("1copy-{mode}")).mode(mode), |c| {
        let size = 256 * KIB;
        let pages = size / PAGE;
        c.exec_ok(1, "fill /f 256k")?;
        check_sum(c, 1, "/f", pattern(size))?;
        check_sum(c, 2, "/f", pattern(size))?;

        let s2 = cache_stats(c, 2)?;
        assert_eq!(s2.get(cache::MODE), mode, "n2 mode:\n{}", s2.text);
        assert_eq!(
            s2.num(cache::DISK_READS_FILLS),
            0,
            "n2 read the disk instead of mapping node 1's frames:\n{}",
            s2.text
        );
        assert_eq!(s2.num(cache::REMOTE_MAPPINGS), pages, "n2:\n{}", s2.text);
        assert_eq!(s2.num(cache::REMOTE_MAPS), pages, "n2:\n{}", s2.text);
        assert_eq!(s2.num(cache::RESIDENT_OWNED), 0, "n2:\n{}", s2.text);

        let s1 = cache_stats(c, 1)?;
        assert_eq!(s1.get(cache::MODE), mode, "n1 mode:\n{}", s1.text);
        assert_eq!(s1.num(cache::RESIDENT_OWNED), pages, "n1:\n{}", s1.text);
        assert_eq!(s1.num(cache::REMOTE_MAPPINGS), 0, "n1:\n{}", s1.text);

        let d = dir_stats(c, 1)?;
        assert_eq!(
            d.num(dir::PAGE_ENTRIES),
            pages,
            "the directory tracks more than one copy:\n{}",
            d.text
        );
        Ok(())
    });
}

#[test]
fn single_copy_proof_strong() {
    single_copy_proof("strong");
}

#[test]
fn single_copy_proof_relaxed() {
    single_copy_proof("relaxed");
}

/// The baseline: every node keeps its own copy (2 copies in total), and
/// there is nothing to map.
#[test]
fn private_mode_keeps_one_copy_per_node() {
    with_cluster(opts("1copy-private").mode("private"), |c| {
        let size = 256 * KIB;
        let pages = size / PAGE;
        c.exec_ok(1, "fill /f 256k")?;
        check_sum(c, 1, "/f", pattern(size))?;
        check_sum(c, 2, "/f", pattern(size))?;
        for k in 1..=2 {
            let s = cache_stats(c, k)?;
            assert_eq!(s.get(cache::MODE), "private", "n{k}:\n{}", s.text);
            assert_eq!(s.num(cache::RESIDENT_PRIVATE), pages, "n{k}:\n{}", s.text);
            assert_eq!(s.num(cache::REMOTE_MAPPINGS), 0, "n{k}:\n{}", s.text);
        }
        let out = c.exec(2, "mmap-read /f")?;
        let msg = out
            .error_message()
            .unwrap_or_else(|| panic!("mmap-read succeeded in private mode: {out:?}"));
        assert!(msg.contains("not supported"), "mmap-read error: {msg:?}");
        c.exec_ok(2, "uptime")?;
        Ok(())
    });
}

/// Private mode buffers writes (`baseline_writes=back`, the default): the
/// pages go to the file server at close and `sync`, and reach the disk
/// image, checked with `inspect` after the cluster stops.
#[test]
fn private_buffered_writes_reach_the_disk() {
    buffered_writes_reach_the_disk("private");
}

/// `net` mode buffers writes like `private` (its write-backs go over TCP).
#[test]
fn net_buffered_writes_reach_the_disk() {
    buffered_writes_reach_the_disk("net");
}

/// Relaxed mode's private copies go back at close and `sync` too.
#[test]
fn relaxed_private_copies_reach_the_disk() {
    buffered_writes_reach_the_disk("relaxed");
}

fn buffered_writes_reach_the_disk(mode: &str) {
    let name = format!("{mode}-wb");
    let run_dir = unique_run_dir(&name).expect("run dir");
    let image = run_dir.join("test.img");
    mkfs(&image, 64, None).expect("mkfs");
    let size = 300 * KIB;
    let text = "buffered by node 2";
    let mut after = (0, 0);
    with_cluster(opts(&name).mode(mode).run_dir(&run_dir).disk(&image), |c| {
        c.keep_run_dir(); // the image is examined after the cluster stops
        c.exec_ok(1, "mkdir /t")?;
        c.exec_ok(1, &format!("fill /t/big {}", size))?;
        // What is buffered (relaxed: private copies) and what went back.
        let (held, back) = if mode == "relaxed" {
            (cache::PRIVATE_COPIES, cache::WRITEBACKS)
        } else {
            (cache::DIRTY_PAGES, cache::PAGES_WRITTEN_BACK)
        };
        let s = cache_stats(c, 1)?;
        if mode != "relaxed" {
            assert_eq!(s.get(cache::BASELINE_WRITES), "back", "n1:\n{}", s.text);
        }
        assert_eq!(s.num(held), 0, "n1 after close:\n{}", s.text);
        assert_eq!(
            s.num(back),
            size / PAGE,
            "n1: every page written back once, at close:\n{}",
            s.text
        );
        // Close-to-open: node 2 sees the closed file.
        check_sum(c, 2, "/t/big", pattern(size))?;
        // 4k random writes over the file (fio leaves no fsync), then sync.
        c.exec_ok(
            2,
            "fio --name=w --rw=randwrite --bs=4k --size=300k --filename=/t/big --ioengine=psync",
        )?;
        // Past the end: the local size, learnt by the directory at
        // write-back (close).
        c.exec_ok(2, "append /t/big tail")?;
        c.exec_ok(2, &format!("write /t/small {text}"))?;
        c.exec_ok(2, "sync")?;
        let s = cache_stats(c, 2)?;
        assert_eq!(s.num(held), 0, "n2 after sync:\n{}", s.text);
        assert!(s.num(back) > 0, "n2:\n{}", s.text);
        after = sum(c, 2, "/t/big")?;
        assert_eq!(sum(c, 1, "/t/big")?, after, "n1 sees n2's synced writes");
        c.exec_ok(1, "sync")?;
        c.stop()?;
        Ok(())
    });
    let out = inspect(&image, &["--cat", "/t/small"]).expect("inspect");
    assert_eq!(out.code, Some(0), "inspect --cat: {}", out.text());
    assert_eq!(
        out.stdout,
        format!("{text}\n").into_bytes(),
        "/t/small on disk"
    );
    let out = inspect(&image, &["--cat", "/t/big"]).expect("inspect");
    assert_eq!(out.code, Some(0), "inspect --cat: {}", out.stderr_text());
    assert_eq!(out.stdout.len() as u64, size + 5, "/t/big size on disk");
    assert!(
        out.stdout.ends_with(b"tail\n"),
        "/t/big on disk lacks the append"
    );
    // What the nodes read after sync is what the disk holds.
    assert_eq!(
        (crc32(&out.stdout), size + 5),
        after,
        "/t/big on disk differs from what the nodes read"
    );
    let out = inspect(&image, &["--check"]).expect("inspect");
    assert_eq!(out.code, Some(0), "inspect --check: {}", out.text());
    let _ = std::fs::remove_dir_all(&run_dir);
}

// ------------------------------------------------------ 2. mmap-read

fn mmap_read_matches_sum(mode: &str) {
    with_cluster(opts(&format!("mmap-{mode}")).mode(mode), |c| {
        let size = 256 * KIB;
        c.exec_ok(1, "fill /f 256k")?;
        // A file that is not a whole number of pages, and a one-liner.
        c.exec_ok(1, "fill /odd 10000")?;
        c.exec_ok(1, "write /t mapped text")?;
        let want = [
            ("/f", pattern(size)),
            ("/odd", pattern(10_000)),
            ("/t", (crc32(b"mapped text\n"), 12)),
        ];
        // Node 1 first (its own frames), then node 2 (node 1's frames).
        for k in [1u8, 2] {
            for (path, w) in want {
                let s = sum(c, k, path)?;
                let m = mmap_read(c, k, path)?;
                assert_eq!(
                    m,
                    s,
                    "n{k}: mmap-read {path} ({}) differs from sum ({})",
                    show(m),
                    show(s)
                );
                assert_eq!(s, w, "n{k}: sum {path} ({}) != {}", show(s), show(w));
            }
        }
        // Node 2 again, starting with mmap-read: no prior read brought the
        // pages in through the read path.
        c.exec_ok(1, "fill /g 64k")?;
        let m = mmap_read(c, 2, "/g")?;
        assert_eq!(m, pattern(64 * KIB), "n2: mmap-read /g first: {}", show(m));
        check_sum(c, 2, "/g", pattern(64 * KIB))?;
        Ok(())
    });
}

#[test]
fn mmap_read_matches_cat() {
    mmap_read_matches_sum("strong");
}

#[test]
fn mmap_read_matches_cat_relaxed() {
    mmap_read_matches_sum("relaxed");
}

// ----------------------------------------- 3. strong: writes seen at once

#[test]
fn strong_write_seen_at_once() {
    with_cluster(opts("strong-write").mode("strong"), |c| {
        // One page: node 2 maps node 1's frame, node 1 overwrites it.
        c.exec_ok(1, "write /f OLD")?;
        assert_eq!(c.exec_ok(2, "cat /f")?.lines, vec!["OLD".to_string()]);
        assert_eq!(cache_stats(c, 2)?.num(cache::REMOTE_MAPPINGS), 1);
        c.exec_ok(1, "write /f NEW")?;
        assert_eq!(
            c.exec_ok(2, "cat /f")?.lines,
            vec!["NEW".to_string()],
            "node 2 does not see node 1's write (no sync in between)"
        );
        c.exec_ok(1, "append /f MORE")?;
        assert_eq!(
            c.exec_ok(2, "cat /f")?.lines,
            vec!["NEW".to_string(), "MORE".to_string()]
        );
        // Again, a few times (node 2 maps the page before every rewrite).
        for i in 1..=5 {
            c.exec_ok(1, &format!("write /f v{i}"))?;
            assert_eq!(
                c.exec_ok(2, "cat /f")?.lines,
                vec![format!("v{i}")],
                "node 2 after node 1's rewrite number {i}"
            );
        }

        // Many pages: node 2 maps all 16, node 1 rewrites the file to one
        // line, regrows it with zeros and refills it while they are mapped.
        let size = 64 * KIB;
        c.exec_ok(1, "fill /g 64k")?;
        check_sum(c, 2, "/g", pattern(size))?;
        assert!(cache_stats(c, 2)?.num(cache::REMOTE_MAPPINGS) >= size / PAGE);
        c.exec_ok(1, "write /g x")?;
        assert_eq!(c.exec_ok(2, "cat /g")?.lines, vec!["x".to_string()]);
        check_sum(c, 2, "/g", (crc32(b"x\n"), 2))?;
        c.exec_ok(1, "truncate /g 65536")?;
        let mut grown = b"x\n".to_vec();
        grown.resize(size as usize, 0);
        // The old pattern must not show through the regrown range.
        check_sum(c, 2, "/g", (crc32(&grown), size))?;
        c.exec_ok(1, "fill /g 64k")?;
        check_sum(c, 2, "/g", pattern(size))?;
        let m = mmap_read(c, 2, "/g")?;
        assert_eq!(m, pattern(size), "n2: mmap-read /g: {}", show(m));
        check_sum(c, 1, "/g", pattern(size))?;
        let s2 = cache_stats(c, 2)?;
        assert!(
            s2.num(cache::INVALIDATIONS_RECEIVED) > 0,
            "node 2 kept its mappings across node 1's rewrites:\n{}",
            s2.text
        );
        Ok(())
    });
}

/// A shrinking `truncate` keeps the bytes below the new size, on the
/// truncating node and on a node that maps its frames, in memory and on
/// disk. (Before 6b8c38c the kept bytes of the boundary page read as zeros
/// in strong and relaxed modes.)
fn truncate_keeps_bytes_below_new_size(mode: &str) {
    with_cluster(opts(&format!("trunc-{mode}")).mode(mode), |c| {
        // One node, no sharer.
        c.exec_ok(1, "write /m hello")?;
        c.exec_ok(1, "truncate /m 2")?;
        check_sum(c, 1, "/m", (crc32(b"he"), 2))?;
        c.exec_ok(1, "cache drop")?;
        check_sum(c, 1, "/m", (crc32(b"he"), 2))?;

        // A one-page file mapped by node 2.
        c.exec_ok(1, "write /f v1")?;
        assert_eq!(c.exec_ok(2, "cat /f")?.lines, vec!["v1".to_string()]);
        c.exec_ok(1, "truncate /f 1")?;
        check_sum(c, 2, "/f", (crc32(b"v"), 1))?;
        check_sum(c, 1, "/f", (crc32(b"v"), 1))?;

        // 16 pages mapped by node 2, cut inside page 2.
        c.exec_ok(1, "fill /g 64k")?;
        check_sum(c, 2, "/g", pattern(64 * KIB))?;
        c.exec_ok(1, "truncate /g 10000")?;
        check_sum(c, 2, "/g", pattern(10_000))?;
        check_sum(c, 1, "/g", pattern(10_000))?;
        let m = mmap_read(c, 2, "/g")?;
        assert_eq!(m, pattern(10_000), "n2: mmap-read /g: {}", show(m));

        // What reached the disk.
        c.exec_ok(1, "sync")?;
        c.exec_ok(1, "cache drop")?;
        c.exec_ok(2, "cache drop")?;
        check_sum(c, 2, "/g", pattern(10_000))?;
        check_sum(c, 2, "/f", (crc32(b"v"), 1))?;
        check_sum(c, 2, "/m", (crc32(b"he"), 2))?;
        Ok(())
    });
}

#[test]
fn strong_truncate_keeps_bytes_below_new_size() {
    truncate_keeps_bytes_below_new_size("strong");
}

#[test]
fn relaxed_truncate_keeps_bytes_below_new_size() {
    truncate_keeps_bytes_below_new_size("relaxed");
}

// ----------------------------------------------- 4. eviction with sharers

#[test]
fn eviction_with_sharers() {
    let mut o = opts("evict").mode("strong");
    o.shm_mb = Some(16);
    with_cluster(o, |c| {
        let small = 64 * KIB;
        let big = 12 * KIB * KIB;
        c.exec_ok(1, "fill /a 64k")?;
        c.exec_ok(1, "sync")?;
        check_sum(c, 2, "/a", pattern(small))?;
        let s2 = cache_stats(c, 2)?;
        assert_eq!(
            s2.num(cache::REMOTE_MAPPINGS),
            small / PAGE,
            "n2:\n{}",
            s2.text
        );

        let s1 = cache_stats(c, 1)?;
        let pool: u64 = s1
            .get(cache::POOL_FRAMES)
            .split('/')
            .nth(1)
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or_else(|| panic!("n1: bad pool frames:\n{}", s1.text));
        assert!(
            pool < big / PAGE,
            "the pool ({pool} frames) holds /big: nothing would be reclaimed"
        );

        // 12 MiB through a ~7.5 MiB pool: reclaim, /a's shared pages among
        // others.
        c.exec_ok(1, "fill /big 12m")?;
        let s1 = cache_stats(c, 1)?;
        assert!(
            s1.num(cache::INVALIDATIONS_SENT) > 0,
            "node 1 reclaimed nothing:\n{}",
            s1.text
        );
        let s2 = cache_stats(c, 2)?;
        assert!(
            s2.num(cache::INVALIDATIONS_RECEIVED) > 0,
            "node 2 was not told its mappings went away:\n{}",
            s2.text
        );
        check_sum(c, 2, "/a", pattern(small))?;
        check_sum(c, 1, "/big", pattern(big))?;
        check_sum(c, 2, "/big", pattern(big))?;
        check_sum(c, 1, "/a", pattern(small))?;
        Ok(())
    });
}

/// A file larger than the node's frames read from the disk: free frames
/// are kept between the watermarks (boot options `reclaim_low` /
/// `reclaim_high`, here 4 and 8 percent) by reclaim between the reads, so
/// the pages go ahead of need and few misses wait for reclaim.
#[test]
fn reclaim_ahead_of_need_keeps_misses_from_waiting() {
    let o = opts("ahead")
        .mode("strong")
        .nodes(1)
        .shm_mb(16)
        .append_extra("reclaim_low=4 reclaim_high=8");
    with_cluster(o, |c| {
        // One node's pool of a 16 MiB region is about 4,000 frames.
        let big = 24 * KIB * KIB;
        // Writing and reading 24 MiB under TCG on a loaded host: more
        // than one command's usual limit.
        let slow = Duration::from_secs(300);
        c.exec_timeout(1, b"fill /big 24m", slow)?.into_result()?;
        c.exec_ok(1, "sync")?;
        c.exec_ok(1, "cache drop")?;
        let before = cache_stats(c, 1)?;
        let pool: u64 = before
            .get(cache::POOL_FRAMES)
            .split('/')
            .nth(1)
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or_else(|| panic!("n1: bad pool frames:\n{}", before.text));
        assert!(
            pool < big / PAGE,
            "the pool ({pool} frames) holds /big: nothing would be reclaimed"
        );
        let out = c.exec_timeout(1, b"sum /big", slow)?.into_result()?;
        let got = parse_sum(&out.text())
            .ok_or_else(|| fail(format!("n1: `sum /big` printed no crc: {out:?}")))?;
        assert_eq!(got, pattern(big), "n1: sum /big: {}", show(got));
        let after = cache_stats(c, 1)?;
        let d = |k: &str| after.num(k) - before.num(k);
        let (ahead, waited, misses) = (
            d(cache::RECLAIMS_AHEAD),
            d(cache::MISSES_WAITED_RECLAIM),
            d(cache::MISSES),
        );
        let need = big / PAGE - pool;
        assert!(
            ahead >= need / 2,
            "{ahead} pages reclaimed ahead of need, {need} had to go:\n{}",
            after.text
        );
        assert!(
            waited * 20 <= misses,
            "{waited} of {misses} misses waited for reclaim:\n{}",
            after.text
        );
        Ok(())
    });
}

// ------------------------------------ 5. killed owner, survivor continues

#[test]
fn killed_owner_survivor_continues() {
    with_cluster(
        opts("killowner")
            .mode("strong")
            .append_extra("hb_timeout_ms=600"),
        |c| {
            let size = 128 * KIB;
            let pages = size / PAGE;
            c.exec_ok(1, "fill /k 128k")?;
            c.exec_ok(1, "sync")?;
            check_sum(c, 2, "/k", pattern(size))?;
            let before = cache_stats(c, 2)?;
            assert_eq!(before.num(cache::REMOTE_MAPPINGS), pages, "{}", before.text);

            c.kill_node(1)?;
            c.wait_log("dir", r"node 1 failed", Duration::from_secs(30))?;

            // Node 1's frames are gone: the pages come back from the disk.
            check_sum(c, 2, "/k", pattern(size))?;
            let after = cache_stats(c, 2)?;
            assert!(
                after.num(cache::INVALIDATIONS_RECEIVED) >= pages,
                "node 2 was not told to drop its {pages} mappings of node 1's frames:\n{}",
                after.text
            );
            let fills = after.num(cache::DISK_READS_FILLS) - before.num(cache::DISK_READS_FILLS);
            assert!(
                fills >= pages,
                "node 2 re-read {fills} pages from disk, want {pages}:\n{}",
                after.text
            );
            assert_eq!(
                after.num(cache::RESIDENT_OWNED),
                pages,
                "node 2 should own /k now:\n{}",
                after.text
            );
            let m = mmap_read(c, 2, "/k")?;
            assert_eq!(m, pattern(size), "n2: mmap-read /k: {}", show(m));
            c.exec_ok(2, "write /after alive")?;
            assert_eq!(c.exec_ok(2, "cat /after")?.lines, vec!["alive".to_string()]);
            Ok(())
        },
    );
}

// ------------------------------------------------- 6. directory killed

#[test]
fn directory_killed() {
    with_cluster(opts("killdir").mode("strong"), |c| {
        c.exec_ok(1, "ls /")?;
        c.kill_directory()?;
        let out = c.exec_timeout(1, b"ls /", Duration::from_secs(30))?;
        let msg = out
            .error_message()
            .unwrap_or_else(|| panic!("ls / succeeded without a directory: {out:?}"));
        assert!(
            msg.contains("directory unavailable"),
            "unexpected error for ls /: {msg:?}"
        );
        c.wait_log("node1", "directory unavailable", Duration::from_secs(10))?;
        // The shell is still there.
        c.exec_timeout(1, b"uptime", Duration::from_secs(30))?
            .into_result()?;
        let out = c.exec_timeout(2, b"cat /hello.txt", Duration::from_secs(30))?;
        assert!(!out.is_ok(), "cat on node 2 succeeded: {out:?}");
        c.exec_timeout(2, b"uptime", Duration::from_secs(30))?
            .into_result()?;
        // `nodes` says what the node sees: the directory's heartbeat stood
        // still, not the "up" the dead directory last wrote.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let text = c
                .exec_timeout(1, b"nodes", Duration::from_secs(30))?
                .into_result()?
                .text();
            let dir = text
                .lines()
                .find(|l| l.trim_start_matches(['*', ' ']).starts_with("dir "))
                .unwrap_or_else(|| panic!("no directory line in:\n{text}"))
                .to_string();
            if dir.contains("silent") && dir.contains("presumed failed") {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "node 1 still shows the killed directory as {dir:?}"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        Ok(())
    });
}

// ------------------------------------ 7. invalidation with two sharers

#[test]
fn invalidation_with_two_sharers() {
    with_cluster(opts("2sharers").mode("strong").nodes(3), |c| {
        let size = 128 * KIB;
        let pages = size / PAGE;
        c.exec_ok(1, "fill /s 128k")?;
        for k in [2u8, 3] {
            check_sum(c, k, "/s", pattern(size))?;
            let s = cache_stats(c, k)?;
            assert_eq!(s.num(cache::REMOTE_MAPPINGS), pages, "n{k}:\n{}", s.text);
        }
        let owned = cache_stats(c, 1)?.num(cache::RESIDENT_OWNED);
        assert_eq!(owned, pages, "node 1 owns more or less than /s");
        let base: Vec<u64> = [2u8, 3]
            .iter()
            .map(|&k| cache_stats(c, k).map(|s| s.num(cache::INVALIDATIONS_RECEIVED)))
            .collect::<Result<_>>()?;

        let out = c.exec_ok(1, "cache drop")?;
        let (n, _) = parse_cache_drop(&out.text())
            .unwrap_or_else(|| panic!("n1: cache drop output: {:?}", out.lines));
        assert_eq!(n, owned, "cache drop: {:?}", out.lines);
        assert_eq!(cache_stats(c, 1)?.num(cache::RESIDENT_OWNED), 0);

        for (i, k) in [2u8, 3].into_iter().enumerate() {
            let s = cache_stats(c, k)?;
            assert_eq!(
                s.num(cache::INVALIDATIONS_RECEIVED) - base[i],
                n,
                "n{k} after node 1 dropped {n} shared pages:\n{}",
                s.text
            );
            assert_eq!(s.num(cache::REMOTE_MAPPINGS), 0, "n{k}:\n{}", s.text);
        }
        for k in [2u8, 3] {
            check_sum(c, k, "/s", pattern(size))?;
        }
        // Still one copy among the survivors' caches.
        let owned2 = cache_stats(c, 2)?.num(cache::RESIDENT_OWNED);
        let owned3 = cache_stats(c, 3)?.num(cache::RESIDENT_OWNED);
        assert_eq!(
            owned2 + owned3,
            pages,
            "after the re-read nodes 2 and 3 own {owned2} + {owned3} pages of a {pages}-page file"
        );
        check_sum(c, 1, "/s", pattern(size))?;
        Ok(())
    });
}

// ------------------------------------------------------- parser checks

#[test]
fn cache_drop_parser() {
    assert_eq!(
        parse_cache_drop("invalidated 32 owned pages, dropped 0 remote mappings"),
        Some((32, 0))
    );
    assert_eq!(parse_cache_drop("dropped the private cache"), None);
}

// ------------------------------------------------------------ readahead

/// A sequential read of a file on the disk only (node 1 wrote it and gave
/// its pages back) reads ahead on node 2 at the default `readahead_kb`:
/// the readahead counters move, the pages read ahead are read, the data
/// is right, and the directory sees far fewer page batches than pages.
#[test]
fn sequential_read_reads_ahead() {
    with_cluster(opts("readahead").mode("strong"), |c| {
        let size = 1024 * KIB;
        let pages = size / PAGE;
        c.exec_ok(1, "fill /ra 1m")?;
        c.exec_ok(1, "cache drop")?;
        let before = cache_stats(c, 2)?;
        check_sum(c, 2, "/ra", pattern(size))?;
        let s = cache_stats(c, 2)?;
        let ahead = s.num(cache::READAHEAD_PAGES) - before.num(cache::READAHEAD_PAGES);
        let hits = s.num(cache::READAHEAD_HITS) - before.num(cache::READAHEAD_HITS);
        let batches = s.num(cache::PAGE_BATCHES) - before.num(cache::PAGE_BATCHES);
        assert!(
            ahead > pages / 2 && ahead < pages,
            "n2 read {ahead} of {pages} pages ahead:\n{}",
            s.text
        );
        assert!(
            hits * 10 >= ahead * 9,
            "n2 read few pages it read ahead:\n{}",
            s.text
        );
        assert!(
            batches * 8 <= pages,
            "n2 needed {batches} page batches for {pages} pages:\n{}",
            s.text
        );
        assert_eq!(
            s.num(cache::MISSES),
            pages,
            "every page missed once:\n{}",
            s.text
        );
        // Read again: all hits, nothing more read ahead.
        check_sum(c, 2, "/ra", pattern(size))?;
        let again = cache_stats(c, 2)?;
        assert_eq!(
            again.num(cache::READAHEAD_PAGES),
            s.num(cache::READAHEAD_PAGES)
        );
        assert_eq!(
            again.num(cache::MISSES),
            s.num(cache::MISSES),
            "{}",
            again.text
        );
        Ok(())
    });
}
