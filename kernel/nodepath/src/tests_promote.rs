//! Host tests of hot-page promotion over a real directory: in relaxed
//! mode a peer's page read often gets a replica that serves the reads, an
//! open after the writer's close sees the new bytes, and an owner's
//! reclaim tears the replica down; strong mode never promotes, so a
//! write on the owner is seen at once by a node reading it hot.

use fabric::config::Mode;
use fabric::proto::PageKey;
use userland::stats::keys;

use userland::os::Fd;

use crate::node::Node;
use crate::pagecache::Promotion;
use crate::rig::{HostEnv, Rig, RigConfig};
use crate::tests::{pattern, read_file, stat_value, write_at, write_file};

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
    {
        let mut n = rig.node(2);
        let c = &n
            .vfs
            .data_path()
            .single_copy()
            .unwrap()
            .coherence()
            .unwrap()
            .cache;
        assert!(c.replica(&PageKey { ino, idx: 0 }).is_none());
    }
    let got = read_n(&mut rig.node(2), fd, old.len(), 1);
    assert_eq!(&got[4096..8192], &new[..]);
    rig.node(2).close(fd).unwrap();
}

#[test]
fn strong_mode_never_promotes_and_sees_every_write_at_once() {
    let rig = Rig::new(RigConfig::new(2, Mode::Strong));
    let old = pattern(2 * 4096, 3);
    write_file(&mut rig.node(1), "/s", &old);
    promote(&mut rig.node(2), 1);
    let fd = rig.node(2).open("/s", Default::default()).unwrap();
    assert_eq!(read_n(&mut rig.node(2), fd, old.len(), 10), old);
    let new = pattern(2 * 4096, 4);
    write_at(&mut rig.node(1), "/s", 0, &new);
    // No close, no reopen: strong mode shows the owner's write at once.
    assert_eq!(read_n(&mut rig.node(2), fd, old.len(), 1), new);
    assert_eq!(stat(&rig.node(2), keys::cache::PROMOTIONS), 0);
    assert_eq!(stat(&rig.node(2), keys::cache::REPLICA_PAGES), 0);
    rig.node(2).close(fd).unwrap();
}
