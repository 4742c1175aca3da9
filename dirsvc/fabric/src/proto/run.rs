//! Runs of a file's pages in one page request: a reclaim sweep's INVs and
//! an fsync's WRITEBACKs travel one entry per contiguous run of one
//! file's pages ([`PageRun`]), not one per page, and come back as one
//! answer ([`RunReply`]) that says, page by page, what was done.
//!
//! Wire form: `[ino, first, count, dirty]` (opcode [`RunKind::op`]);
//! `dirty` has bit `i` set when page `first + i` was written since its
//! last write-back. The answer is `[done, written]`: bit `i` of `done`
//! says page `first + i` was completed (INV: reclaimed, its frame free;
//! WRITEBACK: clean on the disk), of `written` that the directory wrote
//! it to the disk. A run comes from the region and is untrusted: decoding
//! checks the span ([`PageSpan::new`]), the length ([`MAX_RUN`]) and that
//! no flag lies past the run.

use super::{DecodeError, Op, PageKey, PageSpan};

/// Tags with this bit set are the directory's own (each page of a run is
/// handed to the page directory under one): a node's requests never carry
/// it.
pub const DIR_TAG: u32 = 1 << 31;

/// Most pages one [`PageRun`] covers: one flag bit per page in a `u64`.
pub const MAX_RUN: u64 = 64;

/// What a run asks for, page by page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    /// The owner reclaims every page (each one a BATCH_INV element).
    Inv,
    /// Write every page back if dirty (fsync).
    Writeback,
}

impl RunKind {
    /// Both kinds.
    pub const ALL: [RunKind; 2] = [RunKind::Inv, RunKind::Writeback];

    /// The opcode a run of this kind travels with (the one table; decoding
    /// looks it up the other way).
    pub fn op(self) -> Op {
        match self {
            RunKind::Inv => Op::PageInvRun,
            RunKind::Writeback => Op::PageWritebackRun,
        }
    }

    /// The kind an opcode stands for, if it is a run's.
    pub fn of_op(op: Op) -> Option<RunKind> {
        RunKind::ALL.into_iter().find(|k| k.op() == op)
    }
}

/// The flag bits of a run of `count` pages (`count` in 1..=[`MAX_RUN`]).
pub fn run_mask(count: u64) -> u64 {
    match count {
        0 => 0,
        c if c >= MAX_RUN => u64::MAX,
        c => (1u64 << c) - 1,
    }
}

/// Pages `span` of one file in one request (never empty, at most
/// [`MAX_RUN`] pages), with each page's dirty flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRun {
    /// Reclaim or write back.
    pub kind: RunKind,
    /// The pages.
    pub span: PageSpan,
    /// Bit `i`: page `span.first + i` is dirty.
    pub dirty: u64,
}

impl PageRun {
    /// A run, if well-formed (see the module doc).
    pub fn new(kind: RunKind, span: PageSpan, dirty: u64) -> Option<PageRun> {
        (span.count <= MAX_RUN && dirty & !run_mask(span.count) == 0).then_some(PageRun {
            kind,
            span,
            dirty,
        })
    }

    /// Page `i` of the run (`i < span.count`).
    pub fn key(&self, i: u64) -> PageKey {
        PageKey {
            ino: self.span.ino,
            idx: self.span.first + i,
        }
    }

    /// Is page `i` of the run dirty?
    pub fn is_dirty(&self, i: u64) -> bool {
        i < MAX_RUN && self.dirty & (1 << i) != 0
    }

    /// Its pages with their dirty flags, in order.
    pub fn pages(&self) -> impl Iterator<Item = (PageKey, bool)> + '_ {
        (0..self.span.count).map(|i| (self.key(i), self.is_dirty(i)))
    }

    /// Wire arguments `[ino, first, count, dirty]`.
    pub(super) fn to_args(self) -> [u64; 4] {
        [self.span.ino, self.span.first, self.span.count, self.dirty]
    }

    /// Decode the run of opcode `op` from its arguments; `None` if `op`
    /// is not a run's.
    pub(super) fn from_args(op: Op, a: [u64; 4]) -> Option<Result<PageRun, DecodeError>> {
        let kind = RunKind::of_op(op)?;
        Some(
            PageSpan::new(a[0], a[1], a[2])
                .and_then(|span| PageRun::new(kind, span, a[3]))
                .ok_or(DecodeError::BadArgument),
        )
    }

    /// Split sorted `(page, dirty)` pairs into runs of `kind`: a new run
    /// starts at another file, a gap, or after [`MAX_RUN`] pages.
    pub fn split(kind: RunKind, pages: &[(PageKey, bool)]) -> alloc::vec::Vec<PageRun> {
        let mut out: alloc::vec::Vec<PageRun> = alloc::vec::Vec::new();
        for &(key, dirty) in pages {
            if let Some(r) = out.last_mut() {
                let next = r.span.first.checked_add(r.span.count);
                if r.span.ino == key.ino && next == Some(key.idx) && r.span.count < MAX_RUN {
                    r.dirty |= (dirty as u64) << r.span.count;
                    r.span.count += 1;
                    continue;
                }
            }
            out.push(PageRun {
                kind,
                span: PageSpan::page(key),
                dirty: dirty as u64,
            });
        }
        out
    }
}

/// The answer to a [`PageRun`]: page by page, done and written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RunReply {
    /// Bit `i`: page `first + i` was completed.
    pub done: u64,
    /// Bit `i`: page `first + i` was written to the disk.
    pub written: u64,
}
