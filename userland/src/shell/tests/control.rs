//! `app` and the cache control API: `cache policy`, `cache config`, `locality`.

use super::*;

// --- app -----------------------------------------------------------------

#[test]
fn app_runs_a_workload_and_refuses_bad_input() {
    let mut os = MockOs::new();
    os.capacity = 64 << 20;
    os.can_seek = true;
    let ds = crate::app::dataset::plan("kv", 256 << 10, 1, "/apps/kv").unwrap();
    crate::app::dataset::write_os(&mut os, &ds).unwrap();
    let out = ok(&mut os, "app kv --ops 20 --threads 4");
    assert!(out.starts_with("app kv on node 1"), "{out}");
    assert_eq!(out.lines().filter(|l| l.starts_with("RESULT {")).count(), 1);
    assert!(
        err(&mut os, "app").starts_with("usage: app NAME"),
        "missing NAME"
    );
    assert_eq!(
        err(&mut os, "app nope"),
        "app: unknown app 'nope' (one of webserver, fileserver, varmail, kv, infer, ann, search)"
    );
    assert_eq!(
        err(&mut os, "app kv --threads 0"),
        "app: bad value '0' for --threads (1..=256)"
    );
    assert!(err(&mut os, "app ann --ops 1").contains("--dataset ann:SIZE"));
    assert!(ok(&mut os, "help app").contains("app NAME [--runtime S]"));
}

// --- cache policy, cache config, locality ----------------------------------

#[test]
fn cache_policy_shows_and_sets_and_names_the_valid_ones_on_error() {
    let mut os = MockOs::new();
    let out = ok(&mut os, "cache policy");
    assert!(out.starts_with("policy     fifo\n"), "{out}");
    assert!(out
        .contains("available  fifo, lru, clock, lfu, mru, s3fifo, sieve, arc, get-scan, cluster"));
    let out = ok(&mut os, "cache policy s3fifo");
    assert!(out.starts_with("policy     s3fifo\n"), "{out}");
    assert_eq!(os.controls.unwrap().policy, PolicyName::S3Fifo);
    let e = err(&mut os, "cache policy random");
    assert_eq!(
        e,
        "cache policy: unknown policy 'random' (valid: fifo, lru, clock, lfu, mru, s3fifo, sieve, arc, get-scan, cluster)"
    );
    assert_eq!(os.controls.unwrap().policy, PolicyName::S3Fifo, "unchanged");
    assert_eq!(
        err(&mut os, "cache policy lru mru"),
        "usage: cache policy [NAME] [--group G]"
    );
    os.controls = None;
    assert_eq!(err(&mut os, "cache policy"), "cache policy: not supported");
    assert_eq!(
        err(&mut os, "cache policy lru"),
        "cache policy: not supported"
    );
}

#[test]
fn cache_readahead_shows_sets_and_refuses_bad_sizes() {
    let mut os = MockOs::new();
    assert_eq!(
        ok(&mut os, "cache readahead"),
        "readahead    128 KiB\nfault-around 64 KiB\n"
    );
    assert_eq!(
        ok(&mut os, "cache readahead 0"),
        "readahead    off\nfault-around 64 KiB\n",
        "the fault-around block is kept"
    );
    assert_eq!(os.readahead, (0, 64));
    assert_eq!(
        ok(&mut os, "cache readahead 256 0"),
        "readahead    256 KiB\nfault-around off\n"
    );
    assert_eq!(
        err(&mut os, "cache readahead 8193"),
        "cache readahead: readahead '8193': expected KiB, 0 (off) to 8192"
    );
    assert_eq!(
        err(&mut os, "cache readahead 128 x"),
        "cache readahead: fault-around 'x': expected KiB, 0 (off) to 2048"
    );
    assert_eq!(os.readahead, (256, 0), "nothing set by a refused line");
}

#[test]
fn cache_config_shows_sets_all_or_nothing_and_explains_bad_input() {
    let mut os = MockOs::new();
    assert_eq!(
        ok(&mut os, "cache config"),
        "policy  fifo\nlimit   none\nttl     off\npromote off\n"
    );
    assert_eq!(
        ok(&mut os, "cache config ttl=30 limit=128"),
        "policy  fifo\nlimit   128\nttl     30\npromote off\n"
    );
    assert_eq!(
        ok(&mut os, "cache config promote=8 promote_window_ms=50"),
        "policy  fifo\nlimit   128\nttl     30\npromote 8 reads in 50 ms\n"
    );
    assert_eq!(
        ok(
            &mut os,
            "cache config limit=none policy=lfu ttl=0 promote=0"
        ),
        "policy  lfu\nlimit   none\nttl     off\npromote off\n"
    );
    for (line, msg) in [
        (
            "cache config foo=1",
            "unknown key 'foo' (valid: ttl, limit, policy, promote, promote_window_ms, group)",
        ),
        (
            "cache config promote=-1",
            "promote=-1: expected reads per window, 0 (off) to 1048576",
        ),
        (
            "cache config promote_window_ms=0",
            "promote_window_ms=0: expected milliseconds, 1 to 3600000",
        ),
        ("cache config ttl", "'ttl': expected KEY=VALUE"),
        ("cache config ttl=abc", "ttl=abc: expected seconds, 0 (off) to 2592000"),
        ("cache config ttl=-1", "ttl=-1: expected seconds, 0 (off) to 2592000"),
        ("cache config ttl=2592001", "ttl=2592001: expected seconds, 0 (off) to 2592000"),
        (
            "cache config limit=x",
            "limit=x: expected pages, 64 to 4294967296 (0 or none: the pool)",
        ),
        (
            "cache config limit=63",
            "limit=63: expected pages, 64 to 4294967296 (0 or none: the pool)",
        ),
        (
            "cache config policy=nope",
            "policy=nope: expected one of fifo, lru, clock, lfu, mru, s3fifo, sieve, arc, get-scan, cluster",
        ),
    ] {
        assert_eq!(err(&mut os, line), alloc::format!("cache config: {msg}"), "{line}");
    }
    // A bad word anywhere leaves everything as it was.
    err(&mut os, "cache config ttl=5 limit=x");
    let k = os.controls.unwrap();
    assert_eq!((k.ttl_s, k.limit, k.policy), (0, None, PolicyName::Lfu));
    assert_eq!((k.promote, k.promote_window_ms), (0, 50));
}

#[test]
fn locality_prints_each_run() {
    let mut os = MockOs::new();
    os.locality.insert(
        "/f".to_string(),
        alloc::vec![
            LocalityRange {
                first: 0,
                pages: 16,
                owner: 1,
                sharers: 2
            },
            LocalityRange {
                first: 16,
                pages: 32,
                owner: 0,
                sharers: 0
            },
        ],
    );
    os.locality.insert("/empty".to_string(), alloc::vec![]);
    assert_eq!(
        ok(&mut os, "locality /f"),
        "pages 0-15 owner=1 sharers=2\npages 16-47 on disk only\n"
    );
    assert_eq!(ok(&mut os, "locality empty"), "/empty: no pages\n");
    assert_eq!(err(&mut os, "locality /nope"), "locality: /nope: not found");
    assert_eq!(err(&mut os, "locality"), "usage: locality PATH");
    // A bogus run from the OS prints, without panicking.
    os.locality.insert(
        "/odd".to_string(),
        alloc::vec![LocalityRange {
            first: u64::MAX,
            pages: 0,
            owner: 3,
            sharers: 0
        }],
    );
    ok(&mut os, "locality /odd");
}
