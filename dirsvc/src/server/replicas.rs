//! Strong-mode replicas (hot-page promotion): a sharer
//! that reads a peer's page often keeps a read-only copy in its own memory,
//! and strong mode stays strong because no store lands in a replicated
//! frame while a replica of it exists.
//!
//! The rule every store into a frame follows (`nodepath`, `ScState`'s
//! store guard), against the directory's side here:
//!
//! * until a node reads the header's `replicas_used` set it stores
//!   without announcing anything (promotion unused costs nothing); the
//!   first time it reads it set, it sets its record's `sees_replicas`
//!   word, and from then on every store is announced;
//! * an announced store: the writer puts the frame in its record's
//!   `writing` word, fences, and reads the frame's replica bit; clear: it
//!   stores, then clears its word; set: it clears its word and sends
//!   UNPROTECT;
//! * PROMOTE (from a sharer of a settled page) sets `replicas_used`, and is
//!   refused while another member has not set `sees_replicas` (it may be
//!   in the middle of a store it did not announce; its stores before it
//!   set the word are visible once the word is, stores being seen in
//!   order). Then it sets the replica bit, fences, and waits (bounded,
//!   [`WRITER_SPINS`] polls) until no other node announces a store into
//!   the frame: a store announced before the bit was set ends before the
//!   grant, so the copy the promoter makes after the grant holds it; a
//!   store announced after sees the bit. A store still announced at the
//!   end of the wait refuses the promotion;
//! * UNPROTECT sends REVOKE to every other holder (notify ring) and
//!   answers once each acked (its replica is gone): only then does the
//!   writer store, so no replica ever misses a write that completed. The
//!   bit is cleared with the last replica.
//!
//! Holders stay sharers: a DIR_INV or DROP takes a replica away with the
//! mapping, and when the frame stops being exported (its last sharer
//! left, or the page was torn down) its replica state is forgotten. The
//! bit and the `writing` words each have one writer (the directory, the
//! node), as every shared word (docs/ARCHITECTURE.md, "The shared region").

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use fabric::layout::Header;
use fabric::proto::{Notice, Op, PageKey, PageReply, Response};
use fabric::shm::SharedMem;
use flatfs::BlockDevice;

use super::Directory;
use crate::pagedir::Phase;

/// Polls of the other nodes' `writing` words before a promotion that
/// still sees a store announced into its frame is refused (a store is a
/// 4 KiB copy at most: microseconds).
pub const WRITER_SPINS: usize = 2_000;

fn bit(node: u32) -> u64 {
    1u64 << ((node - 1) & 63)
}

/// A replicated page.
#[derive(Debug, Clone, Copy)]
struct Rep {
    gfn: u64,
    /// Nodes granted a replica (bit `n - 1`).
    holders: u64,
}

/// An UNPROTECT waiting for revoke acks.
#[derive(Debug, Default)]
struct Pending {
    /// Holders that have not acked yet.
    waiting: u64,
    /// The writers to answer (node, tag).
    writers: Vec<(u32, u32)>,
}

/// Counters for `dir stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplicaStats {
    /// Promotions granted.
    pub granted: u64,
    /// Promotions refused (not a sharer of a settled page, an UNPROTECT in
    /// progress, a member that does not announce its stores yet, or a
    /// store that stayed announced).
    pub refused: u64,
    /// UNPROTECT requests.
    pub unprotects: u64,
    /// REVOKE notices sent.
    pub revokes: u64,
}

/// The directory's replica state.
#[derive(Debug, Default)]
pub struct Replicas {
    pages: BTreeMap<PageKey, Rep>,
    by_gfn: BTreeMap<u64, PageKey>,
    pending: BTreeMap<PageKey, Pending>,
    stats: ReplicaStats,
}

impl Replicas {
    /// Pages with at least one replica granted.
    pub fn pages(&self) -> usize {
        self.pages.len()
    }
}

impl<D: BlockDevice> Directory<D> {
    /// The replica counters.
    pub fn replica_stats(&self) -> ReplicaStats {
        self.replicas.stats
    }

    /// Pages with replicas granted now.
    pub fn replicated_pages(&self) -> usize {
        self.replicas.pages()
    }

    fn page_answer(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        node: u32,
        op: Op,
        tag: u32,
        r: PageReply,
    ) {
        self.respond(mem, node, Response::Page(r).encode(op, tag));
    }

    /// PROMOTE of `key` from `node` (see the module comment).
    pub(super) fn promote(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        node: u32,
        tag: u32,
        key: PageKey,
    ) {
        let ok = self.pages.entry(&key).filter(|e| {
            e.phase == Phase::Owned
                && e.owner as u32 != node
                && e.sharers & bit(node) != 0
                && !self.replicas.pending.contains_key(&key)
        });
        let Some(e) = ok else {
            self.replicas.stats.refused += 1;
            self.page_answer(mem, node, Op::PagePromote, tag, PageReply::Refused);
            return;
        };
        let h = Header::new(mem, self.layout);
        h.set_replicas_used();
        let unseen: Vec<u32> = (1..=self.layout.max_nodes)
            .filter(|&n| n != node && self.is_member(n) && !h.sees_replicas(n))
            .collect();
        if !unseen.is_empty() {
            log::debug!("PROMOTE {key:?} from node {node}: nodes {unseen:?} do not announce their stores yet");
            // Wake them to look (an idle node would only at its next store).
            for n in unseen {
                self.links.notify(n, Notice::ReplicasUsed.encode());
                let _ = self.flush(mem, n);
            }
            self.replicas.stats.refused += 1;
            self.page_answer(mem, node, Op::PagePromote, tag, PageReply::Refused);
            return;
        }
        h.set_replicated(e.gfn, true);
        (self.cfg.fence)();
        let announced = e.gfn.wrapping_add(1);
        // Members only: a node that failed mid-store left its word set, and
        // stores nothing any more (a rejoin clears it).
        let others = (1..=self.layout.max_nodes).filter(|&n| n != node && self.is_member(n));
        let mut busy = true;
        for _ in 0..WRITER_SPINS {
            if !others.clone().any(|n| h.writing(n) == announced) {
                busy = false;
                break;
            }
        }
        if busy {
            if !self.replicas.pages.contains_key(&key) {
                h.set_replicated(e.gfn, false);
            }
            log::debug!(
                "PROMOTE {key:?} from node {node}: a store into frame {} stayed announced",
                e.gfn
            );
            self.replicas.stats.refused += 1;
            self.page_answer(mem, node, Op::PagePromote, tag, PageReply::Refused);
            return;
        }
        let r = self.replicas.pages.entry(key).or_insert(Rep {
            gfn: e.gfn,
            holders: 0,
        });
        r.holders |= bit(node);
        self.replicas.by_gfn.insert(e.gfn, key);
        self.replicas.stats.granted += 1;
        self.page_answer(
            mem,
            node,
            Op::PagePromote,
            tag,
            PageReply::Done { written: false },
        );
    }

    /// UNPROTECT of `key` from `node`, about to store into its frame.
    pub(super) fn unprotect(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        node: u32,
        tag: u32,
        key: PageKey,
    ) {
        self.replicas.stats.unprotects += 1;
        if let Some(p) = self.replicas.pending.get_mut(&key) {
            p.writers.push((node, tag));
            return;
        }
        let sharers = self.pages.entry(&key).map_or(0, |e| e.sharers);
        let holders = match self.replicas.pages.get_mut(&key) {
            Some(r) => {
                // The writer dropped its own replica before asking.
                r.holders &= !bit(node);
                r.holders & sharers
            }
            None => 0,
        };
        if holders == 0 {
            self.forget_page(mem, key);
            // A bit left over from a page this frame held before.
            if let Some(e) = self.pages.entry(&key) {
                Header::new(mem, self.layout).set_replicated(e.gfn, false);
            }
            self.page_answer(
                mem,
                node,
                Op::PageUnprotect,
                tag,
                PageReply::Done { written: false },
            );
            return;
        }
        self.revoke_from(mem, key, holders, alloc::vec![(node, tag)]);
    }

    /// The directory stored into `key`'s frame (a truncate zeroed its
    /// tail): every replica goes, as for an UNPROTECT with no writer to
    /// answer. An UNPROTECT in progress already revokes them all.
    pub(super) fn revoke_replicas(&mut self, mem: &(impl SharedMem + ?Sized), key: PageKey) {
        if self.replicas.pending.contains_key(&key) {
            return;
        }
        let sharers = self.pages.entry(&key).map_or(0, |e| e.sharers);
        let holders = self
            .replicas
            .pages
            .get(&key)
            .map_or(0, |r| r.holders & sharers);
        if holders == 0 {
            self.forget_page(mem, key);
            return;
        }
        self.revoke_from(mem, key, holders, Vec::new());
    }

    /// Send a REVOKE of `key` to every node of `holders` and wait for their
    /// acks, then answer `writers` (node, tag).
    fn revoke_from(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        key: PageKey,
        holders: u64,
        writers: Vec<(u32, u32)>,
    ) {
        for n in (1..=self.layout.max_nodes).filter(|&n| holders & bit(n) != 0) {
            self.links.notify(n, Notice::Revoke(key).encode());
            self.replicas.stats.revokes += 1;
            let _ = self.flush(mem, n);
        }
        self.replicas.pending.insert(
            key,
            Pending {
                waiting: holders,
                writers,
            },
        );
    }

    /// `node` acked the REVOKE of `key`: its replica is gone.
    pub(super) fn revoke_acked(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        node: u32,
        key: PageKey,
    ) {
        if let Some(r) = self.replicas.pages.get_mut(&key) {
            r.holders &= !bit(node);
        }
        let done = match self.replicas.pending.get_mut(&key) {
            Some(p) => {
                p.waiting &= !bit(node);
                p.waiting == 0
            }
            None => false,
        };
        if done {
            self.finish_unprotect(mem, key);
        }
    }

    /// Every replica of `key` is gone: clear the bit, answer the writers.
    fn finish_unprotect(&mut self, mem: &(impl SharedMem + ?Sized), key: PageKey) {
        let writers = self
            .replicas
            .pending
            .remove(&key)
            .map(|p| p.writers)
            .unwrap_or_default();
        self.forget_page(mem, key);
        for (n, tag) in writers {
            self.page_answer(
                mem,
                n,
                Op::PageUnprotect,
                tag,
                PageReply::Done { written: false },
            );
        }
    }

    /// Forget `key`'s replicas and clear its frame's bit.
    fn forget_page(&mut self, mem: &(impl SharedMem + ?Sized), key: PageKey) {
        if let Some(r) = self.replicas.pages.remove(&key) {
            self.replicas.by_gfn.remove(&r.gfn);
            Header::new(mem, self.layout).set_replicated(r.gfn, false);
        }
    }

    /// Frame `gfn` stopped being exported (no sharer is left, so no
    /// replica either): forget its page's replica state.
    pub(super) fn frame_unexported(&mut self, mem: &(impl SharedMem + ?Sized), gfn: u64) {
        let Some(key) = self.replicas.by_gfn.get(&gfn).copied() else {
            return;
        };
        if self.replicas.pending.contains_key(&key) {
            self.finish_unprotect(mem, key);
        } else {
            self.forget_page(mem, key);
        }
    }

    /// `node` failed or left: it holds no replica and waits for nothing.
    pub(super) fn forget_replica_node(&mut self, mem: &(impl SharedMem + ?Sized), node: u32) {
        for r in self.replicas.pages.values_mut() {
            r.holders &= !bit(node);
        }
        let mut done = Vec::new();
        for (k, p) in self.replicas.pending.iter_mut() {
            p.writers.retain(|(n, _)| *n != node);
            p.waiting &= !bit(node);
            if p.waiting == 0 {
                done.push(*k);
            }
        }
        for k in done {
            self.finish_unprotect(mem, k);
        }
    }
}
