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
