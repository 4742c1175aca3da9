//! Integration test of the doorbells: `qemu-run.sh --doorbell
//! on` starts our ivshmem server before the instances and gives each one
//! `-device ivshmem-doorbell`; the kernels enable the local APIC and MSI-X,
//! read their peer id (IVPosition) and publish it in the region's doorbell
//! table; a node rings the directory once it has published.
//!
//! ```text
//! cargo test -p onecopy-tests --test doorbell -- --test-threads=1
//! ```

use std::collections::BTreeSet;
use std::fs;
use std::time::Duration;

use onecopy_tests::peers::{boot_peer, shm_path, table_peer, wait_until};
use onecopy_tests::shell::{parse_sum, pattern_crc32, Stats};
use onecopy_tests::{with_cluster, Cluster, ClusterOpts, Error};

const CTL: &str = env!("CARGO_BIN_EXE_onecopy-ctl");

fn fail(msg: String) -> Error {
    Error::Usage(msg)
}

#[test]
fn doorbells_peer_ids_removal_and_cleanup() {
    with_cluster(
        ClusterOpts::new("doorbell")
            .ctl(CTL)
            .nodes(2)
            .doorbell(true),
        |c| {
            let run = c.run_dir().to_path_buf();
            if !c.launch_output().contains("doorbells: ivshmem server pid") {
                return Err(fail(format!(
                    "the launcher did not start the ivshmem server:\n{}",
                    c.launch_output()
                )));
            }
            // Boot lines: one distinct peer id per instance.
            let peers = [
                boot_peer(c, "dir")?,
                boot_peer(c, "node1")?,
                boot_peer(c, "node2")?,
            ];
            let distinct: BTreeSet<u16> = peers.iter().copied().collect();
            if distinct.len() != 3 {
                return Err(fail(format!("peer ids not distinct: {peers:?}")));
            }
            // The region's map (index 0 = directory, K = node K) matches.
            let shm = shm_path(c)?;
            wait_until(
                "the doorbell table to hold every boot peer id",
                Duration::from_secs(10),
                || (0..3).all(|i| table_peer(&shm, i) == Some(peers[i])),
            )?;
            // The nodes' announcements reached the directory.
            c.wait_log(
                "dir",
                r"doorbell: first doorbell received",
                Duration::from_secs(10),
            )?;
            // The server saw every peer connect.
            let log_path = run.join("ivshmem.log");
            let server_log = || fs::read_to_string(&log_path).unwrap_or_default();
            for p in peers {
                if !server_log().contains(&format!("peer {p} connected")) {
                    return Err(fail(format!(
                        "ivshmem.log lacks 'peer {p} connected':\n{}",
                        server_log()
                    )));
                }
            }
            // The directory's disk signals completions through MSI-X: a
            // cold read makes the directory halt for its page fills until
            // the disk's interrupt wakes it.
            c.wait_log(
                "dir",
                r"completions by interrupt \(MSI-X vector 53\)",
                Duration::from_secs(10),
            )?;
            c.exec_ok(1, "fill /cold 256k")?;
            c.exec_ok(1, "sync")?;
            c.exec_ok(1, "cache drop")?;
            let out = c.exec_ok(1, "sum /cold")?;
            if parse_sum(&out.text()) != Some((pattern_crc32(256 * 1024), 256 * 1024)) {
                return Err(fail(format!("sum /cold: {:?}", out.lines)));
            }
            c.wait_log(
                "dir",
                r"disk: completion interrupt woke the directory",
                Duration::from_secs(10),
            )?;
            // Kill node 2: the server announces its removal; node 1 works on.
            c.kill_node(2)?;
            let removed = format!("peer {} removed", peers[2]);
            wait_until(
                &format!("'{removed}' in {}", log_path.display()),
                Duration::from_secs(10),
                || server_log().contains(&removed),
            )?;
            c.exec_ok(1, "write /doorbell.txt rung and answered")?;
            let out = c.exec_ok(1, "cat /doorbell.txt")?;
            if out.lines != ["rung and answered"] {
                return Err(fail(format!("cat after the kill: {:?}", out.lines)));
            }
            // Stop: nothing of the run is left (QEMUs, wrappers, server),
            // nor its socket, pid file or shared region.
            c.stop()?;
            let left = c.run().processes();
            if !left.is_empty() {
                return Err(fail(format!("processes left after stop: {left:?}")));
            }
            for f in ["ivshmem.sock", "ivshmem.pid"] {
                if run.join(f).exists() {
                    return Err(fail(format!("{f} left after stop")));
                }
            }
            if shm.exists() {
                return Err(fail(format!("{} left after stop", shm.display())));
            }
            if !server_log().contains("stopped by SIGTERM") {
                return Err(fail(format!(
                    "the server did not stop cleanly:\n{}",
                    server_log()
                )));
            }
            Ok(())
        },
    );
}

/// `--doorbell off` is today's behaviour: ivshmem-plain, no server;
/// `bench doorbell` says "not supported".
#[test]
fn doorbell_off_uses_ivshmem_plain() {
    with_cluster(
        ClusterOpts::new("doorbell-off")
            .ctl(CTL)
            .nodes(1)
            .doorbell(false),
        |c| {
            c.wait_log("dir", r"ivshmem-plain at", Duration::from_secs(10))?;
            // Without the local APIC the disk is polled.
            c.wait_log("dir", r"completions by polling", Duration::from_secs(10))?;
            if c.launch_output().contains("ivshmem server") || c.log("dir").contains("doorbell:") {
                return Err(fail("doorbell pieces active with --doorbell off".into()));
            }
            c.exec_ok(1, "write /plain.txt still polling")?;
            let out = c.exec_ok(1, "cat /plain.txt")?;
            if out.lines != ["still polling"] {
                return Err(fail(format!("cat: {:?}", out.lines)));
            }
            let out = c.exec(1, "bench doorbell 10")?;
            let msg = out.error_message().unwrap_or_default();
            if !msg.contains("not supported") {
                return Err(fail(format!("bench doorbell: {out:?}")));
            }
            Ok(())
        },
    );
}

/// The console keeps up with a tickless kernel: a 4 KiB line (the shell's
/// longest) typed at node 1's prompt is answered within 5 s (it takes
/// about 0.1 s; when the UART's receive interrupt was lost, the node read
/// its console once per housekeeping beat and such a line took 10 to 40
/// s). Three rounds, so a wakeup lost now and then is caught too.
#[test]
fn a_4k_console_line_is_answered_promptly_with_doorbells() {
    const LINE: usize = 4096;
    const BOUND: Duration = Duration::from_secs(5);
    with_cluster(
        ClusterOpts::new("doorbell-console")
            .ctl(CTL)
            .nodes(1)
            .doorbell(true),
        |c| {
            for round in 0..3 {
                let prefix = format!("write /long{round}.txt ");
                let body: String = (0..LINE - prefix.len())
                    .map(|i| char::from(b'a' + ((i + round) % 26) as u8))
                    .collect();
                let started = std::time::Instant::now();
                let out = c
                    .exec_timeout(1, format!("{prefix}{body}").as_bytes(), BOUND)
                    .map_err(|e| {
                        fail(format!(
                            "a {LINE}-byte line was not answered within {BOUND:?} \
                             (round {round}): {e}"
                        ))
                    })?
                    .into_result()?;
                eprintln!(
                    "round {round}: a {LINE}-byte line answered in {:?}",
                    started.elapsed()
                );
                drop(out);
                let out = c.exec_ok(1, &format!("cat /long{round}.txt"))?;
                if out.lines != [body.as_str()] {
                    return Err(fail(format!(
                        "cat /long{round}.txt: {} lines, {} bytes, expected the {} written",
                        out.lines.len(),
                        out.text().len(),
                        body.len()
                    )));
                }
            }
            Ok(())
        },
    );
}

/// Node 1 writes /f (64 KiB), node 2 maps its 16 pages (and reads them
/// right), then node 1 reclaims them with `bench inv` while node 2 idles
/// at its prompt. Node 2's `cache stats` from before the reclaim.
fn node2_maps_then_node1_reclaims(c: &mut Cluster) -> Result<Stats, Error> {
    c.wait_log(
        "node2",
        r"node sleeps on doorbells",
        Duration::from_secs(20),
    )?;
    c.exec_ok(1, "fill /f 64k")?;
    let want = Some((pattern_crc32(65536), 65536));
    let got = c.exec_ok(2, "sum /f")?.text();
    if parse_sum(&got) != want {
        return Err(fail(format!("node 2 sum /f: {got:?}, want {want:?}")));
    }
    let before = c.stats(2, "cache stats")?;
    let out = c.exec_ok(1, "bench inv /f")?;
    if !out.text().contains("invalidate 1 page: n=16 ") {
        return Err(fail(format!("bench inv: {:?}", out.lines)));
    }
    Ok(before)
}

/// The node side: a halted sharer is woken by the directory's doorbell on
/// the notify vector when its page is invalidated (with `lazy_inv=0`: else
/// the invalidation is taken without waking it, see the next test); rings
/// to a busy directory are suppressed; `bench doorbell` times the round
/// trip.
#[test]
fn a_halted_sharer_is_woken_by_a_notice_and_busy_rings_are_suppressed() {
    use userland::stats::keys::cache as k;
    with_cluster(
        ClusterOpts::new("doorbell-node")
            .ctl(CTL)
            .nodes(2)
            .doorbell(true)
            .append_extra("lazy_inv=0"),
        |c| {
            // Every DIR_INV rings the idle node 2 on the notify vector.
            let before = node2_maps_then_node1_reclaims(c)?;
            if before.get(k::DOORBELLS).starts_with("off") {
                return Err(fail(format!("doorbells off on node 2:\n{}", before.text)));
            }
            let n0 = before.num(k::DOORBELL_RECEIVED_NOTIFY);
            let s0 = before.num(k::DOORBELL_SLEEPS);
            let after = c.stats(2, "cache stats")?;
            let n1 = after.num(k::DOORBELL_RECEIVED_NOTIFY);
            if n1 <= n0 || after.num(k::INVALIDATIONS_RECEIVED) < 16 {
                return Err(fail(format!(
                    "node 2 not woken on the notify vector ({n0} -> {n1}):\n{}",
                    after.text
                )));
            }
            if after.num(k::DOORBELL_SLEEPS) <= s0 {
                return Err(fail(format!("node 2 never slept:\n{}", after.text)));
            }
            // A busy directory (back-to-back requests) is awake: the rings
            // of most requests are suppressed, and their fenced checks,
            // deferred, are mostly dropped (the directory took the request
            // first): not every request paid a fence.
            let s0 = c.stats(1, "cache stats")?;
            c.exec_ok(1, "bench ring 2000")?;
            let s1 = c.stats(1, "cache stats")?;
            let (sup0, sup1) = (
                s0.num(k::DOORBELL_SUPPRESSED),
                s1.num(k::DOORBELL_SUPPRESSED),
            );
            if sup1 < sup0 + 100 {
                return Err(fail(format!(
                    "suppressed rings {sup0} -> {sup1} over 2000 requests"
                )));
            }
            let fenced = s1
                .num(k::DOORBELL_FENCED_CHECKS)
                .saturating_sub(s0.num(k::DOORBELL_FENCED_CHECKS));
            if fenced >= 2000 {
                return Err(fail(format!(
                    "{fenced} fenced suppression checks over 2000 requests: none was dropped"
                )));
            }
            let out = c.exec_ok(1, "bench doorbell 50")?;
            if !out.text().contains("doorbell round trip: n=50 ") {
                return Err(fail(format!("bench doorbell: {:?}", out.lines)));
            }
            Ok(())
        },
    );
}

/// Lazy invalidation: a sharer that sleeps with nothing in flight is
/// invalidated without a doorbell (the directory takes its DIR_INVs as
/// acknowledged), and when it wakes it tears the mappings down before it
/// reads again: it sees the owner's new data, not the frames the owner
/// reused meanwhile.
#[test]
fn a_quiet_sharer_is_invalidated_without_a_wakeup_and_then_reads_new_data() {
    use userland::stats::keys::cache as k;
    with_cluster(
        ClusterOpts::new("doorbell-quiet")
            .ctl(CTL)
            .nodes(2)
            .doorbell(true),
        |c| {
            let want = Some((pattern_crc32(65536), 65536));
            let before = node2_maps_then_node1_reclaims(c)?;
            let n0 = before.num(k::DOORBELL_RECEIVED_NOTIFY);
            c.wait_log(
                "dir",
                r"invalidations taken from quietly sleeping sharers without waking them",
                Duration::from_secs(10),
            )?;
            // Node 1 reuses the freed frames for another file, and
            // rewrites /f; node 2 must see neither through old mappings.
            c.exec_ok(1, "fill /g 64k")?;
            c.exec_ok(1, "write /f hello")?;
            let after = c.stats(2, "cache stats")?;
            let n1 = after.num(k::DOORBELL_RECEIVED_NOTIFY);
            if n1 >= n0 + 16 {
                return Err(fail(format!(
                    "node 2 was rung for every invalidation ({n0} -> {n1}):\n{}",
                    after.text
                )));
            }
            let cat = c.exec_ok(2, "cat /f")?.text();
            if cat.trim() != "hello" {
                return Err(fail(format!("node 2 cat /f after the rewrite: {cat:?}")));
            }
            let got = c.exec_ok(2, "sum /g")?.text();
            if parse_sum(&got) != want {
                return Err(fail(format!("node 2 sum /g: {got:?}, want {want:?}")));
            }
            Ok(())
        },
    );
}
