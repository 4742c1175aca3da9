//! The serving loop against a heap region, an in-memory disk and real
//! node clients.

use super::*;
use core::cell::{Cell, RefCell};
use fabric::layout::NodeState;
use fabric::proto::{DirEntry, Errno, FileKind, Notice, Request, Response, DIRENT_SIZE};
use fabric::shm::HeapShm;
use flatfs::MemDisk;
use nodepath::client::Client;

const REGION: usize = 4 << 20;

struct Rig {
    mem: HeapShm,
    layout: Layout,
    dir: RefCell<Directory<MemDisk>>,
    now: Cell<u64>,
}

impl Rig {
    fn new(nodes: u32, storage: bool) -> Rig {
        let mem = HeapShm::new(REGION);
        let layout = Layout::compute(REGION, nodes).unwrap();
        layout.format(&*mem, 0);
        let fs = storage.then(|| Fs::format(MemDisk::new(2048), 64).unwrap());
        let dir = Directory::new(
            &*mem,
            layout,
            fs,
            Config {
                heartbeat_timeout_ns: 1_000_000,
                batch: 32,
                ..Config::default()
            },
        );
        Rig {
            mem,
            layout,
            dir: RefCell::new(dir),
            now: Cell::new(0),
        }
    }

    /// One directory pass, as the wait closure of a client.
    fn step(&self) -> Poll {
        self.now.set(self.now.get() + 1000);
        self.dir.borrow_mut().poll(&*self.mem, self.now.get())
    }

    fn join(&self, node: u32) -> Client {
        let mut w = || {
            self.step();
            true
        };
        Client::join(&*self.mem, self.layout, node, 1, &mut w).unwrap()
    }

    fn call(&self, c: &mut Client, req: &Request) -> Result<Response, Errno> {
        let mut budget = 100;
        let mut w = || {
            self.step();
            budget -= 1;
            budget > 0
        };
        c.call(&*self.mem, req, &mut w)
    }

    /// Step the directory (beating the hearts of `alive`) until it
    /// reports `node` failed; false if it did not within `steps`.
    fn step_until_failed(&self, node: u32, alive: &[u32], steps: usize) -> bool {
        let h = Header::new(&*self.mem, self.layout);
        (0..steps).any(|_| {
            for n in alive {
                h.beat_node(*n);
            }
            self.step()
                .events
                .iter()
                .any(|e| matches!(e, Event::Failed { node: x, .. } if *x == node))
        })
    }

    fn path(&self, c: &mut Client, op: Op, p: &str) -> Result<Response, Errno> {
        let (off, _) = c.bulk(0).unwrap();
        self.mem.write(off, p.as_bytes());
        self.call(
            c,
            &Request::Path {
                op,
                slot: 0,
                at: 0,
                len: p.len() as u32,
                exclusive: false,
            },
        )
    }
}

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
fn metadata_and_data_round_trip_between_two_nodes() {
    let rig = Rig::new(2, true);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    assert_eq!(rig.call(&mut a, &Request::Nop), Ok(Response::Ok));
    rig.path(&mut a, Op::Mkdir, "/d").unwrap();
    let Response::Attr(f) = rig.path(&mut a, Op::Create, "/d/f").unwrap() else {
        panic!("create must return attributes")
    };
    // Node 1 writes 10 000 bytes through its bulk slot.
    let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    let (off, _) = a.bulk(2).unwrap();
    rig.mem.write(off, &data);
    let w = Request::Data {
        gen: 0,
        op: Op::Write,
        slot: 2,
        at: 0,
        ino: f.ino,
        offset: 0,
        len: data.len() as u32,
    };
    let Ok(Response::Data { bytes, attr }) = rig.call(&mut a, &w) else {
        panic!("write failed")
    };
    assert_eq!((bytes as usize, attr.size), (data.len(), data.len() as u64));
    // Node 2 reads it back through its own slot.
    let r = Request::Data {
        gen: 0,
        op: Op::Read,
        slot: 1,
        at: 0,
        ino: f.ino,
        offset: 0,
        len: 16384,
    };
    let Ok(Response::Data { bytes, .. }) = rig.call(&mut b, &r) else {
        panic!("read failed")
    };
    let mut got = vec![0u8; bytes as usize];
    rig.mem.read(b.bulk(1).unwrap().0, &mut got);
    assert_eq!(got, data);
    // Readdir of /d from node 2.
    let Ok(Response::Attr(d)) = rig.path(&mut b, Op::Lookup, "/d") else {
        panic!("lookup failed")
    };
    let rd = Request::Readdir {
        slot: 3,
        ino: d.ino,
        cookie: 0,
    };
    let Ok(Response::Entries { count, .. }) = rig.call(&mut b, &rd) else {
        panic!("readdir failed")
    };
    assert_eq!(count, 1);
    let mut rec = [0u8; DIRENT_SIZE];
    rig.mem.read(b.bulk(3).unwrap().0, &mut rec);
    let e = DirEntry::decode(&rec).unwrap();
    assert_eq!((e.name.as_str(), e.attr.kind), ("f", FileKind::File));
    // Errors come back typed.
    assert_eq!(rig.path(&mut b, Op::Lookup, "/nope"), Err(Errno::NotFound));
    assert_eq!(rig.path(&mut b, Op::Rmdir, "/d"), Err(Errno::NotEmpty));
    assert!(rig.dir.borrow().stats().requests >= 8);
}

/// A descriptor's data and size requests name the generation of the file
/// it was opened on: once the file is removed and its inode number names
/// a new file, they are refused as a stale handle and change nothing.
#[test]
fn requests_of_a_removed_files_generation_are_refused_and_change_nothing() {
    let rig = Rig::new(1, true);
    let mut a = rig.join(1);
    let Response::Attr(f) = rig.path(&mut a, Op::Create, "/f").unwrap() else {
        panic!("create must return attributes")
    };
    rig.path(&mut a, Op::Unlink, "/f").unwrap();
    let Response::Attr(g) = rig.path(&mut a, Op::Create, "/g").unwrap() else {
        panic!("create must return attributes")
    };
    assert_eq!(g.ino, f.ino, "the number is reused");
    assert_ne!(g.gen(), f.gen());
    let (off, _) = a.bulk(2).unwrap();
    rig.mem.write(off, &[0xAB; 100]);
    let write = |gen| Request::Data {
        gen,
        op: Op::Write,
        slot: 2,
        at: 0,
        ino: f.ino,
        offset: 0,
        len: 100,
    };
    let read = |gen| Request::Data {
        gen,
        op: Op::Read,
        slot: 1,
        at: 0,
        ino: f.ino,
        offset: 0,
        len: 100,
    };
    let set = |gen| Request::Setattr {
        gen,
        ino: f.ino,
        size: 4096,
        expect: None,
        locked: false,
    };
    for req in [write(f.gen()), read(f.gen()), set(f.gen())] {
        assert_eq!(rig.call(&mut a, &req), Err(Errno::StaleHandle), "{req:?}");
    }
    let Ok(Response::Attr(now)) = rig.call(&mut a, &Request::Getattr { ino: g.ino }) else {
        panic!("getattr failed")
    };
    assert_eq!((now.size, now.version), (0, g.version), "/g untouched");
    // The new file's own generation (and no generation) still serve.
    assert!(matches!(
        rig.call(&mut a, &write(g.gen())),
        Ok(Response::Data { bytes: 100, .. })
    ));
    assert!(matches!(rig.call(&mut a, &set(0)), Ok(Response::Attr(_))));
    // Writes keep the generation in the version.
    let Ok(Response::Attr(after)) = rig.call(&mut a, &Request::Getattr { ino: g.ino }) else {
        panic!("getattr failed")
    };
    assert_eq!(after.gen(), g.gen());
    // A removed inode is a stale handle too.
    rig.path(&mut a, Op::Unlink, "/g").unwrap();
    assert_eq!(rig.call(&mut a, &write(g.gen())), Err(Errno::StaleHandle));
}

#[test]
fn data_requests_use_sub_slots_side_by_side() {
    let rig = Rig::new(1, true);
    let mut a = rig.join(1);
    let Response::Attr(f) = rig.path(&mut a, Op::Create, "/s").unwrap() else {
        panic!("create must return attributes")
    };
    // A write whose data sits at byte 4096 of slot 2.
    let data: Vec<u8> = (0..8192u32).map(|i| (i % 253) as u8).collect();
    let (off2, cap) = a.bulk(2).unwrap();
    rig.mem.write(off2, &[0xEE; 4096]);
    rig.mem.write(off2 + 4096, &data);
    let w = Request::Data {
        gen: 0,
        op: Op::Write,
        slot: 2,
        at: 4096,
        ino: f.ino,
        offset: 0,
        len: data.len() as u32,
    };
    assert!(matches!(
        rig.call(&mut a, &w),
        Ok(Response::Data { bytes: 8192, .. })
    ));
    // Two reads answered into two sub-slots of slot 1.
    let read = |at: u32, offset: u64| Request::Data {
        gen: 0,
        op: Op::Read,
        slot: 1,
        at,
        ino: f.ino,
        offset,
        len: 4096,
    };
    assert!(matches!(
        rig.call(&mut a, &read(8192, 4096)),
        Ok(Response::Data { bytes: 4096, .. })
    ));
    assert!(matches!(
        rig.call(&mut a, &read(0, 0)),
        Ok(Response::Data { bytes: 4096, .. })
    ));
    let (off1, _) = a.bulk(1).unwrap();
    let mut got = vec![0u8; 12288];
    rig.mem.read(off1, &mut got);
    assert_eq!(got[..4096], data[..4096]);
    assert_eq!(got[8192..], data[4096..]);
    // The sub-slot must fit the slot; nothing is read or written past it.
    let cap = cap as u32;
    for (at, len) in [(cap - 4095, 4096), (cap, 1), (u32::MAX, 4096), (1, cap)] {
        let data = |op| Request::Data {
            gen: 0,
            op,
            slot: 1,
            at,
            ino: f.ino,
            offset: 0,
            len,
        };
        let (r, w) = (data(Op::Read), data(Op::Write));
        assert_eq!(
            rig.call(&mut a, &r),
            Err(Errno::Invalid),
            "read at {at} len {len}"
        );
        assert_eq!(
            rig.call(&mut a, &w),
            Err(Errno::Invalid),
            "write at {at} len {len}"
        );
    }
    // A read that fits exactly at the end of the slot is fine.
    assert!(rig.call(&mut a, &read(cap - 4096, 0)).is_ok());
}

#[test]
fn path_requests_use_sub_slots_side_by_side() {
    // Several paths in slot 0 at once, each request naming its own
    // offset: all go out before any is served, and each answer is the
    // one for its own path.
    let rig = Rig::new(1, true);
    let mut a = rig.join(1);
    let (off, cap) = a.bulk(0).unwrap();
    let paths = ["/p0", "/second", "/third-file"];
    let mut tags = Vec::new();
    for (k, p) in paths.iter().enumerate() {
        let at = k * fabric::proto::MAX_PATH;
        rig.mem.write(off + at, p.as_bytes());
        let req = Request::Path {
            op: Op::Create,
            slot: 0,
            at: at as u32,
            len: p.len() as u32,
            exclusive: true,
        };
        tags.push(a.send(&*rig.mem, &req, &mut || false).unwrap());
    }
    rig.step();
    let mut inos = Vec::new();
    while let Some((tag, d)) = a.recv(&*rig.mem).unwrap() {
        let (_, r) = Response::decode(&d, Op::Create).unwrap();
        let Response::Attr(attr) = r else {
            panic!("create {tag}: {r:?}")
        };
        inos.push((tag, attr.ino));
    }
    assert_eq!(inos.len(), 3);
    for (p, (tag, ino)) in paths.iter().zip(&inos) {
        assert!(tags.contains(tag));
        rig.mem.write(off, p.as_bytes());
        let Response::Attr(x) = rig.path(&mut a, Op::Lookup, p).unwrap() else {
            panic!("lookup {p}")
        };
        assert_eq!(x.ino, *ino, "{p} was created from its own sub-slot");
    }
    // A path running past the slot's end is refused.
    let past = Request::Path {
        op: Op::Lookup,
        slot: 0,
        at: (cap - 1) as u32,
        len: 2,
        exclusive: false,
    };
    assert_eq!(rig.call(&mut a, &past), Err(Errno::Invalid));
}

#[test]
fn bad_slots_lengths_and_opcodes_are_refused() {
    let rig = Rig::new(1, true);
    let mut a = rig.join(1);
    let bad_slot = Request::Path {
        op: Op::Lookup,
        slot: 99,
        at: 0,
        len: 1,
        exclusive: false,
    };
    assert_eq!(rig.call(&mut a, &bad_slot), Err(Errno::Invalid));
    let too_long = Request::Data {
        gen: 0,
        op: Op::Read,
        slot: 1,
        at: 0,
        ino: 1,
        offset: 0,
        len: u32::MAX,
    };
    assert_eq!(rig.call(&mut a, &too_long), Err(Errno::Invalid));
    // Invalid UTF-8 path.
    let (off, _) = a.bulk(0).unwrap();
    rig.mem.write(off, &[0xff, 0xfe]);
    let p = Request::Path {
        op: Op::Lookup,
        slot: 0,
        at: 0,
        len: 2,
        exclusive: false,
    };
    assert_eq!(rig.call(&mut a, &p), Err(Errno::Invalid));
    // A raw descriptor with an unknown opcode gets an Invalid answer and
    // an event; the node stays a member.
    let ch = rig.layout.channel(1);
    // The client used request indices 0..3: publish a zeroed
    // descriptor (opcode 0) at index 3 by hand.
    let slot3 = ch.request.off + fabric::ring::RING_HEADER + 3 * 64;
    rig.mem.write(slot3, &[0u8; 64]);
    rig.mem.store_u32(ch.request.off, 4);
    let polls: Vec<Poll> = (0..3).map(|_| rig.step()).collect();
    assert!(polls.iter().any(|p| p
        .events
        .iter()
        .any(|e| matches!(e, Event::BadRequest { .. }))));
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
fn without_storage_every_request_is_unavailable() {
    let rig = Rig::new(1, false);
    let mut a = rig.join(1);
    let h = Header::new(&*rig.mem, rig.layout);
    assert_eq!(h.dir_state(), Some(DirState::NoStorage));
    assert_eq!(rig.call(&mut a, &Request::Nop), Ok(Response::Ok));
    assert_eq!(rig.path(&mut a, Op::Lookup, "/"), Err(Errno::Unavailable));
    assert_eq!(
        rig.call(&mut a, &Request::Getattr { ino: 1 }),
        Err(Errno::Unavailable)
    );
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

#[test]
fn a_pass_reports_which_nodes_got_responses_and_notices() {
    use fabric::proto::{PageKey, PageReq};
    let rig = Rig::new(3, true);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let _c = rig.join(3);
    let quiet = rig.step();
    assert_eq!((quiet.responded, quiet.noticed), (0, 0), "nothing yet");
    // A request of node 2 answered in the pass: node 2 only, once.
    b.send(&*rig.mem, &Request::Nop, &mut || true).unwrap();
    let p = rig.step();
    assert_eq!((p.responded, p.noticed), (0b10, 0));
    assert_eq!(p.deliveries().collect::<Vec<_>>(), [(2, false)]);
    assert_eq!(rig.step().responded, 0, "reported once");
    // Node 1 reads a page, node 2 shares it, node 1 invalidates: node 2
    // gets the DIR_INV notice (and no response), node 1 its answer only
    // after node 2's ack.
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
    rig.step();
    let inv = Request::Page(PageReq::Inv { key, dirty: false });
    a.send(&*rig.mem, &inv, &mut || true).unwrap();
    let p = rig.step();
    assert_eq!((p.responded, p.noticed), (0, 0b10));
    assert_eq!(p.deliveries().collect::<Vec<_>>(), [(2, true)]);
    let mut nb = nodepath::client::Notifier::new(&rig.layout, 2);
    assert_eq!(nb.poll(&*rig.mem), Ok(Some(Notice::DirInv(key))));
    nb.ack(&*rig.mem, key, false, &mut || true).unwrap();
    let p = rig.step();
    assert_eq!((p.responded, p.noticed), (0b01, 0));
}

mod fileinv;
mod quiet;

#[test]
fn deliveries_list_every_node_set_in_either_mask_once_in_order() {
    let p = Poll {
        responded: 1 | 1 << 5 | 1 << 63,
        noticed: 1 << 5 | 1 << 9,
        ..Poll::default()
    };
    assert_eq!(
        p.deliveries().collect::<Vec<_>>(),
        [(1, false), (6, true), (10, true), (64, false)]
    );
    assert_eq!(Poll::default().deliveries().count(), 0);
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
mod daxfill;
mod deleg;
mod fencing;
mod fileread;
mod fills;
mod netreq;
mod ordered;
mod runs;
mod writes;
