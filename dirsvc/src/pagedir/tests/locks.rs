//! LOOKUP_LOCK, the E reservation and UNLOCK.

use super::*;

#[test]
fn lookup_lock_miss_reserves_then_unlock_commits_dirty() {
    let mut t = T::new();
    let g = t.f(3, 0);
    assert_eq!(
        t.lock(3, 4),
        vec![reply(3, 4, PageReply::Exclusive { gfn: g })]
    );
    assert_eq!(t.d.state_of(&K, 3), PageState::E);
    assert!(t.d.holds_frames_of(3));
    assert_eq!(
        t.req(3, 5, PageReq::Unlock { key: K }),
        vec![reply(3, 5, DONE)]
    );
    assert_eq!(t.d.state_of(&K, 3), PageState::O);
    let e = t.entry().unwrap();
    assert!(e.dirty, "a full-page write is dirty");
    assert_eq!(e.gfn, g);
    let s = t.d.stats();
    assert_eq!((s.lookup_locks, s.unlocks, s.fills), (1, 1, 0));
}

#[test]
fn a_drop_from_the_e_holder_gives_the_reservation_back() {
    // The node gave up on its full-page write (its LOOKUP_LOCK timed out)
    // and the grant came late: its DROP returns the page to I.
    let mut t = T::new();
    let g = t.f(3, 0);
    assert_eq!(
        t.lock(3, 4),
        vec![reply(3, 4, PageReply::Exclusive { gfn: g })]
    );
    // Nobody else can give it back.
    t.refused(
        2,
        PageReq::Drop {
            key: K,
            dirty: false,
        },
    );
    assert_eq!(
        t.req(
            3,
            5,
            PageReq::Drop {
                key: K,
                dirty: false
            }
        ),
        vec![reply(3, 5, DONE)]
    );
    assert_eq!(t.entry(), None);
    assert!(!t.d.holds_frames_of(3));
    // A directory fill in flight (E by READ) is not the node's to give back.
    let r = t.read(2, 6);
    assert_eq!(
        r,
        vec![Action::Fill {
            key: K,
            gfn: t.f(2, 0)
        }]
    );
    t.refused(
        2,
        PageReq::Drop {
            key: K,
            dirty: false,
        },
    );
}

#[test]
fn lookup_lock_on_an_owned_page_shares() {
    let mut t = T::new();
    let g = t.own(1);
    assert_eq!(
        t.lock(4, 6),
        vec![
            export(g, true),
            reply(4, 6, PageReply::Shared { owner: 1, gfn: g })
        ]
    );
    assert_eq!(t.d.state_of(&K, 4), PageState::S);
}

#[test]
fn unlock_is_refused_unless_the_requester_holds_e_from_lookup_lock() {
    let mut t = T::new();
    t.refused(1, PageReq::Unlock { key: K }); // not cached
    t.read(1, 1);
    t.refused(1, PageReq::Unlock { key: K }); // E of a READ fill
    t.d.filled(K, true);
    t.refused(1, PageReq::Unlock { key: K }); // owned
    t.share(2);
    t.refused(2, PageReq::Unlock { key: K }); // sharer
    t.req(
        1,
        2,
        PageReq::Inv {
            key: K,
            dirty: false,
        },
    );
    t.refused(1, PageReq::Unlock { key: K }); // TBI
    t.ack(2, false);
    t.lock(3, 3);
    t.refused(4, PageReq::Unlock { key: K }); // not the reserver
    t.req(3, 4, PageReq::Unlock { key: K });
    t.refused(3, PageReq::Unlock { key: K }); // twice
}
