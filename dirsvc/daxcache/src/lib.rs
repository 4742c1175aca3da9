//! DaxFS's decentralized shared structures, as pure `no_std` logic over a
//! trait for shared 64-bit words ([`Words`]), so that host tests run them on
//! `AtomicU64` arrays and the kernel on the shared region.
//!
//! DaxFS (seed 001; public code: `daxfs/pcache.c`, `daxfs/overlay.c`,
//! `include/daxfs_format.h`) has no coordinator: every participant updates
//! the shared structures with compare-and-swap. This crate holds:
//!
//! * [`pcache`]: the slot page cache (FREE / PENDING / VALID slots, a
//!   refcount and the tag packed in one word, probe window of 8) and its
//!   MH-clock eviction and background sweep, plus the reclaim of a failed
//!   participant's claims and pins.
//! * [`overlay`]: the hash overlay for writes (open-addressing table of
//!   `(ino << 20) | pgoff` keys claimed by one CAS, a bump-allocated pool
//!   with per-type free lists, the authoritative file size in the overlay
//!   inode).
//!
//! Every protocol that races with other participants is written as a step
//! machine (one shared-memory operation per step) so that the tests can
//! interleave them exhaustively; the blocking calls just run the machine.
//!
//! The shared words are untrusted: every index derived from them is checked
//! against the area's bounds, all arithmetic on them is checked, and a value
//! that does not decode is an [`Error::Corrupt`], never a panic.
#![cfg_attr(not(test), no_std)]
#![deny(unsafe_code)]

pub mod overlay;
pub mod pcache;
mod words;

pub use words::{SpinWaiter, Waiter, Words};

/// What can go wrong on the shared structures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// An index fell outside the shared words (a corrupt or mis-sized area).
    OutOfBounds,
    /// A shared word holds a value no participant writes.
    Corrupt,
    /// The area's header does not match the geometry this participant
    /// was configured with.
    BadHeader,
    /// A tag or key does not fit its encoding (inode or page offset too big).
    TooBig,
    /// Waited for another participant's slot to be filled and gave up: the
    /// slot and the participant that claimed it.
    Timeout { slot: usize, owner: u8 },
    /// Too many restarts (every candidate kept changing under us).
    Busy,
    /// The overlay table or pool is full.
    NoSpace,
    /// Unpin of a slot that holds no pin, or of a pin record not held.
    NotPinned,
    /// The file has no overlay inode.
    NoInode,
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::OutOfBounds => write!(f, "index outside the shared area"),
            Error::Corrupt => write!(f, "a shared word holds a value no participant writes"),
            Error::BadHeader => write!(f, "the area's header does not match this geometry"),
            Error::TooBig => write!(f, "inode or page offset too big for the tag"),
            Error::Timeout { slot, owner } => write!(
                f,
                "timed out waiting for slot {slot} to be filled (claimed by participant {owner})"
            ),
            Error::Busy => write!(f, "gave up after too many restarts"),
            Error::NoSpace => write!(f, "the overlay table or pool is full"),
            Error::NotPinned => write!(f, "unpin of a slot not pinned"),
            Error::NoInode => write!(f, "the file has no overlay inode"),
        }
    }
}

/// The hash of a tag or key: splitmix64's finalizer. DaxFS uses the raw tag
/// masked to the table (`tag & mask`), so page N of every file starts its
/// probe at the same slot and the files' first pages crowd one window; we
/// hash instead.
pub fn hash64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// One step of a step machine: it did one shared-memory operation and is
/// not finished (`Again`), it found another participant's work in progress
/// and can only wait for it to change (`Blocked`: the caller pauses, with a
/// timeout), or it finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step<T> {
    Again,
    Blocked,
    Done(T),
}
