//! The in-guest side of onecopy that is not the kernel: the interactive
//! shell and (later) the benchmarks and application workloads.
//!
//! Everything here is written against the small [`os::Os`] trait, so the
//! kernel links it unchanged and the host unit tests run it over an
//! in-memory mock.
//!
//! * [`os`]: the OS interface the shell needs.
//! * [`line`](mod@line): turns raw console bytes into lines (echo, backspace, ...).
//! * [`shell`]: the command interpreter and its command table.
//! * [`parse`]: word splitting, paths, sizes and counts.
//! * [`pattern`]: the deterministic file-content pattern written by `fill`.
//! * [`stats`]: percentiles and latency summaries.
//! * [`task`]: the cooperative executor: fio jobs and workloads as tasks
//!   whose I/Os are flushed together.
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

extern crate alloc;

pub mod app;
pub mod fio;
pub mod line;
pub mod meta;
pub mod os;
pub mod parse;
pub mod pattern;
pub mod shell;
pub mod stats;
pub mod task;

#[cfg(test)]
mod mock;
