//! The directory service of onecopy.
//!
//! Everything in this crate is pure logic (`no_std` + `alloc`) so that it can
//! be unit-tested on the host and linked into the kernel unchanged:
//!
//! * [`proto`]: the messages exchanged between nodes and the directory,
//!   defined once for both sides.
//! * [`layout`]: the versioned header of the shared region and where every
//!   area lives in it.
//! * [`ring`]: single-producer/single-consumer rings of 64-byte descriptors
//!   over the shared region, with every index read from the region checked.
//! * [`fs`]: the on-disk format of the tiny flat file system and its
//!   operations over a [`fs::BlockDevice`].
//! * [`server`]: the metadata and storage server that answers requests.
//! * [`netfs`]: `net` mode, the same server reached over a byte stream
//!   (TCP): framing, the server's entry point and the node's client.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

pub mod client;
pub mod config;
pub mod fs;
pub mod layout;
pub mod netfs;
pub mod pagecache;
pub mod pagedir;
pub mod proto;
pub mod ring;
pub mod rng;
pub mod server;
pub mod shm;
#[cfg(test)]
mod sim;
