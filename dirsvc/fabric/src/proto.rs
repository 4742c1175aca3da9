//! Messages between nodes and the directory, defined once for both sides.
//!
//! Every message is one fixed 64-byte descriptor ([`Desc`]):
//!
//! | bytes  | field                                                   |
//! | ------ | ------------------------------------------------------- |
//! | 0..2   | opcode ([`Op`])                                          |
//! | 2..4   | status (0 = ok, otherwise an [`Errno`]) in responses     |
//! | 4..8   | tag: chosen by the requester, echoed in the response     |
//! | 8..64  | seven little-endian `u64` arguments, meaning per opcode  |
//!
//! Variable-length data (paths, directory listings, file data in the
//! baseline data path) travels through the requester's bulk slot in the
//! shared region; descriptors only carry the slot number and lengths, and the
//! receiver bounds-checks them against the layout.
//!
//! Decoding never panics: an unknown opcode, a bad status or an argument out
//! of range is a [`DecodeError`].

use core::fmt;

/// Size of one descriptor on every ring.
pub const DESC_SIZE: usize = 64;
/// One raw descriptor.
pub type Desc = [u8; DESC_SIZE];

/// Longest path a request may carry (bytes, UTF-8, absolute).
pub const MAX_PATH: usize = 1024;
/// Longest single name component.
pub const MAX_NAME: usize = 59;

/// Errors that cross the protocol and the VFS. Stable numbers: they are on
/// the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum Errno {
    /// No such file or directory.
    NotFound = 1,
    /// The name already exists.
    Exists = 2,
    /// A path component is not a directory.
    NotDir = 3,
    /// The operation needs a file but found a directory.
    IsDir = 4,
    /// Directory not empty.
    NotEmpty = 5,
    /// No space left (blocks, inodes or extents).
    NoSpace = 6,
    /// Disk or transport I/O error.
    Io = 7,
    /// The directory service is unavailable (down, no storage, timed out).
    Unavailable = 8,
    /// Invalid argument (bad path, bad offset, malformed request).
    Invalid = 9,
    /// A name component is longer than [`MAX_NAME`].
    NameTooLong = 10,
    /// Bad file descriptor.
    BadFd = 11,
    /// Too many open files.
    TooManyFiles = 12,
    /// The operation is not supported in this mode or role.
    NotSupported = 13,
    /// Refused by a protection check (for example an unexported frame).
    Refused = 14,
    /// A conditional request found the inode at another version (the
    /// caller re-reads and redoes its work).
    Stale = 15,
    /// This node was declared failed (or its session is stale): it
    /// stopped every store and dropped every mapping; it rejoins at its
    /// next call.
    Fenced = 16,
    /// Held by another node for now (an append lock): try again.
    Busy = 17,
    /// Stale file handle: the descriptor's file was removed and its inode
    /// number now names another file (another generation, see
    /// [`Attr::gen`]). Nothing was read or changed.
    StaleHandle = 18,
}

impl Errno {
    /// Every errno, for tests and tables.
    pub const ALL: [Errno; 18] = [
        Errno::NotFound,
        Errno::Exists,
        Errno::NotDir,
        Errno::IsDir,
        Errno::NotEmpty,
        Errno::NoSpace,
        Errno::Io,
        Errno::Unavailable,
        Errno::Invalid,
        Errno::NameTooLong,
        Errno::BadFd,
        Errno::TooManyFiles,
        Errno::NotSupported,
        Errno::Refused,
        Errno::Stale,
        Errno::Fenced,
        Errno::Busy,
        Errno::StaleHandle,
    ];

    /// Decode a wire status; `None` for 0 or an unknown value.
    pub fn from_u16(v: u16) -> Option<Errno> {
        Errno::ALL.iter().copied().find(|e| *e as u16 == v)
    }

    /// Short human-readable text, used by the shell's `error: ...` lines.
    pub fn as_str(self) -> &'static str {
        match self {
            Errno::NotFound => "not found",
            Errno::Exists => "already exists",
            Errno::NotDir => "not a directory",
            Errno::IsDir => "is a directory",
            Errno::NotEmpty => "directory not empty",
            Errno::NoSpace => "no space left",
            Errno::Io => "I/O error",
            Errno::Unavailable => "directory unavailable",
            Errno::Invalid => "invalid argument",
            Errno::NameTooLong => "name too long",
            Errno::BadFd => "bad file descriptor",
            Errno::TooManyFiles => "too many open files",
            Errno::NotSupported => "not supported",
            Errno::Refused => "refused",
            Errno::Stale => "stale version",
            Errno::Fenced => "fenced: the directory declared this node failed",
            Errno::Busy => "busy",
            Errno::StaleHandle => "stale file handle",
        }
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Kind of an inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FileKind {
    /// Regular file.
    File = 1,
    /// Directory.
    Dir = 2,
}

impl FileKind {
    /// Decode from the wire / disk.
    pub fn from_u8(v: u8) -> Option<FileKind> {
        match v {
            1 => Some(FileKind::File),
            2 => Some(FileKind::Dir),
            _ => None,
        }
    }
}

/// Attributes of an inode as the directory reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attr {
    /// Inode number (stable while the file exists; never 0).
    pub ino: u64,
    /// File or directory.
    pub kind: FileKind,
    /// Size in bytes (directories: number of entries).
    pub size: u64,
    /// Change counter: bumped by every write, truncate or entry change.
    /// Nodes use it for close-to-open revalidation of private caches. The
    /// high 32 bits are the inode's generation ([`Attr::gen`]), fixed for
    /// the file's life; only the low 32 bits count changes.
    pub version: u64,
}

impl Attr {
    /// The inode's generation: the file system's creation sequence number
    /// of this file (the high half of [`Attr::version`]). An inode number
    /// reused by a later file comes with another generation, so a
    /// descriptor that remembers (ino, generation) from its open never
    /// reaches the new file (as an NFS file handle).
    pub fn gen(&self) -> u64 {
        gen_of_version(self.version)
    }
}

/// The generation a version carries (see [`Attr::gen`]).
pub const fn gen_of_version(version: u64) -> u64 {
    version >> 32
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// Name inside its directory.
    pub name: alloc::string::String,
    /// Attributes of the entry.
    pub attr: Attr,
}

/// Size of one encoded [`DirEntry`] in a bulk buffer.
pub const DIRENT_SIZE: usize = 96;

/// How long after sending its take (or renewal) of an append lock a node
/// may still store into the file's frames and publish under it, on its
/// own clock. The directory's lease is longer than this plus the
/// heartbeat timeout (`dirsvc`'s `Config::append_lease_ns`), so a lease
/// never lapses while its holder may still act under it.
pub const APPEND_BUDGET_NS: u64 = 4_000_000_000;

impl DirEntry {
    /// Encode into exactly [`DIRENT_SIZE`] bytes.
    pub fn encode(&self, out: &mut [u8; DIRENT_SIZE]) {
        out.fill(0);
        out[0..8].copy_from_slice(&self.attr.ino.to_le_bytes());
        out[8..16].copy_from_slice(&self.attr.size.to_le_bytes());
        out[16..24].copy_from_slice(&self.attr.version.to_le_bytes());
        out[24] = self.attr.kind as u8;
        let n = self.name.len().min(MAX_NAME);
        out[25] = n as u8;
        out[32..32 + n].copy_from_slice(&self.name.as_bytes()[..n]);
    }

    /// Decode from [`DIRENT_SIZE`] bytes; `None` if malformed.
    pub fn decode(b: &[u8; DIRENT_SIZE]) -> Option<DirEntry> {
        let ino = u64::from_le_bytes(b[0..8].try_into().ok()?);
        let size = u64::from_le_bytes(b[8..16].try_into().ok()?);
        let version = u64::from_le_bytes(b[16..24].try_into().ok()?);
        let kind = FileKind::from_u8(b[24])?;
        let n = b[25] as usize;
        if n == 0 || n > MAX_NAME || ino == 0 {
            return None;
        }
        let name = core::str::from_utf8(&b[32..32 + n]).ok()?;
        Some(DirEntry {
            name: alloc::string::String::from(name),
            attr: Attr {
                ino,
                kind,
                size,
                version,
            },
        })
    }
}

/// Opcodes. Requests travel node -> directory on the request ring and come
/// back with the same opcode on the response ring. `DirInv` travels on the
/// notify ring and `InvAck` on the ack ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum Op {
    /// Empty round trip (`bench ring`).
    Nop = 1,
    /// Resolve a path: args `[slot, path_len]` -> attr.
    Lookup = 10,
    /// Create a regular file: args `[slot, path_len, exclusive]` -> attr.
    Create = 11,
    /// Create a directory: args `[slot, path_len]` -> attr.
    Mkdir = 12,
    /// Remove a file: args `[slot, path_len]`.
    Unlink = 13,
    /// Remove an empty directory: args `[slot, path_len]`.
    Rmdir = 14,
    /// List a directory: args `[slot, ino, cookie]` -> `[count, next_cookie]`,
    /// entries in the slot. `next_cookie == 0` means the end.
    Readdir = 15,
    /// Attributes of an inode: args `[ino]` -> attr.
    Getattr = 16,
    /// Set the size: args `[ino, size, has_expect, expect, locked, gen]`
    /// -> attr (see [`Request::Setattr`]).
    Setattr = 17,
    /// Read file data into the slot: args `[slot, ino, offset, len, at,
    /// gen]` -> `[bytes]` + attr (see [`Request::Data`]).
    Read = 18,
    /// Write file data from the slot: args `[slot, ino, offset, len, at,
    /// gen]` -> `[bytes]` + attr.
    Write = 19,
    /// Flush to stable storage: args `[ino]` (0: everything).
    Fsync = 20,
    /// Directory and file-system counters: -> see [`Response::Stats`].
    Stats = 21,
    /// Take or renew (`hold` 1) or give back (0) the append lock of a
    /// file: args `[ino, hold]` -> attr. Taken, it is this node's lease
    /// until it gives it back, fails, or lets the lease lapse unrenewed:
    /// another node's take meanwhile is answered [`Errno::Busy`].
    /// Strong-mode appends learn the end of file, write there and publish
    /// the new size under it (`Setattr` with `locked`), so two appends
    /// never land at the same offset; a holder stores and publishes only
    /// within [`APPEND_BUDGET_NS`] of sending its take.
    AppendLock = 22,
    /// `daxfs` mode: fill the PENDING slot `[slot]` of the shared page
    /// cache from the disk (the directory is DaxFS's fill thread) and
    /// publish it VALID -> `[bytes]` (of the page inside the file) + attr.
    DaxFill = 23,
    /// Page READ: args `[ino, idx, frame]` -> [`PageReply`].
    PageRead = 30,
    /// Page LOOKUP_LOCK: args `[ino, idx, frame]` -> [`PageReply`].
    PageLookupLock = 31,
    /// Page UNLOCK: args `[ino, idx]`.
    PageUnlock = 32,
    /// One page of a BATCH_INV: args `[ino, idx, dirty]`.
    PageInv = 33,
    /// Page DROP: args `[ino, idx, dirty]`.
    PageDrop = 34,
    /// Page WRITEBACK: args `[ino, idx, dirty]`.
    PageWriteback = 35,
    /// Page PROMOTE (strong mode): args `[ino, idx]`; a sharer asks to
    /// keep a read-only replica of the page.
    PagePromote = 36,
    /// Page UNPROTECT (strong mode): args `[ino, idx]`; a writer asks the
    /// directory to revoke the page's replicas before it stores.
    PageUnprotect = 37,
    /// Directory -> node on the notify ring: unmap `[ino, idx]` and ack.
    DirInv = 40,
    /// Node -> directory on the ack ring: `[ino, idx, dirty]`.
    InvAck = 41,
    /// Page-directory counters -> [`Response::PageStats`].
    PageStats = 42,
    /// Where a file's pages live: args `[slot, ino, first_page]` ->
    /// `[count, next_page]` like `Readdir` ([`Response::Entries`]),
    /// [`LocalityRange`] records in the slot; `next_page == 0` means the
    /// end.
    Locality = 43,
    /// Directory -> owner on the notify ring: `[ino, idx, sharers]`, the
    /// number of nodes now mapping a page it owns (no ack).
    Sharers = 44,
    /// Per-phase service times of one kind of miss: args `[kind]`
    /// ([`MissKind`]) -> [`Response::MissStats`] (`bench miss`).
    MissStats = 45,
    /// Directory -> replica holder on the notify ring: drop your replica
    /// of `[ino, idx]` (keep the mapping) and ack.
    Revoke = 46,
    /// Node -> directory on the ack ring: the replica of `[ino, idx]` is
    /// gone.
    RevokeAck = 47,
    /// Directory -> node on the notify ring: replicas are in use (the
    /// header's `replicas_used`); announce your stores from now on and
    /// say so (`sees_replicas`). No ack, no arguments.
    ReplicasUsed = 48,
    /// Directory -> node on the notify ring: unmap every page of
    /// `[ino, first, count]` (a [`PageSpan`]) and ack once. Every page of
    /// the span awaits this node's ack, as a DIR_INV's page does.
    InvRange = 49,
    /// Node -> directory on the ack ring: `[ino, first, count, dirty]`,
    /// the one ack of an `InvRange`.
    InvRangeAck = 50,
    /// Invalidation counters -> [`Response::InvStats`] (`dir stats`).
    InvStats = 51,
    /// The owner reclaims a run of one file's pages (a [`PageRun`]): args
    /// `[ino, first, count, dirty]` -> [`Response::Run`].
    PageInvRun = 52,
    /// Write back a run of one file's pages if dirty (fsync; a
    /// [`PageRun`]): args `[ino, first, count, dirty]` -> [`Response::Run`].
    PageWritebackRun = 53,
    /// Strong mode, `delegation=1`: take the delegation of a range of a
    /// file's pages (a [`DelegRange`]): args `[ino, base, list_frame]` ->
    /// [`PageReply::Delegated`]. See `proto/deleg.rs`.
    PageDelegate = 54,
    /// Give a delegation back, or answer its recall (the recall's ack):
    /// args `[ino, base]` -> `Done` once the directory read the list
    /// frame and installed its pages.
    PageDelegReturn = 55,
    /// Directory -> holder on the notify ring: `[ino, base]`, give the
    /// delegation back now (with [`Op::PageDelegReturn`]).
    DelegRecall = 56,
    /// Delegation counters -> [`Response::DelegStats`] (`dir stats`).
    DelegStats = 57,
}

impl Op {
    /// Every opcode, for decoding and tests.
    pub const ALL: [Op; 41] = [
        Op::Nop,
        Op::Lookup,
        Op::Create,
        Op::Mkdir,
        Op::Unlink,
        Op::Rmdir,
        Op::Readdir,
        Op::Getattr,
        Op::Setattr,
        Op::Read,
        Op::Write,
        Op::Fsync,
        Op::Stats,
        Op::AppendLock,
        Op::DaxFill,
        Op::PageRead,
        Op::PageLookupLock,
        Op::PageUnlock,
        Op::PageInv,
        Op::PageDrop,
        Op::PageWriteback,
        Op::PagePromote,
        Op::PageUnprotect,
        Op::DirInv,
        Op::InvAck,
        Op::PageStats,
        Op::Locality,
        Op::Sharers,
        Op::MissStats,
        Op::Revoke,
        Op::RevokeAck,
        Op::ReplicasUsed,
        Op::InvRange,
        Op::InvRangeAck,
        Op::InvStats,
        Op::PageInvRun,
        Op::PageWritebackRun,
        Op::PageDelegate,
        Op::PageDelegReturn,
        Op::DelegRecall,
        Op::DelegStats,
    ];

    /// Decode a wire opcode.
    pub fn from_u16(v: u16) -> Option<Op> {
        Op::ALL.into_iter().find(|o| *o as u16 == v)
    }
}

/// Why a descriptor could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// The opcode is not one we know.
    BadOpcode(u16),
    /// The status field is not a known errno.
    BadStatus(u16),
    /// An argument is out of range (for example a kind byte or a length).
    BadArgument,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::BadOpcode(o) => write!(f, "bad opcode {o}"),
            DecodeError::BadStatus(s) => write!(f, "bad status {s}"),
            DecodeError::BadArgument => f.write_str("bad argument"),
        }
    }
}

/// A descriptor split into its fields, before per-opcode interpretation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Raw {
    /// Opcode.
    pub op: u16,
    /// Status (responses).
    pub status: u16,
    /// Requester's tag.
    pub tag: u32,
    /// Arguments.
    pub args: [u64; 7],
}

impl Raw {
    /// Encode into a descriptor.
    pub fn encode(&self) -> Desc {
        let mut d = [0u8; DESC_SIZE];
        d[0..2].copy_from_slice(&self.op.to_le_bytes());
        d[2..4].copy_from_slice(&self.status.to_le_bytes());
        d[4..8].copy_from_slice(&self.tag.to_le_bytes());
        for (i, a) in self.args.iter().enumerate() {
            d[8 + i * 8..16 + i * 8].copy_from_slice(&a.to_le_bytes());
        }
        d
    }

    /// The answer to a descriptor that could not be decoded: its own
    /// opcode and tag, status `Invalid`, no arguments (the rings and the
    /// network answer malformed requests alike).
    pub fn invalid_answer(d: &Desc) -> Desc {
        let raw = Raw::decode(d);
        Raw {
            op: raw.op,
            status: Errno::Invalid as u16,
            tag: raw.tag,
            args: [0; 7],
        }
        .encode()
    }

    /// Split a descriptor into fields (never fails).
    pub fn decode(d: &Desc) -> Raw {
        let u16at = |o: usize| u16::from_le_bytes([d[o], d[o + 1]]);
        let mut args = [0u64; 7];
        for (i, a) in args.iter_mut().enumerate() {
            let mut b = [0u8; 8];
            b.copy_from_slice(&d[8 + i * 8..16 + i * 8]);
            *a = u64::from_le_bytes(b);
        }
        Raw {
            op: u16at(0),
            status: u16at(2),
            tag: u32::from_le_bytes([d[4], d[5], d[6], d[7]]),
            args,
        }
    }
}

/// A length or slot argument: must fit in 32 bits.
fn small(v: u64) -> Result<u32, DecodeError> {
    u32::try_from(v).map_err(|_| DecodeError::BadArgument)
}

mod deleg;
mod locality;
mod page;
mod request;
mod response;
mod run;
pub use deleg::{DelegList, DelegPage, DelegRange, DelegStats, DELEG_PAGES, DELEG_RECORD};
pub use locality::{LocalityRange, LOCALITY_RECORD};
pub use page::{
    reply_code, InvStats, Notice, PageDirStats, PageKey, PageReply, PageReq, PageSpan, MAX_SPAN,
};
pub use request::{op_of, Request};
pub use response::{DirStats, MissKind, MissStats, Response};
pub use run::{run_mask, PageRun, RunKind, RunReply, DIR_TAG, MAX_RUN};

#[cfg(test)]
mod tests;
