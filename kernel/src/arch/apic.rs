//! The local APIC (xAPIC, MMIO): enabled for MSI/MSI-X delivery (the
//! ivshmem-doorbell device signals only through MSI-X). The 8259 PICs keep
//! the PIT tick and the NICs' INTx lines: LINT0 stays in ExtINT mode, so
//! their interrupts still reach the CPU through the APIC.

use core::sync::atomic::{AtomicU64, Ordering};

use x86_64::registers::model_specific::Msr;

const IA32_APIC_BASE: u32 = 0x1B;
const BASE_ENABLE: u64 = 1 << 11;
const BASE_X2APIC: u64 = 1 << 10;

const REG_ID: usize = 0x20;
const REG_TPR: usize = 0x80;
const REG_EOI: usize = 0xB0;
const REG_SVR: usize = 0xF0;
const REG_LINT0: usize = 0x350;
const SVR_ENABLE: u32 = 1 << 8;
const LVT_EXTINT: u32 = 0x700;

/// Vector of the APIC's spurious interrupts (no EOI for them).
pub const SPURIOUS_VECTOR: u8 = 0xFF;
/// Vector of the local APIC timer (tickless mode, [`super::timer`]), just
/// past the MSI-X vectors (`super::interrupts::MSI_BASE`).
pub const APIC_TIMER_VECTOR: u8 = 52;

/// MMIO base of the enabled APIC (0 = not enabled).
static BASE: AtomicU64 = AtomicU64::new(0);

fn read(reg: usize) -> u32 {
    let b = BASE.load(Ordering::Relaxed);
    debug_assert!(b != 0);
    // SAFETY: `b` is the APIC's 4 KiB register page, identity mapped by
    // `init` (uncached) and never referenced by Rust references; `reg` is
    // one of the 16-byte aligned register offsets above; xAPIC registers
    // take 32-bit accesses.
    unsafe { core::ptr::read_volatile((b as usize + reg) as *const u32) }
}

fn write(reg: usize, v: u32) {
    let b = BASE.load(Ordering::Relaxed);
    debug_assert!(b != 0);
    // SAFETY: see `read`.
    unsafe { core::ptr::write_volatile((b as usize + reg) as *mut u32, v) }
}

/// Enable the local APIC in xAPIC mode: software-enable it with the
/// spurious vector, keep LINT0 as ExtINT (the 8259's tick and INTx lines
/// keep working) and accept every priority. Returns its MMIO base.
pub fn init() -> Result<u64, &'static str> {
    if BASE.load(Ordering::Relaxed) != 0 {
        return Ok(BASE.load(Ordering::Relaxed));
    }
    let mut msr = Msr::new(IA32_APIC_BASE);
    // SAFETY: IA32_APIC_BASE exists on every x86_64 CPU (QEMU's `-cpu max`
    // has an APIC); reading it has no side effects.
    let v = unsafe { msr.read() };
    if v & BASE_X2APIC != 0 {
        return Err("the local APIC is in x2APIC mode (not supported)");
    }
    let base = v & 0x000F_FFFF_FFFF_F000;
    if base == 0 {
        return Err("IA32_APIC_BASE holds no base address");
    }
    if v & BASE_ENABLE == 0 {
        // SAFETY: setting the global enable bit at the same base only turns
        // the APIC on; nothing else depends on it being off.
        unsafe { msr.write(v | BASE_ENABLE) };
    }
    crate::mm::paging::identity_map(base, 4096, true)?;
    BASE.store(base, Ordering::Relaxed);
    write(REG_TPR, 0);
    write(REG_LINT0, LVT_EXTINT);
    write(REG_SVR, SVR_ENABLE | SPURIOUS_VECTOR as u32);
    Ok(base)
}

/// Is the local APIC enabled ([`init`] ran)?
pub fn enabled() -> bool {
    BASE.load(Ordering::Relaxed) != 0
}

/// The APIC id of this CPU.
pub fn id() -> u8 {
    (read(REG_ID) >> 24) as u8
}

/// The MSI address that targets this CPU (fixed delivery, physical mode).
pub fn msi_address() -> u64 {
    0xFEE0_0000 | (id() as u64) << 12
}

/// Signal the end of an APIC-delivered interrupt (MSI/MSI-X).
pub fn eoi() {
    if BASE.load(Ordering::Relaxed) != 0 {
        write(REG_EOI, 0);
    }
}

const REG_LVT_TIMER: usize = 0x320;
const REG_TIMER_INIT: usize = 0x380;
const REG_TIMER_CURRENT: usize = 0x390;
const REG_TIMER_DIVIDE: usize = 0x3E0;
/// Divide configuration "by 1".
const DIVIDE_BY_1: u32 = 0b1011;
const LVT_MASKED: u32 = 1 << 16;

/// Calibrate the APIC timer against the TSC over `us` microseconds: its
/// counts per microsecond (QEMU's counts at 1 GHz with divide 1), at least
/// 1. Leaves the timer masked and stopped.
pub fn timer_calibrate(us: u64) -> u64 {
    write(REG_LVT_TIMER, LVT_MASKED | APIC_TIMER_VECTOR as u32);
    write(REG_TIMER_DIVIDE, DIVIDE_BY_1);
    write(REG_TIMER_INIT, u32::MAX);
    let t0 = super::time::now_ns();
    while super::time::now_ns() - t0 < us * 1000 {
        core::hint::spin_loop();
    }
    let elapsed = u32::MAX - read(REG_TIMER_CURRENT);
    let ns = (super::time::now_ns() - t0).max(1);
    write(REG_TIMER_INIT, 0);
    (elapsed as u64 * 1000 / ns).max(1)
}

/// Arm the APIC timer once: interrupt [`APIC_TIMER_VECTOR`]
/// after `counts` (replaces any armed count; 0 stops it).
pub fn timer_oneshot(counts: u32) {
    write(REG_LVT_TIMER, APIC_TIMER_VECTOR as u32); // one-shot, unmasked
    write(REG_TIMER_INIT, counts);
}
