//! Reads and fills, and requests the directory refuses (foreign frames, bad node ids).

use super::*;

#[test]
fn read_miss_fills_then_owner() {
    let mut t = T::new();
    let g = t.f(1, 0);
    assert_eq!(t.read(1, 5), vec![Action::Fill { key: K, gfn: g }]);
    assert_eq!(t.d.state_of(&K, 1), PageState::E);
    assert_eq!(
        t.entry().unwrap().phase,
        Phase::Exclusive {
            by_dir: true,
            tag: 5
        }
    );
    assert_eq!(
        t.d.filled(K, true),
        vec![reply(1, 5, PageReply::Owner { gfn: g })]
    );
    assert_eq!(t.d.state_of(&K, 1), PageState::O);
    let e = t.entry().unwrap();
    assert_eq!((e.owner, e.gfn, e.sharers, e.dirty), (1, g, 0, false));
    let s = t.d.stats();
    assert_eq!((s.reads, s.fills), (1, 1));
    assert!(t.d.holds_frames_of(1));
}

#[test]
fn fill_error_answers_io_error_and_forgets_the_page() {
    let mut t = T::new();
    t.read(2, 5);
    assert_eq!(t.d.filled(K, false), vec![reply(2, 5, PageReply::IoError)]);
    assert!(t.d.is_empty());
    assert_eq!(t.d.state_of(&K, 2), PageState::I);
    assert!(!t.d.holds_frames_of(2));
    // A second completion of the same fill finds nothing to do.
    assert!(t.d.filled(K, true).is_empty());
}

#[test]
fn filled_without_a_directory_fill_does_nothing() {
    let mut t = T::new();
    assert!(t.d.filled(K, true).is_empty());
    t.lock(1, 3);
    assert!(t.d.filled(K, true).is_empty(), "E of a LOOKUP_LOCK");
    assert!(matches!(
        t.entry().unwrap().phase,
        Phase::Exclusive { by_dir: false, .. }
    ));
    t.req(1, 4, PageReq::Unlock { key: K });
    assert!(t.d.filled(K, false).is_empty(), "owned page");
    assert_eq!(t.entry().unwrap().phase, Phase::Owned);
}

#[test]
fn read_of_an_owned_page_shares_and_exports_for_the_first_sharer_only() {
    let mut t = T::new();
    let g = t.own(1);
    assert_eq!(
        t.read(2, 7),
        vec![
            export(g, true),
            reply(2, 7, PageReply::Shared { owner: 1, gfn: g })
        ]
    );
    assert_eq!(
        t.read(3, 8),
        vec![reply(3, 8, PageReply::Shared { owner: 1, gfn: g })]
    );
    assert_eq!(t.d.state_of(&K, 2), PageState::S);
    assert_eq!(t.d.state_of(&K, 3), PageState::S);
    assert_eq!(t.d.state_of(&K, 4), PageState::I);
    assert_eq!(t.entry().unwrap().sharers, 0b110);
    assert_eq!(t.d.stats().remote_maps, 2);
    // A sharer asking again gets the same mapping, nothing else.
    assert_eq!(
        t.read(2, 9),
        vec![reply(2, 9, PageReply::Shared { owner: 1, gfn: g })]
    );
    // The owner asking again is told it owns the page in its frame.
    let other = t.f(1, 3);
    assert_eq!(
        t.req(
            1,
            10,
            PageReq::Read {
                key: K,
                frame: other
            }
        ),
        vec![reply(1, 10, PageReply::Owner { gfn: g })]
    );
    assert_eq!(t.entry().unwrap().gfn, g);
}

#[test]
fn read_and_lookup_lock_retry_while_exclusive_or_invalidating() {
    let mut t = T::new();
    // E by a READ fill.
    t.read(1, 1);
    for n in 1..=3 {
        let [read, lock, ..] = t.all_reqs(n);
        t.retried(n, read);
        t.retried(n, lock);
    }
    t.d.filled(K, true);
    // TBI: the owner reclaims, node 2 has not acked.
    t.share(2);
    t.req(
        1,
        3,
        PageReq::Inv {
            key: K,
            dirty: false,
        },
    );
    assert_eq!(t.d.state_of(&K, 1), PageState::Tbi);
    for n in 1..=3 {
        let [read, lock, ..] = t.all_reqs(n);
        t.retried(n, read);
        t.retried(n, lock);
    }
    t.ack(2, false);
    // E by a LOOKUP_LOCK.
    t.lock(3, 4);
    for n in [1, 2, 4] {
        let [read, lock, ..] = t.all_reqs(n);
        t.retried(n, read);
        t.retried(n, lock);
    }
    assert!(t.d.stats().retries >= 16);
}

#[test]
fn frames_outside_the_requesters_pool_are_refused() {
    let mut t = T::new();
    let theirs = t.f(2, 0);
    let (_, end) = t.l.pool_gfns(4);
    for frame in [theirs, 0, 1, end, u64::MAX] {
        t.refused(1, PageReq::Read { key: K, frame });
        t.refused(1, PageReq::LookupLock { key: K, frame });
    }
    assert!(t.d.is_empty(), "no entry made by a refused miss");
    // Also on a cached page (nothing is shared).
    let g = t.own(2);
    t.refused(1, PageReq::Read { key: K, frame: g });
    t.refused(3, PageReq::LookupLock { key: K, frame: g });
    assert_eq!(t.entry().unwrap().sharers, 0);
}

#[test]
fn bad_node_ids_are_refused() {
    let mut t = T::new();
    t.own(1);
    t.share(2);
    // 33..: beyond the narrow layout of a 4-node cluster.
    for node in [0u8, 33, 64, 65, 255] {
        for req in t.all_reqs(node) {
            t.refused(node, req);
        }
        assert!(t.d.ack(node, K, true).is_empty());
        assert!(t.d.node_failed(node).is_empty());
        assert_eq!(t.d.state_of(&K, node), PageState::I);
        assert!(!t.d.holds_frames_of(node));
    }
    t.d.check().unwrap();
    assert_eq!(t.d.state_of(&K, 1), PageState::O);
}
