//! The node's side of the single-copy page cache (DPC client), as pure
//! bookkeeping: which pages this node owns in its frame pool, which it maps
//! from an owner, which it holds privately (relaxed writes), which are in
//! flight; the free frames of its pool; reclaim victims; counters.
//!
//! It never touches memory or rings: the kernel's VFS moves the bytes and
//! the descriptors, and the host simulation drives the same code with a
//! model of memory. Every transition the directory answers is applied here
//! through one method, so the kernel and the simulation cannot drift apart.

use crate::keymap::{KeyMap, KeySet};
use alloc::boxed::Box;
use alloc::vec::Vec;

pub use fabric::config::Mode;
use fabric::proto::{PageKey, PageReply, PageReq};

use crate::policy::{GroupId, Groups, PolicyName};

/// Page size (the one constant, re-exported for the data path).
pub use fabric::PAGE_SIZE as PAGE;

mod deleg;
mod frames;
mod inv;
mod policy;
mod promote;
mod reclaim;
mod slots;
mod types;

pub use promote::{Heat, Promotion, DEFAULT_WINDOW_NS as DEFAULT_PROMOTE_WINDOW_NS};
pub use types::{CacheStats, Hit, Installed, Slot};

/// The node's page cache state.
#[derive(Debug)]
pub struct NodeCache {
    mode: Mode,
    slots: slots::Slots,
    /// Frames handed to the directory with a READ / LOOKUP_LOCK, by page.
    inflight: KeyMap<u64>,
    /// Pages in `inflight` that this node's own truncate retired (the
    /// directory dropped them without a DIR_INV to us): their answer is
    /// not installed, the miss is retried ([`NodeCache::evict_local`]).
    voided: KeySet,
    /// The acks owed (deferred behind misses and size publications),
    /// those due, and the dirty bits of dropped mappings (`inv`).
    owed: inv::Owed,
    /// Pages marked dirty while mapped from a peer's frame (a superset:
    /// entries whose slot went or was cleaned are dropped by
    /// [`NodeCache::quiet`]); while any is dirty, a DIR_INV's ack carries
    /// news and the node may not sleep quietly.
    dirty_remote: KeySet,
    /// The frame pool: free frames and orphans.
    frames: frames::Frames,
    /// Owned pages (`Local`), charged to task groups and in the eviction
    /// policies' lists: reclaim victims come from their `evict_folios`
    /// (see `reclaim`).
    evict: Groups,
    stats: CacheStats,
    /// Hot-page promotion settings and the pages replicated here.
    replicas: promote::Replicas,
    /// The owned-page limit, the TTL, the pin of a write's pages and the
    /// free-frame marks reclaim keeps to (`policy`).
    limits: policy::Limits,
    /// Remote mappings and private copies held, counted as they come and
    /// go, and the remote mappings' limit (`slots`).
    held: slots::Held,
    /// The clock of the current accesses ([`NodeCache::set_clock`]).
    now: u64,
}

impl NodeCache {
    /// A cache whose pool is global frames `[first, end)`.
    pub fn new(mode: Mode, pool: (u64, u64), remote_limit: usize) -> NodeCache {
        NodeCache {
            mode,
            slots: slots::Slots::default(),
            inflight: KeyMap::default(),
            voided: KeySet::default(),
            owed: inv::Owed::default(),
            dirty_remote: KeySet::default(),
            frames: frames::Frames::new(pool),
            evict: Groups::new(PolicyName::Fifo),
            stats: CacheStats::default(),
            replicas: promote::Replicas::default(),
            limits: policy::Limits::default(),
            held: slots::Held {
                remote_limit,
                ..slots::Held::default()
            },
            now: 0,
        }
    }

    /// Keep free frames between these marks ahead of need.
    pub fn set_watermarks(&mut self, marks: crate::watermark::Watermarks) {
        self.limits.marks = marks;
    }

    /// Frames a miss could take now: free frames, fewer if the owned-page
    /// limit is nearer.
    pub fn room(&self) -> usize {
        let used = self.evict.len() + self.inflight.len();
        let free = self.frames.free_count();
        self.limits
            .owned
            .map_or(free, |l| free.min(l.saturating_sub(used)))
    }

    /// Owned pages to reclaim ahead of need now, with `coming` frames on
    /// their way back (evictions in flight): none while the room is at or
    /// above the low mark, else up to the high mark.
    /// With `going_on` (a round already started), up to the high mark
    /// whatever the room.
    pub fn reclaim_wanted(&self, coming: usize, going_on: bool) -> usize {
        let total = self
            .limits
            .owned
            .map_or(self.pool_frames(), |l| l.min(self.pool_frames()));
        if going_on {
            return self.limits.marks.to_high(total, self.room(), coming);
        }
        self.limits.marks.wanted(total, self.room(), coming)
    }

    /// `n` pages were reclaimed ahead of need.
    pub fn count_reclaimed_ahead(&mut self, n: usize) {
        self.stats.reclaims_ahead += n as u64;
    }

    /// A miss found no frame and waited for reclaim.
    pub fn count_waited_miss(&mut self) {
        self.stats.waited_misses += 1;
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

    /// Count a batch of page requests sent.
    pub fn count_batch(&mut self) {
        self.stats.page_batches += 1;
    }

    /// Free frames left in our pool.
    pub fn free_frames(&self) -> usize {
        self.frames.free_count()
    }

    /// Frames in our pool.
    pub fn pool_frames(&self) -> usize {
        self.frames.capacity()
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

    /// Private copies held (relaxed mode), without a walk of the slots.
    pub fn private_count(&self) -> usize {
        self.held.private
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
        self.frames.contains(gfn)
    }

    /// Look a page up for reading (counts hits).
    pub fn lookup(&mut self, key: &PageKey) -> Hit {
        match self.slots.get(key) {
            Some(Slot::Local { gfn, .. }) => {
                let gfn = *gfn;
                self.stats.hits_local += 1;
                self.evict.found(key);
                self.evict.accessed(*key);
                Hit::Local(gfn)
            }
            Some(Slot::Remote { gfn, .. }) => {
                let gfn = *gfn;
                self.evict.found(key);
                if self.remote_read(key, self.now) {
                    self.stats.hits_replica += 1;
                    Hit::Replica(gfn)
                } else {
                    self.stats.hits_remote += 1;
                    Hit::Remote(gfn)
                }
            }
            Some(Slot::Private(_)) => {
                self.stats.hits_private += 1;
                self.evict.found(key);
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
        if self
            .limits
            .owned
            .is_some_and(|l| self.evict.len() + self.inflight.len() >= l)
        {
            // At the configured limit: reclaim first, as for an empty pool.
            return None;
        }
        if self.evict.at_limit() {
            // The task's group is at its limit: reclaim from it first
            // (see `reclaim_target`).
            return None;
        }
        let frame = self.frames.take()?;
        self.inflight.insert(key, frame);
        self.evict.miss_started(key);
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
        let arg = fabric::trace::key_arg(key.ino, key.idx);
        fabric::trace::record(fabric::trace::Kind::Install, 0, 0, 0, arg);
        let group = self.evict.miss_ended(&key);
        // A DROP of the page went out before this miss: its answer came
        // first on the response ring.
        let dropped_dirty = self.owed.take_dropped(&key);
        if self.voided.remove(&key) && !matches!(reply, PageReply::Exclusive { .. }) {
            // Our truncate retired the page while its miss flew: the
            // directory forgot it, so an install would hold a page it
            // does not know (writes to it lost at the next teardown).
            self.frames.give(frame);
            self.stats.retries += 1;
            if self.owed.undefer(&key) {
                self.owed.due(key, dropped_dirty);
            }
            return Installed::Retry;
        }
        if !self.owed.undefer(&key) {
            return self.apply_answer(key, frame, reply, exported, group);
        }
        let (got, dirty) = match reply {
            PageReply::Shared { .. } => {
                self.frames.give(frame);
                self.stats.retries += 1;
                (Installed::Retry, false)
            }
            // E cannot have been invalidated (only owned pages are); the
            // notice was about an older copy.
            PageReply::Exclusive { .. } => {
                (self.apply_answer(key, frame, reply, exported, group), false)
            }
            _ => {
                let got = self.apply_answer(key, frame, reply, exported, group);
                let dirty = self.teardown(&key);
                match got {
                    Installed::Local(_) => (Installed::Retry, dirty),
                    got => (got, dirty),
                }
            }
        };
        self.owed.due(key, dirty || dropped_dirty);
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
        self.voided.remove(key);
        self.evict.miss_ended(key);
        if unanswered {
            self.frames.set_aside(frame, *key);
        } else {
            self.frames.give(frame);
        }
        let dropped_dirty = self.owed.take_dropped(key);
        if self.owed.undefer(key) {
            self.owed.due(*key, dropped_dirty);
        }
        true
    }

    /// Frames set aside for pages the directory may still place in them
    /// (see `orphans`): (frame, page).
    pub fn orphans(&self) -> impl Iterator<Item = (u64, PageKey)> + '_ {
        self.frames.orphans()
    }

    /// The page whose cancelled miss left frame `gfn` an orphan.
    pub fn orphan_key(&self, gfn: u64) -> Option<PageKey> {
        self.frames.orphan_key(gfn)
    }

    /// The directory let go of orphan frame `gfn` (a late E grant we gave
    /// back): it is free again.
    pub fn free_orphan(&mut self, gfn: u64) {
        self.frames.free_orphan(gfn);
    }

    fn apply_answer(
        &mut self,
        key: PageKey,
        frame: u64,
        reply: PageReply,
        exported: impl Fn(u64) -> bool,
        group: GroupId,
    ) -> Installed {
        match reply {
            PageReply::Owner { gfn } if self.frames.orphan_key(gfn) == Some(key) => {
                // A miss we gave up on was served after all: the page is
                // in that frame.
                self.frames.claim_orphan(gfn);
                self.frames.give(frame);
                self.install(key, Slot::Local { gfn, dirty: false }, group);
                self.evict.filled(key);
                self.stats.fills += 1;
                Installed::Local(gfn)
            }
            PageReply::Owner { gfn } if gfn == frame => {
                self.install(key, Slot::Local { gfn, dirty: false }, group);
                self.evict.filled(key);
                self.stats.fills += 1;
                Installed::Local(gfn)
            }
            PageReply::Exclusive { gfn } if gfn == frame => {
                self.replace(key, Slot::Reserved { gfn });
                Installed::Reserved(gfn)
            }
            PageReply::Shared { gfn, .. } if self.is_ours(gfn) => {
                // Our own frame cannot be a peer's: protocol error.
                self.frames.give(frame);
                self.stats.refused_maps += 1;
                Installed::Failed
            }
            PageReply::Shared { owner, gfn } => {
                self.frames.give(frame);
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
                        heat: Heat::default(),
                    },
                );
                self.held.remote += 1;
                self.evict.filled(key);
                self.stats.remote_maps += 1;
                Installed::Remote(gfn)
            }
            PageReply::Retry => {
                self.frames.give(frame);
                self.stats.retries += 1;
                Installed::Retry
            }
            _ => {
                self.frames.give(frame);
                Installed::Failed
            }
        }
    }

    /// Own `key` in `slot`, charged to `group`.
    fn install(&mut self, key: PageKey, slot: Slot, group: GroupId) {
        self.replace(key, slot);
        self.evict.added_for(key, group);
    }

    /// Set a slot, releasing what the old one held.
    fn replace(&mut self, key: PageKey, slot: Slot) {
        self.replicas.gone(&key);
        if let Some(old) = self.slots.insert(key, slot) {
            self.forget_slot(old);
        }
    }

    fn forget_slot(&mut self, old: Slot) {
        match old {
            Slot::Local { gfn, .. } | Slot::Reserved { gfn } | Slot::Reclaiming { gfn } => {
                self.frames.give(gfn)
            }
            Slot::Remote { .. } => self.held.remote -= 1,
            Slot::Private(_) => self.held.private -= 1,
        }
    }

    /// The full-page write into a reserved frame is done: E -> O (the
    /// UNLOCK was answered).
    pub fn unlocked(&mut self, key: PageKey) {
        if let Some(Slot::Reserved { gfn }) = self.slots.get(&key).cloned() {
            self.slots.remove(&key);
            let g = self.evict.current();
            self.install(key, Slot::Local { gfn, dirty: true }, g);
        }
    }

    /// Record a write to a page we own or map (strong mode writes the
    /// owner's frame).
    pub fn mark_dirty(&mut self, key: &PageKey) {
        match self.slots.get_mut(key) {
            Some(Slot::Local { dirty, .. }) => *dirty = true,
            Some(Slot::Remote { dirty, .. }) => {
                *dirty = true;
                self.dirty_remote.insert(*key);
            }
            _ => {}
        }
    }

    /// May a DIR_INV be taken as acknowledged while this node sleeps
    /// (`fabric::doorbell::SLEEP_QUIET`)? Only if its ack would carry no
    /// news and nothing in flight could race it: no READ / LOOKUP_LOCK
    /// unanswered (a DIR_INV met before its answer is acked only once the
    /// answer is applied), no ack owed, no dirty mapping dropped with its
    /// DROP unanswered, and no page dirtied through a peer's frame (the
    /// ack's dirty bit is what gets that page written back). Checks at
    /// most 32 remembered dirty mappings per call (stale ones go).
    pub fn quiet(&mut self) -> bool {
        if !(self.inflight.is_empty() && self.owed.none()) {
            return false;
        }
        if self.dirty_remote.is_empty() {
            return true;
        }
        let look: Vec<PageKey> = self.dirty_remote.iter().take(32).copied().collect();
        for k in look {
            if !matches!(self.slots.get(&k), Some(Slot::Remote { dirty: true, .. })) {
                self.dirty_remote.remove(&k);
            }
        }
        self.dirty_remote.is_empty()
    }

    /// Relaxed mode: replace a remote mapping (or nothing) with a private
    /// copy holding `data`. Returns the remote key to DROP, if we had one.
    pub fn make_private(&mut self, key: PageKey, data: Box<[u8; PAGE]>) -> bool {
        let had_remote = matches!(self.slots.get(&key), Some(Slot::Remote { .. }));
        self.replicas.gone(&key);
        match self.slots.insert(key, Slot::Private(data)) {
            // Our frame being torn down: sharers may still map it until
            // the directory has their acks, so it is not reused before the
            // directory lets go of it (its DIR_INV, or the answer to our
            // INV: see `orphans`).
            Some(Slot::Reclaiming { gfn }) => {
                self.frames.set_aside(gfn, key);
            }
            Some(old) => self.forget_slot(old),
            None => {}
        }
        self.held.private += 1;
        self.held.private_made += 1;
        had_remote
    }

    /// Private copies made so far (a counter that only grows).
    pub fn private_made(&self) -> u64 {
        self.held.private_made
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
            self.held.private -= 1;
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

    /// Forget everything (the directory is gone or we rejoin with a new
    /// epoch): no mapping survives, every frame is free again.
    pub fn forget_all(&mut self) {
        self.slots.clear();
        self.inflight.clear();
        self.voided.clear();
        self.owed = inv::Owed::default();
        self.dirty_remote.clear();
        self.evict.reset();
        self.replicas.clear();
        self.held.remote = 0;
        self.held.private = 0;
        self.frames.reset();
    }
}

#[cfg(test)]
mod tests;
