//! Eviction policies of the node's owned pages, with cache_ext's interface
//! (seed 004: "cache_ext: Customizing the Page Cache with eBPF", and its
//! public `policies/` folder, read for the semantics, not copied).
//!
//! A policy implements the hooks [`Policy::policy_init`],
//! [`Policy::folio_added`], [`Policy::folio_accessed`],
//! [`Policy::folio_removed`] and [`Policy::evict_folios`] over the
//! eviction [`Lists`] the cache owns. `evict_folios` proposes up to
//! [`MAX_CANDIDATES`] pages per call in an [`EvictCtx`]; the cache
//! ([`Evictor`], driven by `NodeCache::pick_victims`) validates each one
//! and may refuse it (a page not owned here, in flight, reserved, already
//! being reclaimed): a refused page moves to the tail of its list and is
//! skipped. If a policy proposes nothing usable twice in a row, the cache
//! falls back to its lists in order, so reclaim always frees what it can.
//!
//! One file per policy: `fifo` (the default, install order), `recency`
//! (`lru` and `mru`: one policy, evicting from either end), `clock`,
//! `lfu`, `s3fifo`, `sieve`, `arc`, `getscan`, and `cluster` (onecopy's
//! own: evicts pages mapped by many nodes last, with the sharer counts the
//! directory reports to the owner).

use alloc::boxed::Box;
use alloc::vec::Vec;

pub use fabric::config::PolicyName;
use fabric::proto::PageKey;

mod arc;
mod clock;
mod cluster;
mod evictor;
mod fifo;
mod getscan;
mod ghost;
mod groups;
mod lfu;
mod lists;
mod recency;
mod s3fifo;
mod sieve;

#[cfg(test)]
mod testkit;
#[cfg(test)]
mod tests;

pub use evictor::{Evictor, PolicyStats};
pub use ghost::Ghost;
pub use groups::{
    valid_name, GroupConf, GroupError, GroupId, GroupInfo, GroupStats, Groups, Target,
    DEFAULT_GROUP, DEFAULT_NAME, MAX_GROUPS, MAX_NAME,
};
pub use lists::{From, Iter, ListError, ListId, Lists, View};

/// Most candidates one `evict_folios` call proposes (cache_ext's array).
pub const MAX_CANDIDATES: usize = 32;

/// What the cache tells a hook about a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Folio {
    /// The page.
    pub key: PageKey,
    /// Group of the task touching it (the cgroup analogue, see
    /// [`Groups`]); 0 when the task is in the group owning the lists.
    pub group: u32,
    /// The access came from another node (the directory reported a new
    /// mapping of our page), not from a read here.
    pub remote: bool,
}

impl Folio {
    /// A local access by group 0.
    pub fn local(key: PageKey) -> Folio {
        Folio {
            key,
            group: 0,
            remote: false,
        }
    }
}

/// One `evict_folios` call: how many candidates the cache asks for (at
/// most [`MAX_CANDIDATES`]) and the ones proposed.
#[derive(Debug)]
pub struct EvictCtx {
    requested: usize,
    candidates: Vec<PageKey>,
}

impl EvictCtx {
    /// Ask for `n` candidates (capped at [`MAX_CANDIDATES`]).
    pub fn new(n: usize) -> EvictCtx {
        let requested = n.min(MAX_CANDIDATES);
        EvictCtx {
            requested,
            candidates: Vec::with_capacity(requested),
        }
    }

    /// Candidates asked for.
    pub fn requested(&self) -> usize {
        self.requested
    }

    /// Candidates still wanted.
    pub fn remaining(&self) -> usize {
        self.requested - self.candidates.len()
    }

    /// Enough proposed.
    pub fn full(&self) -> bool {
        self.candidates.len() >= self.requested
    }

    /// Propose `key`; false if full or proposed already.
    pub fn propose(&mut self, key: PageKey) -> bool {
        if self.full() || self.candidates.contains(&key) {
            return false;
        }
        self.candidates.push(key);
        true
    }

    /// The proposals, in order.
    pub fn candidates(&self) -> &[PageKey] {
        &self.candidates
    }
}

/// A page-cache eviction policy (cache_ext's `struct cache_ext_ops`).
///
/// The hooks get the cache's [`Lists`]; a policy creates its lists in
/// `policy_init` and must keep every page it was given in `folio_added`
/// in one of them until `folio_removed` (the cache takes a removed page
/// out of its list after the hook).
pub trait Policy: core::fmt::Debug + Send {
    /// Which policy this is.
    fn name(&self) -> PolicyName;
    /// Create the lists (called once, on empty lists).
    fn policy_init(&mut self, lists: &mut Lists);
    /// A page became ours (filled, or committed after a full-page write).
    fn folio_added(&mut self, lists: &mut Lists, folio: &Folio);
    /// A page of ours was read or written here, or newly mapped by a peer.
    fn folio_accessed(&mut self, lists: &mut Lists, folio: &Folio);
    /// A page of ours is going (reclaimed, evicted with its file, or the
    /// cache was reset); it is still in its list during the call.
    fn folio_removed(&mut self, lists: &mut Lists, key: &PageKey);
    /// Propose up to `ctx.requested()` pages to evict.
    fn evict_folios(&mut self, lists: &mut Lists, ctx: &mut EvictCtx);
}

/// A fresh policy of kind `name`.
pub fn build(name: PolicyName) -> Box<dyn Policy> {
    match name {
        PolicyName::Fifo => Box::new(fifo::Fifo::default()),
        PolicyName::Lru => Box::new(recency::Recency::lru()),
        PolicyName::Clock => Box::new(clock::Clock::default()),
        PolicyName::Lfu => Box::new(lfu::Lfu::default()),
        PolicyName::Mru => Box::new(recency::Recency::mru()),
        PolicyName::S3Fifo => Box::new(s3fifo::S3Fifo::default()),
        PolicyName::Sieve => Box::new(sieve::Sieve::default()),
        PolicyName::Arc => Box::new(arc::Arc::default()),
        PolicyName::GetScan => Box::new(getscan::GetScan::default()),
        PolicyName::Cluster => Box::new(cluster::Cluster::default()),
    }
}
