//! The directory's console: the directory runs no shell, but its serial
//! console takes the protocol timeline's commands (`trace on|off|clear|
//! dump`, the same as the nodes' shell) with the shell's line protocol
//! (echo, output, `ok` or `error: ...`, then the prompt `n0> `), so the
//! host's console client (`onecopy-ctl`, `qemu-run.sh trace`) talks to it
//! as to a node.
//!
//! Input is polled with the membership sweep (every 50 us while the
//! directory works) and after every wakeup: the receive interrupt wakes
//! a sleeping directory, so a command waits at most one sweep.

use userland::line::LineEditor;

use crate::arch::{cpu, interrupts, serial, time};
use crate::klog;

/// The prompt of the directory's console (instance 0).
pub const PROMPT: &str = "n0> ";

pub(super) struct DirConsole {
    editor: LineEditor,
}

impl DirConsole {
    /// Take the console; with `wake`, its receive interrupt wakes a
    /// sleeping directory.
    pub(super) fn new(wake: bool) -> DirConsole {
        if wake {
            serial::enable_rx_irq();
            interrupts::claim_irq(serial::IRQ);
        }
        // No prompt yet: a client types an empty line first and gets one
        // (an unprompted one would put the next log line after it).
        DirConsole {
            editor: LineEditor::new(),
        }
    }

    /// Take what was typed (a bounded number of bytes per call, so the
    /// serving loop is never held long) and run complete lines.
    pub(super) fn poll(&mut self) {
        for _ in 0..64 {
            let Some(b) = serial::try_read() else {
                break;
            };
            let mut echo = |bytes: &[u8]| klog::write_raw(bytes);
            if let Some(line) = self.editor.feed(b, &mut echo) {
                run(line.trim());
                klog::print_str(PROMPT);
            }
        }
        if interrupts::irq_fired(serial::IRQ) {
            interrupts::rearm_irq(serial::IRQ);
        }
    }
}

fn run(line: &str) {
    if line.is_empty() {
        return;
    }
    let mut words = line.split_whitespace();
    let result = match (words.next(), words.next(), words.next()) {
        (Some("trace"), Some(arg), None) => {
            fabric::trace::command(arg, 0, time::tsc_hz(), cpu::rdtsc(), |l| {
                klog::print(format_args!("{l}\n"))
            })
        }
        (Some("trace"), _, _) => Err("usage: trace on|off|clear|dump"),
        _ => Err("the directory's console takes only: trace on|off|clear|dump"),
    };
    match result {
        Ok(()) => klog::print_str("ok\n"),
        Err(e) => klog::print(format_args!("error: {e}\n")),
    }
}
