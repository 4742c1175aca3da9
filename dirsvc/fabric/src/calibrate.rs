//! A fixed workload built from the page cache's own hot operations, run
//! natively on the host (`onecopy-calibrate`) and in a guest (`bench
//! calibrate`): the ratio of the two times is how much slower the guest's
//! CPU runs than the host's, the dilation factor by which the launcher
//! scales the storage and CXL models (`qemu-run.sh --dilation auto`), so
//! that compute and I/O keep the proportions they have on hardware
//! (DieCast's time dilation, NSDI'08).
//!
//! One round is:
//!
//! * one 4 KiB copy (a fill or a read out of a frame),
//! * eight lookups in an open-addressed table of 4,096 keys (the page
//!   directory's and the page cache's hash maps), half of them misses,
//! * one 64-byte descriptor encoded, pushed on a ring, popped and decoded
//!   (a page request through the region), with the ring's real code.
//!
//! The result is a checksum that depends on every round, so no compiler
//! can drop the work; the same code gives the same checksum everywhere.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use crate::proto::Raw;
use crate::ring::{Consumer, Producer, RingLoc};
use crate::rng::mix64;
use crate::shm::HeapShm;

/// Slots of the lookup table (a power of two), half of them used.
const TABLE_SLOTS: usize = 8192;
/// Keys in the table.
const TABLE_KEYS: u64 = 4096;
/// Lookups per round.
const LOOKUPS: u64 = 8;
/// Bytes copied per round.
const COPY: usize = 4096;

/// Rounds a default calibration runs (about 50 ms on the host, a few
/// hundred in a TCG guest).
pub const DEFAULT_ROUNDS: u32 = 20_000;
/// Most rounds one calibration may run.
pub const MAX_ROUNDS: u32 = 10_000_000;

/// The state one calibration run works on (allocated before timing).
pub struct Workload {
    table: Vec<u64>,
    src: Vec<u8>,
    dst: Vec<u8>,
    mem: HeapShm,
    tx: Producer,
    rx: Consumer,
}

impl Default for Workload {
    fn default() -> Self {
        Self::new()
    }
}

impl Workload {
    /// Allocate and fill the buffers, the table and a 16-slot ring.
    pub fn new() -> Workload {
        let mut table = vec![0u64; TABLE_SLOTS];
        for k in 1..=TABLE_KEYS {
            insert(&mut table, mix64(k) | 1);
        }
        let src: Vec<u8> = (0..COPY).map(|i| (mix64(i as u64) & 0xFF) as u8).collect();
        let loc = RingLoc { off: 0, slots: 16 };
        let mem = HeapShm::new(RingLoc::bytes(16));
        loc.reset(&mem);
        Workload {
            table,
            src,
            dst: vec![0u8; COPY],
            mem,
            tx: Producer::new(loc),
            rx: Consumer::new(loc),
        }
    }

    /// Run `rounds` rounds; returns the checksum.
    pub fn run(&mut self, rounds: u32) -> u64 {
        let mut sum = 0u64;
        for r in 0..u64::from(rounds) {
            sum = sum.rotate_left(5) ^ self.round(r);
        }
        sum
    }

    fn round(&mut self, r: u64) -> u64 {
        // The copy, with one byte changed per round so it is never the
        // same copy twice.
        let i = (r as usize) % COPY;
        self.src[i] = self.src[i].wrapping_add(1);
        self.dst.copy_from_slice(&self.src);
        let mut acc = u64::from(self.dst[(r as usize * 7) % COPY]);
        // The lookups: even ones hit (a key in the table), odd ones miss.
        for l in 0..LOOKUPS {
            let n = r.wrapping_mul(LOOKUPS).wrapping_add(l);
            let key = if l % 2 == 0 {
                mix64(n % TABLE_KEYS + 1) | 1
            } else {
                mix64(n | (1 << 62)) & !1
            };
            acc = acc.wrapping_add(u64::from(contains(&self.table, key)));
        }
        // The descriptor through the ring.
        let d = Raw {
            op: 1,
            status: 0,
            tag: r as u32,
            args: [r, acc, 3, 4, 5, 6, 7],
        }
        .encode();
        let mut got = 0;
        if self.tx.push(&self.mem, &d).is_ok() {
            if let Ok(Some(back)) = self.rx.pop(&self.mem) {
                let raw = Raw::decode(&back);
                got = raw.args[1] ^ u64::from(raw.tag);
            }
        }
        acc ^ got
    }
}

fn slot_of(key: u64) -> usize {
    (mix64(key) as usize) & (TABLE_SLOTS - 1)
}

fn insert(table: &mut [u64], key: u64) {
    let mut s = slot_of(key);
    while table[s] != 0 && table[s] != key {
        s = (s + 1) & (TABLE_SLOTS - 1);
    }
    table[s] = key;
}

fn contains(table: &[u64], key: u64) -> bool {
    let mut s = slot_of(key);
    loop {
        match table[s] {
            0 => return false,
            k if k == key => return true,
            _ => s = (s + 1) & (TABLE_SLOTS - 1),
        }
    }
}

/// `calibrate: rounds=R ns=T ns_per_round=X checksum=C`, the line `bench
/// calibrate` and `onecopy-calibrate` print (`qemu-run.sh` reads
/// `ns_per_round`).
pub fn line(rounds: u32, ns: u64, checksum: u64) -> String {
    let per = ns.checked_div(u64::from(rounds)).unwrap_or(0);
    format!("calibrate: rounds={rounds} ns={ns} ns_per_round={per} checksum={checksum:#x}")
}

/// The `ns_per_round` of a [`line`], if it is one.
pub fn ns_per_round(line: &str) -> Option<u64> {
    let rest = line.trim().strip_prefix("calibrate: ")?;
    rest.split_whitespace()
        .find_map(|w| w.strip_prefix("ns_per_round="))?
        .parse()
        .ok()
}

/// The dilation factor in hundredths: the guest's time per round over
/// the host's, rounded; `None` when either time is zero.
pub fn dilation_x100(guest_ns: u64, host_ns: u64) -> Option<u64> {
    if guest_ns == 0 || host_ns == 0 {
        return None;
    }
    let x = u128::from(guest_ns) * 100 + u128::from(host_ns) / 2;
    u64::try_from(x / u128::from(host_ns)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checksum_is_the_same_on_every_run() {
        let a = Workload::new().run(1000);
        let b = Workload::new().run(1000);
        assert_eq!(a, b);
        assert_ne!(a, Workload::new().run(999));
    }

    #[test]
    fn half_the_lookups_hit() {
        let w = Workload::new();
        let hits = (1..=100u64)
            .filter(|&k| contains(&w.table, mix64(k) | 1))
            .count();
        assert_eq!(hits, 100);
        let misses = (1..=100u64)
            .filter(|&k| !contains(&w.table, mix64(k | (1 << 62)) & !1))
            .count();
        assert_eq!(misses, 100);
    }

    #[test]
    fn the_ring_carries_every_round() {
        let mut w = Workload::new();
        w.run(100);
        // Every push was popped: the ring is empty again.
        assert_eq!(w.rx.pop(&w.mem), Ok(None));
    }

    #[test]
    fn the_line_is_read_back() {
        let l = line(1000, 4_500_000, 0xab);
        assert_eq!(
            l,
            "calibrate: rounds=1000 ns=4500000 ns_per_round=4500 checksum=0xab"
        );
        assert_eq!(ns_per_round(&l), Some(4500));
        assert_eq!(ns_per_round("calibrate: rounds=1"), None);
        assert_eq!(ns_per_round("ns_per_round=5"), None);
    }

    #[test]
    fn dilation_is_rounded_in_hundredths() {
        assert_eq!(dilation_x100(450, 100), Some(450));
        assert_eq!(dilation_x100(1001, 1000), Some(100));
        assert_eq!(dilation_x100(1006, 1000), Some(101));
        assert_eq!(dilation_x100(0, 10), None);
        assert_eq!(dilation_x100(10, 0), None);
        assert_eq!(dilation_x100(u64::MAX, 1), None);
    }
}
