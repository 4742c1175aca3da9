//! Tickless timekeeping (doorbell mode): no periodic tick. The kernel arms
//! the local APIC timer once for its earliest deadline: the next
//! housekeeping beat (the role's heartbeat and the doorbell's peer-id
//! upkeep, every `period`) or the deadline of the wait that halts
//! ([`halt_until`]). The PIT is stopped.
//!
//! Without doorbells the PIT ticks at `tick_hz` as before
//! ([`super::interrupts::init_timer`]) and [`halt_until`] halts until the
//! next interrupt.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::{apic, time};

static TICKLESS: AtomicBool = AtomicBool::new(false);
/// APIC timer counts per microsecond.
static COUNTS_PER_US: AtomicU64 = AtomicU64::new(1000);
/// Housekeeping period (ns) and the time of the next beat.
static PERIOD_NS: AtomicU64 = AtomicU64::new(u64::MAX);
static NEXT_BEAT: AtomicU64 = AtomicU64::new(u64::MAX);
/// APIC timer interrupts taken.
static FIRED: AtomicU64 = AtomicU64::new(0);

/// Is the kernel tickless?
pub fn tickless() -> bool {
    TICKLESS.load(Ordering::Relaxed)
}

/// APIC timer interrupts taken since boot (tickless mode).
pub fn fired() -> u64 {
    FIRED.load(Ordering::Relaxed)
}

/// Go tickless: calibrate the APIC timer (needs the local APIC enabled)
/// and arm the first housekeeping beat `period_ns` from now.
pub fn init(period_ns: u64) {
    let c = apic::timer_calibrate(2_000);
    COUNTS_PER_US.store(c, Ordering::Relaxed);
    PERIOD_NS.store(period_ns, Ordering::Relaxed);
    NEXT_BEAT.store(time::now_ns() + period_ns, Ordering::Relaxed);
    TICKLESS.store(true, Ordering::Relaxed);
    arm(u64::MAX);
    log::info!(
        "tickless: APIC timer {} counts/us, housekeeping every {} ms",
        c,
        period_ns / 1_000_000
    );
}

/// Arm the timer for the earlier of `deadline_ns` and the next beat.
fn arm(deadline_ns: u64) {
    let at = deadline_ns.min(NEXT_BEAT.load(Ordering::Relaxed));
    let now = time::now_ns();
    let wait_ns = at.saturating_sub(now).max(1_000);
    let counts = (wait_ns as u128 * COUNTS_PER_US.load(Ordering::Relaxed) as u128 / 1000)
        .clamp(1, u32::MAX as u128) as u32;
    apic::timer_oneshot(counts);
}

/// The APIC timer fired (interrupts off): returns true when a housekeeping
/// beat is due (the caller runs the hooks); re-arms for the next beat.
pub fn on_interrupt() -> bool {
    FIRED.fetch_add(1, Ordering::Relaxed);
    let now = time::now_ns();
    let next = NEXT_BEAT.load(Ordering::Relaxed);
    let due = now >= next;
    if due {
        let p = PERIOD_NS.load(Ordering::Relaxed);
        // Skip beats missed while interrupts were off, never a burst.
        NEXT_BEAT.store(next.saturating_add(p).max(now + p / 2), Ordering::Relaxed);
    }
    arm(u64::MAX);
    due
}

/// Halt until an interrupt, with a timer armed for `deadline_ns` (on
/// [`time::now_ns`]) or the next beat, whichever is first; without
/// tickless mode, until the next interrupt (the tick bounds it). Call with
/// interrupts off or on; returns with them on.
pub fn halt_until(deadline_ns: u64) {
    x86_64::instructions::interrupts::disable();
    if tickless() {
        arm(deadline_ns);
    }
    // sti; hlt: an interrupt pending since the arming ends the halt.
    super::cpu::wait_for_interrupt();
}

/// Halt for at most `ns` (a polling wait's step).
pub fn halt_for(ns: u64) {
    halt_until(time::now_ns().saturating_add(ns));
}
