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
}

impl Errno {
    /// Every errno, for tests and tables.
    pub const ALL: [Errno; 14] = [
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
    /// Nodes use it for close-to-open revalidation of private caches.
    pub version: u64,
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
    /// Set the size: args `[ino, size]` -> attr.
    Setattr = 17,
    /// Read file data into the slot: args `[slot, ino, offset, len]` ->
    /// `[bytes]` + attr.
    Read = 18,
    /// Write file data from the slot: args `[slot, ino, offset, len]` ->
    /// `[bytes]` + attr.
    Write = 19,
    /// Flush to stable storage: args `[ino]` (0: everything).
    Fsync = 20,
    /// Directory and file-system counters: -> see [`Response::Stats`].
    Stats = 21,
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
    /// Directory -> node on the notify ring: unmap `[ino, idx]` and ack.
    DirInv = 40,
    /// Node -> directory on the ack ring: `[ino, idx, dirty]`.
    InvAck = 41,
    /// Page-directory counters -> [`Response::PageStats`].
    PageStats = 42,
}

impl Op {
    /// Decode a wire opcode.
    pub fn from_u16(v: u16) -> Option<Op> {
        Some(match v {
            1 => Op::Nop,
            10 => Op::Lookup,
            11 => Op::Create,
            12 => Op::Mkdir,
            13 => Op::Unlink,
            14 => Op::Rmdir,
            15 => Op::Readdir,
            16 => Op::Getattr,
            17 => Op::Setattr,
            18 => Op::Read,
            19 => Op::Write,
            20 => Op::Fsync,
            21 => Op::Stats,
            30 => Op::PageRead,
            31 => Op::PageLookupLock,
            32 => Op::PageUnlock,
            33 => Op::PageInv,
            34 => Op::PageDrop,
            35 => Op::PageWriteback,
            40 => Op::DirInv,
            41 => Op::InvAck,
            42 => Op::PageStats,
            _ => return None,
        })
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

/// A request as the directory sees it after decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// Empty round trip.
    Nop,
    /// Path operations: which one, bulk slot, path length, flag.
    Path {
        /// Lookup, Create, Mkdir, Unlink or Rmdir.
        op: Op,
        /// Bulk slot holding the path.
        slot: u32,
        /// Path length in bytes.
        len: u32,
        /// `Create`: fail with `Exists` if the file exists.
        exclusive: bool,
    },
    /// List a directory.
    Readdir {
        /// Bulk slot for the entries.
        slot: u32,
        /// Directory inode.
        ino: u64,
        /// Where to resume (0: start).
        cookie: u64,
    },
    /// Attributes.
    Getattr {
        /// Inode.
        ino: u64,
    },
    /// Truncate or extend.
    Setattr {
        /// Inode.
        ino: u64,
        /// New size.
        size: u64,
    },
    /// Data transfer through the bulk slot.
    Data {
        /// `Read` or `Write`.
        op: Op,
        /// Bulk slot.
        slot: u32,
        /// Inode.
        ino: u64,
        /// Byte offset in the file.
        offset: u64,
        /// Bytes to transfer.
        len: u32,
    },
    /// Flush.
    Fsync {
        /// Inode, or 0 for everything.
        ino: u64,
    },
    /// Counters.
    Stats,
    /// A page request of the single-copy protocol.
    Page(PageReq),
    /// Page-directory counters.
    PageStats,
}

fn small(v: u64) -> Result<u32, DecodeError> {
    u32::try_from(v).map_err(|_| DecodeError::BadArgument)
}

impl Request {
    /// Encode with the given tag.
    pub fn encode(&self, tag: u32) -> Desc {
        let (op, args): (Op, [u64; 7]) = match *self {
            Request::Nop => (Op::Nop, [0; 7]),
            Request::Path {
                op,
                slot,
                len,
                exclusive,
            } => (op, [slot as u64, len as u64, exclusive as u64, 0, 0, 0, 0]),
            Request::Readdir { slot, ino, cookie } => {
                (Op::Readdir, [slot as u64, ino, cookie, 0, 0, 0, 0])
            }
            Request::Getattr { ino } => (Op::Getattr, [ino, 0, 0, 0, 0, 0, 0]),
            Request::Setattr { ino, size } => (Op::Setattr, [ino, size, 0, 0, 0, 0, 0]),
            Request::Data {
                op,
                slot,
                ino,
                offset,
                len,
            } => (op, [slot as u64, ino, offset, len as u64, 0, 0, 0]),
            Request::Fsync { ino } => (Op::Fsync, [ino, 0, 0, 0, 0, 0, 0]),
            Request::Stats => (Op::Stats, [0; 7]),
            Request::PageStats => (Op::PageStats, [0; 7]),
            Request::Page(p) => {
                let k = p.key();
                let (op, third) = match p {
                    PageReq::Read { frame, .. } => (Op::PageRead, frame),
                    PageReq::LookupLock { frame, .. } => (Op::PageLookupLock, frame),
                    PageReq::Unlock { .. } => (Op::PageUnlock, 0),
                    PageReq::Inv { dirty, .. } => (Op::PageInv, dirty as u64),
                    PageReq::Drop { dirty, .. } => (Op::PageDrop, dirty as u64),
                    PageReq::Writeback { dirty, .. } => (Op::PageWriteback, dirty as u64),
                };
                (op, [k.ino, k.idx, third, 0, 0, 0, 0])
            }
        };
        Raw {
            op: op as u16,
            status: 0,
            tag,
            args,
        }
        .encode()
    }

    /// Decode a request descriptor; returns the tag too.
    pub fn decode(d: &Desc) -> Result<(u32, Request), DecodeError> {
        let r = Raw::decode(d);
        let op = Op::from_u16(r.op).ok_or(DecodeError::BadOpcode(r.op))?;
        let a = r.args;
        let req = match op {
            Op::Nop => Request::Nop,
            Op::Lookup | Op::Create | Op::Mkdir | Op::Unlink | Op::Rmdir => {
                let len = small(a[1])?;
                if len as usize > MAX_PATH || a[2] > 1 {
                    return Err(DecodeError::BadArgument);
                }
                Request::Path {
                    op,
                    slot: small(a[0])?,
                    len,
                    exclusive: a[2] == 1,
                }
            }
            Op::Readdir => Request::Readdir {
                slot: small(a[0])?,
                ino: a[1],
                cookie: a[2],
            },
            Op::Getattr => Request::Getattr { ino: a[0] },
            Op::Setattr => Request::Setattr {
                ino: a[0],
                size: a[1],
            },
            Op::Read | Op::Write => Request::Data {
                op,
                slot: small(a[0])?,
                ino: a[1],
                offset: a[2],
                len: small(a[3])?,
            },
            Op::Fsync => Request::Fsync { ino: a[0] },
            Op::Stats => Request::Stats,
            Op::PageStats => Request::PageStats,
            Op::PageRead
            | Op::PageLookupLock
            | Op::PageUnlock
            | Op::PageInv
            | Op::PageDrop
            | Op::PageWriteback => {
                let key = PageKey {
                    ino: a[0],
                    idx: a[1],
                };
                let flag = || match a[2] {
                    0 => Ok(false),
                    1 => Ok(true),
                    _ => Err(DecodeError::BadArgument),
                };
                Request::Page(match op {
                    Op::PageRead => PageReq::Read { key, frame: a[2] },
                    Op::PageLookupLock => PageReq::LookupLock { key, frame: a[2] },
                    Op::PageUnlock => PageReq::Unlock { key },
                    Op::PageInv => PageReq::Inv {
                        key,
                        dirty: flag()?,
                    },
                    Op::PageDrop => PageReq::Drop {
                        key,
                        dirty: flag()?,
                    },
                    _ => PageReq::Writeback {
                        key,
                        dirty: flag()?,
                    },
                })
            }
            // Notifications are not requests.
            Op::DirInv | Op::InvAck => return Err(DecodeError::BadOpcode(r.op)),
        };
        Ok((r.tag, req))
    }
}

/// Counters reported by [`Op::Stats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DirStats {
    /// Requests served since boot.
    pub requests: u64,
    /// Blocks read from the disk.
    pub disk_reads: u64,
    /// Blocks written to the disk.
    pub disk_writes: u64,
    /// Inodes in use.
    pub inodes_used: u64,
    /// Inode capacity.
    pub inodes_total: u64,
    /// Data blocks in use.
    pub blocks_used: u64,
    /// Data block capacity.
    pub blocks_total: u64,
}

/// A response as the node sees it after decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Response {
    /// Success without payload.
    Ok,
    /// Success with attributes.
    Attr(Attr),
    /// Readdir result: entries in the slot.
    Entries {
        /// Entries written to the slot.
        count: u32,
        /// Cookie to continue from, 0 at the end.
        next_cookie: u64,
    },
    /// Data transfer done.
    Data {
        /// Bytes transferred.
        bytes: u32,
        /// Attributes after the transfer.
        attr: Attr,
    },
    /// Counters.
    Stats(DirStats),
    /// Answer to a page request.
    Page(PageReply),
    /// Page-directory counters (see [`Response::encode`] for the order).
    PageStats([u64; 7]),
    /// Failure.
    Err(Errno),
}

impl Response {
    /// Encode a response to `op` with `tag`.
    pub fn encode(&self, op: Op, tag: u32) -> Desc {
        let attr_args = |a: &Attr| [a.ino, a.kind as u64, a.size, a.version];
        let mut r = Raw {
            op: op as u16,
            status: 0,
            tag,
            args: [0; 7],
        };
        match self {
            Response::Ok => {}
            Response::Attr(a) => r.args[..4].copy_from_slice(&attr_args(a)),
            Response::Entries { count, next_cookie } => {
                r.args[4] = *count as u64;
                r.args[5] = *next_cookie;
            }
            Response::Data { bytes, attr } => {
                r.args[..4].copy_from_slice(&attr_args(attr));
                r.args[4] = *bytes as u64;
            }
            Response::Stats(s) => {
                r.args = [
                    s.requests,
                    s.disk_reads,
                    s.disk_writes,
                    s.inodes_used,
                    s.inodes_total,
                    s.blocks_used,
                    s.blocks_total,
                ];
            }
            Response::Page(p) => {
                let (kind, gfn, extra) = match *p {
                    PageReply::Owner { gfn } => (1, gfn, 0),
                    PageReply::Exclusive { gfn } => (2, gfn, 0),
                    PageReply::Shared { owner, gfn } => (3, gfn, owner as u64),
                    PageReply::Retry => (4, 0, 0),
                    PageReply::Done { written } => (5, 0, written as u64),
                    PageReply::Refused => (6, 0, 0),
                    PageReply::IoError => (7, 0, 0),
                };
                r.args[0] = kind;
                r.args[1] = gfn;
                r.args[2] = extra;
            }
            Response::PageStats(v) => r.args = *v,
            Response::Err(e) => r.status = *e as u16,
        }
        r.encode()
    }

    /// Decode a response; the caller says which opcode it expects (the one
    /// it sent) and gets the tag back. A response with another opcode is an
    /// error.
    pub fn decode(d: &Desc, expect: Op) -> Result<(u32, Response), DecodeError> {
        let r = Raw::decode(d);
        if r.op != expect as u16 {
            return Err(DecodeError::BadOpcode(r.op));
        }
        if r.status != 0 {
            let e = Errno::from_u16(r.status).ok_or(DecodeError::BadStatus(r.status))?;
            return Ok((r.tag, Response::Err(e)));
        }
        let a = r.args;
        let attr = || -> Result<Attr, DecodeError> {
            let kind = u8::try_from(a[1])
                .ok()
                .and_then(FileKind::from_u8)
                .ok_or(DecodeError::BadArgument)?;
            if a[0] == 0 {
                return Err(DecodeError::BadArgument);
            }
            Ok(Attr {
                ino: a[0],
                kind,
                size: a[2],
                version: a[3],
            })
        };
        let resp = match expect {
            Op::Nop | Op::Unlink | Op::Rmdir | Op::Fsync => Response::Ok,
            Op::Lookup | Op::Create | Op::Mkdir | Op::Getattr | Op::Setattr => {
                Response::Attr(attr()?)
            }
            Op::Readdir => Response::Entries {
                count: small(a[4])?,
                next_cookie: a[5],
            },
            Op::Read | Op::Write => Response::Data {
                bytes: small(a[4])?,
                attr: attr()?,
            },
            Op::PageRead
            | Op::PageLookupLock
            | Op::PageUnlock
            | Op::PageInv
            | Op::PageDrop
            | Op::PageWriteback => Response::Page(match a[0] {
                1 => PageReply::Owner { gfn: a[1] },
                2 => PageReply::Exclusive { gfn: a[1] },
                3 => PageReply::Shared {
                    owner: u8::try_from(a[2])
                        .ok()
                        .filter(|o| (1..=64).contains(o))
                        .ok_or(DecodeError::BadArgument)?,
                    gfn: a[1],
                },
                4 => PageReply::Retry,
                5 => PageReply::Done { written: a[2] != 0 },
                6 => PageReply::Refused,
                7 => PageReply::IoError,
                _ => return Err(DecodeError::BadArgument),
            }),
            Op::PageStats => Response::PageStats(a),
            Op::DirInv | Op::InvAck => return Err(DecodeError::BadOpcode(r.op)),
            Op::Stats => Response::Stats(DirStats {
                requests: a[0],
                disk_reads: a[1],
                disk_writes: a[2],
                inodes_used: a[3],
                inodes_total: a[4],
                blocks_used: a[5],
                blocks_total: a[6],
            }),
        };
        Ok((r.tag, resp))
    }
}

/// A notification on the notify ring (directory -> node) or the ack ring
/// (node -> directory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notice {
    /// Unmap this page and acknowledge.
    DirInv(PageKey),
    /// Done, with the dirty bit the node saw.
    InvAck {
        /// Page.
        key: PageKey,
        /// The node had written the page.
        dirty: bool,
    },
}

impl Notice {
    /// Encode.
    pub fn encode(&self) -> Desc {
        let (op, k, d) = match *self {
            Notice::DirInv(k) => (Op::DirInv, k, 0),
            Notice::InvAck { key, dirty } => (Op::InvAck, key, dirty as u64),
        };
        Raw {
            op: op as u16,
            status: 0,
            tag: 0,
            args: [k.ino, k.idx, d, 0, 0, 0, 0],
        }
        .encode()
    }

    /// Decode; anything but a well-formed notice is an error.
    pub fn decode(d: &Desc) -> Result<Notice, DecodeError> {
        let r = Raw::decode(d);
        let key = PageKey {
            ino: r.args[0],
            idx: r.args[1],
        };
        match Op::from_u16(r.op) {
            Some(Op::DirInv) => Ok(Notice::DirInv(key)),
            Some(Op::InvAck) if r.args[2] <= 1 => Ok(Notice::InvAck {
                key,
                dirty: r.args[2] == 1,
            }),
            Some(Op::InvAck) => Err(DecodeError::BadArgument),
            _ => Err(DecodeError::BadOpcode(r.op)),
        }
    }
}

/// The opcode a request travels with (for answers and statistics).
pub fn op_of(r: &Request) -> Op {
    match r {
        Request::Nop => Op::Nop,
        Request::Path { op, .. } | Request::Data { op, .. } => *op,
        Request::Readdir { .. } => Op::Readdir,
        Request::Getattr { .. } => Op::Getattr,
        Request::Setattr { .. } => Op::Setattr,
        Request::Fsync { .. } => Op::Fsync,
        Request::Stats => Op::Stats,
        Request::PageStats => Op::PageStats,
        Request::Page(p) => match p {
            PageReq::Read { .. } => Op::PageRead,
            PageReq::LookupLock { .. } => Op::PageLookupLock,
            PageReq::Unlock { .. } => Op::PageUnlock,
            PageReq::Inv { .. } => Op::PageInv,
            PageReq::Drop { .. } => Op::PageDrop,
            PageReq::Writeback { .. } => Op::PageWriteback,
        },
    }
}

// ---------------------------------------------------------------- pages

/// A page of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PageKey {
    /// Inode.
    pub ino: u64,
    /// Page index in the file.
    pub idx: u64,
}

/// Page requests a node sends (each one 64-byte descriptor).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageReq {
    /// Read miss; `frame` is the requester's pre-allocated frame.
    Read {
        /// Page.
        key: PageKey,
        /// Pre-allocated frame of the requester.
        frame: u64,
    },
    /// Strong-mode write preparation (full-page write): E if nobody owns
    /// the page, S if someone does.
    LookupLock {
        /// Page.
        key: PageKey,
        /// Pre-allocated frame of the requester.
        frame: u64,
    },
    /// Commit E -> O after the full-page write.
    Unlock {
        /// Page.
        key: PageKey,
    },
    /// The owner reclaims the page (one element of a BATCH_INV).
    Inv {
        /// Page.
        key: PageKey,
        /// The owner wrote it since the last write-back.
        dirty: bool,
    },
    /// A sharer lets go (S -> I).
    Drop {
        /// Page.
        key: PageKey,
        /// The sharer wrote it (strong mode) since the last write-back.
        dirty: bool,
    },
    /// Write the page back to disk if it is dirty (fsync).
    Writeback {
        /// Page.
        key: PageKey,
        /// The requester wrote it since the last write-back.
        dirty: bool,
    },
}

impl PageReq {
    /// The page concerned.
    pub fn key(&self) -> PageKey {
        match *self {
            PageReq::Read { key, .. }
            | PageReq::LookupLock { key, .. }
            | PageReq::Unlock { key }
            | PageReq::Inv { key, .. }
            | PageReq::Drop { key, .. }
            | PageReq::Writeback { key, .. } => key,
        }
    }
}

/// Answers to page requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageReply {
    /// You own the page in your frame `gfn` (filled, or yours already).
    Owner {
        /// Frame.
        gfn: u64,
    },
    /// You hold E on your frame `gfn`: write the full page, then UNLOCK.
    Exclusive {
        /// Frame.
        gfn: u64,
    },
    /// Map the owner's frame `gfn` (owned by node `owner`).
    Shared {
        /// Owner node.
        owner: u8,
        /// Owner's frame.
        gfn: u64,
    },
    /// The page is in a transient state (E or TBI elsewhere): retry.
    Retry,
    /// Done (UNLOCK, DROP, WRITEBACK, or INV completed; `written` says a
    /// write-back to disk happened).
    Done {
        /// A write-back happened.
        written: bool,
    },
    /// Refused: the request does not fit the page's state or the frame is
    /// not the requester's.
    Refused,
    /// The disk transfer failed.
    IoError,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr() -> Attr {
        Attr {
            ino: 7,
            kind: FileKind::File,
            size: 12345,
            version: 9,
        }
    }

    #[test]
    fn requests_round_trip() {
        let reqs = [
            Request::Nop,
            Request::Path {
                op: Op::Create,
                slot: 2,
                len: 17,
                exclusive: true,
            },
            Request::Path {
                op: Op::Lookup,
                slot: 0,
                len: 1,
                exclusive: false,
            },
            Request::Readdir {
                slot: 1,
                ino: 5,
                cookie: 99,
            },
            Request::Getattr { ino: 3 },
            Request::Setattr {
                ino: 3,
                size: 1 << 40,
            },
            Request::Data {
                op: Op::Write,
                slot: 3,
                ino: 4,
                offset: 8192,
                len: 65536,
            },
            Request::Fsync { ino: 0 },
            Request::Stats,
        ];
        for (i, r) in reqs.iter().enumerate() {
            let d = r.encode(i as u32 + 100);
            assert_eq!(Request::decode(&d), Ok((i as u32 + 100, *r)));
        }
    }

    #[test]
    fn responses_round_trip() {
        let cases = [
            (Op::Nop, Response::Ok),
            (Op::Lookup, Response::Attr(attr())),
            (
                Op::Readdir,
                Response::Entries {
                    count: 3,
                    next_cookie: 8,
                },
            ),
            (
                Op::Read,
                Response::Data {
                    bytes: 4096,
                    attr: attr(),
                },
            ),
            (
                Op::Stats,
                Response::Stats(DirStats {
                    requests: 1,
                    disk_reads: 2,
                    disk_writes: 3,
                    inodes_used: 4,
                    inodes_total: 5,
                    blocks_used: 6,
                    blocks_total: 7,
                }),
            ),
            (Op::Write, Response::Err(Errno::NoSpace)),
        ];
        for (op, r) in cases {
            let d = r.encode(op, 42);
            assert_eq!(Response::decode(&d, op), Ok((42, r)));
        }
    }

    #[test]
    fn malformed_descriptors_are_errors_not_panics() {
        let mut d = [0u8; DESC_SIZE];
        d[0] = 0xEE;
        assert_eq!(Request::decode(&d), Err(DecodeError::BadOpcode(0xEE)));
        // Path too long.
        let mut r = Raw::decode(
            &Request::Path {
                op: Op::Lookup,
                slot: 0,
                len: 1,
                exclusive: false,
            }
            .encode(1),
        );
        r.args[1] = (MAX_PATH + 1) as u64;
        assert_eq!(Request::decode(&r.encode()), Err(DecodeError::BadArgument));
        // Slot number that does not fit.
        r.args[1] = 1;
        r.args[0] = u64::MAX;
        assert_eq!(Request::decode(&r.encode()), Err(DecodeError::BadArgument));
        // Response with an unknown status, or for another opcode.
        let mut resp = Raw::decode(&Response::Ok.encode(Op::Nop, 1));
        resp.status = 999;
        assert_eq!(
            Response::decode(&resp.encode(), Op::Nop),
            Err(DecodeError::BadStatus(999))
        );
        assert_eq!(
            Response::decode(&Response::Ok.encode(Op::Nop, 1), Op::Getattr),
            Err(DecodeError::BadOpcode(Op::Nop as u16))
        );
        // Attr with a bad kind.
        let mut a = Raw::decode(&Response::Attr(attr()).encode(Op::Getattr, 1));
        a.args[1] = 77;
        assert_eq!(
            Response::decode(&a.encode(), Op::Getattr),
            Err(DecodeError::BadArgument)
        );
        // Every byte pattern decodes to something or an error.
        for b in 0..=255u8 {
            let d = [b; DESC_SIZE];
            let _ = Request::decode(&d);
            for op in [Op::Nop, Op::Read, Op::Readdir, Op::Stats] {
                let _ = Response::decode(&d, op);
            }
        }
    }

    #[test]
    fn op_of_matches_the_encoded_opcode() {
        let key = PageKey { ino: 1, idx: 2 };
        for r in [
            Request::Nop,
            Request::Stats,
            Request::PageStats,
            Request::Getattr { ino: 1 },
            Request::Page(PageReq::Unlock { key }),
            Request::Page(PageReq::Writeback { key, dirty: true }),
        ] {
            assert_eq!(op_of(&r) as u16, Raw::decode(&r.encode(0)).op);
        }
    }

    #[test]
    fn page_ops_and_notices_round_trip() {
        let key = PageKey { ino: 9, idx: 77 };
        let reqs = [
            PageReq::Read { key, frame: 1234 },
            PageReq::LookupLock { key, frame: 5 },
            PageReq::Unlock { key },
            PageReq::Inv { key, dirty: true },
            PageReq::Drop { key, dirty: false },
            PageReq::Writeback { key, dirty: true },
        ];
        for (i, p) in reqs.iter().enumerate() {
            let d = Request::Page(*p).encode(i as u32);
            assert_eq!(Request::decode(&d), Ok((i as u32, Request::Page(*p))));
            let op = op_of(&Request::Page(*p));
            for reply in [
                PageReply::Owner { gfn: 3 },
                PageReply::Exclusive { gfn: 4 },
                PageReply::Shared { owner: 2, gfn: 99 },
                PageReply::Retry,
                PageReply::Done { written: true },
                PageReply::Refused,
                PageReply::IoError,
            ] {
                let d = Response::Page(reply).encode(op, 7);
                assert_eq!(Response::decode(&d, op), Ok((7, Response::Page(reply))));
            }
        }
        for n in [Notice::DirInv(key), Notice::InvAck { key, dirty: true }] {
            assert_eq!(Notice::decode(&n.encode()), Ok(n));
        }
        // Malformed: dirty flag 2, owner 0, kind 99, notices as requests.
        let mut r = Raw::decode(&Request::Page(PageReq::Inv { key, dirty: true }).encode(1));
        r.args[2] = 2;
        assert_eq!(Request::decode(&r.encode()), Err(DecodeError::BadArgument));
        let mut s = Raw::decode(
            &Response::Page(PageReply::Shared { owner: 1, gfn: 1 }).encode(Op::PageRead, 1),
        );
        s.args[2] = 0;
        assert_eq!(
            Response::decode(&s.encode(), Op::PageRead),
            Err(DecodeError::BadArgument)
        );
        s.args[0] = 99;
        assert_eq!(
            Response::decode(&s.encode(), Op::PageRead),
            Err(DecodeError::BadArgument)
        );
        assert!(Request::decode(&Notice::DirInv(key).encode()).is_err());
        assert!(Notice::decode(&Request::Nop.encode(1)).is_err());
    }

    #[test]
    fn dirent_round_trip_and_rejects() {
        let e = DirEntry {
            name: "hello.txt".into(),
            attr: attr(),
        };
        let mut b = [0u8; DIRENT_SIZE];
        e.encode(&mut b);
        assert_eq!(DirEntry::decode(&b), Some(e));
        b[25] = 200;
        assert_eq!(DirEntry::decode(&b), None);
        b[25] = 0;
        assert_eq!(DirEntry::decode(&b), None);
    }

    #[test]
    fn errno_numbers_are_stable_and_unique() {
        for e in Errno::ALL {
            assert_eq!(Errno::from_u16(e as u16), Some(e));
            assert!(!e.as_str().is_empty());
        }
        assert_eq!(Errno::from_u16(0), None);
    }
}
