//! Requests (node -> directory) as the directory sees them, with their
//! encoding and the opcode each travels with.

use super::{small, DecodeError, Desc, MissKind, Op, PageReq, PageRun, Raw, MAX_PATH};

/// A request as the directory sees it after decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// Empty round trip.
    Nop,
    /// Path operations: which one, bulk slot, where in it, path length,
    /// flag.
    Path {
        /// Lookup, Create, Mkdir, Unlink or Rmdir.
        op: Op,
        /// Bulk slot holding the path.
        slot: u32,
        /// Byte offset of the path in the slot: a slot holds several
        /// requests' paths side by side, so a node's metadata calls can be
        /// in flight together. `at + len` must fit the slot (else
        /// `Invalid`).
        at: u32,
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
        /// Only if the inode is still at this version (else
        /// [`crate::proto::Errno::Stale`]): a writer publishes the size it
        /// grew the file to only over the version it wrote the data at.
        expect: Option<u64>,
        /// Published under the file's append lock: accepted only while
        /// the sender holds the lock's lease (else
        /// [`crate::proto::Errno::Busy`]).
        locked: bool,
        /// The generation of the file the caller's descriptor is of
        /// ([`crate::proto::Attr::gen`]): if the inode has another (its
        /// number was reused), the answer is
        /// [`crate::proto::Errno::StaleHandle`] and nothing changes. 0:
        /// not checked.
        gen: u64,
    },
    /// Take (`hold`) or give back the append lock of `ino` (see
    /// [`Op::AppendLock`]).
    AppendLock {
        /// Inode.
        ino: u64,
        /// Take (true) or give back.
        hold: bool,
        /// A take that only renews a lease the sender holds without a
        /// break: refused ([`crate::proto::Errno::Busy`]) if it lapsed,
        /// even if the lock is free now (another node may have appended
        /// meanwhile).
        renew: bool,
    },
    /// Data transfer through the bulk slot.
    Data {
        /// `Read` or `Write`.
        op: Op,
        /// Bulk slot.
        slot: u32,
        /// Byte offset in the slot where the data is (write) or goes
        /// (read): a slot holds several requests' data side by side, so
        /// they can be in flight together. `at + len` must fit the slot
        /// (else `Invalid`).
        at: u32,
        /// Inode.
        ino: u64,
        /// Byte offset in the file.
        offset: u64,
        /// Bytes to transfer.
        len: u32,
        /// The generation of the file the data is for, as in `Setattr`
        /// (0: not checked).
        gen: u64,
    },
    /// `daxfs` mode: fill a PENDING slot of the shared page cache (see
    /// [`Op::DaxFill`]).
    DaxFill {
        /// The slot (the page it caches is the tag in its slot word).
        slot: u64,
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
    /// A run of one file's pages in one request (reclaim, fsync).
    PageRun(PageRun),
    /// Page-directory counters.
    PageStats,
    /// Invalidation counters.
    InvStats,
    /// Delegation counters.
    DelegStats,
    /// The directory's service times of one kind of miss.
    MissStats {
        /// Which kind.
        kind: MissKind,
    },
    /// Where the pages of `ino` from `first` on live (records in the slot).
    Locality {
        /// Bulk slot for the records.
        slot: u32,
        /// Inode.
        ino: u64,
        /// First page to report.
        first: u64,
    },
}

impl Request {
    /// May serving this change some file's version, size or entries
    /// (everything but lookups, reads, attributes, flushes, counters and
    /// page requests)? The directory bumps the region's metadata epoch
    /// before serving such a request (see
    /// [`crate::layout::Header::meta_epoch`]).
    pub fn may_change_files(&self) -> bool {
        match self {
            Request::Path { op, .. } => *op != Op::Lookup,
            Request::Setattr { .. } => true,
            Request::Data { op, .. } => *op != Op::Read,
            Request::Nop
            | Request::Readdir { .. }
            | Request::Locality { .. }
            | Request::Getattr { .. }
            | Request::AppendLock { .. }
            | Request::DaxFill { .. }
            | Request::Fsync { .. }
            | Request::Stats
            | Request::Page(_)
            | Request::PageRun(_)
            | Request::PageStats
            | Request::InvStats
            | Request::DelegStats
            | Request::MissStats { .. } => false,
        }
    }

    /// Encode with the given tag.
    pub fn encode(&self, tag: u32) -> Desc {
        let (op, args): (Op, [u64; 7]) = match *self {
            Request::Nop => (Op::Nop, [0; 7]),
            Request::Path {
                op,
                slot,
                at,
                len,
                exclusive,
            } => (
                op,
                [
                    slot as u64,
                    len as u64,
                    exclusive as u64,
                    at as u64,
                    0,
                    0,
                    0,
                ],
            ),
            Request::Readdir { slot, ino, cookie } => {
                (Op::Readdir, [slot as u64, ino, cookie, 0, 0, 0, 0])
            }
            Request::Getattr { ino } => (Op::Getattr, [ino, 0, 0, 0, 0, 0, 0]),
            Request::Setattr {
                ino,
                size,
                expect,
                locked,
                gen,
            } => (
                Op::Setattr,
                [
                    ino,
                    size,
                    expect.is_some() as u64,
                    expect.unwrap_or(0),
                    locked as u64,
                    gen,
                    0,
                ],
            ),
            Request::AppendLock { ino, hold, renew } => {
                (Op::AppendLock, [ino, hold as u64, renew as u64, 0, 0, 0, 0])
            }
            Request::Data {
                op,
                slot,
                at,
                ino,
                offset,
                len,
                gen,
            } => (
                op,
                [slot as u64, ino, offset, len as u64, at as u64, gen, 0],
            ),
            Request::Fsync { ino } => (Op::Fsync, [ino, 0, 0, 0, 0, 0, 0]),
            Request::DaxFill { slot } => (Op::DaxFill, [slot, 0, 0, 0, 0, 0, 0]),
            Request::Stats => (Op::Stats, [0; 7]),
            Request::PageStats => (Op::PageStats, [0; 7]),
            Request::InvStats => (Op::InvStats, [0; 7]),
            Request::DelegStats => (Op::DelegStats, [0; 7]),
            Request::MissStats { kind } => (Op::MissStats, [kind as u64, 0, 0, 0, 0, 0, 0]),
            Request::Locality { slot, ino, first } => {
                (Op::Locality, [slot as u64, ino, first, 0, 0, 0, 0])
            }
            Request::Page(p) => {
                let [ino, idx, third] = p.to_args();
                (p.op(), [ino, idx, third, 0, 0, 0, 0])
            }
            Request::PageRun(r) => {
                let [ino, first, count, dirty] = r.to_args();
                (r.kind.op(), [ino, first, count, dirty, 0, 0, 0])
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
            Op::Lookup | Op::Create | Op::Mkdir | Op::Unlink | Op::Rmdir => decode_path(op, a)?,
            Op::Readdir => Request::Readdir {
                slot: small(a[0])?,
                ino: a[1],
                cookie: a[2],
            },
            Op::Getattr => Request::Getattr { ino: a[0] },
            Op::Setattr => decode_setattr(a)?,
            Op::AppendLock => decode_append_lock(a)?,
            Op::Read | Op::Write => Request::Data {
                op,
                slot: small(a[0])?,
                at: small(a[4])?,
                ino: a[1],
                offset: a[2],
                len: small(a[3])?,
                gen: a[5],
            },
            Op::Fsync => Request::Fsync { ino: a[0] },
            Op::DaxFill => Request::DaxFill { slot: a[0] },
            Op::Stats => Request::Stats,
            Op::PageStats => Request::PageStats,
            Op::InvStats => Request::InvStats,
            Op::DelegStats => Request::DelegStats,
            Op::MissStats => Request::MissStats {
                kind: MissKind::from_u64(a[0]).ok_or(DecodeError::BadArgument)?,
            },
            Op::Locality => Request::Locality {
                slot: small(a[0])?,
                ino: a[1],
                first: a[2],
            },
            Op::PageRead
            | Op::PageLookupLock
            | Op::PageUnlock
            | Op::PageInv
            | Op::PageDrop
            | Op::PageWriteback
            | Op::PagePromote
            | Op::PageUnprotect
            | Op::PageDelegate
            | Op::PageDelegReturn => Request::Page(
                PageReq::from_args(op, [a[0], a[1], a[2]])
                    .ok_or(DecodeError::BadOpcode(r.op))??,
            ),
            Op::PageInvRun | Op::PageWritebackRun => Request::PageRun(
                PageRun::from_args(op, [a[0], a[1], a[2], a[3]])
                    .ok_or(DecodeError::BadOpcode(r.op))??,
            ),
            // Notifications are not requests.
            Op::DirInv
            | Op::InvAck
            | Op::Sharers
            | Op::Revoke
            | Op::RevokeAck
            | Op::ReplicasUsed
            | Op::InvRange
            | Op::InvRangeAck
            | Op::DelegRecall => return Err(DecodeError::BadOpcode(r.op)),
        };
        Ok((r.tag, req))
    }
}

/// A path operation's arguments: slot, length (at most [`MAX_PATH`]),
/// the exclusive flag (0 or 1), offset in the slot.
fn decode_path(op: Op, a: [u64; 7]) -> Result<Request, DecodeError> {
    let len = small(a[1])?;
    if len as usize > MAX_PATH || a[2] > 1 {
        return Err(DecodeError::BadArgument);
    }
    Ok(Request::Path {
        op,
        slot: small(a[0])?,
        at: small(a[3])?,
        len,
        exclusive: a[2] == 1,
    })
}

/// SETATTR's arguments: the expected version only with its flag set, the
/// locked flag 0 or 1.
fn decode_setattr(a: [u64; 7]) -> Result<Request, DecodeError> {
    Ok(Request::Setattr {
        ino: a[0],
        size: a[1],
        expect: match a[2] {
            0 if a[3] == 0 => None,
            1 => Some(a[3]),
            _ => return Err(DecodeError::BadArgument),
        },
        locked: match a[4] {
            0 => false,
            1 => true,
            _ => return Err(DecodeError::BadArgument),
        },
        gen: a[5],
    })
}

/// APPEND_LOCK's arguments: a release (0, 0), or a hold that may renew.
fn decode_append_lock(a: [u64; 7]) -> Result<Request, DecodeError> {
    match (a[1], a[2]) {
        (0, 0) => Ok(Request::AppendLock {
            ino: a[0],
            hold: false,
            renew: false,
        }),
        (1, r @ (0 | 1)) => Ok(Request::AppendLock {
            ino: a[0],
            hold: true,
            renew: r == 1,
        }),
        _ => Err(DecodeError::BadArgument),
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
        Request::AppendLock { .. } => Op::AppendLock,
        Request::Fsync { .. } => Op::Fsync,
        Request::DaxFill { .. } => Op::DaxFill,
        Request::Stats => Op::Stats,
        Request::PageStats => Op::PageStats,
        Request::InvStats => Op::InvStats,
        Request::DelegStats => Op::DelegStats,
        Request::MissStats { .. } => Op::MissStats,
        Request::Locality { .. } => Op::Locality,
        Request::Page(p) => p.op(),
        Request::PageRun(r) => r.kind.op(),
    }
}
