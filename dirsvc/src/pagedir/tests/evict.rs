//! Evicting a whole file.

use super::*;

#[test]
fn evict_file_invalidates_sharers_first_then_the_owner_without_write_back() {
    let mut t = T::new();
    let g = t.own(1);
    t.share(2);
    t.share(3);
    t.req(
        2,
        4,
        PageReq::Drop {
            key: K,
            dirty: true,
        },
    );
    t.share(2);
    assert!(t.entry().unwrap().dirty);
    assert_eq!(t.d.evict_file(K.ino, 0), vec![rinv(2), rinv(3)]);
    assert_eq!(t.d.state_of(&K, 1), PageState::Tbi);
    // The owner must not free its frame while a sharer maps it.
    assert!(t.ack(2, true).is_empty());
    t.refused(
        1,
        PageReq::Inv {
            key: K,
            dirty: true,
        },
    );
    assert_eq!(t.ack(3, true), vec![export(g, false), rinv(1)]);
    assert_eq!(t.d.stats().range_invs, 3);
    assert!(t.ack(1, true).is_empty(), "no write-back, no export change");
    assert!(t.d.is_empty());
}

#[test]
fn evict_file_without_sharers_tells_the_owner_at_once() {
    let mut t = T::new();
    let g = t.own(1);
    assert_eq!(
        t.d.evict_file(K.ino, K.idx),
        vec![export(g, false), rinv(1)]
    );
    let [read, ..] = t.all_reqs(2);
    t.retried(2, read);
    assert!(t.ack(1, false).is_empty());
    assert!(t.d.is_empty());
}

#[test]
fn evict_file_leaves_other_pages_and_transient_ones_alone() {
    let mut t = T::new();
    let below = PageKey { ino: 7, idx: 2 };
    let other = PageKey { ino: 8, idx: 3 };
    for (n, key) in [(2u8, below), (3, other)] {
        let frame = t.f(n, 0);
        t.req(n, 1, PageReq::LookupLock { key, frame });
        t.req(n, 2, PageReq::Unlock { key });
    }
    t.read(1, 3); // K in E
    assert!(t.d.evict_file(7, 3).is_empty());
    assert!(matches!(t.entry().unwrap().phase, Phase::Exclusive { .. }));
    t.d.filled(K, true);
    t.share(4);
    t.req(
        1,
        4,
        PageReq::Inv {
            key: K,
            dirty: true,
        },
    );
    assert!(t.d.evict_file(7, 3).is_empty(), "K already in TBI");
    assert_eq!(t.ack(4, false).len(), 3, "write-back, export, answer");
    assert_eq!(t.d.entry(&other).unwrap().phase, Phase::Owned);
    assert_eq!(t.d.entry(&below).unwrap().phase, Phase::Owned);
    // From page 0 on: page 2 goes too.
    let g = t.f(2, 0);
    assert_eq!(
        t.d.evict_file(7, 0),
        vec![
            export(g, false),
            Action::InvalidateRange {
                node: 2,
                span: PageSpan::page(below)
            }
        ]
    );
    assert_eq!(t.d.entry(&other).unwrap().phase, Phase::Owned);
}

#[test]
fn evict_file_survives_failures() {
    // The owner fails before it is told: the last sharer completes it.
    let mut t = T::new();
    let g = t.own(1);
    t.share(2);
    t.d.evict_file(K.ino, 0);
    assert!(t.d.node_failed(1).is_empty());
    assert!(t.d.holds_frames_of(1));
    assert_eq!(t.ack(2, false), vec![export(g, false)]);
    assert!(t.d.is_empty());
    // The owner fails after it was told: its ack will not come.
    let g = t.own(3);
    t.share(2);
    t.d.evict_file(K.ino, 0);
    assert_eq!(t.ack(2, false), vec![export(g, false), rinv(3)]);
    assert!(t.d.node_failed(3).is_empty());
    assert!(t.d.is_empty());
    // A sharer fails: the owner is told next, nothing is written back.
    let g = t.own(4);
    t.share(2);
    t.d.evict_file(K.ino, 0);
    assert_eq!(t.d.node_failed(2), vec![export(g, false), rinv(4)]);
    assert!(t.ack(4, false).is_empty());
    assert!(t.d.is_empty());
}

/// `n` pages of inode 7 from page 0, owned by node 1 and mapped by nodes
/// 2 and 3 (node 3 only the even ones); returns node 1's frames.
fn file_of(t: &mut T, n: u64) -> Vec<u64> {
    let mut frames = Vec::new();
    for i in 0..n {
        let key = PageKey { ino: 7, idx: i };
        let g = t.f(1, i);
        t.req(1, 1, PageReq::Read { key, frame: g });
        t.d.filled(key, true);
        for s in [2u8, 3] {
            if s == 2 || i % 2 == 0 {
                let frame = t.f(s, i);
                t.req(s, 2, PageReq::Read { key, frame });
            }
        }
        frames.push(g);
    }
    frames
}

fn span(first: u64, count: u64) -> PageSpan {
    PageSpan::new(7, first, count).unwrap()
}

fn range(node: u8, first: u64, count: u64) -> Action {
    Action::InvalidateRange {
        node,
        span: span(first, count),
    }
}

#[test]
fn evict_file_tells_each_node_once_per_run_and_takes_one_ack() {
    let mut t = T::new();
    let g = file_of(&mut t, 8);
    let out = t.d.evict_file(7, 0);
    // Node 2 maps the whole file: one notice; node 3 every other page:
    // one per page (a page between was never its to tear down).
    let mut want = vec![range(2, 0, 8)];
    want.extend((0..8).step_by(2).map(|i| range(3, i, 1)));
    assert_eq!(out, want);
    assert_eq!(t.d.stats().dir_invs, 0);
    assert_eq!(t.d.stats().range_invs, 5);
    // Node 2's one ack settles the odd pages: their owner is told, once.
    let out = t.d.ack_range(2, span(0, 8), false);
    t.d.check().unwrap();
    let mut want: Vec<Action> = (1..8).step_by(2).map(|i| export(g[i], false)).collect();
    want.extend([
        range(1, 1, 1),
        range(1, 3, 1),
        range(1, 5, 1),
        range(1, 7, 1),
    ]);
    assert_eq!(out, want);
    // A duplicate changes nothing.
    assert!(t.d.ack_range(2, span(0, 8), true).is_empty());
    // Node 3's acks: the even pages' owner notices.
    for i in (0..8).step_by(2) {
        t.d.ack_range(3, span(i, 1), false);
    }
    // The owner's acks (one per notice) empty the directory, nothing
    // written back.
    for i in 0..8 {
        let out = t.d.ack_range(1, span(i, 1), true);
        assert!(out.iter().all(|a| !matches!(a, Action::WriteBack { .. })));
    }
    t.d.check().unwrap();
    assert!(t.d.is_empty());
    assert_eq!(t.d.stats().range_acks, 2 + 4 + 8);
}

#[test]
fn evict_file_of_an_unshared_file_is_one_notice_and_one_ack() {
    let mut t = T::new();
    let mut frames = Vec::new();
    for i in 0..100u64 {
        let key = PageKey { ino: 7, idx: i };
        let frame = t.f(1, i);
        t.req(1, 1, PageReq::LookupLock { key, frame });
        t.req(1, 2, PageReq::Unlock { key });
        frames.push(frame);
    }
    // Truncate to 10 pages: pages 10..100 go, unexported first, then one
    // notice to the owner.
    let out = t.d.evict_file(7, 10);
    let mut want: Vec<Action> = frames[10..].iter().map(|&g| export(g, false)).collect();
    want.push(range(1, 10, 90));
    assert_eq!(out, want);
    assert_eq!(
        t.d.len(),
        100,
        "the owner's frames are in use until it acks"
    );
    // A request for a page of the range waits for the ack.
    let key = PageKey { ino: 7, idx: 50 };
    let frame = t.f(2, 0);
    assert_eq!(
        t.req(2, 9, PageReq::Read { key, frame }),
        vec![reply(2, 9, PageReply::Retry)]
    );
    assert!(t.d.ack_range(1, span(10, 90), true).is_empty());
    t.d.check().unwrap();
    assert_eq!(t.d.len(), 10);
    assert_eq!(t.d.stats().writebacks, 0);
    assert_eq!((t.d.stats().range_invs, t.d.stats().range_acks), (1, 1));
}

#[test]
fn a_range_ack_counts_only_for_pages_that_await_it() {
    // Node 2 maps page 0 only; its notice is for page 0: its range ack
    // for a wider span (a broken node) leaves node 3's page alone.
    let mut t = T::new();
    for (i, owner) in [(0u64, 1u8), (1, 3)] {
        let key = PageKey { ino: 7, idx: i };
        let g = t.f(owner, i);
        t.req(owner, 1, PageReq::Read { key, frame: g });
        t.d.filled(key, true);
    }
    let frame = t.f(2, 0);
    t.req(
        2,
        2,
        PageReq::Read {
            key: PageKey { ino: 7, idx: 0 },
            frame,
        },
    );
    let frame = t.f(4, 1);
    t.req(
        4,
        2,
        PageReq::Read {
            key: PageKey { ino: 7, idx: 1 },
            frame,
        },
    );
    let out = t.d.evict_file(7, 0);
    assert_eq!(out, vec![range(2, 0, 1), range(4, 1, 1)]);
    assert!(
        t.d.ack_range(2, span(0, 2), false).len() == 2,
        "page 0 only"
    );
    assert_eq!(t.d.awaits_ack(4, &PageKey { ino: 7, idx: 1 }), Some(true));
    assert_eq!(t.d.awaits_range_ack(4, &span(0, 2)), Some(true));
    assert_eq!(t.d.awaits_range_ack(1, &span(0, 2)), Some(false));
    t.d.check().unwrap();
}

#[test]
fn a_page_is_tearing_down_until_its_owner_acked() {
    let mut t = T::new();
    t.own(1);
    t.share(2);
    assert!(!t.d.tearing_down(K.ino, 0, u64::MAX));
    t.d.evict_file(K.ino, 0);
    assert!(t.d.tearing_down(K.ino, 0, K.idx));
    assert!(t.d.tearing_down(K.ino, K.idx, K.idx));
    assert!(!t.d.tearing_down(K.ino, 0, K.idx - 1), "below the page");
    assert!(!t.d.tearing_down(K.ino, K.idx + 1, u64::MAX), "past it");
    assert!(!t.d.tearing_down(K.ino + 1, 0, u64::MAX), "another file");
    assert!(!t.d.tearing_down(K.ino, K.idx, 0), "an empty range");
    // The sharer acked: the owner is told, and may still store into the
    // frame until it acked too.
    t.ack(2, false);
    assert!(t.d.tearing_down(K.ino, 0, K.idx));
    t.ack(1, false);
    assert!(!t.d.tearing_down(K.ino, 0, K.idx));
    assert!(t.d.is_empty());
}
