//! Interrupts: assembly entry stubs (stable Rust has no `x86-interrupt`
//! ABI), the IDT, the 8259 PICs and the PIT tick that wakes halted kernels.
//!
//! Every stub pushes a uniform [`TrapFrame`] and calls [`isr_dispatch`].
//! CPU exceptions print a report (vector, RIP, CR2, error code, registers)
//! and the panic sentinel, then leave QEMU with the failure status.

use core::sync::atomic::{AtomicU16, AtomicU64, Ordering};

use spin::Once;
use x86_64::structures::idt::InterruptDescriptorTable;
use x86_64::VirtAddr;

use super::apic::APIC_TIMER_VECTOR;
use super::{inb, outb};

/// Vector of the PIT tick (IRQ 0 after remapping).
pub const TIMER_VECTOR: u8 = 32;
static TICKS: AtomicU64 = AtomicU64::new(0);
static WINDOW_FAULT: Once<fn(u64) -> bool> = Once::new();

/// Register the handler of page faults inside the mmap windows
/// (`mm::paging::WINDOW`). It runs in the fault, with interrupts off, and
/// returns true once the page is mapped (the access is then retried).
pub fn set_window_fault_handler(f: fn(u64) -> bool) {
    WINDOW_FAULT.call_once(|| f);
}
/// Device IRQ lines (bit per 8259 line) whose interrupts only wake a
/// halted CPU: the handler masks the line and records it; the driver
/// acknowledges the device and calls [`rearm_irq`] before halting again.
static DEVICE_IRQS: AtomicU16 = AtomicU16::new(0);
/// Device interrupts taken (all claimed lines).
static DEVICE_IRQ_COUNT: AtomicU64 = AtomicU64::new(0);

/// Device interrupts taken since boot.
pub fn device_irqs() -> u64 {
    DEVICE_IRQ_COUNT.load(Ordering::Relaxed)
}
/// Device lines that fired since they were last re-armed.
static IRQ_FIRED: AtomicU16 = AtomicU16::new(0);
static TICK_HZ: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(1000);
static TICK_HOOK: Once<fn()> = Once::new();
/// A second tick hook for drivers (the doorbell's peer-id upkeep), so the
/// role's own hook stays its own.
static TICK_DRIVER_HOOK: Once<fn()> = Once::new();
/// First vector of the APIC-delivered (MSI-X) interrupts.
pub const MSI_BASE: u8 = 48;
/// How many MSI-X vectors have entry stubs (`MSI_BASE..MSI_BASE+MSI_COUNT`).
pub const MSI_COUNT: u8 = 4;
/// Vector of the directory disk's completion interrupt (virtio-blk MSI-X
/// entry 0, [`crate::drivers::virtio_irq`]).
pub const DISK_VECTOR: u8 = 53;
/// Disk completion interrupts taken.
static DISK_IRQS: AtomicU64 = AtomicU64::new(0);

/// Disk completion interrupts taken since boot.
pub fn disk_irqs() -> u64 {
    DISK_IRQS.load(Ordering::Relaxed)
}
static MSI_HANDLER: Once<fn(u8)> = Once::new();

/// Register the handler of the MSI-X vectors; it gets the index
/// `vector - MSI_BASE` and runs with interrupts off (keep it tiny). The
/// APIC EOI is sent after it returns.
pub fn set_msi_handler(f: fn(u8)) {
    MSI_HANDLER.call_once(|| f);
}

/// Register a driver's tick hook (runs after the role's, interrupts off).
pub fn set_driver_tick_hook(f: fn()) {
    TICK_DRIVER_HOOK.call_once(|| f);
}

core::arch::global_asm!(
    r#"
    .pushsection .text.isr, "ax"
    .macro ISR_NOERR n
    .global isr_stub_\n
isr_stub_\n:
    push 0
    push \n
    jmp isr_common
    .endm
    .macro ISR_ERR n
    .global isr_stub_\n
isr_stub_\n:
    push \n
    jmp isr_common
    .endm

    ISR_NOERR 0
    ISR_NOERR 1
    ISR_NOERR 2
    ISR_NOERR 3
    ISR_NOERR 4
    ISR_NOERR 5
    ISR_NOERR 6
    ISR_NOERR 7
    ISR_ERR 8
    ISR_ERR 10
    ISR_ERR 11
    ISR_ERR 12
    ISR_ERR 13
    ISR_ERR 14
    ISR_NOERR 16
    ISR_ERR 17
    ISR_NOERR 18
    ISR_NOERR 19
    ISR_NOERR 20
    ISR_ERR 21
    ISR_NOERR 28
    ISR_ERR 29
    ISR_ERR 30
    .irp n, 32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47
    ISR_NOERR \n
    .endr
    .irp n, 48,49,50,51,52,53,255
    ISR_NOERR \n
    .endr

isr_common:
    push rax
    push rbx
    push rcx
    push rdx
    push rsi
    push rdi
    push rbp
    push r8
    push r9
    push r10
    push r11
    push r12
    push r13
    push r14
    push r15
    mov rdi, rsp
    cld
    call isr_dispatch
    pop r15
    pop r14
    pop r13
    pop r12
    pop r11
    pop r10
    pop r9
    pop r8
    pop rbp
    pop rdi
    pop rsi
    pop rdx
    pop rcx
    pop rbx
    pop rax
    add rsp, 16
    iretq
    .popsection
    "#
);

/// Registers saved by the entry stub, in stack order.
#[repr(C)]
#[derive(Debug)]
pub struct TrapFrame {
    r15: u64,
    r14: u64,
    r13: u64,
    r12: u64,
    r11: u64,
    r10: u64,
    r9: u64,
    r8: u64,
    rbp: u64,
    rdi: u64,
    rsi: u64,
    rdx: u64,
    rcx: u64,
    rbx: u64,
    rax: u64,
    vector: u64,
    error: u64,
    rip: u64,
    cs: u64,
    rflags: u64,
    rsp: u64,
    ss: u64,
}

extern "C" {
    fn isr_stub_0();
    fn isr_stub_1();
    fn isr_stub_2();
    fn isr_stub_3();
    fn isr_stub_4();
    fn isr_stub_5();
    fn isr_stub_6();
    fn isr_stub_7();
    fn isr_stub_8();
    fn isr_stub_10();
    fn isr_stub_11();
    fn isr_stub_12();
    fn isr_stub_13();
    fn isr_stub_14();
    fn isr_stub_16();
    fn isr_stub_17();
    fn isr_stub_18();
    fn isr_stub_19();
    fn isr_stub_20();
    fn isr_stub_21();
    fn isr_stub_28();
    fn isr_stub_29();
    fn isr_stub_30();
    fn isr_stub_32();
    fn isr_stub_33();
    fn isr_stub_34();
    fn isr_stub_35();
    fn isr_stub_36();
    fn isr_stub_37();
    fn isr_stub_38();
    fn isr_stub_39();
    fn isr_stub_40();
    fn isr_stub_41();
    fn isr_stub_42();
    fn isr_stub_43();
    fn isr_stub_44();
    fn isr_stub_45();
    fn isr_stub_46();
    fn isr_stub_47();
    fn isr_stub_48();
    fn isr_stub_49();
    fn isr_stub_50();
    fn isr_stub_51();
    fn isr_stub_52();
    fn isr_stub_53();
    fn isr_stub_255();
}

static IDT: Once<InterruptDescriptorTable> = Once::new();

fn addr(f: unsafe extern "C" fn()) -> VirtAddr {
    VirtAddr::new(f as *const () as u64)
}

/// Build and load the IDT.
pub fn init_idt() {
    let idt = IDT.call_once(|| {
        let mut idt = InterruptDescriptorTable::new();
        // SAFETY: every address is an assembly stub above that saves all
        // registers, calls `isr_dispatch` and returns with `iretq` after
        // dropping the vector and error words it pushed (or the CPU pushed),
        // which is what an IDT gate requires; IST 0 exists in the TSS.
        unsafe {
            idt.divide_error.set_handler_addr(addr(isr_stub_0));
            idt.debug.set_handler_addr(addr(isr_stub_1));
            idt.non_maskable_interrupt
                .set_handler_addr(addr(isr_stub_2));
            idt.breakpoint.set_handler_addr(addr(isr_stub_3));
            idt.overflow.set_handler_addr(addr(isr_stub_4));
            idt.bound_range_exceeded.set_handler_addr(addr(isr_stub_5));
            idt.invalid_opcode.set_handler_addr(addr(isr_stub_6));
            idt.device_not_available.set_handler_addr(addr(isr_stub_7));
            idt.double_fault
                .set_handler_addr(addr(isr_stub_8))
                .set_stack_index(super::gdt::DOUBLE_FAULT_IST);
            idt.invalid_tss.set_handler_addr(addr(isr_stub_10));
            idt.segment_not_present.set_handler_addr(addr(isr_stub_11));
            idt.stack_segment_fault.set_handler_addr(addr(isr_stub_12));
            idt.general_protection_fault
                .set_handler_addr(addr(isr_stub_13));
            idt.page_fault.set_handler_addr(addr(isr_stub_14));
            idt.x87_floating_point.set_handler_addr(addr(isr_stub_16));
            idt.alignment_check.set_handler_addr(addr(isr_stub_17));
            idt.machine_check.set_handler_addr(addr(isr_stub_18));
            idt.simd_floating_point.set_handler_addr(addr(isr_stub_19));
            idt.virtualization.set_handler_addr(addr(isr_stub_20));
            idt.cp_protection_exception
                .set_handler_addr(addr(isr_stub_21));
            idt.hv_injection_exception
                .set_handler_addr(addr(isr_stub_28));
            idt.vmm_communication_exception
                .set_handler_addr(addr(isr_stub_29));
            idt.security_exception.set_handler_addr(addr(isr_stub_30));
            let irqs: [unsafe extern "C" fn(); 16] = [
                isr_stub_32,
                isr_stub_33,
                isr_stub_34,
                isr_stub_35,
                isr_stub_36,
                isr_stub_37,
                isr_stub_38,
                isr_stub_39,
                isr_stub_40,
                isr_stub_41,
                isr_stub_42,
                isr_stub_43,
                isr_stub_44,
                isr_stub_45,
                isr_stub_46,
                isr_stub_47,
            ];
            for (i, f) in irqs.iter().enumerate() {
                idt[32 + i as u8].set_handler_addr(addr(*f));
            }
            let msis: [unsafe extern "C" fn(); MSI_COUNT as usize] =
                [isr_stub_48, isr_stub_49, isr_stub_50, isr_stub_51];
            for (i, f) in msis.iter().enumerate() {
                idt[MSI_BASE + i as u8].set_handler_addr(addr(*f));
            }
            idt[APIC_TIMER_VECTOR].set_handler_addr(addr(isr_stub_52));
            idt[DISK_VECTOR].set_handler_addr(addr(isr_stub_53));
            idt[super::apic::SPURIOUS_VECTOR].set_handler_addr(addr(isr_stub_255));
        }
        idt
    });
    idt.load();
}

/// Remap the 8259 PICs to vectors 32..48 and unmask only IRQ 0, then
/// program the PIT for `hz` periodic ticks. `hook` runs on every tick
/// (interrupts off; keep it tiny).
pub fn init_timer(hook: fn(), hz: u32) {
    TICK_HOOK.call_once(|| hook);
    TICK_HZ.store(hz, Ordering::Relaxed);
    // ICW1..ICW4, cascade on IRQ 2, 8086 mode.
    outb(0x20, 0x11);
    outb(0xA0, 0x11);
    outb(0x21, 32);
    outb(0xA1, 40);
    outb(0x21, 4);
    outb(0xA1, 2);
    outb(0x21, 0x01);
    outb(0xA1, 0x01);
    outb(0x21, 0xFE); // only IRQ 0 (claimed device lines unmask when re-armed)
    outb(0xA1, 0xFF);
    let divisor = (super::time::PIT_HZ / hz.max(19) as u64).min(0xFFFF) as u16;
    outb(0x43, 0x34); // channel 0, lo/hi, rate generator
    outb(0x40, divisor as u8);
    outb(0x40, (divisor >> 8) as u8);
}

fn set_pic_mask(line: u8, masked: bool) {
    let port = if line < 8 { 0x21 } else { 0xA1 };
    let bit = 1u8 << (line % 8);
    let m = inb(port);
    outb(port, if masked { m | bit } else { m & !bit });
}

/// Tickless mode (doorbells): remap the PICs as [`init_timer`] does, stop
/// the PIT (one-shot mode, IRQ 0 masked: QEMU then runs no timer for it)
/// and let the local APIC timer run `hook` every `period_ns` and end the
/// halts at their deadlines ([`super::timer`]). Needs the local APIC.
pub fn init_tickless(hook: fn(), period_ns: u64) {
    init_timer(hook, 1000);
    super::cpu::without_interrupts(|| {
        outb(0x43, 0x30); // channel 0, lo/hi, mode 0 (one count, no reload)
        outb(0x40, 0xFF);
        outb(0x40, 0xFF);
        set_pic_mask(0, true);
        TICK_HZ.store(
            (1_000_000_000 / period_ns.max(1)).max(1) as u32,
            Ordering::Relaxed,
        );
        super::timer::init(period_ns);
    });
}

/// Route a level-triggered device line (8259 line 1..15, e.g. a PCI INTx
/// line as SeaBIOS programmed it) to "wake the CPU": the line fires at most
/// once per [`rearm_irq`]. Lines 0 (the tick) and 2 (cascade) are refused.
pub fn claim_irq(line: u8) -> bool {
    if line == 0 || line == 2 || line > 15 {
        return false;
    }
    super::cpu::without_interrupts(|| {
        DEVICE_IRQS.fetch_or(1 << line, Ordering::Relaxed);
        if line >= 8 {
            set_pic_mask(2, false);
        }
    });
    true
}

/// Unmask a claimed line again (after the device was acknowledged, so a
/// still-asserted line means new work).
pub fn rearm_irq(line: u8) {
    if line > 15 || DEVICE_IRQS.load(Ordering::Relaxed) & (1 << line) == 0 {
        return;
    }
    super::cpu::without_interrupts(|| {
        IRQ_FIRED.fetch_and(!(1 << line), Ordering::Relaxed);
        set_pic_mask(line, false);
        if line >= 8 {
            // The cascade, in case the PIC was reprogrammed since the claim.
            set_pic_mask(2, false);
        }
    });
}

/// Has claimed `line` fired since it was last re-armed? It is then masked
/// again, so a CPU that halts now sleeps through the device's next
/// interrupt: a waiter checks this (with interrupts off) before it halts
/// and re-arms instead. An edge-triggered line (the UART's) fires at once
/// when re-armed if it latched an edge while masked, even if the driver
/// has since taken the data that raised it.
pub fn irq_fired(line: u8) -> bool {
    line <= 15 && IRQ_FIRED.load(Ordering::Relaxed) & (1 << line) != 0
}

/// The tick rate.
pub fn tick_hz() -> u32 {
    TICK_HZ.load(Ordering::Relaxed)
}

/// Timer ticks since the PIT was started.
pub fn ticks() -> u64 {
    TICKS.load(Ordering::Relaxed)
}

const NAMES: [&str; 32] = [
    "divide error",
    "debug",
    "NMI",
    "breakpoint",
    "overflow",
    "bound range exceeded",
    "invalid opcode",
    "device not available",
    "double fault",
    "coprocessor segment overrun",
    "invalid TSS",
    "segment not present",
    "stack-segment fault",
    "general protection fault",
    "page fault",
    "reserved",
    "x87 floating point",
    "alignment check",
    "machine check",
    "SIMD floating point",
    "virtualization",
    "control protection",
    "reserved",
    "reserved",
    "reserved",
    "reserved",
    "reserved",
    "reserved",
    "hypervisor injection",
    "VMM communication",
    "security",
    "reserved",
];

/// A tick (the PIT's, or a tickless kernel's housekeeping beat).
fn run_tick_hooks() {
    TICKS.fetch_add(1, Ordering::Relaxed);
    if let Some(h) = TICK_HOOK.get() {
        h();
    }
    if let Some(h) = TICK_DRIVER_HOOK.get() {
        h();
    }
}

#[unsafe(no_mangle)]
extern "C" fn isr_dispatch(f: &mut TrapFrame) {
    let v = f.vector;
    if v == TIMER_VECTOR as u64 {
        if !super::timer::tickless() {
            run_tick_hooks();
        }
        outb(0x20, 0x20);
        return;
    }
    if v == APIC_TIMER_VECTOR as u64 {
        if super::timer::on_interrupt() {
            run_tick_hooks();
        }
        super::apic::eoi();
        return;
    }
    if (MSI_BASE as u64..(MSI_BASE + MSI_COUNT) as u64).contains(&v) {
        if let Some(h) = MSI_HANDLER.get() {
            h((v - MSI_BASE as u64) as u8);
        }
        super::apic::eoi();
        return;
    }
    if v == DISK_VECTOR as u64 {
        // Its only job is to end the halt of a directory waiting for the
        // disk; the waiter polls the used ring.
        DISK_IRQS.fetch_add(1, Ordering::Relaxed);
        super::apic::eoi();
        return;
    }
    if v == super::apic::SPURIOUS_VECTOR as u64 {
        return; // APIC spurious interrupt: no EOI
    }
    if (33..48).contains(&v) && DEVICE_IRQS.load(Ordering::Relaxed) & (1 << (v - 32)) != 0 {
        // A claimed device line: mask it until the driver re-arms it (it
        // stays asserted until the device is acknowledged).
        let line = (v - 32) as u8;
        set_pic_mask(line, true);
        IRQ_FIRED.fetch_or(1 << line, Ordering::Relaxed);
        DEVICE_IRQ_COUNT.fetch_add(1, Ordering::Relaxed);
        if v >= 40 {
            outb(0xA0, 0x20);
        }
        outb(0x20, 0x20);
        return;
    }
    if (33..48).contains(&v) {
        // Masked IRQs can still show up as spurious 7 / 15: acknowledge.
        if v >= 40 {
            outb(0xA0, 0x20);
        }
        outb(0x20, 0x20);
        return;
    }
    let cr2 = x86_64::registers::control::Cr2::read_raw();
    if v == 14 && crate::mm::paging::WINDOW.contains(&cr2) {
        if let Some(h) = WINDOW_FAULT.get() {
            if h(cr2) {
                return; // mapped: retry the access
            }
        }
    }
    let name = NAMES.get(v as usize).copied().unwrap_or("unknown");
    crate::klog::fatal(format_args!(
        "CPU exception {v} ({name}) at rip={:#x} error={:#x} cr2={cr2:#x}\n  \
         rsp={:#x} rbp={:#x} rflags={:#x} cs={:#x}\n  \
         rax={:#x} rbx={:#x} rcx={:#x} rdx={:#x} rsi={:#x} rdi={:#x}\n  \
         r8={:#x} r9={:#x} r10={:#x} r11={:#x} r12={:#x} r13={:#x} r14={:#x} r15={:#x}",
        f.rip,
        f.error,
        f.rsp,
        f.rbp,
        f.rflags,
        f.cs,
        f.rax,
        f.rbx,
        f.rcx,
        f.rdx,
        f.rsi,
        f.rdi,
        f.r8,
        f.r9,
        f.r10,
        f.r11,
        f.r12,
        f.r13,
        f.r14,
        f.r15
    ));
}
