//! Asynchronous writes: the loop against a heap region, the fake
//! asynchronous disk ([`crate::fakedisk`]) and real node clients. The disk
//! holds completions ([`Completion::Hold`]) so the tests see what is
//! answered while writes are in flight, and what waits for them.

use super::super::*;
use super::fills::Rig;
use crate::fakedisk::Completion;
use fabric::proto::{Errno, PageKey, PageReply, PageReq, Request, Response};
use nodepath::client::Client;

/// Node 1 owns pages `0..n` of a fresh `pages`-page file (page i holds
/// byte i + 1) and has overwritten each of its frames with `0xE0 + i`
/// (strong mode writes go to the owner's frame). Returns the inode.
fn dirty_pages(rig: &Rig, a: &mut Client, pages: u64, n: u64) -> u64 {
    let ino = rig.file(a, pages);
    let (a0, _) = rig.layout.pool_gfns(1);
    for i in 0..n {
        let key = PageKey { ino, idx: i };
        assert_eq!(
            rig.call(a, &Rig::read(key, a0 + i)),
            Ok(Response::Page(PageReply::Owner { gfn: a0 + i }))
        );
        let off = rig.layout.frame_off(a0 + i).unwrap();
        rig.mem.write(off, &[0xE0 + i as u8; 4096]);
    }
    ino
}

/// The owner evicts its dirty copy (INV with the dirty bit): with no
/// sharers the page is written back and forgotten, then the owner is
/// answered.
fn evict_req(key: PageKey) -> Request {
    Request::Page(PageReq::Inv { key, dirty: true })
}

/// Take `c`'s answers to evictions (INV), decoded, by tag.
fn answers(rig: &Rig, c: &mut Client) -> Vec<(u32, PageReply)> {
    let mut out = Vec::new();
    while let Some((tag, d)) = c.recv(&*rig.mem).unwrap() {
        match Response::decode(&d, Op::PageInv) {
            Ok((_, Response::Page(r))) => out.push((tag, r)),
            x => panic!("not an eviction's answer: {x:?}"),
        }
    }
    out
}

/// Read 4 KiB of `ino` at `offset` through the file server.
fn fs_read(rig: &Rig, c: &mut Client, ino: u64, offset: u64) -> Result<Vec<u8>, Errno> {
    let (off, _) = c.bulk(3).unwrap();
    let r = rig.call(
        c,
        &Request::Data {
            gen: 0,
            op: Op::Read,
            slot: 3,
            at: 0,
            ino,
            offset,
            len: 4096,
        },
    )?;
    let Response::Data { bytes, .. } = r else {
        panic!("{r:?}")
    };
    let mut v = vec![0u8; bytes as usize];
    rig.mem.read(off, &mut v);
    Ok(v)
}

#[test]
fn a_cached_page_lookup_is_answered_while_32_write_backs_are_in_flight() {
    let rig = Rig::new(3, 64, 32);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let mut c = rig.join(3);
    let ino = dirty_pages(&rig, &mut a, 34, 32);
    let (b0, _) = rig.layout.pool_gfns(2);
    let (c0, _) = rig.layout.pool_gfns(3);
    // Node 2 caches page 33.
    let k33 = PageKey { ino, idx: 33 };
    assert_eq!(
        rig.call(&mut b, &Rig::read(k33, b0)),
        Ok(Response::Page(PageReply::Owner { gfn: b0 }))
    );
    // Node 1 evicts its 32 dirty pages; the disk holds every write.
    rig.disk.set_mode(Completion::Hold);
    let tags: Vec<u32> = (0..32)
        .map(|i| {
            a.send(&*rig.mem, &evict_req(PageKey { ino, idx: i }), &mut || true)
                .unwrap()
        })
        .collect();
    rig.step();
    assert_eq!(
        rig.disk.writes_in_flight().len(),
        1,
        "the checksum-table block first"
    );
    assert!(rig.disk.complete(0));
    rig.step();
    assert_eq!(
        rig.disk.writes_in_flight().len(),
        32,
        "then the 32 data blocks at once"
    );
    assert_eq!(
        rig.dir.borrow().writes_pending(),
        1,
        "one job for the sweep's 32 write-backs"
    );
    assert!(
        answers(&rig, &mut a).is_empty(),
        "an eviction is answered once its write landed"
    );
    // Node 3's lookup of the page node 2 caches is answered meanwhile.
    assert_eq!(
        rig.call(&mut c, &Rig::read(k33, c0)),
        Ok(Response::Page(PageReply::Shared { owner: 2, gfn: b0 }))
    );
    assert_eq!(rig.disk.writes_in_flight().len(), 32, "still in flight");
    assert!(rig.dir.borrow().write_stats().answered_while_busy >= 1);
    // The writes land (last submitted first); every eviction is
    // answered, written, and the disk holds the frames' bytes.
    let mut got = Vec::new();
    for _ in 0..50 {
        rig.disk.complete_all_reversed();
        rig.step();
        got.extend(answers(&rig, &mut a));
        if got.len() == 32 {
            break;
        }
    }
    got.sort_by_key(|x| x.0);
    let want: Vec<(u32, PageReply)> = tags
        .iter()
        .map(|&t| (t, PageReply::Done { written: true }))
        .collect();
    assert_eq!(got, want);
    assert_eq!(rig.dir.borrow().writes_pending(), 0);
    rig.disk.set_mode(Completion::InOrder);
    for i in [0u64, 17, 31] {
        assert_eq!(
            fs_read(&rig, &mut b, ino, i * 4096).unwrap(),
            vec![0xE0 + i as u8; 4096]
        );
    }
    assert_eq!(
        fs_read(&rig, &mut b, ino, 32 * 4096).unwrap(),
        vec![33u8; 4096],
        "a page nobody wrote is untouched"
    );
    rig.dir.borrow().pages().check().unwrap();
}

#[test]
fn a_fill_of_a_block_with_a_write_in_flight_sees_the_new_bytes() {
    let rig = Rig::new(2, 64, 32);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let ino = dirty_pages(&rig, &mut a, 2, 1);
    let (b0, _) = rig.layout.pool_gfns(2);
    let k0 = PageKey { ino, idx: 0 };
    rig.disk.set_mode(Completion::Hold);
    let tag = a.send(&*rig.mem, &evict_req(k0), &mut || true).unwrap();
    rig.step();
    assert_eq!(rig.disk.writes_in_flight().len(), 1);
    let reads = rig.disk.submitted();
    // The device still holds the old bytes; node 2's miss is filled from
    // the write's bytes at once, with no disk read.
    assert_eq!(
        rig.call(&mut b, &Rig::read(k0, b0)),
        Ok(Response::Page(PageReply::Owner { gfn: b0 }))
    );
    assert_eq!(rig.frame(b0), [0xE0; 4096]);
    assert_eq!(rig.disk.submitted(), reads, "no device read");
    assert_eq!(rig.dir.borrow().write_stats().fills_from_pending, 1);
    // A file-server read of the block sees them too.
    assert_eq!(fs_read(&rig, &mut b, ino, 0).unwrap(), vec![0xE0; 4096]);
    // Then the write lands and the eviction is answered.
    assert!(answers(&rig, &mut a).is_empty());
    rig.disk.set_mode(Completion::InOrder);
    for _ in 0..10 {
        rig.step();
    }
    assert_eq!(
        answers(&rig, &mut a),
        vec![(tag, PageReply::Done { written: true })]
    );
}

#[test]
fn an_fsync_is_answered_only_after_its_writes_completed() {
    let rig = Rig::new(1, 64, 32);
    let mut a = rig.join(1);
    let ino = dirty_pages(&rig, &mut a, 3, 3);
    rig.disk.set_mode(Completion::Hold);
    // fsync: the three dirty pages written back, then the file flushed.
    let mut wb = Vec::new();
    for i in 0..3 {
        let key = PageKey { ino, idx: i };
        let r = Request::Page(PageReq::Writeback { key, dirty: true });
        wb.push(a.send(&*rig.mem, &r, &mut || true).unwrap());
    }
    let fsync = a
        .send(&*rig.mem, &Request::Fsync { ino }, &mut || true)
        .unwrap();
    rig.step();
    let mut seen = Vec::new();
    let mut rounds = 0;
    // Complete one write at a time: the fsync is not answered while any
    // of the file's writes waits or flies.
    while !rig.disk.in_flight().is_empty() {
        rounds += 1;
        assert!(rounds < 100);
        while let Some((t, _)) = a.recv(&*rig.mem).unwrap() {
            assert_ne!(t, fsync, "fsync answered with writes still pending");
            seen.push(t);
        }
        assert!(rig.disk.complete(0));
        rig.step();
    }
    assert!(
        rounds >= 5,
        "one job (one sweep): 3 data blocks, then the checksum and the record"
    );
    rig.step();
    while let Some((t, d)) = a.recv(&*rig.mem).unwrap() {
        if t == fsync {
            assert_eq!(
                Response::decode(&d, Op::Fsync).map(|x| x.1),
                Ok(Response::Ok)
            );
        }
        seen.push(t);
    }
    assert_eq!(seen.last(), Some(&fsync), "{seen:?}");
    wb.push(fsync);
    seen.sort();
    assert_eq!(seen, wb, "every write-back answered, then the fsync");
}

#[test]
fn an_fsync_flush_flies_while_the_loop_answers_other_requests() {
    let rig = Rig::new(1, 64, 32);
    let mut a = rig.join(1);
    let ino = dirty_pages(&rig, &mut a, 1, 1);
    rig.step();
    while a.recv(&*rig.mem).unwrap().is_some() {}
    rig.disk.set_mode(Completion::Hold);
    let flushes = rig.disk.with_disk(|d| d.flushes());
    let fsync = a
        .send(&*rig.mem, &Request::Fsync { ino }, &mut || true)
        .unwrap();
    rig.step();
    // Its file has no write pending: the flush goes out at once, and the
    // loop serves another request while it flies.
    assert_eq!(rig.disk.in_flight().len(), 1, "the flush is in flight");
    let nop = a.send(&*rig.mem, &Request::Nop, &mut || true).unwrap();
    rig.step();
    let got: Vec<u32> = core::iter::from_fn(|| a.recv(&*rig.mem).unwrap().map(|x| x.0)).collect();
    assert_eq!(got, [nop], "only the other request answered");
    assert_eq!(rig.disk.with_disk(|d| d.flushes()), flushes);
    assert!(rig.disk.complete(0));
    rig.step();
    let (t, d) = a.recv(&*rig.mem).unwrap().expect("fsync answered");
    assert_eq!(t, fsync);
    assert_eq!(
        Response::decode(&d, Op::Fsync).map(|x| x.1),
        Ok(Response::Ok)
    );
    assert_eq!(rig.disk.with_disk(|d| d.flushes()), flushes + 1);
    assert_eq!(rig.dir.borrow().async_flushes(), 1);
}

#[test]
fn a_file_server_write_is_answered_when_it_landed_and_reads_see_it_before() {
    let rig = Rig::new(2, 64, 32);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let ino = rig.file(&mut a, 2);
    rig.disk.set_mode(Completion::Hold);
    let tag = rig.send_write(&mut a, ino, 1, 0x77);
    rig.step();
    assert!(a.recv(&*rig.mem).unwrap().is_none(), "not answered yet");
    assert!(!rig.disk.writes_in_flight().is_empty());
    // Another node's read of the block is answered meanwhile, new bytes.
    assert_eq!(fs_read(&rig, &mut b, ino, 4096).unwrap(), vec![0x77; 4096]);
    // A failed write of the job answers the writer with an I/O error.
    let w2 = Request::Data {
        gen: 0,
        op: Op::Write,
        slot: 2,
        at: 0,
        ino,
        offset: 0,
        len: 4096,
    };
    rig.disk.set_mode(Completion::InOrder);
    for _ in 0..10 {
        rig.step();
    }
    let (t, d) = a.recv(&*rig.mem).unwrap().expect("answered");
    assert_eq!(t, tag);
    assert!(matches!(
        Response::decode(&d, Op::Write).map(|x| x.1),
        Ok(Response::Data { bytes: 4096, .. })
    ));
    let old = fs_read(&rig, &mut b, ino, 0).unwrap();
    rig.disk.fail_next_writes(1);
    assert_eq!(rig.call(&mut a, &w2), Err(Errno::Io));
    assert_eq!(rig.dir.borrow().write_stats().failed, 1);
    // Its first phase (the checksum table) failed, so its data and record
    // were never sent: the block reads its old bytes, which the checksum
    // kept from before the write accepts.
    assert_eq!(fs_read(&rig, &mut b, ino, 0).unwrap(), old);
    let bytes = rig.disk.with_disk(|d| d.blocks().to_vec());
    let mut fs = flatfs::Fs::mount(flatfs::MemDisk::from_bytes(bytes)).unwrap();
    assert_eq!(fs.check_data(), Ok(vec![]), "and so does the device");
}

/// Send a path request (`op` on `path`, staged in bulk slot 0) without
/// waiting; its tag.
fn send_path(rig: &Rig, c: &mut Client, op: Op, path: &str) -> u32 {
    let (off, _) = c.bulk(0).unwrap();
    rig.mem.write(off, path.as_bytes());
    let req = Request::Path {
        op,
        slot: 0,
        at: 0,
        len: path.len() as u32,
        exclusive: false,
    };
    c.send(&*rig.mem, &req, &mut || true).unwrap()
}

/// What a fresh mount of the fake disk's bytes (the device as it is
/// now, pending writes not landed) says `path` is.
fn on_disk(rig: &Rig, path: &str) -> Result<fabric::proto::Attr, Errno> {
    let bytes = rig.disk.with_disk(|d| d.blocks().to_vec());
    Fs::mount(flatfs::MemDisk::from_bytes(bytes))
        .unwrap()
        .lookup(path)
}

#[test]
fn a_namespace_change_is_queued_behind_the_writes_in_flight_and_the_loop_goes_on() {
    let rig = Rig::new(2, 64, 32);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let ino = dirty_pages(&rig, &mut a, 1, 1);
    rig.disk.set_mode(Completion::Hold);
    a.send(&*rig.mem, &evict_req(PageKey { ino, idx: 0 }), &mut || true)
        .unwrap();
    rig.step();
    assert_eq!(rig.disk.writes_in_flight().len(), 1);
    // A create shares the inode-table block with the write-back: its
    // writes are staged as a barrier job behind it, not written
    // synchronously after a wait.
    let t = send_path(&rig, &mut a, Op::Create, "/g");
    rig.step();
    assert_eq!(rig.dir.borrow().writes_pending(), 2);
    assert_eq!(rig.disk.writes_in_flight().len(), 1, "the create waits");
    assert_eq!(rig.dir.borrow().write_stats().barriers, 0, "no drain");
    assert_eq!(rig.dir.borrow().write_stats().barrier_jobs, 1);
    assert_eq!(a.recv(&*rig.mem).unwrap(), None, "answered once landed");
    // The loop goes on: another node's lookup sees the new file already
    // (the file system's caches and the overlay hold it).
    let (off, _) = b.bulk(0).unwrap();
    rig.mem.write(off, b"/g");
    let look = Request::Path {
        op: Op::Lookup,
        slot: 0,
        at: 0,
        len: 2,
        exclusive: false,
    };
    let Ok(Response::Attr(g)) = rig.call(&mut b, &look) else {
        panic!("lookup of /g")
    };
    assert_eq!(on_disk(&rig, "/g"), Err(Errno::NotFound), "not landed yet");
    // The write-back lands; then the create's writes go out.
    assert!(rig.disk.complete(0));
    rig.step();
    assert!(!rig.disk.writes_in_flight().is_empty());
    rig.disk.set_mode(Completion::InOrder);
    let mut got = Vec::new();
    for _ in 0..50 {
        rig.step();
        while let Some((tag, d)) = a.recv(&*rig.mem).unwrap() {
            got.push(tag);
            if tag == t {
                let r = Response::decode(&d, Op::Create).unwrap().1;
                assert_eq!(r, Response::Attr(g));
            }
        }
        if got.contains(&t) {
            break;
        }
    }
    assert_eq!(got.len(), 2, "the eviction and the create: {got:?}");
    assert_eq!(on_disk(&rig, "/g").map(|x| x.ino), Ok(g.ino));
    assert_eq!(rig.dir.borrow().writes_pending(), 0);
}

#[test]
fn an_unlink_lands_before_a_later_write_reuses_its_blocks() {
    let rig = Rig::new(2, 64, 32);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let old = rig.file(&mut a, 2);
    rig.disk.set_mode(Completion::Hold);
    let t = send_path(&rig, &mut a, Op::Unlink, "/f");
    rig.step();
    let unlink_writes = rig.disk.writes_in_flight();
    assert!(!unlink_writes.is_empty());
    // Node 2 creates a file and writes it while the unlink's writes fly:
    // the freed blocks may be handed out again, but no write of the new
    // file reaches the device before the unlink landed.
    let c = send_path(&rig, &mut b, Op::Create, "/h");
    rig.step();
    assert_eq!(rig.disk.writes_in_flight(), unlink_writes, "held behind");
    rig.disk.set_mode(Completion::InOrder);
    let Ok(Response::Attr(h)) = rig.take_answer(&mut b, c, Op::Create) else {
        panic!("create /h")
    };
    assert_eq!(rig.take_answer(&mut a, t, Op::Unlink), Ok(Response::Ok));
    rig.disk.set_mode(Completion::Hold);
    let w = rig.send_write(&mut b, h.ino, 0, 0x77);
    rig.step();
    assert!(!rig.disk.writes_in_flight().is_empty());
    rig.disk.set_mode(Completion::InOrder);
    let r = rig.take_answer(&mut b, w, Op::Write);
    assert!(matches!(r, Ok(Response::Data { bytes: 4096, .. })), "{r:?}");
    assert_eq!(on_disk(&rig, "/f"), Err(Errno::NotFound));
    assert!(fs_read(&rig, &mut b, h.ino, 0).unwrap() == vec![0x77; 4096]);
    if h.ino != old {
        assert_eq!(fs_read(&rig, &mut b, old, 0), Err(Errno::NotFound));
    }
    assert_eq!(rig.dir.borrow().write_stats().barriers, 0);
    assert_eq!(rig.dir.borrow().write_stats().barrier_jobs, 2);
}

/// Node 1 sends `pages` (page index, byte) writes of `ino` together, each
/// at its own sub-slot of slot 2, as `fs_write_batch` does; the directory
/// takes them in one sweep. Returns (tag, answer) in tag order.
fn send_writes(rig: &Rig, a: &mut Client, ino: u64, pages: &[(u64, u8)]) -> Vec<(u32, Response)> {
    let (off, _) = a.bulk(2).unwrap();
    let mut tags = Vec::new();
    for (k, (idx, v)) in pages.iter().enumerate() {
        rig.mem.write(off + k * 4096, &[*v; 4096]);
        let w = Request::Data {
            gen: 0,
            op: Op::Write,
            slot: 2,
            at: (k * 4096) as u32,
            ino,
            offset: idx * 4096,
            len: 4096,
        };
        tags.push(a.send(&*rig.mem, &w, &mut || true).unwrap());
    }
    let mut out = Vec::new();
    for _ in 0..100 {
        rig.step();
        while let Some((t, d)) = a.recv(&*rig.mem).unwrap() {
            out.push((t, Response::decode(&d, Op::Write).unwrap().1));
        }
        if out.len() == pages.len() {
            break;
        }
    }
    out.sort_by_key(|(t, _)| *t);
    assert_eq!(out.iter().map(|x| x.0).collect::<Vec<_>>(), tags);
    out
}

#[test]
fn consecutive_writes_of_one_file_go_to_the_disk_as_one_job() {
    let rig = Rig::new(2, 64, 32);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let ino = rig.file(&mut a, 32);
    let v0 = match rig.call(&mut a, &Request::Getattr { ino }) {
        Ok(Response::Attr(at)) => at.version,
        r => panic!("{r:?}"),
    };
    rig.disk.set_mode(Completion::InOrder);
    let before = rig.dir.borrow().write_stats();
    let pages: Vec<(u64, u8)> = (0..8).map(|k| (k * 4, 0xA0 + k as u8)).collect();
    let out = send_writes(&rig, &mut a, ino, &pages);
    // Each answered as if alone, in ring order: its own version.
    for (k, (_, r)) in out.iter().enumerate() {
        match r {
            Response::Data { bytes: 4096, attr } => {
                assert_eq!(attr.version, v0 + 1 + k as u64, "write {k}");
                assert_eq!(attr.size, 32 * 4096);
            }
            r => panic!("write {k}: {r:?}"),
        }
    }
    let after = rig.dir.borrow().write_stats();
    assert_eq!(after.grouped - before.grouped, 7);
    assert_eq!(after.jobs - before.jobs, 1);
    // 8 data blocks, the checksum-table and inode-table blocks once each
    // (alone: 3 block writes per write).
    let blocks = after.submitted - before.submitted;
    assert!(blocks <= 8 + 2 + 1, "{blocks} block writes for 8 pages");
    for (idx, v) in &pages {
        assert_eq!(
            fs_read(&rig, &mut b, ino, idx * 4096).unwrap(),
            vec![*v; 4096]
        );
    }
    assert_eq!(fs_read(&rig, &mut b, ino, 4096).unwrap(), vec![2; 4096]);
}

#[test]
fn a_failed_block_write_of_a_group_fails_every_write_of_it() {
    let rig = Rig::new(1, 64, 32);
    let mut a = rig.join(1);
    let ino = rig.file(&mut a, 8);
    rig.disk.set_mode(Completion::InOrder);
    rig.disk.fail_next_writes(1);
    let out = send_writes(&rig, &mut a, ino, &[(1, 0x11), (3, 0x33), (5, 0x55)]);
    for (_, r) in &out {
        assert_eq!(*r, Response::Err(Errno::Io));
    }
    // Another write of the file goes on (a group of its own).
    let out = send_writes(&rig, &mut a, ino, &[(2, 0x22)]);
    assert!(
        matches!(out[0].1, Response::Data { bytes: 4096, .. }),
        "{:?}",
        out[0].1
    );
}

#[test]
fn a_write_group_ends_at_another_request() {
    let rig = Rig::new(1, 64, 32);
    let mut a = rig.join(1);
    let ino = rig.file(&mut a, 8);
    rig.disk.set_mode(Completion::Hold);
    let (off, _) = a.bulk(2).unwrap();
    rig.mem.write(off, &[0x44; 4096]);
    let w = |idx: u64| Request::Data {
        gen: 0,
        op: Op::Write,
        slot: 2,
        at: 0,
        ino,
        offset: idx * 4096,
        len: 4096,
    };
    let before = rig.dir.borrow().write_stats();
    a.send(&*rig.mem, &w(0), &mut || true).unwrap();
    let fsync = a
        .send(&*rig.mem, &Request::Fsync { ino }, &mut || true)
        .unwrap();
    a.send(&*rig.mem, &w(1), &mut || true).unwrap();
    rig.step();
    // Two jobs: the fsync between the writes closed the first group, and
    // it waits for that job (the disk holds every completion).
    let s = rig.dir.borrow().write_stats();
    assert_eq!((s.jobs - before.jobs, s.grouped - before.grouped), (2, 0));
    assert!(a.recv(&*rig.mem).unwrap().is_none(), "nothing answered yet");
    rig.disk.set_mode(Completion::InOrder);
    let mut tags = Vec::new();
    for _ in 0..100 {
        rig.step();
        while let Some((t, _)) = a.recv(&*rig.mem).unwrap() {
            tags.push(t);
        }
    }
    assert_eq!(tags.len(), 3);
    assert!(tags.contains(&fsync));
}

/// The write queue is bounded: while it holds `write_backlog_max` block
/// writes, no node's new request is taken (it waits in its ring), and it
/// is served once the disk drained the queue. Without the bound, nodes
/// writing faster than the disk grew the queue until the directory's heap
/// was exhausted.
#[test]
fn new_requests_wait_while_the_write_queue_is_full() {
    let rig = Rig::with_config(3, 64, 32, |c| c.write_backlog_max = 4);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let mut c = rig.join(3);
    let ino = dirty_pages(&rig, &mut a, 9, 8);
    let (b0, _) = rig.layout.pool_gfns(2);
    let (c0, _) = rig.layout.pool_gfns(3);
    let k8 = PageKey { ino, idx: 8 };
    assert_eq!(
        rig.call(&mut b, &Rig::read(k8, b0)),
        Ok(Response::Page(PageReply::Owner { gfn: b0 }))
    );
    // Node 1 evicts its 8 dirty pages; the disk holds every write.
    rig.disk.set_mode(Completion::Hold);
    for i in 0..8 {
        a.send(&*rig.mem, &evict_req(PageKey { ino, idx: i }), &mut || true)
            .unwrap();
    }
    rig.step();
    // The sweep stopped taking evictions once its group held the limit:
    // one eviction is a data block, a checksum block and the record.
    let held = rig.dir.borrow().write_stats().max_held;
    assert!((4..8).contains(&held), "{held} block writes held");
    assert!(rig.dir.borrow().write_stats().throttled > 0);
    // Node 3's lookup waits in its ring while the queue is full.
    c.send(&*rig.mem, &Rig::read(k8, c0), &mut || true).unwrap();
    for _ in 0..5 {
        rig.step();
    }
    assert!(
        c.recv(&*rig.mem).unwrap().is_none(),
        "no request is taken while the write queue is full"
    );
    assert!(rig.dir.borrow().write_stats().throttled > 0);
    // The disk drains the queue; the lookup is served.
    rig.disk.set_mode(Completion::InOrder);
    let mut got = None;
    for _ in 0..50 {
        rig.disk.complete_all_reversed();
        rig.step();
        if let Some((_, d)) = c.recv(&*rig.mem).unwrap() {
            got = Some(Response::decode(&d, Op::PageRead).unwrap().1);
            break;
        }
    }
    assert_eq!(
        got,
        Some(Response::Page(PageReply::Shared { owner: 2, gfn: b0 }))
    );
    let mut evicted = Vec::new();
    for _ in 0..50 {
        rig.disk.complete_all_reversed();
        rig.step();
        evicted.extend(answers(&rig, &mut a));
    }
    assert_eq!(evicted.len(), 8, "every eviction answered");
    assert_eq!(rig.dir.borrow().writes_pending(), 0);
}
