//! Runs of pages in one request (`server/runs.rs`) and clustered
//! write-back: one entry per contiguous run of a file's pages, answered
//! page by page; its write-backs go to the disk as one job whose
//! contiguous data blocks are one device request and whose checksum-table
//! block and inode record are written once.

use super::super::*;
use super::fills::Rig;
use crate::fakedisk::Completion;
use fabric::proto::{
    run_mask, Notice, PageKey, PageReply, PageReq, PageRun, PageSpan, Request, Response, RunKind,
    RunReply,
};
use nodepath::client::{Client, Notifier};

/// Node 1 owns pages `0..n` of a fresh `pages`-page file and has
/// overwritten each of its frames with `0xA0 + i` (strong mode writes go
/// to the owner's frame). Returns the inode.
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
        rig.mem.write(off, &[0xA0u8.wrapping_add(i as u8); 4096]);
    }
    ino
}

fn run(kind: RunKind, ino: u64, first: u64, count: u64, dirty: u64) -> Request {
    Request::PageRun(PageRun::new(kind, PageSpan::new(ino, first, count).unwrap(), dirty).unwrap())
}

/// Send `req`, step until it is answered; its answer.
fn run_call(rig: &Rig, c: &mut Client, req: &Request) -> RunReply {
    match rig.call(c, req) {
        Ok(Response::Run(r)) => r,
        x => panic!("not a run's answer: {x:?}"),
    }
}

/// The write requests since `from`, by phase of their first block: (data
/// requests, data blocks, checksum-table requests, inode-table requests).
fn writes_by_phase(rig: &Rig, from: usize) -> (usize, u64, usize, usize) {
    let dir = rig.dir.borrow();
    let fs = dir.fs.as_ref().unwrap();
    let mut out = (0, 0, 0, 0);
    for &(lba, n) in &rig.disk.write_requests()[from..] {
        match fs.write_phase(lba) {
            flatfs::DATA_PHASE => {
                out.0 += 1;
                out.1 += n;
            }
            0 => out.2 += 1,
            _ => out.3 += 1,
        }
    }
    out
}

fn file_bytes(rig: &Rig, c: &mut Client, ino: u64, idx: u64) -> u8 {
    let (off, _) = c.bulk(3).unwrap();
    let r = rig.call(
        c,
        &Request::Data {
            op: Op::Read,
            slot: 3,
            at: 0,
            ino,
            offset: idx * 4096,
            len: 4096,
            gen: 0,
        },
    );
    assert!(matches!(r, Ok(Response::Data { bytes: 4096, .. })), "{r:?}");
    let mut v = vec![0u8; 4096];
    rig.mem.read(off, &mut v);
    assert!(v.iter().all(|&b| b == v[0]));
    v[0]
}

#[test]
fn a_64_page_fsync_is_one_entry_a_handful_of_disk_writes_and_one_inode_update() {
    let rig = Rig::new(1, 64, 32);
    rig.disk.set_write_run(64);
    let mut a = rig.join(1);
    let ino = dirty_pages(&rig, &mut a, 64, 64);
    let from = rig.disk.write_requests().len();
    let before = rig.dir.borrow().write_stats();
    let r = run_call(&rig, &mut a, &run(RunKind::Writeback, ino, 0, 64, u64::MAX));
    assert_eq!(
        r,
        RunReply {
            done: u64::MAX,
            written: u64::MAX
        }
    );
    assert_eq!(rig.call(&mut a, &Request::Fsync { ino }), Ok(Response::Ok));
    let (data_ios, data_blocks, sums, inodes) = writes_by_phase(&rig, from);
    assert_eq!(data_blocks, 64, "every page written once");
    assert!(
        data_ios <= 2,
        "contiguous blocks in one request: {data_ios}"
    );
    assert_eq!(inodes, 1, "one inode update");
    assert!(sums <= 2, "{sums}");
    let after = rig.dir.borrow().write_stats();
    assert_eq!(after.submitted - before.submitted, 64 + sums as u64 + 1);
    assert!(after.write_ios - before.write_ios <= 5);
    assert_eq!(rig.dir.borrow().run_stats(), (1, 64));
    for i in [0, 31, 63] {
        assert_eq!(file_bytes(&rig, &mut a, ino, i), 0xA0 + i as u8);
    }
    // The page directory forgot nothing: the pages stay owned, clean.
    rig.dir.borrow().pages().check().unwrap();
}

#[test]
fn a_device_without_runs_gets_one_block_per_request_and_the_same_bytes() {
    let rig = Rig::new(1, 64, 32);
    let mut a = rig.join(1);
    let ino = dirty_pages(&rig, &mut a, 8, 8);
    let from = rig.disk.write_requests().len();
    let r = run_call(&rig, &mut a, &run(RunKind::Writeback, ino, 0, 8, 0xFF));
    assert_eq!(r.done, 0xFF);
    let (data_ios, data_blocks, _, inodes) = writes_by_phase(&rig, from);
    assert_eq!((data_ios, data_blocks, inodes), (8, 8, 1));
    for i in 0..8 {
        assert_eq!(file_bytes(&rig, &mut a, ino, i), 0xA0 + i as u8);
    }
}

#[test]
fn a_64_page_reclaim_is_one_entry_and_frees_every_page() {
    let rig = Rig::new(1, 64, 32);
    rig.disk.set_write_run(64);
    let mut a = rig.join(1);
    let ino = dirty_pages(&rig, &mut a, 64, 64);
    // Half the pages dirty (the others' frames hold the disk's bytes
    // as far as the directory knows).
    let dirty = 0x5555_5555_5555_5555;
    let from = rig.disk.write_requests().len();
    let r = run_call(&rig, &mut a, &run(RunKind::Inv, ino, 0, 64, dirty));
    assert_eq!(r.done, u64::MAX);
    assert_eq!(r.written, dirty, "only the dirty pages are written");
    let (_, data_blocks, _, inodes) = writes_by_phase(&rig, from);
    assert_eq!((data_blocks, inodes), (32, 1));
    assert_eq!(rig.dir.borrow().pages().len(), 0, "every page forgotten");
    assert_eq!(file_bytes(&rig, &mut a, ino, 2), 0xA2);
    assert_eq!(
        file_bytes(&rig, &mut a, ino, 3),
        4,
        "clean: the disk's bytes"
    );
    rig.dir.borrow().pages().check().unwrap();
}

#[test]
fn a_run_answers_page_by_page_refused_pages_stay_and_a_sharer_is_waited_for() {
    let rig = Rig::new(2, 64, 32);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let mut nb = Notifier::new(&rig.layout, 2);
    // Node 1 owns pages 0..4 of a 6-page file; page 4 is nobody's, page
    // 5 is node 2's.
    let ino = dirty_pages(&rig, &mut a, 6, 4);
    let (b0, _) = rig.layout.pool_gfns(2);
    let k = |idx| PageKey { ino, idx };
    assert_eq!(
        rig.call(&mut b, &Rig::read(k(5), b0)),
        Ok(Response::Page(PageReply::Owner { gfn: b0 }))
    );
    // Node 2 maps node 1's page 2.
    assert!(matches!(
        rig.call(&mut b, &Rig::read(k(2), b0 + 1)),
        Ok(Response::Page(PageReply::Shared { owner: 1, .. }))
    ));
    rig.disk.set_mode(Completion::InOrder);
    let req = run(RunKind::Inv, ino, 0, 6, 0b1111);
    let tag = a.send(&*rig.mem, &req, &mut || true).unwrap();
    rig.step();
    // Not answered while node 2 has not acked its DIR_INV of page 2.
    for _ in 0..5 {
        rig.step();
    }
    assert_eq!(a.recv(&*rig.mem).unwrap(), None, "the sharer is waited for");
    assert_eq!(nb.poll(&*rig.mem), Ok(Some(Notice::DirInv(k(2)))));
    nb.ack(&*rig.mem, k(2), false, &mut || true).unwrap();
    let mut got = None;
    for _ in 0..20 {
        rig.step();
        if let Some((t, d)) = a.recv(&*rig.mem).unwrap() {
            got = Some((t, Response::decode(&d, Op::PageInvRun).unwrap().1));
            break;
        }
    }
    let Some((t, Response::Run(r))) = got else {
        panic!("no answer: {got:?}")
    };
    assert_eq!(t, tag);
    assert_eq!(
        r.done, 0b1111,
        "pages 4 (nobody's) and 5 (node 2's) refused"
    );
    assert_eq!(r.written, 0b1111);
    let pages = rig.dir.borrow().pages().len();
    assert_eq!(pages, 1, "node 2's page 5 stays");
    rig.dir.borrow().pages().check().unwrap();
}

#[test]
fn a_run_of_a_failed_node_is_forgotten() {
    let rig = Rig::new(2, 64, 32);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let ino = dirty_pages(&rig, &mut a, 2, 2);
    let (b0, _) = rig.layout.pool_gfns(2);
    // Node 2 maps page 0 and never acks: node 1's run waits.
    assert!(matches!(
        rig.call(&mut b, &Rig::read(PageKey { ino, idx: 0 }, b0)),
        Ok(Response::Page(PageReply::Shared { owner: 1, .. }))
    ));
    a.send(&*rig.mem, &run(RunKind::Inv, ino, 0, 2, 0), &mut || true)
        .unwrap();
    rig.step();
    assert!(!rig.dir.borrow().requests.open.is_empty());
    // Node 1 fails (silent): its run goes with it.
    assert!(rig.fail_silent(1, 2));
    assert!(rig.dir.borrow().requests.open.is_empty());
    assert!(rig.dir.borrow().requests.parts.is_empty());
}

#[test]
fn the_write_backs_of_one_sweeps_page_requests_are_one_job() {
    let rig = Rig::new(1, 64, 32);
    rig.disk.set_write_run(64);
    let mut a = rig.join(1);
    let ino = dirty_pages(&rig, &mut a, 64, 64);
    let from = rig.disk.write_requests().len();
    // Two runs and a single page's WRITEBACK, taken in one sweep.
    let reqs = [
        run(RunKind::Writeback, ino, 0, 30, run_mask(30)),
        Request::Page(PageReq::Writeback {
            key: PageKey { ino, idx: 30 },
            dirty: true,
        }),
        run(RunKind::Writeback, ino, 31, 33, run_mask(33)),
    ];
    let tags: Vec<u32> = reqs
        .iter()
        .map(|r| a.send(&*rig.mem, r, &mut || true).unwrap())
        .collect();
    let mut answered = Vec::new();
    for _ in 0..20 {
        rig.step();
        while let Some((t, _)) = a.recv(&*rig.mem).unwrap() {
            answered.push(t);
        }
    }
    answered.sort_unstable();
    assert_eq!(answered, tags);
    let (data_ios, data_blocks, _, inodes) = writes_by_phase(&rig, from);
    assert_eq!(data_blocks, 64);
    assert!(data_ios <= 2, "{data_ios}");
    assert_eq!(inodes, 1, "one inode update for the sweep");
    for i in [0, 30, 63] {
        assert_eq!(file_bytes(&rig, &mut a, ino, i), 0xA0 + i as u8);
    }
}

#[test]
fn a_runs_write_back_is_one_file_system_write_and_the_disk_counter_counts_device_writes() {
    let rig = Rig::new(1, 64, 32);
    rig.disk.set_write_run(64);
    let mut a = rig.join(1);
    let ino = dirty_pages(&rig, &mut a, 64, 64);
    let version = |a: &mut Client| match rig.call(a, &Request::Getattr { ino }) {
        Ok(Response::Attr(at)) => at.version,
        x => panic!("getattr: {x:?}"),
    };
    let v0 = version(&mut a);
    let counted = rig.dir.borrow().stats().disk_writes;
    let before = rig.dir.borrow().write_stats();
    let r = run_call(&rig, &mut a, &run(RunKind::Writeback, ino, 0, 64, u64::MAX));
    assert_eq!(r.written, u64::MAX);
    assert_eq!(rig.call(&mut a, &Request::Fsync { ino }), Ok(Response::Ok));
    // One file-system write for the run's 64 pages, not one per page:
    // the file's version moved once.
    assert_eq!(version(&mut a), v0 + 1, "one write of the whole run");
    let submitted = rig.dir.borrow().write_stats().submitted - before.submitted;
    assert_eq!(
        rig.dir.borrow().stats().disk_writes - counted,
        submitted,
        "`disk blocks written` counts the blocks sent to the device"
    );
    for i in [0, 1, 62, 63] {
        assert_eq!(file_bytes(&rig, &mut a, ino, i), 0xA0 + i as u8);
    }
}

#[test]
fn a_run_past_the_end_of_file_writes_the_pages_inside_and_keeps_the_rest_dirty() {
    let rig = Rig::new(1, 64, 32);
    let mut a = rig.join(1);
    // A 4-page file whose node holds 8 pages: 4..8 were written past the
    // end, their size not published yet.
    let ino = dirty_pages(&rig, &mut a, 4, 4);
    let (a0, _) = rig.layout.pool_gfns(1);
    for i in 4..8u64 {
        let key = PageKey { ino, idx: i };
        let lock = Request::Page(PageReq::LookupLock { key, frame: a0 + i });
        let r = rig.call(&mut a, &lock);
        assert_eq!(
            r,
            Ok(Response::Page(PageReply::Exclusive { gfn: a0 + i })),
            "page {i}"
        );
        let off = rig.layout.frame_off(a0 + i).unwrap();
        rig.mem.write(off, &[0xA0u8 + i as u8; 4096]);
        let r = rig.call(&mut a, &Request::Page(PageReq::Unlock { key }));
        assert!(
            matches!(r, Ok(Response::Page(PageReply::Done { .. }))),
            "{r:?}"
        );
    }
    let r = run_call(&rig, &mut a, &run(RunKind::Writeback, ino, 0, 8, 0xFF));
    assert_eq!(r.done, 0xFF);
    assert_eq!(rig.call(&mut a, &Request::Fsync { ino }), Ok(Response::Ok));
    for i in 0..4 {
        assert_eq!(file_bytes(&rig, &mut a, ino, i), 0xA0 + i as u8);
    }
    // The pages past the end stay dirty: published, they are written.
    let d = rig.dir.borrow();
    for i in 4..8 {
        let e = d
            .pages()
            .entry(&PageKey { ino, idx: i })
            .expect("still cached");
        assert!(e.dirty, "page {i} past the end keeps its bytes dirty");
    }
}
