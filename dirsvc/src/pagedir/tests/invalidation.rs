//! Invalidation (INV, acks) and DROPs racing it.

use super::*;

#[test]
fn inv_is_refused_unless_the_requester_owns_the_page() {
    let mut t = T::new();
    let inv = PageReq::Inv {
        key: K,
        dirty: true,
    };
    t.refused(1, inv); // not cached
    t.read(1, 1);
    t.refused(1, inv); // E
    t.d.filled(K, true);
    t.share(2);
    t.refused(2, inv); // sharer
    t.refused(3, inv); // stranger
    t.req(
        1,
        2,
        PageReq::Inv {
            key: K,
            dirty: false,
        },
    );
    t.refused(1, inv); // already TBI
    assert!(!t.entry().unwrap().dirty);
}

#[test]
fn inv_without_sharers_completes_at_once() {
    let mut t = T::new();
    let g = t.own(1);
    assert_eq!(
        t.req(
            1,
            3,
            PageReq::Inv {
                key: K,
                dirty: false
            }
        ),
        vec![export(g, false), reply(1, 3, DONE)]
    );
    assert!(t.d.is_empty());
    // Dirty from the owner's INV: written back before the answer.
    let g = t.own(2);
    assert_eq!(
        t.req(
            2,
            4,
            PageReq::Inv {
                key: K,
                dirty: true
            }
        ),
        vec![
            Action::WriteBack { key: K, gfn: g },
            export(g, false),
            reply(2, 4, WRITTEN)
        ]
    );
    // Dirty from an earlier full-page write.
    t.lock(3, 5);
    t.req(3, 6, PageReq::Unlock { key: K });
    let g = t.f(3, 0);
    assert_eq!(
        t.req(
            3,
            7,
            PageReq::Inv {
                key: K,
                dirty: false
            }
        ),
        vec![
            Action::WriteBack { key: K, gfn: g },
            export(g, false),
            reply(3, 7, WRITTEN)
        ]
    );
    assert!(t.d.is_empty());
    assert_eq!(t.d.stats().writebacks, 2);
}

#[test]
fn inv_with_two_sharers_answers_after_both_acks() {
    let mut t = T::new();
    let g = t.own(1);
    t.share(2);
    t.share(4);
    assert_eq!(
        t.req(
            1,
            3,
            PageReq::Inv {
                key: K,
                dirty: false
            }
        ),
        vec![inv(2), inv(4)]
    );
    assert_eq!(t.d.state_of(&K, 1), PageState::Tbi);
    assert_eq!(t.d.state_of(&K, 2), PageState::S);
    assert_eq!(t.d.stats().dir_invs, 2);
    assert!(t.ack(4, true).is_empty(), "one ack is not enough");
    assert_eq!(t.d.state_of(&K, 4), PageState::I);
    assert_eq!(
        t.ack(2, false),
        vec![
            Action::WriteBack { key: K, gfn: g },
            export(g, false),
            reply(1, 3, WRITTEN)
        ]
    );
    assert!(t.d.is_empty());
    assert_eq!(t.d.stats().acks, 2);
}

#[test]
fn duplicate_and_stale_acks_are_ignored() {
    let mut t = T::new();
    t.own(1);
    t.share(2);
    t.share(3);
    let snapshot = |t: &T| t.entry();
    // Acks while nothing is being invalidated.
    let before = snapshot(&t);
    assert!(t.ack(2, true).is_empty());
    assert!(t.ack(1, true).is_empty());
    assert_eq!(snapshot(&t), before);
    t.req(
        1,
        3,
        PageReq::Inv {
            key: K,
            dirty: false,
        },
    );
    assert!(t.ack(2, false).is_empty());
    // Duplicate, owner's and stranger's acks, other pages.
    let before = snapshot(&t);
    assert!(t.ack(2, true).is_empty());
    assert!(t.ack(1, true).is_empty());
    assert!(t.ack(4, true).is_empty());
    assert!(t.d.ack(3, PageKey { ino: 7, idx: 4 }, true).is_empty());
    assert_eq!(snapshot(&t), before);
    assert_eq!(t.ack(3, false).len(), 2, "export off + answer");
    // After completion.
    assert!(t.ack(3, true).is_empty());
    assert!(t.d.is_empty());
}

#[test]
fn drop_by_a_sharer_unexports_when_it_was_the_last() {
    let mut t = T::new();
    let g = t.own(1);
    t.share(2);
    t.share(3);
    assert_eq!(
        t.req(
            2,
            4,
            PageReq::Drop {
                key: K,
                dirty: false
            }
        ),
        vec![reply(2, 4, DONE)]
    );
    assert_eq!(t.d.state_of(&K, 2), PageState::I);
    assert_eq!(
        t.req(
            3,
            5,
            PageReq::Drop {
                key: K,
                dirty: true
            }
        ),
        vec![export(g, false), reply(3, 5, DONE)]
    );
    let e = t.entry().unwrap();
    assert_eq!((e.sharers, e.dirty), (0, true), "the dirty bit is kept");
    assert_eq!(t.d.stats().drops, 2);
}

#[test]
fn drop_is_refused_for_the_owner_and_non_sharers() {
    let mut t = T::new();
    let drop = PageReq::Drop {
        key: K,
        dirty: true,
    };
    t.refused(2, drop); // not cached
    t.read(1, 1);
    t.refused(1, drop); // E
    t.d.filled(K, true);
    t.refused(1, drop); // owner
    t.refused(2, drop); // not a sharer
    t.share(2);
    t.req(
        2,
        2,
        PageReq::Drop {
            key: K,
            dirty: false,
        },
    );
    t.refused(2, drop); // twice
}

#[test]
fn drop_racing_an_inv_keeps_the_dirty_bit_and_still_waits_for_the_ack() {
    let mut t = T::new();
    let g = t.own(1);
    t.share(2);
    t.share(3);
    assert_eq!(
        t.req(
            1,
            3,
            PageReq::Inv {
                key: K,
                dirty: false
            }
        ),
        vec![inv(2), inv(3)]
    );
    assert!(t.ack(3, false).is_empty());
    // Node 2 dropped its dirty mapping before the DIR_INV reached it.
    assert_eq!(
        t.req(
            2,
            4,
            PageReq::Drop {
                key: K,
                dirty: true
            }
        ),
        vec![reply(2, 4, DONE)]
    );
    // The DIR_INV is still on its way to node 2: the page stays in TBI
    // (a new copy on node 2 could otherwise meet the late DIR_INV).
    let e = t.entry().unwrap();
    assert!(e.dirty);
    assert_eq!(
        e.phase,
        Phase::Invalidating {
            pending: 0b10,
            tag: 3
        }
    );
    let [read, ..] = t.all_reqs(2);
    t.retried(2, read);
    assert_eq!(
        t.ack(2, false),
        vec![
            Action::WriteBack { key: K, gfn: g },
            export(g, false),
            reply(1, 3, WRITTEN)
        ]
    );
    // A drop that arrives after its ack finds nothing.
    t.refused(
        2,
        PageReq::Drop {
            key: K,
            dirty: true,
        },
    );
}
