//! The cache's side of the policy interface: it owns the lists and the
//! policy, calls the hooks, asks for candidates, and keeps what the hooks
//! do not see (the sharer counts, access times, the counters). The node
//! cache validates the candidates (`NodeCache::pick_victims`); a refused
//! one goes to the tail of its list.

use alloc::boxed::Box;
use alloc::vec::Vec;

use fabric::proto::PageKey;

use super::{build, EvictCtx, Folio, Lists, Policy, PolicyName};

/// Counters for `cache stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PolicyStats {
    /// Candidates the policy proposed.
    pub proposed: u64,
    /// Candidates the cache refused (not evictable here).
    pub refused: u64,
    /// Pages taken in list order because the policy proposed nothing
    /// usable.
    pub fallbacks: u64,
    /// Sharer-count reports from the directory applied.
    pub sharer_reports: u64,
}

/// Lists + policy + clock.
#[derive(Debug)]
pub struct Evictor {
    lists: Lists,
    policy: Box<dyn Policy>,
    stats: PolicyStats,
    group: u32,
    now: u64,
}

impl Evictor {
    /// An empty cache run by `name`.
    pub fn new(name: PolicyName) -> Evictor {
        let mut lists = Lists::new();
        let mut policy = build(name);
        policy.policy_init(&mut lists);
        Evictor {
            lists,
            policy,
            stats: PolicyStats::default(),
            group: 0,
            now: 0,
        }
    }

    /// The policy running.
    pub fn name(&self) -> PolicyName {
        self.policy.name()
    }

    /// Counters.
    pub fn stats(&self) -> PolicyStats {
        self.stats
    }

    /// The lists (read-only, for checks).
    pub fn lists(&self) -> &Lists {
        &self.lists
    }

    /// Pages tracked.
    pub fn len(&self) -> usize {
        self.lists.total()
    }

    /// None tracked.
    pub fn is_empty(&self) -> bool {
        self.lists.total() == 0
    }

    /// Is `key` tracked?
    pub fn contains(&self, key: &PageKey) -> bool {
        self.lists.contains(key)
    }

    /// The group of the task doing the next accesses.
    pub fn set_group(&mut self, group: u32) {
        self.group = group;
    }

    /// The clock (nanoseconds) stamped on the next accesses.
    pub fn set_clock(&mut self, now: u64) {
        self.now = now;
    }

    fn folio(&self, key: PageKey, remote: bool) -> Folio {
        Folio {
            key,
            group: self.group,
            remote,
        }
    }

    /// Switch to another policy at run time: a fresh policy gets every
    /// tracked page again, in the old lists' order (a list at a time).
    /// Only eviction metadata changes; no page moves.
    pub fn set_policy(&mut self, name: PolicyName) {
        let pages: Vec<_> = (self.lists.all_keys().into_iter())
            .map(|k| (k, self.lists.sharers(&k), self.lists.atime(&k)))
            .collect();
        self.lists = Lists::new();
        self.policy = build(name);
        self.policy.policy_init(&mut self.lists);
        for (k, sharers, atime) in pages {
            self.add_tracked(k, sharers, atime.unwrap_or(self.now));
        }
    }

    /// Take over `key` from other lists, with what the cache knew of it.
    pub fn adopt(&mut self, key: PageKey, sharers: u32, atime: u64) {
        if !self.lists.contains(&key) {
            self.add_tracked(key, sharers, atime);
        }
    }

    fn add_tracked(&mut self, key: PageKey, sharers: u32, atime: u64) {
        let f = self.folio(key, false);
        self.policy.folio_added(&mut self.lists, &f);
        if !self.lists.contains(&key) {
            // A policy that dropped the page would hide it from reclaim:
            // keep it in the first list.
            log::warn!("policy {} did not list {key:?}", self.name().as_str());
            let _ = self.lists.list_add(0, key, true);
        }
        self.lists.set_sharers(&key, sharers);
        self.lists.touch(&key, atime);
    }

    /// `key` became ours.
    pub fn added(&mut self, key: PageKey) {
        if self.lists.contains(&key) {
            return;
        }
        self.add_tracked(key, 0, self.now);
    }

    /// `key` was read or written here.
    pub fn accessed(&mut self, key: PageKey) {
        if !self.lists.contains(&key) {
            return;
        }
        self.lists.touch(&key, self.now);
        let f = self.folio(key, false);
        self.policy.folio_accessed(&mut self.lists, &f);
    }

    /// The directory reports `n` nodes mapping our `key`; `grew`: a new
    /// one mapped it (a remote access the cache can see).
    pub fn sharers(&mut self, key: PageKey, n: u32, grew: bool) {
        if !self.lists.contains(&key) {
            return;
        }
        self.stats.sharer_reports += 1;
        self.lists.set_sharers(&key, n);
        if grew {
            self.lists.touch(&key, self.now);
            let f = self.folio(key, true);
            self.policy.folio_accessed(&mut self.lists, &f);
        }
    }

    /// `key` is no longer ours (or no longer evictable).
    pub fn removed(&mut self, key: &PageKey) {
        if !self.lists.contains(key) {
            return;
        }
        self.policy.folio_removed(&mut self.lists, key);
        let _ = self.lists.list_del(key);
    }

    /// Forget every page (the policy starts over).
    pub fn reset(&mut self) {
        let name = self.name();
        self.lists = Lists::new();
        self.policy = build(name);
        self.policy.policy_init(&mut self.lists);
    }

    /// One `evict_folios` call for up to `n` candidates.
    pub fn propose(&mut self, n: usize) -> Vec<PageKey> {
        let mut ctx = EvictCtx::new(n);
        self.policy.evict_folios(&mut self.lists, &mut ctx);
        self.stats.proposed += ctx.candidates().len() as u64;
        ctx.candidates().to_vec()
    }

    /// The cache refused candidate `key`: it goes to the tail of its list.
    pub fn refused(&mut self, key: &PageKey) {
        self.stats.refused += 1;
        if let Some(l) = self.lists.list_of(key) {
            let _ = self.lists.list_move(l, key, true);
        }
    }

    /// The policy proposed nothing usable: up to `n` tracked pages that
    /// `ok` accepts, list by list from the head.
    pub fn fallback(&mut self, n: usize, ok: impl Fn(&PageKey) -> bool) -> Vec<PageKey> {
        let out: Vec<PageKey> = (self.lists.all_keys().into_iter())
            .filter(|k| ok(k))
            .take(n)
            .collect();
        self.stats.fallbacks += out.len() as u64;
        out
    }

    /// Pages whose last access is more than `ttl` nanoseconds before `now`.
    pub fn expired(&self, now: u64, ttl: u64) -> Vec<PageKey> {
        (self.lists.all_keys().into_iter())
            .filter(|k| {
                self.lists
                    .atime(k)
                    .is_some_and(|t| now.saturating_sub(t) > ttl)
            })
            .collect()
    }
}
