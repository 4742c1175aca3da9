//! Host tests of what a node failure loses in the single-copy modes: a
//! failed owner's frames live in the shared region, which survived it, so
//! the directory writes them back before tearing its pages down; and a
//! node that lost its private copies forgets the size they had extended
//! the file to.

use fabric::config::Mode;
use osapi::io::OpenFlags;

use crate::rig::Rig;
use crate::rig::RigConfig;
use crate::tests::{create, disk_bytes, pattern, read_file, stat_value, write_file};
use osapi::keys::cache as keys;

use fabric::PAGE_SIZE as PAGE;

/// `got` is `want`; else the first byte that differs (no dump of both).
#[track_caller]
fn same(got: &[u8], want: &[u8], what: &str) {
    if got == want {
        return;
    }
    let at = got.iter().zip(want).position(|(a, b)| a != b);
    panic!(
        "{what}: {} bytes, want {}; first difference at {at:?} (zero bytes read: {})",
        got.len(),
        want.len(),
        got.iter().filter(|&&b| b == 0).count()
    );
}

/// The bytes of `paths` on the disk, once the directory shut down.
fn disk_files(rig: &Rig, paths: &[&str]) -> Vec<Vec<u8>> {
    let mut fs = rig.sh.dir.borrow_mut().shutdown(&*rig.sh.mem).unwrap();
    paths
        .iter()
        .map(|p| {
            let a = fs.lookup(p).unwrap();
            let mut buf = vec![0u8; a.size as usize];
            let n = fs.read(a.ino, 0, &mut buf).unwrap();
            buf.truncate(n);
            buf
        })
        .collect()
}

/// Let the directory's heartbeat timeout pass for frozen node `k` and
/// wait until it declares `k` failed.
fn until_failed(rig: &Rig, k: u32) {
    for _ in 0..10 {
        // One step of more than the heartbeat timeout (3 s), then a few
        // passes to settle the teardown.
        rig.sh.step(0, 4_000_000_000);
        rig.idle(50);
        if !rig.sh.dir.borrow().is_member(k) {
            return;
        }
    }
    panic!("node {k} was never declared failed");
}

#[test]
fn a_failed_strong_owners_unsynced_writes_are_written_back() {
    let rig = Rig::new(RigConfig::new(3, Mode::Strong));
    // A small new file, written and closed, never synced: its one page is
    // in node 1's frame, its size published.
    let small = b"written on node 1, never synced\n".to_vec();
    write_file(&mut rig.node(1), "/small", &small);
    // A synced file node 1 then overwrites in place (its frames, filled
    // from disk) and extends, without a sync.
    let old = pattern(3 * PAGE, 4);
    write_file(&mut rig.node(1), "/g", &old);
    {
        let mut n = rig.node(1);
        let fd = n.open("/g", OpenFlags::default()).unwrap();
        n.fsync(fd).unwrap();
        n.close(fd).unwrap();
        n.cache_drop().unwrap();
    }
    let mut want = old.clone();
    want[100..200].fill(0xAB);
    want.extend_from_slice(&[0xCD; 300]);
    {
        let mut n = rig.node(1);
        let fd = n.open("/g", OpenFlags::default()).unwrap();
        let mut head = vec![0u8; 3 * PAGE];
        assert_eq!(n.read(fd, &mut head).unwrap(), head.len()); // owns the frames
        n.seek(fd, 100).unwrap();
        n.write(fd, &[0xAB; 100]).unwrap();
        n.seek(fd, 3 * PAGE as u64).unwrap();
        n.write(fd, &[0xCD; 300]).unwrap();
        n.close(fd).unwrap();
    }
    // Node 2 saw the writes before the failure (strong mode).
    same(&read_file(&mut rig.node(2), "/small"), &small, "read");
    rig.node(2).cache_drop().unwrap();
    rig.freeze(1); // node 1 dies
    until_failed(&rig, 1);
    same(&read_file(&mut rig.node(3), "/small"), &small, "read");
    same(&read_file(&mut rig.node(2), "/g"), &want, "read");
    let disk = disk_files(&rig, &["/small", "/g"]);
    same(&disk[0], &small, "/small on disk");
    same(&disk[1], &want, "/g on disk");
}

#[test]
fn a_failed_relaxed_owners_frame_writes_are_written_back() {
    // Relaxed mode: a write to a page this node holds in its own frame
    // goes into the frame (visible to its sharers), not a private copy;
    // the frame survives the node, and the directory writes it back.
    let rig = Rig::new(RigConfig::new(2, Mode::Relaxed));
    let old = pattern(2 * PAGE, 6);
    write_file(&mut rig.node(1), "/f", &old);
    {
        let mut n = rig.node(1);
        let fd = n.open("/f", OpenFlags::default()).unwrap();
        n.fsync(fd).unwrap();
        n.close(fd).unwrap();
        n.cache_drop().unwrap();
        let fd = n.open("/f", OpenFlags::default()).unwrap();
        let mut all = vec![0u8; 2 * PAGE];
        assert_eq!(n.read(fd, &mut all).unwrap(), all.len());
        n.seek(fd, 10).unwrap();
        n.write(fd, &[0xEE; 20]).unwrap();
        // No close: a close would write back.
    }
    let mut want = old.clone();
    want[10..30].fill(0xEE);
    rig.freeze(1);
    until_failed(&rig, 1);
    same(&read_file(&mut rig.node(2), "/f"), &want, "read");
    same(&disk_bytes(&rig, "/f"), &want, "disk");
}

#[test]
fn an_unsynced_strong_file_is_never_read_as_zeros_after_its_owner_fails() {
    // Several small files of a failed owner: each reads back either as
    // written (its size was published) or not at all; never as zeros.
    let rig = Rig::new(RigConfig::new(2, Mode::Strong));
    let files: Vec<(String, Vec<u8>)> = (0..5u8)
        .map(|i| (format!("/s{i}"), pattern(50 + 700 * i as usize, i)))
        .collect();
    for (p, d) in &files {
        let mut n = rig.node(1);
        let fd = n.open(p, create()).unwrap();
        n.write(fd, d).unwrap();
        n.close(fd).unwrap();
    }
    rig.freeze(1);
    until_failed(&rig, 1);
    for (p, d) in &files {
        same(&read_file(&mut rig.node(2), p), d, p);
    }
}

/// Relaxed: node 2 appends to node 1's file in a private copy (its local
/// size past the directory's end) and is declared failed before the copy
/// went back; the rejoin drops the copy. `via_check`: the periodic
/// membership check rejoins; else the next call finds the node failed
/// and rejoins in the middle of it.
fn a_rejoin_that_lost_private_copies_forgets_their_size(via_check: bool) {
    use fabric::layout::{Header, NodeState};
    let rig = Rig::new(RigConfig::new(2, Mode::Relaxed));
    write_file(&mut rig.node(1), "/f", b"hello\n");
    // Node 1 holds the page: node 2's write copies it privately.
    same(
        &read_file(&mut rig.node(1), "/f"),
        b"hello\n",
        "node 1 reads",
    );
    let append = OpenFlags {
        append: true,
        ..OpenFlags::default()
    };
    let fd = rig.node(2).open("/f", append).unwrap();
    rig.node(2).write(fd, b"world\n").unwrap();
    assert_eq!(rig.node(2).fd_info(fd).unwrap().1, 12);
    assert_eq!(
        stat_value(&rig.node(2), keys::PRIVATE_COPIES),
        "1",
        "the append is in a private copy"
    );
    // Nobody else sees it before it is written back: nor its size.
    assert_eq!(rig.node(1).stat("/f").unwrap().size, 6, "node 1's size");
    let h = Header::new(&*rig.sh.mem, rig.sh.layout);
    h.set_node_state(2, NodeState::Failed);
    if via_check {
        rig.node(2).check();
        rig.idle(5);
        rig.node(2).check();
        assert_eq!(h.node_state(2), Some(NodeState::Up), "rejoined");
        // What every file operation reads: the directory's size.
        assert_eq!(rig.node(2).fd_info(fd).unwrap().1, 6, "size after rejoin");
        assert_eq!(rig.node(2).stat("/f").unwrap().size, 6, "stat after rejoin");
    } else {
        // A lookup is a directory call: it finds the node failed and
        // rejoins before it is sent.
        assert_eq!(rig.node(2).stat("/f").unwrap().size, 6, "stat rejoined");
        assert_eq!(h.node_state(2), Some(NodeState::Up), "rejoined");
        assert_eq!(rig.node(2).fd_info(fd).unwrap().1, 6, "size after rejoin");
    }
    same(
        &read_file(&mut rig.node(2), "/f"),
        b"hello\n",
        "read after rejoin",
    );
    // Its next append lands at the directory's end: no zeros between.
    let fd2 = rig.node(2).open("/f", append).unwrap();
    rig.node(2).write(fd2, b"again\n").unwrap();
    rig.node(2).close(fd2).unwrap();
    let _ = rig.node(2).close(fd);
    same(
        &read_file(&mut rig.node(1), "/f"),
        b"hello\nagain\n",
        "node 1",
    );
    same(&disk_bytes(&rig, "/f"), b"hello\nagain\n", "disk");
}

#[test]
fn a_rejoin_that_lost_private_copies_forgets_their_size_at_the_check() {
    a_rejoin_that_lost_private_copies_forgets_their_size(true);
}

#[test]
fn a_rejoin_that_lost_private_copies_forgets_their_size_in_a_call() {
    a_rejoin_that_lost_private_copies_forgets_their_size(false);
}

/// The per-node state word has two writers: the node stores `Joining`
/// (and `Left`), the directory `Up` and `Failed`. When the directory reads
/// `Up` for a silent node, the node restarts and stores `Joining`, and the
/// directory's `Failed` lands after it, the join is lost. The node must ask
/// again at its next membership check and be admitted in a new epoch, and
/// the cluster must read and write as before. Emulated here by the memory
/// state that race leaves: the directory declared the node failed and
/// handled it, the node's join waits unanswered, the word says `Failed`.
#[test]
fn a_join_overwritten_by_a_late_failed_is_asked_again() {
    use fabric::layout::{Header, NodeState};
    let rig = Rig::new(RigConfig::new(2, Mode::Strong));
    write_file(&mut rig.node(1), "/f", b"hello\n");
    same(
        &read_file(&mut rig.node(2), "/f"),
        b"hello\n",
        "node 2 reads",
    );
    let h = Header::new(&*rig.sh.mem, rig.sh.layout);
    let epoch = h.node_epoch(2);
    rig.freeze(2);
    until_failed(&rig, 2);
    // Node 2 comes back and asks to join while the directory is between
    // its read of the word and its store: the join waits unanswered.
    rig.set_dir_up(false);
    rig.thaw(2);
    rig.node(2).check();
    assert_eq!(h.node_state(2), Some(NodeState::Joining), "node 2 asked");
    // The directory's late store overwrites the join.
    h.set_node_state(2, NodeState::Failed);
    rig.set_dir_up(true);
    rig.idle(5);
    assert_eq!(
        h.node_state(2),
        Some(NodeState::Failed),
        "the join was lost"
    );
    rig.idle_node(2, 500_000_000);
    rig.idle(5);
    assert_eq!(h.node_state(2), Some(NodeState::Up), "node 2 asked again");
    assert!(h.node_epoch(2) > epoch, "a new epoch");
    same(
        &read_file(&mut rig.node(2), "/f"),
        b"hello\n",
        "node 2 reads again",
    );
    write_file(&mut rig.node(2), "/f", b"again\n");
    same(
        &read_file(&mut rig.node(1), "/f"),
        b"again\n",
        "node 1 sees node 2's write",
    );
}
