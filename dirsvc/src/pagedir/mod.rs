//! The page directory: DPC's per-page state machine (DPC §3.1.1, Fig. 2).
//!
//! For every cached file page `(inode, page index)` the directory keeps one
//! [`Entry`]: the owner (the only node holding the page in its frame pool),
//! the owner's global frame number, the set of sharers (nodes mapping the
//! owner's frame), and a transient state. Per node, the page is in one of
//! five states, derived from the entry ([`PageDir::state_of`]):
//!
//! | state | meaning |
//! | --- | --- |
//! | I   | no copy, no mapping |
//! | E   | reserved: this node installs the next copy (fill or full write) |
//! | O   | owner: the copy lives in this node's frame |
//! | S   | maps the owner's frame |
//! | TBI | the owner reclaims the page; sharers are being invalidated |
//!
//! The machine is pure: [`PageDir::handle`] takes one request from one node
//! and returns [`Action`]s (replies, invalidations to send, disk transfers
//! to perform); [`PageDir::ack`] and [`PageDir::node_failed`] feed the other
//! inputs. The directory's serving loop executes the actions; the host
//! simulation executes them with arbitrary delays and checks the invariants
//! ([`PageDir::check`]) after every step.
//!
//! Invariants: at most one node in O or E per page; every S maps the
//! current owner's frame (sharers are recorded only on owned entries, and
//! the frame is exported while it has sharers); no sharer keeps a mapping
//! after the entry leaves (TBI completes only when every sharer acked or
//! failed); no two entries use the same frame.
//!
//! Every DIR_INV sent to a node is answered by exactly one INV_ACK from it
//! (or by its failure), and the entry stays in TBI until then: a node's
//! DROP racing the DIR_INV does not stand in for the ack. DIR_INV carries
//! only the page, so a DIR_INV that could still be on its way while the
//! same node got a newer copy of the page would tear that copy down. For
//! the same reason a node that gets a DIR_INV while its own READ /
//! LOOKUP_LOCK of the page is unanswered defers the ack until the answer
//! is in ([`crate::pagecache::NodeCache::dir_inv`]).
//!
//! By job: the entries and queries here; requests from nodes in
//! `requests.rs`; fill completions and stale fills in `fills.rs`; acks
//! and what the last ack completes in `acks.rs`; failed nodes and file
//! teardowns in `teardown.rs`; the records' packing in `table.rs`; the
//! invariants in `check.rs`.
//!
//! Delegated ownership (`deleg.rs`): a node alone with a range of a file
//! may take the whole range and hold pages of it the directory does not
//! know of; another node's lookup in the range waits for the range to be
//! given back (or its holder to fail) and its pages to be installed.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::vec::Vec;

mod acks;
mod check;
mod deleg;
mod fills;
mod requests;
mod table;
mod teardown;
mod types;

pub use deleg::{Delegation, Parked};
use table::Table;
pub use table::{Unfit, Width, NARROW_RECORD, WIDE_RECORD};
pub use types::{Action, Entry, FrameOwner, PageState, PageStats, Phase};

use fabric::proto::{DelegRange, PageKey};

/// Bytes of directory state per cached page, for `dir stats`: the layout
/// for clusters of up to 32 nodes with files cached whole (a 10-byte record
/// plus the chunk index's share, an upper bound). [`PageDir::bytes_per_entry`]
/// measures a live directory; tests check that 100k pages spread over
/// files stay within this figure.
pub const BYTES_PER_ENTRY: usize = table::DENSE_NARROW_BYTES;

/// The page directory (cloneable: the model checker explores copies).
#[derive(Debug, Clone)]
pub struct PageDir {
    table: Table,
    /// Entries torn down by [`PageDir::evict_file`]; `true` once the
    /// sharers are gone, the frame unexported and the owner told.
    evicting: BTreeMap<PageKey, bool>,
    /// Fills from disk whose block changed after they were started (a
    /// write, a truncation or an unlink of their file): their bytes are
    /// stale, so their completion answers `Retry` instead of committing
    /// ([`PageDir::stale_fills`]).
    stale: BTreeSet<PageKey>,
    /// Delegated ranges (`deleg.rs`).
    delegs: BTreeMap<DelegRange, Delegation>,
    /// DELEGATE requests are granted (boot option `delegation`).
    delegation: bool,
    stats: PageStats,
}

impl Default for PageDir {
    fn default() -> PageDir {
        PageDir::new()
    }
}

fn bit(node: u8) -> u64 {
    1u64 << (node - 1)
}

/// Send a DIR_INV to every node of `pending`.
fn invalidate_all(stats: &mut PageStats, key: PageKey, pending: u64, out: &mut Vec<Action>) {
    for n in 1..=64u8 {
        if pending & bit(n) != 0 {
            stats.dir_invs += 1;
            out.push(Action::Invalidate { node: n, key });
        }
    }
}

impl PageDir {
    /// An empty directory for node ids 1..=64 (the wide layout).
    pub fn new() -> PageDir {
        PageDir::for_nodes(fabric::layout::MAX_NODES)
    }

    /// An empty directory for a cluster of `max_nodes` nodes: the narrow
    /// layout (10-byte records) up to 32 nodes, the wide one (14 bytes)
    /// beyond. Requests from nodes above the layout's limit are refused.
    pub fn for_nodes(max_nodes: u32) -> PageDir {
        PageDir {
            table: Table::new(Width::for_nodes(max_nodes)),
            evicting: BTreeMap::new(),
            stale: BTreeSet::new(),
            delegs: BTreeMap::new(),
            delegation: false,
            stats: PageStats::default(),
        }
    }

    /// The record layout in use.
    pub fn width(&self) -> Width {
        self.table.width()
    }

    /// Highest node id this directory serves.
    pub fn max_nodes(&self) -> u8 {
        self.table.width().max_nodes()
    }

    fn node_ok(&self, node: u8) -> bool {
        node != 0 && node <= self.max_nodes()
    }

    /// Counters.
    pub fn stats(&self) -> PageStats {
        self.stats
    }

    /// Cached pages.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// No cached pages.
    pub fn is_empty(&self) -> bool {
        self.table.len() == 0
    }

    /// Bytes of memory the directory's page state holds (the records
    /// exactly, the maps by an upper bound of their nodes).
    pub fn memory(&self) -> usize {
        self.table.memory()
            + table::btree_bytes::<PageKey, bool>(self.evicting.len())
            + table::btree_bytes::<PageKey, ()>(self.stale.len())
            + table::btree_bytes::<DelegRange, Delegation>(self.delegs.len())
    }

    /// Measured bytes of directory state per cached page (0 when empty).
    pub fn bytes_per_entry(&self) -> f64 {
        if self.is_empty() {
            return 0.0;
        }
        self.memory() as f64 / self.len() as f64
    }

    /// The entry of a page, if cached (decoded: a copy).
    pub fn entry(&self, key: &PageKey) -> Option<Entry> {
        self.table.get(key)
    }

    /// Cached pages of `ino` with index in `from..=to`, in order.
    pub fn cached_between(&self, ino: u64, from: u64, to: u64) -> Vec<PageKey> {
        self.table.keys_between(ino, from, to)
    }

    /// The write-back of `key` wrote nothing (the page lies past the end
    /// of the file, whose size its writer has not published yet): the
    /// page stays dirty here, so its eviction still writes it back even
    /// though its writer, answered `written`, took it as clean.
    pub fn still_dirty(&mut self, key: PageKey) {
        if let Some(mut e) = self.table.get(&key) {
            if !e.dirty {
                e.dirty = true;
                self.store(key, &e);
            }
        }
    }

    /// The frame holding `key`'s copy while the directory may still write
    /// into it: the page is owned, or being invalidated while its owner
    /// keeps the frame (a reclaim or a failed owner's teardown waiting for
    /// the sharers, or a file eviction whose owner has not been told to
    /// free the frame yet: until then it still reads it). `None` while the
    /// copy is being installed (E), and once an evicted page's owner was
    /// told (it may reuse the frame at once).
    pub fn frame_held(&self, key: &PageKey) -> Option<u64> {
        let e = self.table.get(key)?;
        match e.phase {
            Phase::Exclusive { .. } => None,
            Phase::Owned => Some(e.gfn),
            Phase::Invalidating { .. } => (self.evicting.get(key) != Some(&true)).then_some(e.gfn),
        }
    }

    /// Is `key` torn down by a file eviction (truncate, unlink) whose
    /// owner has not been told yet? Its frame's bytes from the cut on are
    /// stale, and the owner (and sharers yet to ack) still read it.
    pub fn evicted_unreleased(&self, key: &PageKey) -> bool {
        self.evicting.get(key) == Some(&false)
    }

    /// Is any page of `ino` in `from_idx..=to_idx` still being torn down
    /// by a file eviction (its owner not told yet, or told and not yet
    /// acked)? Until that ends the owner may store into the old frame
    /// (it still holds it) and a sharer may still map it: a size that
    /// grows the file over such a page would show those stores, which the
    /// teardown then drops, as zeros. The directory refuses the growth
    /// (`Busy`) until the teardown ended; the writer then misses the page
    /// again and stores into a fresh copy.
    pub fn tearing_down(&self, ino: u64, from_idx: u64, to_idx: u64) -> bool {
        from_idx <= to_idx
            && self
                .evicting
                .range(PageKey { ino, idx: from_idx }..=PageKey { ino, idx: to_idx })
                .next()
                .is_some()
    }

    /// Every entry, in key order (for checks and `dir stats`).
    pub fn entries(&self) -> impl Iterator<Item = (PageKey, Entry)> + '_ {
        self.table.iter()
    }

    /// Write back a changed entry. Entries are only changed with frames
    /// and nodes that fit the layout (checked when they enter), so this
    /// cannot fail.
    fn store(&mut self, key: PageKey, e: &Entry) {
        let stored = self.table.put(key, e);
        debug_assert_eq!(stored, Ok(()), "{key:?}: {e:?}");
    }

    /// The state of `key` on `node`.
    pub fn state_of(&self, key: &PageKey, node: u8) -> PageState {
        let Some(e) = self.table.get(key) else {
            return PageState::I;
        };
        if node == 0 || node > 64 {
            return PageState::I;
        }
        if e.owner == node {
            return match e.phase {
                Phase::Exclusive { .. } => PageState::E,
                Phase::Owned => PageState::O,
                Phase::Invalidating { .. } => PageState::Tbi,
            };
        }
        if e.sharers & bit(node) != 0 {
            return PageState::S;
        }
        PageState::I
    }
}

#[cfg(test)]
mod tests;
