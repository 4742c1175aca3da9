//! Invalidation on the node: DIR_INVs and INV_RANGEs from the notify
//! ring, the acks they owe (some deferred behind a miss or a size
//! publication in flight), and the teardown of a page's slot.

use alloc::collections::BTreeSet;
use alloc::vec::Vec;

use fabric::proto::{PageKey, PageSpan};

use super::*;
use crate::keymap::KeySet;

/// The acks this node owes the directory but cannot send yet, those now
/// due, and the dirty bits acks must carry for mappings dropped with
/// their DROP unanswered.
#[derive(Debug, Default)]
pub(super) struct Owed {
    /// Pages whose miss is in flight that got a DIR_INV: acked once
    /// answered.
    deferred: KeySet,
    /// Pages a write's unpublished size covers (`pinned`) that got a
    /// DIR_INV: acked once the publication is answered (see
    /// [`NodeCache::dir_inv`]).
    held: BTreeSet<PageKey>,
    /// Deferred acks now due (see [`NodeCache::take_acks`]).
    due: Vec<(PageKey, bool)>,
    /// Dirty mappings dropped whose DROP may be unanswered: a DIR_INV
    /// racing the DROP must report the dirty bit too (see
    /// [`NodeCache::drop_done`]).
    dropped_dirty: KeySet,
}

impl Owed {
    /// The ack of `key`'s DIR_INV waits for its miss's answer.
    pub(super) fn defer(&mut self, key: PageKey) {
        self.deferred.insert(key);
    }

    /// Was the ack of `key` deferred behind its miss? It is no longer.
    pub(super) fn undefer(&mut self, key: &PageKey) -> bool {
        self.deferred.remove(key)
    }

    /// An ack of `key` (with its dirty bit) is due now.
    pub(super) fn due(&mut self, key: PageKey, dirty: bool) {
        self.due.push((key, dirty));
    }

    /// `key`'s mapping was dropped dirty, its DROP maybe unanswered.
    pub(super) fn dropped_dirty(&mut self, key: PageKey) {
        self.dropped_dirty.insert(key);
    }

    /// Was `key` dropped dirty? Its dirty bit is reported now.
    pub(super) fn take_dropped(&mut self, key: &PageKey) -> bool {
        self.dropped_dirty.remove(key)
    }

    /// The pages whose ack waits for their miss's answer (for checks).
    #[cfg(test)]
    pub(super) fn deferred(&self) -> impl Iterator<Item = &PageKey> {
        self.deferred.iter()
    }

    /// Nothing owed, nothing due, no dirty bit to report.
    pub(super) fn none(&self) -> bool {
        self.deferred.is_empty()
            && self.held.is_empty()
            && self.due.is_empty()
            && self.dropped_dirty.is_empty()
    }
}

impl NodeCache {
    /// DIR_INV for `key` from the notify ring: `Some(dirty)`: the page is
    /// torn down here (the caller unmaps it from page tables and flushes
    /// the TLB), ack now with `dirty`. `None`: our READ / LOOKUP_LOCK of
    /// the page is unanswered and the notice may be about the copy it
    /// grants, so the ack waits for the answer ([`NodeCache::complete_miss`]
    /// then queues it for [`NodeCache::take_acks`]). Acking at once would
    /// let the directory finish the invalidation before the answer is
    /// applied: we would then map a frame nobody tracks, or keep a fill the
    /// directory already forgot.
    ///
    /// A DIR_INV of a page a write stored into and whose size it is
    /// publishing (`pinned`) waits for that answer too: the notice may be
    /// a truncate's teardown, which frees the frame unwritten, and the
    /// directory refuses a size over a page still in teardown. Acked at
    /// once, the teardown could end before the publication is served,
    /// which would then show the lost write as zeros.
    pub fn dir_inv(&mut self, key: &PageKey) -> Option<bool> {
        if self.inflight.contains_key(key) {
            self.stats.invs_received += 1;
            self.owed.defer(*key);
            return None;
        }
        if self.under_publication(key) {
            self.stats.invs_received += 1;
            self.owed.held.insert(*key);
            return None;
        }
        Some(self.invalidate(key))
    }

    /// Is `key` a page we hold that a write stored into and whose size it
    /// is publishing (`pinned`)? Its invalidation is held until then.
    pub(super) fn under_publication(&self, key: &PageKey) -> bool {
        reclaim::is_pinned(self.limits.pinned, key) && self.slots.get(key).is_some()
    }

    /// DIR_INVs held behind a publication whose pages are no longer
    /// pinned: tear those pages down and queue their acks.
    pub(crate) fn release_held(&mut self) {
        let pinned = self.limits.pinned;
        let due: Vec<PageKey> = self
            .owed
            .held
            .iter()
            .filter(|k| !reclaim::is_pinned(pinned, k))
            .copied()
            .collect();
        for key in due {
            self.owed.held.remove(&key);
            let dropped = self.owed.take_dropped(&key);
            let dirty = self.teardown(&key) || dropped;
            self.owed.due(key, dirty);
        }
    }

    /// Acks of deferred DIR_INVs that became due: send each on the ack
    /// ring (after unmapping the page, as for [`NodeCache::dir_inv`]).
    pub fn take_acks(&mut self) -> Vec<(PageKey, bool)> {
        core::mem::take(&mut self.owed.due)
    }

    /// An INV_RANGE (a file's teardown): every page of `span` awaits our
    /// ack, so each page we hold is torn down as a DIR_INV's would be.
    /// Returns the acks to send now: each run of `span` with no miss in
    /// flight and no page under our size publication, with whether we had
    /// written one of its pages. A page whose miss is in flight (or that
    /// is under our publication) is left out and handled as its own DIR_INV's
    /// (its ack, a plain INV_ACK, comes from [`NodeCache::take_acks`] once
    /// the answer is applied): one ack for the whole span would hold up
    /// every other page of it until that answer is taken in, and the
    /// path that takes it in may itself wait for one of those pages. The
    /// caller unmaps each run's pages from page tables before it acks.
    pub fn range_inv(&mut self, span: &PageSpan) -> Vec<(PageSpan, bool)> {
        let mut keys: Vec<PageKey> = self.slots.range(span.keys()).map(|(k, _)| *k).collect();
        keys.extend(
            self.frames
                .orphans()
                .map(|(_, k)| k)
                .filter(|k| span.contains(k)),
        );
        keys.extend(self.owed.dropped_dirty.iter().filter(|k| span.contains(k)));
        keys.sort_unstable();
        keys.dedup();
        // Pages under our own size publication are held as their DIR_INV
        // would be (see [`NodeCache::dir_inv`]): acked alone once it is
        // answered ([`NodeCache::release_held`]).
        let held: Vec<PageKey> = keys
            .iter()
            .filter(|k| !self.inflight.contains_key(*k) && self.under_publication(k))
            .copied()
            .collect();
        let mut waiting: Vec<u64> = self
            .inflight
            .keys()
            .filter(|k| span.contains(k))
            .map(|k| k.idx)
            .chain(held.iter().map(|k| k.idx))
            .collect();
        waiting.sort_unstable();
        waiting.dedup();
        let mut dirty: Vec<u64> = Vec::new();
        for key in keys {
            if !self.inflight.contains_key(&key) && !held.contains(&key) && self.invalidate(&key) {
                dirty.push(key.idx);
            }
        }
        for idx in &waiting {
            let key = PageKey {
                ino: span.ino,
                idx: *idx,
            };
            self.stats.invs_received += 1;
            if held.contains(&key) {
                self.owed.held.insert(key);
            } else {
                self.owed.defer(key);
            }
        }
        // The runs between the pages in flight (`dirty` is sorted).
        let mut out = Vec::new();
        let mut start = span.first;
        for gap in waiting.iter().copied().map(Some).chain([None]) {
            let end = gap.unwrap_or_else(|| span.last().saturating_add(1));
            if end > start {
                if let Some(run) = PageSpan::new(span.ino, start, end - start) {
                    let d = dirty.iter().any(|i| {
                        run.contains(&PageKey {
                            ino: span.ino,
                            idx: *i,
                        })
                    });
                    out.push((run, d));
                }
            }
            start = end.saturating_add(1);
        }
        out
    }

    /// Tear `key` down here and say whether we had dirtied it (the DIR_INV
    /// handler without the in-flight check: prefer [`NodeCache::dir_inv`]).
    /// The caller unmaps it from page tables (and flushes the TLB) before
    /// sending the ack.
    pub fn invalidate(&mut self, key: &PageKey) -> bool {
        self.stats.invs_received += 1;
        // The directory is done with a frame of a cancelled miss.
        self.frames.free_orphan_of(key);
        // A DROP racing the DIR_INV may reach the directory after the ack
        // (and be refused): the ack carries its dirty bit.
        let dropped = self.owed.take_dropped(key);
        self.teardown(key) || dropped
    }

    /// The DROP of `key` was answered: the directory has its dirty bit.
    pub fn drop_done(&mut self, key: &PageKey) {
        self.owed.take_dropped(key);
    }

    pub(super) fn teardown(&mut self, key: &PageKey) -> bool {
        match self.slots.get(key) {
            Some(Slot::Remote { dirty, .. }) => {
                let dirty = *dirty;
                self.slots.remove(key);
                self.replicas.gone(key);
                self.held.remote -= 1;
                dirty
            }
            // File eviction (truncate / unlink): our own copy goes too. The
            // directory only evicts committed pages, so a `Reserved` slot
            // here is one whose UNLOCK was served and answered already.
            Some(Slot::Local { gfn, .. })
            | Some(Slot::Reclaiming { gfn })
            | Some(Slot::Reserved { gfn }) => {
                let gfn = *gfn;
                self.slots.remove(key);
                self.evict.removed(key);
                self.frames.give(gfn);
                false
            }
            _ => false,
        }
    }
}
