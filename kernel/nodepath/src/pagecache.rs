//! The node's side of the single-copy page cache (DPC client), as pure
//! bookkeeping: which pages this node owns in its frame pool, which it maps
//! from an owner, which it holds privately (relaxed writes), which are in
//! flight; the free frames of its pool; reclaim victims; counters.
//!
//! It never touches memory or rings: the kernel's VFS moves the bytes and
//! the descriptors, and the host simulation drives the same code with a
//! model of memory. Every transition the directory answers is applied here
//! through one method, so the kernel and the simulation cannot drift apart.

use alloc::boxed::Box;
use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::vec::Vec;

pub use fabric::config::Mode;
use fabric::proto::{PageKey, PageReply, PageReq};

/// Page size (the one constant, re-exported for the data path).
pub use fabric::PAGE_SIZE as PAGE;

/// Where a page's bytes are, as far as this node knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slot {
    /// O: in our frame `gfn`.
    Local {
        /// Our frame.
        gfn: u64,
        /// Written since the last write-back.
        dirty: bool,
    },
    /// S: mapped from `owner`'s frame `gfn`.
    Remote {
        /// Owner node.
        owner: u8,
        /// Owner's frame.
        gfn: u64,
        /// We wrote the owner's frame (strong mode) since the last
        /// write-back.
        dirty: bool,
    },
    /// E: granted by LOOKUP_LOCK; being written into our frame `gfn`.
    Reserved {
        /// Our frame.
        gfn: u64,
    },
    /// Owner reclaim in progress (INV sent): not to be used.
    Reclaiming {
        /// Our frame.
        gfn: u64,
    },
    /// Relaxed mode: a private, dirty copy (not in the shared region).
    Private(Box<[u8; PAGE]>),
}

/// What a lookup found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hit {
    /// Our frame.
    Local(u64),
    /// A peer's frame.
    Remote(u64),
    /// Our private copy (read it with [`NodeCache::private`]).
    Private,
    /// Not usable here right now (absent, reserved or reclaiming).
    Miss,
}

/// Counters for `cache stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Page reads served from our own frames.
    pub hits_local: u64,
    /// Page reads served from a peer's frame (CH-R).
    pub hits_remote: u64,
    /// Page reads served from private copies.
    pub hits_private: u64,
    /// Misses sent to the directory.
    pub misses: u64,
    /// Misses the directory filled from disk into our frame (CM).
    pub fills: u64,
    /// Misses answered with a peer's frame (CM-R).
    pub remote_maps: u64,
    /// Retry answers.
    pub retries: u64,
    /// Owned pages we invalidated (reclaim or `cache drop`).
    pub invs_sent: u64,
    /// DIR_INV notifications received.
    pub invs_received: u64,
    /// Remote mappings we dropped.
    pub drops: u64,
    /// Pages written back (by request of this node).
    pub writebacks: u64,
    /// Mappings refused because the frame was not exported.
    pub refused_maps: u64,
}

/// The node's page cache state.
#[derive(Debug)]
pub struct NodeCache {
    mode: Mode,
    slots: BTreeMap<PageKey, Slot>,
    /// Frames handed to the directory with a READ / LOOKUP_LOCK, by page.
    inflight: BTreeMap<PageKey, u64>,
    /// Pages in `inflight` that got a DIR_INV: acked once answered.
    deferred: BTreeSet<PageKey>,
    /// Deferred acks now due (see [`NodeCache::take_acks`]).
    acks: Vec<(PageKey, bool)>,
    /// Dirty mappings dropped whose DROP may be unanswered: a DIR_INV
    /// racing the DROP must report the dirty bit too (see
    /// [`NodeCache::drop_done`]).
    dropped_dirty: BTreeSet<PageKey>,
    free: Vec<u64>,
    /// Frames of misses cancelled unanswered (timeout): the directory may
    /// still fill them, so they are not reused until it says where the
    /// page is (an `Owner` answer, or a DIR_INV) or the session ends.
    orphans: BTreeMap<u64, PageKey>,
    pool: (u64, u64),
    /// Owned pages in install order: reclaim victims (FIFO).
    owned: VecDeque<PageKey>,
    remote: usize,
    remote_limit: usize,
    stats: CacheStats,
}

/// Result of applying a directory answer to a miss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Installed {
    /// Now in our frame.
    Local(u64),
    /// Now mapped from a peer's frame.
    Remote(u64),
    /// E granted on our frame: write the full page, then UNLOCK.
    Reserved(u64),
    /// Try again later.
    Retry,
    /// Refused (unexported frame, protocol refusal) or I/O error.
    Failed,
}

impl NodeCache {
    /// A cache whose pool is global frames `[first, end)`.
    pub fn new(mode: Mode, pool: (u64, u64), remote_limit: usize) -> NodeCache {
        NodeCache {
            mode,
            slots: BTreeMap::new(),
            inflight: BTreeMap::new(),
            deferred: BTreeSet::new(),
            acks: Vec::new(),
            dropped_dirty: BTreeSet::new(),
            free: (pool.0..pool.1).rev().collect(),
            orphans: BTreeMap::new(),
            pool,
            owned: VecDeque::new(),
            remote: 0,
            remote_limit,
            stats: CacheStats::default(),
        }
    }

    /// The mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Counters.
    pub fn stats(&self) -> CacheStats {
        self.stats
    }

    /// Count a write-back this node requested.
    pub fn count_writeback(&mut self) {
        self.stats.writebacks += 1;
    }

    /// Free frames left in our pool.
    pub fn free_frames(&self) -> usize {
        self.free.len()
    }

    /// Frames in our pool.
    pub fn pool_frames(&self) -> usize {
        (self.pool.1 - self.pool.0) as usize
    }

    /// Pages resident in our frames (O), remote mappings (S), private
    /// copies.
    pub fn counts(&self) -> (usize, usize, usize) {
        let mut c = (0, 0, 0);
        for s in self.slots.values() {
            match s {
                Slot::Local { .. } | Slot::Reserved { .. } | Slot::Reclaiming { .. } => c.0 += 1,
                Slot::Remote { .. } => c.1 += 1,
                Slot::Private(_) => c.2 += 1,
            }
        }
        c
    }

    /// The slot of a page.
    pub fn slot(&self, key: &PageKey) -> Option<&Slot> {
        self.slots.get(key)
    }

    /// Every slot (for checks).
    pub fn slots(&self) -> impl Iterator<Item = (&PageKey, &Slot)> {
        self.slots.iter()
    }

    /// Is `gfn` one of our frames?
    pub fn is_ours(&self, gfn: u64) -> bool {
        gfn >= self.pool.0 && gfn < self.pool.1
    }

    /// Look a page up for reading (counts hits).
    pub fn lookup(&mut self, key: &PageKey) -> Hit {
        match self.slots.get(key) {
            Some(Slot::Local { gfn, .. }) => {
                self.stats.hits_local += 1;
                Hit::Local(*gfn)
            }
            Some(Slot::Remote { gfn, .. }) => {
                self.stats.hits_remote += 1;
                Hit::Remote(*gfn)
            }
            Some(Slot::Private(_)) => {
                self.stats.hits_private += 1;
                Hit::Private
            }
            _ => Hit::Miss,
        }
    }

    /// Our private copy of a page (relaxed mode), if any.
    pub fn private(&self, key: &PageKey) -> Option<&[u8; PAGE]> {
        match self.slots.get(key) {
            Some(Slot::Private(b)) => Some(b),
            _ => None,
        }
    }

    /// Our private copy, mutable.
    pub fn private_mut(&mut self, key: &PageKey) -> Option<&mut [u8; PAGE]> {
        match self.slots.get_mut(key) {
            Some(Slot::Private(b)) => Some(b),
            _ => None,
        }
    }

    /// Start a miss: take a frame and build the request (READ, or
    /// LOOKUP_LOCK for a full-page write in strong mode). `None` when the
    /// pool is empty (reclaim first) or the page is already in flight.
    pub fn start_miss(&mut self, key: PageKey, full_write: bool) -> Option<PageReq> {
        if self.inflight.contains_key(&key) {
            return None;
        }
        let frame = self.free.pop()?;
        self.inflight.insert(key, frame);
        self.stats.misses += 1;
        Some(if full_write && self.mode == Mode::Strong {
            PageReq::LookupLock { key, frame }
        } else {
            PageReq::Read { key, frame }
        })
    }

    /// Apply the directory's answer to a miss started with
    /// [`NodeCache::start_miss`]. `exported(gfn)` reads the owner's export
    /// bit: a peer's frame is only mapped while it is exported.
    ///
    /// If a DIR_INV for the page came in while the miss was in flight
    /// ([`NodeCache::dir_inv`] returned `None`), it was about the copy this
    /// answer grants (the directory cannot finish that invalidation, nor
    /// hand out a newer copy, before our ack): a mapping is not installed,
    /// a fill is torn down again (file eviction), the answer becomes
    /// [`Installed::Retry`], and the ack becomes due in
    /// [`NodeCache::take_acks`].
    pub fn complete_miss(
        &mut self,
        key: PageKey,
        reply: PageReply,
        exported: impl Fn(u64) -> bool,
    ) -> Installed {
        let Some(frame) = self.inflight.remove(&key) else {
            return Installed::Failed;
        };
        // A DROP of the page went out before this miss: its answer came
        // first on the response ring.
        let dropped_dirty = self.dropped_dirty.remove(&key);
        if !self.deferred.remove(&key) {
            return self.apply_answer(key, frame, reply, exported);
        }
        let (got, dirty) = match reply {
            PageReply::Shared { .. } => {
                self.free.push(frame);
                self.stats.retries += 1;
                (Installed::Retry, false)
            }
            // E cannot have been invalidated (only owned pages are); the
            // notice was about an older copy.
            PageReply::Exclusive { .. } => (self.apply_answer(key, frame, reply, exported), false),
            _ => {
                let got = self.apply_answer(key, frame, reply, exported);
                let dirty = self.teardown(&key);
                match got {
                    Installed::Local(_) => (Installed::Retry, dirty),
                    got => (got, dirty),
                }
            }
        };
        self.acks.push((key, dirty || dropped_dirty));
        got
    }

    /// Is a miss of `key` in flight?
    pub fn in_flight(&self, key: &PageKey) -> bool {
        self.inflight.contains_key(key)
    }

    /// Give up a miss started with [`NodeCache::start_miss`] that got no
    /// usable answer (an error answer, or none before the timeout): its
    /// frame goes back to the pool, and a DIR_INV deferred behind it is
    /// acknowledged now (the page was never installed here). False if the
    /// page was not in flight.
    ///
    /// `unanswered`: the request may still reach the directory (a timeout),
    /// so the frame is set aside instead (see `orphans`).
    pub fn cancel_miss(&mut self, key: &PageKey, unanswered: bool) -> bool {
        let Some(frame) = self.inflight.remove(key) else {
            return false;
        };
        if unanswered {
            self.orphans.insert(frame, *key);
        } else {
            self.free.push(frame);
        }
        let dropped_dirty = self.dropped_dirty.remove(key);
        if self.deferred.remove(key) {
            self.acks.push((*key, dropped_dirty));
        }
        true
    }

    fn apply_answer(
        &mut self,
        key: PageKey,
        frame: u64,
        reply: PageReply,
        exported: impl Fn(u64) -> bool,
    ) -> Installed {
        match reply {
            PageReply::Owner { gfn } if self.orphans.get(&gfn) == Some(&key) => {
                // A miss we gave up on was served after all: the page is
                // in that frame.
                self.orphans.remove(&gfn);
                self.free.push(frame);
                self.install(key, Slot::Local { gfn, dirty: false });
                self.stats.fills += 1;
                Installed::Local(gfn)
            }
            PageReply::Owner { gfn } if gfn == frame => {
                self.install(key, Slot::Local { gfn, dirty: false });
                self.stats.fills += 1;
                Installed::Local(gfn)
            }
            PageReply::Exclusive { gfn } if gfn == frame => {
                self.replace(key, Slot::Reserved { gfn });
                Installed::Reserved(gfn)
            }
            PageReply::Shared { gfn, .. } if self.is_ours(gfn) => {
                // Our own frame cannot be a peer's: protocol error.
                self.free.push(frame);
                self.stats.refused_maps += 1;
                Installed::Failed
            }
            PageReply::Shared { owner, gfn } => {
                self.free.push(frame);
                if !exported(gfn) {
                    self.stats.refused_maps += 1;
                    return Installed::Failed;
                }
                self.replace(
                    key,
                    Slot::Remote {
                        owner,
                        gfn,
                        dirty: false,
                    },
                );
                self.remote += 1;
                self.stats.remote_maps += 1;
                Installed::Remote(gfn)
            }
            PageReply::Retry => {
                self.free.push(frame);
                self.stats.retries += 1;
                Installed::Retry
            }
            _ => {
                self.free.push(frame);
                Installed::Failed
            }
        }
    }

    fn install(&mut self, key: PageKey, slot: Slot) {
        self.replace(key, slot);
        self.owned.push_back(key);
    }

    /// Set a slot, releasing what the old one held.
    fn replace(&mut self, key: PageKey, slot: Slot) {
        if let Some(old) = self.slots.insert(key, slot) {
            self.forget_slot(old);
        }
    }

    fn forget_slot(&mut self, old: Slot) {
        match old {
            Slot::Local { gfn, .. } | Slot::Reserved { gfn } | Slot::Reclaiming { gfn } => {
                self.free.push(gfn)
            }
            Slot::Remote { .. } => self.remote -= 1,
            Slot::Private(_) => {}
        }
    }

    /// The full-page write into a reserved frame is done: E -> O (the
    /// UNLOCK was answered).
    pub fn unlocked(&mut self, key: PageKey) {
        if let Some(Slot::Reserved { gfn }) = self.slots.get(&key).cloned() {
            self.slots.remove(&key);
            self.install(key, Slot::Local { gfn, dirty: true });
        }
    }

    /// Record a write to a page we own or map (strong mode writes the
    /// owner's frame).
    pub fn mark_dirty(&mut self, key: &PageKey) {
        match self.slots.get_mut(key) {
            Some(Slot::Local { dirty, .. }) | Some(Slot::Remote { dirty, .. }) => *dirty = true,
            _ => {}
        }
    }

    /// Relaxed mode: replace a remote mapping (or nothing) with a private
    /// copy holding `data`. Returns the remote key to DROP, if we had one.
    pub fn make_private(&mut self, key: PageKey, data: Box<[u8; PAGE]>) -> bool {
        let had_remote = matches!(self.slots.get(&key), Some(Slot::Remote { .. }));
        if let Some(old) = self.slots.insert(key, Slot::Private(data)) {
            self.forget_slot(old);
        }
        had_remote
    }

    /// Private copies of `ino` (relaxed mode), to write back.
    pub fn private_pages(&self, ino: u64) -> Vec<PageKey> {
        self.range(ino)
            .filter(|(_, s)| matches!(s, Slot::Private(_)))
            .map(|(k, _)| *k)
            .collect()
    }

    /// After write-back of a private copy: forget it (the next read maps
    /// the reconciled single copy again).
    pub fn drop_private(&mut self, key: &PageKey) {
        if matches!(self.slots.get(key), Some(Slot::Private(_))) {
            self.slots.remove(key);
        }
    }

    fn range(&self, ino: u64) -> impl Iterator<Item = (&PageKey, &Slot)> {
        self.slots
            .range(PageKey { ino, idx: 0 }..=PageKey { ino, idx: u64::MAX })
    }

    /// Pages of `ino` this node dirtied in frames (own or mapped).
    pub fn dirty_pages(&self, ino: u64) -> Vec<PageKey> {
        self.range(ino)
            .filter(|(_, s)| {
                matches!(
                    s,
                    Slot::Local { dirty: true, .. } | Slot::Remote { dirty: true, .. }
                )
            })
            .map(|(k, _)| *k)
            .collect()
    }

    /// Every inode with dirty frames or private copies (sync).
    pub fn dirty_inodes(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .slots
            .iter()
            .filter(|(_, s)| {
                matches!(
                    s,
                    Slot::Local { dirty: true, .. }
                        | Slot::Remote { dirty: true, .. }
                        | Slot::Private(_)
                )
            })
            .map(|(k, _)| k.ino)
            .collect();
        v.dedup();
        v
    }

    /// Clear the dirty bit after a WRITEBACK.
    pub fn cleaned(&mut self, key: &PageKey) {
        match self.slots.get_mut(key) {
            Some(Slot::Local { dirty, .. }) | Some(Slot::Remote { dirty, .. }) => *dirty = false,
            _ => {}
        }
    }

    /// DIR_INV for `key` from the notify ring: `Some(dirty)`: the page is
    /// torn down here (the caller unmaps it from page tables and flushes
    /// the TLB), ack now with `dirty`. `None`: our READ / LOOKUP_LOCK of
    /// the page is unanswered and the notice may be about the copy it
    /// grants, so the ack waits for the answer ([`NodeCache::complete_miss`]
    /// then queues it for [`NodeCache::take_acks`]). Acking at once would
    /// let the directory finish the invalidation before the answer is
    /// applied: we would then map a frame nobody tracks, or keep a fill the
    /// directory already forgot.
    pub fn dir_inv(&mut self, key: &PageKey) -> Option<bool> {
        if self.inflight.contains_key(key) {
            self.stats.invs_received += 1;
            self.deferred.insert(*key);
            return None;
        }
        Some(self.invalidate(key))
    }

    /// Acks of deferred DIR_INVs that became due: send each on the ack
    /// ring (after unmapping the page, as for [`NodeCache::dir_inv`]).
    pub fn take_acks(&mut self) -> Vec<(PageKey, bool)> {
        core::mem::take(&mut self.acks)
    }

    /// Tear `key` down here and say whether we had dirtied it (the DIR_INV
    /// handler without the in-flight check: prefer [`NodeCache::dir_inv`]).
    /// The caller unmaps it from page tables (and flushes the TLB) before
    /// sending the ack.
    pub fn invalidate(&mut self, key: &PageKey) -> bool {
        self.stats.invs_received += 1;
        if let Some(gfn) = self
            .orphans
            .iter()
            .find_map(|(g, k)| (k == key).then_some(*g))
        {
            // The directory is done with a frame of a cancelled miss.
            self.orphans.remove(&gfn);
            self.free.push(gfn);
        }
        // A DROP racing the DIR_INV may reach the directory after the ack
        // (and be refused): the ack carries its dirty bit.
        let dropped = self.dropped_dirty.remove(key);
        self.teardown(key) || dropped
    }

    /// The DROP of `key` was answered: the directory has its dirty bit.
    pub fn drop_done(&mut self, key: &PageKey) {
        self.dropped_dirty.remove(key);
    }

    fn teardown(&mut self, key: &PageKey) -> bool {
        match self.slots.get(key).cloned() {
            Some(Slot::Remote { dirty, .. }) => {
                self.slots.remove(key);
                self.remote -= 1;
                dirty
            }
            // File eviction (truncate / unlink): our own copy goes too. The
            // directory only evicts committed pages, so a `Reserved` slot
            // here is one whose UNLOCK was served and answered already.
            Some(Slot::Local { gfn, .. })
            | Some(Slot::Reclaiming { gfn })
            | Some(Slot::Reserved { gfn }) => {
                self.slots.remove(key);
                self.owned.retain(|k| k != key);
                self.free.push(gfn);
                false
            }
            _ => false,
        }
    }

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

    /// Forget everything (the directory is gone or we rejoin with a new
    /// epoch): no mapping survives, every frame is free again.
    pub fn forget_all(&mut self) {
        self.slots.clear();
        self.inflight.clear();
        self.deferred.clear();
        self.acks.clear();
        self.dropped_dirty.clear();
        self.orphans.clear();
        self.owned.clear();
        self.remote = 0;
        self.free = (self.pool.0..self.pool.1).rev().collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl NodeCache {
        /// Free frames and frames in flight (for the checks of the tests
        /// and of the simulation).
        pub(crate) fn frames_debug(&self) -> (Vec<u64>, Vec<(PageKey, u64)>) {
            (
                self.free.clone(),
                self.inflight.iter().map(|(k, g)| (*k, *g)).collect(),
            )
        }
    }

    const POOL: (u64, u64) = (100, 104);
    const PEER: u64 = 500;

    fn key(idx: u64) -> PageKey {
        PageKey { ino: 3, idx }
    }

    fn cache() -> NodeCache {
        NodeCache::new(Mode::Strong, POOL, 2)
    }

    fn yes(_: u64) -> bool {
        true
    }

    fn no(_: u64) -> bool {
        false
    }

    /// Every frame of the pool is exactly once free, in flight or held by
    /// a slot; the remote count matches; deferred DIR_INVs are in flight.
    #[track_caller]
    fn pool_ok(c: &NodeCache) {
        let mut seen = BTreeSet::new();
        let held = c.slots.values().filter_map(|s| match s {
            Slot::Local { gfn, .. } | Slot::Reserved { gfn } | Slot::Reclaiming { gfn } => {
                Some(*gfn)
            }
            _ => None,
        });
        for g in c
            .free
            .iter()
            .copied()
            .chain(c.inflight.values().copied())
            .chain(held)
        {
            assert!(g >= c.pool.0 && g < c.pool.1, "frame {g} not ours");
            assert!(seen.insert(g), "frame {g} twice: {c:?}");
        }
        assert_eq!(seen.len(), c.pool_frames(), "lost a frame: {c:?}");
        let remote = c
            .slots
            .values()
            .filter(|s| matches!(s, Slot::Remote { .. }))
            .count();
        assert_eq!(c.remote, remote);
        assert!(c.deferred.iter().all(|k| c.inflight.contains_key(k)));
        assert_eq!(c.counts().1, remote);
    }

    /// Own `k` through a READ fill; returns its frame.
    fn own(c: &mut NodeCache, k: PageKey) -> u64 {
        let Some(PageReq::Read { frame, .. }) = c.start_miss(k, false) else {
            panic!("no READ");
        };
        assert_eq!(
            c.complete_miss(k, PageReply::Owner { gfn: frame }, yes),
            Installed::Local(frame)
        );
        pool_ok(c);
        frame
    }

    /// Map `k` from a peer's frame `gfn`.
    fn map(c: &mut NodeCache, k: PageKey, gfn: u64) {
        c.start_miss(k, false).unwrap();
        let r = PageReply::Shared { owner: 2, gfn };
        assert_eq!(c.complete_miss(k, r, yes), Installed::Remote(gfn));
        pool_ok(c);
    }

    #[test]
    fn a_new_cache_has_every_frame_free() {
        let c = cache();
        assert_eq!((c.free_frames(), c.pool_frames()), (4, 4));
        assert_eq!(c.counts(), (0, 0, 0));
        assert!(c.is_ours(100) && c.is_ours(103) && !c.is_ours(104) && !c.is_ours(99));
        pool_ok(&c);
    }

    #[test]
    fn start_miss_builds_read_or_lookup_lock_with_a_frame_of_ours() {
        let mut c = cache();
        let Some(PageReq::Read { key: k, frame }) = c.start_miss(key(0), false) else {
            panic!()
        };
        assert_eq!(k, key(0));
        assert!(c.is_ours(frame));
        assert!(matches!(
            c.start_miss(key(1), true),
            Some(PageReq::LookupLock { .. })
        ));
        // Relaxed mode never asks LOOKUP_LOCK.
        let mut r = NodeCache::new(Mode::Relaxed, POOL, 2);
        assert!(matches!(
            r.start_miss(key(1), true),
            Some(PageReq::Read { .. })
        ));
        assert_eq!(c.free_frames(), 2);
        assert_eq!(c.stats().misses, 2);
        pool_ok(&c);
    }

    #[test]
    fn start_miss_refuses_a_page_in_flight_and_an_empty_pool() {
        let mut c = cache();
        c.start_miss(key(0), false).unwrap();
        assert_eq!(c.start_miss(key(0), true), None, "already in flight");
        for i in 1..4 {
            c.start_miss(key(i), false).unwrap();
        }
        assert_eq!(c.start_miss(key(9), false), None, "pool empty");
        assert_eq!(c.free_frames(), 0);
        pool_ok(&c);
    }

    #[test]
    fn owner_answer_installs_our_frame() {
        let mut c = cache();
        let g = own(&mut c, key(0));
        assert_eq!(
            c.slot(&key(0)),
            Some(&Slot::Local {
                gfn: g,
                dirty: false
            })
        );
        assert_eq!(c.lookup(&key(0)), Hit::Local(g));
        assert_eq!(c.stats().fills, 1);
        assert_eq!(c.stats().hits_local, 1);
        // An owner answer naming another frame gives ours back.
        c.start_miss(key(1), false).unwrap();
        assert_eq!(
            c.complete_miss(key(1), PageReply::Owner { gfn: g }, yes),
            Installed::Failed
        );
        assert_eq!(c.slot(&key(1)), None);
        pool_ok(&c);
    }

    #[test]
    fn shared_answer_maps_the_peer_frame_and_frees_ours() {
        let mut c = cache();
        map(&mut c, key(0), PEER);
        assert_eq!(c.free_frames(), 4);
        assert_eq!(c.lookup(&key(0)), Hit::Remote(PEER));
        assert_eq!(c.counts(), (0, 1, 0));
        assert_eq!(c.stats().remote_maps, 1);
        // Not exported: refused.
        c.start_miss(key(1), false).unwrap();
        let r = PageReply::Shared {
            owner: 2,
            gfn: PEER + 1,
        };
        assert_eq!(c.complete_miss(key(1), r, no), Installed::Failed);
        // Our own frame cannot be a peer's.
        c.start_miss(key(2), false).unwrap();
        let r = PageReply::Shared { owner: 2, gfn: 101 };
        assert_eq!(c.complete_miss(key(2), r, yes), Installed::Failed);
        assert_eq!(c.stats().refused_maps, 2);
        assert_eq!(c.counts(), (0, 1, 0));
        pool_ok(&c);
    }

    #[test]
    fn exclusive_answer_reserves_until_unlocked() {
        let mut c = cache();
        let Some(PageReq::LookupLock { frame, .. }) = c.start_miss(key(0), true) else {
            panic!()
        };
        assert_eq!(
            c.complete_miss(key(0), PageReply::Exclusive { gfn: frame }, yes),
            Installed::Reserved(frame)
        );
        assert_eq!(c.lookup(&key(0)), Hit::Miss, "not readable while reserved");
        assert_eq!(c.pick_victims(4), vec![], "not a victim while reserved");
        pool_ok(&c);
        c.unlocked(key(0));
        assert_eq!(
            c.slot(&key(0)),
            Some(&Slot::Local {
                gfn: frame,
                dirty: true
            })
        );
        assert_eq!(c.pick_victims(4), vec![(key(0), true)]);
        c.unlocked(key(5)); // nothing reserved: no-op
        pool_ok(&c);
    }

    #[test]
    fn retry_refusal_and_io_error_give_the_frame_back() {
        let mut c = cache();
        for (r, want) in [
            (PageReply::Retry, Installed::Retry),
            (PageReply::Refused, Installed::Failed),
            (PageReply::IoError, Installed::Failed),
            (PageReply::Done { written: false }, Installed::Failed),
        ] {
            c.start_miss(key(0), false).unwrap();
            assert_eq!(c.complete_miss(key(0), r, yes), want);
            assert_eq!(c.free_frames(), 4);
            assert_eq!(c.slot(&key(0)), None);
        }
        assert_eq!(c.stats().retries, 1);
        // An answer to a miss never started.
        assert_eq!(
            c.complete_miss(key(1), PageReply::Owner { gfn: 100 }, yes),
            Installed::Failed
        );
        pool_ok(&c);
    }

    #[test]
    fn victims_are_the_oldest_owned_pages_and_their_frames_come_back() {
        let mut c = cache();
        let g0 = own(&mut c, key(0));
        own(&mut c, key(1));
        let g2 = own(&mut c, key(2));
        map(&mut c, key(3), PEER);
        c.mark_dirty(&key(0));
        assert_eq!(c.pick_victims(2), vec![(key(0), true), (key(1), false)]);
        assert_eq!(c.slot(&key(0)), Some(&Slot::Reclaiming { gfn: g0 }));
        assert_eq!(c.lookup(&key(0)), Hit::Miss, "not usable while reclaiming");
        assert_eq!(c.stats().invs_sent, 2);
        pool_ok(&c);
        c.reclaimed(&key(0));
        assert_eq!(c.slot(&key(0)), None);
        // Refused: back as it was (dirty, to be safe), last in line.
        c.reclaim_failed(&key(1));
        assert!(matches!(
            c.slot(&key(1)),
            Some(Slot::Local { dirty: true, .. })
        ));
        assert_eq!(c.all_owned(), vec![(key(2), false), (key(1), true)]);
        assert_eq!(c.slot(&key(2)), Some(&Slot::Reclaiming { gfn: g2 }));
        // Answers for pages that are not reclaiming change nothing.
        c.reclaimed(&key(3));
        c.reclaim_failed(&key(3));
        assert_eq!(c.lookup(&key(3)), Hit::Remote(PEER));
        c.reclaimed(&key(1));
        c.reclaimed(&key(2));
        assert_eq!(c.free_frames(), 4);
        pool_ok(&c);
    }

    #[test]
    fn invalidate_tears_down_mappings_and_evicted_copies() {
        let mut c = cache();
        map(&mut c, key(0), PEER);
        c.mark_dirty(&key(0));
        assert!(c.invalidate(&key(0)), "the dirty bit goes with the ack");
        assert_eq!(c.counts(), (0, 0, 0));
        map(&mut c, key(0), PEER);
        assert!(!c.invalidate(&key(0)));
        // File eviction: our own copy goes, in every state that holds one.
        own(&mut c, key(1));
        c.mark_dirty(&key(1));
        assert!(!c.invalidate(&key(1)), "evicted data is not written back");
        own(&mut c, key(2));
        c.pick_victims(1);
        c.invalidate(&key(2));
        let Some(PageReq::LookupLock { frame, .. }) = c.start_miss(key(3), true) else {
            panic!()
        };
        c.complete_miss(key(3), PageReply::Exclusive { gfn: frame }, yes);
        c.invalidate(&key(3)); // UNLOCK served, its answer not yet in
        c.unlocked(key(3));
        assert_eq!(c.slot(&key(3)), None);
        assert!(!c.invalidate(&key(9)), "nothing here");
        assert_eq!(c.free_frames(), 4);
        assert_eq!(c.stats().invs_received, 6);
        assert_eq!(c.pick_victims(4), vec![]);
        pool_ok(&c);
    }

    #[test]
    fn dir_inv_during_a_miss_waits_for_the_answer() {
        let mut c = cache();
        // Shared answer overtaken by the DIR_INV of that very mapping.
        c.start_miss(key(0), false).unwrap();
        assert_eq!(c.dir_inv(&key(0)), None);
        assert!(c.take_acks().is_empty(), "not before the answer");
        pool_ok(&c);
        let r = PageReply::Shared {
            owner: 2,
            gfn: PEER,
        };
        assert_eq!(c.complete_miss(key(0), r, yes), Installed::Retry);
        assert_eq!(c.slot(&key(0)), None, "the mapping is not installed");
        assert_eq!(c.take_acks(), vec![(key(0), false)]);
        assert!(c.take_acks().is_empty());
        // A fill whose page was evicted before the answer arrived.
        let Some(PageReq::Read { frame, .. }) = c.start_miss(key(1), false) else {
            panic!()
        };
        assert_eq!(c.dir_inv(&key(1)), None);
        assert_eq!(
            c.complete_miss(key(1), PageReply::Owner { gfn: frame }, yes),
            Installed::Retry
        );
        assert_eq!(c.slot(&key(1)), None);
        assert_eq!(c.take_acks(), vec![(key(1), false)]);
        // Retry and refusals just release the ack.
        c.start_miss(key(2), false).unwrap();
        c.dir_inv(&key(2));
        assert_eq!(
            c.complete_miss(key(2), PageReply::Retry, yes),
            Installed::Retry
        );
        assert_eq!(c.take_acks(), vec![(key(2), false)]);
        // E cannot be what was invalidated: installed, ack released.
        let Some(PageReq::LookupLock { frame, .. }) = c.start_miss(key(3), true) else {
            panic!()
        };
        c.dir_inv(&key(3));
        assert_eq!(
            c.complete_miss(key(3), PageReply::Exclusive { gfn: frame }, yes),
            Installed::Reserved(frame)
        );
        assert_eq!(c.take_acks(), vec![(key(3), false)]);
        // Without a miss in flight the ack is due at once.
        map(&mut c, key(4), PEER);
        c.mark_dirty(&key(4));
        assert_eq!(c.dir_inv(&key(4)), Some(true));
        assert_eq!(c.dir_inv(&key(4)), Some(false));
        assert_eq!(c.free_frames(), 3);
        pool_ok(&c);
    }

    #[test]
    fn a_dropped_dirty_mapping_reports_its_dirty_bit_to_a_racing_dir_inv() {
        let mut c = cache();
        map(&mut c, key(0), PEER);
        map(&mut c, key(1), PEER + 1);
        map(&mut c, key(2), PEER + 2);
        c.mark_dirty(&key(0));
        // Limit 2: the oldest key goes, with its dirty bit.
        assert_eq!(c.over_limit(), vec![(key(0), true)]);
        assert_eq!(c.over_limit(), vec![]);
        // The DROP is not answered yet and a DIR_INV comes: dirty.
        assert_eq!(c.dir_inv(&key(0)), Some(true));
        assert_eq!(c.dir_inv(&key(0)), Some(false), "reported once");
        // Answered first: forgotten.
        c.mark_dirty(&key(1));
        assert_eq!(c.all_remote(), vec![(key(1), true), (key(2), false)]);
        c.drop_done(&key(1));
        assert_eq!(c.dir_inv(&key(1)), Some(false));
        // A later miss on the page means the DROP was answered.
        map(&mut c, key(5), PEER + 5);
        c.mark_dirty(&key(5));
        c.forget_remote(&[(key(5), false)]);
        map(&mut c, key(5), PEER + 5);
        assert_eq!(c.dir_inv(&key(5)), Some(false));
        assert_eq!(c.stats().drops, 4);
        pool_ok(&c);
    }

    #[test]
    fn dirty_pages_are_listed_and_cleaned() {
        let mut c = cache();
        own(&mut c, key(0));
        own(&mut c, PageKey { ino: 4, idx: 0 });
        map(&mut c, key(1), PEER);
        own(&mut c, key(2));
        c.mark_dirty(&key(0));
        c.mark_dirty(&key(1));
        c.mark_dirty(&PageKey { ino: 4, idx: 0 });
        c.mark_dirty(&key(7)); // absent: no-op
        assert_eq!(c.dirty_pages(3), vec![key(0), key(1)]);
        assert_eq!(c.dirty_inodes(), vec![3, 4]);
        c.cleaned(&key(0));
        c.cleaned(&key(1));
        assert_eq!(c.dirty_pages(3), vec![]);
        assert_eq!(c.dirty_inodes(), vec![4]);
        pool_ok(&c);
    }

    #[test]
    fn private_copies_replace_mappings_in_relaxed_mode() {
        let mut c = NodeCache::new(Mode::Relaxed, POOL, 2);
        map(&mut c, key(0), PEER);
        assert!(c.make_private(key(0), Box::new([7; PAGE])));
        assert!(!c.make_private(key(1), Box::new([8; PAGE])));
        assert_eq!(c.lookup(&key(0)), Hit::Private);
        assert_eq!(c.private(&key(1)).map(|p| p[0]), Some(8));
        c.private_mut(&key(1)).unwrap()[0] = 9;
        assert_eq!(c.private_pages(3), vec![key(0), key(1)]);
        assert_eq!(c.dirty_inodes(), vec![3]);
        assert_eq!(c.counts(), (0, 0, 2));
        c.drop_private(&key(0));
        assert_eq!(c.private_pages(3), vec![key(1)]);
        assert_eq!(c.stats().hits_private, 1);
        pool_ok(&c);
    }

    #[test]
    fn forget_all_frees_everything() {
        let mut c = cache();
        own(&mut c, key(0));
        map(&mut c, key(1), PEER);
        c.start_miss(key(2), true).unwrap();
        c.dir_inv(&key(2));
        c.pick_victims(1);
        c.forget_all();
        assert_eq!(c.free_frames(), 4);
        assert_eq!(c.counts(), (0, 0, 0));
        assert!(c.take_acks().is_empty());
        assert!(c.start_miss(key(2), false).is_some());
        pool_ok(&c);
    }

    /// Random sequences of every operation (including nonsense answers):
    /// the pool never loses or duplicates a frame.
    #[test]
    fn pool_accounting_survives_any_sequence() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut rnd = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for round in 0..200 {
            let mode = if round % 3 == 0 {
                Mode::Relaxed
            } else {
                Mode::Strong
            };
            let mut c = NodeCache::new(mode, POOL, (round % 3) as usize);
            let mut sent: Vec<(PageKey, u64)> = Vec::new();
            for _ in 0..300 {
                let k = key(rnd(6));
                match rnd(16) {
                    0 | 1 => {
                        if let Some(
                            PageReq::Read { frame, .. } | PageReq::LookupLock { frame, .. },
                        ) = c.start_miss(k, rnd(2) == 0)
                        {
                            sent.push((k, frame));
                        }
                    }
                    2..=4 if !sent.is_empty() => {
                        let (k, frame) = sent.swap_remove(rnd(sent.len() as u64) as usize);
                        let reply = match rnd(8) {
                            0 | 1 => PageReply::Owner { gfn: frame },
                            2 => PageReply::Exclusive { gfn: frame },
                            3 | 4 => PageReply::Shared {
                                owner: 2,
                                gfn: PEER + rnd(3),
                            },
                            5 => PageReply::Retry,
                            6 => PageReply::Owner { gfn: 100 + rnd(4) },
                            _ => PageReply::IoError,
                        };
                        c.complete_miss(k, reply, |g| g != PEER + 2);
                    }
                    5 => c.unlocked(k),
                    6 => c.mark_dirty(&k),
                    7 => {
                        let _ = c.dir_inv(&k);
                        let _ = c.take_acks();
                    }
                    8 => {
                        c.invalidate(&k);
                    }
                    9 => {
                        c.pick_victims(1 + rnd(3) as usize);
                    }
                    10 => c.reclaimed(&k),
                    11 => c.reclaim_failed(&k),
                    12 => {
                        c.over_limit();
                    }
                    13 if matches!(c.slot(&k), None | Some(Slot::Remote { .. }))
                        && !sent.iter().any(|(s, _)| *s == k) =>
                    {
                        c.make_private(k, Box::new([0; PAGE]));
                    }
                    14 => {
                        let _ = c.take_victim(&k);
                        c.evict_local(3, rnd(6));
                    }
                    15 if rnd(20) == 0 => {
                        c.forget_all();
                        sent.clear();
                    }
                    _ => {
                        let _ = c.lookup(&k);
                        c.drop_private(&k);
                        c.cleaned(&k);
                    }
                }
                pool_ok(&c);
            }
        }
    }
}
