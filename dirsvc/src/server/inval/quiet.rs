//! Invalidations of quietly sleeping sharers, taken without waking them.
//!
//! A node that halts with nothing in flight an invalidation could race
//! stores `SLEEP_QUIET` in its sleeping word (`fabric::doorbell`). After a
//! pass published DIR_INVs, the directory fences and reads the words of
//! the nodes that owe it acks, fences again and drains each quiet
//! sleeper's ack ring (an ack it pushed before it slept is taken as sent,
//! dirty or not): a DIR_INV still owed by a quiet sleeper is then
//! taken as acknowledged (clean: a quiet node dirtied no peer frame) and
//! the invalidation goes on at once, with no doorbell and no wakeup (as
//! Linux skips the TLB-shootdown IPI of a CPU in lazy TLB mode). The node,
//! when it wakes for any reason, clears its word, fences and services its
//! notify ring before it runs anything else, so it tears the mapping down
//! before it could use it (the Dekker argument in `fabric::doorbell`).
//!
//! INV_RANGEs (a file's teardown) are taken alike, whole: one whose span
//! holds a page the node owns is not taken. Only sharers' DIR_INVs are
//! taken: a file eviction's DIR_INV to the
//! owner (free your frame) waits for the owner's ack as before. The node
//! still acks every DIR_INV when it services it; the ack of one taken here
//! is dropped when it comes (`Invalidations::absorb`). A node's acks come in the order
//! of its DIR_INVs, and it acks one taken here before it can ask for the
//! page again, so the first ack of that page after the taking is its own.

use alloc::vec::Vec;

use fabric::doorbell::PeerMap;
use fabric::proto::PageKey;
use fabric::shm::SharedMem;
use flatfs::BlockDevice;

use super::super::{Directory, Poll};
use super::InvOut;

/// Counters of the lazy path (the kernel logs them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QuietStats {
    /// DIR_INVs taken as acknowledged from quietly sleeping sharers.
    pub taken: u64,
    /// Acks of such DIR_INVs that came later and were dropped.
    pub absorbed: u64,
}

impl<D: BlockDevice> Directory<D> {
    /// After a pass: take the outstanding DIR_INVs of every member that
    /// sleeps quietly as acknowledged, and run what that completes.
    ///
    /// A quiet sleeper's ack ring is drained first: the node may have
    /// serviced a DIR_INV (acking it dirty: it had stored into the owner's
    /// frame), emptied its dirty set and gone back to sleep quietly since
    /// this pass read its ring. Its acks are pushed before it announces the
    /// sleep, so they are on the ring once the word reads quiet; taking the
    /// DIR_INV as clean instead would skip the write-back of its stores.
    pub(in crate::server) fn take_quiet_acks(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        out: &mut Poll,
    ) {
        if !self.cfg.lazy_inv {
            return;
        }
        let members = &self.members;
        let owing = self.inval.owing(|n| members.is_member(n));
        if owing == 0 {
            return;
        }
        // StoreLoad: the DIR_INVs published before the words are read.
        (self.cfg.fence)();
        let map = PeerMap::new(mem);
        // The DIR_INVs each quiet sleeper owed when its word was read:
        // only those may be taken (one published later, e.g. by a failure
        // handled below, may find the node awake).
        // Only the owing nodes' bits: this runs on every pass while any
        // DIR_INV is out.
        let quiet: Vec<(u32, Vec<InvOut>)> = BitIter(owing)
            .filter(|&i| map.sleeps_quiet(i as u32 + 1))
            .map(|i| (i as u32 + 1, self.inval.owed(i as u32 + 1)))
            .collect();
        if quiet.is_empty() {
            return;
        }
        // LoadLoad: the words are read before the ack rings.
        (self.cfg.fence)();
        for (node, owed) in quiet {
            let max = 4 * self.cfg.batch;
            match self.serve_acks(mem, node, max) {
                // Acks still coming: not quiet after all; wait for them.
                Ok(n) if n >= max => continue,
                Ok(_) => {}
                Err(error) => {
                    self.corrupt(mem, node, error, out);
                    continue;
                }
            }
            if self.members.is_member(node) {
                self.take_invs_of(mem, node, &owed);
            }
        }
    }

    /// Take the DIR_INVs of `owed` that `node` (asleep quietly, its acks
    /// drained) still owes as a sharer's clean acks.
    fn take_invs_of(&mut self, mem: &(impl SharedMem + ?Sized), node: u32, owed: &[InvOut]) {
        for inv in self.inval.take_owed(node) {
            if !owed.contains(&inv) {
                self.inval.still_owed(node, inv);
                continue;
            }
            let key = PageKey {
                ino: inv.span.ino,
                idx: inv.span.first,
            };
            let awaits = if inv.range {
                self.pages.awaits_range_ack(node as u8, &inv.span)
            } else {
                self.pages.awaits_ack(node as u8, &key)
            };
            match awaits {
                Some(true) => {
                    self.inval.taken_lazily(node, inv);
                    log::debug!("node {node}: {inv:?} taken as acked (quiet sleep)");
                    let arg = fabric::trace::key_arg(key.ino, key.idx);
                    fabric::trace::record(fabric::trace::Kind::LazyAck, node, 0, 0, arg);
                    let a = if inv.range {
                        self.pages.ack_range(node as u8, inv.span, false)
                    } else {
                        self.pages.ack(node as u8, key, false)
                    };
                    self.run(mem, a);
                }
                // The owner's own DIR_INV (or a span holding one of its
                // pages): its ack frees the frame.
                Some(false) => self.inval.still_owed(node, inv),
                // No longer awaited (the node left and came back, or
                // the ack is in flight and was processed meanwhile).
                None => {}
            }
        }
    }
}

/// The indexes of the set bits of a mask, lowest first.
struct BitIter(u64);

impl Iterator for BitIter {
    type Item = usize;
    fn next(&mut self) -> Option<usize> {
        if self.0 == 0 {
            return None;
        }
        let i = self.0.trailing_zeros() as usize;
        self.0 &= self.0 - 1;
        Some(i)
    }
}
