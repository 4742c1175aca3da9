//! A file's teardown (unlink, truncate): one INV_RANGE per node per run
//! of its pages and one ack each, with sharers asleep, failing, or
//! reading the range meanwhile.

use super::*;
use fabric::doorbell::{finish_sleep, prepare_sleep, seqcst_fence, PeerMap};
use fabric::proto::{InvStats, PageKey, PageReply, PageReq, PageSpan};
use nodepath::client::Notifier;

const PAGES: u64 = 8;

/// A new file `name` of [`PAGES`] pages: node 1 owns every page, node 2
/// maps every page. Returns its inode.
fn shared_file(rig: &Rig, a: &mut Client, b: &mut Client, name: &str) -> u64 {
    let Response::Attr(f) = rig.path(a, Op::Create, name).unwrap() else {
        panic!()
    };
    let grow = Request::Setattr {
        gen: 0,
        ino: f.ino,
        size: PAGES * 4096,
        expect: None,
        locked: false,
    };
    assert!(matches!(rig.call(a, &grow), Ok(Response::Attr(_))));
    let (a0, _) = rig.layout.pool_gfns(1);
    let (b0, _) = rig.layout.pool_gfns(2);
    for idx in 0..PAGES {
        let key = PageKey { ino: f.ino, idx };
        let r = rig.call(
            a,
            &Request::Page(PageReq::Read {
                key,
                frame: a0 + idx,
            }),
        );
        assert_eq!(r, Ok(Response::Page(PageReply::Owner { gfn: a0 + idx })));
        let r = rig.call(
            b,
            &Request::Page(PageReq::Read {
                key,
                frame: b0 + idx,
            }),
        );
        assert!(
            matches!(r, Ok(Response::Page(PageReply::Shared { .. }))),
            "{r:?}"
        );
    }
    f.ino
}

/// The next invalidation notice on a node's ring (past `Sharers`
/// counts): `(span, is INV_RANGE)`.
fn next_notice(rig: &Rig, n: &mut Notifier) -> Option<(PageSpan, bool)> {
    loop {
        match n.poll(&*rig.mem) {
            Ok(Some(Notice::DirInv(k))) => return Some((PageSpan::page(k), false)),
            Ok(Some(Notice::InvRange(s))) => return Some((s, true)),
            Ok(Some(Notice::Sharers { .. })) => continue,
            _ => return None,
        }
    }
}

fn ack_range(rig: &Rig, n: &mut Notifier, span: PageSpan) {
    n.send(
        &*rig.mem,
        Notice::InvRangeAck { span, dirty: false },
        &mut || true,
    )
    .unwrap();
    rig.step();
}

fn inv_stats(rig: &Rig) -> InvStats {
    rig.dir.borrow().inv_stats()
}

#[test]
fn unlink_tells_each_node_once_and_takes_one_ack_each() {
    let rig = Rig::new(2, true);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let mut na = Notifier::new(&rig.layout, 1);
    let mut nb = Notifier::new(&rig.layout, 2);
    let ino = shared_file(&rig, &mut a, &mut b, "/u");
    assert_eq!(rig.path(&mut a, Op::Unlink, "/u"), Ok(Response::Ok));
    let all = PageSpan::new(ino, 0, PAGES).unwrap();
    assert_eq!(next_notice(&rig, &mut nb), Some((all, true)));
    assert_eq!(next_notice(&rig, &mut nb), None, "one notice for the file");
    // The owner frees nothing while the sharer maps the frames.
    assert_eq!(next_notice(&rig, &mut na), None);
    ack_range(&rig, &mut nb, all);
    assert_eq!(next_notice(&rig, &mut na), Some((all, true)));
    assert_eq!(next_notice(&rig, &mut na), None);
    ack_range(&rig, &mut na, all);
    assert!(rig.dir.borrow().pages().is_empty());
    let s = inv_stats(&rig);
    assert_eq!((s.dir_invs, s.acks), (0, 0));
    assert_eq!(
        (s.range_invs, s.range_acks, s.range_pages),
        (2, 2, 2 * PAGES)
    );
}

#[test]
fn a_quiet_sharer_is_not_woken_for_a_teardown_and_its_late_ack_is_dropped() {
    let rig = Rig::new(2, true);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let mut na = Notifier::new(&rig.layout, 1);
    let mut nb = Notifier::new(&rig.layout, 2);
    let ino = shared_file(&rig, &mut a, &mut b, "/q");
    let map = PeerMap::new(&*rig.mem);
    assert!(prepare_sleep(&map, 2, true, seqcst_fence, || false));
    assert_eq!(rig.path(&mut a, Op::Unlink, "/q"), Ok(Response::Ok));
    let p = rig.step();
    assert_eq!(p.noticed & 0b10, 0, "no doorbell for the quiet sleeper");
    assert_eq!(rig.dir.borrow().quiet_stats().taken, 1);
    // The owner is told at once and its ack ends the teardown.
    let all = PageSpan::new(ino, 0, PAGES).unwrap();
    assert_eq!(next_notice(&rig, &mut na), Some((all, true)));
    ack_range(&rig, &mut na, all);
    assert!(rig.dir.borrow().pages().is_empty());
    // Node 2 wakes, serves the notice first, acks: the ack is dropped.
    finish_sleep(&map, 2, seqcst_fence);
    assert_eq!(next_notice(&rig, &mut nb), Some((all, true)));
    ack_range(&rig, &mut nb, all);
    assert_eq!(rig.dir.borrow().quiet_stats().absorbed, 1);
    assert_eq!(
        inv_stats(&rig).range_acks,
        2,
        "the owner's and the taken one"
    );
}

#[test]
fn a_sharer_that_fails_before_acking_lets_the_teardown_finish() {
    let rig = Rig::new(2, true);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let mut na = Notifier::new(&rig.layout, 1);
    let mut nb = Notifier::new(&rig.layout, 2);
    let ino = shared_file(&rig, &mut a, &mut b, "/f");
    // Truncate to 3 pages: pages 3.. go.
    let cut = Request::Setattr {
        gen: 0,
        ino,
        size: 3 * 4096,
        expect: None,
        locked: false,
    };
    assert!(matches!(rig.call(&mut a, &cut), Ok(Response::Attr(_))));
    let tail = PageSpan::new(ino, 3, PAGES - 3).unwrap();
    assert_eq!(next_notice(&rig, &mut nb), Some((tail, true)));
    // Node 2 goes silent without acking; node 1 keeps beating.
    assert!(rig.step_until_failed(2, &[1], 5000));
    assert_eq!(next_notice(&rig, &mut na), Some((tail, true)));
    ack_range(&rig, &mut na, tail);
    let d = rig.dir.borrow();
    let left: Vec<u64> = d.pages().entries().map(|(k, _)| k.idx).collect();
    assert_eq!(left, vec![0, 1, 2], "the head stays cached");
}

#[test]
fn a_read_racing_a_truncate_waits_and_then_sees_the_new_file() {
    let rig = Rig::new(3, true);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let mut c = rig.join(3);
    let mut na = Notifier::new(&rig.layout, 1);
    let mut nb = Notifier::new(&rig.layout, 2);
    let ino = shared_file(&rig, &mut a, &mut b, "/t");
    // Page 5 written through the owner's frame (strong mode), then the
    // file is cut to 2 pages.
    let (a0, _) = rig.layout.pool_gfns(1);
    let off = rig.layout.frame_off(a0 + 5).unwrap();
    rig.mem.write(off, &[0xAB; 4096]);
    let cut = Request::Setattr {
        gen: 0,
        ino,
        size: 2 * 4096,
        expect: None,
        locked: false,
    };
    assert!(matches!(rig.call(&mut a, &cut), Ok(Response::Attr(_))));
    // Node 3 reads page 5 while node 2 has not acked: it waits (Retry),
    // it is never given the old frame.
    let key = PageKey { ino, idx: 5 };
    let (c0, _) = rig.layout.pool_gfns(3);
    let r = rig.call(&mut c, &Request::Page(PageReq::Read { key, frame: c0 }));
    assert_eq!(r, Ok(Response::Page(PageReply::Retry)));
    let tail = PageSpan::new(ino, 2, PAGES - 2).unwrap();
    assert_eq!(next_notice(&rig, &mut nb), Some((tail, true)));
    ack_range(&rig, &mut nb, tail);
    assert_eq!(next_notice(&rig, &mut na), Some((tail, true)));
    ack_range(&rig, &mut na, tail);
    // Now the read is filled from the file as it is: past its end, zeros
    // (the old bytes were neither written back nor handed out).
    let r = rig.call(&mut c, &Request::Page(PageReq::Read { key, frame: c0 }));
    assert_eq!(r, Ok(Response::Page(PageReply::Owner { gfn: c0 })));
    let mut page = [1u8; 4096];
    rig.mem.read(rig.layout.frame_off(c0).unwrap(), &mut page);
    assert!(page.iter().all(|&x| x == 0));
    assert_eq!(rig.dir.borrow().page_stats().writebacks, 0);
}

/// A sharer with a miss in flight of one page of the span acks the runs
/// around it at once and that page alone later: the teardown goes on
/// with each part, and nothing stays outstanding once all are in (a
/// stale outstanding notice would wake the node for every later one).
#[test]
fn a_span_acked_in_parts_completes_and_leaves_nothing_outstanding() {
    let rig = Rig::new(2, true);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let mut na = Notifier::new(&rig.layout, 1);
    let mut nb = Notifier::new(&rig.layout, 2);
    let ino = shared_file(&rig, &mut a, &mut b, "/p");
    assert_eq!(rig.path(&mut a, Op::Unlink, "/p"), Ok(Response::Ok));
    let all = PageSpan::new(ino, 0, PAGES).unwrap();
    assert_eq!(next_notice(&rig, &mut nb), Some((all, true)));
    let outstanding = |rig: &Rig| rig.dir.borrow().inval.outstanding(2);
    ack_range(&rig, &mut nb, PageSpan::new(ino, 0, 3).unwrap());
    ack_range(&rig, &mut nb, PageSpan::new(ino, 4, PAGES - 4).unwrap());
    assert_eq!(outstanding(&rig), 1, "page 3 is still owed");
    // The owner frees the acked pages meanwhile; page 3 waits.
    let mut told = Vec::new();
    while let Some((s, range)) = next_notice(&rig, &mut na) {
        assert!(range && !s.contains(&PageKey { ino, idx: 3 }), "{s:?}");
        told.push(s);
    }
    assert_eq!(told.iter().map(|s| s.count).sum::<u64>(), PAGES - 1);
    nb.ack(&*rig.mem, PageKey { ino, idx: 3 }, false, &mut || true)
        .unwrap();
    rig.step();
    assert_eq!(outstanding(&rig), 0);
    assert_eq!(
        next_notice(&rig, &mut na),
        Some((PageSpan::new(ino, 3, 1).unwrap(), true))
    );
    told.push(PageSpan::new(ino, 3, 1).unwrap());
    for s in told {
        ack_range(&rig, &mut na, s);
    }
    assert!(rig.dir.borrow().pages().is_empty());
    assert_eq!(rig.dir.borrow().inval.outstanding(1), 0);
}
