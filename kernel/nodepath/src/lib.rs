//! The node side of onecopy (DPC's client), as host-testable logic linked
//! into the kernel unchanged.
//!
//! * [`client`]: the node's ring endpoints (requests, notices, acks).
//! * [`pagecache`]: the node cache's bookkeeping (frame pool, owned pages,
//!   remote mappings, private copies, deferred acks).
//! * [`netclient`]: `net` mode's client end of a stream connection.
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod client;
pub mod netclient;
pub mod pagecache;
#[cfg(test)]
mod sim;
