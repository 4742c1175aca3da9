//! Lazy invalidation (`lazy_inv`): a node sleeping quietly on its doorbell
//! is invalidated without servicing anything, and tears the mappings down
//! before its sleep returns.

use super::*;

#[test]
fn a_quiet_sleeper_is_invalidated_while_it_sleeps_and_unmaps_before_it_returns() {
    let rig = Rig::new(RigConfig::new(2, Mode::Strong));
    rig.sh.doorbells.set(true);
    write_file(&mut rig.node(1), "/f", &pattern(8192, 4));
    assert_eq!(read_file(&mut rig.node(2), "/f"), pattern(8192, 4));
    let ino = rig.node(1).stat("/f").unwrap().ino;
    let inv0 = stat_value(&rig.node(2), k::INVALIDATIONS_RECEIVED);
    // While node 2 sleeps (borrowed: it services nothing), node 1 reclaims
    // both pages node 2 maps: only the lazy path can complete that.
    let n1 = rig.node_rc(1);
    let done = Rc::new(Cell::new(None));
    let d = done.clone();
    rig.set_hook(Some(Box::new(move |me| {
        if me == 2 && d.get().is_none() {
            let mut n = n1.borrow_mut();
            d.set(Some((
                n.invalidate_page(ino, 0) == Ok(true),
                n.invalidate_page(ino, 1) == Ok(true),
            )));
        }
    })));
    let now = rig.sh.now();
    assert!(rig.node(2).idle_sleep(now + 1_000_000, &mut || false));
    rig.set_hook(None);
    assert_eq!(done.get(), Some((true, true)), "both reclaims completed");
    {
        let d = rig.sh.dir.borrow();
        assert_eq!(d.quiet_stats().taken, 2);
        assert!(d.pages().is_empty());
    }
    // The sleep returned with the DIR_INVs serviced: the mappings are gone
    // before node 2 could run anything else.
    let inv1 = stat_value(&rig.node(2), k::INVALIDATIONS_RECEIVED);
    assert_eq!(
        inv1.parse::<u64>().unwrap(),
        inv0.parse::<u64>().unwrap() + 2,
        "serviced on waking"
    );
    // Node 1 rewrites the file; node 2 reads the new bytes, and the late
    // acks were dropped.
    write_file(&mut rig.node(1), "/f", &pattern(8192, 5));
    assert_eq!(read_file(&mut rig.node(2), "/f"), pattern(8192, 5));
    rig.idle(3);
    assert_eq!(rig.sh.dir.borrow().quiet_stats().absorbed, 2);
}

#[test]
fn a_node_that_dirtied_a_peer_page_sleeps_quietly_only_after_its_write_back() {
    let rig = Rig::new(RigConfig::new(2, Mode::Strong));
    write_file(&mut rig.node(1), "/f", &pattern(4096, 6));
    assert_eq!(read_file(&mut rig.node(2), "/f"), pattern(4096, 6));
    let quiet = |rig: &Rig| {
        let mut n = rig.node(2);
        crate::link::Session::quiet(n.vfs.session())
    };
    assert!(quiet(&rig), "clean mappings only");
    // A store through node 2's mapping of node 1's frame: its ack carries
    // the dirty bit, so it must be asked for.
    write_at(&mut rig.node(2), "/f", 0, b"x");
    assert!(!quiet(&rig), "dirtied a peer's frame");
    rig.node(2).sync().unwrap();
    assert!(quiet(&rig), "clean again after the write-back");
}
