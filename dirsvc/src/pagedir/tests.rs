use super::*;
use alloc::vec;
use fabric::layout::Layout;

const K: PageKey = PageKey { ino: 7, idx: 3 };

/// Store a hand-made entry as is.
fn put(d: &mut PageDir, key: PageKey, e: Entry) {
    d.table.put(key, &e).unwrap();
}

fn reply(node: u8, tag: u32, reply: PageReply) -> Action {
    Action::Reply { node, tag, reply }
}

fn export(gfn: u64, on: bool) -> Action {
    Action::Export { gfn, on }
}

fn inv(node: u8) -> Action {
    Action::Invalidate { node, key: K }
}

const DONE: PageReply = PageReply::Done { written: false };
const WRITTEN: PageReply = PageReply::Done { written: true };

/// A directory over a 4-node layout, with helpers for page `K`.
struct T {
    l: Layout,
    d: PageDir,
}

impl T {
    fn new() -> T {
        T {
            l: Layout::compute(8 << 20, 4).unwrap(),
            d: PageDir::for_nodes(4),
        }
    }

    /// Frame `i` of `node`'s pool.
    fn f(&self, node: u8, i: u64) -> u64 {
        self.l.pool_gfns(u32::from(node)).0 + i
    }

    fn req(&mut self, node: u8, tag: u32, req: PageReq) -> Vec<Action> {
        let out = self.d.handle(&self.l, node, tag, req);
        self.d.check().unwrap();
        out
    }

    fn read(&mut self, node: u8, tag: u32) -> Vec<Action> {
        let frame = self.f(node, 0);
        self.req(node, tag, PageReq::Read { key: K, frame })
    }

    fn lock(&mut self, node: u8, tag: u32) -> Vec<Action> {
        let frame = self.f(node, 0);
        self.req(node, tag, PageReq::LookupLock { key: K, frame })
    }

    /// `node` reads `K` from disk and owns it; returns its frame.
    fn own(&mut self, node: u8) -> u64 {
        let g = self.f(node, 0);
        assert_eq!(self.read(node, 1), vec![Action::Fill { key: K, gfn: g }]);
        assert_eq!(
            self.d.filled(K, true),
            vec![reply(node, 1, PageReply::Owner { gfn: g })]
        );
        g
    }

    /// `node` maps the owned page `K`.
    fn share(&mut self, node: u8) {
        let out = self.read(node, 2);
        assert!(
            matches!(
                out.last(),
                Some(Action::Reply {
                    reply: PageReply::Shared { .. },
                    ..
                })
            ),
            "{out:?}"
        );
    }

    fn entry(&self) -> Option<Entry> {
        self.d.entry(&K)
    }

    fn ack(&mut self, node: u8, dirty: bool) -> Vec<Action> {
        let out = self.d.ack(node, K, dirty);
        self.d.check().unwrap();
        out
    }

    /// `req` from `node` is refused and changes nothing.
    fn refused(&mut self, node: u8, req: PageReq) {
        let before: Vec<(PageKey, Entry)> = self.d.entries().collect();
        let n = self.d.stats().refused;
        assert_eq!(
            self.req(node, 9, req),
            vec![reply(node, 9, PageReply::Refused)],
            "{req:?} from {node}"
        );
        let after: Vec<(PageKey, Entry)> = self.d.entries().collect();
        assert_eq!(before, after, "{req:?} from {node} changed the directory");
        assert_eq!(self.d.stats().refused, n + 1);
    }

    /// `req` from `node` is answered Retry and changes nothing.
    fn retried(&mut self, node: u8, req: PageReq) {
        let before = self.entry();
        assert_eq!(
            self.req(node, 8, req),
            vec![reply(node, 8, PageReply::Retry)],
            "{req:?} from {node}"
        );
        assert_eq!(self.entry(), before);
    }

    /// Every request kind for `K`, with `node`'s own frame.
    fn all_reqs(&self, node: u8) -> [PageReq; 6] {
        let frame = self.f(node.clamp(1, 4), 1);
        [
            PageReq::Read { key: K, frame },
            PageReq::LookupLock { key: K, frame },
            PageReq::Unlock { key: K },
            PageReq::Inv {
                key: K,
                dirty: true,
            },
            PageReq::Drop {
                key: K,
                dirty: true,
            },
            PageReq::Writeback {
                key: K,
                dirty: true,
            },
        ]
    }
}

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

#[test]
fn writeback_by_the_owner_and_by_a_sharer() {
    let mut t = T::new();
    let g = t.own(1);
    t.share(2);
    // Clean: nothing to write.
    assert_eq!(
        t.req(
            1,
            3,
            PageReq::Writeback {
                key: K,
                dirty: false
            }
        ),
        vec![reply(1, 3, DONE)]
    );
    // The owner wrote it.
    assert_eq!(
        t.req(
            1,
            4,
            PageReq::Writeback {
                key: K,
                dirty: true
            }
        ),
        vec![Action::WriteBack { key: K, gfn: g }, reply(1, 4, WRITTEN)]
    );
    // A sharer wrote it (strong mode writes the owner's frame).
    assert_eq!(
        t.req(
            2,
            5,
            PageReq::Writeback {
                key: K,
                dirty: true
            }
        ),
        vec![Action::WriteBack { key: K, gfn: g }, reply(2, 5, WRITTEN)]
    );
    // Dirty from a drop: the next WRITEBACK writes it and cleans it.
    t.share(3);
    t.req(
        3,
        6,
        PageReq::Drop {
            key: K,
            dirty: true,
        },
    );
    assert_eq!(
        t.req(
            1,
            7,
            PageReq::Writeback {
                key: K,
                dirty: false
            }
        ),
        vec![Action::WriteBack { key: K, gfn: g }, reply(1, 7, WRITTEN)]
    );
    assert!(!t.entry().unwrap().dirty);
    assert_eq!(t.d.stats().writebacks, 3);
}

#[test]
fn writeback_is_refused_outside_owned_pages_and_to_strangers() {
    let mut t = T::new();
    let wb = PageReq::Writeback {
        key: K,
        dirty: true,
    };
    t.refused(1, wb); // not cached
    t.lock(1, 1);
    t.refused(1, wb); // E
    t.req(1, 2, PageReq::Unlock { key: K });
    t.refused(3, wb); // stranger
    t.share(2);
    t.req(
        1,
        3,
        PageReq::Inv {
            key: K,
            dirty: false,
        },
    );
    t.refused(1, wb); // TBI
    t.refused(2, wb); // TBI, sharer
}

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
    assert_eq!(t.d.node_failed(1), vec![export(g, false)]);
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
fn holds_frames_of_tracks_owned_and_reserved_pages() {
    let mut t = T::new();
    assert!(!t.d.holds_frames_of(1));
    t.read(1, 1);
    assert!(t.d.holds_frames_of(1));
    t.d.filled(K, true);
    t.share(2);
    assert!(!t.d.holds_frames_of(2), "sharing holds no frame");
    t.req(
        1,
        2,
        PageReq::Inv {
            key: K,
            dirty: false,
        },
    );
    assert!(t.d.holds_frames_of(1), "until the sharers acked");
    t.ack(2, false);
    assert!(!t.d.holds_frames_of(1));
}

#[test]
fn state_of_shows_all_five_states() {
    let mut t = T::new();
    assert_eq!(t.d.state_of(&K, 1), PageState::I);
    t.read(1, 1);
    assert_eq!(t.d.state_of(&K, 1), PageState::E);
    t.d.filled(K, true);
    t.share(2);
    assert_eq!(
        [1, 2, 3].map(|n| t.d.state_of(&K, n)),
        [PageState::O, PageState::S, PageState::I]
    );
    t.req(
        1,
        2,
        PageReq::Inv {
            key: K,
            dirty: false,
        },
    );
    assert_eq!(t.d.state_of(&K, 1), PageState::Tbi);
    assert_eq!(t.d.state_of(&K, 0), PageState::I);
    assert_eq!(t.d.state_of(&K, 65), PageState::I);
}

#[test]
fn check_flags_hand_made_bad_entries() {
    let good = Entry {
        owner: 1,
        gfn: 100,
        sharers: 0b10,
        dirty: false,
        phase: Phase::Owned,
    };
    let bad = |e: Entry, want: &str| {
        let mut d = PageDir::new();
        put(&mut d, K, e);
        let err = d.check().unwrap_err();
        assert!(err.contains(want), "{err}");
    };
    let mut d = PageDir::new();
    put(&mut d, K, good);
    d.check().unwrap();
    bad(Entry { owner: 0, ..good }, "out of range");
    bad(Entry { owner: 65, ..good }, "out of range");
    bad(
        Entry {
            sharers: 0b11,
            ..good
        },
        "also a sharer",
    );
    bad(
        Entry {
            phase: Phase::Exclusive {
                by_dir: true,
                tag: 1,
            },
            ..good
        },
        "sharers while in E",
    );
    bad(
        Entry {
            phase: Phase::Invalidating {
                pending: 0b100,
                tag: 1,
            },
            ..good
        },
        "non-sharers",
    );
    // Owner bit outside an eviction, even with tag 0.
    bad(
        Entry {
            sharers: 0b11,
            phase: Phase::Invalidating {
                pending: 0b10,
                tag: 0,
            },
            ..good
        },
        "also a sharer",
    );
    // Two pages in one frame.
    let mut d = PageDir::new();
    put(&mut d, K, good);
    put(
        &mut d,
        PageKey { ino: 7, idx: 9 },
        Entry {
            owner: 2,
            sharers: 0,
            ..good
        },
    );
    assert!(d.check().unwrap_err().contains("frame 100"));
    // Eviction bookkeeping out of step with the entry.
    let mut d = PageDir::new();
    put(&mut d, K, good);
    d.evicting.insert(K, false);
    assert!(d.check().unwrap_err().contains("evicted but"));
    let mut d = PageDir::new();
    d.evicting.insert(K, false);
    assert!(d.check().unwrap_err().contains("not cached"));
    let mut d = PageDir::new();
    put(
        &mut d,
        K,
        Entry {
            sharers: 0b11,
            phase: Phase::Invalidating {
                pending: 0b11,
                tag: 0,
            },
            ..good
        },
    );
    d.evicting.insert(K, true);
    assert!(d.check().unwrap_err().contains("owner told before"));
}
