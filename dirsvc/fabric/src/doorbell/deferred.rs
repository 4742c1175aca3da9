//! Deferred suppression checks: the waker's fence off the fast path.
//!
//! [`ring_decision`](super::ring_decision) fences before it reads the
//! target's sleeping word. Under TCG that fence is a port read (about
//! 0.2-0.3 us), paid by every request even though the target is nearly
//! always awake and takes the work long before it could sleep. Here the
//! waker first reads the word without a fence ([`Deferred::publish`]):
//!
//! * set: ring now. A stale "sleeping" costs one spurious doorbell; the
//!   doorbell is an MMIO write that QEMU turns into an eventfd write (a
//!   host system call), which orders the published work before the
//!   interrupt.
//! * clear: the look may be stale (the work may not yet be visible to a
//!   sleeper's re-check), so the check is *owed*.
//!
//! [`Deferred::settle`] settles owed checks. A target that has consumed
//! every piece of work published to it (`pending` false) cannot have
//! missed any: no ring, no fence. A check owed for `after` clock units or
//! more since the last work published to its target (or every one when
//! `force`, the waker being about to halt) gets one fence for all of
//! them, then each word is read as `ring_decision` does. The waker settles
//! while it spins and before it halts, so losing the race to a target that
//! was just going to sleep costs at most `after` of latency (counted from
//! the waker's last publication to it), never a wakeup.
//!
//! Why from the last publication: a caller that got its answer stops
//! settling, so the check of a request already taken often stays owed
//! until the next request. Counted from the first, that next request would
//! find it due at once and pay the fence after all.

use super::{PeerMap, ENTRIES};

// One bit per target in `Deferred::mask`.
const _: () = assert!(ENTRIES <= 128);
use crate::shm::SharedMem;

/// What [`Deferred::publish`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Publish {
    /// The target's word says it sleeps: ring this peer id now.
    Ring(u16),
    /// The target looked awake: the fenced check is owed.
    Owed,
    /// No valid peer id for the target (or a vector beyond 31).
    NoPeer,
}

/// What one [`Deferred::settle`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Settled {
    /// Owed checks dropped because the target had consumed its work.
    pub consumed: u32,
    /// Owed checks that fenced and found the target awake.
    pub suppressed: u32,
    /// Doorbells rung (one per owed vector of a sleeping target).
    pub rung: u32,
    /// Owed checks whose target had no peer id any more.
    pub no_peer: u32,
    /// Whether the fence ran (at most once per call).
    pub fenced: bool,
}

/// The checks a waker owes, per target instance.
#[derive(Debug, Clone)]
pub struct Deferred {
    /// Per target: the vectors owed (bit `v`), 0 when nothing is owed.
    owed: [u32; ENTRIES as usize],
    /// Per target: when work was last published to it while owed.
    since: [u64; ENTRIES as usize],
    /// Bit `t`: target `t` has something owed (settling, which a waiting
    /// caller does on every spin, visits only these).
    mask: u128,
    /// Age (in the caller's clock units) after which an owed check fences.
    after: u64,
}

impl Deferred {
    /// Nothing owed; an owed check fences once `after` old (units of the
    /// clock the caller passes as `now`).
    pub const fn new(after: u64) -> Self {
        Deferred {
            owed: [0; ENTRIES as usize],
            since: [0; ENTRIES as usize],
            mask: 0,
            after,
        }
    }

    /// Is any check owed?
    pub fn owed(&self) -> bool {
        self.mask != 0
    }

    /// The earliest time an owed check can be due (`u64::MAX`: nothing
    /// owed). Before then a [`Deferred::settle`] that is not forced would
    /// not fence or ring (it could only drop checks whose work was taken,
    /// which can wait): a caller that spins may skip it until then.
    pub fn next_due(&self) -> u64 {
        if self.mask == 0 {
            return u64::MAX;
        }
        Targets(self.mask)
            .map(|t| self.since[t as usize].saturating_add(self.after))
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Is a check owed for `target`?
    pub fn owes(&self, target: u32) -> bool {
        self.owed.get(target as usize).is_some_and(|&v| v != 0)
    }

    /// After publishing work for `target` on `vector`: ring now or owe the
    /// check (see the module documentation). No fence.
    pub fn publish<M: SharedMem + ?Sized>(
        &mut self,
        map: &PeerMap<'_, M>,
        target: u32,
        vector: u16,
        now: u64,
    ) -> Publish {
        let Some(bit) = 1u32.checked_shl(vector as u32) else {
            return Publish::NoPeer;
        };
        let Some(peer) = map.peer_of(target) else {
            return Publish::NoPeer;
        };
        if map.sleeping(target) {
            return Publish::Ring(peer);
        }
        // peer_of accepted the index, so it is < ENTRIES.
        let i = target as usize;
        self.mask |= 1 << i;
        self.owed[i] |= bit;
        self.since[i] = now;
        Publish::Owed
    }

    /// Settle the owed checks that are due (see the module documentation):
    /// `pending(target)` says whether `target` still has work of ours it
    /// has not consumed; `ring(peer, vector)` rings one doorbell.
    pub fn settle<M: SharedMem + ?Sized>(
        &mut self,
        map: &PeerMap<'_, M>,
        now: u64,
        force: bool,
        mut pending: impl FnMut(u32) -> bool,
        full_fence: impl FnOnce(),
        mut ring: impl FnMut(u16, u16),
    ) -> Settled {
        let mut s = Settled::default();
        let mut due = 0u128;
        for t in Targets(self.mask) {
            let i = t as usize;
            if !pending(t) {
                self.clear(i);
                s.consumed += 1;
            } else if force || now.wrapping_sub(self.since[i]) >= self.after {
                due |= 1 << i;
            }
        }
        if due == 0 {
            return s;
        }
        // StoreLoad: our work must be visible before we read the words.
        full_fence();
        s.fenced = true;
        for t in Targets(due) {
            let i = t as usize;
            let bits = self.owed[i];
            self.clear(i);
            match map.peer_of(t) {
                None => s.no_peer += 1,
                Some(p) if map.sleeping(t) => {
                    for v in 0..32u16 {
                        if bits & (1 << v) != 0 {
                            ring(p, v);
                            s.rung += 1;
                        }
                    }
                }
                Some(_) => s.suppressed += 1,
            }
        }
        s
    }

    fn clear(&mut self, i: usize) {
        self.owed[i] = 0;
        self.mask &= !(1 << i);
    }
}

/// The target indices of a mask, lowest first.
struct Targets(u128);

impl Iterator for Targets {
    type Item = u32;
    fn next(&mut self) -> Option<u32> {
        if self.0 == 0 {
            return None;
        }
        let t = self.0.trailing_zeros();
        self.0 &= self.0 - 1;
        Some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{region, sleepy_consumer};
    use super::super::DIRECTORY;
    use super::*;

    #[test]
    fn a_sleeping_target_is_rung_at_once_and_an_awake_one_is_owed() {
        let mem = region();
        let m = PeerMap::new(&**mem);
        let mut d = Deferred::new(10);
        assert_eq!(d.publish(&m, DIRECTORY, 0, 0), Publish::NoPeer);
        m.publish(DIRECTORY, 5).unwrap();
        m.publish(2, 6).unwrap();
        assert_eq!(d.publish(&m, DIRECTORY, 0, 0), Publish::Owed);
        assert!(d.owed() && d.owes(DIRECTORY) && !d.owes(2));
        m.set_sleeping(2, true);
        assert_eq!(d.publish(&m, 2, 2, 0), Publish::Ring(6));
        assert!(!d.owes(2));
        assert_eq!(d.publish(&m, 2, 40, 0), Publish::NoPeer);
        assert_eq!(d.publish(&m, 99, 0, 0), Publish::NoPeer);
        assert!(!d.owes(99));
    }

    #[test]
    fn consumed_work_needs_no_fence_and_no_ring() {
        let mem = region();
        let m = PeerMap::new(&**mem);
        m.publish(DIRECTORY, 5).unwrap();
        let mut d = Deferred::new(10);
        d.publish(&m, DIRECTORY, 0, 0);
        // Even when due, and even if the target sleeps now: it took our
        // work, so there is nothing to wake it for.
        m.set_sleeping(DIRECTORY, true);
        let mut fenced = false;
        let s = d.settle(&m, 100, true, |_| false, || fenced = true, |_, _| panic!());
        assert!(!fenced && !d.owed());
        assert_eq!((s.consumed, s.fenced), (1, false));
    }

    #[test]
    fn a_pending_check_fences_only_when_due_or_forced() {
        let mem = region();
        let m = PeerMap::new(&**mem);
        m.publish(1, 7).unwrap();
        m.publish(3, 8).unwrap();
        let mut d = Deferred::new(10);
        d.publish(&m, 1, 1, 100);
        d.publish(&m, 1, 2, 105); // same target: the last publication counts
        d.publish(&m, 3, 2, 108);
        assert_eq!(d.next_due(), 115);
        let mut fences = 0;
        let none = |_: u16, _: u16| panic!("nothing sleeps");
        let s = d.settle(&m, 114, false, |_| true, || fences += 1, none);
        assert_eq!((fences, s), (0, Settled::default()));
        // Target 1 is due at 115, target 3 not before 118.
        m.set_sleeping(1, true);
        let mut rung = Vec::new();
        let s = d.settle(
            &m,
            115,
            false,
            |_| true,
            || fences += 1,
            |p, v| rung.push((p, v)),
        );
        assert_eq!(fences, 1);
        assert_eq!(rung, vec![(7, 1), (7, 2)]);
        assert_eq!((s.rung, s.fenced), (2, true));
        assert!(!d.owes(1) && d.owes(3));
        assert_eq!(d.next_due(), 118);
        // Forced: everything left, one fence; target 3 is awake.
        let s = d.settle(&m, 116, true, |_| true, || fences += 1, none);
        assert_eq!((fences, s.suppressed, d.owed()), (2, 1, false));
        assert_eq!(d.next_due(), u64::MAX);
        // A target that lost its peer id meanwhile.
        d.publish(&m, 3, 2, 200);
        m.unpublish(3);
        let s = d.settle(&m, 200, true, |_| true, || fences += 1, none);
        assert_eq!((s.no_peer, d.owed()), (1, false));
    }

    /// The race the fence closes, with the fence deferred: a producer
    /// publishes items and owes the check whenever the consumer looks
    /// awake; the consumer sleeps (with a timeout standing for the tick)
    /// whenever it finds nothing. The producer settles as a waiting node
    /// does: with age as it goes on, forced once it is done. No sleep may
    /// end by the timeout while an item is pending, and the producer fences
    /// far less often than it publishes.
    #[test]
    fn no_lost_wakeups_with_deferred_checks() {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        use std::sync::Arc;
        use std::time::Instant;

        const ITEMS: u64 = 20_000;
        let mem = Arc::new(*region());
        PeerMap::new(&*mem).publish(1, 1).unwrap();
        let produced = Arc::new(AtomicU64::new(0));
        let consumed = Arc::new(AtomicU64::new(0));
        let bell = Arc::new(AtomicBool::new(false));
        let consumer = sleepy_consumer(
            mem.clone(),
            produced.clone(),
            consumed.clone(),
            bell.clone(),
            ITEMS,
        );
        let m = PeerMap::new(&*mem);
        let start = Instant::now();
        let now = || start.elapsed().as_nanos() as u64;
        let mut d = Deferred::new(20_000); // 20 us
        let (mut fences, mut rings) = (0u64, 0u64);
        let pending = |_: u32| consumed.load(Ordering::SeqCst) < produced.load(Ordering::SeqCst);
        let mut ring = |p: u16, _: u16| {
            assert_eq!(p, 1);
            bell.store(true, Ordering::SeqCst);
        };
        for i in 1..=ITEMS {
            produced.store(i, Ordering::SeqCst);
            if let Publish::Ring(_) = d.publish(&m, 1, 0, now()) {
                bell.store(true, Ordering::SeqCst);
                rings += 1;
            }
            let s = d.settle(&m, now(), false, pending, || fences += 1, &mut ring);
            rings += s.rung as u64;
            if i % 64 == 0 {
                std::thread::yield_now();
            }
        }
        // Done producing: settle as a node does before it halts.
        let s = d.settle(&m, now(), true, pending, || fences += 1, &mut ring);
        rings += s.rung as u64;
        let lost = consumer.join().unwrap();
        assert_eq!(
            lost, 0,
            "a wakeup was lost ({rings} rings, {fences} fences)"
        );
        assert!(fences < ITEMS / 2, "{fences} fences for {ITEMS} items");
    }
}
