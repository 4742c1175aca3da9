//! onecopy-ivshmem-server: QEMU's ivshmem-server protocol for the
//! `ivshmem-doorbell` device (Debian's QEMU does not ship the server).
//!
//! - [`peers`]: the peer table, id allocation and the message plan (pure).
//! - [`outbox`]: per-client bounded send queue with a stall clock (pure).
//! - [`server`]: the epoll loop over the listening socket, the clients and
//!   a signalfd.
//! - [`start`]: opening the shm file, claiming the socket, the pid file.
//! - [`fencer`]: fencing failed nodes (`--fence-run-dir`): kill the QEMU
//!   of a node the directory declared failed, then confirm in the region.
#![forbid(unsafe_code)]

pub mod cli;
pub mod fencer;
pub mod log;
pub mod outbox;
pub mod peers;
pub mod server;
pub mod start;

use cli::Command;
use log::{Log, PROG};

/// Run with the arguments after the program name; returns the exit status
/// (0 after a signal, 1 on a start or run-time failure, 2 for bad usage).
pub fn main_with_args<I>(args: I) -> i32
where
    I: IntoIterator<Item = String>,
{
    let opts = match cli::parse(args) {
        Ok(Command::Help) => {
            println!("{}", cli::usage());
            return 0;
        }
        Ok(Command::Run(o)) => o,
        Err(e) => {
            eprintln!("{PROG}: error: {e}");
            return 2;
        }
    };
    let log = Log::new(opts.verbose);
    match start::run(&opts, log) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{PROG}: error: {e}");
            1
        }
    }
}
