//! Round trips and malformed input of every message (page runs and
//! spans in `tests/runs.rs`, delegation's messages in `tests/deleg.rs`).

mod deleg;
mod runs;

use super::*;

fn attr() -> Attr {
    Attr {
        ino: 7,
        kind: FileKind::File,
        size: 12345,
        version: 9,
    }
}

#[test]
fn requests_round_trip() {
    let reqs = [
        Request::Nop,
        Request::Path {
            op: Op::Create,
            slot: 2,
            at: 3072,
            len: 17,
            exclusive: true,
        },
        Request::Path {
            op: Op::Lookup,
            slot: 0,
            at: 0,
            len: 1,
            exclusive: false,
        },
        Request::Readdir {
            slot: 1,
            ino: 5,
            cookie: 99,
        },
        Request::Getattr { ino: 3 },
        Request::DaxFill { slot: 1 << 40 },
        Request::Setattr {
            ino: 3,
            size: 1 << 40,
            expect: None,
            locked: false,
            gen: 0,
        },
        Request::Setattr {
            ino: 3,
            size: 7,
            expect: Some(0),
            locked: false,
            gen: 1,
        },
        Request::Setattr {
            ino: 3,
            size: 7,
            expect: Some(u64::MAX),
            locked: false,
            gen: u64::MAX,
        },
        Request::Data {
            op: Op::Write,
            slot: 3,
            at: 0,
            ino: 4,
            offset: 8192,
            len: 65536,
            gen: 7,
        },
        Request::Data {
            op: Op::Read,
            slot: 1,
            at: 61440,
            ino: 4,
            offset: 4096,
            len: 4096,
            gen: 0,
        },
        Request::Fsync { ino: 0 },
        Request::Stats,
    ];
    for (i, r) in reqs.iter().enumerate() {
        let d = r.encode(i as u32 + 100);
        assert_eq!(Request::decode(&d), Ok((i as u32 + 100, *r)));
    }
}

#[test]
fn responses_round_trip() {
    let cases = [
        (Op::Nop, Response::Ok),
        (Op::Lookup, Response::Attr(attr())),
        (
            Op::Readdir,
            Response::Entries {
                count: 3,
                next_cookie: 8,
            },
        ),
        (
            Op::Read,
            Response::Data {
                bytes: 4096,
                attr: attr(),
            },
        ),
        (
            Op::Stats,
            Response::Stats(DirStats {
                requests: 1,
                disk_reads: 2,
                disk_writes: 3,
                inodes_used: 4,
                inodes_total: 5,
                blocks_used: 6,
                blocks_total: 7,
            }),
        ),
        (Op::Write, Response::Err(Errno::NoSpace)),
    ];
    for (op, r) in cases {
        let d = r.encode(op, 42);
        assert_eq!(Response::decode(&d, op), Ok((42, r)));
    }
}

#[test]
fn malformed_descriptors_are_errors_not_panics() {
    let mut d = [0u8; DESC_SIZE];
    d[0] = 0xEE;
    assert_eq!(Request::decode(&d), Err(DecodeError::BadOpcode(0xEE)));
    // Path too long.
    let mut r = Raw::decode(
        &Request::Path {
            op: Op::Lookup,
            slot: 0,
            at: 0,
            len: 1,
            exclusive: false,
        }
        .encode(1),
    );
    r.args[1] = (MAX_PATH + 1) as u64;
    assert_eq!(Request::decode(&r.encode()), Err(DecodeError::BadArgument));
    // Slot number that does not fit.
    r.args[1] = 1;
    r.args[0] = u64::MAX;
    assert_eq!(Request::decode(&r.encode()), Err(DecodeError::BadArgument));
    // Response with an unknown status, or for another opcode.
    let mut resp = Raw::decode(&Response::Ok.encode(Op::Nop, 1));
    resp.status = 999;
    assert_eq!(
        Response::decode(&resp.encode(), Op::Nop),
        Err(DecodeError::BadStatus(999))
    );
    assert_eq!(
        Response::decode(&Response::Ok.encode(Op::Nop, 1), Op::Getattr),
        Err(DecodeError::BadOpcode(Op::Nop as u16))
    );
    // Attr with a bad kind.
    let mut a = Raw::decode(&Response::Attr(attr()).encode(Op::Getattr, 1));
    a.args[1] = 77;
    assert_eq!(
        Response::decode(&a.encode(), Op::Getattr),
        Err(DecodeError::BadArgument)
    );
    // Every byte pattern decodes to something or an error.
    for b in 0..=255u8 {
        let d = [b; DESC_SIZE];
        let _ = Request::decode(&d);
        for op in [Op::Nop, Op::Read, Op::Readdir, Op::Stats] {
            let _ = Response::decode(&d, op);
        }
    }
}

#[test]
fn op_of_matches_the_encoded_opcode() {
    let key = PageKey { ino: 1, idx: 2 };
    let mut reqs = vec![
        Request::Nop,
        Request::Stats,
        Request::PageStats,
        Request::MissStats {
            kind: MissKind::FileRead,
        },
        Request::Getattr { ino: 1 },
        Request::Setattr {
            ino: 1,
            size: 2,
            expect: Some(9),
            locked: false,
            gen: 2,
        },
        Request::Fsync { ino: 0 },
        Request::Readdir {
            slot: 3,
            ino: 1,
            cookie: 0,
        },
    ];
    for op in [Op::Lookup, Op::Create, Op::Mkdir, Op::Unlink, Op::Rmdir] {
        reqs.push(Request::Path {
            op,
            slot: 0,
            at: 0,
            len: 1,
            exclusive: false,
        });
    }
    for op in [Op::Read, Op::Write] {
        reqs.push(Request::Data {
            op,
            slot: 1,
            at: 0,
            ino: 1,
            offset: 0,
            len: 1,
            gen: 3,
        });
    }
    reqs.extend(every_page_req(key).map(Request::Page));
    for r in reqs {
        assert_eq!(op_of(&r) as u16, Raw::decode(&r.encode(0)).op, "{r:?}");
        assert_eq!(Request::decode(&r.encode(0)), Ok((0, r)));
    }
}

#[test]
fn page_ops_and_notices_round_trip() {
    let key = PageKey { ino: 9, idx: 77 };
    let reqs = [
        PageReq::Read { key, frame: 1234 },
        PageReq::LookupLock { key, frame: 5 },
        PageReq::Unlock { key },
        PageReq::Inv { key, dirty: true },
        PageReq::Drop { key, dirty: false },
        PageReq::Writeback { key, dirty: true },
    ];
    for (i, p) in reqs.iter().enumerate() {
        let d = Request::Page(*p).encode(i as u32);
        assert_eq!(Request::decode(&d), Ok((i as u32, Request::Page(*p))));
        let op = op_of(&Request::Page(*p));
        for reply in [
            PageReply::Owner { gfn: 3 },
            PageReply::Exclusive { gfn: 4 },
            PageReply::Shared { owner: 2, gfn: 99 },
            PageReply::Retry,
            PageReply::Done { written: true },
            PageReply::Refused,
            PageReply::IoError,
        ] {
            let d = Response::Page(reply).encode(op, 7);
            assert_eq!(Response::decode(&d, op), Ok((7, Response::Page(reply))));
        }
    }
    for n in [
        Notice::DirInv(key),
        Notice::InvAck { key, dirty: true },
        Notice::Sharers { key, count: 3 },
    ] {
        assert_eq!(Notice::decode(&n.encode()), Ok(n));
    }
    // A sharer count above 64 nodes is malformed.
    let mut n = Raw::decode(&Notice::Sharers { key, count: 64 }.encode());
    n.args[2] = 65;
    assert_eq!(Notice::decode(&n.encode()), Err(DecodeError::BadArgument));
    assert!(Request::decode(&Notice::Sharers { key, count: 1 }.encode()).is_err());
    // Locality: a request and its Entries-shaped answer.
    let q = Request::Locality {
        slot: 2,
        ino: 9,
        first: 100,
    };
    assert_eq!(Request::decode(&q.encode(5)), Ok((5, q)));
    let a = Response::Entries {
        count: 3,
        next_cookie: 640,
    };
    assert_eq!(
        Response::decode(&a.encode(Op::Locality, 5), Op::Locality),
        Ok((5, a))
    );
    // Malformed: dirty flag 2, owner 0, kind 99, notices as requests.
    let mut r = Raw::decode(&Request::Page(PageReq::Inv { key, dirty: true }).encode(1));
    r.args[2] = 2;
    assert_eq!(Request::decode(&r.encode()), Err(DecodeError::BadArgument));
    let mut s = Raw::decode(
        &Response::Page(PageReply::Shared { owner: 1, gfn: 1 }).encode(Op::PageRead, 1),
    );
    s.args[2] = 0;
    assert_eq!(
        Response::decode(&s.encode(), Op::PageRead),
        Err(DecodeError::BadArgument)
    );
    s.args[0] = 99;
    assert_eq!(
        Response::decode(&s.encode(), Op::PageRead),
        Err(DecodeError::BadArgument)
    );
    assert!(Request::decode(&Notice::DirInv(key).encode()).is_err());
    assert!(Notice::decode(&Request::Nop.encode(1)).is_err());
}

#[test]
fn dirent_round_trip_and_rejects() {
    let e = DirEntry {
        name: "hello.txt".into(),
        attr: attr(),
    };
    let mut b = [0u8; DIRENT_SIZE];
    e.encode(&mut b);
    assert_eq!(DirEntry::decode(&b), Some(e));
    b[25] = 200;
    assert_eq!(DirEntry::decode(&b), None);
    b[25] = 0;
    assert_eq!(DirEntry::decode(&b), None);
}

#[test]
fn errno_numbers_are_stable_and_unique() {
    for e in Errno::ALL {
        assert_eq!(Errno::from_u16(e as u16), Some(e));
        assert!(!e.as_str().is_empty());
    }
    assert_eq!(Errno::from_u16(0), None);
}

#[test]
fn every_opcode_round_trips_through_its_number() {
    for (i, op) in Op::ALL.iter().enumerate() {
        assert_eq!(Op::from_u16(*op as u16), Some(*op));
        assert!(!Op::ALL[..i].contains(op), "{op:?} twice in Op::ALL");
    }
    for v in [0u16, 2, 29, 38, 58, u16::MAX] {
        assert_eq!(Op::from_u16(v), None, "{v}");
    }
}

fn every_page_req(key: PageKey) -> [PageReq; 10] {
    let range = DelegRange::of(key);
    [
        PageReq::Read { key, frame: 1234 },
        PageReq::LookupLock { key, frame: 5 },
        PageReq::Unlock { key },
        PageReq::Inv { key, dirty: true },
        PageReq::Drop { key, dirty: false },
        PageReq::Writeback { key, dirty: true },
        PageReq::Promote { key },
        PageReq::Unprotect { key },
        PageReq::Delegate { range, list: 77 },
        PageReq::DelegReturn { range },
    ]
}

#[test]
fn page_request_table_is_one_to_one_and_covers_the_page_opcodes() {
    let key = PageKey { ino: 3, idx: 4 };
    let reqs = every_page_req(key);
    let page_ops: Vec<Op> = reqs.iter().map(PageReq::op).collect();
    for (i, op) in page_ops.iter().enumerate() {
        assert!(!page_ops[..i].contains(op), "{op:?} used twice");
    }
    for r in reqs {
        // Both directions: the opcode on the wire and back to the variant.
        let d = Request::Page(r).encode(9);
        assert_eq!(Raw::decode(&d).op, r.op() as u16);
        assert_eq!(op_of(&Request::Page(r)), r.op());
        assert_eq!(PageReq::from_args(r.op(), r.to_args()), Some(Ok(r)));
    }
    // Every other opcode is not a page request.
    for op in Op::ALL {
        assert_eq!(
            PageReq::from_args(op, [1, 2, 0]).is_some(),
            page_ops.contains(&op),
            "{op:?}"
        );
    }
}

#[test]
fn reply_codes_are_named_distinct_and_round_trip() {
    let replies = [
        (PageReply::Owner { gfn: 3 }, reply_code::OWNER),
        (PageReply::Exclusive { gfn: 4 }, reply_code::EXCLUSIVE),
        (PageReply::Shared { owner: 64, gfn: 99 }, reply_code::SHARED),
        (PageReply::Retry, reply_code::RETRY),
        (PageReply::Done { written: true }, reply_code::DONE),
        (PageReply::Done { written: false }, reply_code::DONE),
        (PageReply::Refused, reply_code::REFUSED),
        (PageReply::IoError, reply_code::IO_ERROR),
        (
            PageReply::Delegated { granted: true },
            reply_code::DELEGATED,
        ),
        (
            PageReply::Delegated { granted: false },
            reply_code::DELEGATED,
        ),
    ];
    for (reply, code) in replies {
        assert_eq!(reply.code(), code, "{reply:?}");
        assert_eq!(reply.to_args()[0], code);
        assert_eq!(PageReply::from_args(reply.to_args()), Ok(reply));
    }
    // Eight kinds, eight codes.
    let mut codes: Vec<u64> = replies.iter().map(|(_, c)| *c).collect();
    codes.sort_unstable();
    codes.dedup();
    assert_eq!(codes.len(), 8, "two kinds of reply share a code");
    for bad in [0u64, 9, u64::MAX] {
        assert_eq!(
            PageReply::from_args([bad, 0, 0]),
            Err(DecodeError::BadArgument)
        );
    }
    for owner in [0u64, 65, 256] {
        assert_eq!(
            PageReply::from_args([reply_code::SHARED, 1, owner]),
            Err(DecodeError::BadArgument)
        );
    }
}

#[test]
fn page_dir_stats_keep_their_names_on_the_wire() {
    let s = PageDirStats {
        entries: 1,
        page_requests: 2,
        fills: 3,
        remote_maps: 4,
        dir_invs: 5,
        writebacks: 6,
        max_batch: 7,
    };
    assert_eq!(s.to_args(), [1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(PageDirStats::from_args(s.to_args()), s);
    let d = Response::PageStats(s).encode(Op::PageStats, 5);
    assert_eq!(
        Response::decode(&d, Op::PageStats),
        Ok((5, Response::PageStats(s)))
    );
    let st = DirStats {
        requests: 10,
        disk_reads: 20,
        disk_writes: 30,
        inodes_used: 40,
        inodes_total: 50,
        blocks_used: 60,
        blocks_total: 70,
    };
    assert_eq!(DirStats::from_args(st.to_args()), st);
}

#[test]
fn miss_stats_round_trip_and_subtract() {
    for kind in MissKind::ALL {
        let d = Request::MissStats { kind }.encode(3);
        assert_eq!(Request::decode(&d), Ok((3, Request::MissStats { kind })));
    }
    // An unknown kind is refused, not mapped to a known one.
    let mut r = Raw::decode(
        &Request::MissStats {
            kind: MissKind::PageFill,
        }
        .encode(1),
    );
    r.args[0] = 2;
    assert_eq!(Request::decode(&r.encode()), Err(DecodeError::BadArgument));
    let s = MissStats {
        count: 4,
        lookup_ns: 10,
        disk_ns: 200,
        fill_ns: 30,
        reply_ns: 5,
    };
    let d = Response::MissStats(s).encode(Op::MissStats, 9);
    assert_eq!(
        Response::decode(&d, Op::MissStats),
        Ok((9, Response::MissStats(s)))
    );
    assert_eq!(s.service_ns(), 245);
    let later = MissStats {
        count: 6,
        lookup_ns: 15,
        disk_ns: 300,
        fill_ns: 40,
        reply_ns: 8,
    };
    assert_eq!(
        later.since(&s),
        MissStats {
            count: 2,
            lookup_ns: 5,
            disk_ns: 100,
            fill_ns: 10,
            reply_ns: 3,
        }
    );
    // A restarted directory's smaller counters give zeros, not a wrap.
    assert_eq!(s.since(&later), MissStats::default());
}

#[test]
fn invalid_answer_keeps_opcode_and_tag() {
    let mut d = Request::Getattr { ino: 5 }.encode(77);
    d[40] = 0xAB; // arguments are not echoed
    let a = Raw::decode(&Raw::invalid_answer(&d));
    assert_eq!(
        a,
        Raw {
            op: Op::Getattr as u16,
            status: Errno::Invalid as u16,
            tag: 77,
            args: [0; 7],
        }
    );
    assert_eq!(
        Response::decode(&Raw::invalid_answer(&d), Op::Getattr),
        Ok((77, Response::Err(Errno::Invalid)))
    );
    // An unknown opcode is echoed as it came.
    let mut junk = [0xEEu8; DESC_SIZE];
    junk[4..8].copy_from_slice(&9u32.to_le_bytes());
    let a = Raw::decode(&Raw::invalid_answer(&junk));
    assert_eq!((a.op, a.status, a.tag), (0xEEEE, Errno::Invalid as u16, 9));
}
