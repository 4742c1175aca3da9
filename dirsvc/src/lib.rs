//! The directory service of onecopy (DPC's Directory Manager and Page
//! Directory), as pure logic (`no_std` + `alloc`) unit-tested on the host
//! and linked into the kernel unchanged:
//!
//! * [`pagedir`]: the page directory, DPC's per-page state machine.
//! * [`server`]: the serving loop: membership, the request rings, the file
//!   server over [`flatfs`].
//! * [`netserve`]: `net` mode, the same server reached over a byte stream.
//! * [`diskq`]: the disk queue of page fills in flight (asynchronous
//!   storage); [`writeq`]: the queue of deferred block writes and what
//!   waits for them; [`fakedisk`]: an asynchronous in-memory disk for
//!   tests (only with `cfg(test)` or the `testing` feature, never in the
//!   product build).
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod appendlock;
pub mod diskq;
#[cfg(any(test, feature = "testing"))]
pub mod fakedisk;
pub mod netserve;
pub mod pagedir;
pub mod server;
pub mod writeq;
