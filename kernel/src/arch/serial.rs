//! 16550 UART on COM1: the console of every instance.

use super::{inb, outb};

const COM1: u16 = 0x3F8;
const LSR: u16 = COM1 + 5;

/// Program 115200 8N1 with FIFOs, interrupts off (the console is polled).
pub fn init() {
    outb(COM1 + 1, 0x00); // no interrupts
    outb(COM1 + 3, 0x80); // DLAB
    outb(COM1, 0x01); // divisor 1 = 115200 baud
    outb(COM1 + 1, 0x00);
    outb(COM1 + 3, 0x03); // 8N1
    outb(COM1 + 2, 0xC7); // FIFO on, clear, 14-byte threshold
    outb(COM1 + 4, 0x0B); // DTR, RTS, OUT2
}

/// Send one byte, waiting for room in the transmitter.
pub fn write_byte(b: u8) {
    // Bounded wait: a missing UART must not hang the kernel.
    for _ in 0..100_000 {
        if inb(LSR) & 0x20 != 0 {
            break;
        }
        core::hint::spin_loop();
    }
    outb(COM1, b);
}

/// Send bytes, turning "\n" into "\r\n".
pub fn write_bytes(s: &[u8]) {
    for &b in s {
        if b == b'\n' {
            write_byte(b'\r');
        }
        write_byte(b);
    }
}

/// A received byte, if one is waiting.
pub fn try_read() -> Option<u8> {
    (inb(LSR) & 1 != 0).then(|| inb(COM1))
}

/// Interrupt on received data (IRQ 4), so a node that sleeps until a
/// doorbell also wakes for console input. The caller claims and re-arms
/// the line ([`super::interrupts::claim_irq`]).
pub fn enable_rx_irq() {
    outb(COM1 + 1, 0x01);
}

/// The ISA line of COM1.
pub const IRQ: u8 = 4;

/// Is a received byte waiting?
pub fn rx_ready() -> bool {
    inb(LSR) & 1 != 0
}
