//! Membership: joins and epochs, a corrupt ring, a silent node, a client
//! nobody answers.

use super::*;

#[test]
fn join_assigns_increasing_epochs() {
    let rig = Rig::new(2, true);
    let a = rig.join(1);
    let b = rig.join(2);
    assert!(b.epoch() > a.epoch());
    let h = Header::new(&*rig.mem, rig.layout);
    assert_eq!(h.node_state(1), Some(NodeState::Up));
    assert_eq!(h.dir_state(), Some(DirState::Up));
}

#[test]
fn corrupt_ring_fails_the_node_not_the_directory() {
    let rig = Rig::new(2, true);
    let _a = rig.join(1);
    let mut b = rig.join(2);
    let ch = rig.layout.channel(1);
    // Node 1's request head jumps far ahead of the tail.
    rig.mem.store_u32(ch.request.off, 5000);
    let p = rig.step();
    assert!(p
        .events
        .iter()
        .any(|e| matches!(e, Event::Corrupt { node: 1, .. })));
    let h = Header::new(&*rig.mem, rig.layout);
    assert_eq!(h.node_state(1), Some(NodeState::Failed));
    // Node 2 is unaffected.
    assert_eq!(rig.call(&mut b, &Request::Nop), Ok(Response::Ok));
}

#[test]
fn silent_node_is_failed_and_can_rejoin_with_a_new_epoch() {
    let rig = Rig::new(1, true);
    let a = rig.join(1);
    let h = Header::new(&*rig.mem, rig.layout);
    // No heartbeat for more than the 1 ms timeout.
    assert!(rig.step_until_failed(1, &[], 2000));
    assert_eq!(h.node_state(1), Some(NodeState::Failed));
    let mut a2 = rig.join(1);
    assert!(a2.epoch() > a.epoch());
    assert_eq!(rig.call(&mut a2, &Request::Nop), Ok(Response::Ok));
    // A heartbeating node is not failed.
    for _ in 0..3000 {
        h.beat_node(1);
        assert!(rig.step().events.is_empty());
    }
}

#[test]
fn client_gives_up_when_nobody_answers() {
    let rig = Rig::new(1, true);
    let mut a = rig.join(1);
    let mut n = 0;
    let mut w = || {
        n += 1;
        n < 50
    };
    assert_eq!(
        a.call(&*rig.mem, &Request::Nop, &mut w),
        Err(Errno::Unavailable)
    );
    // The late answer is discarded; the next call matches its own tag.
    assert_eq!(rig.call(&mut a, &Request::Nop), Ok(Response::Ok));
    assert_eq!(
        rig.call(&mut a, &Request::Getattr { ino: 1 })
            .map(|r| matches!(r, Response::Attr(_))),
        Ok(true)
    );
}
