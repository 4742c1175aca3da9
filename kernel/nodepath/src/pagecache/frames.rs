//! This node's frame pool (DPC's MM on the node): the free frames of its
//! range of the region, and the frames set aside for a page the directory
//! may still place in them (orphans), not reused until it says where the
//! page is.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use fabric::proto::PageKey;

/// The frames of global range `[first, end)` not holding a page here.
#[derive(Debug)]
pub(super) struct Frames {
    range: (u64, u64),
    free: Vec<u64>,
    /// Frames of misses cancelled unanswered (timeout), and frames being
    /// torn down whose page a relaxed write replaced with a private copy:
    /// the directory may still fill them or let sharers map them, so they
    /// are not reused until it says where the page is (an `Owner` answer,
    /// a DIR_INV, the answer to our INV) or the session ends.
    orphans: BTreeMap<u64, PageKey>,
}

impl Frames {
    /// Every frame of `range` free.
    pub(super) fn new(range: (u64, u64)) -> Frames {
        Frames {
            range,
            free: (range.0..range.1).rev().collect(),
            orphans: BTreeMap::new(),
        }
    }

    /// Free frames.
    pub(super) fn free_count(&self) -> usize {
        self.free.len()
    }

    /// Frames in the pool.
    pub(super) fn capacity(&self) -> usize {
        (self.range.1 - self.range.0) as usize
    }

    /// Is `gfn` one of the pool's frames?
    pub(super) fn contains(&self, gfn: u64) -> bool {
        gfn >= self.range.0 && gfn < self.range.1
    }

    /// A free frame, if any.
    pub(super) fn take(&mut self) -> Option<u64> {
        self.free.pop()
    }

    /// Frame `gfn` is free again.
    pub(super) fn give(&mut self, gfn: u64) {
        self.free.push(gfn);
    }

    /// Set frame `gfn` aside for `key` (an orphan).
    pub(super) fn set_aside(&mut self, gfn: u64, key: PageKey) {
        self.orphans.insert(gfn, key);
    }

    /// The orphans: (frame, page).
    pub(super) fn orphans(&self) -> impl Iterator<Item = (u64, PageKey)> + '_ {
        self.orphans.iter().map(|(g, k)| (*g, *k))
    }

    /// The page orphan frame `gfn` is set aside for.
    pub(super) fn orphan_key(&self, gfn: u64) -> Option<PageKey> {
        self.orphans.get(&gfn).copied()
    }

    /// Orphan frame `gfn` holds its page after all: no longer set aside,
    /// not free either.
    pub(super) fn claim_orphan(&mut self, gfn: u64) {
        self.orphans.remove(&gfn);
    }

    /// The directory let go of orphan frame `gfn`: it is free again.
    pub(super) fn free_orphan(&mut self, gfn: u64) {
        if self.orphans.remove(&gfn).is_some() {
            self.free.push(gfn);
        }
    }

    /// The directory is done with the frame set aside for `key` (the
    /// lowest, if several): it is free again.
    pub(super) fn free_orphan_of(&mut self, key: &PageKey) {
        if let Some(gfn) = self
            .orphans
            .iter()
            .find_map(|(g, k)| (k == key).then_some(*g))
        {
            self.orphans.remove(&gfn);
            self.free.push(gfn);
        }
    }

    /// Every frame free again, none set aside (a new session).
    pub(super) fn reset(&mut self) {
        self.orphans.clear();
        self.free = (self.range.0..self.range.1).rev().collect();
    }

    /// The free frames, most recently freed last (for checks).
    #[cfg(test)]
    pub(super) fn free_list(&self) -> &[u64] {
        &self.free
    }
}
