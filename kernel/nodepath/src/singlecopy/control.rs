//! The eviction controls of the single-copy cache (`cache policy`,
//! `cache config`): kept here across rejoins and applied to every new
//! cache, and the reclaim they drive outside misses (pages idle past the
//! TTL, owned pages above a lowered limit).

use alloc::vec::Vec;

use fabric::config::PolicyName;
use fabric::proto::{Errno, PageKey};

use super::{ScState, BATCH};
use crate::env::Env;
use crate::link::Link;
use crate::pagecache::{NodeCache, Promotion};

/// What `cache policy` and `cache config` set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Controls {
    /// Eviction policy.
    pub policy: PolicyName,
    /// Most owned pages (`None`: the pool).
    pub limit: Option<usize>,
    /// Owned pages idle longer than this are reclaimed (ns; 0: never).
    pub ttl_ns: u64,
    /// Hot-page promotion (relaxed mode; threshold 0: off).
    pub promotion: Promotion,
}

impl Controls {
    /// Apply to a cache.
    pub(super) fn apply(&self, c: &mut NodeCache) {
        c.set_policy(self.policy);
        c.set_limit(self.limit);
        c.set_ttl_ns(self.ttl_ns);
        c.set_promotion(self.promotion);
    }
}

impl ScState {
    /// Keep reclaim off a write's unpublished pages (see
    /// `NodeCache::pin`).
    pub(super) fn pin<E: Env>(&mut self, env: &E, range: Option<(u64, u64, u64)>) {
        if let Some(c) = self.coh.as_mut() {
            c.cache.pin(range);
            // DIR_INVs held behind the last pin are acked now.
            c.send_due_acks(env);
        }
    }

    /// The eviction controls.
    pub fn controls(&self) -> Controls {
        let mut k = self.controls;
        // The cache rounds a small limit up: show what applies.
        if let Some(c) = self.coh.as_ref() {
            k.limit = c.cache.limit();
        }
        k
    }

    /// Set the eviction controls (at run time: the cache keeps its pages;
    /// pages above a lowered limit go at the next [`ScState::expire`]).
    pub fn set_controls(&mut self, k: Controls) {
        self.controls = k;
        if let Some(c) = self.coh.as_mut() {
            k.apply(&mut c.cache);
        }
    }

    /// Reclaim what the controls say must go now: owned pages idle past
    /// the TTL, pages above the node's limit and above groups' limits
    /// (idle loop, `cache config`); and drop cold replicas (promotion).
    /// Returns the pages invalidated.
    pub fn expire<E: Env>(&mut self, link: &mut Link<E>) -> Result<usize, Errno> {
        let now = link.env.now_ns();
        if let Some(c) = self.cache() {
            c.demote_cold(now);
        }
        let mut done = 0;
        let expired: Vec<(PageKey, bool)> =
            self.cache().map(|c| c.expired(now)).unwrap_or_default();
        let mut chunks = expired.chunks(BATCH);
        while let Some(chunk) = chunks.next() {
            if let Err(e) = self.invalidate_victims(link, chunk.to_vec()) {
                // Give the victims not sent back to the cache (as dirty:
                // at worst one write-back too many).
                if let Some(c) = self.cache() {
                    for (k, _) in chunks.flatten() {
                        c.reclaim_failed(k);
                    }
                }
                return Err(e);
            }
            done += chunk.len();
        }
        loop {
            let over = self.cache().map_or(0, |c| c.over_owned_limit());
            if over == 0 {
                break;
            }
            let n = self.reclaim(link, over.min(BATCH))?;
            if n == 0 {
                break;
            }
            done += n;
        }
        done += self.reclaim_groups(link)?;
        Ok(done)
    }
}
