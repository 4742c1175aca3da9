//! Integration tests of the `net` mode: the NFS-like baseline where nodes
//! keep private caches and reach the directory's file server over TCP/IP
//! (smoltcp on virtio-net, one unix-socket link per node).
//!
//! Needs the release kernel and host tools (`tests/run.sh` builds them):
//!
//! ```text
//! cargo test -p onecopy-tests --test net -- --test-threads=1
//! ```
//!
//! Tests assert on behaviour (contents, counters, errors), never on timing.

use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use onecopy_tests::shell::{parse_sum, pattern_crc32};
use onecopy_tests::{with_cluster, Cluster, ClusterOpts, Error, Instance, Result};
use userland::stats::keys::cache;

const CTL: &str = env!("CARGO_BIN_EXE_onecopy-ctl");

fn opts(name: &str) -> ClusterOpts {
    ClusterOpts::new(name)
        .ctl(CTL)
        .mode("net")
        .cmd_timeout(Duration::from_secs(60))
        .boot_timeout(Duration::from_secs(60))
}

fn sum(c: &mut Cluster, node: u8, path: &str) -> Result<(u32, u64)> {
    let out = c.exec_ok(node, &format!("sum {path}"))?;
    Ok(parse_sum(&out.text()).unwrap_or_else(|| panic!("n{node}: sum printed no crc: {out:?}")))
}

fn fail(msg: impl Into<String>) -> Error {
    Error::Usage(msg.into())
}

/// An instance's QEMU stopped with SIGSTOP; dropping it resumes it
/// (SIGCONT), whatever the test did meanwhile.
struct Stopped(u32);

impl Stopped {
    fn new(c: &Cluster, inst: Instance) -> Result<Stopped> {
        let pid = c
            .run()
            .pid(inst)
            .ok_or_else(|| fail(format!("no pid recorded for {inst}")))?;
        if !signal(pid, "-STOP") {
            return Err(fail(format!("kill -STOP {inst} (pid {pid}) failed")));
        }
        Ok(Stopped(pid))
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        signal(self.0, "-CONT");
    }
}

fn signal(pid: u32, sig: &str) -> bool {
    Command::new("kill")
        .args([sig, &pid.to_string()])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `cmd` on `node` must fail with "directory unavailable" (not succeed,
/// not hang) within `limit`.
fn fails_unavailable(c: &mut Cluster, node: u8, cmd: &str, limit: Duration) -> Result<()> {
    let at = Instant::now();
    let out = c.exec_timeout(node, cmd.as_bytes(), limit + Duration::from_secs(20))?;
    let took = at.elapsed();
    let Some(msg) = out.error_message() else {
        return Err(fail(format!(
            "n{node}: `{cmd}` succeeded without a directory: {out:?}"
        )));
    };
    if !msg.contains("directory unavailable") {
        return Err(fail(format!("n{node}: `{cmd}`: unexpected error {msg:?}")));
    }
    if took > limit {
        return Err(fail(format!(
            "n{node}: `{cmd}` failed only after {} ms (limit {} ms)",
            took.as_millis(),
            limit.as_millis()
        )));
    }
    Ok(())
}

/// Data written on one node is read on another through TCP; each node
/// keeps its own copy (no mapping, no mmap path), and the traffic really
/// went over the network.
#[test]
fn net_mode_serves_files_over_tcp_with_private_copies() {
    with_cluster(opts("net-basic"), |c| {
        let size = 256 * 1024u64;
        let pages = size / 4096;
        c.exec_ok(1, "fill /f 256k")?;
        let want = (pattern_crc32(size), size);
        assert_eq!(sum(c, 1, "/f")?, want, "n1 sum /f");
        assert_eq!(sum(c, 2, "/f")?, want, "n2 sum /f");
        for k in 1..=2 {
            let s = c.stats(k, "cache stats")?;
            let t = &s.text;
            assert_eq!(s.get(cache::MODE), "net", "n{k}: {t}");
            assert_eq!(s.get(cache::NET_CONNECTION), "ESTABLISHED", "n{k}: {t}");
            assert_eq!(s.num(cache::RESIDENT_PRIVATE), pages, "n{k}: {t}");
            assert_eq!(s.num(cache::REMOTE_MAPPINGS), 0, "n{k}: {t}");
            assert!(
                s.num(cache::NET_RPCS) > 0,
                "n{k}: no RPC went over TCP: {t}"
            );
        }
        // Node 2 read 256 KiB of file data over its link.
        let s2 = c.stats(2, "cache stats")?;
        let rx: u64 = s2
            .get(cache::NET_BYTES)
            .split('/')
            .nth(1)
            .and_then(|x| x.parse().ok())
            .unwrap_or_else(|| panic!("bad byte counts: {}", s2.text));
        assert!(
            rx >= size,
            "n2 received {rx} bytes for a {size}-byte file: {}",
            s2.text
        );

        // The directory read those blocks without blocking its loop: the
        // answers went out after their disk reads.
        c.wait_log(
            "dir",
            r"net: \d+ requests answered after their disk I/O",
            Duration::from_secs(10),
        )?;
        // A batch's pipelined reads are in flight together on the disk.
        c.exec_ok(2, "cache drop")?;
        c.exec_ok(
            2,
            "fio --name=r --rw=randread --bs=4k --size=256k --filename=/f --ioengine=libaio --iodepth=16",
        )?;
        let log = c.log("dir");
        let most = regex::Regex::new(r"disk: (\d+) page fills in flight")
            .expect("regex")
            .captures_iter(&log)
            .filter_map(|m| m[1].parse::<u64>().ok())
            .max()
            .unwrap_or(0);
        assert!(most >= 2, "at most {most} disk reads in flight:\n{log}");

        // Metadata over TCP too.
        c.exec_ok(1, "mkdir /d")?;
        c.exec_ok(1, "write /d/x hello")?;
        let ls = c.exec_ok(2, "ls /d")?.text();
        assert!(ls.contains('x'), "ls /d on n2: {ls:?}");
        c.exec_ok(2, "rm /d/x")?;
        c.exec_ok(2, "rmdir /d")?;
        let out = c.exec(1, "cat /d/x")?;
        assert!(!out.is_ok(), "cat of a removed file succeeded: {out:?}");

        // No mmap path in the network baseline.
        let out = c.exec(2, "mmap-read /f")?;
        let msg = out
            .error_message()
            .unwrap_or_else(|| panic!("mmap-read succeeded in net mode: {out:?}"));
        assert!(msg.contains("not supported"), "mmap-read error: {msg:?}");

        let rpc = c.exec_ok(2, "bench rpc 50")?.text();
        assert!(rpc.contains("over tcp: n=50 "), "bench rpc: {rpc:?}");
        Ok(())
    });
}

/// Close-to-open: a reader that opens after the writer closed sees the new
/// bytes, even though it cached the old ones.
#[test]
fn net_mode_close_to_open() {
    with_cluster(opts("net-cto"), |c| {
        c.exec_ok(1, "write /c old-contents")?;
        assert_eq!(
            c.exec_ok(2, "cat /c")?.lines,
            vec!["old-contents".to_string()]
        );
        c.exec_ok(1, "write /c new-contents")?;
        assert_eq!(
            c.exec_ok(2, "cat /c")?.lines,
            vec!["new-contents".to_string()]
        );
        // fio over TCP: a small write job, then the file reads back.
        let out = c
            .exec_ok(
                1,
                "fio --name=w --rw=write --bs=64k --size=512k --filename=/j --ioengine=psync",
            )?
            .text();
        assert!(
            out.contains("RESULT {"),
            "fio printed no RESULT line: {out}"
        );
        let (_, size) = sum(c, 2, "/j")?;
        assert_eq!(size, 512 * 1024, "n2 sees the size fio wrote on n1");
        Ok(())
    });
}

/// A dead directory is a clear error after the RPC timeout, not a hang.
#[test]
fn net_mode_directory_killed() {
    with_cluster(
        opts("net-killdir").append_extra("rpc_timeout_ms=3000"),
        |c| {
            c.exec_ok(1, "ls /")?;
            c.kill_directory()?;
            let out = c.exec_timeout(1, b"cat /hello.txt", Duration::from_secs(40))?;
            let msg = out
                .error_message()
                .unwrap_or_else(|| panic!("cat succeeded without a directory: {out:?}"));
            assert!(
                msg.contains("directory unavailable"),
                "unexpected error: {msg:?}"
            );
            c.exec_timeout(1, b"uptime", Duration::from_secs(30))?
                .into_result()?;
            Ok(())
        },
    );
}

#[test]
fn a_node_that_left_is_no_longer_served() {
    with_cluster(opts("net-left"), |c| {
        c.exec_ok(2, "write /from2 hello")?; // node 2's link is connected
        c.exec_ok(1, "cat /from2")?;
        let out = c.exec_ok(2, "shutdown")?;
        assert!(out.closed, "node 2's console still open after shutdown");
        c.wait_exit("node2", Duration::from_secs(30))?;
        // The directory drops node 2's connection and closes the link: a
        // program on net2.sock now gets resets, not a file server.
        let line = c.wait_log(
            "dir",
            "net: link to node 2: node is not up: connection reset, link closed",
            Duration::from_secs(30),
        )?;
        assert!(line.contains("connections refused"), "{line}");
        // Node 1's link is untouched.
        c.exec_ok(1, "write /from1 still")?;
        c.exec_ok(1, "cat /from2")?;
        let log = c.log("dir");
        assert!(
            !log.contains("net: link to node 1: node is not up"),
            "node 1's link was closed: {log}"
        );
        Ok(())
    });
}

/// A task's metadata calls yield over TCP too: eight
/// varmail threads on one node have several creates, opens, fsyncs and
/// deletes in flight on the one connection at once, and every operation
/// completes with its answer (the connection's order kept).
#[test]
fn net_mode_metadata_calls_are_in_flight_together() {
    let dir = onecopy_tests::unique_run_dir("net-meta-img").expect("run dir");
    std::fs::create_dir_all(&dir).expect("run dir");
    let image = dir.join("apps.img");
    onecopy_tests::mkfs_datasets(&image, &["varmail:1m"]).expect("mkfs --dataset");
    let opts = opts("net-meta")
        .nodes(1)
        .disk(&image)
        .cmd_timeout(Duration::from_secs(300));
    with_cluster(opts, |c| {
        let text = c
            .exec_ok(1, "app varmail --ops 200 --threads 8 --seed 1")?
            .text();
        let line = text
            .lines()
            .find_map(|l| l.trim_start().strip_prefix("RESULT "))
            .unwrap_or_else(|| panic!("no RESULT line: {text}"));
        let v: serde_json::Value = serde_json::from_str(line).expect("RESULT json");
        assert_eq!(v["mode"], "net", "{v}");
        assert_eq!(v["operations"].as_u64(), Some(200), "{v}");
        let most = v["meta_max_in_flight"].as_u64().unwrap_or(0);
        assert!(most > 1, "metadata calls in flight together: {most}: {v}");
        // The node still works synchronously afterwards.
        let out = c.exec_ok(1, "ls /apps/varmail")?;
        assert!(!out.text().is_empty());
        Ok(())
    });
    let _ = std::fs::remove_dir_all(&dir);
}

/// The directory's QEMU stopped (SIGSTOP) past the nodes' RPC timeout,
/// then resumed: calls made meanwhile fail with a clear error within the
/// timeout, and once it runs again the nodes reconnect on their own: the
/// first calls after the resume succeed, and nothing synced is lost.
#[test]
fn net_mode_reconnects_after_the_directory_was_paused() {
    const RPC_MS: u64 = 4000;
    let o = opts("net-pause")
        .nodes(2)
        .append_extra(&format!("rpc_timeout_ms={RPC_MS}"));
    with_cluster(o, |c| {
        let size = 256 * 1024u64;
        let want = (pattern_crc32(size), size);
        c.exec_ok(1, "fill /f 256k")?;
        c.exec_ok(1, "sync")?;
        c.exec_ok(1, "write /s synced")?;
        c.exec_ok(1, "sync")?;
        assert_eq!(sum(c, 2, "/f")?, want, "n2 sum /f"); // node 2's link is up
        let rpc = Duration::from_millis(RPC_MS);

        let stopped = Stopped::new(c, Instance::Dir)?;
        let at = Instant::now();
        // A write whose connection is up when the directory stops (its
        // data and retransmissions queue up behind the stopped peer),
        // then a read.
        fails_unavailable(c, 1, "fill /during 4m", 2 * rpc + Duration::from_secs(3))?;
        c.exec_ok(1, "cache drop")?;
        fails_unavailable(c, 1, "sum /f", 2 * rpc + Duration::from_secs(3))?;
        // Stopped well past the RPC timeout.
        thread::sleep((3 * rpc).saturating_sub(at.elapsed()));
        drop(stopped);
        let resumed = Instant::now();

        // Within a bounded time the node's calls succeed again (the first
        // ones may still find the directory's heartbeat stopped: they
        // fail as before, with the same clear error), and read what was
        // synced before the stop.
        let back = Duration::from_secs(10);
        let first = loop {
            let out = c.exec_timeout(1, b"sum /f", back + Duration::from_secs(20))?;
            if out.is_ok() {
                break parse_sum(&out.text())
                    .ok_or_else(|| fail(format!("n1: sum printed no crc: {out:?}")))?;
            }
            let msg = out.error_message().unwrap_or_default();
            if !msg.contains("directory unavailable") || resumed.elapsed() > back {
                return Err(fail(format!(
                    "n1: sum /f still fails {} ms after the directory resumed: {msg:?}",
                    resumed.elapsed().as_millis()
                )));
            }
            thread::sleep(Duration::from_millis(200));
        };
        eprintln!(
            "net-pause: n1's calls succeed again {} ms after the resume",
            resumed.elapsed().as_millis()
        );
        assert_eq!(first, want, "n1 sum /f after the resume");
        c.exec_ok(1, "write /after kept")?;
        c.exec_ok(1, "sync")?;
        let ls = c.exec_ok(1, "ls /")?.text();
        for name in ["f", "s", "after"] {
            assert!(
                ls.lines().any(|l| l.split_whitespace().any(|w| w == name)),
                "n1 ls / lacks {name}: {ls}"
            );
        }
        assert_eq!(c.exec_ok(1, "cat /s")?.lines, vec!["synced".to_string()]);
        c.exec_ok(2, "cache drop")?;
        assert_eq!(sum(c, 2, "/f")?, want, "n2 sum /f after the resume");
        assert_eq!(c.exec_ok(2, "cat /after")?.lines, vec!["kept".to_string()]);
        let took = resumed.elapsed();
        assert!(
            took < Duration::from_secs(30),
            "the calls after the resume took {} ms",
            took.as_millis()
        );
        Ok(())
    });
}

/// The directory's side: node 2's QEMU stopped (SIGSTOP) past the
/// heartbeat timeout is declared failed, and the directory drops its
/// connection and closes the link; resumed (SIGCONT), node 2 rejoins and
/// connects again within a bounded time: the directory keeps no dead
/// connection that would refuse it. Node 1 is served all along. `fence=0`:
/// with fencing on, the fencer kills the failed node's QEMU instead.
#[test]
fn net_mode_a_paused_node_reconnects_after_it_was_declared_failed() {
    let o = opts("net-nodepause")
        .nodes(2)
        .append_extra("hb_timeout_ms=1000 rpc_timeout_ms=3000 fence=0");
    with_cluster(o, |c| {
        c.exec_ok(2, "write /from2 before")?;
        c.exec_ok(2, "sync")?;
        let stopped = Stopped::new(c, Instance::Node(2))?;
        c.wait_log("dir", "node 2 failed", Duration::from_secs(20))?;
        c.wait_log(
            "dir",
            "net: link to node 2: node is not up: connection reset",
            Duration::from_secs(20),
        )?;
        c.exec_ok(1, "write /from1 meanwhile")?;
        c.exec_ok(1, "sync")?;
        assert_eq!(
            c.exec_ok(1, "cat /from2")?.lines,
            vec!["before".to_string()]
        );
        thread::sleep(Duration::from_secs(2));
        drop(stopped);
        let resumed = Instant::now();

        // Its first calls may fail (it learns it was declared failed and
        // rejoins); within a bounded time they succeed.
        let back = Duration::from_secs(15);
        loop {
            let out = c.exec_timeout(2, b"cat /from1", back + Duration::from_secs(20))?;
            if out.is_ok() {
                assert_eq!(out.lines, vec!["meanwhile".to_string()], "n2 cat /from1");
                break;
            }
            let msg = out.error_message().unwrap_or_default().to_string();
            if resumed.elapsed() > back {
                return Err(fail(format!(
                    "n2: cat /from1 still fails {} ms after node 2 resumed: {msg:?}",
                    resumed.elapsed().as_millis()
                )));
            }
            thread::sleep(Duration::from_millis(200));
        }
        eprintln!(
            "net-nodepause: n2's calls succeed again {} ms after the resume",
            resumed.elapsed().as_millis()
        );
        c.exec_ok(2, "write /from2 after")?;
        c.exec_ok(2, "sync")?;
        assert_eq!(c.exec_ok(1, "cat /from2")?.lines, vec!["after".to_string()]);
        let ls = c.exec_ok(2, "ls /")?.text();
        assert!(ls.contains("from1"), "n2 ls /: {ls}");
        c.exec_ok(1, "write /from1 still")?;
        Ok(())
    });
}
