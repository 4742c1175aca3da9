//! The node side of onecopy (DPC's client): the whole node data path as
//! host-testable logic, linked into the kernel unchanged. The kernel
//! implements the small traits of [`env`] over its devices; host tests
//! fake them ([`rig`]: a directory and nodes in one process).
//!
//! * [`env`]: what the data path needs from its host (clock and wait
//!   hook, page mapper, shared region, `net` mode's transport).
//! * [`link`]: DPC's Node Manager: membership, calls on the rings with
//!   the node's ring endpoints ([`link::client`]) and the one wait routine
//!   ([`link::wait`]: timeouts, silent directory), the file-server
//!   transport. Its `client` and `wait` are also `crate::client` and
//!   `crate::wait`.
//! * [`vfs`]: descriptors, metadata, sizes; file data through a
//!   [`vfs::DataPath`] chosen once from the mode:
//! * [`singlecopy`]: `strong` and `relaxed` (DPC), with the mmap windows;
//! * [`private`]: `private` and `net` (per-node caches).
//! * [`node`]: one node, the operations the shell reaches.
//! * [`control`]: eviction controls (`cache policy`, `cache config`) and
//!   `locality PATH`.
//! * [`policy`]: eviction policies with cache_ext's interface.
//! * [`pagecache`]: the node cache's bookkeeping (frame pool, owned pages,
//!   remote mappings, private copies, deferred acks).
//! * [`netclient`]: `net` mode's client end of a stream connection.
//! * [`netlink`]: `net` mode's TCP policy (socket settings, the
//!   directory's keep-alive and relisten, the node's connection attempts).
//! * [`watermark`]: reclaim ahead of need (free frames between a low and
//!   a high mark).
//! * [`readahead`]: readahead windows as Linux computes them (pure logic;
//!   the VFS feeds it every read, `vfs/ra.rs`).
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod control;
pub mod dirty;
pub mod env;
pub mod keymap;
pub mod link;
pub use link::{client, wait};
pub mod netclient;
pub mod netlink;
pub mod node;
pub mod pagecache;
pub mod policy;
pub mod private;
pub mod readahead;
#[cfg(test)]
pub mod rig;
#[cfg(test)]
mod sim;
pub mod singlecopy;
#[cfg(test)]
mod tests;
pub mod tickets;
pub mod vfs;
pub mod watermark;

/// Most page requests `bench dir` publishes together.
pub use osapi::cache::MAX_DIR_BATCH;
