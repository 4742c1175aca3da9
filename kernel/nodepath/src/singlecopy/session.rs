//! The session with the directory, node side: joining (a fresh cache and
//! notify/ack endpoints, this node's replica words cleared), servicing the
//! notify ring (DIR_INV and INV_RANGE handed to the Invalidation Manager,
//! `inval`; `Sharers`; REVOKE and `ReplicasUsed` of strong-mode
//! replicas), and leaving.

use alloc::collections::BTreeMap;

use fabric::layout::Layout;
use fabric::proto::{Notice, PageKey};

use super::{Coherence, ScState};
use crate::client::Notifier;
use crate::env::Env;
use crate::link::Session;
use crate::pagecache::NodeCache;

impl Coherence {
    /// Drop our replica of `key` (a REVOKE: a writer is about to store
    /// into its frame) and ack; the mapping stays. A PROMOTE of `key` in
    /// flight will not use its grant.
    fn revoke<E: Env>(&mut self, env: &E, key: PageKey) {
        self.cache.revoke_replica(&key);
        if let Some((k, revoked)) = self.replicas.promoting.as_mut() {
            if *k == key {
                *revoked = true;
            }
        }
        let mut spins = 0u32;
        if self
            .notifier
            .send(env.mem(), Notice::RevokeAck(key), &mut || {
                spins += 1;
                spins < 10_000_000
            })
            .is_err()
        {
            log::warn!("ack ring stuck; the directory will time this node out");
        }
    }

    /// Has this node seen the header's `replicas_used` set? Once it reads
    /// it set, it says so in its record (`sees_replicas`), after every
    /// store it made before (see `dirsvc::server::replicas`).
    pub(super) fn replicas_seen<E: Env>(&mut self, env: &E) -> bool {
        if !self.replicas.seen {
            let h = fabric::layout::Header::new(env.mem(), self.layout);
            if h.replicas_used() {
                h.set_sees_replicas(self.node, true);
                self.replicas.seen = true;
            }
        }
        self.replicas.seen
    }
}

impl<E: Env> Session<E> for ScState {
    /// Fresh notify/ack endpoints, an empty cache over our pool, nothing
    /// mapped.
    fn joined(&mut self, env: &E, layout: Layout, node: u32) {
        if let Some(old) = self.coh.as_mut() {
            old.unmap_all(env);
        }
        self.reads_session_ended();
        // A new session has seen nothing yet and stores nothing yet (the
        // words may be left from an earlier one).
        let h = fabric::layout::Header::new(env.mem(), layout);
        h.set_sees_replicas(node, false);
        h.set_writing(node, 0);
        self.coh = Some(Coherence {
            notifier: Notifier::new(&layout, node),
            cache: NodeCache::new(self.mode, layout.pool_gfns(node), self.remote_limit),
            layout,
            win: super::remote::mmap::Windows::default(),
            broken: false,
            detached: false,
            node,
            drops: super::batch::Drops::default(),
            late: super::batch::Late::default(),
            replicas: super::remote::Replicas::default(),
            refill: super::inval::Refill::default(),
            written: BTreeMap::new(),
            delegs: super::deleg::Delegs::default(),
        });
        if let Some(mut c) = self.coh.take() {
            self.controls.apply(&mut c.cache);
            c.cache.set_watermarks(self.marks);
            self.apply_groups(&mut c.cache);
            self.coh = Some(c);
        }
    }

    /// Service pending invalidations: forget, unmap + flush, acknowledge.
    /// An invalidation of a page whose READ / LOOKUP_LOCK is still
    /// unanswered is acknowledged only once the answer is applied
    /// (`NodeCache::dir_inv`): acking earlier would let the directory
    /// finish before we install what the answer grants.
    fn service(&mut self, env: &E) -> usize {
        let Some(c) = self.coh.as_mut() else { return 0 };
        if c.broken || c.detached {
            return 0;
        }
        // An idle node tells the directory it has seen replicas in use
        // (no store of it is in progress here), so promotions need not
        // wait for its next store.
        c.replicas_seen(env);
        let mut n = 0;
        loop {
            let key = match c.notifier.poll(env.mem()) {
                Ok(Some(Notice::DirInv(k))) => k,
                Ok(Some(Notice::InvRange(span))) => {
                    n += 1;
                    // Cut pages leave a delegation's list before the ack.
                    c.deleg_cut(env.mem(), &span);
                    c.inv_range(env, span);
                    continue;
                }
                Ok(Some(Notice::Sharers { key, count })) => {
                    // Not an invalidation: an input of cluster-aware
                    // eviction (a rise is a remote access of our page).
                    c.cache.sharers(key, count);
                    n += 1;
                    continue;
                }
                Ok(Some(Notice::Revoke(key))) => {
                    log::debug!("REVOKE {key:?}: replica dropped, acked");
                    c.revoke(env, key);
                    n += 1;
                    continue;
                }
                Ok(Some(Notice::Recall(range))) => {
                    // Answered with a request, which a wait cannot send:
                    // at the next chance (`ScState::answer_recalls`).
                    c.recalled(range);
                    n += 1;
                    continue;
                }
                Ok(Some(Notice::ReplicasUsed)) => {
                    // Looked at above, before this loop; again for a
                    // notice that came while it ran.
                    c.replicas_seen(env);
                    continue;
                }
                Ok(Some(
                    Notice::InvAck { .. } | Notice::InvRangeAck { .. } | Notice::RevokeAck(_),
                )) => continue,
                Ok(None) => break,
                Err(e) => {
                    // A ring that stays corrupt answers the same error
                    // forever: stop here, and treat the session as broken
                    // (calls fail as "directory unavailable" until the next
                    // membership check rejoins, see `Link::check`).
                    log::warn!(
                        "notify ring: {e}; session broken, rejoining at the next membership check"
                    );
                    c.broken = true;
                    break;
                }
            };
            n += 1;
            c.dir_inv(env, key);
        }
        c.send_due_acks(env);
        n
    }

    fn broken(&self) -> bool {
        self.coh.as_ref().is_some_and(|c| c.broken)
    }

    /// Quiet enough for lazy acks (see `inval`).
    fn quiet(&mut self) -> bool {
        self.coh.as_mut().is_some_and(|c| c.quiet())
    }

    /// Leave the shared cache: forget every page, unmap the window.
    fn disconnect(&mut self, env: &E) {
        if let Some(c) = self.coh.as_mut() {
            c.unmap_all(env);
            c.cache.forget_all();
            c.delegs = super::deleg::Delegs::default();
            c.drops.clear();
            c.late.clear();
            c.broken = false;
            c.detached = true;
        }
    }
}
