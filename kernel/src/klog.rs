//! Console output and the `log` facade: every line carries a timestamp and
//! the instance's name (`dir`, `n1`, ...). Fatal errors print a report and
//! the panic sentinel, then leave QEMU with the failure status.

use core::fmt::{self, Write};

use spin::{Mutex, Once};

use crate::arch::{self, cpu, serial, time};

/// The line the host looks for to detect a kernel panic or fatal exception.
pub const PANIC_SENTINEL: &str = "!!! ONECOPY PANIC !!!";

static CONSOLE: Mutex<()> = Mutex::new(());
static WHO: Once<&'static str> = Once::new();

struct Serial;

impl Write for Serial {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        serial::write_bytes(s.as_bytes());
        Ok(())
    }
}

/// Print to the console (no prefix), serialised with log lines.
pub fn print(args: fmt::Arguments<'_>) {
    cpu::without_interrupts(|| {
        let _g = CONSOLE.lock();
        let _ = Serial.write_fmt(args);
    });
}

/// Print a string to the console.
pub fn print_str(s: &str) {
    print(format_args!("{s}"));
}

struct Logger;

impl log::Log for Logger {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::max_level()
    }

    fn log(&self, r: &log::Record<'_>) {
        if !self.enabled(r.metadata()) {
            return;
        }
        let ns = time::now_ns();
        let who = WHO.get().copied().unwrap_or("boot");
        print(format_args!(
            "[{:>5}.{:06}] {} {:<5} {}\n",
            ns / 1_000_000_000,
            (ns / 1000) % 1_000_000,
            who,
            r.level(),
            r.args()
        ));
    }

    fn flush(&self) {}
}

static LOGGER: Logger = Logger;

/// Install the logger (before anything logs).
pub fn init() {
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(log::LevelFilter::Info);
}

/// Name this instance in log lines (once the role is known).
pub fn set_who(who: &'static str) {
    WHO.call_once(|| who);
}

/// Print a fatal report and the sentinel, then exit with failure. Does not
/// take the console lock (the failure may have happened while holding it).
pub fn fatal(args: fmt::Arguments<'_>) -> ! {
    x86_64::instructions::interrupts::disable();
    let who = WHO.get().copied().unwrap_or("boot");
    let _ = Serial.write_fmt(format_args!("\n{who}: {args}\n{PANIC_SENTINEL}\n"));
    arch::exit(arch::ExitCode::Failure)
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    fatal(format_args!(
        "kernel panic: {info}\n{}",
        crate::mm::HeapReport
    ))
}

/// Write raw bytes to the console (no newline translation), e.g. echo.
pub fn write_raw(b: &[u8]) {
    cpu::without_interrupts(|| {
        let _g = CONSOLE.lock();
        for &c in b {
            serial::write_byte(c);
        }
    });
}
