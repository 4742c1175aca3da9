//! Delegated ownership: grant, recall, return, a failed holder, cuts.

use super::*;
use fabric::proto::{DelegPage, DelegRange};

/// The range holding `K` (pages 0..512 of file 7).
const R: DelegRange = DelegRange { ino: 7, base: 0 };

fn page(idx: u64) -> PageKey {
    PageKey { ino: 7, idx }
}

fn held(key: PageKey, gfn: u64, dirty: bool) -> DelegPage {
    DelegPage { key, gfn, dirty }
}

fn recall(node: u8) -> Action {
    Action::Recall { node, range: R }
}

const GRANTED: PageReply = PageReply::Delegated { granted: true };
const DENIED: PageReply = PageReply::Delegated { granted: false };

impl T {
    /// A directory with delegation on.
    fn deleg() -> T {
        let mut t = T::new();
        t.d.set_delegation(true);
        t
    }

    /// `node`'s list frame (frame 9 of its pool).
    fn list(&self, node: u8) -> u64 {
        self.f(node, 9)
    }

    fn delegate(&mut self, node: u8, tag: u32) -> Vec<Action> {
        let list = self.list(node);
        self.req(node, tag, PageReq::Delegate { range: R, list })
    }

    /// `node` takes the range.
    fn grant(&mut self, node: u8) {
        assert_eq!(self.delegate(node, 20), vec![reply(node, 20, GRANTED)]);
        assert_eq!(self.d.delegation(&R).map(|d| d.holder), Some(node));
    }

    fn read_at(&mut self, node: u8, tag: u32, key: PageKey) -> Vec<Action> {
        let frame = self.f(node, u64::from(tag));
        self.req(node, tag, PageReq::Read { key, frame })
    }

    fn give_back(&mut self, node: u8, tag: u32) -> Vec<Action> {
        self.req(node, tag, PageReq::DelegReturn { range: R })
    }

    fn list_read(&mut self, node: u8, pages: Option<&[DelegPage]>) -> Vec<Action> {
        let out = self.d.list_read(&self.l, node, R, pages);
        self.d.check().unwrap();
        out
    }

    fn read_list(&self, node: u8) -> Action {
        Action::ReadList {
            node,
            range: R,
            gfn: self.list(node),
        }
    }
}

#[test]
fn a_reader_elsewhere_recalls_the_range_and_is_served_once_its_pages_are_installed() {
    let mut t = T::deleg();
    t.grant(1);
    // Node 1 now writes pages 3 and 4 in its frames 1 and 2: no request.
    let (g3, g4) = (t.f(1, 1), t.f(1, 2));
    // Node 2 reads page 3: parked, one RECALL to the holder.
    assert_eq!(t.read_at(2, 3, K), vec![recall(1)]);
    // Node 3 writes page 4: parked too, no second RECALL.
    let frame = t.f(3, 4);
    let lock = PageReq::LookupLock {
        key: page(4),
        frame,
    };
    assert!(t.req(3, 4, lock).is_empty());
    assert!(t.d.is_empty(), "nothing installed before the return");
    // The holder's one answer: its list is read...
    assert_eq!(t.give_back(1, 7), vec![t.read_list(1)]);
    // ...its pages installed, its return answered, and only then the
    // parked requests served, in order, from its frames.
    let pages = [held(K, g3, true), held(page(4), g4, false)];
    assert_eq!(
        t.list_read(1, Some(&pages)),
        vec![
            reply(1, 7, DONE),
            export(g3, true),
            reply(2, 3, PageReply::Shared { owner: 1, gfn: g3 }),
            export(g4, true),
            reply(3, 4, PageReply::Shared { owner: 1, gfn: g4 }),
        ]
    );
    let e = t.entry().unwrap();
    assert_eq!((e.owner, e.gfn, e.dirty, e.sharers), (1, g3, true, 0b10));
    assert!(!t.d.entry(&page(4)).unwrap().dirty);
    assert!(t.d.delegation(&R).is_none());
    let s = t.d.stats();
    assert_eq!(
        (s.delegations, s.recalls, s.returns, s.deleg_pages, s.parked),
        (1, 1, 1, 2, 2)
    );
    // The dirty page is written back when its owner reclaims it.
    assert_eq!(t.d.state_of(&K, 1), PageState::O);
}

#[test]
fn the_holders_own_requests_go_on_during_a_recall() {
    // Recall during a write: the holder finishes the write it is in
    // (here a full-page write through E) before it answers.
    let mut t = T::deleg();
    t.grant(1);
    assert_eq!(t.read_at(2, 3, K), vec![recall(1)]);
    let g5 = t.f(1, 5);
    let key = page(5);
    assert_eq!(
        t.req(1, 5, PageReq::LookupLock { key, frame: g5 }),
        vec![reply(1, 5, PageReply::Exclusive { gfn: g5 })]
    );
    assert_eq!(
        t.req(1, 6, PageReq::Unlock { key }),
        vec![reply(1, 6, DONE)]
    );
    // Its store into page 3 completed before it wrote its list.
    let g3 = t.f(1, 1);
    assert_eq!(t.give_back(1, 7), vec![t.read_list(1)]);
    assert_eq!(
        t.list_read(1, Some(&[held(K, g3, true)])),
        vec![
            reply(1, 7, DONE),
            export(g3, true),
            reply(2, 3, PageReply::Shared { owner: 1, gfn: g3 }),
        ]
    );
    assert!(t.d.entry(&key).unwrap().dirty);
}

#[test]
fn delegation_is_granted_only_to_a_node_alone_with_the_range() {
    let mut t = T::new();
    // Off: denied, nothing recorded.
    assert_eq!(t.delegate(1, 1), vec![reply(1, 1, DENIED)]);
    assert!(t.d.delegation(&R).is_none());
    t.d.set_delegation(true);
    // Another node's page in the range: denied.
    t.own(2);
    assert_eq!(t.delegate(1, 2), vec![reply(1, 2, DENIED)]);
    // Its owner alone, page unshared: granted (the page stays an
    // ordinary owned page).
    t.grant(2);
    assert_eq!(t.d.state_of(&K, 2), PageState::O);
    // Held: another node is denied, the holder's repeat granted.
    assert_eq!(t.delegate(3, 3), vec![reply(3, 3, DENIED)]);
    assert_eq!(t.delegate(2, 4), vec![reply(2, 4, GRANTED)]);
    // A list frame that is not the requester's is refused.
    let list = t.f(3, 9);
    t.refused(2, PageReq::Delegate { range: R, list });
    // A shared page, or one in E, denies.
    let mut t = T::deleg();
    t.own(1);
    t.share(2);
    assert_eq!(t.delegate(1, 5), vec![reply(1, 5, DENIED)]);
    let mut t = T::deleg();
    t.lock(1, 1);
    assert_eq!(t.delegate(1, 6), vec![reply(1, 6, DENIED)]);
    let s = t.d.stats();
    assert_eq!((s.delegations, s.deleg_denied), (0, 1));
}

#[test]
fn a_holder_that_fails_has_its_listed_pages_written_back_from_the_region() {
    let mut t = T::deleg();
    t.grant(1);
    let (g3, g4) = (t.f(1, 1), t.f(1, 2));
    assert_eq!(t.read_at(2, 3, K), vec![recall(1)]);
    assert!(t.read_at(3, 4, page(4)).is_empty());
    // Node 3 fails while parked: nobody waits for its answer.
    assert!(t.d.node_failed(3).is_empty());
    // The holder fails before it answered the recall: its list is read
    // from the region, which survived it.
    assert_eq!(t.d.node_failed(1), vec![t.read_list(1)]);
    assert!(t.d.holds_frames_of(1), "its frames wait for the list");
    // Every listed page is written back (clean ones too: its last stores
    // may not be in its dirty bits), then the reader is filled.
    let pages = [held(K, g3, false), held(page(4), g4, true)];
    assert_eq!(
        t.list_read(1, Some(&pages)),
        vec![
            Action::WriteBack { key: K, gfn: g3 },
            Action::WriteBack {
                key: page(4),
                gfn: g4
            },
            Action::Fill {
                key: K,
                gfn: t.f(2, 3)
            },
        ]
    );
    assert!(!t.d.holds_frames_of(1));
    assert!(t.d.delegation(&R).is_none());
    assert_eq!(t.d.entry(&page(4)), None, "node 3's request was dropped");
}

#[test]
fn a_holder_that_fails_without_a_recall_is_read_too() {
    let mut t = T::deleg();
    t.grant(1);
    assert_eq!(t.d.node_failed(1), vec![t.read_list(1)]);
    // A list that does not decode: nothing of it is written or installed.
    assert!(t.list_read(1, None).is_empty());
    assert!(!t.d.holds_frames_of(1));
    assert!(t.d.delegation(&R).is_none());
}

#[test]
fn a_list_is_untrusted_record_by_record() {
    let mut t = T::deleg();
    t.own(1); // page 3 in frame 0
    t.grant(1);
    assert_eq!(t.read_at(2, 3, page(6)), vec![recall(1)]);
    assert_eq!(t.give_back(1, 7), vec![t.read_list(1)]);
    let refused = t.d.stats().refused;
    let bad = [
        held(K, t.f(1, 1), true),                          // cached already
        held(page(5), t.f(1, 0), true),                    // the frame of page 3
        held(page(7), t.list(1), true),                    // its list frame
        held(page(8), t.f(2, 1), true),                    // another node's frame
        held(PageKey { ino: 8, idx: 1 }, t.f(1, 3), true), // another file
        held(page(512), t.f(1, 4), true),                  // past the range
        held(page(6), t.f(1, 5), true),                    // good
        held(page(9), t.f(1, 5), true),                    // its frame twice
    ];
    let out = t.list_read(1, Some(&bad));
    assert_eq!(out[0], reply(1, 7, DONE));
    assert_eq!(t.d.stats().refused, refused + 7);
    assert_eq!(t.d.len(), 2, "page 3 and page 6");
    assert_eq!(t.d.entry(&page(6)).unwrap().gfn, t.f(1, 5));
    // A second return of the same range, now over, is answered Done.
    assert_eq!(t.give_back(1, 8), vec![reply(1, 8, DONE)]);
}

#[test]
fn the_holders_own_truncate_and_unlink_need_no_notice() {
    let mut t = T::deleg();
    t.grant(1);
    assert!(t.d.evict_file_by(7, 2, Some(1)).is_empty());
    assert!(
        t.d.delegation(&R).is_some(),
        "the range below the cut stays"
    );
    assert!(t.d.evict_file_by(7, 0, Some(1)).is_empty());
    assert!(t.d.delegation(&R).is_none(), "cut whole, it ends");
    t.d.check().unwrap();
}

#[test]
fn another_nodes_truncate_cuts_the_holders_list_until_it_acks() {
    let mut t = T::deleg();
    t.grant(1);
    let span = PageSpan::new(7, 2, 510).unwrap();
    assert_eq!(
        t.d.evict_file_by(7, 2, Some(2)),
        vec![Action::InvalidateRange { node: 1, span }]
    );
    // The cut awaits the holder's own ack (never taken lazily).
    assert_eq!(t.d.awaits_range_ack(1, &span), Some(false));
    // A reader of a cut page waits for the recall.
    assert_eq!(t.read_at(2, 3, K), vec![recall(1)]);
    assert_eq!(t.give_back(1, 7), vec![t.read_list(1)]);
    // Its list was written before it saw the cut: the cut pages are not
    // installed, the rest is; the reader still waits for the ack.
    let (g1, g3) = (t.f(1, 1), t.f(1, 3));
    let pages = [held(page(1), g1, true), held(K, g3, true)];
    assert_eq!(t.list_read(1, Some(&pages)), vec![reply(1, 7, DONE)]);
    assert!(t.d.entry(&page(1)).is_some());
    assert!(t.d.entry(&K).is_none());
    // The ack of the cut ends the delegation: the reader is filled.
    assert_eq!(
        t.d.ack_range(1, span, false),
        vec![Action::Fill {
            key: K,
            gfn: t.f(2, 3)
        }]
    );
    assert!(t.d.delegation(&R).is_none());
    assert_eq!(t.d.awaits_range_ack(1, &span), None);
    t.d.check().unwrap();
}

#[test]
fn another_nodes_unlink_ends_the_delegation_with_the_holders_ack() {
    let mut t = T::deleg();
    t.grant(1);
    let span = R.span();
    assert_eq!(
        t.d.evict_file_by(7, 0, Some(2)),
        vec![Action::InvalidateRange { node: 1, span }]
    );
    // No recall of a range cut whole; a reader waits for the ack.
    assert!(t.read_at(3, 3, K).is_empty());
    // A return that crossed the cut is answered at once: no list is
    // read (the holder may have reused its frame).
    assert_eq!(t.give_back(1, 7), vec![reply(1, 7, DONE)]);
    assert_eq!(
        t.d.ack_range(1, span, false),
        vec![Action::Fill {
            key: K,
            gfn: t.f(3, 3)
        }]
    );
    assert!(t.d.delegation(&R).is_none());
}

#[test]
fn a_holder_cut_while_its_list_is_read_keeps_the_cut_pages_out() {
    let mut t = T::deleg();
    t.grant(1);
    assert_eq!(t.give_back(1, 7), vec![t.read_list(1)]);
    assert!(t.d.evict_file_by(7, 2, Some(1)).is_empty());
    let pages = [held(page(1), t.f(1, 1), true), held(K, t.f(1, 3), true)];
    assert_eq!(t.list_read(1, Some(&pages)), vec![reply(1, 7, DONE)]);
    assert!(t.d.entry(&page(1)).is_some());
    assert!(t.d.entry(&K).is_none());
    assert!(t.d.delegation(&R).is_none());
}

#[test]
fn the_check_flags_another_nodes_entry_in_a_delegated_range() {
    let mut t = T::deleg();
    t.grant(1);
    let gfn = t.f(2, 0);
    put(
        &mut t.d,
        K,
        Entry {
            owner: 2,
            gfn,
            sharers: 0,
            dirty: false,
            phase: Phase::Owned,
        },
    );
    assert!(t.d.check().unwrap_err().contains("delegated"));
}
