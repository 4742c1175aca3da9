//! Doorbells between instances (ivshmem-doorbell): the peer-id
//! map and the "sleeping" words that suppress useless interrupts.
//!
//! The ivshmem server numbers its clients (peer ids) in connection order and
//! never reuses a number, so a restarted instance gets a new id. Each
//! instance reads its own id from the device (IVPosition) and publishes it
//! here, in its own entry of the doorbell table in the region header; a
//! sender looks the target's current id up before ringing it.
//!
//! The table lives at the fixed offset [`TABLE`] inside the header (after
//! the node table), one [`ENTRY`]-byte entry per instance: index 0 is the
//! directory, index `k` node `k` (1..=[`MAX_NODES`]). It needs no [`Layout`]
//! (crate::layout::Layout): an instance can publish as soon as the region
//! carries the magic and version. Every word has a single writer (QEMU's
//! single-threaded TCG does not make `lock cmpxchg` atomic across
//! instances):
//!
//! | off | word | writer |
//! | --- | ---- | ------ |
//! | +0  | peer u32: 0 = none, else peer id + 1 | the instance |
//! | +4  | flags u32 ([`FLAG_RINGS_DIRECTORY`]) | the instance |
//! | +8  | sleeping u32: non-zero while it halts waiting for a doorbell ([`SLEEP_QUIET`]: and takes invalidations lazily) | the instance |
//! | +16 | echo request u32 (doorbell ping, node side) | the instance |
//! | +20 | echo answer u32 | the directory |
//!
//! Event suppression ([`prepare_sleep`], [`ring_decision`]): the sleeper
//! sets its sleeping word, then re-checks for work and halts only if there
//! is none; a waker publishes its work first and rings only if the target's
//! word is set. With a full fence on both sides between the store and the
//! load, one of them sees the other (Dekker), so no wakeup is lost. Both
//! functions take that fence as a parameter: a guest's `mfence` is not a
//! host fence under TCG without its parallel flag (QEMU drops it), so the
//! kernel passes one that is (`arch::cpu::full_fence`: a port read, which
//! takes QEMU's big lock, a locked instruction on the host); host tests
//! pass [`seqcst_fence`].
//!
//! Lazy invalidation of sleeping sharers: a node that sleeps with nothing
//! in flight that an invalidation could race (no page request unanswered,
//! no ack owed, no page it dirtied through a peer's frame) stores
//! [`SLEEP_QUIET`] rather than 1. The directory takes a DIR_INV it
//! published to such a node, then fenced and saw the word, as acknowledged
//! without waking it (as Linux skips the TLB-shootdown IPI of a CPU in lazy
//! TLB mode): the same Dekker pair guarantees that the node, which clears
//! its word and fences when it wakes ([`finish_sleep`]), sees the DIR_INV
//! and tears the mapping down before any of its code runs again.
//!
//! Deferred checks ([`deferred`]): a waker may read the word first without
//! the fence and owe the fenced check until the target has taken its work,
//! or the check is old enough, or the waker is about to halt itself.

use core::sync::atomic::{fence, Ordering};

pub mod deferred;

use crate::layout::{HEADER_BYTES, MAGIC, MAX_NODES, NODE_RECORD, NODE_TABLE, VERSION};
use crate::shm::SharedMem;

/// Offset of the doorbell table in the region (inside the header).
pub const TABLE: usize = NODE_TABLE + MAX_NODES as usize * NODE_RECORD;
/// Bytes per instance entry.
pub const ENTRY: usize = 32;
/// Entries: the directory (0) and nodes 1..=MAX_NODES.
pub const ENTRIES: u32 = MAX_NODES + 1;
/// Entry index of the directory.
pub const DIRECTORY: u32 = 0;
/// Highest peer id the Doorbell register can address (16 bits).
pub const MAX_PEER: u32 = 0xFFFF;

/// Vector 0: "a request for the directory" (rung at the directory).
pub const VEC_REQUEST: u16 = 0;
/// Vector 1: notify / ack (invalidations and their acknowledgements).
pub const VEC_NOTIFY: u16 = 1;
/// Vector 2: "your response is ready" (rung at a node).
pub const VEC_RESPONSE: u16 = 2;
/// Vectors the kernels use (the device may have more).
pub const VECTORS_USED: u16 = 3;

/// Sleeping word of a node that may be invalidated without waking (see
/// the module documentation); 1 is a plain sleep.
pub const SLEEP_QUIET: u32 = 2;

/// Flag: this instance rings the directory when it publishes a request, so
/// the directory may halt at once when idle instead of spinning.
pub const FLAG_RINGS_DIRECTORY: u32 = 1;

const OFF_PEER: usize = 0;
const OFF_FLAGS: usize = 4;
const OFF_SLEEPING: usize = 8;
const OFF_ECHO_REQ: usize = 16;
const OFF_ECHO_ACK: usize = 20;

const _: () = assert!(TABLE.is_multiple_of(64));
// The table ends before the pong word's cache line (the last 64 bytes).
const _: () = assert!(TABLE + ENTRIES as usize * ENTRY <= HEADER_BYTES - 64);

/// Why a doorbell operation was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DoorbellError {
    /// Instance index outside 0..=MAX_NODES.
    BadInstance(u32),
    /// Peer id beyond the 16 bits of the Doorbell register.
    BadPeer(u32),
    /// The region is not (yet) formatted by this layout version.
    NotFormatted,
}

impl core::fmt::Display for DoorbellError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DoorbellError::BadInstance(i) => {
                write!(f, "doorbell: instance {i} out of range 0..={MAX_NODES}")
            }
            DoorbellError::BadPeer(p) => {
                write!(f, "doorbell: peer id {p} out of range 0..={MAX_PEER}")
            }
            DoorbellError::NotFormatted => f.write_str("doorbell: shared region not formatted"),
        }
    }
}

/// What a waker should do after publishing work for `target`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ring {
    /// The target sleeps: ring this peer id.
    Peer(u16),
    /// The target is awake (it will see the work): no interrupt needed.
    Suppressed,
    /// The target has no (valid) peer id published: cannot ring.
    NoPeer,
}

/// The doorbell table of a region. Every index is checked; every value read
/// from the region is validated (the region is untrusted).
pub struct PeerMap<'a, M: SharedMem + ?Sized> {
    mem: &'a M,
}

impl<'a, M: SharedMem + ?Sized> PeerMap<'a, M> {
    /// Wrap a region (any size: accessors refuse a region too small).
    pub fn new(mem: &'a M) -> Self {
        PeerMap { mem }
    }

    fn entry(&self, instance: u32) -> Result<usize, DoorbellError> {
        if instance >= ENTRIES || self.mem.size() < HEADER_BYTES {
            return Err(DoorbellError::BadInstance(instance));
        }
        Ok(TABLE + instance as usize * ENTRY)
    }

    /// Does the region carry our magic and layout version (so the table is
    /// where this code expects it)?
    pub fn formatted(&self) -> bool {
        self.mem.size() >= HEADER_BYTES
            && self.mem.load_u64(0) == MAGIC
            && self.mem.load_u32(8) == VERSION
    }

    /// Publish `peer` as the peer id of `instance` (its own entry only).
    /// The sleeping word is cleared first: a new instance in a dead one's
    /// place is awake, and a `SLEEP_QUIET` its predecessor left behind
    /// must not let the directory take its invalidations unasked.
    pub fn publish(&self, instance: u32, peer: u32) -> Result<(), DoorbellError> {
        if peer > MAX_PEER {
            return Err(DoorbellError::BadPeer(peer));
        }
        let e = self.entry(instance)?;
        if !self.formatted() {
            return Err(DoorbellError::NotFormatted);
        }
        self.mem.store_u32(e + OFF_SLEEPING, 0);
        self.mem.store_u32(e + OFF_PEER, peer + 1);
        Ok(())
    }

    /// Withdraw `instance`'s peer id (it leaves or loses its device).
    pub fn unpublish(&self, instance: u32) {
        if let Ok(e) = self.entry(instance) {
            self.mem.store_u32(e + OFF_PEER, 0);
        }
    }

    /// The current peer id of `instance`, if published and valid.
    pub fn peer_of(&self, instance: u32) -> Option<u16> {
        let e = self.entry(instance).ok()?;
        let v = self.mem.load_u32(e + OFF_PEER);
        if v == 0 || v - 1 > MAX_PEER {
            return None;
        }
        Some((v - 1) as u16)
    }

    /// Flags of `instance` (0 for a bad index).
    pub fn flags(&self, instance: u32) -> u32 {
        self.entry(instance)
            .map(|e| self.mem.load_u32(e + OFF_FLAGS))
            .unwrap_or(0)
    }

    /// Set `instance`'s flags (its own entry only).
    pub fn set_flags(&self, instance: u32, flags: u32) {
        if let Ok(e) = self.entry(instance) {
            self.mem.store_u32(e + OFF_FLAGS, flags);
        }
    }

    /// Is `instance` (about to be) halted waiting for a doorbell? Any
    /// non-zero value counts: a spurious ring is harmless.
    pub fn sleeping(&self, instance: u32) -> bool {
        self.entry(instance)
            .map(|e| self.mem.load_u32(e + OFF_SLEEPING) != 0)
            .unwrap_or(false)
    }

    /// Set or clear `instance`'s sleeping word (its own entry only).
    pub fn set_sleeping(&self, instance: u32, on: bool) {
        self.set_sleep_word(instance, on as u32);
    }

    fn set_sleep_word(&self, instance: u32, v: u32) {
        if let Ok(e) = self.entry(instance) {
            self.mem.store_u32(e + OFF_SLEEPING, v);
        }
    }

    /// Does `instance` sleep with [`SLEEP_QUIET`]: may a DIR_INV published
    /// to it before this load (and a full fence) be taken as acknowledged?
    /// Only that exact value counts (garbage is a plain sleep).
    pub fn sleeps_quiet(&self, instance: u32) -> bool {
        self.entry(instance)
            .map(|e| self.mem.load_u32(e + OFF_SLEEPING) == SLEEP_QUIET)
            .unwrap_or(false)
    }

    /// Echo request counter of `instance` (doorbell ping).
    pub fn echo_request(&self, instance: u32) -> u32 {
        self.entry(instance)
            .map(|e| self.mem.load_u32(e + OFF_ECHO_REQ))
            .unwrap_or(0)
    }

    /// Set `instance`'s echo request counter (written by the instance).
    pub fn set_echo_request(&self, instance: u32, v: u32) {
        if let Ok(e) = self.entry(instance) {
            self.mem.store_u32(e + OFF_ECHO_REQ, v);
        }
    }

    /// The directory's echo answer to `instance`.
    pub fn echo_answer(&self, instance: u32) -> u32 {
        self.entry(instance)
            .map(|e| self.mem.load_u32(e + OFF_ECHO_ACK))
            .unwrap_or(0)
    }

    /// Answer `instance`'s echo (written by the directory).
    pub fn set_echo_answer(&self, instance: u32, v: u32) {
        if let Ok(e) = self.entry(instance) {
            self.mem.store_u32(e + OFF_ECHO_ACK, v);
        }
    }
}

/// Sleeper side: announce the sleep, then re-check `has_work`. Returns true
/// if the caller may halt (it must clear the word with [`finish_sleep`] when
/// it wakes); false if work arrived meanwhile (the word is cleared again).
/// `full_fence` must order the store of the sleeping word before the loads
/// of `has_work` for every other agent (StoreLoad). `quiet`: sleep with
/// [`SLEEP_QUIET`] (the caller then handles its notices, after
/// [`finish_sleep`], before anything else).
pub fn prepare_sleep<M: SharedMem + ?Sized>(
    map: &PeerMap<'_, M>,
    me: u32,
    quiet: bool,
    full_fence: impl Fn(),
    has_work: impl FnOnce() -> bool,
) -> bool {
    map.set_sleep_word(me, if quiet { SLEEP_QUIET } else { 1 });
    // StoreLoad: the sleeping word must be visible before we look for work.
    full_fence();
    if has_work() {
        finish_sleep(map, me, full_fence);
        return false;
    }
    true
}

/// Sleeper side: awake again. After a quiet sleep the fence orders the
/// cleared word before the caller's next loads of its rings: a directory
/// that saw the word set (and so took a DIR_INV as acknowledged) published
/// that DIR_INV before its own fence, so the caller's look at its notify
/// ring finds it. A plain sleep needs no fence (nothing is taken from it).
pub fn finish_sleep<M: SharedMem + ?Sized>(map: &PeerMap<'_, M>, me: u32, full_fence: impl Fn()) {
    let quiet = map.sleeps_quiet(me);
    map.set_sleep_word(me, 0);
    if quiet {
        full_fence();
    }
}

/// The fence of processes that share memory natively (host threads, KVM).
pub fn seqcst_fence() {
    fence(Ordering::SeqCst);
}

/// Waker side, after publishing work for `target`: ring or not.
/// `full_fence` orders the publication before the load of the sleeping
/// word (StoreLoad), see [`prepare_sleep`].
pub fn ring_decision<M: SharedMem + ?Sized>(
    map: &PeerMap<'_, M>,
    target: u32,
    full_fence: impl FnOnce(),
) -> Ring {
    // StoreLoad: our work must be visible before we read the sleeping word.
    full_fence();
    match map.peer_of(target) {
        None => Ring::NoPeer,
        Some(p) if map.sleeping(target) => Ring::Peer(p),
        Some(_) => Ring::Suppressed,
    }
}

#[cfg(test)]
mod tests;
