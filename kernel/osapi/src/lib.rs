//! The types every layer of a node shares: the applications (`userland`),
//! the node's data path (`nodepath`) and the kernel that joins them.
//! File descriptors, open flags, I/O spans, metadata calls, cache
//! controls, the keys of the stats tables, and the error type
//! ([`Errno`], defined with the protocol in `fabric`).
//!
//! It is a leaf (it depends on `fabric` alone) so dependencies point
//! down: the data path takes these types from here, not from the
//! applications. The OS interface itself (the `Os` trait the shell and
//! the workloads are written against) stays in `userland::os`, which
//! re-exports everything below under its old paths.
//!
//! * [`io`]: descriptors, open flags, batched, split and mapped I/Os.
//! * [`meta`]: metadata calls in two halves.
//! * [`cache`]: eviction controls, task groups, miss counters.
//! * [`cluster`]: membership as one node sees it.
//! * [`keys`]: the keys of the `cache stats` and `dir stats` tables.
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

extern crate alloc;

pub mod cache;
pub mod cluster;
pub mod io;
pub mod keys;
pub mod meta;

pub use fabric::config::PolicyName;
pub use fabric::proto::{Attr, DirEntry, Errno, FileKind, LocalityRange, MissStats};
