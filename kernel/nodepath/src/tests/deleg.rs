//! Delegated ownership, node side (`singlecopy/deleg.rs`): a node alone
//! with a file writes its whole pages with no request per page; a reader
//! elsewhere recalls the range and reads every byte; a failed holder's
//! pages are written back from its list; a directory crash never shows a
//! holder's unwritten pages as zeros under the recorded size; reclaim,
//! fsync, truncate and removal give the range back or cut it first.

use fabric::config::Mode;
use osapi::io::OpenFlags;
use osapi::keys::cache as keys;

use crate::node::Node;
use crate::rig::{HostEnv, Rig, RigConfig};
use crate::singlecopy::DelegCounts;
use crate::tests::{create, disk_bytes, pattern, read_file, stat_value, write_file};

use fabric::PAGE_SIZE as PAGE;

fn rig(nodes: u32) -> Rig {
    let mut cfg = RigConfig::new(nodes, Mode::Strong);
    cfg.delegation = true;
    Rig::new(cfg)
}

fn counts(n: &mut Node<HostEnv>) -> DelegCounts {
    n.vfs
        .data_path()
        .single_copy()
        .map(|s| s.deleg_counts())
        .unwrap_or_default()
}

fn free(n: &mut Node<HostEnv>) -> usize {
    n.vfs
        .data_path()
        .single_copy()
        .and_then(|s| s.coherence())
        .map_or(0, |c| c.cache.free_frames())
}

fn misses(n: &Node<HostEnv>) -> u64 {
    stat_value(n, keys::MISSES).parse().unwrap()
}

/// The directory restarts over the same disk (what it had not written
/// is lost); every node rejoins.
fn restart(rig: &Rig, nodes: u32) {
    rig.restart_dir();
    for _ in 0..3 {
        for j in 1..=nodes {
            rig.node(j).check();
        }
        rig.idle(100);
    }
}

#[test]
fn a_holder_writes_with_no_request_per_page_and_a_reader_elsewhere_recalls() {
    let rig = rig(2);
    let data = pattern(64 * PAGE, 3);
    write_file(&mut rig.node(1), "/f", &data);
    let c = counts(&mut rig.node(1));
    assert_eq!((c.granted, c.placed), (1, 64), "{c:?}");
    assert_eq!(misses(&rig.node(1)), 0, "no page request for a placed page");
    // Node 2 reads: its first READ waits for one recall, then every byte.
    assert_eq!(read_file(&mut rig.node(2), "/f"), data);
    let d = rig.sh.dir.borrow().deleg_stats();
    assert_eq!(
        (d.granted, d.recalled, d.returned, d.pages),
        (1, 1, 1, 64),
        "{d:?}"
    );
    assert_eq!(counts(&mut rig.node(1)).recalled, 1);
    // A range recalled is not asked for again: a rewrite goes page by page.
    write_file(&mut rig.node(1), "/f", &pattern(64 * PAGE, 4));
    assert_eq!(counts(&mut rig.node(1)).granted, 1);
    assert_eq!(read_file(&mut rig.node(2), "/f"), pattern(64 * PAGE, 4));
}

#[test]
fn without_delegation_every_whole_page_is_a_request() {
    let rig = Rig::new(RigConfig::new(2, Mode::Strong));
    write_file(&mut rig.node(1), "/f", &pattern(64 * PAGE, 3));
    assert_eq!(misses(&rig.node(1)), 64);
    assert_eq!(counts(&mut rig.node(1)).granted, 0);
}

#[test]
fn a_failed_holders_pages_are_written_back_from_its_list() {
    let rig = rig(3);
    let data = pattern(10 * PAGE + 123, 5);
    write_file(&mut rig.node(1), "/f", &data);
    assert_eq!(counts(&mut rig.node(1)).placed, 10);
    rig.freeze(1);
    for _ in 0..10 {
        rig.sh.step(0, 4_000_000_000);
        rig.idle(50);
        if !rig.sh.dir.borrow().is_member(1) {
            break;
        }
    }
    assert!(!rig.sh.dir.borrow().is_member(1), "node 1 declared failed");
    assert_eq!(read_file(&mut rig.node(2), "/f"), data);
    assert_eq!(disk_bytes(&rig, "/f"), data);
}

#[test]
fn a_directory_crash_never_shows_a_holders_unwritten_pages_as_zeros() {
    let rig = rig(2);
    // Written whole under a delegation, its size published, never synced.
    let data = pattern(16 * PAGE, 7);
    write_file(&mut rig.node(1), "/f", &data);
    assert_eq!(counts(&mut rig.node(1)).placed, 16);
    restart(&rig, 2);
    let got = read_file(&mut rig.node(2), "/f");
    assert!(
        got.is_empty() || got == data,
        "{} bytes read after the crash, {} of them zeros",
        got.len(),
        got.iter().filter(|&&b| b == 0).count()
    );
}

#[test]
fn an_fsync_gives_the_range_back_and_the_bytes_are_durable() {
    let rig = rig(2);
    let data = pattern(20 * PAGE, 9);
    {
        let mut n = rig.node(1);
        let fd = n.open("/f", create()).unwrap();
        assert_eq!(n.write(fd, &data).unwrap(), data.len());
        n.fsync(fd).unwrap();
        n.close(fd).unwrap();
        assert_eq!(counts(&mut n).returned, 1);
    }
    restart(&rig, 2);
    assert_eq!(read_file(&mut rig.node(2), "/f"), data);
}

#[test]
fn reclaim_gives_the_range_back_before_its_pages_go() {
    let rig = rig(2);
    let data = pattern(40 * PAGE, 11);
    write_file(&mut rig.node(1), "/f", &data);
    rig.node(1).cache_drop().unwrap();
    assert_eq!(counts(&mut rig.node(1)).returned, 1);
    assert_eq!(read_file(&mut rig.node(2), "/f"), data);
    assert_eq!(disk_bytes(&rig, "/f"), data);
}

#[test]
fn the_holders_truncate_and_removal_cut_its_pages() {
    let rig = rig(2);
    let data = pattern(12 * PAGE, 13);
    write_file(&mut rig.node(1), "/f", &data);
    let before = free(&mut rig.node(1));
    {
        let mut n = rig.node(1);
        let fd = n.open("/f", OpenFlags::default()).unwrap();
        n.truncate(fd, 5 * PAGE as u64 + 10).unwrap();
        n.close(fd).unwrap();
    }
    assert_eq!(read_file(&mut rig.node(2), "/f"), data[..5 * PAGE + 10]);
    rig.node(1).unlink("/f").unwrap();
    rig.idle(50);
    assert!(free(&mut rig.node(1)) > before, "frames freed");
    assert!(rig.node(2).stat("/f").is_err());
}

#[test]
fn another_nodes_removal_cuts_the_range() {
    let rig = rig(2);
    write_file(&mut rig.node(1), "/f", &pattern(12 * PAGE, 15));
    let before = free(&mut rig.node(1));
    rig.node(2).unlink("/f").unwrap();
    rig.idle(50);
    assert!(free(&mut rig.node(1)) >= before + 12, "frames freed");
    // The file's number may be reused: a new file reads its own bytes.
    write_file(&mut rig.node(2), "/g", &pattern(3 * PAGE, 17));
    assert_eq!(read_file(&mut rig.node(1), "/g"), pattern(3 * PAGE, 17));
}
