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

/// Does the CPU run under KVM (CPUID hypervisor leaf "KVMKVMKVM")? Then a
/// guest `mfence` is a real fence; under TCG it is not (see [`full_fence`]).
fn under_kvm() -> bool {
    use core::sync::atomic::{AtomicU8, Ordering};
    // 0 = not probed, 1 = no, 2 = yes.
    static KVM: AtomicU8 = AtomicU8::new(0);
    match KVM.load(Ordering::Relaxed) {
        1 => false,
        2 => true,
        _ => {
            use core::arch::x86_64::__cpuid;
            // `cpuid` is safe on x86_64; leaf 0x4000_0000 is the hypervisor
            // range (garbage without a hypervisor, which fails the compare).
            let hv = __cpuid(1).ecx & (1 << 31) != 0;
            let l = __cpuid(0x4000_0000);
            let sig = [l.ebx, l.ecx, l.edx];
            let yes = hv && sig == [0x4b4d_564b, 0x564b_4d56, 0x0000_004d];
            KVM.store(if yes { 2 } else { 1 }, Ordering::Relaxed);
            yes
        }
    }
}

/// A StoreLoad fence that holds against the other instances sharing the
/// region (the doorbells' event suppression needs one on both sides).
/// Under TCG without its parallel flag (one vCPU per QEMU), QEMU drops a
/// guest `mfence`, so the store of a sleeping word and the load of a ring
/// index could pass each other in the host CPU's store buffer and a
/// wakeup be lost. A port read is dispatched by QEMU under its big lock
/// (`prepare_mmio_access`): taking a host mutex is a locked instruction,
/// a full fence on the host. Under KVM `mfence` is enough (a port read
/// would be a VM exit).
#[inline]
pub fn full_fence() {
    core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
    if !under_kvm() {
        // The master PIC's mask register: reading it has no side effect.
        let _ = super::inb(0x21);
    }
}
