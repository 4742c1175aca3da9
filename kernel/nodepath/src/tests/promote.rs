//! Host tests of hot-page promotion over a real directory: in relaxed
//! mode a peer's page read often gets a replica that serves the reads, an
//! open after the writer's close sees the new bytes, and an owner's
//! reclaim tears the replica down; in strong mode the directory grants
//! replicas (never while a store into the frame is announced) and every
//! store revokes them first, so a write is seen at once by a node that
//! held a replica.

use fabric::config::Mode;
use fabric::proto::PageKey;
use osapi::keys;

use osapi::io::Fd;

use crate::node::Node;
use crate::pagecache::Promotion;
use crate::rig::{HostEnv, Rig, RigConfig};
use crate::tests::{pattern, read_file, stat_value, window_io, write_at, write_file};

/// Promote after more than `t` reads within a window longer than any test.
fn promote(n: &mut Node<HostEnv>, t: u32) {
    let mut k = n.cache_controls().unwrap();
    k.promotion = Promotion {
        threshold: t,
        window_ns: 3_600_000_000_000,
    };
    n.set_cache_controls(k).unwrap();
}

/// Read the whole of an open file `times` times; the last read's bytes.
fn read_n(n: &mut Node<HostEnv>, fd: Fd, len: usize, times: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    for _ in 0..times {
        n.seek(fd, 0).unwrap();
        assert_eq!(n.read(fd, &mut b).unwrap(), len);
    }
    b
}

fn stat(n: &Node<HostEnv>, key: &str) -> u64 {
    stat_value(n, key).parse().unwrap()
}

#[test]
fn relaxed_hot_pages_get_replicas_and_an_open_sees_a_closed_write() {
    let rig = Rig::new(RigConfig::new(2, Mode::Relaxed));
    let old = pattern(4 * 4096, 1);
    write_file(&mut rig.node(1), "/hot", &old);
    // Relaxed writes went back through the storage server: node 1's read
    // makes it the owner, so node 2's reads hit node 1's frames.
    assert_eq!(read_file(&mut rig.node(1), "/hot"), old);
    promote(&mut rig.node(2), 3);
    let fd = rig.node(2).open("/hot", Default::default()).unwrap();
    assert_eq!(read_n(&mut rig.node(2), fd, old.len(), 4), old);
    {
        let n = rig.node(2);
        assert_eq!(stat(&n, keys::cache::PROMOTIONS), 4, "4 pages read 4 times");
        assert_eq!(stat(&n, keys::cache::REPLICA_PAGES), 4);
        assert_eq!(stat(&n, keys::cache::HITS_REPLICA), 0);
    }
    assert_eq!(read_n(&mut rig.node(2), fd, old.len(), 2), old);
    assert_eq!(stat(&rig.node(2), keys::cache::HITS_REPLICA), 8);
    // Node 1 (the owner) rewrites page 1 and closes: node 2's next open
    // must see it (close-to-open), though its replica was taken before.
    let new = pattern(4096, 9);
    write_at(&mut rig.node(1), "/hot", 4096, &new);
    rig.node(2).close(fd).unwrap();
    let fd = rig.node(2).open("/hot", Default::default()).unwrap();
    assert_eq!(stat(&rig.node(2), keys::cache::REPLICA_PAGES), 0);
    assert_eq!(stat(&rig.node(2), keys::cache::DEMOTIONS), 4);
    let got = read_n(&mut rig.node(2), fd, old.len(), 1);
    assert_eq!(&got[4096..8192], &new[..]);
    assert_eq!(&got[..4096], &old[..4096]);
    // Hot again, then the owner drops its pages: the directory
    // invalidates node 2's mappings, and the replicas go with them.
    read_n(&mut rig.node(2), fd, old.len(), 4);
    assert_eq!(stat(&rig.node(2), keys::cache::REPLICA_PAGES), 4);
    rig.node(1).cache_drop().unwrap();
    rig.idle(20);
    rig.node(2).service();
    assert_eq!(stat(&rig.node(2), keys::cache::REPLICA_PAGES), 0);
    let ino = rig.node(2).fd_info(fd).unwrap().0;
    assert!(replica_of(&rig, 2, PageKey { ino, idx: 0 }).is_none());
    let got = read_n(&mut rig.node(2), fd, old.len(), 1);
    assert_eq!(&got[4096..8192], &new[..]);
    rig.node(2).close(fd).unwrap();
}

/// Node `n`'s cache of the page `key`: its replica, if any.
fn replica_of(rig: &Rig, n: u32, key: PageKey) -> Option<Vec<u8>> {
    let mut node = rig.node(n);
    let c = &node
        .vfs
        .data_path()
        .single_copy()
        .unwrap()
        .coherence()
        .unwrap()
        .cache;
    c.replica(&key).map(|p| p.to_vec())
}

/// The directory's view: pages with replicas granted, and whether frame
/// `gfn`'s replica bit is set.
fn dir_replicas(rig: &Rig, gfn: u64) -> (usize, bool) {
    let h = fabric::layout::Header::new(&*rig.sh.mem, rig.sh.layout);
    (rig.sh.dir.borrow().replicated_pages(), h.replicated(gfn))
}

fn owner_frame(rig: &Rig, key: PageKey) -> u64 {
    rig.sh.dir.borrow().pages().entry(&key).unwrap().gfn
}

/// Replicas in use, as after the cluster's first PROMOTE: the header says
/// so and every node has seen it (each announces its stores from now on),
/// so a promotion is not refused for a node that has not looked yet (see
/// `replicas_need_every_member_to_announce_its_stores` for that).
fn replicas_in_use(rig: &Rig) {
    let h = fabric::layout::Header::new(&*rig.sh.mem, rig.sh.layout);
    h.set_replicas_used();
    rig.idle(3);
    for n in 1..=rig.sh.layout.max_nodes {
        assert!(h.sees_replicas(n), "node {n} did not look");
    }
}

#[test]
fn strong_hot_pages_get_replicas_and_an_owner_write_is_seen_at_once() {
    // Promotion keeps strong mode strong: node 2 replicates node 1's hot
    // pages, node 1's write revokes the replicas before its store lands,
    // and node 2's next read (no close, no reopen) sees the new bytes.
    let rig = Rig::new(RigConfig::new(2, Mode::Strong));
    replicas_in_use(&rig);
    let old = pattern(2 * 4096, 3);
    write_file(&mut rig.node(1), "/s", &old);
    promote(&mut rig.node(2), 3);
    let fd = rig.node(2).open("/s", Default::default()).unwrap();
    let ino = rig.node(2).fd_info(fd).unwrap().0;
    let key = PageKey { ino, idx: 0 };
    let gfn = owner_frame(&rig, key);
    assert_eq!(read_n(&mut rig.node(2), fd, old.len(), 4), old);
    assert_eq!(stat(&rig.node(2), keys::cache::PROMOTIONS), 2);
    assert_eq!(stat(&rig.node(2), keys::cache::REPLICA_PAGES), 2);
    assert_eq!(replica_of(&rig, 2, key).unwrap(), old[..4096].to_vec());
    assert_eq!(dir_replicas(&rig, gfn), (2, true));
    assert_eq!(read_n(&mut rig.node(2), fd, old.len(), 3), old);
    assert_eq!(stat(&rig.node(2), keys::cache::HITS_REPLICA), 6);
    // The owner writes both pages.
    let new = pattern(2 * 4096, 4);
    write_at(&mut rig.node(1), "/s", 0, &new);
    assert_eq!(stat(&rig.node(2), keys::cache::REVOCATIONS), 2);
    assert_eq!(stat(&rig.node(2), keys::cache::REPLICA_PAGES), 0);
    assert!(replica_of(&rig, 2, key).is_none());
    assert_eq!(dir_replicas(&rig, gfn), (0, false));
    assert_eq!(read_n(&mut rig.node(2), fd, old.len(), 1), new);
    // Hot again: replicas of the new bytes.
    assert_eq!(read_n(&mut rig.node(2), fd, old.len(), 4), new);
    assert_eq!(stat(&rig.node(2), keys::cache::PROMOTIONS), 4);
    assert_eq!(replica_of(&rig, 2, key).unwrap(), new[..4096].to_vec());
    rig.node(2).close(fd).unwrap();
}

#[test]
fn a_replica_holder_that_writes_revokes_the_other_replicas() {
    // Nodes 2 and 3 replicate node 1's page; node 2 writes it (a store
    // through its mapping into node 1's frame): its own replica and node
    // 3's go first, and both read the new bytes.
    let rig = Rig::new(RigConfig::new(3, Mode::Strong));
    replicas_in_use(&rig);
    let old = pattern(4096, 5);
    write_file(&mut rig.node(1), "/w", &old);
    let mut fds = Vec::new();
    for n in [2, 3] {
        promote(&mut rig.node(n), 2);
        let fd = rig.node(n).open("/w", Default::default()).unwrap();
        assert_eq!(read_n(&mut rig.node(n), fd, old.len(), 3), old);
        assert_eq!(
            stat(&rig.node(n), keys::cache::REPLICA_PAGES),
            1,
            "node {n}"
        );
        fds.push(fd);
    }
    let new = pattern(4096, 6);
    rig.node(2).seek(fds[0], 0).unwrap();
    assert_eq!(rig.node(2).write(fds[0], &new).unwrap(), new.len());
    for (n, fd) in [(2, fds[0]), (3, fds[1])] {
        assert_eq!(
            stat(&rig.node(n), keys::cache::REPLICA_PAGES),
            0,
            "node {n}"
        );
        assert_eq!(stat(&rig.node(n), keys::cache::REVOCATIONS), 1, "node {n}");
        assert_eq!(read_n(&mut rig.node(n), fd, new.len(), 1), new, "node {n}");
    }
    assert_eq!(read_file(&mut rig.node(1), "/w"), new);
    // A store through node 3's mmap window revokes node 2's new replica.
    assert_eq!(read_n(&mut rig.node(2), fds[0], new.len(), 3), new);
    assert_eq!(stat(&rig.node(2), keys::cache::REPLICA_PAGES), 1);
    let mut n3 = rig.node(3);
    let mut io = window_io(&rig, &n3);
    let mut w = b"mapped".to_vec();
    n3.mmap_io("/w", 10, 6, true, &mut w, &mut io).unwrap();
    drop(n3);
    assert_eq!(stat(&rig.node(2), keys::cache::REPLICA_PAGES), 0);
    assert_eq!(
        &read_n(&mut rig.node(2), fds[0], new.len(), 1)[10..16],
        b"mapped"
    );
}

#[test]
fn a_promotion_waits_for_an_announced_store_and_is_refused_if_it_stays() {
    let rig = Rig::new(RigConfig::new(3, Mode::Strong));
    replicas_in_use(&rig);
    let data = pattern(4096, 7);
    write_file(&mut rig.node(1), "/p", &data);
    let fd = rig.node(2).open("/p", Default::default()).unwrap();
    let ino = rig.node(2).fd_info(fd).unwrap().0;
    let gfn = owner_frame(&rig, PageKey { ino, idx: 0 });
    // Node 3 is (as far as the directory can tell) in the middle of a
    // store into the frame: no replica may be made now.
    let h = fabric::layout::Header::new(&*rig.sh.mem, rig.sh.layout);
    h.set_writing(3, gfn + 1);
    promote(&mut rig.node(2), 2);
    assert_eq!(read_n(&mut rig.node(2), fd, data.len(), 3), data);
    assert_eq!(stat(&rig.node(2), keys::cache::PROMOTIONS), 0);
    assert_eq!(stat(&rig.node(2), keys::cache::PROMOTIONS_REFUSED), 1);
    assert_eq!(
        dir_replicas(&rig, gfn),
        (0, false),
        "the bit was taken back"
    );
    // The store ended: the next hot streak promotes.
    h.set_writing(3, 0);
    assert_eq!(read_n(&mut rig.node(2), fd, data.len(), 3), data);
    assert_eq!(stat(&rig.node(2), keys::cache::PROMOTIONS), 1);
    assert_eq!(dir_replicas(&rig, gfn), (1, true));
    // Node 2 leaves: its replica state goes with it.
    rig.node(2).close(fd).unwrap();
    rig.node(2).cache_drop().unwrap();
    assert_eq!(dir_replicas(&rig, gfn), (0, false));
}

#[test]
fn a_replica_holder_that_dies_does_not_hold_a_writer_forever() {
    // Node 3 holds a replica and dies before it acks the REVOKE: once the
    // directory declares it failed, the revocation completes without it
    // and node 1's write lands.
    let rig = Rig::new(RigConfig::new(3, Mode::Strong));
    replicas_in_use(&rig);
    let old = pattern(4096, 8);
    write_file(&mut rig.node(1), "/d", &old);
    promote(&mut rig.node(3), 2);
    let fd = rig.node(3).open("/d", Default::default()).unwrap();
    assert_eq!(read_n(&mut rig.node(3), fd, old.len(), 3), old);
    assert_eq!(stat(&rig.node(3), keys::cache::REPLICA_PAGES), 1);
    rig.freeze(3);
    let new = pattern(4096, 9);
    write_at(&mut rig.node(1), "/d", 0, &new);
    assert!(
        !rig.sh.dir.borrow().is_member(3),
        "node 3 was declared failed"
    );
    assert_eq!(rig.sh.dir.borrow().replicated_pages(), 0);
    assert_eq!(read_file(&mut rig.node(1), "/d"), new);
    assert_eq!(read_file(&mut rig.node(2), "/d"), new);
}

#[test]
fn the_directory_grants_replicas_only_to_sharers_of_settled_pages() {
    use fabric::proto::{PageReply, PageReq, Request, Response};
    let rig = Rig::new(RigConfig::new(3, Mode::Strong));
    write_file(&mut rig.node(1), "/g", &pattern(4096, 2));
    let ino = rig.node(1).stat("/g").unwrap().ino;
    let key = PageKey { ino, idx: 0 };
    let gfn = owner_frame(&rig, key);
    let call = |n: u32, r: PageReq| match rig.node(n).ring_call(&Request::Page(r)) {
        Ok(Response::Page(p)) => p,
        other => panic!("node {n} {r:?}: {other:?}"),
    };
    // The owner, and a node that does not map the page, are refused.
    assert_eq!(call(1, PageReq::Promote { key }), PageReply::Refused);
    assert_eq!(call(2, PageReq::Promote { key }), PageReply::Refused);
    assert_eq!(
        call(
            2,
            PageReq::Promote {
                key: PageKey { ino, idx: 9 }
            }
        ),
        PageReply::Refused
    );
    assert_eq!(dir_replicas(&rig, gfn), (0, false));
    let s = rig.sh.dir.borrow().replica_stats();
    assert_eq!((s.granted, s.refused), (0, 3));
    // An UNPROTECT with no replica anywhere is answered at once.
    assert_eq!(
        call(1, PageReq::Unprotect { key }),
        PageReply::Done { written: false }
    );
    replicas_in_use(&rig);
    // Node 2 maps the page and asks: granted, bit set, `replicas_used` on.
    assert_eq!(read_file(&mut rig.node(2), "/g"), pattern(4096, 2));
    assert_eq!(
        call(2, PageReq::Promote { key }),
        PageReply::Done { written: false }
    );
    assert_eq!(dir_replicas(&rig, gfn), (1, true));
    assert!(fabric::layout::Header::new(&*rig.sh.mem, rig.sh.layout).replicas_used());
    // Node 2's own UNPROTECT (it dropped its replica first) revokes
    // nobody: answered at once, and the bit goes.
    assert_eq!(
        call(2, PageReq::Unprotect { key }),
        PageReply::Done { written: false }
    );
    assert_eq!(dir_replicas(&rig, gfn), (0, false));
    assert_eq!(rig.sh.dir.borrow().replica_stats().revokes, 0);
}

#[test]
fn replicas_need_every_member_to_announce_its_stores() {
    // Until a node has read `replicas_used` set it stores without
    // announcing: the cluster's first PROMOTE sets the word and is refused
    // while another member has not said it saw it; the directory's notice
    // makes the idle members look, and the next hot streak is granted.
    let rig = Rig::new(RigConfig::new(3, Mode::Strong));
    let data = pattern(4096, 4);
    write_file(&mut rig.node(1), "/a", &data);
    let h = fabric::layout::Header::new(&*rig.sh.mem, rig.sh.layout);
    assert!(!h.replicas_used());
    promote(&mut rig.node(2), 2);
    let fd = rig.node(2).open("/a", Default::default()).unwrap();
    assert_eq!(read_n(&mut rig.node(2), fd, data.len(), 3), data);
    assert_eq!(stat(&rig.node(2), keys::cache::PROMOTIONS), 0);
    assert_eq!(stat(&rig.node(2), keys::cache::PROMOTIONS_REFUSED), 1);
    assert!(h.replicas_used());
    // Nodes 1 and 3 are idle: the notice wakes them (here they may have
    // looked already, in the steps node 2's wait for its answer ran).
    rig.idle(3);
    assert!(h.sees_replicas(1) && h.sees_replicas(3));
    assert_eq!(read_n(&mut rig.node(2), fd, data.len(), 3), data);
    assert_eq!(stat(&rig.node(2), keys::cache::PROMOTIONS), 1);
    rig.node(2).close(fd).unwrap();
}
