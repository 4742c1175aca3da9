//! The Invalidation Manager, the node's side: all of DPC's invalidation
//! traffic between this node's cache and the directory.
//!
//! * In: a DIR_INV (one page) or an INV_RANGE (a file's teardown) from
//!   the notify ring tears the pages down here ([`NodeCache::dir_inv`],
//!   [`NodeCache::range_inv`]), unmaps them from the mmap windows (with
//!   the TLB flush) and acknowledges on the ack ring; an ack that must
//!   wait (the page's miss in flight, or under this node's own size
//!   publication) is owed and sent once due ([`Coherence::send_due_acks`]).
//!   The notices are taken in [`Session::service`](crate::link::Session::service)
//!   (`session.rs`), called in every wait and at idle.
//! * Out: reclaim invalidates the eviction policy's victims as INV runs,
//!   one entry per contiguous run of a file's pages (BATCH_INV): waited
//!   for (`reclaim.rs`), or in the background between the free-frame
//!   marks (`ahead.rs`).
//! * Lazy: [`Coherence::quiet`] says when this node may sleep with its
//!   DIR_INVs taken as acknowledged by the directory without waking it.
//!
//! The per-page bookkeeping (slots torn down, acks owed) is the cache's
//! own, in `pagecache/inv.rs`.

mod ahead;
mod reclaim;

pub(super) use ahead::Refill;

use fabric::proto::{Notice, PageKey, PageSpan};

use super::Coherence;
use crate::env::Env;
#[cfg(doc)]
use crate::pagecache::NodeCache;

impl Coherence {
    /// A DIR_INV of `key`: torn down and acked now, or its ack owed
    /// until the page's miss (or size publication) is answered.
    pub(super) fn dir_inv<E: Env>(&mut self, env: &E, key: PageKey) {
        match self.cache.dir_inv(&key) {
            Some(dirty) => {
                log::debug!("DIR_INV {key:?}: acked, dirty={dirty}");
                self.ack(env, key, dirty);
            }
            None => log::debug!("DIR_INV {key:?}: our miss is in flight, ack deferred"),
        }
    }

    /// An INV_RANGE of `span`: each run of it with nothing in flight torn
    /// down and acked once; its pages in flight owed as DIR_INVs.
    pub(super) fn inv_range<E: Env>(&mut self, env: &E, span: PageSpan) {
        let runs = self.cache.range_inv(&span);
        if runs.len() != 1 || runs[0].0 != span {
            log::debug!("INV_RANGE {span:?}: misses in flight, their acks deferred");
        }
        for (run, dirty) in runs {
            log::debug!("INV_RANGE {run:?}: acked, dirty={dirty}");
            self.ack_range(env, run, dirty);
        }
    }

    /// Unmap `key` from the window (flushing the TLB), then acknowledge.
    fn ack<E: Env>(&mut self, env: &E, key: PageKey, dirty: bool) {
        self.unmap(env, &key); // the TLB flush comes before the ack
        let mut spins = 0u32;
        if self
            .notifier
            .ack(env.mem(), key, dirty, &mut || {
                spins += 1;
                spins < 10_000_000
            })
            .is_err()
        {
            log::warn!("ack ring stuck; the directory will time this node out");
        }
    }

    /// Unmap every page of `span` from the window, then acknowledge the
    /// INV_RANGE once.
    fn ack_range<E: Env>(&mut self, env: &E, span: PageSpan, dirty: bool) {
        self.win.unmap_range(env, span.keys());
        let mut spins = 0u32;
        if self
            .notifier
            .send(env.mem(), Notice::InvRangeAck { span, dirty }, &mut || {
                spins += 1;
                spins < 10_000_000
            })
            .is_err()
        {
            log::warn!("ack ring stuck; the directory will time this node out");
        }
    }

    /// Send the acks of deferred invalidations that became due.
    pub(in crate::singlecopy) fn send_due_acks<E: Env>(&mut self, env: &E) {
        for (key, dirty) in self.cache.take_acks() {
            log::debug!("DIR_INV {key:?}: deferred ack, dirty={dirty}");
            self.ack(env, key, dirty);
        }
    }

    /// Joined and nothing in flight that a DIR_INV taken as acknowledged
    /// while we sleep could race (see [`NodeCache::quiet`]); also no DROP
    /// unsent or unanswered and no PROMOTE in flight. Late answers of
    /// given-up requests (`abandoned`) do not count: none of them installs
    /// a mapping.
    pub(super) fn quiet(&mut self) -> bool {
        !self.broken
            && !self.detached
            && self.drops.none()
            && self.replicas.promoting.is_none()
            && self.late.none_releasing()
            && self.cache.quiet()
    }
}
