//! Integration tests of the eviction controls: `--policy`,
//! `cache policy [NAME]`, `cache config [KEY=VALUE ...]`, `locality PATH`,
//! and a policy switch followed by forced reclaim losing no dirty data.
//!
//! Needs the release kernel and host tools (`tests/run.sh` builds them):
//!
//! ```text
//! cargo build --release -p onecopy-kernel --target x86_64-unknown-none
//! cargo build --release -p flatfs --bins
//! cargo test -p onecopy-tests --test policy -- --test-threads=1
//! ```
//!
//! Every test boots its own cluster; the harness stops it whatever happens
//! and prints every instance's log when a test fails. The tests assert on
//! the serial output, never on timing; every wait has a limit.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use onecopy_tests::shell::{parse_sum, pattern_bytes, pattern_crc32};
use onecopy_tests::{
    inspect, mkfs, qemu_run, repo_root, unique_run_dir, with_cluster, Cluster, ClusterOpts, Error,
    Result,
};
use userland::stats::keys::cache;

const CTL: &str = env!("CARGO_BIN_EXE_onecopy-ctl");

/// Every policy name, in the order the shell lists them.
const VALID: &str = "fifo, lru, clock, lfu, mru, s3fifo, sieve, arc, get-scan, cluster";

fn opts(name: &str) -> ClusterOpts {
    ClusterOpts::new(name)
        .ctl(CTL)
        .cmd_timeout(Duration::from_secs(60))
        .boot_timeout(Duration::from_secs(60))
}

fn fail(msg: impl Into<String>) -> Error {
    Error::Usage(msg.into())
}

/// The policy `cache policy` reports on `node` (and checks the list of
/// available ones).
fn policy_of(c: &mut Cluster, node: u8) -> Result<String> {
    let out = c.exec_ok(node, "cache policy")?;
    let text = out.text();
    let mut policy = None;
    let mut available = None;
    for line in &out.lines {
        let mut w = line.splitn(2, char::is_whitespace);
        match (w.next(), w.next().map(str::trim)) {
            (Some("policy"), Some(v)) => policy = Some(v.to_string()),
            (Some("available"), Some(v)) => available = Some(v.to_string()),
            _ => {}
        }
    }
    if available.as_deref() != Some(VALID) {
        return Err(fail(format!("n{node}: cache policy: bad list:\n{text}")));
    }
    policy.ok_or_else(|| fail(format!("n{node}: cache policy: no policy line:\n{text}")))
}

/// `cache config` on `node` as `(policy, limit, ttl)`.
fn config_of(c: &mut Cluster, node: u8, args: &str) -> Result<(String, String, String)> {
    let cmd = format!("cache config {args}");
    let out = c.exec_ok(node, cmd.trim_end())?;
    let get = |key: &str| {
        out.lines.iter().find_map(|l| {
            let (k, v) = l.split_once(char::is_whitespace)?;
            (k == key).then(|| v.trim().to_string())
        })
    };
    match (get("policy"), get("limit"), get("ttl")) {
        (Some(p), Some(l), Some(t)) => Ok((p, l, t)),
        _ => Err(fail(format!(
            "n{node}: {cmd}: unexpected output:\n{}",
            out.text()
        ))),
    }
}

/// The error message of `cmd` on `node`, which must fail.
fn error_of(c: &mut Cluster, node: u8, cmd: &str) -> Result<String> {
    let out = c.exec(node, cmd)?;
    out.error_message()
        .map(str::to_string)
        .ok_or_else(|| fail(format!("n{node}: `{cmd}` succeeded: {out:?}")))
}

/// `locality PATH` on `node`: its output lines.
fn locality(c: &mut Cluster, node: u8, path: &str) -> Result<Vec<String>> {
    Ok(c.exec_ok(node, &format!("locality {path}"))?.lines)
}

// --------------------------------------------------------------- tests

/// `--policy lru` reaches every node (boot line, `cluster up` line,
/// `status`, `cache policy`); `cache policy s3fifo` switches one node at
/// run time; an unknown name is an error listing the valid ones and
/// changes nothing.
#[test]
fn policy_flag_show_and_switch() {
    with_cluster(opts("policy-switch").policy("lru"), |c| {
        assert!(
            c.launch_output().contains("(mode strong, policy lru)"),
            "cluster up line:\n{}",
            c.launch_output()
        );
        for k in 1..=2u8 {
            let log = c.log(&format!("node{k}"));
            assert!(
                log.contains(&format!("role=node id={k} ")) && log.contains(" policy=lru "),
                "node{k} boot line does not say policy=lru:\n{log}"
            );
            assert_eq!(policy_of(c, k)?, "lru", "n{k} policy after boot");
        }
        let run_dir = c.run_dir().to_string_lossy().into_owned();
        let st = qemu_run(
            &["status", "--run-dir", &run_dir],
            Path::new(CTL),
            Duration::from_secs(30),
        )?;
        assert!(
            st.text().contains("policy lru"),
            "qemu-run.sh status:\n{}",
            st.text()
        );

        let out = c.exec_ok(1, "cache policy s3fifo")?;
        assert!(
            out.lines
                .iter()
                .any(|l| l.split_whitespace().eq(["policy", "s3fifo"])),
            "cache policy s3fifo printed:\n{}",
            out.text()
        );
        assert_eq!(policy_of(c, 1)?, "s3fifo");
        assert_eq!(policy_of(c, 2)?, "lru", "n2 changed with n1");
        assert_eq!(config_of(c, 1, "")?.0, "s3fifo", "cache config's policy");

        let msg = error_of(c, 1, "cache policy nosuch")?;
        assert_eq!(
            msg,
            format!("cache policy: unknown policy 'nosuch' (valid: {VALID})")
        );
        assert_eq!(
            policy_of(c, 1)?,
            "s3fifo",
            "unknown name changed the policy"
        );
        // Every listed name is accepted.
        for name in VALID.split(", ") {
            c.exec_ok(2, &format!("cache policy {name}"))?;
            assert_eq!(policy_of(c, 2)?, name);
        }
        // The cache still serves reads after the switches.
        let out = c.exec_ok(2, "cat /hello.txt")?;
        assert!(!out.lines.is_empty(), "cat printed nothing");
        Ok(())
    });
}

/// `cache config limit= ttl= policy=` set and show; bad input is one
/// error line and changes nothing (all words are checked first).
#[test]
fn cache_config_set_show_and_reject() {
    with_cluster(opts("policy-config"), |c| {
        let none = |p: &str| (p.to_string(), "none".to_string(), "off".to_string());
        assert_eq!(config_of(c, 1, "")?, none("fifo"), "defaults");
        assert_eq!(
            config_of(c, 1, "limit=128 ttl=30")?,
            ("fifo".into(), "128".into(), "30".into())
        );
        assert_eq!(
            config_of(c, 1, "")?,
            ("fifo".into(), "128".into(), "30".into()),
            "not kept"
        );
        assert_eq!(
            config_of(c, 1, "policy=sieve ttl=0")?,
            ("sieve".into(), "128".into(), "off".into())
        );
        for (args, msg) in [
            (
                "limit=3",
                "limit=3: expected pages, 64 to 4294967296 (0 or none: the pool)",
            ),
            (
                "limit=x",
                "limit=x: expected pages, 64 to 4294967296 (0 or none: the pool)",
            ),
            ("ttl=abc", "ttl=abc: expected seconds, 0 (off) to 2592000"),
            ("ttl=-5", "ttl=-5: expected seconds, 0 (off) to 2592000"),
            (
                "foo=1",
                "unknown key 'foo' (valid: ttl, limit, policy, promote, promote_window_ms, group)",
            ),
            ("ttl", "'ttl': expected KEY=VALUE"),
            (
                "policy=nope",
                &format!("policy=nope: expected one of {VALID}"),
            ),
            // A good word before a bad one is not applied either.
            (
                "ttl=7 limit=none limit=1",
                "limit=1: expected pages, 64 to 4294967296 (0 or none: the pool)",
            ),
        ] {
            let m = error_of(c, 1, &format!("cache config {args}"))?;
            assert_eq!(m, format!("cache config: {msg}"), "cache config {args}");
        }
        assert_eq!(
            config_of(c, 1, "")?,
            ("sieve".into(), "128".into(), "off".into()),
            "rejected input changed the controls"
        );
        assert_eq!(config_of(c, 1, "limit=none")?, none("sieve"));
        // Node 2 was never touched.
        assert_eq!(config_of(c, 2, "")?, none("fifo"), "n2");
        Ok(())
    });
}

/// `locality PATH`: a file node 1 read and node 2 mapped lives on node 1
/// with one sharer, as both nodes see it; a file nobody read is on disk
/// only; a missing path is an error.
#[test]
fn locality_shows_owner_sharers_and_disk() {
    with_cluster(opts("policy-locality"), |c| {
        // data/lorem.txt: 10317 bytes, 3 pages.
        c.exec_ok(1, "sum /data/lorem.txt")?;
        c.exec_ok(2, "mmap-read /data/lorem.txt")?;
        for k in 1..=2u8 {
            let lines = locality(c, k, "/data/lorem.txt")?;
            assert_eq!(
                lines,
                ["pages 0-2 owner=1 sharers=1"],
                "n{k}: locality /data/lorem.txt"
            );
        }
        let lines = locality(c, 2, "/hello.txt")?;
        assert_eq!(
            lines,
            ["pages 0-0 on disk only"],
            "locality of an uncached file"
        );
        // Once node 2 drops its mappings, the page has no sharer left.
        c.exec_ok(2, "cache drop")?;
        let lines = locality(c, 1, "/data/lorem.txt")?;
        assert_eq!(
            lines,
            ["pages 0-2 owner=1 sharers=0"],
            "after n2's cache drop"
        );
        // Once node 1 gives its pages back, they are on disk only.
        c.exec_ok(1, "cache drop")?;
        let lines = locality(c, 2, "/data/lorem.txt")?;
        assert_eq!(lines, ["pages 0-2 on disk only"], "after n1's cache drop");

        let m = error_of(c, 1, "locality /nosuch")?;
        assert_eq!(m, "locality: /nosuch: not found");
        let m = error_of(c, 1, "locality")?;
        assert_eq!(m, "usage: locality PATH");
        let m = error_of(c, 1, "locality /data")?;
        assert!(
            m.starts_with("locality: /data: "),
            "locality of a directory: {m}"
        );
        Ok(())
    });
}

/// A policy switch at run time loses no dirty data: node 1 writes 1 MiB
/// (256 pages), switches to MRU, forces reclaim with the smallest limit,
/// syncs; node 2 reads the right bytes and so does the host from the image.
#[test]
fn policy_switch_and_reclaim_keep_dirty_data() {
    let run_dir = unique_run_dir("policy-dirty").expect("run dir");
    let image: PathBuf = run_dir.join("disk.img");
    let sample = repo_root().join("tools/sample");
    mkfs(&image, 64, sample.is_dir().then_some(sample.as_path())).expect("mkfs");
    let size: u64 = 1024 * 1024;
    with_cluster(opts("policy-dirty").run_dir(&run_dir).disk(&image), |c| {
        c.keep_run_dir(); // the image is examined after the cluster stops
        c.exec_ok(1, "fill /big 1m")?;
        let before = c.stats(1, "cache stats")?.num(cache::RESIDENT_OWNED);
        assert!(before >= 256, "n1 owns {before} pages after writing 256");
        c.exec_ok(1, "cache policy mru")?;
        config_of(c, 1, "limit=64")?;
        let after = c.stats(1, "cache stats")?;
        let owned = after.num(cache::RESIDENT_OWNED);
        assert!(
            owned <= 64,
            "n1 owns {owned} pages over limit=64:\n{}",
            after.text
        );
        c.exec_ok(1, "sync")?;
        for k in 1..=2u8 {
            let out = c.exec_ok(k, "sum /big")?;
            let got = parse_sum(&out.text()).ok_or_else(|| fail("sum printed no crc"))?;
            assert_eq!(got, (pattern_crc32(size), size), "n{k}: sum /big");
        }
        c.stop()?;
        Ok(())
    });
    let out = inspect(&image, &["--cat", "/big"]).expect("inspect");
    assert_eq!(
        out.code,
        Some(0),
        "inspect --cat /big: {}",
        out.stderr_text()
    );
    assert!(
        out.stdout == pattern_bytes(size as usize),
        "/big on disk differs from the pattern ({} bytes)",
        out.stdout.len()
    );
    let out = inspect(&image, &["--check"]).expect("inspect");
    assert_eq!(out.code, Some(0), "inspect --check: {}", out.text());
    let _ = fs::remove_dir_all(&run_dir);
}

/// `cache groups` on `node`: group name -> (pages, hits, misses,
/// evictions).
fn groups_of(c: &mut Cluster, node: u8) -> Result<Vec<(String, [u64; 4])>> {
    let out = c.exec_ok(node, "cache groups")?;
    let mut v = Vec::new();
    for line in out.lines.iter().skip(1) {
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.len() != 7 {
            continue;
        }
        let n = |i: usize| w[i].parse::<u64>().ok();
        match (n(3), n(4), n(5), n(6)) {
            (Some(p), Some(h), Some(m), Some(e)) => v.push((w[0].to_string(), [p, h, m, e])),
            _ => return Err(fail(format!("n{node}: cache groups: bad line {line:?}"))),
        }
    }
    Ok(v)
}

/// (pages, hits, misses, evictions) of group `name` on `node`.
fn group_of(c: &mut Cluster, node: u8, name: &str) -> Result<[u64; 4]> {
    let gs = groups_of(c, node)?;
    gs.iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| *v)
        .ok_or_else(|| fail(format!("n{node}: no group {name} in {gs:?}")))
}

/// Read all of `path` (`size`) once with fio in group `group`, keeping
/// the cache (`--invalidate=0`).
fn fio_read(c: &mut Cluster, group: &str, path: &str, size: &str, rw: &str) -> Result<()> {
    c.exec_ok(
        1,
        &format!(
            "fio --name={group} --rw={rw} --bs=4k --size={size} --filename={path} --invalidate=0 --group {group}"
        ),
    )?;
    Ok(())
}

/// Two task groups on one node (cache_ext's per-cgroup case). A key-value-like hot
/// set (64 pages read at random by fio in group `kv`) next to a
/// sequential scan of 1024 pages in group `scan`, with the node's owned
/// pages capped at 256. With `cache config group=scan limit=64` the
/// scan evicts only its own pages and the hot set is all hits after it;
/// without the limit (groups `kv2`/`scan2` sharing the node's FIFO
/// lists) the scan flushes the hot set. Counts, not timing: without
/// readahead (`readahead_kb=0`), since the scan's read-ahead pages enter
/// its 64-page group as its most recent ones, which `mru` evicts before
/// the scan reads them (a known gap: each is missed again).
#[test]
fn a_scan_group_with_a_limit_leaves_the_kv_group_cached() {
    with_cluster(opts("policy-groups").append_extra("readahead_kb=0"), |c| {
        c.exec_ok(1, "fill /hot 256k")?;
        c.exec_ok(1, "fill /scan 4m")?;
        c.exec_ok(1, "cache drop")?;
        config_of(c, 1, "limit=256")?;
        // Errors change nothing.
        let m = error_of(c, 1, "cache config group=scan limit=8")?;
        assert_eq!(
            m,
            "cache config: limit=8: expected pages, 64 to 4294967296 (0 or none: no limit of its own)"
        );
        let m = error_of(c, 1, "fio --size=4k --group bad/name")?;
        assert!(m.contains("for option 'group'"), "{m}");
        assert_eq!(groups_of(c, 1)?.len(), 1, "only default exists");

        fio_read(c, "kv", "/hot", "256k", "randread")?;
        fio_read(c, "kv", "/hot", "256k", "randread")?;
        let [pages, hits, misses, _] = group_of(c, 1, "kv")?;
        assert_eq!((pages, misses), (64, 64), "kv after two passes");
        assert!(hits >= 64, "kv's second pass hit: {hits}");

        let out = c.exec_ok(1, "cache config group=scan limit=64 policy=mru")?;
        assert!(out.text().contains("limit   64"), "{}", out.text());
        fio_read(c, "scan", "/scan", "4m", "read")?;
        let [spages, _, smisses, sevict] = group_of(c, 1, "scan")?;
        assert!(spages <= 64, "scan kept to its limit: {spages}");
        assert_eq!(smisses, 1024, "scan read every page once");
        assert_eq!(sevict, 1024 - spages, "scan evicted only its own");
        let kv = group_of(c, 1, "kv")?;
        assert_eq!((kv[0], kv[3]), (64, 0), "kv untouched by the scan");
        fio_read(c, "kv", "/hot", "256k", "randread")?;
        let after = group_of(c, 1, "kv")?;
        assert_eq!(after[2], misses, "kv missed after the limited scan");
        assert!(after[1] >= hits + 64, "kv hits {} -> {}", hits, after[1]);

        // The same without a limit on the scan: the hot set is flushed.
        c.exec_ok(1, "cache drop")?;
        fio_read(c, "kv2", "/hot", "256k", "randread")?;
        fio_read(c, "kv2", "/hot", "256k", "randread")?;
        fio_read(c, "scan2", "/scan", "4m", "read")?;
        let [pages, _, misses, evictions] = group_of(c, 1, "kv2")?;
        assert_eq!((pages, evictions), (0, 64), "kv2 flushed by the scan");
        fio_read(c, "kv2", "/hot", "256k", "randread")?;
        let after = group_of(c, 1, "kv2")?;
        assert_eq!(after[2], misses + 64, "kv2 missed every page again");
        Ok(())
    });
}

/// Hot-page promotion (relaxed mode): a node reading a peer's pages over
/// and over keeps replicas (`cache stats` counts them and their hits), and
/// the protocol takes them away: the owner's truncate evicts the file on
/// every node, and the reader then sees the new bytes. Strong mode never
/// promotes.
#[test]
fn relaxed_hot_pages_are_replicated_and_a_truncate_takes_the_replicas_away() {
    with_cluster(opts("policy-promote").mode("relaxed"), |c| {
        c.exec_ok(1, "fill /hot 16k")?;
        c.exec_ok(1, "sum /hot")?; // node 1 now owns the 4 pages
        let out = c.exec_ok(2, "cache config promote=4")?;
        assert!(
            out.text().contains("promote 4 reads in 100 ms"),
            "{}",
            out.text()
        );
        c.exec_ok(
            2,
            "fio --name=hot --rw=randread --bs=4k --size=16k --filename=/hot --runtime=1 --time_based --invalidate=0",
        )?;
        let s = c.stats(2, "cache stats")?;
        assert_eq!(s.num(cache::PROMOTIONS), 4, "{}", s.text);
        assert_eq!(s.num(cache::REPLICA_PAGES), 4, "{}", s.text);
        assert!(s.num(cache::HITS_REPLICA) > 0, "{}", s.text);
        // Node 1 replaces the file: the truncate evicts its pages from
        // every node, node 2's replicas with its mappings.
        c.exec_ok(1, "write /hot new bytes")?;
        let out = c.exec_ok(2, "cat /hot")?;
        assert_eq!(out.text().trim_end(), "new bytes");
        let s = c.stats(2, "cache stats")?;
        assert_eq!(s.num(cache::REPLICA_PAGES), 0, "{}", s.text);
        Ok(())
    });
}

/// Promotion keeps strong mode strong: node 2 holds replicas of node 1's
/// hot pages; node 1's write into one of them (in place: no truncate, and
/// node 2 neither closes nor reopens anything between) revokes node 2's
/// replica before the store lands, and node 2's next read sees the bytes.
#[test]
fn strong_replicas_are_revoked_before_an_owner_write_lands() {
    with_cluster(opts("policy-promote-strong").mode("strong"), |c| {
        // 4 pages, the last one partial.
        c.exec_ok(1, "fill /hot 15000")?;
        // A long window: no replica goes cold between the commands.
        c.exec_ok(2, "cache config promote=2 promote_window_ms=60000")?;
        // The cluster's first PROMOTE is refused until node 1 (idle) has
        // looked at `replicas_used` (the directory's notice wakes it); the
        // next hot streak is granted.
        let mut s = c.stats(2, "cache stats")?;
        for _ in 0..12 {
            c.exec_ok(2, "sum /hot")?;
            s = c.stats(2, "cache stats")?;
            if s.num(cache::PROMOTIONS) >= 4 {
                break;
            }
        }
        assert_eq!(s.num(cache::PROMOTIONS), 4, "{}", s.text);
        assert!(s.num(cache::PROMOTIONS_REFUSED) >= 1, "{}", s.text);
        assert_eq!(s.num(cache::REPLICA_PAGES), 4, "{}", s.text);
        // The sum that granted the last promotions may have read some
        // of those pages before their replicas were installed: one more
        // sum reads all four through the replicas.
        let replica_hits = s.num(cache::HITS_REPLICA);
        let before = c.exec_ok(2, "sum /hot")?.text();
        let s = c.stats(2, "cache stats")?;
        assert_eq!(s.num(cache::PROMOTIONS), 4, "{}", s.text);
        assert!(s.num(cache::HITS_REPLICA) >= replica_hits + 4, "{}", s.text);
        // Node 1 appends into the partial last page, which node 2
        // replicated.
        c.exec_ok(1, "append /hot tail")?;
        let s = c.stats(2, "cache stats")?;
        assert_eq!(s.num(cache::REVOCATIONS), 1, "{}", s.text);
        assert_eq!(s.num(cache::REPLICA_PAGES), 3, "{}", s.text);
        let after2 = c.exec_ok(2, "sum /hot")?.text();
        let after1 = c.exec_ok(1, "sum /hot")?.text();
        assert!(after1.contains("size=15005"), "{after1}");
        assert_ne!(before, after1);
        assert_eq!(after2, after1, "node 2 reads what node 1 wrote");
        Ok(())
    });
}
