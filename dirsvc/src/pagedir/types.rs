//! The page directory's vocabulary: per-node page states, an entry and
//! its phase, the actions a step returns, the counters, and who owns a
//! frame.

use fabric::proto::{DelegRange, PageKey, PageReply, PageSpan};

/// Per-node view of a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageState {
    /// Invalid.
    I,
    /// Transient exclusive.
    E,
    /// Owner.
    O,
    /// Shared (maps the owner's frame).
    S,
    /// To be invalidated (owner reclaiming).
    Tbi,
}

/// What an entry is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// E: `owner` reserved the page; its frame is being filled (by the
    /// directory from disk, or by the node's full-page write).
    Exclusive {
        /// Filled by the directory (READ miss) rather than by the node.
        by_dir: bool,
        /// Tag of the READ to answer when the fill completes.
        tag: u32,
    },
    /// O (+ S for sharers): stable.
    Owned,
    /// TBI: waiting for the acks of `pending` sharers; then answer the
    /// owner's `tag` (or nobody, when the owner failed).
    Invalidating {
        /// Sharers that have not acked yet.
        pending: u64,
        /// Tag of the owner's invalidation request (0: owner failed).
        tag: u32,
    },
}

/// One cached page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// Owner (or reserving) node, 1..=64.
    pub owner: u8,
    /// The owner's frame.
    pub gfn: u64,
    /// Bit `n-1` set: node `n` maps the frame.
    pub sharers: u64,
    /// Someone wrote the page since the last write-back.
    pub dirty: bool,
    /// Transient state.
    pub phase: Phase,
}

/// What the directory must do after a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Answer `node`'s request `tag`.
    Reply {
        /// Node.
        node: u8,
        /// Its tag.
        tag: u32,
        /// Answer.
        reply: PageReply,
    },
    /// Read the page from disk into frame `gfn`, then call
    /// [`PageDir::filled`](super::PageDir::filled) (which replies to the requester).
    Fill {
        /// Page.
        key: PageKey,
        /// Frame to fill.
        gfn: u64,
    },
    /// Write frame `gfn` to the page on disk (before the reply that
    /// follows in the same action list).
    WriteBack {
        /// Page.
        key: PageKey,
        /// Frame to write.
        gfn: u64,
    },
    /// Tell `node` to unmap `key` and ack (notify ring).
    Invalidate {
        /// Sharer node.
        node: u8,
        /// Page.
        key: PageKey,
    },
    /// Tell `node` to unmap (and free, where it owns them) every page of
    /// `span` and ack once (INV_RANGE): a file's teardown. Every page of
    /// the span awaits `node`'s ack.
    InvalidateRange {
        /// Sharer or owner node.
        node: u8,
        /// Pages.
        span: PageSpan,
    },
    /// Tell `node`, a delegation's holder, to give `range` back (RECALL,
    /// notify ring; answered by its DELEG_RETURN).
    Recall {
        /// Holder.
        node: u8,
        /// The delegated range.
        range: DelegRange,
    },
    /// Read `node`'s list frame `gfn` of its delegation of `range` (the
    /// format is `fabric::proto::DelegList`), then call
    /// [`PageDir::list_read`](super::PageDir::list_read) with its pages.
    ReadList {
        /// Holder.
        node: u8,
        /// The delegated range.
        range: DelegRange,
        /// Its list frame.
        gfn: u64,
    },
    /// Set (true) or clear the export bit of frame `gfn`.
    Export {
        /// Frame.
        gfn: u64,
        /// New bit value.
        on: bool,
    },
}

/// Counters for `dir stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageStats {
    /// READ requests.
    pub reads: u64,
    /// READ misses filled from disk.
    pub fills: u64,
    /// READ / LOOKUP_LOCK answered with a mapping of another node's frame.
    pub remote_maps: u64,
    /// LOOKUP_LOCK requests.
    pub lookup_locks: u64,
    /// UNLOCK requests.
    pub unlocks: u64,
    /// INV requests (pages).
    pub invs: u64,
    /// DIR_INV notifications sent (one page each).
    pub dir_invs: u64,
    /// INV_RANGE notifications sent (a run of a file's pages each).
    pub range_invs: u64,
    /// Pages the INV_RANGE notifications covered.
    pub range_pages: u64,
    /// INV_ACKs received.
    pub acks: u64,
    /// Acks of INV_RANGEs received.
    pub range_acks: u64,
    /// DROP requests.
    pub drops: u64,
    /// Write-backs to disk.
    pub writebacks: u64,
    /// Retry answers.
    pub retries: u64,
    /// Refused requests (and records of a delegation's list not
    /// installed).
    pub refused: u64,
    /// Delegations granted.
    pub delegations: u64,
    /// DELEGATE requests not granted.
    pub deleg_denied: u64,
    /// Recalls sent.
    pub recalls: u64,
    /// Delegations given back (on a recall or on the holder's own).
    pub returns: u64,
    /// Pages learnt from delegations' lists (installed, or written back
    /// for a failed holder).
    pub deleg_pages: u64,
    /// Requests that waited for a recall.
    pub parked: u64,
}

/// Who owns which frames: the directory checks that a requester only
/// offers its own frames.
pub trait FrameOwner {
    /// The node whose pool holds `gfn`, if any.
    fn owner_of(&self, gfn: u64) -> Option<u8>;
}

impl FrameOwner for fabric::layout::Layout {
    fn owner_of(&self, gfn: u64) -> Option<u8> {
        self.gfn_owner(gfn).map(|n| n as u8)
    }
}
