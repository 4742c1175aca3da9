//! The node's slots (what it holds of each page) and the write-back
//! claims on them. A task's fsync sends its file's dirty pages' WRITEBACK
//! requests and yields; each page it sent is claimed by that job. The
//! answer cleans the page only if the claim is still that job's: any
//! change of the slot (a store into the page, a new slot, a teardown,
//! a reclaim) drops the claim, so an answer never marks clean bytes
//! written after the directory may have copied the frame. Dropping a claim
//! is always safe: the page stays dirty and the next write-back takes it.
//! The `NodeCache` methods over the claims live here too.

use alloc::collections::BTreeMap;
use core::ops::Deref;

use fabric::proto::PageKey;

use super::Slot;

/// The slot map, with every mutation dropping the key's claim.
#[derive(Debug, Default)]
pub(super) struct Slots {
    map: BTreeMap<PageKey, Slot>,
    /// Dirty pages whose WRITEBACK a task's job sent: page -> job.
    claims: BTreeMap<PageKey, u64>,
}

/// How many slots of the kinds with a bound are held, counted as they
/// come and go (no walk of the slots).
#[derive(Debug, Default)]
pub(super) struct Held {
    /// Remote mappings.
    pub(super) remote: usize,
    /// Most remote mappings kept (more are dropped after reads).
    pub(super) remote_limit: usize,
    /// Private copies (relaxed), counted as they come and go: the bound
    /// is checked on every write.
    pub(super) private: usize,
    /// Private copies ever made (never decreases): a write that made none
    /// has no copy to start tracking.
    pub(super) private_made: u64,
}

impl Deref for Slots {
    type Target = BTreeMap<PageKey, Slot>;
    fn deref(&self) -> &Self::Target {
        &self.map
    }
}

impl Slots {
    pub(super) fn insert(&mut self, key: PageKey, slot: Slot) -> Option<Slot> {
        self.claims.remove(&key);
        self.map.insert(key, slot)
    }

    pub(super) fn remove(&mut self, key: &PageKey) -> Option<Slot> {
        self.claims.remove(key);
        self.map.remove(key)
    }

    /// The slot, to change it (its claim goes).
    pub(super) fn get_mut(&mut self, key: &PageKey) -> Option<&mut Slot> {
        self.claims.remove(key);
        self.map.get_mut(key)
    }

    /// The slot, for bookkeeping that touches neither the page's bytes
    /// nor its dirty bit (promotion heat): its claim stays.
    pub(super) fn get_mut_keep_claim(&mut self, key: &PageKey) -> Option<&mut Slot> {
        self.map.get_mut(key)
    }

    pub(super) fn clear(&mut self) {
        self.claims.clear();
        self.map.clear();
    }

    /// Job `job` sends `key`'s write-back: claim it if it is a dirty frame
    /// (own or mapped) or a private copy. A later job's claim replaces an
    /// earlier one's.
    pub(super) fn claim(&mut self, key: PageKey, job: u64) -> bool {
        let dirty = matches!(
            self.map.get(&key),
            Some(
                Slot::Local { dirty: true, .. }
                    | Slot::Remote { dirty: true, .. }
                    | Slot::Private(_)
            )
        );
        if dirty {
            self.claims.insert(key, job);
        }
        dirty
    }

    /// Job `job`'s write-back of `key` was answered done: is the claim
    /// still that job's (the page unchanged since)? The claim goes.
    pub(super) fn take_claim(&mut self, key: &PageKey, job: u64) -> bool {
        if self.claims.get(key) != Some(&job) {
            return false;
        }
        self.claims.remove(key);
        true
    }

    /// Job `job` ended: its claims not answered go (the pages stay dirty).
    pub(super) fn release(&mut self, job: u64) {
        self.claims.retain(|_, j| *j != job);
    }

    /// Claims held (pages whose write-back is in flight and untouched).
    pub(super) fn claims(&self) -> usize {
        self.claims.len()
    }
}

/// The write-back claims as the node cache's callers see them.
impl super::NodeCache {
    /// A task's write-back job `job` sends `key` (a frame's WRITEBACK, or
    /// a private copy's write): claim the page (see `pagecache/slots.rs`).
    /// False if it is neither a dirty frame nor a private copy.
    pub fn claim_writeback(&mut self, key: PageKey, job: u64) -> bool {
        self.slots.claim(key, job)
    }

    /// Job `job`'s write-back of `key` was answered done: unless the page
    /// changed since the job claimed it, clear a frame's dirty bit, or
    /// forget a private copy (the next access maps the reconciled single
    /// copy). True if it was.
    pub fn cleaned_by(&mut self, key: &PageKey, job: u64) -> bool {
        if !self.slots.take_claim(key, job) {
            return false;
        }
        match self.slots.get_mut(key) {
            Some(Slot::Local { dirty, .. } | Slot::Remote { dirty, .. }) => {
                *dirty = false;
                true
            }
            Some(Slot::Private(_)) => {
                self.drop_private(key);
                true
            }
            _ => false,
        }
    }

    /// Job `job` ended: its unanswered claims go (those pages stay dirty).
    pub fn release_claims(&mut self, job: u64) {
        self.slots.release(job);
    }

    /// Pages claimed by write-back jobs in flight.
    pub fn writeback_claims(&self) -> usize {
        self.slots.claims()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::boxed::Box;

    fn key(idx: u64) -> PageKey {
        PageKey { ino: 1, idx }
    }

    fn dirty_local() -> Slot {
        Slot::Local {
            gfn: 7,
            dirty: true,
        }
    }

    fn is_dirty(s: &Slots, k: &PageKey) -> bool {
        matches!(s.get(k), Some(Slot::Local { dirty: true, .. }))
    }

    #[test]
    fn an_untouched_claim_holds() {
        let mut s = Slots::default();
        s.insert(key(0), dirty_local());
        s.insert(
            key(1),
            Slot::Private(Box::new([0u8; crate::pagecache::PAGE])),
        );
        assert!(s.claim(key(0), 1));
        assert!(s.claim(key(1), 1), "a private copy is claimed too");
        assert!(s.take_claim(&key(0), 1));
        assert!(s.take_claim(&key(1), 1));
        assert!(!s.take_claim(&key(0), 1), "taken once");
        assert_eq!(s.claims(), 0);
    }

    #[test]
    fn a_store_or_a_new_slot_meanwhile_keeps_the_page_dirty() {
        let mut s = Slots::default();
        s.insert(key(0), dirty_local());
        s.insert(key(1), dirty_local());
        s.insert(key(2), dirty_local());
        for k in 0..3 {
            assert!(s.claim(key(k), 1));
        }
        // A store (through get_mut), a replaced slot, a teardown.
        if let Some(Slot::Local { dirty, .. }) = s.get_mut(&key(0)) {
            *dirty = true;
        }
        s.insert(key(1), dirty_local());
        s.remove(&key(2));
        for k in 0..3 {
            assert!(!s.take_claim(&key(k), 1));
        }
        assert!(is_dirty(&s, &key(0)) && is_dirty(&s, &key(1)));
        // Heat bookkeeping keeps the claim.
        assert!(s.claim(key(0), 2));
        let _ = s.get_mut_keep_claim(&key(0));
        assert!(s.take_claim(&key(0), 2));
    }

    #[test]
    fn a_later_job_owns_the_claim_and_release_drops_the_rest() {
        let mut s = Slots::default();
        s.insert(key(0), dirty_local());
        s.insert(key(1), dirty_local());
        s.insert(
            key(2),
            Slot::Local {
                gfn: 3,
                dirty: false,
            },
        );
        assert!(s.claim(key(0), 1));
        assert!(s.claim(key(0), 2));
        assert!(!s.claim(key(2), 2), "a clean page is not claimed");
        assert!(!s.take_claim(&key(0), 1), "the earlier job's answer");
        assert!(s.claim(key(1), 2));
        s.release(2);
        assert_eq!(s.claims(), 0);
        assert!(!s.take_claim(&key(0), 2));
        assert!(is_dirty(&s, &key(0)));
    }
}
