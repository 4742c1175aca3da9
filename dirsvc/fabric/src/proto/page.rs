//! The single-copy protocol's messages: page requests, their answers and
//! the page directory's counters, with their wire encoding (each mapping
//! written once: [`PageReq::op`] for request -> opcode, [`PageReply::code`]
//! for answer -> kind code, [`PageDirStats::to_args`] for the counters'
//! order; decoding looks the other way up in the same function).

use super::{DecodeError, DelegRange, Desc, Op, Raw};

/// A page of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PageKey {
    /// Inode.
    pub ino: u64,
    /// Page index in the file.
    pub idx: u64,
}

/// Most pages one [`PageSpan`] covers: a longer run travels as several.
pub const MAX_SPAN: u64 = 1 << 20;

/// A run of pages of one file: `count` pages from `first` on (never empty,
/// never past the last page index; decoding checks both).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PageSpan {
    /// Inode.
    pub ino: u64,
    /// First page index.
    pub first: u64,
    /// Pages (1..=[`MAX_SPAN`]).
    pub count: u64,
}

impl PageSpan {
    /// The span of `count` pages of `ino` from `first`, if well-formed.
    pub fn new(ino: u64, first: u64, count: u64) -> Option<PageSpan> {
        let ok = (1..=MAX_SPAN).contains(&count) && first.checked_add(count).is_some();
        ok.then_some(PageSpan { ino, first, count })
    }

    /// The one page `key`.
    pub fn page(key: PageKey) -> PageSpan {
        PageSpan {
            ino: key.ino,
            first: key.idx,
            count: 1,
        }
    }

    /// Last page index (inclusive).
    pub fn last(&self) -> u64 {
        self.first.saturating_add(self.count - 1)
    }

    /// Is `key` one of its pages?
    pub fn contains(&self, key: &PageKey) -> bool {
        key.ino == self.ino && key.idx >= self.first && key.idx <= self.last()
    }

    /// Its pages' keys as a range (for a `BTreeMap::range` over keys).
    pub fn keys(&self) -> core::ops::RangeInclusive<PageKey> {
        let at = |idx| PageKey { ino: self.ino, idx };
        at(self.first)..=at(self.last())
    }
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
    /// Strong mode: a sharer asks to keep a read-only replica of the page
    /// in its own memory (hot-page promotion). `Done`: granted, copy the
    /// frame now; `Refused`: not now.
    Promote {
        /// Page.
        key: PageKey,
    },
    /// Strong mode: the requester is about to store into the page and
    /// found its frame's replica bit set: revoke every other node's
    /// replica first (`Done` once they are gone).
    Unprotect {
        /// Page.
        key: PageKey,
    },
    /// Strong mode, `delegation=1`: take the delegation of `range`, the
    /// list of its pages kept in `list`, a frame of the requester's pool
    /// (see `proto/deleg.rs`). Answered [`PageReply::Delegated`].
    Delegate {
        /// The range.
        range: DelegRange,
        /// The holder's list frame.
        list: u64,
    },
    /// Give the delegation of `range` back (on a recall, or on the
    /// holder's own): the directory reads the list frame, installs its
    /// pages as owned and answers `Done`; from then on the list frame is
    /// free. Answered `Done` too when there is no such delegation (the
    /// file was cut meanwhile), so a return is never refused for a race.
    DelegReturn {
        /// The range.
        range: DelegRange,
    },
}

/// A page-request flag argument on the wire: 0 or 1, anything else is an
/// error.
fn flag(v: u64) -> Result<bool, DecodeError> {
    match v {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(DecodeError::BadArgument),
    }
}

impl PageReq {
    /// One request of each kind (fields zero): how decoding finds the kind
    /// an opcode stands for through [`PageReq::op`].
    const KINDS: [PageReq; 10] = {
        let key = PageKey { ino: 0, idx: 0 };
        let range = DelegRange { ino: 0, base: 0 };
        [
            PageReq::Read { key, frame: 0 },
            PageReq::LookupLock { key, frame: 0 },
            PageReq::Unlock { key },
            PageReq::Inv { key, dirty: false },
            PageReq::Drop { key, dirty: false },
            PageReq::Writeback { key, dirty: false },
            PageReq::Promote { key },
            PageReq::Unprotect { key },
            PageReq::Delegate { range, list: 0 },
            PageReq::DelegReturn { range },
        ]
    };

    /// The page concerned (a delegation's: the first page of its range).
    pub fn key(&self) -> PageKey {
        match *self {
            PageReq::Delegate { range, .. } | PageReq::DelegReturn { range } => range.key(0),
            PageReq::Read { key, .. }
            | PageReq::LookupLock { key, .. }
            | PageReq::Unlock { key }
            | PageReq::Inv { key, .. }
            | PageReq::Drop { key, .. }
            | PageReq::Writeback { key, .. }
            | PageReq::Promote { key }
            | PageReq::Unprotect { key } => key,
        }
    }

    /// The opcode this request travels with: the one table from page
    /// request to opcode (encoding, decoding and [`super::op_of`] use it).
    pub fn op(&self) -> Op {
        match self {
            PageReq::Read { .. } => Op::PageRead,
            PageReq::LookupLock { .. } => Op::PageLookupLock,
            PageReq::Unlock { .. } => Op::PageUnlock,
            PageReq::Inv { .. } => Op::PageInv,
            PageReq::Drop { .. } => Op::PageDrop,
            PageReq::Writeback { .. } => Op::PageWriteback,
            PageReq::Promote { .. } => Op::PagePromote,
            PageReq::Unprotect { .. } => Op::PageUnprotect,
            PageReq::Delegate { .. } => Op::PageDelegate,
            PageReq::DelegReturn { .. } => Op::PageDelegReturn,
        }
    }

    /// Wire arguments `[ino, idx, frame or dirty flag]` (the opcode is
    /// [`PageReq::op`]); a delegation's: `[ino, base, list frame or 0]`.
    pub(super) fn to_args(self) -> [u64; 3] {
        let k = self.key();
        let third = match self {
            PageReq::Read { frame, .. } | PageReq::LookupLock { frame, .. } => frame,
            PageReq::Delegate { list, .. } => list,
            PageReq::Unlock { .. }
            | PageReq::Promote { .. }
            | PageReq::Unprotect { .. }
            | PageReq::DelegReturn { .. } => 0,
            PageReq::Inv { dirty, .. }
            | PageReq::Drop { dirty, .. }
            | PageReq::Writeback { dirty, .. } => dirty as u64,
        };
        [k.ino, k.idx, third]
    }

    /// Decode a page request of opcode `op` from its arguments; `None` if
    /// `op` is not a page request.
    pub(super) fn from_args(op: Op, a: [u64; 3]) -> Option<Result<PageReq, DecodeError>> {
        let kind = PageReq::KINDS.into_iter().find(|k| k.op() == op)?;
        let key = PageKey {
            ino: a[0],
            idx: a[1],
        };
        Some(match kind {
            PageReq::Read { .. } => Ok(PageReq::Read { key, frame: a[2] }),
            PageReq::LookupLock { .. } => Ok(PageReq::LookupLock { key, frame: a[2] }),
            PageReq::Unlock { .. } => Ok(PageReq::Unlock { key }),
            PageReq::Inv { .. } => flag(a[2]).map(|dirty| PageReq::Inv { key, dirty }),
            PageReq::Drop { .. } => flag(a[2]).map(|dirty| PageReq::Drop { key, dirty }),
            PageReq::Writeback { .. } => flag(a[2]).map(|dirty| PageReq::Writeback { key, dirty }),
            PageReq::Promote { .. } => Ok(PageReq::Promote { key }),
            PageReq::Unprotect { .. } => Ok(PageReq::Unprotect { key }),
            PageReq::Delegate { .. } => DelegRange::new(a[0], a[1])
                .map(|range| PageReq::Delegate { range, list: a[2] })
                .ok_or(DecodeError::BadArgument),
            PageReq::DelegReturn { .. } => match (DelegRange::new(a[0], a[1]), a[2]) {
                (Some(range), 0) => Ok(PageReq::DelegReturn { range }),
                _ => Err(DecodeError::BadArgument),
            },
        })
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
    /// The answer to a DELEGATE: `granted`, the range is the requester's
    /// until it returns it; else it goes on page by page (another node
    /// holds or maps a page of the range, or delegation is off).
    Delegated {
        /// The delegation is the requester's.
        granted: bool,
    },
}

/// Kind codes of [`PageReply`] on the wire (argument 0 of the answer).
pub mod reply_code {
    /// [`super::PageReply::Owner`].
    pub const OWNER: u64 = 1;
    /// [`super::PageReply::Exclusive`].
    pub const EXCLUSIVE: u64 = 2;
    /// [`super::PageReply::Shared`].
    pub const SHARED: u64 = 3;
    /// [`super::PageReply::Retry`].
    pub const RETRY: u64 = 4;
    /// [`super::PageReply::Done`].
    pub const DONE: u64 = 5;
    /// [`super::PageReply::Refused`].
    pub const REFUSED: u64 = 6;
    /// [`super::PageReply::IoError`].
    pub const IO_ERROR: u64 = 7;
    /// [`super::PageReply::Delegated`].
    pub const DELEGATED: u64 = 8;
}

impl PageReply {
    /// One answer of each kind (fields zero or the lowest valid value): how
    /// decoding finds the kind a code stands for through [`PageReply::code`].
    const KINDS: [PageReply; 8] = [
        PageReply::Owner { gfn: 0 },
        PageReply::Exclusive { gfn: 0 },
        PageReply::Shared { owner: 1, gfn: 0 },
        PageReply::Retry,
        PageReply::Done { written: false },
        PageReply::Refused,
        PageReply::IoError,
        PageReply::Delegated { granted: false },
    ];

    /// The kind code this answer travels with: the one table from answer
    /// to code (encoding and decoding use it).
    pub fn code(&self) -> u64 {
        match self {
            PageReply::Owner { .. } => reply_code::OWNER,
            PageReply::Exclusive { .. } => reply_code::EXCLUSIVE,
            PageReply::Shared { .. } => reply_code::SHARED,
            PageReply::Retry => reply_code::RETRY,
            PageReply::Done { .. } => reply_code::DONE,
            PageReply::Refused => reply_code::REFUSED,
            PageReply::IoError => reply_code::IO_ERROR,
            PageReply::Delegated { .. } => reply_code::DELEGATED,
        }
    }

    /// Wire arguments `[code, gfn, owner or written]`.
    pub(super) fn to_args(self) -> [u64; 3] {
        let (gfn, extra) = match self {
            PageReply::Owner { gfn } | PageReply::Exclusive { gfn } => (gfn, 0),
            PageReply::Shared { owner, gfn } => (gfn, owner as u64),
            PageReply::Done { written } => (0, written as u64),
            PageReply::Delegated { granted } => (0, granted as u64),
            PageReply::Retry | PageReply::Refused | PageReply::IoError => (0, 0),
        };
        [self.code(), gfn, extra]
    }

    /// Decode from the wire arguments; an unknown code or an owner outside
    /// 1..=64 is an error.
    pub(super) fn from_args(a: [u64; 3]) -> Result<PageReply, DecodeError> {
        let kind = PageReply::KINDS
            .into_iter()
            .find(|k| k.code() == a[0])
            .ok_or(DecodeError::BadArgument)?;
        Ok(match kind {
            PageReply::Owner { .. } => PageReply::Owner { gfn: a[1] },
            PageReply::Exclusive { .. } => PageReply::Exclusive { gfn: a[1] },
            PageReply::Shared { .. } => PageReply::Shared {
                owner: u8::try_from(a[2])
                    .ok()
                    .filter(|o| (1..=64).contains(o))
                    .ok_or(DecodeError::BadArgument)?,
                gfn: a[1],
            },
            PageReply::Done { .. } => PageReply::Done { written: a[2] != 0 },
            PageReply::Delegated { .. } => PageReply::Delegated {
                granted: flag(a[2])?,
            },
            other @ (PageReply::Retry | PageReply::Refused | PageReply::IoError) => other,
        })
    }
}

/// Page-directory counters, the answer to [`Op::PageStats`] (`dir stats`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PageDirStats {
    /// Entries in the page directory now.
    pub entries: u64,
    /// Page requests handled (READ, LOOKUP_LOCK, UNLOCK, INV, DROP).
    pub page_requests: u64,
    /// Pages filled from disk into a requester's frame.
    pub fills: u64,
    /// Remote mappings granted (answers `Shared`).
    pub remote_maps: u64,
    /// Invalidations sent to sharers (DIR_INV).
    pub dir_invs: u64,
    /// Pages written back to disk.
    pub writebacks: u64,
    /// Most requests served from one node in one sweep.
    pub max_batch: u64,
}

impl PageDirStats {
    /// The descriptor arguments, in wire order.
    pub fn to_args(&self) -> [u64; 7] {
        [
            self.entries,
            self.page_requests,
            self.fills,
            self.remote_maps,
            self.dir_invs,
            self.writebacks,
            self.max_batch,
        ]
    }

    /// From the descriptor arguments (every value is valid).
    pub fn from_args(a: [u64; 7]) -> PageDirStats {
        let [entries, page_requests, fills, remote_maps, dir_invs, writebacks, max_batch] = a;
        PageDirStats {
            entries,
            page_requests,
            fills,
            remote_maps,
            dir_invs,
            writebacks,
            max_batch,
        }
    }
}

/// Invalidation counters, the answer to [`Op::InvStats`] (`dir stats`):
/// notices sent and acks taken, per page (DIR_INV) and per run of a
/// file's pages (INV_RANGE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InvStats {
    /// DIR_INVs sent (one page each).
    pub dir_invs: u64,
    /// INV_ACKs taken.
    pub acks: u64,
    /// INV_RANGEs sent.
    pub range_invs: u64,
    /// Acks of INV_RANGEs taken.
    pub range_acks: u64,
    /// Pages the INV_RANGEs covered (what per-page notices would have
    /// been sent instead).
    pub range_pages: u64,
    /// Notices taken as acknowledged from quietly sleeping nodes.
    pub quiet_taken: u64,
}

impl InvStats {
    /// The descriptor arguments, in wire order.
    pub fn to_args(&self) -> [u64; 7] {
        [
            self.dir_invs,
            self.acks,
            self.range_invs,
            self.range_acks,
            self.range_pages,
            self.quiet_taken,
            0,
        ]
    }

    /// From the descriptor arguments (every value is valid).
    pub fn from_args(a: [u64; 7]) -> InvStats {
        let [dir_invs, acks, range_invs, range_acks, range_pages, quiet_taken, _] = a;
        InvStats {
            dir_invs,
            acks,
            range_invs,
            range_acks,
            range_pages,
            quiet_taken,
        }
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
    /// To the owner: this many nodes map its page now (no ack).
    Sharers {
        /// Page.
        key: PageKey,
        /// Nodes mapping it (0..=64).
        count: u32,
    },
    /// To a replica holder (strong mode): drop your replica of this page
    /// (the mapping stays) and ack with [`Notice::RevokeAck`].
    Revoke(PageKey),
    /// The replica is gone.
    RevokeAck(PageKey),
    /// To a member that has not said it saw replicas in use (strong
    /// mode): look at the header's `replicas_used` now (it wakes an idle
    /// node). No ack.
    ReplicasUsed,
    /// Unmap (and, for pages this node owns, free) every page of the span
    /// and acknowledge once with [`Notice::InvRangeAck`] (a file's
    /// teardown: unlink, truncate).
    InvRange(PageSpan),
    /// Done with every page of the span; `dirty`: the node had written
    /// one of them.
    InvRangeAck {
        /// Pages.
        span: PageSpan,
        /// The node had written one of them.
        dirty: bool,
    },
    /// To a delegation's holder: give the range back now (another node
    /// asked for one of its pages); answered by a DELEG_RETURN request.
    Recall(DelegRange),
}

impl Notice {
    /// Encode.
    pub fn encode(&self) -> Desc {
        let (op, k, d) = match *self {
            Notice::DirInv(k) => (Op::DirInv, k, 0),
            Notice::InvAck { key, dirty } => (Op::InvAck, key, dirty as u64),
            Notice::Sharers { key, count } => (Op::Sharers, key, count as u64),
            Notice::Revoke(k) => (Op::Revoke, k, 0),
            Notice::RevokeAck(k) => (Op::RevokeAck, k, 0),
            Notice::ReplicasUsed => (Op::ReplicasUsed, PageKey { ino: 0, idx: 0 }, 0),
            Notice::InvRange(s) => return span_desc(Op::InvRange, s, 0),
            Notice::Recall(r) => (Op::DelegRecall, r.key(0), 0),
            Notice::InvRangeAck { span, dirty } => {
                return span_desc(Op::InvRangeAck, span, dirty as u64)
            }
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
            Some(Op::Sharers) if r.args[2] <= 64 => Ok(Notice::Sharers {
                key,
                count: r.args[2] as u32,
            }),
            Some(Op::Sharers) => Err(DecodeError::BadArgument),
            Some(Op::Revoke) => Ok(Notice::Revoke(key)),
            Some(Op::RevokeAck) => Ok(Notice::RevokeAck(key)),
            Some(Op::ReplicasUsed) => Ok(Notice::ReplicasUsed),
            Some(Op::DelegRecall) if r.args[2..].iter().all(|a| *a == 0) => {
                DelegRange::new(r.args[0], r.args[1])
                    .map(Notice::Recall)
                    .ok_or(DecodeError::BadArgument)
            }
            Some(Op::DelegRecall) => Err(DecodeError::BadArgument),
            Some(op @ (Op::InvRange | Op::InvRangeAck)) => {
                let span = PageSpan::new(r.args[0], r.args[1], r.args[2])
                    .ok_or(DecodeError::BadArgument)?;
                match (op, r.args[3]) {
                    (Op::InvRange, 0) => Ok(Notice::InvRange(span)),
                    (Op::InvRangeAck, d @ (0 | 1)) => Ok(Notice::InvRangeAck {
                        span,
                        dirty: d == 1,
                    }),
                    _ => Err(DecodeError::BadArgument),
                }
            }
            _ => Err(DecodeError::BadOpcode(r.op)),
        }
    }
}

/// A span notice: `[ino, first, count, flag]`.
fn span_desc(op: Op, s: PageSpan, flag: u64) -> Desc {
    Raw {
        op: op as u16,
        status: 0,
        tag: 0,
        args: [s.ino, s.first, s.count, flag, 0, 0, 0],
    }
    .encode()
}
