//! Host tests of the eviction controls and `locality` over a real
//! directory: sharer counts reach the owner, `locality` reports owner,
//! sharers and disk-only pages, a policy switch at run time loses no
//! dirty data, and the owned-page limit and TTL reclaim.

use fabric::config::{Mode, PolicyName};
use fabric::proto::{LocalityRange, PageKey};

use crate::control::Controls;
use crate::rig::{Rig, RigConfig};
use crate::tests::{pattern, read_file, write_file};

#[test]
fn sharer_counts_reach_the_owner_and_locality_reports_them() {
    let rig = Rig::new(RigConfig::new(3, Mode::Strong));
    let data = pattern(8 * 4096, 1);
    write_file(&mut rig.node(1), "/f", &data);
    // Pages 0..4 read by nodes 2 and 3, pages 4..6 by node 2 only.
    {
        let mut n = rig.node(2);
        let fd = n.open("/f", Default::default()).unwrap();
        let mut b = vec![0u8; 6 * 4096];
        assert_eq!(n.read(fd, &mut b).unwrap(), b.len());
        n.close(fd).unwrap();
    }
    {
        let mut n = rig.node(3);
        let fd = n.open("/f", Default::default()).unwrap();
        let mut b = vec![0u8; 4 * 4096];
        assert_eq!(n.read(fd, &mut b).unwrap(), b.len());
        n.close(fd).unwrap();
    }
    rig.idle(20);
    let ino = rig.node(1).stat("/f").unwrap().ino;
    let sharers = |idx| {
        let mut n = rig.node(1);
        let st = n.vfs.data_path().single_copy().unwrap();
        let c = &st.coherence().unwrap().cache;
        c.sharers_of(&PageKey { ino, idx })
    };
    assert_eq!(
        (sharers(0), sharers(3), sharers(4), sharers(7)),
        (2, 2, 1, 0)
    );
    let runs = rig.node(3).locality("/f").unwrap();
    let r = |first, pages, owner, sharers| LocalityRange {
        first,
        pages,
        owner,
        sharers,
    };
    assert_eq!(runs, [r(0, 4, 1, 2), r(4, 2, 1, 1), r(6, 2, 1, 0)]);
    // Node 1 drops its pages: the directory forgets them, disk only.
    rig.node(1).cache_drop().unwrap();
    rig.idle(20);
    assert_eq!(rig.node(2).locality("/f").unwrap(), [r(0, 8, 0, 0)]);
    // Another file not read by anyone, and errors.
    write_file(&mut rig.node(2), "/g", &pattern(100, 2));
    assert_eq!(rig.node(1).locality("/g").unwrap(), [r(0, 1, 2, 0)]);
    assert!(rig.node(1).locality("/nope").is_err());
    assert!(rig.node(1).locality("/").is_err());
}

#[test]
fn a_policy_switch_at_run_time_loses_no_dirty_data() {
    let mut cfg = RigConfig::new(2, Mode::Strong);
    cfg.region = 2 << 20;
    cfg.policy = PolicyName::Lru;
    let rig = Rig::new(cfg);
    let data = pattern(40 * 4096, 3);
    write_file(&mut rig.node(1), "/d", &data);
    let mut k = rig.node(1).cache_controls().unwrap();
    assert_eq!(k.policy, PolicyName::Lru);
    for p in [PolicyName::S3Fifo, PolicyName::Arc, PolicyName::Mru] {
        k.policy = p;
        rig.node(1).set_cache_controls(k).unwrap();
    }
    // The limit forces reclaim of the dirty pages (written back by the
    // directory on the INV).
    k.limit = Some(64);
    rig.node(1).set_cache_controls(k).unwrap();
    let big = pattern(100 * 4096, 4);
    write_file(&mut rig.node(1), "/big", &big);
    assert!(rig.node(1).cache_controls().unwrap().limit == Some(64));
    rig.node(1).sync().unwrap();
    let d = read_file(&mut rig.node(2), "/d");
    let first_bad = d.iter().zip(&data).position(|(a, b)| a != b);
    assert!(
        d.len() == data.len() && first_bad.is_none(),
        "/d: len {} first bad byte {first_bad:?}",
        d.len()
    );
    let b = read_file(&mut rig.node(2), "/big");
    let first_bad = b.iter().zip(&big).position(|(a, b)| a != b);
    assert!(
        b.len() == big.len() && first_bad.is_none(),
        "/big: len {} first bad byte {first_bad:?}",
        b.len()
    );
    let owned = {
        let mut n = rig.node(1);
        let st = n.vfs.data_path().single_copy().unwrap();
        st.coherence().unwrap().cache.owned_pages()
    };
    assert!(owned <= 64, "owned {owned}");
}

#[test]
fn idle_pages_past_the_ttl_are_reclaimed() {
    let rig = Rig::new(RigConfig::new(2, Mode::Strong));
    write_file(&mut rig.node(1), "/t", &pattern(4 * 4096, 5));
    let k = Controls {
        ttl_ns: 1_000_000_000,
        ..rig.node(1).cache_controls().unwrap()
    };
    rig.node(1).set_cache_controls(k).unwrap();
    assert_eq!(rig.node(1).expire(), 0, "not idle yet");
    rig.idle_node(1, 2_000_000_000);
    assert_eq!(rig.node(1).expire(), 4);
    rig.idle(10);
    assert_eq!(rig.node(2).locality("/t").unwrap()[0].owner, 0);
}
