//! The cache's types: slots, lookup results, answers applied, counters.

use alloc::boxed::Box;

use super::promote::Heat;
use super::PAGE;

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
        /// Reads counted for promotion, and the replica once promoted
        /// (relaxed mode, see `promote`).
        heat: Heat,
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
    /// A peer's frame `gfn`, replicated here: read the replica
    /// ([`NodeCache::replica`](super::NodeCache::replica)).
    Replica(u64),
    /// Our private copy (read it with [`NodeCache::private`](super::NodeCache::private)).
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
    /// Page reads served from replicas of peers' pages (promotion).
    pub hits_replica: u64,
    /// Peers' pages replicated here (hot-page promotions).
    pub promotions: u64,
    /// Replicas dropped while their mapping stayed (cold, or an open of
    /// the file).
    pub demotions: u64,
    /// Strong mode: replicas dropped because a write to the page was
    /// coming (the directory's REVOKE, or this node's own store).
    pub revocations: u64,
    /// Strong mode: promotions the directory refused.
    pub promotions_refused: u64,
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
    /// INV requests they went in: one per contiguous run of a file's
    /// pages (a [`fabric::proto::PageRun`]), not one per page.
    pub inv_entries: u64,
    /// DIR_INV notifications received.
    pub invs_received: u64,
    /// Remote mappings we dropped.
    pub drops: u64,
    /// Pages written back (by request of this node).
    pub writebacks: u64,
    /// Mappings refused because the frame was not exported.
    pub refused_maps: u64,
    /// Batches of page requests sent (round trips to the directory).
    pub page_batches: u64,
    /// Owned pages reclaimed ahead of need (free frames under the low
    /// mark, see `crate::watermark`).
    pub reclaims_ahead: u64,
    /// Misses that found no frame and waited for reclaim.
    pub waited_misses: u64,
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
