//! The fabric every onecopy instance shares: what lives in the shared
//! region and what travels between the directory and the nodes, defined
//! once for both sides.
//!
//! * [`shm`]: access to the shared region (no references into it; a heap
//!   fake for host tests).
//! * [`layout`]: the versioned header of the region and where every area
//!   lives in it.
//! * [`doorbell`]: the peer-id map and sleeping words of the doorbells.
//! * [`ring`]: single-producer/single-consumer rings of 64-byte descriptors
//!   (DPC's Notification Manager channels), every index read from the
//!   region checked.
//! * [`bulk`]: bulk slots, where a request's variable-length data travels.
//! * [`proto`]: the messages (requests, responses, page requests, notices).
//! * [`netwire`]: `net` mode's framing of the same messages over a stream;
//!   [`netorder`]: a connection's answers released in request order.
//! * [`config`]: boot options (the kernel command line).
//! * [`rng`]: the deterministic generator of the simulation, tests and fio.
//! * [`trace`]: the protocol timeline, a per-instance ring of events.
//! * [`calibrate`]: the fixed workload that measures how much slower a
//!   guest's CPU runs than the host's (the testbed's time dilation).
#![cfg_attr(not(test), no_std)]
// Unsafe code lives in `shm` only (raw access to the mapped region).
#![deny(unsafe_code)]

extern crate alloc;

/// The page: the unit of the page cache, of a frame in the shared region,
/// of an mmap window mapping and of a disk block (one block per page).
/// Every other size of a page in the tree is this constant.
pub const PAGE_SIZE: usize = 4096;

pub mod bulk;
pub mod calibrate;
pub mod config;
pub mod doorbell;
pub mod fence;
pub mod layout;
pub mod netorder;
pub mod netwire;
pub mod proto;
pub mod ring;
pub mod rng;
#[allow(unsafe_code)]
pub mod shm;
pub mod trace;
