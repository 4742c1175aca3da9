//! Giving pages back: reclaim victims, file eviction, dropping remote
//! mappings, forgetting everything.

use alloc::vec::Vec;

use fabric::proto::PageKey;

use super::{NodeCache, Slot};

impl NodeCache {
    /// Pick up to `n` owned pages to reclaim (oldest first); they become
    /// `Reclaiming` and are returned with their dirty bits for the INV.
    pub fn pick_victims(&mut self, n: usize) -> Vec<(PageKey, bool)> {
        let mut out = Vec::new();
        let mut scanned = self.owned.len();
        while out.len() < n && scanned > 0 {
            scanned -= 1;
            let Some(key) = self.owned.pop_front() else {
                break;
            };
            if let Some(Slot::Local { gfn, dirty }) = self.slots.get(&key).cloned() {
                self.slots.insert(key, Slot::Reclaiming { gfn });
                self.stats.invs_sent += 1;
                out.push((key, dirty));
            }
        }
        out
    }

    /// The file shrank (truncate / unlink) from page `from_idx` on: retire
    /// our slots there at once, before the directory's DIR_INVs arrive, so
    /// no later write lands in a page that is being torn down. Our frames
    /// stay held (`Reclaiming`) until the DIR_INV for them comes: a sharer
    /// may still map them until then.
    pub fn evict_local(&mut self, ino: u64, from_idx: u64) {
        let keys: Vec<PageKey> = self
            .slots
            .range(PageKey { ino, idx: from_idx }..=PageKey { ino, idx: u64::MAX })
            .map(|(k, _)| *k)
            .collect();
        for key in keys {
            match self.slots.get(&key).cloned() {
                Some(Slot::Local { gfn, .. }) | Some(Slot::Reserved { gfn }) => {
                    self.slots.insert(key, Slot::Reclaiming { gfn });
                    self.owned.retain(|k| *k != key);
                }
                Some(Slot::Remote { .. }) => {
                    self.slots.remove(&key);
                    self.remote -= 1;
                }
                Some(Slot::Private(_)) => {
                    self.slots.remove(&key);
                    self.private -= 1;
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
        self.owned.retain(|k| k != key);
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
            self.free.push(gfn);
        }
    }

    /// The INV of `key` was refused (not owner anymore): give the page
    /// back to the cache as it was.
    pub fn reclaim_failed(&mut self, key: &PageKey) {
        if let Some(Slot::Reclaiming { gfn }) = self.slots.get(key).cloned() {
            self.slots.insert(*key, Slot::Local { gfn, dirty: true });
            self.owned.push_back(*key);
        }
    }

    /// Remote mappings above the limit, oldest key first, to DROP.
    pub fn over_limit(&mut self) -> Vec<(PageKey, bool)> {
        let excess = self.remote.saturating_sub(self.remote_limit);
        self.take_remote(excess)
    }

    /// Forget these remote mappings (the caller DROPs them).
    pub fn forget_remote(&mut self, keys: &[(PageKey, bool)]) {
        for (k, d) in keys {
            if let Some(Slot::Remote { dirty, .. }) = self.slots.get(k) {
                if *dirty || *d {
                    self.dropped_dirty.insert(*k);
                }
                self.slots.remove(k);
                self.remote -= 1;
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
            self.remote -= 1;
            self.stats.drops += 1;
            if *dirty {
                self.dropped_dirty.insert(*k);
            }
        }
        keys
    }
}
