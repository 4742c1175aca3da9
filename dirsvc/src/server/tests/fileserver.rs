//! The file server over the rings: metadata and data round trips,
//! generations, sub-slots, malformed requests, no storage.

use super::*;

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
