//! Answers (directory -> node) as the node sees them, with their encoding.

use super::{
    small, Attr, DecodeError, DelegStats, Desc, Errno, FileKind, InvStats, Op, PageDirStats,
    PageReply, Raw, RunReply,
};

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

impl DirStats {
    /// The descriptor arguments, in wire order.
    pub fn to_args(&self) -> [u64; 7] {
        [
            self.requests,
            self.disk_reads,
            self.disk_writes,
            self.inodes_used,
            self.inodes_total,
            self.blocks_used,
            self.blocks_total,
        ]
    }

    /// From the descriptor arguments (every value is valid).
    pub fn from_args(a: [u64; 7]) -> DirStats {
        let [requests, disk_reads, disk_writes, inodes_used, inodes_total, blocks_used, blocks_total] =
            a;
        DirStats {
            requests,
            disk_reads,
            disk_writes,
            inodes_used,
            inodes_total,
            blocks_used,
            blocks_total,
        }
    }
}

/// Which misses [`Op::MissStats`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum MissKind {
    /// Single-copy READ misses the directory filled from disk into the
    /// requester's frame (asynchronous fills).
    PageFill = 0,
    /// File-server reads over the rings (`private` mode's misses).
    FileRead = 1,
}

impl MissKind {
    /// Both kinds, in wire order.
    pub const ALL: [MissKind; 2] = [MissKind::PageFill, MissKind::FileRead];

    /// From the wire value.
    pub fn from_u64(v: u64) -> Option<MissKind> {
        MissKind::ALL.into_iter().find(|k| *k as u64 == v)
    }
}

/// The directory's own service time of one kind of miss, summed over the
/// misses it timed, in nanoseconds of its clock, phase by phase: from
/// taking the request off the ring to the end of the lookup (page
/// directory and block map; for a file read, everything before the read
/// itself), the disk read (a fill: queued until its completion was seen;
/// a file read: the file system's read), the fill (a fill: checksum check
/// and copy into the requester's frame; a file read: copy into the bulk
/// slot and the attributes), and the reply (until the answer is on the
/// response ring). Their sum is the directory's service time; the rest of
/// a node's round trip is transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MissStats {
    /// Misses timed.
    pub count: u64,
    /// Request taken -> lookup done.
    pub lookup_ns: u64,
    /// The disk read.
    pub disk_ns: u64,
    /// Data into the frame or the bulk slot.
    pub fill_ns: u64,
    /// Answer published.
    pub reply_ns: u64,
}

impl MissStats {
    /// The descriptor arguments, in wire order.
    pub fn to_args(&self) -> [u64; 7] {
        [
            self.count,
            self.lookup_ns,
            self.disk_ns,
            self.fill_ns,
            self.reply_ns,
            0,
            0,
        ]
    }

    /// From the descriptor arguments (every value is valid).
    pub fn from_args(a: [u64; 7]) -> MissStats {
        MissStats {
            count: a[0],
            lookup_ns: a[1],
            disk_ns: a[2],
            fill_ns: a[3],
            reply_ns: a[4],
        }
    }

    /// The directory's whole service time.
    pub fn service_ns(&self) -> u64 {
        self.lookup_ns
            .saturating_add(self.disk_ns)
            .saturating_add(self.fill_ns)
            .saturating_add(self.reply_ns)
    }

    /// What was added since `earlier` (counters only grow; a directory
    /// restart in between gives zeros rather than wrapping).
    pub fn since(&self, earlier: &MissStats) -> MissStats {
        MissStats {
            count: self.count.saturating_sub(earlier.count),
            lookup_ns: self.lookup_ns.saturating_sub(earlier.lookup_ns),
            disk_ns: self.disk_ns.saturating_sub(earlier.disk_ns),
            fill_ns: self.fill_ns.saturating_sub(earlier.fill_ns),
            reply_ns: self.reply_ns.saturating_sub(earlier.reply_ns),
        }
    }
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
    /// Answer to a run of pages, page by page.
    Run(RunReply),
    /// Page-directory counters.
    PageStats(PageDirStats),
    /// Invalidation counters.
    InvStats(InvStats),
    /// Delegation counters.
    DelegStats(DelegStats),
    /// Service times of one kind of miss.
    MissStats(MissStats),
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
            Response::Stats(s) => r.args = s.to_args(),
            Response::Page(p) => r.args[..3].copy_from_slice(&p.to_args()),
            Response::Run(x) => {
                r.args[0] = x.done;
                r.args[1] = x.written;
            }
            Response::PageStats(s) => r.args = s.to_args(),
            Response::InvStats(s) => r.args = s.to_args(),
            Response::DelegStats(s) => r.args = s.to_args(),
            Response::MissStats(s) => r.args = s.to_args(),
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
            Op::Lookup | Op::Create | Op::Mkdir | Op::Getattr | Op::Setattr | Op::AppendLock => {
                Response::Attr(attr()?)
            }
            Op::Readdir | Op::Locality => Response::Entries {
                count: small(a[4])?,
                next_cookie: a[5],
            },
            Op::Read | Op::Write | Op::DaxFill => Response::Data {
                bytes: small(a[4])?,
                attr: attr()?,
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
            | Op::PageDelegReturn => Response::Page(PageReply::from_args([a[0], a[1], a[2]])?),
            // Any bits are well-formed: the requester reads those of its
            // run's pages only.
            Op::PageInvRun | Op::PageWritebackRun => Response::Run(RunReply {
                done: a[0],
                written: a[1],
            }),
            Op::PageStats => Response::PageStats(PageDirStats::from_args(a)),
            Op::InvStats => Response::InvStats(InvStats::from_args(a)),
            Op::DelegStats => Response::DelegStats(DelegStats::from_args(a)),
            Op::MissStats => Response::MissStats(MissStats::from_args(a)),
            Op::DirInv
            | Op::InvAck
            | Op::Sharers
            | Op::Revoke
            | Op::RevokeAck
            | Op::ReplicasUsed
            | Op::InvRange
            | Op::InvRangeAck
            | Op::DelegRecall => return Err(DecodeError::BadOpcode(r.op)),
            Op::Stats => Response::Stats(DirStats::from_args(a)),
        };
        Ok((r.tag, resp))
    }
}
