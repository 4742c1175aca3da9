//! x86_64 specifics: port I/O, the serial console, GDT/TSS, interrupts,
//! timers (PIT + TSC) and leaving QEMU.

pub mod apic;
pub mod cpu;
pub mod gdt;
pub mod interrupts;
pub mod pvh;
pub mod serial;
pub mod time;
pub mod timer;

use x86_64::instructions::port::Port;

/// Write a byte to an I/O port.
pub fn outb(port: u16, v: u8) {
    // SAFETY: the kernel is the only software on this virtual machine and
    // only touches legacy ports of devices it owns (COM1, PIC, PIT, the
    // PCI configuration ports and isa-debug-exit).
    unsafe { Port::<u8>::new(port).write(v) }
}

/// Read a byte from an I/O port.
pub fn inb(port: u16) -> u8 {
    // SAFETY: see `outb`.
    unsafe { Port::<u8>::new(port).read() }
}

/// Write a 32-bit word to an I/O port.
pub fn outl(port: u16, v: u32) {
    // SAFETY: see `outb`.
    unsafe { Port::<u32>::new(port).write(v) }
}

/// Read a 32-bit word from an I/O port.
pub fn inl(port: u16) -> u32 {
    // SAFETY: see `outb`.
    unsafe { Port::<u32>::new(port).read() }
}

/// Exit status values written to `isa-debug-exit`; QEMU exits with
/// `(value << 1) | 1`, so success is 1 and failure is 3.
#[derive(Clone, Copy)]
#[repr(u8)]
pub enum ExitCode {
    /// Clean shutdown.
    Success = 0,
    /// Panic or fatal exception.
    Failure = 1,
}

/// Leave QEMU through `isa-debug-exit` (iobase 0xf4). Never returns; if the
/// device is missing the CPU halts forever.
pub fn exit(code: ExitCode) -> ! {
    outb(0xf4, code as u8);
    cpu::halt_forever()
}
