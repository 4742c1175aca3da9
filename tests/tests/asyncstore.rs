//! Integration tests of the directory's asynchronous storage: page fills in flight while the directory answers other
//! requests.
//!
//! Needs the release kernel and host tools (`tests/run.sh` builds them):
//!
//! ```text
//! cargo build --release -p onecopy-kernel --target x86_64-unknown-none
//! cargo build --release -p flatfs --bins
//! cargo test -p onecopy-tests --test asyncstore -- --test-threads=1
//! ```
//!
//! Every test boots its own cluster; the harness stops it whatever happens
//! and prints every instance's log when a test fails. Tests assert on
//! behaviour (outputs and counters), never on timing; every wait has a
//! limit.

use std::time::Duration;

use onecopy_tests::shell::{parse_sum, pattern_crc32};
use onecopy_tests::{with_cluster, ClusterOpts, Console, Error, Instance, Result};
use regex::Regex;
use userland::stats::keys::cache;

const CTL: &str = env!("CARGO_BIN_EXE_onecopy-ctl");

/// Default limit for one shell command (TCG is slow, but no command of
/// these tests should come near it).
const CMD_TIMEOUT: Duration = Duration::from_secs(30);

const KIB: u64 = 1024;

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

/// What `sum` prints for `len` bytes of the fill pattern.
fn pattern(len: u64) -> (u32, u64) {
    (pattern_crc32(len), len)
}

/// The directory answers lookups of cached pages while page fills are in
/// flight: node 1 reads a cold file (every page a fill from a disk with
/// 2 ms of access latency per request) while node 2 maps and drops pages
/// node 1 holds in a tight loop (`bench dir /hot R 1`: one page request
/// at a time, thousands of them, no console round trips between them).
/// Checks behaviour, not time: node 1's read returns the right bytes,
/// node 2 caused no fill, and the directory had several fills in flight
/// and answered a page request while they were (its log says so). The
/// cold read is repeated (up to 5 times) until one of node 2's requests
/// landed inside it. (Lookups sent as console commands, with host round
/// trips between them, missed every fill in about one run of four.)
#[test]
fn lookups_are_answered_while_fills_are_in_flight() {
    let o = opts("asyncfill").append_extra("disk_lat_us=2000");
    with_cluster(o, |c| {
        let cold = 2048 * KIB;
        let hot = 64 * KIB;
        // Node 1 through its own console: it runs beside node 2 below.
        let sock = c.run().socket_path(Instance::Node(1));
        let mut n1 = Console::connect(&sock, 1, CMD_TIMEOUT)?;
        let long = Duration::from_secs(120);
        for cmd in ["fill /cold 2m", "sync", "cache drop", "fill /hot 64k"] {
            n1.exec(cmd, long)?.into_result()?;
        }
        let answered = "page request answered while page fills were in flight";
        let mut overlapped = false;
        let sock2 = c.run().socket_path(Instance::Node(2));
        let mut n2 = Console::connect(&sock2, 2, CMD_TIMEOUT)?;
        for attempt in 0..5 {
            let got = std::thread::scope(|s| -> Result<(u32, u64)> {
                let mapper = s.spawn(|| -> Result<()> {
                    n2.exec("bench dir /hot 3000 1", long)?.into_result()?;
                    Ok(())
                });
                // Node 2's loop is under way before the cold read starts.
                std::thread::sleep(Duration::from_millis(300));
                let out = n1.exec("sum /cold", long)?.into_result()?;
                let got = parse_sum(&out.text()).ok_or_else(|| fail("sum /cold printed no crc"))?;
                mapper.join().map_err(|_| fail("mapper panicked"))??;
                Ok(got)
            })?;
            assert_eq!(got, pattern(cold), "attempt {attempt}: node 1's cold read");
            if c.log("dir").contains(answered) {
                overlapped = true;
                break;
            }
            n1.exec("cache drop", long)?.into_result()?;
        }
        assert!(overlapped, "no page request was answered during fills");
        drop(n2);
        let out = c.exec_ok(2, "sum /hot")?;
        let got = parse_sum(&out.text()).ok_or_else(|| fail("sum /hot printed no crc"))?;
        assert_eq!(got, pattern(hot), "node 2's read of the pages it mapped");
        let s = c.stats(2, "cache stats")?;
        assert_eq!(s.num(cache::DISK_READS_FILLS), 0, "node 2 only mapped");
        let log = c.log("dir");
        let most = Regex::new(r"disk: (\d+) page fills in flight")
            .expect("regex")
            .captures_iter(&log)
            .filter_map(|m| m[1].parse::<u64>().ok())
            .max()
            .unwrap_or(0);
        assert!(most >= 2, "at most {most} fills in flight:\n{log}");
        Ok(())
    });
}
