//! Delegated ownership through the rings: a reader elsewhere waits for one
//! recall and is served from the holder's list, read from the region; a
//! holder that fails has its listed pages written back from the region.

use super::*;
use fabric::proto::{DelegList, DelegPage, DelegRange, PageKey, PageReply, PageReq};
use nodepath::client::Notifier;

const DATA: &[u8] = b"written under a delegation";

/// Node 1 creates a file, takes its first range and writes page 0 in its
/// frame 1 with no page request (its list frame is its frame 9), then
/// publishes the size. Returns the page and its frame.
fn delegated_page(rig: &Rig, a: &mut Client) -> (PageKey, u64) {
    rig.dir.borrow_mut().pages.set_delegation(true);
    let Response::Attr(f) = rig.path(a, Op::Create, "/d").unwrap() else {
        panic!()
    };
    let range = DelegRange::new(f.ino, 0).unwrap();
    let (a0, _) = rig.layout.pool_gfns(1);
    let (list, gfn) = (a0 + 9, a0 + 1);
    let grant = rig.call(a, &Request::Page(PageReq::Delegate { range, list }));
    assert_eq!(
        grant,
        Ok(Response::Page(PageReply::Delegated { granted: true }))
    );
    let key = PageKey { ino: f.ino, idx: 0 };
    // The list record first, then the store.
    let img = DelegList::encode(
        range,
        &[DelegPage {
            key,
            gfn,
            dirty: true,
        }],
    )
    .unwrap();
    rig.mem.write(rig.layout.frame_off(list).unwrap(), &img);
    rig.mem.write(rig.layout.frame_off(gfn).unwrap(), DATA);
    let grow = Request::Setattr {
        gen: 0,
        ino: f.ino,
        size: 4096,
        expect: None,
        locked: false,
    };
    assert!(matches!(rig.call(a, &grow), Ok(Response::Attr(_))));
    assert!(rig.dir.borrow().pages().is_empty(), "no page request");
    (key, gfn)
}

/// Step the directory (beating `alive`) until `c` gets an answer.
fn answer(rig: &Rig, c: &mut Client, alive: &[u32]) -> Option<(u32, Response)> {
    let h = Header::new(&*rig.mem, rig.layout);
    for _ in 0..200 {
        for n in alive {
            h.beat_node(*n);
        }
        rig.step();
        if let Some((_, d)) = c.recv(&*rig.mem).unwrap() {
            return Some(Response::decode(&d, Op::PageRead).unwrap());
        }
    }
    None
}

fn frame_bytes(rig: &Rig, gfn: u64) -> Vec<u8> {
    let mut b = vec![0u8; DATA.len()];
    rig.mem.read(rig.layout.frame_off(gfn).unwrap(), &mut b);
    b
}

#[test]
fn a_reader_elsewhere_is_served_from_the_holders_list_after_one_recall() {
    let rig = Rig::new(2, true);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let mut na = Notifier::new(&rig.layout, 1);
    let (key, gfn) = delegated_page(&rig, &mut a);
    let (b0, _) = rig.layout.pool_gfns(2);
    let read = Request::Page(PageReq::Read { key, frame: b0 });
    let tag = b.send(&*rig.mem, &read, &mut || true).unwrap();
    rig.step();
    assert_eq!(b.recv(&*rig.mem).unwrap(), None, "parked");
    let range = DelegRange::of(key);
    assert_eq!(na.poll(&*rig.mem), Ok(Some(Notice::Recall(range))));
    assert_eq!(na.poll(&*rig.mem), Ok(None), "one notice");
    let back = rig.call(&mut a, &Request::Page(PageReq::DelegReturn { range }));
    assert_eq!(back, Ok(Response::Page(PageReply::Done { written: false })));
    assert_eq!(
        answer(&rig, &mut b, &[1, 2]),
        Some((tag, Response::Page(PageReply::Shared { owner: 1, gfn })))
    );
    assert_eq!(frame_bytes(&rig, gfn), DATA, "the holder's write, mapped");
    let e = rig.dir.borrow().pages().entry(&key).unwrap();
    assert_eq!((e.owner, e.gfn, e.dirty), (1, gfn, true));
    let s = rig.call(&mut b, &Request::DelegStats);
    let want = fabric::proto::DelegStats {
        granted: 1,
        denied: 0,
        recalled: 1,
        returned: 1,
        pages: 1,
        parked: 1,
    };
    assert_eq!(s, Ok(Response::DelegStats(want)));
}

#[test]
fn a_holder_that_fails_has_its_listed_pages_written_back_before_the_reader_is_filled() {
    let rig = Rig::new(2, true);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let (key, _) = delegated_page(&rig, &mut a);
    let (b0, _) = rig.layout.pool_gfns(2);
    let read = Request::Page(PageReq::Read { key, frame: b0 });
    let tag = b.send(&*rig.mem, &read, &mut || true).unwrap();
    rig.step();
    assert_eq!(b.recv(&*rig.mem).unwrap(), None, "parked");
    // Node 1 goes silent before it answers the recall.
    assert!(rig.step_until_failed(1, &[2], 5000));
    assert_eq!(
        answer(&rig, &mut b, &[2]),
        Some((tag, Response::Page(PageReply::Owner { gfn: b0 })))
    );
    assert_eq!(
        frame_bytes(&rig, b0),
        DATA,
        "filled with the holder's write"
    );
    assert!(!rig.dir.borrow().pages().holds_frames_of(1));
}
