//! Frames for delegated ownership (strong mode, `singlecopy/deleg.rs`):
//! a page written whole under a delegation is placed in a frame of this
//! node's pool with no request, and each delegation keeps its list in a
//! frame of the pool as well.

use fabric::proto::PageKey;

use super::{NodeCache, Slot};

impl NodeCache {
    /// A frame of the pool for a delegation's list (`None`: the pool is
    /// empty). Given back with [`NodeCache::give_frame`].
    pub fn take_frame(&mut self) -> Option<u64> {
        self.frames.take()
    }

    /// Give back a frame taken with [`NodeCache::take_frame`].
    pub fn give_frame(&mut self, gfn: u64) {
        self.frames.give(gfn);
    }

    /// Place `key` (held in no form, no miss in flight) in a frame of our
    /// own as an owned, dirty page, with no directory call: its range is
    /// delegated to this node. `None` when a miss would reclaim first (the
    /// pool or a limit is exhausted): the caller goes the usual way.
    pub fn place_delegated(&mut self, key: PageKey) -> Option<u64> {
        if self.slots.get(&key).is_some() || self.inflight.contains_key(&key) {
            return None;
        }
        if self
            .limits
            .owned
            .is_some_and(|l| self.evict.len() + self.inflight.len() >= l)
            || self.evict.at_limit()
        {
            return None;
        }
        let gfn = self.frames.take()?;
        let g = self.evict.current();
        self.install(key, Slot::Local { gfn, dirty: true }, g);
        Some(gfn)
    }
}
