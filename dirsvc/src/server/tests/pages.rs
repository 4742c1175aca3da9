//! Single-copy pages through the serving loop: mapping and
//! invalidation, a failed owner, writes through the file server, page
//! indexes from the region.

use super::*;

#[test]
fn single_copy_read_invalidate_with_a_sharer() {
    use fabric::proto::{PageKey, PageReply, PageReq};
    use nodepath::client::Notifier;
    let rig = Rig::new(2, true);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let mut nb = Notifier::new(&rig.layout, 2);
    // A file with one page of data.
    let Response::Attr(f) = rig.path(&mut a, Op::Create, "/f").unwrap() else {
        panic!()
    };
    let (off, _) = a.bulk(2).unwrap();
    rig.mem.write(off, &[7u8; 4096]);
    let w = Request::Data {
        gen: 0,
        op: Op::Write,
        slot: 2,
        at: 0,
        ino: f.ino,
        offset: 0,
        len: 4096,
    };
    rig.call(&mut a, &w).unwrap();
    let key = PageKey { ino: f.ino, idx: 0 };
    let (a0, _) = rig.layout.pool_gfns(1);
    let (b0, _) = rig.layout.pool_gfns(2);
    // Node 1 misses: the directory fills node 1's frame from disk.
    let reads0 = rig.dir.borrow().stats().disk_reads;
    let r = rig.call(&mut a, &Request::Page(PageReq::Read { key, frame: a0 }));
    assert_eq!(r, Ok(Response::Page(PageReply::Owner { gfn: a0 })));
    let mut page = [0u8; 4096];
    rig.mem.read(rig.layout.frame_off(a0).unwrap(), &mut page);
    assert_eq!(page, [7u8; 4096]);
    let reads1 = rig.dir.borrow().stats().disk_reads;
    assert!(reads1 > reads0);
    // Node 2 misses: it gets node 1's frame, no disk read, exported.
    let r = rig.call(&mut b, &Request::Page(PageReq::Read { key, frame: b0 }));
    assert_eq!(
        r,
        Ok(Response::Page(PageReply::Shared { owner: 1, gfn: a0 }))
    );
    assert_eq!(rig.dir.borrow().stats().disk_reads, reads1);
    let h = Header::new(&*rig.mem, rig.layout);
    assert!(h.exported(a0), "frame exported while shared");
    assert!(!h.exported(a0 + 1) && !h.exported(b0), "only that frame");
    // Node 2 offering node 1's frame as its own is refused.
    let r = rig.call(&mut b, &Request::Page(PageReq::Read { key, frame: a0 + 1 }));
    assert_eq!(r, Ok(Response::Page(PageReply::Refused)));
    // Node 1 reclaims: node 2 gets DIR_INV; the answer waits for the ack.
    let tag = a
        .send(
            &*rig.mem,
            &Request::Page(PageReq::Inv { key, dirty: false }),
            &mut || true,
        )
        .unwrap();
    for _ in 0..5 {
        rig.step();
    }
    assert_eq!(a.recv(&*rig.mem), Ok(None), "no answer before the ack");
    assert_eq!(nb.poll(&*rig.mem), Ok(Some(Notice::DirInv(key))));
    nb.ack(&*rig.mem, key, false, &mut || true).unwrap();
    rig.step();
    let (t, d) = a.recv(&*rig.mem).unwrap().expect("answer after the ack");
    assert_eq!(t, tag);
    assert_eq!(
        Response::decode(&d, Op::PageInv),
        Ok((tag, Response::Page(PageReply::Done { written: false })))
    );
    assert!(!h.exported(a0), "unexported after invalidation");
    assert!(rig.dir.borrow().pages().is_empty());
}

#[test]
fn failed_owner_tears_down_its_pages() {
    use fabric::proto::{PageKey, PageReq};
    use nodepath::client::Notifier;
    let rig = Rig::new(2, true);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let mut nb = Notifier::new(&rig.layout, 2);
    let Response::Attr(f) = rig.path(&mut a, Op::Create, "/g").unwrap() else {
        panic!()
    };
    let key = PageKey { ino: f.ino, idx: 0 };
    let (a0, _) = rig.layout.pool_gfns(1);
    let (b0, _) = rig.layout.pool_gfns(2);
    rig.call(&mut a, &Request::Page(PageReq::Read { key, frame: a0 }))
        .unwrap();
    rig.call(&mut b, &Request::Page(PageReq::Read { key, frame: b0 }))
        .unwrap();
    // Node 1 goes silent; node 2 keeps beating.
    let h = Header::new(&*rig.mem, rig.layout);
    assert!(rig.step_until_failed(1, &[2], 5000));
    assert_eq!(
        nb.poll(&*rig.mem),
        Ok(Some(Notice::DirInv(key))),
        "sharer told to unmap"
    );
    // Node 1 cannot rejoin while node 2 still maps its frame.
    h.set_node_state(1, NodeState::Joining);
    h.beat_node(2);
    rig.step();
    assert_eq!(h.node_state(1), Some(NodeState::Joining));
    nb.ack(&*rig.mem, key, false, &mut || true).unwrap();
    h.beat_node(2);
    rig.step();
    h.beat_node(2);
    rig.step();
    assert_eq!(h.node_state(1), Some(NodeState::Up));
    assert!(rig.dir.borrow().pages().is_empty());
}

#[test]
fn writes_refresh_the_single_copy_and_page_stats_have_names() {
    use fabric::proto::{PageDirStats, PageKey, PageReply, PageReq};
    let rig = Rig::new(2, true);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let Response::Attr(f) = rig.path(&mut a, Op::Create, "/w").unwrap() else {
        panic!()
    };
    let write = |c: &mut Client, byte: u8| {
        let (off, _) = c.bulk(2).unwrap();
        rig.mem.write(off, &[byte; 4096]);
        let w = Request::Data {
            gen: 0,
            op: Op::Write,
            slot: 2,
            at: 0,
            ino: f.ino,
            offset: 0,
            len: 4096,
        };
        rig.call(c, &w).unwrap();
    };
    write(&mut a, 1);
    // Node 1 owns the page: filled from disk into its frame.
    let key = PageKey { ino: f.ino, idx: 0 };
    let (a0, _) = rig.layout.pool_gfns(1);
    let r = rig.call(&mut a, &Request::Page(PageReq::Read { key, frame: a0 }));
    assert_eq!(r, Ok(Response::Page(PageReply::Owner { gfn: a0 })));
    let frame = |rig: &Rig| {
        let mut p = [0u8; 4096];
        rig.mem.read(rig.layout.frame_off(a0).unwrap(), &mut p);
        p
    };
    assert_eq!(frame(&rig), [1u8; 4096]);
    // Node 2 writes through the storage server: node 1's frame follows.
    write(&mut b, 2);
    assert_eq!(frame(&rig), [2u8; 4096], "owner's frame refreshed");
    // The counters travel by name.
    let Ok(Response::PageStats(s)) = rig.call(&mut b, &Request::PageStats) else {
        panic!("page stats")
    };
    assert_eq!(
        s,
        PageDirStats {
            entries: 1,
            page_requests: 1,
            fills: 1,
            remote_maps: 0,
            dir_invs: 0,
            writebacks: 0,
            max_batch: 1,
        }
    );
    assert_eq!(s, rig.dir.borrow().page_stats());
}

/// A page index from the region that would wrap its byte offset is
/// refused, not wrapped onto another page of the file.
#[test]
fn a_page_index_past_any_file_offset_is_refused() {
    let rig = Rig::new(1, true);
    let mut a = rig.join(1);
    let Response::Attr(f) = rig.path(&mut a, Op::Create, "/w").unwrap() else {
        panic!()
    };
    let (a0, _) = rig.layout.pool_gfns(1);
    for idx in [u64::MAX, u64::MAX / 4096 + 1] {
        let key = fabric::proto::PageKey { ino: f.ino, idx };
        let r = rig.call(
            &mut a,
            &Request::Page(fabric::proto::PageReq::Read { key, frame: a0 }),
        );
        assert!(
            !matches!(
                r,
                Ok(Response::Page(fabric::proto::PageReply::Owner { .. }))
            ),
            "idx {idx}: {r:?}"
        );
    }
    // The directory still serves the node.
    assert!(rig.path(&mut a, Op::Lookup, "/w").is_ok());
}
