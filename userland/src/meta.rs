//! Metadata calls in two halves, so a task can yield while the
//! directory answers: [`crate::os::Os::meta_start`] sends a call and
//! returns a ticket (or the result, for an OS or a call that answers at
//! once), [`crate::os::Os::meta_poll`] asks whether a ticket is done, and
//! [`crate::os::Os::meta_wait`] waits a little for answers when nothing
//! else can run. The task executor ([`crate::task::Tasks`]) is the one
//! caller; outside tasks the shell calls the synchronous [`Os`] methods.

use alloc::string::String;
use alloc::vec::Vec;

use crate::os::{Attr, DirEntry, Errno, Fd, OpenFlags, Os};

/// One metadata call (the synchronous [`Os`] method of the same name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaCall {
    /// [`Os::open`].
    Open {
        /// The file.
        path: String,
        /// How to open it.
        flags: OpenFlags,
    },
    /// [`Os::stat`].
    Stat {
        /// The path.
        path: String,
    },
    /// [`Os::close`].
    Close {
        /// The descriptor.
        fd: Fd,
    },
    /// [`Os::fsync`].
    Fsync {
        /// The descriptor.
        fd: Fd,
    },
    /// [`Os::truncate`].
    Truncate {
        /// The descriptor.
        fd: Fd,
        /// The new size.
        size: u64,
    },
    /// [`Os::unlink`].
    Unlink {
        /// The file.
        path: String,
    },
    /// [`Os::mkdir`].
    Mkdir {
        /// The directory.
        path: String,
    },
    /// [`Os::rmdir`].
    Rmdir {
        /// The directory.
        path: String,
    },
    /// [`Os::readdir`].
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

/// A metadata call in flight (from [`Os::meta_start`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct MetaTicket(pub u64);

/// What [`Os::meta_start`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaStart {
    /// The call is finished (done at once, or the OS has no split calls).
    Done(Result<MetaDone, Errno>),
    /// The request is out; poll the ticket.
    Pending(MetaTicket),
}

/// Perform `call` synchronously with the [`Os`] methods (what
/// [`Os::meta_start`] does by default, and the fallback of an OS that
/// cannot split a call).
pub fn run_sync<O: Os + ?Sized>(os: &mut O, call: MetaCall) -> Result<MetaDone, Errno> {
    match call {
        MetaCall::Open { path, flags } => os.open(&path, flags).map(MetaDone::Fd),
        MetaCall::Stat { path } => os.stat(&path).map(MetaDone::Attr),
        MetaCall::Close { fd } => os.close(fd).map(|()| MetaDone::Ok),
        MetaCall::Fsync { fd } => os.fsync(fd).map(|()| MetaDone::Ok),
        MetaCall::Truncate { fd, size } => os.truncate(fd, size).map(|()| MetaDone::Ok),
        MetaCall::Unlink { path } => os.unlink(&path).map(|()| MetaDone::Ok),
        MetaCall::Mkdir { path } => os.mkdir(&path).map(|()| MetaDone::Ok),
        MetaCall::Rmdir { path } => os.rmdir(&path).map(|()| MetaDone::Ok),
        MetaCall::Readdir { path } => os.readdir(&path).map(MetaDone::Entries),
    }
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
