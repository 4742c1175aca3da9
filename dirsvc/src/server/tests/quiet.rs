//! Invalidations of quietly sleeping sharers (`server/inval/quiet.rs`): taken
//! without the sharer's ack, its late ack dropped, never the owner's.

use super::*;
use fabric::doorbell::{finish_sleep, prepare_sleep, seqcst_fence, PeerMap};
use fabric::proto::{PageKey, PageReply, PageReq};
use nodepath::client::Notifier;

/// Node 1 owns the one page of a new 4 KiB file `name`, node 2 maps it.
fn shared_page(rig: &Rig, a: &mut Client, b: &mut Client, name: &str) -> PageKey {
    let Response::Attr(f) = rig.path(a, Op::Create, name).unwrap() else {
        panic!()
    };
    let grow = Request::Setattr {
        gen: 0,
        ino: f.ino,
        size: 4096,
        expect: None,
        locked: false,
    };
    assert!(matches!(rig.call(a, &grow), Ok(Response::Attr(_))));
    let key = PageKey { ino: f.ino, idx: 0 };
    let (a0, _) = rig.layout.pool_gfns(1);
    let (b0, _) = rig.layout.pool_gfns(2);
    let r = rig.call(a, &Request::Page(PageReq::Read { key, frame: a0 }));
    assert_eq!(r, Ok(Response::Page(PageReply::Owner { gfn: a0 })));
    let r = rig.call(b, &Request::Page(PageReq::Read { key, frame: b0 }));
    assert_eq!(
        r,
        Ok(Response::Page(PageReply::Shared { owner: 1, gfn: a0 }))
    );
    key
}

/// Node `n` announces a sleep (`quiet`: with `SLEEP_QUIET`).
fn sleep(rig: &Rig, n: u32, quiet: bool) {
    assert!(prepare_sleep(
        &PeerMap::new(&*rig.mem),
        n,
        quiet,
        seqcst_fence,
        || false
    ));
}

fn wake(rig: &Rig, n: u32) {
    finish_sleep(&PeerMap::new(&*rig.mem), n, seqcst_fence);
}

/// The next DIR_INV on a node's notify ring (past `Sharers` counts).
fn next_inv(rig: &Rig, n: &mut Notifier) -> Option<PageKey> {
    loop {
        match n.poll(&*rig.mem) {
            Ok(Some(Notice::DirInv(k))) => return Some(k),
            Ok(Some(Notice::Sharers { .. })) => continue,
            _ => return None,
        }
    }
}

fn inv(rig: &Rig, a: &mut Client, key: PageKey) -> u32 {
    a.send(
        &*rig.mem,
        &Request::Page(PageReq::Inv { key, dirty: false }),
        &mut || true,
    )
    .unwrap()
}

#[test]
fn a_quiet_sharer_is_invalidated_without_its_ack_and_its_late_ack_is_dropped() {
    let rig = Rig::new(2, true);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let mut nb = Notifier::new(&rig.layout, 2);
    let key = shared_page(&rig, &mut a, &mut b, "/q");
    let (a0, _) = rig.layout.pool_gfns(1);
    sleep(&rig, 2, true);
    let tag = inv(&rig, &mut a, key);
    let p = rig.step();
    // Answered in the same pass, and node 2 is not to be woken for it.
    let (t, d) = a
        .recv(&*rig.mem)
        .unwrap()
        .expect("answered without the ack");
    assert_eq!(t, tag);
    assert_eq!(
        Response::decode(&d, Op::PageInv),
        Ok((tag, Response::Page(PageReply::Done { written: false })))
    );
    assert_eq!(p.noticed & 0b10, 0, "no doorbell for the quiet sleeper");
    assert!(!Header::new(&*rig.mem, rig.layout).exported(a0));
    assert!(rig.dir.borrow().pages().is_empty());
    assert_eq!(rig.dir.borrow().quiet_stats().taken, 1);
    // Node 2 wakes: the DIR_INV is on its ring; its ack is dropped.
    wake(&rig, 2);
    assert_eq!(next_inv(&rig, &mut nb), Some(key));
    nb.ack(&*rig.mem, key, false, &mut || true).unwrap();
    rig.step();
    assert_eq!(rig.dir.borrow().quiet_stats().absorbed, 1);
    // The page goes on as usual: node 2 now owns it, node 1 maps it, and
    // an invalidation of a sharer that is awake waits for its ack.
    let (b0, _) = rig.layout.pool_gfns(2);
    let r = rig.call(&mut b, &Request::Page(PageReq::Read { key, frame: b0 }));
    assert_eq!(r, Ok(Response::Page(PageReply::Owner { gfn: b0 })));
    let r = rig.call(&mut a, &Request::Page(PageReq::Read { key, frame: a0 }));
    assert_eq!(
        r,
        Ok(Response::Page(PageReply::Shared { owner: 2, gfn: b0 }))
    );
    let mut na = Notifier::new(&rig.layout, 1);
    let tag = inv(&rig, &mut b, key);
    for _ in 0..3 {
        rig.step();
    }
    assert_eq!(
        b.recv(&*rig.mem),
        Ok(None),
        "node 1 is awake: its ack counts"
    );
    assert_eq!(next_inv(&rig, &mut na), Some(key));
    na.ack(&*rig.mem, key, false, &mut || true).unwrap();
    rig.step();
    assert_eq!(b.recv(&*rig.mem).unwrap().map(|x| x.0), Some(tag));
    assert_eq!(
        rig.dir.borrow().quiet_stats(),
        QuietStats {
            taken: 1,
            absorbed: 1
        }
    );
}

#[test]
fn a_plain_sleep_or_lazy_inv_off_waits_for_the_ack() {
    for (quiet, lazy) in [(false, true), (true, false)] {
        let rig = Rig::new(2, true);
        rig.dir.borrow_mut().cfg.lazy_inv = lazy;
        let mut a = rig.join(1);
        let mut b = rig.join(2);
        let mut nb = Notifier::new(&rig.layout, 2);
        let key = shared_page(&rig, &mut a, &mut b, "/p");
        sleep(&rig, 2, quiet);
        let tag = inv(&rig, &mut a, key);
        let p = rig.step();
        assert_eq!(p.noticed, 0b10, "the sleeper is rung ({quiet}, {lazy})");
        for _ in 0..3 {
            rig.step();
        }
        assert_eq!(a.recv(&*rig.mem), Ok(None), "no answer before the ack");
        wake(&rig, 2);
        assert_eq!(nb.poll(&*rig.mem), Ok(Some(Notice::DirInv(key))));
        nb.ack(&*rig.mem, key, false, &mut || true).unwrap();
        rig.step();
        assert_eq!(a.recv(&*rig.mem).unwrap().map(|x| x.0), Some(tag));
        assert_eq!(rig.dir.borrow().quiet_stats(), QuietStats::default());
    }
}

#[test]
fn a_file_eviction_takes_a_quiet_sharer_but_waits_for_the_owner() {
    let rig = Rig::new(3, true);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let mut c = rig.join(3);
    let key = shared_page(&rig, &mut a, &mut b, "/e");
    // Both the owner and the sharer sleep quietly; node 3 truncates.
    sleep(&rig, 1, true);
    sleep(&rig, 2, true);
    let r = rig.call(
        &mut c,
        &Request::Setattr {
            gen: 0,
            ino: key.ino,
            size: 0,
            expect: None,
            locked: false,
        },
    );
    assert!(matches!(r, Ok(Response::Attr(_))), "{r:?}");
    for _ in 0..3 {
        rig.step();
    }
    // The sharer's notice was taken; the owner must free its frame
    // itself, so its notice waits (and node 1 is rung for it).
    assert_eq!(rig.dir.borrow().quiet_stats().taken, 1);
    assert!(
        !rig.dir.borrow().pages().is_empty(),
        "waiting for the owner"
    );
    wake(&rig, 1);
    let mut na = Notifier::new(&rig.layout, 1);
    // A file's teardown: the owner's notice is an INV_RANGE.
    let span = fabric::proto::PageSpan::page(key);
    let notice = loop {
        match na.poll(&*rig.mem) {
            Ok(Some(Notice::Sharers { .. })) => continue,
            n => break n,
        }
    };
    assert_eq!(notice, Ok(Some(Notice::InvRange(span))));
    na.send(
        &*rig.mem,
        Notice::InvRangeAck { span, dirty: false },
        &mut || true,
    )
    .unwrap();
    rig.step();
    assert!(
        rig.dir.borrow().pages().is_empty(),
        "the owner's ack ends it"
    );
}

/// A sharer that stored into the owner's frame gets the DIR_INV, acks it
/// dirty and sleeps quietly again, all after this pass read its ack ring
/// and before the pass ends (`take_quiet_acks`): its dirty ack must be
/// taken, so the page is written back, never taken as a clean ack.
#[test]
fn a_dirty_ack_pushed_before_a_quiet_sleep_is_not_taken_as_clean() {
    let rig = Rig::new(2, true);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let mut nb = Notifier::new(&rig.layout, 2);
    let key = shared_page(&rig, &mut a, &mut b, "/d");
    let (a0, _) = rig.layout.pool_gfns(1);
    // Node 2 writes through its mapping of node 1's frame.
    let off = rig.layout.frame_off(a0).unwrap();
    rig.mem.write(off, b"appended by node 2");
    // Node 1 evicts its page: node 2 (awake) owes an ack.
    let tag = inv(&rig, &mut a, key);
    rig.step();
    assert_eq!(a.recv(&*rig.mem), Ok(None), "waiting for node 2's ack");
    // Within the next pass, after the directory served node 2's rings:
    // node 2 acks dirty and goes back to sleep quietly.
    assert_eq!(next_inv(&rig, &mut nb), Some(key));
    nb.ack(&*rig.mem, key, true, &mut || true).unwrap();
    sleep(&rig, 2, true);
    let mut p = Poll::default();
    rig.dir.borrow_mut().take_quiet_acks(&*rig.mem, &mut p);
    let mut answer = None;
    for _ in 0..20 {
        if let Some(x) = a.recv(&*rig.mem).unwrap() {
            answer = Some(x);
            break;
        }
        rig.step();
    }
    let (t, d) = answer.expect("the invalidation completes");
    assert_eq!(t, tag);
    assert_eq!(
        Response::decode(&d, Op::PageInv),
        Ok((tag, Response::Page(PageReply::Done { written: true }))),
        "node 2's stores are written back"
    );
    assert_eq!(rig.dir.borrow().quiet_stats(), QuietStats::default());
    assert_eq!(rig.dir.borrow().page_stats().writebacks, 1);
}
