//! Asynchronous page fills: the loop against a heap region, the fake
//! asynchronous disk ([`crate::fakedisk`]) and real node clients.

use super::super::*;
use crate::fakedisk::{Completion, FakeControl, FakeDisk};
use core::cell::{Cell, RefCell};
use fabric::proto::{Errno, PageKey, PageReply, PageReq, Request, Response};
use fabric::shm::HeapShm;
use flatfs::MemDisk;
use nodepath::client::Client;

const REGION: usize = 4 << 20;

std::thread_local! {
    /// The directory's clock in these tests: moved by [`Rig::step`].
    static CLOCK: Cell<u64> = const { Cell::new(0) };
}

fn rig_clock() -> u64 {
    CLOCK.with(|c| c.get())
}

pub(super) struct Rig {
    pub(super) mem: HeapShm,
    pub(super) layout: Layout,
    pub(super) dir: RefCell<Directory<FakeDisk>>,
    pub(super) disk: FakeControl,
    now: Cell<u64>,
}

impl Rig {
    /// A directory over a fake disk with `depth` reads in flight, fills
    /// allowed up to `fill_depth`.
    pub(super) fn new(nodes: u32, depth: usize, fill_depth: usize) -> Rig {
        Rig::with_mode(nodes, depth, fill_depth, false)
    }

    /// As [`Rig::new`], serving `daxfs` mode's page cache if `daxfs`.
    pub(super) fn with_mode(nodes: u32, depth: usize, fill_depth: usize, daxfs: bool) -> Rig {
        Rig::with_config(nodes, depth, fill_depth, |c| c.daxfs = daxfs)
    }

    /// As [`Rig::new`], with `tune` applied to the directory's
    /// configuration.
    pub(super) fn with_config(
        nodes: u32,
        depth: usize,
        fill_depth: usize,
        tune: impl FnOnce(&mut Config),
    ) -> Rig {
        let mem = HeapShm::new(REGION);
        let layout = Layout::compute(REGION, nodes).unwrap();
        layout.format(&*mem, 0);
        let mem_disk = Fs::format(MemDisk::new(2048), 64).unwrap().into_device();
        let (fake, disk) = FakeDisk::new(mem_disk, depth, Completion::InOrder, 7);
        let fs = Fs::mount(fake).unwrap();
        let mut cfg = Config {
            heartbeat_timeout_ns: 1_000_000,
            batch: 32,
            fill_depth,
            clock: rig_clock,
            ..Config::default()
        };
        tune(&mut cfg);
        let dir = Directory::new(&*mem, layout, Some(fs), cfg);
        Rig {
            mem,
            layout,
            dir: RefCell::new(dir),
            disk,
            now: Cell::new(0),
        }
    }

    pub(super) fn step(&self) -> Poll {
        self.now.set(self.now.get() + 1000);
        CLOCK.with(|c| c.set(self.now.get()));
        let h = Header::new(&*self.mem, self.layout);
        for n in 1..=self.layout.max_nodes {
            h.beat_node(n);
        }
        self.dir.borrow_mut().poll(&*self.mem, self.now.get())
    }

    pub(super) fn join(&self, node: u32) -> Client {
        let mut w = || {
            self.step();
            true
        };
        Client::join(&*self.mem, self.layout, node, 1, &mut w).unwrap()
    }

    pub(super) fn call(&self, c: &mut Client, req: &Request) -> Result<Response, Errno> {
        let mut budget = 100;
        let mut w = || {
            self.step();
            budget -= 1;
            budget > 0
        };
        c.call(&*self.mem, req, &mut w)
    }

    /// Create `/f` with `pages` pages, page i filled with byte i + 1.
    pub(super) fn file(&self, c: &mut Client, pages: u64) -> u64 {
        let (off, _) = c.bulk(0).unwrap();
        self.mem.write(off, b"/f");
        let r = self.call(
            c,
            &Request::Path {
                op: Op::Create,
                slot: 0,
                at: 0,
                len: 2,
                exclusive: false,
            },
        );
        let Ok(Response::Attr(f)) = r else {
            panic!("create: {r:?}")
        };
        for i in 0..pages {
            self.write(c, f.ino, i, i as u8 + 1);
        }
        f.ino
    }

    /// Write page `idx` of `ino` through the file server, every byte `v`.
    pub(super) fn write(&self, c: &mut Client, ino: u64, idx: u64, v: u8) {
        let (off, _) = c.bulk(2).unwrap();
        self.mem.write(off, &[v; 4096]);
        let w = Request::Data {
            gen: 0,
            op: Op::Write,
            slot: 2,
            at: 0,
            ino,
            offset: idx * 4096,
            len: 4096,
        };
        self.call(c, &w).unwrap();
    }

    /// Send (without waiting) a write of page `idx` of `ino` through the
    /// file server, every byte `v`; its tag.
    pub(super) fn send_write(&self, c: &mut Client, ino: u64, idx: u64, v: u8) -> u32 {
        let (off, _) = c.bulk(2).unwrap();
        self.mem.write(off, &[v; 4096]);
        let w = Request::Data {
            gen: 0,
            op: Op::Write,
            slot: 2,
            at: 0,
            ino,
            offset: idx * 4096,
            len: 4096,
        };
        c.send(&*self.mem, &w, &mut || true).unwrap()
    }

    /// Send `req`, which reads one block, while the disk holds its
    /// completions: `passes` passes of the loop, then the read completes
    /// and one more pass takes it. Its tag.
    pub(super) fn send_held(&self, c: &mut Client, req: &Request, passes: usize) -> u32 {
        let tag = c.send(&*self.mem, req, &mut || true).unwrap();
        for _ in 0..passes {
            self.step();
        }
        assert!(self.disk.complete(0));
        self.step();
        tag
    }

    /// Let node `node` go silent (every other node `alive` keeps beating)
    /// until the directory fails it; was it failed?
    pub(super) fn fail_silent(&self, node: u32, alive: u32) -> bool {
        let h = Header::new(&*self.mem, self.layout);
        for _ in 0..50 {
            self.now.set(self.now.get() + 1_000_000);
            h.beat_node(alive);
            let p = self.dir.borrow_mut().poll(&*self.mem, self.now.get());
            if p.events
                .iter()
                .any(|e| matches!(e, Event::Failed { node: n, .. } if *n == node))
            {
                return true;
            }
        }
        false
    }

    /// Send a write of page `idx` of `ino` (every byte `v`) while the
    /// disk holds its completions, let the directory take it (one pass),
    /// then let the disk complete everything and wait for the answer.
    pub(super) fn write_then_release(&self, c: &mut Client, ino: u64, idx: u64, v: u8) {
        let tag = self.send_write(c, ino, idx, v);
        self.step();
        self.disk.set_mode(Completion::InOrder);
        for _ in 0..100 {
            self.step();
            if let Some((t, d)) = c.recv(&*self.mem).unwrap() {
                assert_eq!(t, tag);
                let r = Response::decode(&d, Op::Write).map(|x| x.1);
                assert!(matches!(r, Ok(Response::Data { bytes: 4096, .. })), "{r:?}");
                self.disk.set_mode(Completion::Hold);
                return;
            }
        }
        panic!("the write was never answered");
    }

    /// With the disk holding completions, send `c`'s READ of `key` into
    /// `frame` and let the directory take it (one pass): its fill is then
    /// in flight. Its tag.
    pub(super) fn send_held_read(&self, c: &mut Client, key: PageKey, frame: u64) -> u32 {
        self.disk.set_mode(Completion::Hold);
        let tag = c
            .send(&*self.mem, &Rig::read(key, frame), &mut || true)
            .unwrap();
        self.step();
        tag
    }

    /// Step the loop until `c` receives the answer tagged `tag` (of a
    /// request with opcode `op`), and decode it.
    pub(super) fn take_answer(&self, c: &mut Client, tag: u32, op: Op) -> Result<Response, Errno> {
        for _ in 0..100 {
            self.step();
            if let Some((t, d)) = c.recv(&*self.mem).unwrap() {
                assert_eq!(t, tag, "an answer to another request");
                return match Response::decode(&d, op).map(|x| x.1).unwrap() {
                    Response::Err(e) => Err(e),
                    r => Ok(r),
                };
            }
        }
        panic!("request {tag} ({op:?}) was never answered");
    }

    pub(super) fn frame(&self, gfn: u64) -> [u8; 4096] {
        let mut page = [0u8; 4096];
        self.mem
            .read(self.layout.frame_off(gfn).unwrap(), &mut page);
        page
    }

    pub(super) fn read(key: PageKey, frame: u64) -> Request {
        Request::Page(PageReq::Read { key, frame })
    }
}

/// Take `c`'s answers, decoded as page replies, by tag.
pub(super) fn answers(rig: &Rig, c: &mut Client) -> Vec<(u32, PageReply)> {
    let mut out = Vec::new();
    while let Some((tag, d)) = c.recv(&*rig.mem).unwrap() {
        match Response::decode(&d, Op::PageRead) {
            Ok((_, Response::Page(r))) => out.push((tag, r)),
            x => panic!("not a page reply: {x:?}"),
        }
    }
    out
}

#[test]
fn a_cached_page_lookup_is_answered_while_a_fill_is_pending() {
    let rig = Rig::new(2, 32, 32);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let ino = rig.file(&mut a, 2);
    let (a0, _) = rig.layout.pool_gfns(1);
    let (b0, _) = rig.layout.pool_gfns(2);
    let k0 = PageKey { ino, idx: 0 };
    let k1 = PageKey { ino, idx: 1 };
    // Node 1 caches page 0 (the fill completes at once).
    assert_eq!(
        rig.call(&mut a, &Rig::read(k0, a0)),
        Ok(Response::Page(PageReply::Owner { gfn: a0 }))
    );
    // Node 1 misses page 1; the disk holds the read.
    rig.disk.set_mode(Completion::Hold);
    let tag = a
        .send(&*rig.mem, &Rig::read(k1, a0 + 1), &mut || true)
        .unwrap();
    for _ in 0..5 {
        rig.step();
    }
    assert_eq!(rig.disk.in_flight().len(), 1, "the fill is in flight");
    assert!(
        answers(&rig, &mut a).is_empty(),
        "no answer before the disk"
    );
    // Node 2's lookup of the cached page is answered meanwhile.
    assert_eq!(
        rig.call(&mut b, &Rig::read(k0, b0)),
        Ok(Response::Page(PageReply::Shared { owner: 1, gfn: a0 }))
    );
    // ... and a request for the page being filled is told to retry.
    assert_eq!(
        rig.call(&mut b, &Rig::read(k1, b0 + 1)),
        Ok(Response::Page(PageReply::Retry))
    );
    assert_eq!(rig.disk.in_flight().len(), 1, "still in flight");
    assert_eq!(
        rig.dir.borrow().disk_queue_stats().answered_while_busy,
        2,
        "the lookup and the retry"
    );
    assert!(rig.disk.complete(0));
    let p = rig.step();
    assert_eq!(p.completed, 1);
    assert_ne!(p.responded & 1, 0, "node 1 is reported for its doorbell");
    assert_eq!(
        answers(&rig, &mut a),
        vec![(tag, PageReply::Owner { gfn: a0 + 1 })]
    );
    assert_eq!(rig.frame(a0 + 1), [2u8; 4096]);
    assert_eq!(rig.dir.borrow().fills_pending(), 0);
}

#[test]
fn fills_complete_out_of_order_up_to_the_queue_depth_and_errors_fail_only_their_page() {
    // The device takes 4 reads at once; 7 misses of a 6-page file (the
    // seventh past the end of the file: zeros, no disk read).
    let rig = Rig::new(1, 4, 32);
    let mut a = rig.join(1);
    let ino = rig.file(&mut a, 6);
    let (a0, _) = rig.layout.pool_gfns(1);
    rig.disk.set_mode(Completion::Hold);
    let submitted0 = rig.disk.submitted();
    let mut tags = Vec::new();
    for i in 0..7 {
        let key = PageKey { ino, idx: i };
        tags.push(
            a.send(&*rig.mem, &Rig::read(key, a0 + i), &mut || true)
                .unwrap(),
        );
    }
    rig.step();
    assert_eq!(rig.disk.in_flight().len(), 4, "queue depth of the device");
    assert_eq!(
        rig.dir.borrow().fills_pending(),
        6,
        "4 in flight, 2 waiting"
    );
    // Page 6 is past the end: answered without the disk.
    assert_eq!(
        answers(&rig, &mut a),
        vec![(tags[6], PageReply::Owner { gfn: a0 + 6 })]
    );
    assert_eq!(rig.frame(a0 + 6), [0u8; 4096]);
    // The next read submitted (page 4's, when room frees up) fails.
    rig.disk.fail_next_reads(1);
    rig.disk.complete_all_reversed();
    rig.step();
    let mut got = answers(&rig, &mut a);
    assert_eq!(got.len(), 4, "the first four, in reverse order: {got:?}");
    assert_eq!(got[0].0, tags[3], "completion order, not request order");
    assert_eq!(rig.disk.in_flight().len(), 2, "the waiting two went out");
    rig.disk.complete_all_reversed();
    rig.step();
    got.extend(answers(&rig, &mut a));
    got.sort_by_key(|x| x.0);
    for (i, (tag, reply)) in got.iter().enumerate() {
        assert_eq!(*tag, tags[i]);
        if i == 4 {
            assert_eq!(*reply, PageReply::IoError, "the failed read");
            assert!(rig
                .dir
                .borrow()
                .pages()
                .entry(&PageKey { ino, idx: 4 })
                .is_none());
        } else {
            assert_eq!(*reply, PageReply::Owner { gfn: a0 + i as u64 });
            assert_eq!(rig.frame(a0 + i as u64), [i as u8 + 1; 4096], "page {i}");
        }
    }
    assert_eq!(rig.disk.submitted() - submitted0, 6);
    assert_eq!(rig.disk.max_in_flight(), 4);
    let s = rig.dir.borrow().disk_queue_stats();
    assert_eq!((s.max_in_flight, s.completed), (4, 6));
    rig.dir.borrow().pages().check().unwrap();
}

#[test]
fn a_corrupt_block_read_asynchronously_is_an_io_error() {
    let rig = Rig::new(1, 8, 32);
    let mut a = rig.join(1);
    let ino = rig.file(&mut a, 1);
    let lba = rig.dir.borrow().fs().unwrap().file_blocks(ino).unwrap()[0];
    rig.disk
        .with_disk(|d| d.blocks_mut()[lba as usize * 4096] ^= 0xff);
    let (a0, _) = rig.layout.pool_gfns(1);
    assert_eq!(
        rig.call(&mut a, &Rig::read(PageKey { ino, idx: 0 }, a0)),
        Ok(Response::Page(PageReply::IoError))
    );
    assert_ne!(
        rig.frame(a0),
        [1u8; 4096],
        "bad bytes never reach the frame"
    );
}

#[test]
fn a_node_failing_during_its_fill_leaves_its_frame_alone() {
    let rig = Rig::new(2, 8, 32);
    let mut a = rig.join(1);
    let ino = rig.file(&mut a, 1);
    let (a0, _) = rig.layout.pool_gfns(1);
    rig.disk.set_mode(Completion::Hold);
    a.send(
        &*rig.mem,
        &Rig::read(PageKey { ino, idx: 0 }, a0),
        &mut || true,
    )
    .unwrap();
    rig.step();
    assert_eq!(rig.disk.in_flight().len(), 1);
    // Node 1 goes silent and is failed; its frame is its own again.
    assert!(rig.fail_silent(1, 2));
    assert!(rig.dir.borrow().pages().is_empty());
    rig.mem
        .write(rig.layout.frame_off(a0).unwrap(), &[0xAB; 4096]);
    assert!(rig.disk.complete(0));
    let p = rig.step();
    assert_eq!(p.completed, 1);
    assert_eq!(rig.frame(a0), [0xAB; 4096], "the late read was discarded");
    assert!(rig.dir.borrow().pages().is_empty());
    assert_eq!(rig.dir.borrow().disk_queue_stats().cancelled, 1);
}

#[test]
fn a_write_or_truncate_goes_ahead_of_its_files_fills_which_retry() {
    let rig = Rig::new(2, 8, 32);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let ino = rig.file(&mut a, 2);
    let (a0, _) = rig.layout.pool_gfns(1);
    let tag = rig.send_held_read(&mut a, PageKey { ino, idx: 0 }, a0);
    assert_eq!(rig.disk.in_flight().len(), 1);
    // Node 2 writes page 0 through the storage server while the fill
    // (which reads the old bytes) flies: the write does not wait for it;
    // the fill is marked stale and node 1 is told to retry. Had the fill
    // been committed after the write, node 1 would hold the old bytes
    // over a disk with the new ones.
    let w = rig.send_write(&mut b, ino, 0, 0x55);
    rig.step();
    assert_eq!(rig.dir.borrow().disk_queue_stats().barriers, 0, "no wait");
    assert_eq!(rig.disk.in_flight().len(), 2, "the fill and the write fly");
    assert!(answers(&rig, &mut a).is_empty());
    rig.disk.set_mode(Completion::InOrder);
    let r = rig.take_answer(&mut b, w, Op::Write);
    assert!(matches!(r, Ok(Response::Data { bytes: 4096, .. })), "{r:?}");
    assert_eq!(answers(&rig, &mut a), vec![(tag, PageReply::Retry)]);
    assert_eq!(rig.dir.borrow().disk_queue_stats().stale, 1);
    rig.dir.borrow().pages().check().unwrap();
    // Its retry reads the new bytes.
    assert_eq!(
        rig.call(&mut a, &Rig::read(PageKey { ino, idx: 0 }, a0)),
        Ok(Response::Page(PageReply::Owner { gfn: a0 }))
    );
    assert_eq!(rig.frame(a0), [0x55; 4096], "the single copy is current");
    // A truncate goes ahead the same way: page 1's fill, in flight when
    // the file is cut below it, is not committed.
    let tag = rig.send_held_read(&mut a, PageKey { ino, idx: 1 }, a0 + 1);
    let cut = Request::Setattr {
        gen: 0,
        ino,
        size: 4096,
        expect: None,
        locked: false,
    };
    let t = b.send(&*rig.mem, &cut, &mut || true).unwrap();
    rig.step();
    assert!(
        rig.disk.in_flight().len() > rig.disk.writes_in_flight().len(),
        "the fill still flies"
    );
    assert_eq!(rig.dir.borrow().disk_queue_stats().barriers, 0, "no wait");
    rig.disk.set_mode(Completion::InOrder);
    let r = rig.take_answer(&mut b, t, Op::Setattr);
    assert!(
        matches!(r, Ok(Response::Attr(x)) if x.size == 4096),
        "{r:?}"
    );
    for _ in 0..5 {
        rig.step();
    }
    assert_eq!(answers(&rig, &mut a), vec![(tag, PageReply::Retry)]);
    assert_eq!(rig.dir.borrow().disk_queue_stats().stale, 2);
    rig.dir.borrow().pages().check().unwrap();
}

#[test]
fn fill_depth_zero_keeps_fills_synchronous() {
    let rig = Rig::new(1, 8, 0);
    let mut a = rig.join(1);
    let ino = rig.file(&mut a, 1);
    let (a0, _) = rig.layout.pool_gfns(1);
    rig.disk.set_mode(Completion::Hold);
    assert_eq!(rig.dir.borrow().fill_depth(), 0);
    assert_eq!(
        rig.call(&mut a, &Rig::read(PageKey { ino, idx: 0 }, a0)),
        Ok(Response::Page(PageReply::Owner { gfn: a0 }))
    );
    assert_eq!(rig.disk.submitted(), 0, "no asynchronous read");
    assert_eq!(rig.frame(a0), [1u8; 4096]);
}

#[test]
fn misses_are_timed_phase_by_phase_per_kind() {
    use fabric::proto::MissKind;
    let rig = Rig::new(1, 32, 32);
    let mut a = rig.join(1);
    let ino = rig.file(&mut a, 2);
    let (a0, _) = rig.layout.pool_gfns(1);
    let before = rig.dir.borrow().miss_stats(MissKind::PageFill);
    // A READ miss whose disk read is held for 5 passes.
    rig.disk.set_mode(Completion::Hold);
    let tag = rig.send_held(&mut a, &Rig::read(PageKey { ino, idx: 1 }, a0), 5);
    assert_eq!(
        answers(&rig, &mut a),
        vec![(tag, PageReply::Owner { gfn: a0 })]
    );
    let s = rig
        .dir
        .borrow()
        .miss_stats(MissKind::PageFill)
        .since(&before);
    assert_eq!(s.count, 1, "{s:?}");
    // Queued in one pass, seen complete 5 passes later (1000 ns each).
    assert_eq!(s.disk_ns, 5000, "{s:?}");
    assert_eq!(
        s.service_ns(),
        s.disk_ns,
        "the rest took no time on this clock"
    );
    // A page already cached is no miss.
    assert_eq!(
        rig.call(&mut a, &Rig::read(PageKey { ino, idx: 1 }, a0 + 1)),
        Ok(Response::Page(PageReply::Owner { gfn: a0 }))
    );
    assert_eq!(
        rig.dir.borrow().miss_stats(MissKind::PageFill).count,
        before.count + 1
    );
    // A file-server read is the other kind (asynchronous too: its block
    // read is held 3 passes); writes and metadata are none.
    let files = rig.dir.borrow().miss_stats(MissKind::FileRead);
    let read = Request::Data {
        gen: 0,
        op: Op::Read,
        slot: 1,
        at: 0,
        ino,
        offset: 0,
        len: 4096,
    };
    let tag = rig.send_held(&mut a, &read, 3);
    let got = a
        .recv(&*rig.mem)
        .unwrap()
        .map(|(t, d)| (t, Response::decode(&d, Op::Read)));
    assert!(
        matches!(got, Some((t, Ok((_, Response::Data { bytes: 4096, .. }))))  if t == tag),
        "{got:?}"
    );
    let s = rig
        .dir
        .borrow()
        .miss_stats(MissKind::FileRead)
        .since(&files);
    assert_eq!((s.count, s.disk_ns), (1, 3000), "{s:?}");
    rig.disk.set_mode(Completion::InOrder);
    let r = rig.call(
        &mut a,
        &Request::Data {
            gen: 0,
            op: Op::Read,
            slot: 1,
            at: 0,
            ino,
            offset: 0,
            len: 4096,
        },
    );
    assert!(matches!(r, Ok(Response::Data { bytes: 4096, .. })), "{r:?}");
    rig.call(&mut a, &Request::Getattr { ino }).unwrap();
    rig.write(&mut a, ino, 0, 9);
    assert_eq!(
        rig.dir.borrow().miss_stats(MissKind::FileRead).count,
        files.count + 2
    );
    // The counters travel as the answer to MissStats.
    assert_eq!(
        rig.call(
            &mut a,
            &Request::MissStats {
                kind: MissKind::FileRead
            }
        ),
        Ok(Response::MissStats(
            rig.dir.borrow().miss_stats(MissKind::FileRead)
        ))
    );
}

#[test]
fn an_unlink_goes_ahead_of_its_files_fills_which_retry() {
    let rig = Rig::new(2, 8, 32);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let ino = rig.file(&mut a, 2);
    let (a0, _) = rig.layout.pool_gfns(1);
    let tag = rig.send_held_read(&mut a, PageKey { ino, idx: 1 }, a0);
    assert_eq!(rig.disk.in_flight().len(), 1);
    // Node 2 removes the file while node 1's fill of page 1 flies: the
    // unlink does not wait; the fill's bytes (of freed blocks, which a
    // later write may reuse) are never committed.
    let (off, _) = b.bulk(0).unwrap();
    rig.mem.write(off, b"/f");
    let rm = Request::Path {
        op: Op::Unlink,
        slot: 0,
        at: 0,
        len: 2,
        exclusive: false,
    };
    let t = b.send(&*rig.mem, &rm, &mut || true).unwrap();
    rig.step();
    assert_eq!(rig.dir.borrow().disk_queue_stats().barriers, 0, "no wait");
    rig.disk.set_mode(Completion::InOrder);
    assert_eq!(rig.take_answer(&mut b, t, Op::Unlink), Ok(Response::Ok));
    for _ in 0..5 {
        rig.step();
    }
    assert_eq!(answers(&rig, &mut a), vec![(tag, PageReply::Retry)]);
    assert_eq!(rig.dir.borrow().disk_queue_stats().stale, 1);
    assert!(rig.dir.borrow().pages().is_empty());
    rig.dir.borrow().pages().check().unwrap();
}
