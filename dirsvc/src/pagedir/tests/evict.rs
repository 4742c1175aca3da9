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
    assert_eq!(t.d.evict_file(K.ino, 0), vec![inv(2), inv(3)]);
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
    assert_eq!(t.ack(3, true), vec![export(g, false), inv(1)]);
    assert_eq!(t.d.stats().dir_invs, 3);
    assert!(t.ack(1, true).is_empty(), "no write-back, no export change");
    assert!(t.d.is_empty());
}

#[test]
fn evict_file_without_sharers_tells_the_owner_at_once() {
    let mut t = T::new();
    let g = t.own(1);
    assert_eq!(t.d.evict_file(K.ino, K.idx), vec![export(g, false), inv(1)]);
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
            Action::Invalidate {
                node: 2,
                key: below
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
    assert_eq!(t.ack(2, false), vec![export(g, false), inv(3)]);
    assert!(t.d.node_failed(3).is_empty());
    assert!(t.d.is_empty());
    // A sharer fails: the owner is told next, nothing is written back.
    let g = t.own(4);
    t.share(2);
    t.d.evict_file(K.ino, 0);
    assert_eq!(t.d.node_failed(2), vec![export(g, false), inv(4)]);
    assert!(t.ack(4, false).is_empty());
    assert!(t.d.is_empty());
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
