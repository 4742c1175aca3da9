//! Append locks as leases: the directory's state of strong-mode append
//! locks, one owner (the serving loop, `server/appendlock.rs`), pure
//! bookkeeping.
//!
//! A strong-mode append learns the end of file, stores its bytes into
//! the file's frames there and publishes the new size; two nodes doing so
//! at once would store over each other before either size is published.
//! The lock makes the three steps one. It is a lease of
//! [`AppendLocks::lease_ns`]: taking it again (renewing) restarts the
//! lease, giving it back ends it. A lease nobody renewed or gave back
//! (the give-back was lost, or the node forgot the append) lapses, and the
//! next taker gets the lock: no appender waits on a lost give-back for
//! longer than one lease.
//!
//! No two nodes both hold it: a node stores and publishes under the lock
//! only within [`fabric::proto::APPEND_BUDGET_NS`] of sending its take
//! (its own clock, checked just before each store), and the directory
//! accepts a size published under the lock ([`AppendLocks::holds`]) only
//! from the lease's holder while the lease runs. The lease is longer than
//! that budget plus the heartbeat timeout, so a holder stopped between its
//! check and its store is declared failed before its lease could lapse;
//! a failed holder's lease never lapses ([`AppendLocks::take`]'s `live`)
//! and goes only when the directory drops the node
//! ([`AppendLocks::drop_node`]: after its fence, with fencing on).

use alloc::collections::BTreeMap;

use fabric::proto::Errno;

/// One lock's lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Lease {
    node: u8,
    /// The lease runs until this instant (directory clock).
    until_ns: u64,
}

/// Counters of the append locks.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct AppendLockStats {
    /// Locks granted (a renewal is not counted).
    pub granted: u64,
    /// Locks taken over from a lease that lapsed (its holder never gave
    /// it back).
    pub lapsed: u64,
    /// Sizes published, or leases renewed, under the lock by a node
    /// whose lease was gone: refused.
    pub refused: u64,
}

/// The append locks, by inode.
#[derive(Debug, Clone)]
pub struct AppendLocks {
    lease_ns: u64,
    locks: BTreeMap<u64, Lease>,
    stats: AppendLockStats,
}

impl AppendLocks {
    /// No lock held; leases of `lease_ns` (at least 1 ns).
    pub fn new(lease_ns: u64) -> AppendLocks {
        AppendLocks {
            lease_ns: lease_ns.max(1),
            locks: BTreeMap::new(),
            stats: AppendLockStats::default(),
        }
    }

    /// The lease length.
    pub fn lease_ns(&self) -> u64 {
        self.lease_ns
    }

    /// `node` takes (or renews) `ino`'s lock at `now_ns`: [`Errno::Busy`]
    /// while another node's lease runs, or while its holder is not `live`
    /// (failed, waiting to be dropped: its lease never lapses, since it
    /// might still store). A lapsed lease of a live holder is taken over.
    pub fn take(
        &mut self,
        ino: u64,
        node: u8,
        now_ns: u64,
        live: impl Fn(u8) -> bool,
    ) -> Result<(), Errno> {
        let until_ns = now_ns.saturating_add(self.lease_ns);
        match self.locks.get(&ino).copied() {
            Some(l) if l.node == node => {}
            Some(l) if l.until_ns > now_ns || !live(l.node) => return Err(Errno::Busy),
            Some(l) => {
                self.stats.lapsed += 1;
                self.stats.granted += 1;
                log::warn!(
                    "append lock of {ino}: node {}'s lease lapsed {} ms ago (give-back lost?), node {node} takes it",
                    l.node,
                    now_ns.saturating_sub(l.until_ns) / 1_000_000
                );
            }
            None => self.stats.granted += 1,
        }
        self.locks.insert(ino, Lease { node, until_ns });
        Ok(())
    }

    /// `node` renews its lease of `ino`'s lock at `now_ns`:
    /// [`Errno::Busy`] unless that lease still runs (a lapsed one is not
    /// renewed even if the lock is free now: another node may have
    /// appended meanwhile, so what `node` learned is stale).
    pub fn renew(&mut self, ino: u64, node: u8, now_ns: u64) -> Result<(), Errno> {
        match self.locks.get_mut(&ino) {
            Some(l) if l.node == node && l.until_ns > now_ns => {
                l.until_ns = now_ns.saturating_add(self.lease_ns);
                Ok(())
            }
            _ => {
                self.stats.refused += 1;
                Err(Errno::Busy)
            }
        }
    }

    /// `node` gives `ino`'s lock back; nothing if it does not hold it.
    pub fn give(&mut self, ino: u64, node: u8) {
        if self.locks.get(&ino).is_some_and(|l| l.node == node) {
            self.locks.remove(&ino);
        }
    }

    /// Does `node` hold `ino`'s lock with its lease running at `now_ns`?
    /// (A size published under the lock is accepted only then; a refusal
    /// is counted.)
    pub fn holds(&mut self, ino: u64, node: u8, now_ns: u64) -> bool {
        let ok = self
            .locks
            .get(&ino)
            .is_some_and(|l| l.node == node && l.until_ns > now_ns);
        if !ok {
            self.stats.refused += 1;
        }
        ok
    }

    /// `node` is gone: its locks go; how many.
    pub fn drop_node(&mut self, node: u8) -> usize {
        let before = self.locks.len();
        self.locks.retain(|_, l| l.node != node);
        before - self.locks.len()
    }

    /// `ino`'s lease: its holder and the instant it runs until (lapsed or
    /// not).
    pub fn lease(&self, ino: u64) -> Option<(u8, u64)> {
        self.locks.get(&ino).map(|l| (l.node, l.until_ns))
    }

    /// Who holds `ino`'s lock (lapsed or not).
    pub fn holder(&self, ino: u64) -> Option<u8> {
        self.locks.get(&ino).map(|l| l.node)
    }

    /// Locks held (lapsed ones not taken over yet included).
    pub fn len(&self) -> usize {
        self.locks.len()
    }

    /// No lock held?
    pub fn is_empty(&self) -> bool {
        self.locks.is_empty()
    }

    /// The counters.
    pub fn stats(&self) -> AppendLockStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: u64 = 1_000;
    fn live(_: u8) -> bool {
        true
    }

    #[test]
    fn one_holder_until_given_back() {
        let mut l = AppendLocks::new(LEASE);
        assert_eq!(l.take(7, 1, 0, live), Ok(()));
        assert_eq!(l.take(7, 2, 10, live), Err(Errno::Busy));
        // Another file's lock is independent.
        assert_eq!(l.take(8, 2, 10, live), Ok(()));
        // A give-back by a node that does not hold it changes nothing.
        l.give(7, 2);
        assert_eq!(l.holder(7), Some(1));
        l.give(7, 1);
        assert_eq!(l.take(7, 2, 20, live), Ok(()));
        assert_eq!(l.stats().granted, 3);
        assert_eq!(l.stats().lapsed, 0);
    }

    #[test]
    fn a_lost_give_back_lapses_after_one_lease() {
        let mut l = AppendLocks::new(LEASE);
        assert_eq!(l.take(7, 1, 0, live), Ok(()));
        // Node 1's give-back never arrives: node 2 waits one lease, no
        // longer.
        assert_eq!(l.take(7, 2, LEASE - 1, live), Err(Errno::Busy));
        assert_eq!(l.take(7, 2, LEASE, live), Ok(()));
        assert_eq!(l.holder(7), Some(2));
        assert_eq!(l.stats().lapsed, 1);
        // Node 1 lost it: its publication is refused, its take waits.
        assert!(!l.holds(7, 1, LEASE + 1));
        assert_eq!(l.stats().refused, 1);
        assert_eq!(l.take(7, 1, LEASE + 1, live), Err(Errno::Busy));
        assert!(l.holds(7, 2, LEASE + 1));
    }

    #[test]
    fn renewing_restarts_the_lease() {
        let mut l = AppendLocks::new(LEASE);
        assert_eq!(l.take(7, 1, 0, live), Ok(()));
        assert_eq!(l.take(7, 1, 900, live), Ok(()));
        assert_eq!(l.take(7, 2, 1_500, live), Err(Errno::Busy));
        assert!(l.holds(7, 1, 1_899));
        assert!(!l.holds(7, 1, 1_900), "a lease ends at its end");
        assert_eq!(l.take(7, 2, 1_900, live), Ok(()));
    }

    #[test]
    fn a_lapsed_lease_is_not_renewed_even_when_the_lock_is_free() {
        let mut l = AppendLocks::new(LEASE);
        assert_eq!(l.take(7, 1, 0, live), Ok(()));
        assert_eq!(l.renew(7, 1, 500), Ok(()));
        assert_eq!(l.renew(7, 2, 600), Err(Errno::Busy));
        // Lapsed, taken and given back by node 2 meanwhile.
        assert_eq!(l.take(7, 2, 1_600, live), Ok(()));
        l.give(7, 2);
        assert_eq!(l.renew(7, 1, 1_700), Err(Errno::Busy));
        assert_eq!(l.holder(7), None);
        // Lapsed with nobody taking it: still not renewed.
        assert_eq!(l.take(7, 1, 2_000, live), Ok(()));
        assert_eq!(l.renew(7, 1, 3_000), Err(Errno::Busy));
        assert_eq!(l.stats().refused, 3);
    }

    #[test]
    fn a_failed_holders_lease_never_lapses_until_it_is_dropped() {
        let mut l = AppendLocks::new(LEASE);
        assert_eq!(l.take(7, 1, 0, live), Ok(()));
        let failed = |n: u8| n != 1;
        // Failed, not fenced yet: it may still store.
        assert_eq!(l.take(7, 2, 10 * LEASE, failed), Err(Errno::Busy));
        assert_eq!(l.drop_node(1), 1);
        assert_eq!(l.take(7, 2, 10 * LEASE, failed), Ok(()));
        assert_eq!(l.drop_node(1), 0);
        assert_eq!(l.len(), 1);
    }

    #[test]
    fn a_lease_at_the_end_of_the_clock_does_not_wrap() {
        let mut l = AppendLocks::new(LEASE);
        assert_eq!(l.take(7, 1, u64::MAX - 1, live), Ok(()));
        assert_eq!(l.take(7, 2, u64::MAX - 1, live), Err(Errno::Busy));
        assert!(l.holds(7, 1, u64::MAX - 1));
    }
}
