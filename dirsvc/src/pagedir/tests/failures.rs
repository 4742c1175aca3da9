//! Failed nodes: sharers, owners and E holders.

use super::*;

#[test]
fn failed_sharer_completes_pending_invalidations() {
    let mut t = T::new();
    let g = t.own(1);
    t.share(2);
    t.share(3);
    t.req(
        1,
        3,
        PageReq::Inv {
            key: K,
            dirty: false,
        },
    );
    t.ack(3, false);
    // Node 2 may have written the frame: written back to be safe.
    assert_eq!(
        t.d.node_failed(2),
        vec![
            Action::WriteBack { key: K, gfn: g },
            export(g, false),
            reply(1, 3, WRITTEN)
        ]
    );
    assert!(t.d.is_empty());
}

#[test]
fn failed_sharer_of_an_owned_page_is_forgotten() {
    let mut t = T::new();
    let g = t.own(1);
    t.share(2);
    t.share(3);
    assert!(t.d.node_failed(3).is_empty());
    assert_eq!(t.d.state_of(&K, 3), PageState::I);
    assert!(t.entry().unwrap().dirty, "its writes may be in the frame");
    assert_eq!(t.d.node_failed(2), vec![export(g, false)]);
    let e = t.entry().unwrap();
    assert_eq!((e.owner, e.sharers, e.phase), (1, 0, Phase::Owned));
    t.d.check().unwrap();
}

#[test]
fn failed_owner_invalidates_its_sharers_then_writes_back() {
    let mut t = T::new();
    let g = t.own(1);
    t.share(2);
    t.share(3);
    t.req(
        2,
        4,
        PageReq::Writeback {
            key: K,
            dirty: true,
        },
    );
    t.req(
        3,
        5,
        PageReq::Drop {
            key: K,
            dirty: true,
        },
    );
    t.share(3);
    assert_eq!(t.d.node_failed(1), vec![inv(2), inv(3)]);
    assert_eq!(t.d.state_of(&K, 1), PageState::Tbi);
    assert!(t.d.holds_frames_of(1), "its frame is still mapped");
    // Nobody may map the page meanwhile.
    let [read, lock, ..] = t.all_reqs(4);
    t.retried(4, read);
    t.retried(4, lock);
    assert!(t.ack(3, false).is_empty());
    // No answer goes to the failed owner.
    assert_eq!(
        t.ack(2, false),
        vec![Action::WriteBack { key: K, gfn: g }, export(g, false)]
    );
    assert!(t.d.is_empty());
    assert!(!t.d.holds_frames_of(1));
}

#[test]
fn failed_owner_without_sharers() {
    let mut t = T::new();
    let g = t.own(1);
    // Its stores into its own frame never told the directory: the frame
    // survived it, so it is written back (the disk's bytes, if clean).
    assert_eq!(
        t.d.node_failed(1),
        vec![Action::WriteBack { key: K, gfn: g }, export(g, false)]
    );
    assert!(t.d.is_empty());
    t.lock(2, 1);
    t.req(2, 2, PageReq::Unlock { key: K });
    let g = t.f(2, 0);
    assert_eq!(
        t.d.node_failed(2),
        vec![Action::WriteBack { key: K, gfn: g }, export(g, false)]
    );
    assert!(t.d.is_empty());
}

#[test]
fn failed_node_in_e_loses_its_reservation() {
    let mut t = T::new();
    t.read(1, 1);
    assert!(t.d.node_failed(1).is_empty());
    assert!(t.d.is_empty());
    assert!(t.d.filled(K, true).is_empty(), "late fill completion");
    t.lock(2, 2);
    assert!(t.d.node_failed(2).is_empty());
    assert!(t.d.is_empty());
    t.refused(2, PageReq::Unlock { key: K });
    // Another node can now take the page.
    assert_eq!(t.lock(3, 3).len(), 1);
    assert_eq!(t.d.state_of(&K, 3), PageState::E);
}

#[test]
fn failed_owner_during_its_own_inv_gets_no_answer() {
    let mut t = T::new();
    let g = t.own(1);
    t.share(2);
    t.req(
        1,
        3,
        PageReq::Inv {
            key: K,
            dirty: true,
        },
    );
    assert!(t.d.node_failed(1).is_empty());
    assert_eq!(
        t.ack(2, false),
        vec![Action::WriteBack { key: K, gfn: g }, export(g, false)]
    );
}
