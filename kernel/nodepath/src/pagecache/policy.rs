//! The cache's eviction controls: which policy orders its owned pages
//! (`cache policy`), the owned-page limit and TTL (`cache config`), task
//! groups with their own policies and limits (`--group`, `cache groups`),
//! the group and clock stamped on accesses, and the sharer counts the
//! directory reports for our pages.

use alloc::vec::Vec;

use fabric::proto::PageKey;

use super::{NodeCache, Slot};
use crate::policy::{GroupConf, GroupError, GroupId, GroupInfo, PolicyName, PolicyStats};

/// Smallest owned-page limit (`cache config limit=`, which refuses less):
/// two batches, so a batch of misses never has to reclaim its own pages.
pub const MIN_LIMIT: usize = osapi::cache::MIN_CACHE_LIMIT as usize;

/// What reclaim keeps the cache within.
#[derive(Debug)]
pub(super) struct Limits {
    /// Most owned pages (plus misses in flight) kept, below the pool
    /// (`cache config limit=`); `None`: the pool is the limit.
    pub(super) owned: Option<usize>,
    /// Owned pages idle longer than this (ns) are reclaimed by
    /// [`NodeCache::expired`] (`cache config ttl=`); 0: never.
    pub(super) ttl_ns: u64,
    /// Pages `[first, end)` of an inode that reclaim must not take: a
    /// write's chunk whose new size is not published yet (pages past the
    /// published end of file are not written back, so reclaiming them
    /// would lose the data; with FIFO they were never the oldest, with
    /// other policies they may be the first candidates).
    pub(super) pinned: Option<(u64, u64, u64)>,
    /// Free frames kept between these marks by reclaim ahead of need
    /// (`crate::watermark`).
    pub(super) marks: crate::watermark::Watermarks,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            owned: None,
            ttl_ns: 0,
            pinned: None,
            marks: crate::watermark::Watermarks::OFF,
        }
    }
}

impl NodeCache {
    /// The eviction policy running.
    pub fn policy(&self) -> PolicyName {
        self.evict.name()
    }

    /// Switch the eviction policy (at run time: every owned page stays,
    /// only the eviction order is rebuilt).
    pub fn set_policy(&mut self, name: PolicyName) {
        if name != self.evict.name() {
            self.evict.set_policy(name);
        }
    }

    /// The policy's counters.
    pub fn policy_stats(&self) -> PolicyStats {
        self.evict.stats()
    }

    /// Owned pages tracked by the policy.
    pub fn owned_pages(&self) -> usize {
        self.evict.len()
    }

    /// Every page in the policies' lists (for checks).
    pub fn listed_pages(&self) -> Vec<PageKey> {
        self.evict.all_keys()
    }

    /// The sharer count of our `key` as the directory last reported it.
    pub fn sharers_of(&self, key: &PageKey) -> u32 {
        self.evict.sharers_of(key)
    }

    /// The group `key` is charged to.
    pub fn group_of(&self, key: &PageKey) -> Option<GroupId> {
        self.evict.group_of(key)
    }

    /// Make or change a task group (its own policy and page limit; a
    /// limit below [`MIN_LIMIT`] is raised to it).
    pub fn configure_group(&mut self, conf: &GroupConf) -> Result<GroupId, GroupError> {
        let mut conf = conf.clone();
        conf.limit = conf.limit.map(|l| l.max(MIN_LIMIT));
        self.evict.configure(&conf)
    }

    /// The group named `name`, made if missing.
    pub fn ensure_group(&mut self, name: &str) -> Result<GroupId, GroupError> {
        self.evict.ensure(name)
    }

    /// Every group with its pages and counters.
    pub fn groups(&self) -> Vec<GroupInfo> {
        self.evict.info()
    }

    /// Every group's settings.
    pub fn group_confs(&self) -> Vec<GroupConf> {
        self.evict.confs()
    }

    /// The group of the task doing the next accesses and misses.
    pub fn group(&self) -> GroupId {
        self.evict.current()
    }

    /// The owned-page limit.
    pub fn limit(&self) -> Option<usize> {
        self.limits.owned
    }

    /// Set the owned-page limit (`None`: the pool); below [`MIN_LIMIT`]
    /// is raised to it.
    pub fn set_limit(&mut self, limit: Option<usize>) {
        self.limits.owned = limit.map(|l| l.max(MIN_LIMIT));
    }

    /// Owned pages above the limit (reclaim them).
    pub fn over_owned_limit(&self) -> usize {
        self.limits.owned.map_or(0, |l| {
            (self.evict.len() + self.inflight.len()).saturating_sub(l)
        })
    }

    /// The idle time after which owned pages are reclaimed (ns; 0: never).
    pub fn ttl_ns(&self) -> u64 {
        self.limits.ttl_ns
    }

    /// Set the TTL (ns; 0: never).
    pub fn set_ttl_ns(&mut self, ttl: u64) {
        self.limits.ttl_ns = ttl;
    }

    /// Keep reclaim off pages `[first, end)` of `ino` (a write's chunk
    /// until its size is published); `None` unpins. DIR_INVs held behind
    /// the pin (see [`NodeCache::dir_inv`]) become due acks.
    pub fn pin(&mut self, range: Option<(u64, u64, u64)>) {
        self.limits.pinned = range;
        self.release_held();
    }

    /// The group of the task doing the next accesses and misses (an
    /// unknown id is `default`): its misses are charged to it, its
    /// limit applies, GET-SCAN sees it.
    pub fn set_group(&mut self, group: GroupId) {
        self.evict.set_current(group);
    }

    /// The time (ns) stamped on the next accesses.
    pub fn set_clock(&mut self, now: u64) {
        self.now = now;
        self.evict.set_clock(now);
    }

    /// Owned pages idle for longer than the TTL at `now`, as victims
    /// (`Reclaiming`, with their dirty bits); none with no TTL.
    pub fn expired(&mut self, now: u64) -> Vec<(PageKey, bool)> {
        if self.limits.ttl_ns == 0 {
            return Vec::new();
        }
        let keys = self.evict.expired(now, self.limits.ttl_ns);
        keys.iter()
            .filter_map(|k| self.take_victim(k).map(|d| (*k, d)))
            .collect()
    }

    /// The directory reports `n` nodes mapping our page `key` (a rise is
    /// a remote access). Ignored for pages we do not own.
    pub fn sharers(&mut self, key: PageKey, n: u32) {
        if !matches!(self.slots.get(&key), Some(Slot::Local { .. })) {
            return;
        }
        let old = self.evict.sharers_of(&key);
        self.evict.sharers(key, n, n > old);
    }
}
