//! Delegated ownership's messages and list records: round trips, bad
//! ranges and records refused.

use super::*;

#[test]
fn delegation_messages_round_trip_and_reject_bad_ranges() {
    let range = DelegRange::new(5, 3 * DELEG_PAGES).unwrap();
    assert_eq!(DelegRange::new(5, 3 * DELEG_PAGES + 1), None);
    assert_eq!(
        DelegRange::of(PageKey {
            ino: 5,
            idx: 3 * DELEG_PAGES + 17
        }),
        range
    );
    assert!(range.contains(&PageKey {
        ino: 5,
        idx: range.last()
    }));
    assert!(!range.contains(&PageKey {
        ino: 5,
        idx: range.last() + 1
    }));
    assert!(!range.contains(&PageKey {
        ino: 6,
        idx: range.base
    }));
    assert_eq!(range.span().count, DELEG_PAGES);
    // The last range of the index space stops short of its last page: its
    // span is a well-formed one.
    let top = DelegRange::of(PageKey {
        ino: 1,
        idx: u64::MAX,
    });
    assert_eq!(top.last(), u64::MAX - 1);
    assert!(!top.contains(&PageKey {
        ino: 1,
        idx: u64::MAX
    }));
    let s = top.span();
    assert_eq!(PageSpan::new(s.ino, s.first, s.count), Some(s));
    for r in [
        PageReq::Delegate { range, list: 9 },
        PageReq::DelegReturn { range },
    ] {
        let d = Request::Page(r).encode(3);
        assert_eq!(Request::decode(&d), Ok((3, Request::Page(r))));
        // A base off the range grid is malformed.
        let mut raw = Raw::decode(&d);
        raw.args[1] += 1;
        assert_eq!(
            Request::decode(&raw.encode()),
            Err(DecodeError::BadArgument)
        );
        for granted in [false, true] {
            let a = Response::Page(PageReply::Delegated { granted });
            assert_eq!(Response::decode(&a.encode(r.op(), 4), r.op()), Ok((4, a)));
        }
    }
    // The counters keep their names on the wire.
    let s = DelegStats {
        granted: 1,
        denied: 2,
        recalled: 3,
        returned: 4,
        pages: 5,
        parked: 6,
    };
    assert_eq!(s.to_args(), [1, 2, 3, 4, 5, 6, 0]);
    let d = Response::DelegStats(s).encode(Op::DelegStats, 2);
    assert_eq!(
        Response::decode(&d, Op::DelegStats),
        Ok((2, Response::DelegStats(s)))
    );
    let q = Request::DelegStats;
    assert_eq!(Request::decode(&q.encode(3)), Ok((3, q)));
    assert_eq!(op_of(&q), Op::DelegStats);
    // A return carries no list frame.
    let mut raw = Raw::decode(&Request::Page(PageReq::DelegReturn { range }).encode(1));
    raw.args[2] = 1;
    assert_eq!(
        Request::decode(&raw.encode()),
        Err(DecodeError::BadArgument)
    );
    // `granted` is a flag.
    assert_eq!(
        PageReply::from_args([reply_code::DELEGATED, 0, 2]),
        Err(DecodeError::BadArgument)
    );
    // The recall: a notice, never a request; a bad base or a stray
    // argument is malformed.
    let n = Notice::Recall(range);
    assert_eq!(Notice::decode(&n.encode()), Ok(n));
    assert!(Request::decode(&n.encode()).is_err());
    let mut raw = Raw::decode(&n.encode());
    raw.args[1] = 1;
    assert_eq!(Notice::decode(&raw.encode()), Err(DecodeError::BadArgument));
    let mut raw = Raw::decode(&n.encode());
    raw.args[4] = 1;
    assert_eq!(Notice::decode(&raw.encode()), Err(DecodeError::BadArgument));
}

#[test]
fn delegation_lists_round_trip_and_reject_bad_records() {
    let range = DelegRange::new(8, DELEG_PAGES).unwrap();
    let pages = [
        DelegPage {
            key: range.key(0),
            gfn: 100,
            dirty: true,
        },
        DelegPage {
            key: range.key(7),
            gfn: 0xffff_ffff,
            dirty: false,
        },
        DelegPage {
            key: range.key(DELEG_PAGES - 1),
            gfn: 0,
            dirty: true,
        },
    ];
    let img = DelegList::encode(range, &pages).unwrap();
    assert_eq!(img.len(), DELEG_PAGES as usize * DELEG_RECORD);
    assert_eq!(DelegList::decode(range, &img), Ok(pages.to_vec()));
    // A page out of the range, or a frame past 32 bits, cannot be listed.
    let out = DelegPage {
        key: range.key(DELEG_PAGES),
        ..pages[0]
    };
    assert_eq!(DelegList::encode(range, &[out]), None);
    let wide = DelegPage {
        gfn: 1 << 32,
        ..pages[0]
    };
    assert_eq!(DelegList::encode(range, &[wide]), None);
    // Malformed records: dirty without present, stray bits.
    for bad in [2u64, 1 << 2, 1 << 31, (5 << 32) | 0b110] {
        let mut img = img.clone();
        img[8..16].copy_from_slice(&bad.to_le_bytes());
        assert_eq!(
            DelegList::decode(range, &img),
            Err(DecodeError::BadArgument),
            "{bad:#x}"
        );
    }
    // A short image is an error, not a panic.
    assert_eq!(
        DelegList::decode(range, &img[..100]),
        Err(DecodeError::BadArgument)
    );
}
