//! Giving pages back: reclaim victims, file eviction, dropping remote
//! mappings, forgetting everything.

use alloc::vec::Vec;

use fabric::proto::PageKey;

use super::{NodeCache, Slot};
use crate::policy::{GroupId, Target};

impl NodeCache {
    /// Pick up to `n` owned pages to reclaim, as the eviction policy
    /// proposes them (up to 32 per `evict_folios` call); they become
    /// `Reclaiming` and are returned with their dirty bits for the INV.
    /// A candidate that is not an owned, settled page here (`Local`, no
    /// miss in flight) is refused and skipped. If the policy proposes
    /// nothing usable twice in a row, owned pages are taken in list order,
    /// so this returns `n` pages whenever `n` are owned.
    pub fn pick_victims(&mut self, n: usize) -> Vec<(PageKey, bool)> {
        self.pick_victims_in(Target::Node, n)
    }

    /// Where a miss that [`NodeCache::start_miss`] refused must reclaim
    /// from: the task's group if it is at its own limit, else the node.
    pub fn reclaim_target(&self) -> Target {
        if self.evict.at_limit() {
            Target::Group(self.evict.current())
        } else {
            Target::Node
        }
    }

    /// Groups over their page limits (lowered at run time), with the
    /// pages too many.
    pub fn over_group_limits(&self) -> Vec<(GroupId, usize)> {
        self.evict.over_limits()
    }

    /// [`NodeCache::pick_victims`] from `target` only: the node (every
    /// group's lists, by size) or one group (through its policy).
    pub fn pick_victims_in(&mut self, target: Target, n: usize) -> Vec<(PageKey, bool)> {
        let mut out = Vec::new();
        let mut empty_rounds = 0;
        while out.len() < n && !self.evict.is_empty() {
            let want = n - out.len();
            let mut took = 0;
            if empty_rounds >= 2 {
                let slots = &self.slots;
                let inflight = &self.inflight;
                let pinned = self.limits.pinned;
                let keys = self.evict.fallback(target, want, |k| {
                    matches!(slots.get(k), Some(Slot::Local { .. }))
                        && !inflight.contains_key(k)
                        && !is_pinned(pinned, k)
                });
                for key in keys {
                    if let Some(v) = self.take_owned(&key) {
                        out.push(v);
                    }
                }
                break;
            }
            for key in self.evict.propose(target, want) {
                match self.take_owned(&key) {
                    Some(v) => {
                        out.push(v);
                        took += 1;
                    }
                    None => self.evict.refused(&key),
                }
            }
            empty_rounds = if took == 0 { empty_rounds + 1 } else { 0 };
        }
        out
    }

    /// Validate a candidate: an owned page with no miss in flight becomes
    /// `Reclaiming` and leaves the policy's lists.
    fn take_owned(&mut self, key: &PageKey) -> Option<(PageKey, bool)> {
        if self.inflight.contains_key(key) || is_pinned(self.limits.pinned, key) {
            return None;
        }
        let Some(Slot::Local { gfn, dirty }) = self.slots.get(key).cloned() else {
            return None;
        };
        self.slots.insert(*key, Slot::Reclaiming { gfn });
        self.evict.evicted(key);
        self.evict.removed(key);
        self.stats.invs_sent += 1;
        Some((*key, dirty))
    }

    /// The file shrank (truncate / unlink) from page `from_idx` on: retire
    /// our slots there at once, before the directory's DIR_INVs arrive, so
    /// no later write lands in a page that is being torn down. Our frames
    /// stay held (`Reclaiming`) until the DIR_INV for them comes: a sharer
    /// may still map them until then.
    pub fn evict_local(&mut self, ino: u64, from_idx: u64) {
        // Misses in flight of those pages: not installed when answered.
        self.voided.extend(
            self.inflight
                .keys()
                .filter(|k| k.ino == ino && k.idx >= from_idx)
                .copied(),
        );
        let keys: Vec<PageKey> = self
            .slots
            .range(PageKey { ino, idx: from_idx }..=PageKey { ino, idx: u64::MAX })
            .map(|(k, _)| *k)
            .collect();
        for key in keys {
            match self.slots.get(&key).cloned() {
                Some(Slot::Local { gfn, .. }) | Some(Slot::Reserved { gfn }) => {
                    self.slots.insert(key, Slot::Reclaiming { gfn });
                    self.evict.removed(&key);
                }
                Some(Slot::Remote { .. }) => {
                    self.slots.remove(&key);
                    self.held.remote -= 1;
                }
                Some(Slot::Private(_)) => {
                    self.slots.remove(&key);
                    self.held.private -= 1;
                }
                Some(Slot::Reclaiming { .. }) | None => {}
            }
        }
    }

    /// Make one specific owned page a victim (`bench inv`): its dirty bit,
    /// or `None` if we do not own it.
    pub fn take_victim(&mut self, key: &PageKey) -> Option<bool> {
        let Some(Slot::Local { gfn, dirty }) = self.slots.get(key).cloned() else {
            return None;
        };
        self.slots.insert(*key, Slot::Reclaiming { gfn });
        self.evict.evicted(key);
        self.evict.removed(key);
        self.stats.invs_sent += 1;
        Some(dirty)
    }

    /// Every owned page (for `cache drop`), as victims.
    pub fn all_owned(&mut self) -> Vec<(PageKey, bool)> {
        self.pick_victims(usize::MAX)
    }

    /// The directory finished the INV of `key`: free the frame.
    pub fn reclaimed(&mut self, key: &PageKey) {
        if let Some(Slot::Reclaiming { gfn }) = self.slots.get(key).cloned() {
            self.slots.remove(key);
            self.frames.give(gfn);
        } else {
            // A private copy took the page's place meanwhile (see
            // `make_private`): the frame it left is free now.
            self.frames.free_orphan_of(key);
        }
    }

    /// The INV run `span` was answered: pages whose bit is set in `done`
    /// are reclaimed (frames free), the others go back to the cache.
    /// Returns the frames freed.
    pub fn run_answered(&mut self, span: fabric::proto::PageSpan, done: u64) -> usize {
        let mut freed = 0;
        for i in 0..span.count.min(fabric::proto::MAX_RUN) {
            let Some(idx) = span.first.checked_add(i) else {
                break;
            };
            let key = PageKey { ino: span.ino, idx };
            if done & (1 << i) != 0 {
                self.reclaimed(&key);
                freed += 1;
            } else {
                self.reclaim_failed(&key);
            }
        }
        freed
    }

    /// Count one INV request sent (a run of one or more pages).
    pub fn count_inv_entry(&mut self) {
        self.stats.inv_entries += 1;
    }

    /// The INV of `key` was refused (not owner anymore): give the page
    /// back to the cache as it was.
    pub fn reclaim_failed(&mut self, key: &PageKey) {
        if let Some(Slot::Reclaiming { gfn }) = self.slots.get(key).cloned() {
            self.slots.insert(*key, Slot::Local { gfn, dirty: true });
            self.evict.added(*key);
        }
    }

    /// Remote mappings above the limit, oldest key first, to DROP.
    pub fn over_limit(&mut self) -> Vec<(PageKey, bool)> {
        let excess = self.held.remote.saturating_sub(self.held.remote_limit);
        if excess == 0 {
            return Vec::new(); // every read asks: no walk of the slots
        }
        self.take_remote(excess)
    }

    /// Forget these remote mappings (the caller DROPs them).
    pub fn forget_remote(&mut self, keys: &[(PageKey, bool)]) {
        for (k, d) in keys {
            if let Some(Slot::Remote { dirty, .. }) = self.slots.get(k) {
                if *dirty || *d {
                    self.owed.dropped_dirty(*k);
                }
                self.slots.remove(k);
                self.replicas.gone(k);
                self.held.remote -= 1;
                self.stats.drops += 1;
            }
        }
    }

    /// Every remote mapping (for `cache drop`), to DROP.
    pub fn all_remote(&mut self) -> Vec<(PageKey, bool)> {
        self.take_remote(usize::MAX)
    }

    fn take_remote(&mut self, n: usize) -> Vec<(PageKey, bool)> {
        let keys: Vec<(PageKey, bool)> = self
            .slots
            .iter()
            .filter_map(|(k, s)| match s {
                Slot::Remote { dirty, .. } => Some((*k, *dirty)),
                _ => None,
            })
            .take(n)
            .collect();
        for (k, dirty) in &keys {
            self.slots.remove(k);
            self.replicas.gone(k);
            self.held.remote -= 1;
            self.stats.drops += 1;
            if *dirty {
                self.owed.dropped_dirty(*k);
            }
        }
        keys
    }
}

/// Is `key` in the pinned range `(ino, first, end)`?
pub(super) fn is_pinned(pinned: Option<(u64, u64, u64)>, key: &PageKey) -> bool {
    pinned.is_some_and(|(ino, first, end)| key.ino == ino && (first..end).contains(&key.idx))
}
