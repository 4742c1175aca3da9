//! Hot-page promotion (the CXL-pools slides' DDR/CXL tiering applied to
//! the single copy).
//!
//! A remote mapping (S) read more than `threshold` times within one
//! window gets a read-only replica in this node's own memory (its "DDR",
//! against the shared region's CXL-like tier); reads then copy from the
//! replica and skip the emulated CXL latency (`cxl_ns`). The node stays a
//! sharer at the directory, so the protocol invalidates the replica like
//! any sharer: a DIR_INV (owner reclaim, file eviction) or a DROP of the
//! mapping tears it down with the mapping. A write to the page makes a
//! private copy (the replica goes with the mapping). An open of the file
//! drops the file's replicas ([`NodeCache::drop_replicas`]): relaxed mode
//! is close-to-open, and what a writer closed elsewhere is in the owner's
//! frame, which the next reads map again. A replica not read for a whole
//! window is dropped (demotion, [`NodeCache::demote_cold`]). At most one
//! pool's worth of pages is replicated.
//!
//! Strong mode promotes through the directory (PROMOTE, granted only while
//! no store into the frame is announced; `dirsvc::server::replicas`), and
//! a store into a replicated frame first has the directory revoke every
//! replica (UNPROTECT, REVOKE: [`NodeCache::revoke_replica`]), so a
//! replica never misses a write that completed. An open does not drop
//! strong replicas (nothing to catch up on).

use alloc::boxed::Box;
use alloc::collections::BTreeSet;
use alloc::vec::Vec;

use fabric::proto::PageKey;

use super::{Mode, NodeCache, Slot, PAGE};

/// A remote mapping's promotion state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Heat {
    /// Reads in the current window.
    hits: u32,
    /// Start of the current window (ns).
    window_start: u64,
    /// Last read of the replica (ns).
    last_hit: u64,
    /// The replica, once promoted.
    replica: Option<Box<[u8; PAGE]>>,
}

impl Heat {
    /// Is the page replicated here?
    pub fn replicated(&self) -> bool {
        self.replica.is_some()
    }
}

/// Promotion settings (`cache config promote= promote_window_ms=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Promotion {
    /// Reads of a peer's page within a window that promote it (more
    /// than this many); 0: promotion off.
    pub threshold: u32,
    /// The window (ns); also how long an unread replica lives.
    pub window_ns: u64,
}

/// Default window: 100 ms.
pub const DEFAULT_WINDOW_NS: u64 = 100_000_000;

impl Default for Promotion {
    fn default() -> Self {
        Promotion {
            threshold: 0,
            window_ns: DEFAULT_WINDOW_NS,
        }
    }
}

/// Replicated pages, to find them without a walk of every slot.
#[derive(Debug, Default)]
pub(super) struct Replicas {
    /// Hot-page promotion settings.
    pub(super) settings: Promotion,
    keys: BTreeSet<PageKey>,
}

impl Replicas {
    /// A slot left the cache (or changed): forget its replica.
    pub(super) fn gone(&mut self, key: &PageKey) {
        self.keys.remove(key);
    }

    pub(super) fn clear(&mut self) {
        self.keys.clear();
    }
}

impl NodeCache {
    /// The promotion settings.
    pub fn promotion(&self) -> Promotion {
        self.replicas.settings
    }

    /// Change the promotion settings (threshold 0 turns promotion off;
    /// replicas made so far stay until demoted).
    pub fn set_promotion(&mut self, p: Promotion) {
        self.replicas.settings = Promotion {
            threshold: p.threshold,
            window_ns: p.window_ns.max(1),
        };
    }

    /// A read of `key`'s remote mapping at `now` (from `lookup`): true if
    /// it was served by the replica.
    pub(super) fn remote_read(&mut self, key: &PageKey, now: u64) -> bool {
        let window = self.replicas.settings.window_ns;
        let on = self.replicas.settings.threshold > 0;
        let Some(Slot::Remote { heat, .. }) = self.slots.get_mut_keep_claim(key) else {
            return false;
        };
        if heat.replica.is_some() {
            heat.last_hit = now;
            return true;
        }
        if on {
            if now.saturating_sub(heat.window_start) > window {
                heat.window_start = now;
                heat.hits = 0;
            }
            heat.hits = heat.hits.saturating_add(1);
        }
        false
    }

    /// Should the caller copy `key`'s peer frame into a replica now (it
    /// was read more than the threshold within the window, and the
    /// replicas are below their bound)?
    pub fn wants_replica(&self, key: &PageKey) -> bool {
        let p = self.replicas.settings;
        p.threshold > 0
            && self.mode != Mode::Private
            && self.replicas.keys.len() < self.pool_frames()
            && matches!(
                self.slots.get(key),
                Some(Slot::Remote { heat, .. }) if heat.replica.is_none() && heat.hits > p.threshold
            )
    }

    /// Keep `data` (the peer frame's bytes, just copied) as `key`'s
    /// replica. False if the page is no longer a remote mapping here.
    pub fn set_replica(&mut self, key: &PageKey, data: Box<[u8; PAGE]>) -> bool {
        let now = self.now;
        let Some(Slot::Remote { heat, .. }) = self.slots.get_mut_keep_claim(key) else {
            return false;
        };
        if heat.replica.is_some() {
            return false;
        }
        heat.replica = Some(data);
        heat.last_hit = now;
        self.replicas.keys.insert(*key);
        self.stats.promotions += 1;
        true
    }

    /// The directory refused to promote `key` (strong mode): start its
    /// count again, so it asks again a window's worth of reads later at
    /// the earliest.
    pub fn promote_refused(&mut self, key: &PageKey) {
        if let Some(Slot::Remote { heat, .. }) = self.slots.get_mut_keep_claim(key) {
            heat.hits = 0;
            heat.window_start = self.now;
        }
        self.stats.promotions_refused += 1;
    }

    /// Drop `key`'s replica because a write to the page is coming (a
    /// REVOKE from the directory, or our own store): the mapping stays.
    /// True if there was one.
    pub fn revoke_replica(&mut self, key: &PageKey) -> bool {
        let had = self.replica(key).is_some();
        if had {
            self.replicas.keys.remove(key);
            if let Some(Slot::Remote { heat, .. }) = self.slots.get_mut_keep_claim(key) {
                heat.replica = None;
                heat.hits = 0;
            }
            self.stats.revocations += 1;
        }
        had
    }

    /// `key`'s replica, if it has one.
    pub fn replica(&self, key: &PageKey) -> Option<&[u8; PAGE]> {
        match self.slots.get(key) {
            Some(Slot::Remote { heat, .. }) => heat.replica.as_deref(),
            _ => None,
        }
    }

    /// Pages replicated here.
    pub fn replica_pages(&self) -> usize {
        self.replicas.keys.len()
    }

    /// Drop every replica of `ino` (an open of the file: close-to-open).
    /// Returns how many went.
    pub fn drop_replicas(&mut self, ino: u64) -> usize {
        let keys: Vec<PageKey> = self
            .replicas
            .keys
            .range(PageKey { ino, idx: 0 }..=PageKey { ino, idx: u64::MAX })
            .copied()
            .collect();
        for k in &keys {
            self.demote(k);
        }
        keys.len()
    }

    /// Drop the replicas not read for a whole window at `now`. Returns how
    /// many went.
    pub fn demote_cold(&mut self, now: u64) -> usize {
        let window = self.replicas.settings.window_ns;
        let cold: Vec<PageKey> = self
            .replicas
            .keys
            .iter()
            .filter(|k| {
                matches!(self.slots.get(k), Some(Slot::Remote { heat, .. })
                    if now.saturating_sub(heat.last_hit) > window)
            })
            .copied()
            .collect();
        for k in &cold {
            self.demote(k);
        }
        cold.len()
    }

    /// Drop `key`'s replica; the mapping stays (its reads go to the peer's
    /// frame again, and count towards a new promotion).
    fn demote(&mut self, key: &PageKey) {
        self.replicas.keys.remove(key);
        if let Some(Slot::Remote { heat, .. }) = self.slots.get_mut_keep_claim(key) {
            if heat.replica.take().is_some() {
                heat.hits = 0;
                self.stats.demotions += 1;
            }
        }
    }
}
