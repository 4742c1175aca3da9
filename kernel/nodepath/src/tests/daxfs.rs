//! `daxfs` mode on the host rig: nodes read through DaxFS's shared slot
//! cache, the directory fills each page once, writes go through the file
//! server and free the stale slots.

use fabric::config::Mode;
use osapi::keys::cache as k;

use crate::rig::{Rig, RigConfig};
use crate::tests::{pattern, read_file, stat_value, write_at, write_file};

#[test]
fn nodes_share_one_filled_copy_and_see_each_others_writes() {
    let rig = Rig::new(RigConfig::new(2, Mode::Daxfs));
    let data = pattern(5 * 4096 + 100, 7);
    write_file(&mut rig.node(1), "/f", &data);
    assert_eq!(read_file(&mut rig.node(2), "/f"), data);
    assert_eq!(stat_value(&rig.node(2), k::DAXFS_CLAIMS), "6");
    assert_eq!(stat_value(&rig.node(2), k::DAXFS_FILLS), "6");
    // Node 1 finds every page filled: hits, no claim, no new fill.
    assert_eq!(read_file(&mut rig.node(1), "/f"), data);
    assert_eq!(stat_value(&rig.node(1), k::DAXFS_CLAIMS), "0");
    let hits: u64 = stat_value(&rig.node(1), k::DAXFS_HITS).parse().unwrap();
    assert!(hits >= 6, "{hits} hits (one per page read, or more)");
    assert_eq!(stat_value(&rig.node(1), k::DAXFS_FILLS), "6");
    // No private copies.
    assert_eq!(stat_value(&rig.node(1), k::RESIDENT_PRIVATE), "0");
    // A write on node 1 is read on node 2: its page is filled again.
    write_at(&mut rig.node(1), "/f", 4096 + 10, b"changed");
    let mut want = data.clone();
    want[4106..4113].copy_from_slice(b"changed");
    assert_eq!(read_file(&mut rig.node(2), "/f"), want);
    assert_eq!(stat_value(&rig.node(2), k::DAXFS_FILLS), "7");
    // A growth past the old end (the old last page changes too).
    write_at(&mut rig.node(2), "/f", 6 * 4096, b"tail");
    let mut grown = want.clone();
    grown.resize(6 * 4096, 0);
    grown.extend_from_slice(b"tail");
    assert_eq!(read_file(&mut rig.node(1), "/f"), grown);
}

/// MH-clock's background sweep runs on the nodes, between operations and
/// at idle, one try per `SWEEP_EVERY_NS` of their time: each try advances
/// the shared hand by one window (won) or finds another node did (lost).
#[test]
fn idle_nodes_sweep_the_shared_hand() {
    use crate::private::dax::{MAX_SWEEPS_AT_ONCE, SWEEP_EVERY_NS};
    let rig = Rig::new(RigConfig::new(2, Mode::Daxfs));
    let data = pattern(3 * 4096, 1);
    write_file(&mut rig.node(1), "/f", &data);
    assert_eq!(read_file(&mut rig.node(2), "/f"), data);
    let sweeps = |k: u32| -> (u64, u64) {
        let v = stat_value(&rig.node(k), k::DAXFS_SWEEPS);
        let (w, l) = v.split_once('/').expect("won/lost");
        (w.parse().unwrap(), l.parse().unwrap())
    };
    let before = sweeps(1);
    rig.idle_node(1, 20 * SWEEP_EVERY_NS);
    let after = sweeps(1);
    let tries = (after.0 + after.1) - (before.0 + before.1);
    assert!(
        after.0 > before.0,
        "node 1 swept nothing: {before:?} -> {after:?}"
    );
    // One try per interval at most (an idle step may cover several: at
    // most MAX_SWEEPS_AT_ONCE each).
    assert!(
        tries <= 20 + MAX_SWEEPS_AT_ONCE,
        "{tries} tries in 20 intervals"
    );
    rig.idle_node(2, 5 * SWEEP_EVERY_NS);
    assert!(sweeps(2).0 > 0, "node 2 swept nothing");
}

/// The crash rule on the rig: node 1 holds a claim (PENDING, its fill
/// never asked) and a pin, then stops (its heartbeat too). A write to the
/// pinned page is answered at once and retires the stale copy; once the
/// directory failed node 1 (its heartbeat timeout) and gave its claim and
/// pin back, node 2 reads every page right. (A reader already waiting on
/// the claim goes on then too: the QEMU test `daxfs.rs` shows it.)
#[test]
fn a_failed_nodes_claim_and_pin_do_not_wedge_the_others() {
    let rig = Rig::new(RigConfig::new(3, Mode::Daxfs));
    let data = pattern(3 * 4096, 5);
    write_file(&mut rig.node(1), "/f", &data);
    let ino = rig.node(1).stat("/f").unwrap().ino;
    assert_eq!(read_file(&mut rig.node(3), "/f"), data);
    // Page 1 is cached (node 3 read it); page 0's copy is dropped by a
    // rewrite so that node 1's claim of it is a fresh one.
    write_at(&mut rig.node(3), "/f", 0, &data[..10]);
    let out = rig.node(1).cache_hold(ino, 0, false).unwrap();
    assert!(out.contains("PENDING"), "{out}");
    let out = rig.node(1).cache_hold(ino, 1, true).unwrap();
    assert!(out.contains("pinned"), "{out}");
    assert_eq!(
        rig.node(1).cache_hold(ino, 1, false),
        Err(fabric::proto::Errno::Exists),
        "a cached page cannot be claimed"
    );
    rig.freeze(1);
    write_at(&mut rig.node(3), "/f", 4096 + 5, b"new");
    let mut want = data.clone();
    want[4096 + 5..4096 + 8].copy_from_slice(b"new");
    // One step past the heartbeat timeout (3 s), then passes to settle.
    rig.sh.step(0, 4_000_000_000);
    rig.idle(50);
    assert!(!rig.sh.dir.borrow().is_member(1), "node 1 was failed");
    assert_eq!(read_file(&mut rig.node(2), "/f"), want);
    let st = rig.sh.dir.borrow().dax_stats().unwrap();
    assert_eq!(st.retired, 1, "{st:?}");
    assert!(st.reclaimed >= 2, "the claim and the pin: {st:?}");
    assert_eq!(read_file(&mut rig.node(3), "/f"), want);
}

/// `cache drop` gives back the shared slots the node filled, except one
/// another node has pinned; the next reader misses on the freed pages and
/// the directory fills them again.
#[test]
fn cache_drop_frees_the_slots_this_node_filled_but_not_a_pinned_one() {
    let rig = Rig::new(RigConfig::new(3, Mode::Daxfs));
    let data = pattern(4 * 4096, 3);
    write_file(&mut rig.node(1), "/f", &data);
    let ino = rig.node(1).stat("/f").unwrap().ino;
    assert_eq!(read_file(&mut rig.node(2), "/f"), data);
    assert_eq!(stat_value(&rig.node(2), k::DAXFS_CLAIMS), "4");
    let out = rig.node(3).cache_hold(ino, 2, true).unwrap();
    assert!(out.contains("pinned"), "{out}");
    // Node 1 filled nothing: its drop frees nothing.
    let out = rig.node(1).cache_drop().unwrap();
    assert!(out.starts_with("freed 0 "), "{out}");
    let out = rig.node(2).cache_drop().unwrap();
    assert!(
        out.starts_with("freed 3 ") && out.contains("kept 1 pinned"),
        "{out}"
    );
    assert_eq!(stat_value(&rig.node(3), k::DAXFS_FILLS), "4");
    // Node 3 claims the three freed pages again and hits the pinned one.
    let claims_before: u64 = stat_value(&rig.node(3), k::DAXFS_CLAIMS).parse().unwrap();
    assert_eq!(read_file(&mut rig.node(3), "/f"), data);
    let claims: u64 = stat_value(&rig.node(3), k::DAXFS_CLAIMS).parse().unwrap();
    assert_eq!(claims - claims_before, 3);
    assert_eq!(stat_value(&rig.node(3), k::DAXFS_FILLS), "7");
    // A second drop on node 2 still finds the pinned copy.
    let out = rig.node(2).cache_drop().unwrap();
    assert!(
        out.starts_with("freed 0 ") && out.contains("kept 1 pinned"),
        "{out}"
    );
}
