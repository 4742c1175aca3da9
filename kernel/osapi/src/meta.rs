//! Metadata calls in two halves, so a task can yield while the
//! directory answers: `Os::meta_start` (`userland::os::Os`) sends a
//! [`MetaCall`] and returns a [`MetaTicket`] (or the result, for an OS or
//! a call that answers at once), `Os::meta_poll` asks whether a ticket is
//! done. The node's data path answers them; the task executor asks.

use alloc::string::String;
use alloc::vec::Vec;

use fabric::proto::{Attr, DirEntry, Errno};

use crate::io::{Fd, OpenFlags};

/// One metadata call (the synchronous `Os` method of the same name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaCall {
    /// `Os::open`.
    Open {
        /// The file.
        path: String,
        /// How to open it.
        flags: OpenFlags,
    },
    /// `Os::stat`.
    Stat {
        /// The path.
        path: String,
    },
    /// `Os::close`.
    Close {
        /// The descriptor.
        fd: Fd,
    },
    /// `Os::fsync`.
    Fsync {
        /// The descriptor.
        fd: Fd,
    },
    /// `Os::truncate`.
    Truncate {
        /// The descriptor.
        fd: Fd,
        /// The new size.
        size: u64,
    },
    /// `Os::unlink`.
    Unlink {
        /// The file.
        path: String,
    },
    /// `Os::mkdir`.
    Mkdir {
        /// The directory.
        path: String,
    },
    /// `Os::rmdir`.
    Rmdir {
        /// The directory.
        path: String,
    },
    /// `Os::readdir`.
    Readdir {
        /// The directory.
        path: String,
    },
}

/// What a finished [`MetaCall`] gives back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaDone {
    /// `Open`: the new descriptor.
    Fd(Fd),
    /// `Stat`: the attributes.
    Attr(Attr),
    /// `Readdir`: the entries, sorted by name.
    Entries(Vec<DirEntry>),
    /// Every other call.
    Ok,
}

/// A metadata call in flight (from `Os::meta_start`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct MetaTicket(pub u64);

/// What `Os::meta_start` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaStart {
    /// The call is finished (done at once, or the OS has no split calls).
    Done(Result<MetaDone, Errno>),
    /// The request is out; poll the ticket.
    Pending(MetaTicket),
}

impl MetaDone {
    /// The descriptor of an `Open` (anything else is `Io`).
    pub fn fd(self) -> Result<Fd, Errno> {
        match self {
            MetaDone::Fd(fd) => Ok(fd),
            _ => Err(Errno::Io),
        }
    }

    /// The attributes of a `Stat` (anything else is `Io`).
    pub fn attr(self) -> Result<Attr, Errno> {
        match self {
            MetaDone::Attr(a) => Ok(a),
            _ => Err(Errno::Io),
        }
    }

    /// The entries of a `Readdir` (anything else is `Io`).
    pub fn entries(self) -> Result<Vec<DirEntry>, Errno> {
        match self {
            MetaDone::Entries(e) => Ok(e),
            _ => Err(Errno::Io),
        }
    }
}
