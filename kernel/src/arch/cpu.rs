//! Small CPU helpers.

/// Read the time-stamp counter.
#[inline]
pub fn rdtsc() -> u64 {
    // SAFETY: `rdtsc` has no side effects and is always available on x86_64.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// 64 bits from the CPU's random number generator: RDSEED or RDRAND when
/// CPUID says the CPU has them (a few retries each, as Intel advises),
/// otherwise (or if they keep failing) the low bits of the TSC sampled
/// around short, uneven delays, mixed (jitter: enough to make sequence
/// numbers differ from run to run, not a cryptographic source).
pub fn entropy64() -> u64 {
    use core::arch::x86_64::{__cpuid, __cpuid_count};
    // `cpuid` is safe to call on x86_64 (no side effects).
    let (leaf1, leaf7) = (__cpuid(1), __cpuid_count(7, 0));
    let has_rdrand = leaf1.ecx & (1 << 30) != 0;
    let has_rdseed = leaf7.ebx & (1 << 18) != 0;
    for _ in 0..10 {
        let mut v = 0u64;
        // SAFETY: the instructions exist (CPUID said so above); they only
        // write `v`.
        let ok = unsafe {
            if has_rdseed {
                rdseed64(&mut v)
            } else if has_rdrand {
                rdrand64(&mut v)
            } else {
                break;
            }
        };
        if ok {
            return v;
        }
    }
    let mut x = rdtsc();
    for i in 0..64u64 {
        let mut spin = (rdtsc() ^ i) & 0x3f;
        while spin > 0 {
            spin -= 1;
            core::hint::spin_loop();
        }
        x = (x ^ rdtsc())
            .rotate_left(7)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    x
}

/// # Safety
/// The CPU must have RDSEED (CPUID.7.0:EBX bit 18).
#[target_feature(enable = "rdseed")]
unsafe fn rdseed64(v: &mut u64) -> bool {
    core::arch::x86_64::_rdseed64_step(v) == 1
}

/// # Safety
/// The CPU must have RDRAND (CPUID.1:ECX bit 30).
#[target_feature(enable = "rdrand")]
unsafe fn rdrand64(v: &mut u64) -> bool {
    core::arch::x86_64::_rdrand64_step(v) == 1
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
