//! Per-phase service times of misses (`bench miss`, [`Op::MissStats`]):
//! the directory's own share of one miss, phase by phase, on its own
//! clock. Nodes' clocks are not comparable with ours, so a node times its
//! whole call and subtracts the service time reported here: the rest is
//! transport (rings, doorbells, the directory's polling delay).
//!
//! Two kinds ([`MissKind`]):
//!
//! * a single-copy READ miss filled from disk: taken off the ring ->
//!   fill queued (lookup: decode, page directory, block map) -> completion
//!   seen (disk: queue, device, the loop's polling) -> block checked and
//!   copied into the requester's frame (fill) -> answer on the response
//!   ring (reply);
//! * a file-server read over the rings (`private`): taken -> its block
//!   reads queued (lookup: decode, slot check, block map) -> the last
//!   block's completion seen (disk) -> blocks checked and the bytes in the
//!   bulk slot with the attributes (fill) -> answer on the ring (reply).
//!   With synchronous reads (`fill_depth` 0): taken -> just before the
//!   file system's read -> read done (block map, device read, checksum)
//!   -> bytes and attributes in the slot -> answer.
//!
//! Only misses that went through every phase are counted (a fill that
//! failed, was cancelled or read zeros without the disk is not). Pure
//! bookkeeping over a clock function, so it is host-tested with a fake
//! clock.
//!
//! [`Op::MissStats`]: fabric::proto::Op::MissStats

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use fabric::proto::{MissKind, MissStats};

/// Most fills timed at once (more in flight are simply not timed).
const MAX_TIMED_FILLS: usize = 1024;

/// A clock that never moves (the default: nothing is timed, counts still
/// are).
pub fn no_clock() -> u64 {
    0
}

/// A fill whose block is in the frame, waiting for its answer to go out.
#[derive(Debug, Clone, Copy)]
struct Committed {
    kind: MissKind,
    lookup: u64,
    disk: u64,
    fill: u64,
    at: u64,
}

/// The accumulator (one per directory).
#[derive(Debug)]
pub struct MissTimer {
    clock: fn() -> u64,
    stats: [MissStats; 2],
    /// When the request being handled was taken off its ring.
    current: Option<u64>,
    /// Fills and asynchronous file reads on the disk, by requester and
    /// tag: (kind, taken, queued).
    fills: BTreeMap<(u8, u32), (MissKind, u64, u64)>,
    /// Fills copied into their frame whose answers are not out yet.
    committed: Vec<Committed>,
    /// The file read served by the request being handled: (lookup end,
    /// disk end, fill end).
    file_read: Option<(u64, u64, u64)>,
}

impl MissTimer {
    /// Nothing timed yet; `clock` gives nanoseconds.
    pub fn new(clock: fn() -> u64) -> MissTimer {
        MissTimer {
            clock,
            stats: [MissStats::default(); 2],
            current: None,
            fills: BTreeMap::new(),
            committed: Vec::new(),
            file_read: None,
        }
    }

    /// Now, on the directory's clock.
    pub fn now(&self) -> u64 {
        (self.clock)()
    }

    /// The sums of `kind`.
    pub fn stats(&self, kind: MissKind) -> MissStats {
        self.stats[kind as usize]
    }

    /// A request was taken off a ring (its handling starts).
    pub fn taken(&mut self) {
        self.current = Some(self.now());
        self.file_read = None;
    }

    /// The request's handling ended (nothing of it is timed any more
    /// unless it queued a fill).
    pub fn handled(&mut self) {
        self.current = None;
        self.file_read = None;
    }

    /// The request being handled queued its disk reads for `(node, tag)`:
    /// a page fill or an asynchronous file read (`kind`).
    pub fn fill_queued(&mut self, kind: MissKind, node: u8, tag: u32) {
        let Some(t0) = self.current else { return };
        if self.fills.len() >= MAX_TIMED_FILLS {
            return;
        }
        self.fills.insert((node, tag), (kind, t0, self.now()));
    }

    /// The fill (or file read) of `(node, tag)` completed at `seen` and
    /// its bytes went into the frame (the slot) just now (`ok`); a failed
    /// one is forgotten.
    pub fn fill_done(&mut self, node: u8, tag: u32, seen: u64, ok: bool) {
        let Some((kind, t0, queued)) = self.fills.remove(&(node, tag)) else {
            return;
        };
        if !ok {
            return;
        }
        let at = self.now();
        self.committed.push(Committed {
            kind,
            lookup: queued.saturating_sub(t0),
            disk: seen.saturating_sub(queued),
            fill: at.saturating_sub(seen),
            at,
        });
    }

    /// The answers of every committed fill are on their rings now.
    pub fn fills_answered(&mut self) {
        if self.committed.is_empty() {
            return;
        }
        let now = self.now();
        for c in self.committed.drain(..) {
            let s = &mut self.stats[c.kind as usize];
            add(s, c.lookup, c.disk, c.fill, now.saturating_sub(c.at));
        }
    }

    /// `node` failed or left: its fills will not be answered.
    pub fn forget_node(&mut self, node: u8) {
        self.fills.retain(|(n, _), _| *n != node);
    }

    /// The request being handled is a file read whose lookup ended at
    /// `lookup`, disk read at `disk` and copy into the slot at `fill`.
    pub fn file_read(&mut self, lookup: u64, disk: u64, fill: u64) {
        if self.current.is_some() {
            self.file_read = Some((lookup, disk, fill));
        }
    }

    /// The request being handled was answered: account its file read.
    pub fn answered(&mut self) {
        let (Some(t0), Some((lookup, disk, fill))) = (self.current, self.file_read.take()) else {
            return;
        };
        let now = self.now();
        add(
            &mut self.stats[MissKind::FileRead as usize],
            lookup.saturating_sub(t0),
            disk.saturating_sub(lookup),
            fill.saturating_sub(disk),
            now.saturating_sub(fill),
        );
    }
}

fn add(s: &mut MissStats, lookup: u64, disk: u64, fill: u64, reply: u64) {
    s.count += 1;
    s.lookup_ns = s.lookup_ns.saturating_add(lookup);
    s.disk_ns = s.disk_ns.saturating_add(disk);
    s.fill_ns = s.fill_ns.saturating_add(fill);
    s.reply_ns = s.reply_ns.saturating_add(reply);
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::cell::Cell;

    std::thread_local! {
        static NOW: Cell<u64> = const { Cell::new(0) };
    }

    fn clock() -> u64 {
        NOW.with(|n| n.get())
    }

    fn at(t: u64) {
        NOW.with(|n| n.set(t));
    }

    #[test]
    fn a_fill_is_split_into_its_four_phases() {
        let mut m = MissTimer::new(clock);
        at(100);
        m.taken();
        at(130);
        m.fill_queued(MissKind::PageFill, 2, 7);
        m.handled();
        // Other requests meanwhile do not disturb it.
        at(200);
        m.taken();
        m.handled();
        at(1130);
        m.fill_done(2, 7, 1100, true);
        at(1150);
        m.fills_answered();
        assert_eq!(
            m.stats(MissKind::PageFill),
            MissStats {
                count: 1,
                lookup_ns: 30,
                disk_ns: 970,
                fill_ns: 30,
                reply_ns: 20,
            }
        );
        assert_eq!(m.stats(MissKind::FileRead), MissStats::default());
    }

    #[test]
    fn failed_cancelled_and_untimed_fills_are_not_counted() {
        let mut m = MissTimer::new(clock);
        at(10);
        m.taken();
        m.fill_queued(MissKind::PageFill, 1, 1);
        m.fill_queued(MissKind::PageFill, 3, 1);
        m.handled();
        // A fill queued outside a request (no start time) is not timed.
        m.fill_queued(MissKind::PageFill, 1, 2);
        at(50);
        m.fill_done(1, 1, 40, false);
        m.forget_node(3);
        m.fill_done(3, 1, 45, true);
        m.fill_done(1, 2, 45, true);
        m.fills_answered();
        assert_eq!(m.stats(MissKind::PageFill).count, 0);
    }

    #[test]
    fn a_file_read_is_counted_once_it_is_answered() {
        let mut m = MissTimer::new(clock);
        at(1000);
        m.taken();
        m.file_read(1010, 1500, 1520);
        at(1525);
        m.answered();
        m.handled();
        // A request without a file read adds nothing.
        m.taken();
        m.answered();
        m.handled();
        // A file read reported outside a request (net mode) neither.
        m.file_read(1, 2, 3);
        m.answered();
        assert_eq!(
            m.stats(MissKind::FileRead),
            MissStats {
                count: 1,
                lookup_ns: 10,
                disk_ns: 490,
                fill_ns: 20,
                reply_ns: 5,
            }
        );
    }

    #[test]
    fn a_backwards_clock_gives_zeros_not_a_wrap() {
        let mut m = MissTimer::new(clock);
        at(500);
        m.taken();
        m.file_read(400, 300, 200);
        at(100);
        m.answered();
        let s = m.stats(MissKind::FileRead);
        assert_eq!((s.count, s.service_ns()), (1, 0));
    }

    #[test]
    fn at_most_max_fills_are_timed() {
        let mut m = MissTimer::new(clock);
        m.taken();
        for t in 0..(MAX_TIMED_FILLS as u32 + 10) {
            m.fill_queued(MissKind::PageFill, 1, t);
        }
        assert_eq!(m.fills.len(), MAX_TIMED_FILLS);
    }
}
