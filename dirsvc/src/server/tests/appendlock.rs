//! Append locks through the serving loop: one node's until given back,
//! lost, or lapsed.

use super::*;

#[test]
fn an_append_lock_is_one_nodes_until_given_back_or_the_node_is_lost() {
    let rig = Rig::new(2, true);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let ino = match rig.path(&mut a, Op::Create, "/log") {
        Ok(Response::Attr(x)) => x.ino,
        r => panic!("{r:?}"),
    };
    let take = Request::AppendLock {
        ino,
        hold: true,
        renew: false,
    };
    let give = Request::AppendLock {
        ino,
        hold: false,
        renew: false,
    };
    let h = Header::new(&*rig.mem, rig.layout);
    let beat = || {
        h.beat_node(1);
        h.beat_node(2);
    };
    beat();
    assert!(matches!(rig.call(&mut a, &take), Ok(Response::Attr(x)) if x.ino == ino));
    beat();
    assert_eq!(rig.call(&mut b, &take), Err(Errno::Busy));
    // Taken again by its holder (a give-back it lost); a give-back by
    // another node changes nothing.
    beat();
    assert!(matches!(rig.call(&mut a, &take), Ok(Response::Attr(_))));
    beat();
    assert!(matches!(rig.call(&mut b, &give), Ok(Response::Attr(_))));
    beat();
    assert_eq!(rig.call(&mut b, &take), Err(Errno::Busy));
    beat();
    assert!(matches!(rig.call(&mut a, &give), Ok(Response::Attr(_))));
    beat();
    assert!(matches!(rig.call(&mut b, &take), Ok(Response::Attr(_))));
    // Node 2 holds it and goes silent: once it is failed, the lock is
    // node 1's to take.
    assert!(rig.step_until_failed(2, &[1], 2000));
    let mut a2 = rig.join(1);
    let mut ok = false;
    for _ in 0..50 {
        h.beat_node(1);
        match rig.call(&mut a2, &take) {
            Ok(Response::Attr(_)) => {
                ok = true;
                break;
            }
            Err(Errno::Busy) => {}
            r => panic!("{r:?}"),
        }
    }
    assert!(ok, "the failed node's lock was released");
    // A malformed flag is refused.
    let mut d = take.encode(7);
    let mut raw = fabric::proto::Raw::decode(&d);
    raw.args[1] = 2;
    d = raw.encode();
    assert!(Request::decode(&d).is_err());
}

#[test]
fn a_lost_append_lock_give_back_lapses_and_the_old_holder_cannot_publish() {
    let rig = Rig::new(2, true);
    // A lease of 200 passes (the rig's clock moves 1 µs a pass).
    rig.dir.borrow_mut().append_locks = crate::appendlock::AppendLocks::new(200_000);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let ino = match rig.path(&mut a, Op::Create, "/log") {
        Ok(Response::Attr(x)) => x.ino,
        r => panic!("{r:?}"),
    };
    let take = Request::AppendLock {
        ino,
        hold: true,
        renew: false,
    };
    let h = Header::new(&*rig.mem, rig.layout);
    let beat = || {
        h.beat_node(1);
        h.beat_node(2);
    };
    beat();
    assert!(matches!(rig.call(&mut a, &take), Ok(Response::Attr(_))));
    let publish = |size| Request::Setattr {
        gen: 0,
        ino,
        size,
        expect: None,
        locked: true,
    };
    // The holder publishes under its lease; another node may not.
    beat();
    assert!(matches!(rig.call(&mut a, &publish(5)), Ok(Response::Attr(x)) if x.size == 5));
    beat();
    assert_eq!(rig.call(&mut b, &publish(9)), Err(Errno::Busy));
    // Node 1's give-back is lost; both nodes stay alive. Node 2's
    // append is refused while the lease runs, and gets the lock once it
    // lapsed, never later.
    let mut waited = 0;
    let got = loop {
        beat();
        match rig.call(&mut b, &take) {
            Ok(Response::Attr(x)) => break x,
            Err(Errno::Busy) => waited += 1,
            r => panic!("{r:?}"),
        }
        assert!(waited < 400, "node 2 still waits for a lock nobody holds");
    };
    assert_eq!(got.size, 5);
    assert!(rig.dir.borrow().is_member(1), "node 1 was never failed");
    // The old holder lost it: its publication and its take are refused.
    beat();
    assert_eq!(rig.call(&mut a, &publish(12)), Err(Errno::Busy));
    beat();
    assert_eq!(rig.call(&mut a, &take), Err(Errno::Busy));
    beat();
    assert!(matches!(rig.call(&mut b, &publish(8)), Ok(Response::Attr(x)) if x.size == 8));
    let s = rig.dir.borrow().append_lock_stats();
    assert_eq!((s.lapsed, s.refused), (1, 2));
}
