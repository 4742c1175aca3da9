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
mod tests {
    use super::*;
    use crate::layout::Layout;
    use crate::shm::HeapShm;
    use std::sync::atomic::{AtomicBool, AtomicU64};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    /// A formatted 2 MiB region for 4 nodes (also the deferred checks'
    /// tests).
    pub(crate) fn region() -> Box<HeapShm> {
        let size = 2 << 20;
        let mem = HeapShm::new(size);
        Layout::compute(size, 4).unwrap().format(&*mem, 1);
        Box::new(mem)
    }

    #[test]
    fn table_sits_between_node_table_and_pong() {
        assert_eq!(TABLE, NODE_TABLE + 64 * NODE_RECORD);
        assert!(TABLE + ENTRIES as usize * ENTRY <= HEADER_BYTES - 64);
    }

    #[test]
    fn publish_and_look_up() {
        let mem = region();
        let m = PeerMap::new(&**mem);
        assert!(m.formatted());
        assert_eq!(m.peer_of(0), None);
        m.publish(0, 0).unwrap();
        m.publish(1, 7).unwrap();
        m.publish(MAX_NODES, MAX_PEER).unwrap();
        assert_eq!(m.peer_of(0), Some(0));
        assert_eq!(m.peer_of(1), Some(7));
        assert_eq!(m.peer_of(2), None);
        assert_eq!(m.peer_of(MAX_NODES), Some(0xFFFF));
        // A restarted instance publishes its new id over the old one.
        m.publish(1, 9).unwrap();
        assert_eq!(m.peer_of(1), Some(9));
        m.unpublish(1);
        assert_eq!(m.peer_of(1), None);
        // Entries do not overlap.
        m.set_sleeping(1, true);
        m.set_flags(1, FLAG_RINGS_DIRECTORY);
        m.set_echo_request(1, 5);
        m.set_echo_answer(1, 4);
        assert_eq!(m.peer_of(0), Some(0));
        assert!(!m.sleeping(0) && !m.sleeping(2));
        assert_eq!((m.flags(0), m.flags(2)), (0, 0));
        assert_eq!((m.echo_request(1), m.echo_answer(1)), (5, 4));
        assert_eq!(m.echo_request(2), 0);
        // The layout still reads back: the table is outside the CRC'd fields.
        assert!(Layout::read(&**mem).is_ok());
    }

    #[test]
    fn bad_input_is_refused() {
        let mem = region();
        let m = PeerMap::new(&**mem);
        assert_eq!(
            m.publish(ENTRIES, 1),
            Err(DoorbellError::BadInstance(ENTRIES))
        );
        assert_eq!(m.publish(1, 0x10000), Err(DoorbellError::BadPeer(0x10000)));
        assert_eq!(m.peer_of(ENTRIES), None);
        assert_eq!(m.peer_of(u32::MAX), None);
        m.set_sleeping(u32::MAX, true); // ignored, no panic
        assert!(!m.sleeping(u32::MAX));
        // Garbage in the region: an id beyond 16 bits is no id.
        mem.store_u32(TABLE + ENTRY, 0x1_0001);
        assert_eq!(m.peer_of(1), None);
        mem.store_u32(TABLE + ENTRY, u32::MAX);
        assert_eq!(m.peer_of(1), None);
        // Any non-zero sleeping word counts as asleep (a spare ring is fine).
        mem.store_u32(TABLE + ENTRY + 8, 0xdead);
        assert!(m.sleeping(1));
        // Unformatted or foreign regions: no publication.
        let blank = HeapShm::new(2 << 20);
        let b = PeerMap::new(&*blank);
        assert!(!b.formatted());
        assert_eq!(b.publish(1, 3), Err(DoorbellError::NotFormatted));
        // A region smaller than the header: nothing is touched.
        let tiny = HeapShm::new(4096);
        let t = PeerMap::new(&*tiny);
        assert!(!t.formatted());
        assert_eq!(t.peer_of(0), None);
        assert_eq!(t.publish(0, 1), Err(DoorbellError::BadInstance(0)));
    }

    #[test]
    fn sleeping_word_decides_the_ring() {
        let mem = region();
        let m = PeerMap::new(&**mem);
        assert_eq!(ring_decision(&m, 0, seqcst_fence), Ring::NoPeer);
        m.publish(0, 3).unwrap();
        assert_eq!(ring_decision(&m, 0, seqcst_fence), Ring::Suppressed);
        assert!(prepare_sleep(&m, 0, false, seqcst_fence, || false));
        assert_eq!(ring_decision(&m, 0, seqcst_fence), Ring::Peer(3));
        finish_sleep(&m, 0, seqcst_fence);
        assert_eq!(ring_decision(&m, 0, seqcst_fence), Ring::Suppressed);
        // Work found by the re-check: no halt, the word is cleared again.
        assert!(!prepare_sleep(&m, 0, false, seqcst_fence, || true));
        assert!(!m.sleeping(0));
        assert_eq!(ring_decision(&m, 99, seqcst_fence), Ring::NoPeer);
    }

    /// The consumer of the lost-wakeup tests, on its own thread: takes the
    /// items `produced` counts one at a time (`consumed` counts them) until
    /// `items`, and whenever none is pending sleeps as a kernel does
    /// (announce, re-check, then wait for `bell` or 2 s, standing for
    /// the tick: long enough that a producer thread descheduled between
    /// publishing an item and ringing, on a loaded host, is not counted).
    /// Returns how many sleeps ended by the timeout while an item was
    /// pending: lost wakeups.
    pub(crate) fn sleepy_consumer(
        mem: Arc<HeapShm>,
        produced: Arc<AtomicU64>,
        consumed: Arc<AtomicU64>,
        bell: Arc<AtomicBool>,
        items: u64,
    ) -> std::thread::JoinHandle<u32> {
        std::thread::spawn(move || {
            let m = PeerMap::new(&*mem);
            let mut lost = 0u32;
            loop {
                let c = consumed.load(Ordering::SeqCst);
                if c == items {
                    break;
                }
                if produced.load(Ordering::SeqCst) > c {
                    consumed.store(c + 1, Ordering::SeqCst);
                    continue;
                }
                if !prepare_sleep(&m, 1, false, seqcst_fence, || {
                    produced.load(Ordering::SeqCst) > c
                }) {
                    continue;
                }
                // "hlt": wait for the bell, or time out (the tick).
                let t = Instant::now();
                while !bell.swap(false, Ordering::SeqCst) {
                    if t.elapsed() > Duration::from_secs(2) {
                        if produced.load(Ordering::SeqCst) > c {
                            lost += 1;
                        }
                        break;
                    }
                    std::hint::spin_loop();
                }
                finish_sleep(&m, 1, seqcst_fence);
            }
            lost
        })
    }

    /// Two threads: a producer publishes items and rings only a sleeping
    /// consumer; the consumer sleeps (with a timeout standing for the tick)
    /// whenever it finds nothing. With the protocol no sleep ever has to
    /// end by the timeout while an item is pending.
    #[test]
    fn no_lost_wakeups_between_two_threads() {
        const ITEMS: u64 = 20_000;
        let mem = Arc::new(*region());
        PeerMap::new(&*mem).publish(1, 1).unwrap();
        let produced = Arc::new(AtomicU64::new(0));
        let consumed = Arc::new(AtomicU64::new(0));
        let bell = Arc::new(AtomicBool::new(false));
        let consumer =
            sleepy_consumer(mem.clone(), produced.clone(), consumed, bell.clone(), ITEMS);
        let m = PeerMap::new(&*mem);
        let mut rung = 0u64;
        for i in 1..=ITEMS {
            produced.store(i, Ordering::SeqCst);
            if let Ring::Peer(p) = ring_decision(&m, 1, seqcst_fence) {
                assert_eq!(p, 1);
                bell.store(true, Ordering::SeqCst);
                rung += 1;
            }
            if i % 64 == 0 {
                std::thread::yield_now();
            }
        }
        let lost = consumer.join().unwrap();
        assert_eq!(lost, 0, "a wakeup was lost ({rung} rings)");
    }

    #[test]
    fn a_quiet_sleep_is_told_apart_from_a_plain_one() {
        let mem = region();
        let m = PeerMap::new(&**mem);
        assert!(prepare_sleep(&m, 2, true, seqcst_fence, || false));
        assert!(m.sleeping(2) && m.sleeps_quiet(2));
        finish_sleep(&m, 2, seqcst_fence);
        assert!(!m.sleeping(2) && !m.sleeps_quiet(2));
        assert!(prepare_sleep(&m, 2, false, seqcst_fence, || false));
        assert!(m.sleeping(2) && !m.sleeps_quiet(2));
        // Garbage is a plain sleep, never a licence to skip an ack.
        mem.store_u32(TABLE + 2 * ENTRY + 8, 0xdead);
        assert!(m.sleeping(2) && !m.sleeps_quiet(2));
        assert!(!m.sleeps_quiet(u32::MAX));
        // A replacement instance publishing its id is awake: the quiet
        // word a dead predecessor left behind is gone.
        assert!(prepare_sleep(&m, 2, true, seqcst_fence, || false));
        m.publish(2, 7).unwrap();
        assert!(!m.sleeping(2) && !m.sleeps_quiet(2));
    }

    /// Two threads: a "directory" publishes invalidations and takes each
    /// one it sees published to a quietly sleeping "node" as acknowledged;
    /// the node, right after every wake, looks at what was published. Every
    /// invalidation taken as acknowledged must be in what the node sees
    /// then (else it could use a page the directory thinks it gave up).
    #[test]
    fn an_invalidation_taken_from_a_quiet_sleeper_is_seen_when_it_wakes() {
        const ITEMS: u64 = 20_000;
        let mem = Arc::new(*region());
        PeerMap::new(&*mem).publish(1, 1).unwrap();
        let produced = Arc::new(AtomicU64::new(0));
        let taken = Arc::new(AtomicU64::new(0));
        let bell = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(false));
        let node = {
            let (mem, produced, taken, bell, done) = (
                mem.clone(),
                produced.clone(),
                taken.clone(),
                bell.clone(),
                done.clone(),
            );
            std::thread::spawn(move || {
                let m = PeerMap::new(&*mem);
                let mut seen = 0u64;
                let mut wakes = 0u64;
                while !done.load(Ordering::SeqCst) {
                    let p = produced.load(Ordering::SeqCst);
                    if p > seen {
                        seen = p;
                        continue;
                    }
                    let slept = prepare_sleep(&m, 1, true, seqcst_fence, || {
                        produced.load(Ordering::SeqCst) > seen
                    });
                    if slept {
                        let t = Instant::now();
                        while !bell.swap(false, Ordering::SeqCst)
                            && t.elapsed() < Duration::from_millis(2)
                        {
                            std::hint::spin_loop();
                        }
                        finish_sleep(&m, 1, seqcst_fence);
                    }
                    wakes += 1;
                    // First thing after waking: what was published.
                    let now = produced.load(Ordering::SeqCst);
                    let t = taken.load(Ordering::SeqCst);
                    assert!(t <= now, "invalidation {t} taken as acked, node saw {now}");
                }
                wakes
            })
        };
        let m = PeerMap::new(&*mem);
        let mut lazy = 0u64;
        for i in 1..=ITEMS {
            produced.store(i, Ordering::SeqCst);
            seqcst_fence();
            if m.sleeps_quiet(1) {
                taken.store(i, Ordering::SeqCst);
                lazy += 1;
            } else if let Ring::Peer(_) = ring_decision(&m, 1, seqcst_fence) {
                bell.store(true, Ordering::SeqCst);
            }
            if i % 64 == 0 {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        done.store(true, Ordering::SeqCst);
        bell.store(true, Ordering::SeqCst);
        let wakes = node.join().unwrap();
        assert!(
            lazy > 0 && wakes > 0,
            "no quiet sleep was met ({lazy} taken, {wakes} wakes)"
        );
    }
}
