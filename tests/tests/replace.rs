//! Integration test of a node dying and a replacement joining the running
//! cluster (the ivshmem server survives an instance dying and a
//! new one joining; peer ids are never reused): node 2's QEMU is killed,
//! `qemu-run.sh restart 2` boots a new node 2, which joins, reads files
//! correctly and is reached by invalidations (and, with doorbells, by the
//! directory's doorbells at its new peer id). Every instance's serial log,
//! the replaced node's old log included, is printed on failure.
//!
//! ```text
//! cargo test -p onecopy-tests --test replace -- --test-threads=1
//! ```

use std::fs;
use std::time::Duration;

use onecopy_tests::peers::{logged_peer, shm_path, table_peer, wait_until};
use onecopy_tests::{with_cluster, Cluster, ClusterOpts, Error, Result};
use userland::stats::keys::cache as k;

const CTL: &str = env!("CARGO_BIN_EXE_onecopy-ctl");

fn fail(msg: String) -> Error {
    Error::Usage(msg)
}

/// The one line of `sum PATH` on `node`.
fn sum(c: &mut Cluster, node: u8, path: &str) -> Result<String> {
    let out = c.exec_ok(node, &format!("sum {path}"))?;
    out.lines
        .first()
        .cloned()
        .ok_or_else(|| fail(format!("sum {path} on node {node}: no output")))
}

fn replace_node_2(doorbell: bool) -> impl FnOnce(&mut Cluster) -> Result<()> {
    move |c| {
        let old_peer = if doorbell {
            c.wait_log("node2", r"doorbell: peer id \d+", Duration::from_secs(20))?;
            Some(logged_peer(&c.log("node2")).ok_or_else(|| fail("node 2: no peer id".into()))?)
        } else {
            None
        };
        c.exec_ok(1, "fill /r 64k")?;
        let want = sum(c, 1, "/r")?;
        if sum(c, 2, "/r")? != want {
            return Err(fail("node 2 read /r wrong before the kill".into()));
        }
        c.kill_node(2)?;
        if let Some(p) = old_peer {
            let log_path = c.run_dir().join("ivshmem.log");
            let removed = format!("peer {p} removed");
            wait_until(&removed, Duration::from_secs(10), || {
                fs::read_to_string(&log_path).is_ok_and(|l| l.contains(&removed))
            })?;
        }
        // The cluster goes on without node 2.
        c.exec_ok(1, "write /while-dead.txt written while node 2 was dead")?;
        // The replacement joins.
        let out = c.restart_node(2)?;
        if !out.contains("node 2 restarted") {
            return Err(fail(format!("restart output: {out}")));
        }
        if let Some(p) = old_peer {
            // A new peer id, never a reused one, published in the region.
            let new = logged_peer(&c.log("node2"))
                .ok_or_else(|| fail("the new node 2 logged no peer id".into()))?;
            if new <= p {
                return Err(fail(format!("new node 2 has peer id {new}, old {p}")));
            }
            let shm = shm_path(c)?;
            wait_until(
                "the doorbell table to hold node 2's new peer id",
                Duration::from_secs(10),
                || table_peer(&shm, 2) == Some(new),
            )?;
        }
        // It reads what node 1 holds and what was written while it was dead.
        if sum(c, 2, "/r")? != want {
            return Err(fail("the new node 2 read /r wrong".into()));
        }
        let out = c.exec_ok(2, "cat /while-dead.txt")?;
        if out.lines != ["written while node 2 was dead"] {
            return Err(fail(format!("cat on the new node 2: {:?}", out.lines)));
        }
        // Invalidations reach it: node 2 maps node 1's 16 pages of /r, then
        // node 1 reclaims them while node 2 idles at its prompt.
        let before = c.stats(2, "cache stats")?;
        let out = c.exec_ok(1, "bench inv /r")?;
        if !out.text().contains("invalidate 1 page: n=16 ") {
            return Err(fail(format!("bench inv: {:?}", out.lines)));
        }
        let after = c.stats(2, "cache stats")?;
        let inv = after.num(k::INVALIDATIONS_RECEIVED) - before.num(k::INVALIDATIONS_RECEIVED);
        if inv < 16 {
            return Err(fail(format!(
                "the new node 2 received {inv} invalidations, not 16:\n{}",
                after.text
            )));
        }
        if doorbell {
            let n0 = before.num(k::DOORBELL_RECEIVED_NOTIFY);
            let n1 = after.num(k::DOORBELL_RECEIVED_NOTIFY);
            if n1 <= n0 {
                return Err(fail(format!(
                    "no notify doorbell reached the new node 2 ({n0} -> {n1}):\n{}",
                    after.text
                )));
            }
        }
        // And it still reads the file right (now from the disk).
        if sum(c, 2, "/r")? != want {
            return Err(fail(
                "the new node 2 read /r wrong after the reclaim".into(),
            ));
        }
        Ok(())
    }
}

#[test]
fn a_killed_node_is_replaced_doorbells_on() {
    with_cluster(
        // lazy_inv=0: the invalidations must ring the new peer id (a
        // quiet idle sharer is invalidated without a doorbell otherwise).
        ClusterOpts::new("replace-bell")
            .ctl(CTL)
            .nodes(2)
            .doorbell(true)
            .append_extra("lazy_inv=0"),
        replace_node_2(true),
    );
}

#[test]
fn a_killed_node_is_replaced_doorbells_off() {
    with_cluster(
        ClusterOpts::new("replace-plain")
            .ctl(CTL)
            .nodes(2)
            .doorbell(false),
        replace_node_2(false),
    );
}
