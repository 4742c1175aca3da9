//! Node commands: `nodes`, `uptime`, `bench`, `shutdown`, `bench miss`.

use super::*;

// --- nodes / uptime / bench / shutdown -------------------------------------

#[test]
fn nodes_table() {
    let mut os = MockOs::new();
    assert_eq!(
        ok(&mut os, "nodes"),
        "epoch=3\n\
         \x20 dir  up       heartbeat=1000 epoch=3\n\
         * 1    up       heartbeat=420 epoch=3\n\
         \x20 2    joining  heartbeat=7 epoch=0\n"
    );
}

#[test]
fn nodes_sanitises_state() {
    let mut os = MockOs::new();
    os.cluster.nodes[2].state = "bad\nstate".to_string();
    let out = ok(&mut os, "nodes");
    assert_eq!(out.lines().count(), 4);
    assert!(out.contains("bad?state"));
}

#[test]
fn uptime_format() {
    let mut os = MockOs::new();
    os.now_ns = 12_345_678_901;
    assert_eq!(ok(&mut os, "uptime"), "up 12.345678 s\n");
    assert_eq!(format_uptime(0), "up 0.000000 s");
    assert_eq!(format_uptime(999), "up 0.000000 s");
    assert_eq!(format_uptime(1_000_001_000), "up 1.000001 s");
    assert_eq!(format_uptime(u64::MAX), "up 18446744073.709551 s");
}

#[test]
fn bench_ring_reports_percentiles() {
    let mut os = MockOs::new();
    os.ring_samples = (1..=100).collect();
    assert_eq!(
        ok(&mut os, "bench ring 100"),
        "ring round trip: n=100 median=50 ns p99=99 ns min=1 ns max=100 ns\n"
    );
    let out = ok(&mut os, "bench ring");
    assert!(out.starts_with("ring round trip: n=10000 "), "{out}");
    ok(&mut os, "bench ring 1000000");
}

#[test]
fn bench_rpc_names_its_transport() {
    let mut os = MockOs::new();
    os.ring_samples = (1..=100).collect();
    assert_eq!(
        ok(&mut os, "bench rpc 100"),
        "rpc round trip over ring: n=100 median=50 ns p99=99 ns min=1 ns max=100 ns\n"
    );
    assert_eq!(
        err(&mut os, "bench rpc 0"),
        "bench rpc: bad count '0' (1 to 1000000)"
    );
    os.fail("bench_rpc", 0, Errno::Unavailable);
    assert_eq!(
        err(&mut os, "bench rpc 5"),
        "bench rpc: directory unavailable"
    );
}

#[test]
fn bench_dir_checks_its_batch() {
    let mut os = MockOs::new();
    for bad in ["0", "65", "x", "-1"] {
        assert_eq!(
            err(&mut os, &format!("bench dir /f 1 {bad}")),
            format!("bench dir: bad batch '{bad}' (1 to 64)")
        );
    }
    // A good batch reaches the OS (the mock has no page directory).
    assert!(err(&mut os, "bench dir /f 1 64").contains("not supported"));
}

#[test]
fn cache_hold_checks_its_page_and_kind() {
    let mut os = MockOs::new();
    for bad in ["x", "-1", "1048576"] {
        assert_eq!(
            err(&mut os, &format!("cache hold /f {bad} pin")),
            format!("cache hold: bad page '{bad}' (0 to 1048575)")
        );
    }
    assert_eq!(
        err(&mut os, "cache hold /f 0 grab"),
        "cache hold: bad hold 'grab' (claim or pin)"
    );
    assert!(err(&mut os, "cache hold /f 0").starts_with("usage: cache hold PATH PAGE claim|pin"));
    // Good arguments reach the OS (the mock has no slot cache).
    assert_eq!(
        err(&mut os, "cache hold /f 1048575 claim"),
        "cache hold: /f: not supported"
    );
}

#[test]
fn bench_ring_errors() {
    let mut os = MockOs::new();
    for bad in ["0", "1000001", "abc", "-5", "1k", "99999999999999999999999"] {
        assert_eq!(
            err(&mut os, &format!("bench ring {bad}")),
            format!("bench ring: bad count '{bad}' (1 to 1000000)")
        );
    }
    assert_eq!(
        err(&mut os, "bench foo"),
        "bench: unknown subcommand 'foo' (try 'help')"
    );
    os.fail("bench_ring", 0, Errno::Unavailable);
    assert_eq!(
        err(&mut os, "bench ring 5"),
        "bench ring: directory unavailable"
    );
    let mut os = MockOs::new();
    os.ring_samples.clear();
    assert_eq!(err(&mut os, "bench ring 5"), "bench ring: no samples");
}

#[test]
fn shutdown_prints_ok_and_stops() {
    let mut os = MockOs::new();
    let mut sh = Shell::new(2);
    assert_eq!(sh.execute(&mut os, "shutdown"), Outcome::Shutdown);
    assert_eq!(os.take_out(), "ok\n");
    assert_eq!(sh.execute(&mut os, "shutdown x"), Outcome::Continue);
    assert_eq!(os.take_out(), "error: usage: shutdown\n");
}

// --- bench miss ----------------------------------------------------------

fn miss_os() -> MockOs {
    use crate::os::{MissCounters, MissStats};
    let mut os = MockOs::new();
    os.can_seek = true;
    os.miss_per_read = Some(MissCounters {
        round_trip_ns: 90_000,
        fill_ns: 2_000,
        page_fills: MissStats {
            count: 1,
            lookup_ns: 1_000,
            disk_ns: 80_000,
            fill_ns: 3_000,
            reply_ns: 500,
        },
        file_reads: MissStats::default(),
    });
    os
}

#[test]
fn bench_miss_splits_every_miss_into_phases_and_removes_its_file() {
    let mut os = miss_os();
    let out = ok(&mut os, "bench miss 8");
    assert!(
        out.starts_with(
            "bench miss: 8 cold 4 KiB misses, mode unknown, path read, directory timed 8 of them\n"
        ),
        "{out}"
    );
    // Each read takes 100 us on the mock's clock: 90 in round trips (84.5
    // of them the directory's service), 2 installing.
    for (phase, us) in [
        ("node: call + copy out", "8.00"),
        ("transport", "5.50"),
        ("directory: lookup", "1.00"),
        ("directory: disk read", "80.00"),
        ("directory: fill", "3.00"),
        ("directory: reply", "0.50"),
        ("node: fill/map", "2.00"),
        ("total", "100.00"),
    ] {
        let line = out
            .lines()
            .find(|l| l.starts_with(phase))
            .unwrap_or_else(|| panic!("no {phase} line in {out}"));
        assert!(line.contains(us), "{line}");
    }
    assert!(out
        .contains("RESULT {\"bench\":\"miss\",\"mode\":\"unknown\",\"misses\":8,\"dir_timed\":8,"));
    assert_eq!(os.file("/bench-miss"), None, "the scratch file is removed");
    assert_eq!(os.reads, 9, "page 0 untimed, then 8 misses");
    assert!(os.syncs >= 1);
}

#[test]
fn bench_miss_batch_reads_each_page_as_a_batch_of_one() {
    let mut os = miss_os();
    let out = ok(&mut os, "bench miss 4 batch");
    assert!(
        out.starts_with(
            "bench miss: 4 cold 4 KiB misses, mode unknown, path batch, directory timed 4 of them\n"
        ),
        "{out}"
    );
    assert!(out.contains("\"path\":\"batch\""), "{out}");
    assert_eq!(os.batches, vec![1; 4], "one batch of one per timed page");
    assert_eq!(os.reads, 5, "page 0 untimed, then a read per batch");
    assert_eq!(os.file("/bench-miss"), None);
    assert_eq!(
        err(&mut os, "bench miss 4 each"),
        "bench miss: bad path 'each' (read or batch)"
    );
    assert_eq!(os.file("/bench-miss"), None);
}

#[test]
fn bench_miss_errors_are_one_line_and_leave_no_file() {
    let mut os = miss_os();
    for n in ["0", "1025", "x"] {
        assert_eq!(
            err(&mut os, &format!("bench miss {n}")),
            format!("bench miss: bad count '{n}' (1 to 1024)")
        );
    }
    // No cache drop or counters here (the default mock): a clear error.
    let mut os = MockOs::new();
    os.can_seek = true;
    assert_eq!(
        err(&mut os, "bench miss 2"),
        "bench miss: /bench-miss: cache drop: not supported"
    );
    assert_eq!(os.file("/bench-miss"), None);
}
