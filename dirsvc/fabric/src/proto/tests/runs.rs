//! Page spans (INV_RANGE) and page runs (INV and WRITEBACK runs): round
//! trips, bad ones refused, sorted pages split into runs.

use super::*;

#[test]
fn span_notices_round_trip_and_reject_bad_spans() {
    let span = PageSpan::new(9, 10, 300).unwrap();
    assert!(span.contains(&PageKey { ino: 9, idx: 309 }));
    assert!(!span.contains(&PageKey { ino: 9, idx: 310 }));
    assert!(!span.contains(&PageKey { ino: 8, idx: 10 }));
    for n in [
        Notice::InvRange(span),
        Notice::InvRangeAck { span, dirty: true },
        Notice::InvRangeAck { span, dirty: false },
    ] {
        assert_eq!(Notice::decode(&n.encode()), Ok(n));
        assert!(Request::decode(&n.encode()).is_err());
    }
    // Empty, too long, wrapping past the last index, a bad flag.
    let bad = |f: &dyn Fn(&mut Raw), n: Notice| {
        let mut r = Raw::decode(&n.encode());
        f(&mut r);
        assert_eq!(Notice::decode(&r.encode()), Err(DecodeError::BadArgument));
    };
    for n in [
        Notice::InvRange(span),
        Notice::InvRangeAck { span, dirty: true },
    ] {
        bad(&|r| r.args[2] = 0, n);
        bad(&|r| r.args[2] = MAX_SPAN + 1, n);
        bad(&|r| r.args[1] = u64::MAX, n);
        bad(&|r| r.args[3] = 2, n);
    }
    assert_eq!(PageSpan::new(1, u64::MAX - 1, 2), None);
    assert_eq!(
        PageSpan::new(1, u64::MAX - 1, 1).map(|s| s.last()),
        Some(u64::MAX - 1)
    );
}

#[test]
fn page_runs_round_trip_and_reject_bad_runs() {
    let span = PageSpan::new(9, 10, 64).unwrap();
    for kind in RunKind::ALL {
        assert_eq!(RunKind::of_op(kind.op()), Some(kind));
        for dirty in [0, 1, u64::MAX, 0x8000_0000_0000_0001] {
            let r = Request::PageRun(PageRun::new(kind, span, dirty).unwrap());
            assert_eq!(Request::decode(&r.encode(77)), Ok((77, r)));
            assert_eq!(op_of(&r), kind.op());
            let answer = Response::Run(RunReply {
                done: dirty,
                written: !dirty,
            });
            assert_eq!(
                Response::decode(&answer.encode(kind.op(), 77), kind.op()),
                Ok((77, answer))
            );
        }
        // Empty, longer than a run, wrapping, a flag past the run.
        let good = Raw::decode(&Request::PageRun(PageRun::new(kind, span, 1).unwrap()).encode(1));
        let bad = |f: &dyn Fn(&mut Raw)| {
            let mut r = good;
            f(&mut r);
            assert_eq!(Request::decode(&r.encode()), Err(DecodeError::BadArgument));
        };
        bad(&|r| r.args[2] = 0);
        bad(&|r| r.args[2] = MAX_RUN + 1);
        bad(&|r| r.args[1] = u64::MAX);
        bad(&|r| {
            r.args[2] = 3;
            r.args[3] = 0b1000;
        });
    }
    assert_eq!(run_mask(1), 1);
    assert_eq!(run_mask(63), u64::MAX >> 1);
    assert_eq!(run_mask(64), u64::MAX);
    assert_eq!(
        PageRun::new(RunKind::Inv, PageSpan::new(1, 0, 65).unwrap(), 0),
        None
    );
}

#[test]
fn sorted_pages_split_into_runs_at_a_gap_another_file_or_max_run() {
    let k = |ino, idx| PageKey { ino, idx };
    // A 64-page file: one run, the dirty flags in place.
    let pages: alloc::vec::Vec<(PageKey, bool)> = (0..64).map(|i| (k(5, i), i % 3 == 0)).collect();
    let runs = PageRun::split(RunKind::Inv, &pages);
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].span, PageSpan::new(5, 0, 64).unwrap());
    assert!(runs[0].pages().eq(pages.iter().copied()));
    // A gap, another file, a run past MAX_RUN.
    let mut pages = alloc::vec![
        (k(5, 0), false),
        (k(5, 1), true),
        (k(5, 3), false),
        (k(6, 4), true)
    ];
    pages.extend((100..100 + MAX_RUN + 1).map(|i| (k(7, i), false)));
    let runs = PageRun::split(RunKind::Writeback, &pages);
    let spans: alloc::vec::Vec<(u64, u64, u64, u64)> = runs
        .iter()
        .map(|r| (r.span.ino, r.span.first, r.span.count, r.dirty))
        .collect();
    assert_eq!(
        spans,
        [
            (5, 0, 2, 0b10),
            (5, 3, 1, 0),
            (6, 4, 1, 1),
            (7, 100, MAX_RUN, 0),
            (7, 100 + MAX_RUN, 1, 0)
        ]
    );
    assert!(runs.iter().all(|r| r.kind == RunKind::Writeback));
}
