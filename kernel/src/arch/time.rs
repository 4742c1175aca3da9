//! Time: the TSC, calibrated against the PIT at boot.

use core::sync::atomic::{AtomicU64, Ordering};

use super::cpu::rdtsc;
use super::{inb, outb};

/// PIT input clock.
pub const PIT_HZ: u64 = 1_193_182;

static TSC_HZ: AtomicU64 = AtomicU64::new(1_000_000_000);
static TSC_BOOT: AtomicU64 = AtomicU64::new(0);

fn read_pit0() -> u16 {
    outb(0x43, 0x00); // latch channel 0
    let lo = inb(0x40) as u16;
    let hi = inb(0x40) as u16;
    hi << 8 | lo
}

/// Measure the TSC rate over `ms` milliseconds of PIT channel 0, run as a
/// free-running down-counter and read back with latch commands (polled;
/// interrupts are not needed). Returns the rate in Hz.
pub fn calibrate(ms: u64) -> u64 {
    TSC_BOOT.store(rdtsc(), Ordering::Relaxed);
    outb(0x43, 0x34); // channel 0, lo/hi, rate generator
    outb(0x40, 0);
    outb(0x40, 0); // reload 65536
    let target = PIT_HZ * ms / 1000;
    let mut last = read_pit0();
    let t0 = rdtsc();
    let mut elapsed = 0u64;
    let mut reads = 0u64;
    while elapsed < target && reads < 50_000_000 {
        let c = read_pit0();
        elapsed += last.wrapping_sub(c) as u64;
        last = c;
        reads += 1;
    }
    let t1 = rdtsc();
    if elapsed > 0 {
        let hz = ((t1 - t0) as u128 * PIT_HZ as u128 / elapsed as u128) as u64;
        if hz > 1_000_000 {
            TSC_HZ.store(hz, Ordering::Relaxed);
        }
    }
    TSC_HZ.load(Ordering::Relaxed)
}

/// Calibrated TSC frequency.
pub fn tsc_hz() -> u64 {
    TSC_HZ.load(Ordering::Relaxed)
}

/// Convert TSC cycles to nanoseconds.
pub fn cycles_to_ns(c: u64) -> u64 {
    ((c as u128 * 1_000_000_000) / tsc_hz() as u128) as u64
}

/// Nanoseconds since calibration (boot).
pub fn now_ns() -> u64 {
    cycles_to_ns(rdtsc().wrapping_sub(TSC_BOOT.load(Ordering::Relaxed)))
}
