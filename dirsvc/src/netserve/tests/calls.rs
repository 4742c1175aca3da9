//! Calls through the network server: round trips of every file call,
//! a full slot, bad requests, page requests refused, members only.

use super::*;

#[test]
fn round_trip_create_write_read_getattr_readdir_unlink() {
    let mut rig = Rig::new(1);
    assert_eq!(rig.call(&Request::Nop), Ok(Response::Ok));
    let Ok(Response::Attr(d)) = rig.path(Op::Mkdir, "/d") else {
        panic!("mkdir")
    };
    let ino = rig.create("/d/f");
    let data = pattern(10_000, 0x5a);
    let Ok(Response::Data { bytes, attr }) = rig.write(ino, 0, &data) else {
        panic!("write")
    };
    assert_eq!((bytes, attr.size), (10_000, 10_000));
    // Read back in full, in a short read past the end and at an offset.
    assert_eq!(rig.read(ino, 0, 16384).unwrap(), data);
    assert_eq!(rig.read(ino, 9_000, 4096).unwrap(), data[9_000..]);
    assert_eq!(rig.read(ino, 20_000, 100).unwrap(), Vec::<u8>::new());
    let Ok(Response::Attr(a)) = rig.call(&Request::Getattr { ino }) else {
        panic!("getattr")
    };
    assert_eq!((a.ino, a.kind, a.size), (ino, FileKind::File, 10_000));
    // Readdir of /d: records land in the slot the request named.
    rig.create("/d/g");
    let Ok(Response::Entries { count, next_cookie }) = rig.call(&Request::Readdir {
        slot: 3,
        ino: d.ino,
        cookie: 0,
    }) else {
        panic!("readdir")
    };
    assert_eq!((count, next_cookie), (2, 0));
    let mut names = Vec::new();
    for k in 0..count as usize {
        let mut rec = [0u8; DIRENT_SIZE];
        let mut all = vec![0u8; (k + 1) * DIRENT_SIZE];
        rig.client.bulk_read(3, &mut all).unwrap();
        rec.copy_from_slice(&all[k * DIRENT_SIZE..]);
        names.push(DirEntry::decode(&rec).unwrap().name);
    }
    names.sort();
    assert_eq!(names, ["f", "g"]);
    // Unlink, then the file is gone; errors come back typed.
    assert_eq!(rig.path(Op::Unlink, "/d/f"), Ok(Response::Ok));
    assert_eq!(rig.path(Op::Lookup, "/d/f"), Err(Errno::NotFound));
    assert_eq!(rig.path(Op::Rmdir, "/d"), Err(Errno::NotEmpty));
    assert_eq!(rig.call(&Request::Getattr { ino }), Err(Errno::NotFound));
    let Ok(Response::Stats(s)) = rig.call(&Request::Stats) else {
        panic!("stats")
    };
    assert_eq!(s.requests, 15, "every frame counted");
    assert_eq!(rig.dir.ops()[Op::Read as usize], 3);
    assert_eq!(rig.call(&Request::Fsync { ino: 0 }), Ok(Response::Ok));
}

#[test]
fn a_full_slot_is_written_and_read_in_one_frame() {
    let mut rig = Rig::new(2);
    let ino = rig.create("/big");
    let data = pattern(MAX_PAYLOAD, 3);
    let bytes = {
        rig.client.bulk_write(2, 0, &data).unwrap();
        rig.client.request(&Request::Data {
            gen: 0,
            op: Op::Write,
            slot: 2,
            at: 0,
            ino,
            offset: 4096,
            len: MAX_PAYLOAD as u32,
        })
    };
    assert_eq!(bytes.len(), FRAME_OVERHEAD + MAX_PAYLOAD);
    let f = rig.deliver_to_server(&bytes).unwrap();
    let answer = rig.serve(&f[0]);
    assert_eq!(
        answer.len(),
        FRAME_OVERHEAD,
        "a write answer has no payload"
    );
    assert!(matches!(
        rig.deliver_to_client(&answer),
        Ok(Some(Response::Data { bytes: 65536, .. }))
    ));
    let got = rig.read(ino, 4096, MAX_PAYLOAD as u32).unwrap();
    assert_eq!(got, data);
    // One byte more than a slot is refused on both sides of the wire.
    assert_eq!(
        rig.call(&Request::Data {
            gen: 0,
            op: Op::Read,
            slot: 1,
            at: 0,
            ino,
            offset: 0,
            len: MAX_PAYLOAD as u32 + 1,
        }),
        Err(Errno::Invalid)
    );
    assert_eq!(
        rig.call(&Request::Data {
            gen: 0,
            op: Op::Write,
            slot: 2,
            at: 0,
            ino,
            offset: 0,
            len: MAX_PAYLOAD as u32 + 1,
        }),
        Err(Errno::Invalid)
    );
    assert_eq!(rig.read(ino, 0, 4096).unwrap(), vec![0; 4096], "unchanged");
}

#[test]
fn bad_requests_get_clear_errors() {
    let mut rig = Rig::new(3);
    let ino = rig.create("/f");
    // Bad slots.
    for slot in [SLOTS, 99, u32::MAX] {
        let bad = [
            Request::Path {
                op: Op::Lookup,
                slot,
                at: 0,
                len: 2,
                exclusive: false,
            },
            Request::Data {
                gen: 0,
                op: Op::Write,
                slot,
                at: 0,
                ino,
                offset: 0,
                len: 10,
            },
            Request::Data {
                gen: 0,
                op: Op::Read,
                slot,
                at: 0,
                ino,
                offset: 0,
                len: 10,
            },
            Request::Readdir {
                slot,
                ino: 1,
                cookie: 0,
            },
        ];
        for r in bad {
            assert_eq!(rig.call(&r), Err(Errno::Invalid), "{r:?}");
        }
    }
    // Payload lengths that disagree with the request.
    let lookup = |len| Request::Path {
        op: Op::Lookup,
        slot: 0,
        at: 0,
        len,
        exclusive: false,
    };
    let write = |len| Request::Data {
        gen: 0,
        op: Op::Write,
        slot: 2,
        at: 0,
        ino,
        offset: 0,
        len,
    };
    let cases: [(Request, usize); 6] = [
        (lookup(2), 1),
        (lookup(2), 3),
        (write(100), 0),
        (write(100), 101),
        (Request::Getattr { ino }, 1),
        (
            Request::Data {
                gen: 0,
                op: Op::Read,
                slot: 1,
                at: 0,
                ino,
                offset: 0,
                len: 10,
            },
            10,
        ),
    ];
    for (i, (r, n)) in cases.into_iter().enumerate() {
        let tag = 1000 + i as u32;
        let (t, resp, payload) = rig.raw(r.encode(tag), &vec![b'/'; n], op_of(&r));
        assert_eq!((t, resp), (tag, Response::Err(Errno::Invalid)), "{r:?}");
        assert!(payload.is_empty());
    }
    // Invalid UTF-8 path.
    rig.client.bulk_write(0, 0, &[0xff, 0xfe]).unwrap();
    assert_eq!(rig.call(&lookup(2)), Err(Errno::Invalid));
    // Garbage descriptors: Invalid with their own opcode and tag.
    let mut garbage = Raw {
        op: 0xEEEE,
        status: 0,
        tag: 77,
        args: [u64::MAX; 7],
    };
    let answer = rig.now(
        1,
        &Frame {
            desc: garbage.encode(),
            payload: vec![1, 2, 3],
        },
    );
    let raw = Raw::decode(&answer.desc);
    assert_eq!(
        (raw.op, raw.status, raw.tag),
        (0xEEEE, Errno::Invalid as u16, 77)
    );
    assert!(answer.payload.is_empty());
    garbage.op = Op::Lookup as u16; // path length out of range
    let (t, resp, _) = rig.raw(garbage.encode(), &[], Op::Lookup);
    assert_eq!((t, resp), (77, Response::Err(Errno::Invalid)));
    // The file is untouched by all this.
    assert_eq!(rig.read(ino, 0, 10).unwrap(), Vec::<u8>::new());
    // A request naming a bad slot or length goes out without payload.
    let f = rig.client.request(&write(MAX_PAYLOAD as u32 + 1));
    assert_eq!(f.len(), FRAME_OVERHEAD);
    rig.client.reset();
}

#[test]
fn page_requests_are_refused_over_the_network() {
    let mut rig = Rig::new(4);
    let ino = rig.create("/p");
    let key = PageKey { ino, idx: 0 };
    let (gfn, _) = rig.dir.layout().pool_gfns(1);
    for p in [
        PageReq::Read { key, frame: gfn },
        PageReq::LookupLock { key, frame: gfn },
        PageReq::Unlock { key },
        PageReq::Inv { key, dirty: true },
        PageReq::Drop { key, dirty: false },
        PageReq::Writeback { key, dirty: true },
    ] {
        assert_eq!(rig.call(&Request::Page(p)), Err(Errno::Invalid));
    }
    assert_eq!(rig.call(&Request::PageStats), Err(Errno::Invalid));
    // Page locality too, for a file with pages (its records would come in
    // a payload the answer does not announce: it was answered `Io`).
    rig.write(ino, 0, &pattern(6000, 1)).unwrap();
    for slot in [0, 3] {
        assert_eq!(
            rig.call(&Request::Locality {
                slot,
                ino,
                first: 0
            }),
            Err(Errno::Invalid)
        );
    }
    assert!(rig.dir.pages().is_empty());
    assert!(matches!(rig.call(&Request::Stats), Ok(Response::Stats(_))));
    assert_eq!(rig.call(&Request::Nop), Ok(Response::Ok));
}

#[test]
fn only_members_are_served() {
    let mut rig = Rig::new(3);
    let ino = rig.create("/a");
    let layout = *rig.dir.layout();
    // Node 1 leaves: its requests are refused, nothing runs.
    Header::new(&*rig.mem, layout).set_node_state(1, NodeState::Left);
    rig.dir.membership(&*rig.mem, 1);
    assert!(!rig.dir.is_member(1));
    let before = rig.dir.stats();
    assert_eq!(rig.path(Op::Create, "/b"), Err(Errno::Unavailable));
    assert_eq!(rig.read(ino, 0, 10), Err(Errno::Unavailable));
    assert_eq!(rig.dir.stats(), before, "nothing was served");
    // Never-joined nodes are refused too.
    let f = Frame {
        desc: Request::Getattr { ino }.encode(7),
        payload: Vec::new(),
    };
    let r = rig.now(2, &f);
    assert_eq!(
        Response::decode(&r.desc, Op::Getattr).unwrap().1,
        Response::Err(Errno::Unavailable)
    );
    // Rejoined (a new epoch): served again.
    Header::new(&*rig.mem, layout).set_node_state(1, NodeState::Joining);
    rig.dir.membership(&*rig.mem, 2);
    assert!(rig.dir.is_member(1));
    assert!(rig.path(Op::Create, "/b").is_ok());
}
