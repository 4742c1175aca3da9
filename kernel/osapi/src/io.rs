//! Files and positioned I/O as the OS interface (`userland::os::Os`)
//! takes them: descriptors, open flags, and the batched, split and mapped
//! I/Os the data path performs.

use fabric::proto::Errno;

/// A file descriptor handed out by `Os::open`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fd(pub u32);

/// How to open a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OpenFlags {
    /// Create the file if it does not exist.
    pub create: bool,
    /// Truncate to 0 on open.
    pub truncate: bool,
    /// Every write goes to the end of the file.
    pub append: bool,
    /// With `create`: fail with `Exists` if it exists.
    pub exclusive: bool,
}

/// One positioned I/O of an `Os::io_batch` call (like an `iocb`).
#[derive(Debug)]
pub struct BatchIo<'a> {
    /// The descriptor (its position is not used, and may be left anywhere).
    pub fd: Fd,
    /// Absolute byte offset in the file.
    pub offset: u64,
    /// Copy `buf` into the file (otherwise read the file into `buf`).
    pub write: bool,
    /// The data: `buf.len()` bytes are transferred (may be empty).
    pub buf: &'a mut [u8],
    /// Filled by `Os::io_batch`: the bytes transferred (`buf.len()`,
    /// fewer only for a read that reaches the end of the file), or this
    /// I/O's error. [`BatchIo::new`] starts it as `Err(Errno::Io)`, so an
    /// I/O the implementation never filled in counts as failed.
    pub done: Result<usize, Errno>,
}

impl<'a> BatchIo<'a> {
    /// An I/O of `buf.len()` bytes at `offset`, not done yet.
    pub fn new(fd: Fd, offset: u64, write: bool, buf: &'a mut [u8]) -> BatchIo<'a> {
        BatchIo {
            fd,
            offset,
            write,
            buf,
            done: Err(Errno::Io),
        }
    }
}

/// One positioned I/O as `Os::io_start` sees it: where, how long, and
/// whether it writes (no data yet: the bytes move when it runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoSpan {
    /// The open file.
    pub fd: Fd,
    /// Absolute byte offset.
    pub offset: u64,
    /// Bytes to move.
    pub len: usize,
    /// A write (otherwise a read).
    pub write: bool,
}

/// One mapped I/O as `Os::mmap_start` sees it: which file, where, how
/// long, and whether it stores (no data yet, as [`IoSpan`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapSpan<'a> {
    /// The mapped file.
    pub path: &'a str,
    /// Absolute byte offset in the file.
    pub offset: u64,
    /// Bytes to move.
    pub len: usize,
    /// A store (otherwise a load).
    pub write: bool,
}

/// One memory-mapped I/O of an `Os::mmap_batch` call: `buf.len()`
/// bytes at `offset` of `path` through the mapping.
#[derive(Debug)]
pub struct MmapIo<'a> {
    /// The mapped file (mapped on first use, like `Os::mmap_io`).
    pub path: &'a str,
    /// Absolute byte offset in the file.
    pub offset: u64,
    /// Store `buf` through the mapping (otherwise load into `buf`).
    pub write: bool,
    /// The data: `buf.len()` bytes are moved; the range lies within the
    /// file.
    pub buf: &'a mut [u8],
    /// Filled by `Os::mmap_batch`: `Ok(buf.len())` or this I/O's error
    /// ([`MmapIo::new`] starts it as `Err(Errno::Io)`).
    pub done: Result<usize, Errno>,
}

impl<'a> MmapIo<'a> {
    /// A mapped I/O of `buf.len()` bytes at `offset`, not done yet.
    pub fn new(path: &'a str, offset: u64, write: bool, buf: &'a mut [u8]) -> MmapIo<'a> {
        MmapIo {
            path,
            offset,
            write,
            buf,
            done: Err(Errno::Io),
        }
    }
}
