//! `daxfs` mode's fills and invalidations: the loop against a heap
//! region, the fake asynchronous disk and real node clients, the nodes'
//! side of the slot cache driven by hand.

use super::super::*;
use super::fills::Rig;
use daxcache::pcache::{Lookup, PageCache, Tag, FREE, VALID};
use daxcache::SpinWaiter;
use fabric::proto::{Errno, Request, Response};
use fabric::shm::RegionWords;

fn words(
    rig: &Rig,
) -> (
    RegionWords<'_, fabric::shm::HeapShm>,
    fabric::layout::DaxLayout,
) {
    let d = rig.layout.dax().unwrap();
    (d.words(&rig.mem).unwrap(), d)
}

fn frame(rig: &Rig, d: &fabric::layout::DaxLayout, slot: usize) -> Vec<u8> {
    let mut v = vec![0u8; 4096];
    rig.mem.read(d.frame_off(slot).unwrap(), &mut v);
    v
}

fn spin() -> SpinWaiter {
    SpinWaiter { left: 1000 }
}

fn fills_once_and_a_write_invalidates(fill_depth: usize) {
    let rig = Rig::with_mode(2, 32, fill_depth, true);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let ino = rig.file(&mut a, 3);
    let (w, d) = words(&rig);
    let pc = PageCache::attach(&w, 0, d.slots).expect("the directory formatted it");
    let t = Tag::new(ino, 1).unwrap();
    // Node 1 (owner 0) claims page 1; node 2 finds it PENDING and waits.
    let Ok(Lookup::Miss(s)) = pc.lookup(t, 0, 0, &mut spin()) else {
        panic!("a miss")
    };
    assert_eq!(
        pc.lookup(t, 1, 0, &mut SpinWaiter { left: 3 }),
        Err(daxcache::Error::Timeout { slot: s, owner: 0 })
    );
    // Only the claimer may ask for its fill.
    assert_eq!(
        rig.call(&mut b, &Request::DaxFill { slot: s as u64 }),
        Err(Errno::Invalid)
    );
    let r = rig.call(&mut a, &Request::DaxFill { slot: s as u64 });
    assert!(
        matches!(r, Ok(Response::Data { bytes: 4096, attr }) if attr.size == 3 * 4096),
        "{r:?}"
    );
    assert_eq!(pc.slot(s).unwrap().state, VALID);
    assert_eq!(frame(&rig, &d, s), vec![2u8; 4096]);
    assert_eq!(pc.fills(), Ok(1));
    // Both nodes now hit the one copy; a second fill is refused.
    assert_eq!(pc.lookup(t, 1, 0, &mut spin()), Ok(Lookup::Hit(s)));
    assert_eq!(pc.lookup(t, 0, 0, &mut spin()), Ok(Lookup::Hit(s)));
    assert_eq!(
        rig.call(&mut a, &Request::DaxFill { slot: s as u64 }),
        Err(Errno::Invalid)
    );
    pc.unpin(0, 0, s).unwrap();
    pc.unpin(1, 0, s).unwrap();
    // A write through the file server frees the stale copy before it is
    // answered; the next reader fills the new bytes.
    rig.write(&mut b, ino, 1, 9);
    assert_eq!(pc.slot(s).unwrap().state, FREE);
    let Ok(Lookup::Miss(s2)) = pc.lookup(t, 1, 0, &mut spin()) else {
        panic!("a miss after the write")
    };
    let r = rig.call(&mut b, &Request::DaxFill { slot: s2 as u64 });
    assert!(matches!(r, Ok(Response::Data { .. })), "{r:?}");
    assert_eq!(frame(&rig, &d, s2), vec![9u8; 4096]);
    assert_eq!(pc.fills(), Ok(2));
    let st = rig.dir.borrow().dax_stats().unwrap();
    assert_eq!((st.fills, st.invalidated, st.fill_errors), (2, 1, 2));
    // A page past the end of file fills as zeros; a truncation frees
    // the pages it cut.
    let past = Tag::new(ino, 7).unwrap();
    let Ok(Lookup::Miss(s3)) = pc.lookup(past, 1, 0, &mut spin()) else {
        panic!()
    };
    let r = rig.call(&mut b, &Request::DaxFill { slot: s3 as u64 });
    assert!(matches!(r, Ok(Response::Data { bytes: 0, .. })), "{r:?}");
    assert_eq!(frame(&rig, &d, s3), vec![0u8; 4096]);
    let r = rig.call(
        &mut a,
        &Request::Setattr {
            gen: 0,
            ino,
            size: 4096,
            expect: None,
            locked: false,
        },
    );
    assert!(matches!(r, Ok(Response::Attr(_))), "{r:?}");
    assert_eq!(pc.slot(s2).unwrap().state, FREE);
    assert_eq!(pc.slot(s3).unwrap().state, FREE);
}

#[test]
fn a_claimed_page_is_filled_once_and_a_write_frees_its_copy() {
    fills_once_and_a_write_invalidates(32);
}

#[test]
fn synchronous_fills_do_the_same() {
    fills_once_and_a_write_invalidates(0);
}

#[test]
fn a_node_that_leaves_gives_back_its_claims() {
    let rig = Rig::with_mode(2, 32, 32, true);
    let mut a = rig.join(1);
    let _b = rig.join(2);
    let ino = rig.file(&mut a, 1);
    let (w, d) = words(&rig);
    let pc = PageCache::attach(&w, 0, d.slots).unwrap();
    let t = Tag::new(ino, 0).unwrap();
    let Ok(Lookup::Miss(s)) = pc.lookup(t, 0, 0, &mut spin()) else {
        panic!()
    };
    Header::new(&*rig.mem, rig.layout).set_node_state(1, fabric::layout::NodeState::Left);
    for _ in 0..3 {
        rig.step();
    }
    assert_eq!(pc.slot(s).unwrap().state, FREE);
    assert!(matches!(
        pc.lookup(t, 1, 0, &mut spin()),
        Ok(Lookup::Miss(_))
    ));
    assert_eq!(rig.dir.borrow().dax_stats().unwrap().reclaimed, 1);
}

#[test]
fn other_modes_have_no_slot_cache() {
    let rig = Rig::new(1, 32, 32);
    let mut a = rig.join(1);
    assert_eq!(
        rig.call(&mut a, &Request::DaxFill { slot: 0 }),
        Err(Errno::Invalid)
    );
    assert_eq!(rig.dir.borrow().dax_stats(), None);
}

/// A reader that pinned a page (and may have failed holding the pin) does
/// not make a write wait, nor keep the stale copy visible: the write
/// retires the pinned copy, the next reader fills the new bytes into
/// another slot, and the reclaim of the failed reader frees the old one.
#[test]
fn a_write_retires_a_pinned_copy_and_the_failed_readers_reclaim_frees_it() {
    let rig = Rig::with_mode(2, 32, 32, true);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let ino = rig.file(&mut a, 2);
    let (w, d) = words(&rig);
    let pc = PageCache::attach(&w, 0, d.slots).unwrap();
    let t = Tag::new(ino, 1).unwrap();
    let Ok(Lookup::Miss(s)) = pc.lookup(t, 0, 0, &mut spin()) else {
        panic!()
    };
    let r = rig.call(&mut a, &Request::DaxFill { slot: s as u64 });
    assert!(matches!(r, Ok(Response::Data { .. })), "{r:?}");
    // Node 1 pins the page and goes silent holding the pin.
    assert_eq!(pc.lookup(t, 0, 3, &mut spin()), Ok(Lookup::Hit(s)));
    rig.write(&mut b, ino, 1, 9);
    let x = pc.slot(s).unwrap();
    assert_eq!((x.state, x.refs), (VALID, 1));
    assert!(x.tag.is_retired(), "the stale copy is retired");
    assert_eq!(rig.dir.borrow().dax_stats().unwrap().retired, 1);
    let Ok(Lookup::Miss(s2)) = pc.lookup(t, 1, 0, &mut spin()) else {
        panic!("the stale copy was found after the write")
    };
    assert_ne!(s2, s);
    let r = rig.call(&mut b, &Request::DaxFill { slot: s2 as u64 });
    assert!(matches!(r, Ok(Response::Data { .. })), "{r:?}");
    assert_eq!(frame(&rig, &d, s2), vec![9u8; 4096]);
    // Node 1 leaves: its pin is given back and the retired slot is FREE.
    Header::new(&*rig.mem, rig.layout).set_node_state(1, fabric::layout::NodeState::Left);
    for _ in 0..3 {
        rig.step();
    }
    assert_eq!(pc.slot(s).unwrap().state, FREE);
}
