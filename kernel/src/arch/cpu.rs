//! Small CPU helpers.

/// Read the time-stamp counter.
#[inline]
pub fn rdtsc() -> u64 {
    // SAFETY: `rdtsc` has no side effects and is always available on x86_64.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Spin-loop hint.
#[inline]
pub fn pause() {
    core::hint::spin_loop();
}

/// Enable interrupts and halt until the next one (atomically, so a wakeup
/// between the check and the halt is not lost).
#[inline]
pub fn wait_for_interrupt() {
    x86_64::instructions::interrupts::enable_and_hlt();
}

/// Halt forever with interrupts off.
pub fn halt_forever() -> ! {
    x86_64::instructions::interrupts::disable();
    loop {
        x86_64::instructions::hlt();
    }
}

/// Run `f` with interrupts disabled, restoring the previous state.
#[inline]
pub fn without_interrupts<R>(f: impl FnOnce() -> R) -> R {
    x86_64::instructions::interrupts::without_interrupts(f)
}
