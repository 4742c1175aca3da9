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
//! Delegated ownership (`deleg.rs`): a node alone with a range of a file
//! may take the whole range and hold pages of it the directory does not
//! know of; another node's lookup in the range waits for the range to be
//! given back (or its holder to fail) and its pages to be installed.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::vec::Vec;

mod check;
mod deleg;
mod table;
mod teardown;
mod types;

pub use deleg::{Delegation, Parked};
use table::Table;
pub use table::{Unfit, Width, NARROW_RECORD, WIDE_RECORD};
pub use types::{Action, Entry, FrameOwner, PageState, PageStats, Phase};

use fabric::proto::{DelegRange, PageKey, PageReply, PageReq, PageSpan, MAX_SPAN};

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

    /// Handle one page request from `node` (1..=64) with `tag`.
    pub fn handle(
        &mut self,
        frames: &impl FrameOwner,
        node: u8,
        tag: u32,
        req: PageReq,
    ) -> Vec<Action> {
        let mut out = Vec::new();
        let to = Requester { node, tag };
        if !self.node_ok(node) {
            self.stats.refused += 1;
            to.reply(&mut out, PageReply::Refused);
            return out;
        }
        match req {
            PageReq::Read { key, frame } => self.lookup(frames, to, key, frame, true, &mut out),
            PageReq::LookupLock { key, frame } => {
                self.lookup(frames, to, key, frame, false, &mut out)
            }
            PageReq::Unlock { key } => self.unlock(to, key, &mut out),
            PageReq::Inv { key, dirty } => self.inv(to, key, dirty, &mut out),
            PageReq::Drop { key, dirty } => self.drop_copy(to, key, dirty, &mut out),
            PageReq::Writeback { key, dirty } => self.write_back(to, key, dirty, &mut out),
            PageReq::Delegate { range, list } => self.delegate(frames, to, range, list, &mut out),
            PageReq::DelegReturn { range } => self.deleg_return(to, range, &mut out),
            // Replicas are the server's (`server/replicas.rs`): the page's
            // state here does not change. A directory that routes them
            // here refuses them.
            PageReq::Promote { .. } | PageReq::Unprotect { .. } => {
                self.stats.refused += 1;
                to.reply(&mut out, PageReply::Refused);
            }
        }
        out
    }

    /// READ or LOOKUP_LOCK (`read` false): a miss takes the page (a fill
    /// for a READ, E for a LOOKUP_LOCK), an owned page is mapped.
    fn lookup(
        &mut self,
        frames: &impl FrameOwner,
        to: Requester,
        key: PageKey,
        frame: u64,
        read: bool,
        out: &mut Vec<Action>,
    ) {
        if read {
            self.stats.reads += 1;
        } else {
            self.stats.lookup_locks += 1;
        }
        if frames.owner_of(frame) != Some(to.node) {
            self.stats.refused += 1;
            to.reply(out, PageReply::Refused);
            return;
        }
        let req = if read {
            PageReq::Read { key, frame }
        } else {
            PageReq::LookupLock { key, frame }
        };
        if !self.delegs.is_empty() && self.park_if_delegated(to, req, out) {
            return;
        }
        self.lookup_checked(to, key, frame, read, out);
    }

    /// A lookup whose frame is the requester's and whose page is not
    /// delegated to another node.
    fn lookup_checked(
        &mut self,
        to: Requester,
        key: PageKey,
        frame: u64,
        read: bool,
        out: &mut Vec<Action>,
    ) {
        match self.table.get(&key) {
            None => {
                let e = Entry {
                    owner: to.node,
                    gfn: frame,
                    sharers: 0,
                    dirty: false,
                    phase: Phase::Exclusive {
                        by_dir: read,
                        tag: to.tag,
                    },
                };
                if self.table.put(key, &e).is_err() {
                    // A frame beyond 32 bits of frame number.
                    self.stats.refused += 1;
                    to.reply(out, PageReply::Refused);
                } else if read {
                    // The reply follows in `filled`.
                    self.stats.fills += 1;
                    out.push(Action::Fill { key, gfn: frame });
                } else {
                    to.reply(out, PageReply::Exclusive { gfn: frame });
                }
            }
            Some(mut e) => match e.phase {
                Phase::Owned if e.owner == to.node => {
                    to.reply(out, PageReply::Owner { gfn: e.gfn })
                }
                Phase::Owned => {
                    if e.sharers == 0 {
                        out.push(Action::Export {
                            gfn: e.gfn,
                            on: true,
                        });
                    }
                    if e.sharers & bit(to.node) == 0 {
                        e.sharers |= bit(to.node);
                        self.store(key, &e);
                    }
                    self.stats.remote_maps += 1;
                    to.reply(
                        out,
                        PageReply::Shared {
                            owner: e.owner,
                            gfn: e.gfn,
                        },
                    );
                }
                Phase::Exclusive { .. } | Phase::Invalidating { .. } => {
                    self.stats.retries += 1;
                    to.reply(out, PageReply::Retry);
                }
            },
        }
    }

    /// UNLOCK: the writer of an E page publishes it as owned and dirty.
    fn unlock(&mut self, to: Requester, key: PageKey, out: &mut Vec<Action>) {
        self.stats.unlocks += 1;
        match self.table.get(&key) {
            Some(mut e)
                if e.owner == to.node
                    && matches!(e.phase, Phase::Exclusive { by_dir: false, .. }) =>
            {
                e.phase = Phase::Owned;
                e.dirty = true;
                self.store(key, &e);
                to.reply(out, PageReply::Done { written: false });
            }
            _ => {
                self.stats.refused += 1;
                to.reply(out, PageReply::Refused);
            }
        }
    }

    /// INV: the owner asks for its page's sharers to be invalidated.
    fn inv(&mut self, to: Requester, key: PageKey, dirty: bool, out: &mut Vec<Action>) {
        self.stats.invs += 1;
        match self.table.get(&key) {
            Some(mut e) if e.owner == to.node && e.phase == Phase::Owned => {
                e.dirty |= dirty;
                let pending = e.sharers;
                e.phase = Phase::Invalidating {
                    pending,
                    tag: to.tag,
                };
                self.store(key, &e);
                invalidate_all(&mut self.stats, key, pending, out);
                self.settle(key, out);
            }
            _ => {
                self.stats.refused += 1;
                to.reply(out, PageReply::Refused);
            }
        }
    }

    /// DROP: a sharer gives up its mapping (or the reserving node its E).
    fn drop_copy(&mut self, to: Requester, key: PageKey, dirty: bool, out: &mut Vec<Action>) {
        self.stats.drops += 1;
        match self.table.get(&key) {
            // The reserving node gives back an E it will not fill
            // (its LOOKUP_LOCK timed out and the grant came late):
            // no copy exists anywhere, so the page returns to I.
            Some(e)
                if e.owner == to.node
                    && matches!(e.phase, Phase::Exclusive { by_dir: false, .. }) =>
            {
                self.table.remove(&key);
                to.reply(out, PageReply::Done { written: false });
            }
            Some(mut e) if e.owner != to.node && e.sharers & bit(to.node) != 0 => {
                e.dirty |= dirty;
                match e.phase {
                    // A drop racing an invalidation: the dirty bit
                    // counts, but the DIR_INV already sent to this
                    // node is still on its way and its ack (which
                    // always follows) is what releases the entry.
                    // Were the drop taken as the ack, the entry
                    // could go, the node get a new copy of the page,
                    // and the late DIR_INV tear that copy down.
                    Phase::Invalidating { .. } => {}
                    _ => {
                        e.sharers &= !bit(to.node);
                        if e.sharers == 0 {
                            out.push(Action::Export {
                                gfn: e.gfn,
                                on: false,
                            });
                        }
                    }
                }
                self.store(key, &e);
                to.reply(out, PageReply::Done { written: false });
            }
            _ => {
                self.stats.refused += 1;
                to.reply(out, PageReply::Refused);
            }
        }
    }

    /// WRITEBACK: the owner or a sharer asks for the page on the disk.
    fn write_back(&mut self, to: Requester, key: PageKey, dirty: bool, out: &mut Vec<Action>) {
        match self.table.get(&key) {
            Some(mut e)
                if e.phase == Phase::Owned
                    && (e.owner == to.node || e.sharers & bit(to.node) != 0) =>
            {
                let written = e.dirty || dirty;
                if written {
                    if e.dirty {
                        e.dirty = false;
                        self.store(key, &e);
                    }
                    self.stats.writebacks += 1;
                    out.push(Action::WriteBack { key, gfn: e.gfn });
                }
                to.reply(out, PageReply::Done { written });
            }
            _ => {
                self.stats.refused += 1;
                to.reply(out, PageReply::Refused);
            }
        }
    }

    /// The fill of `key` (an [`Action::Fill`]) finished; `ok` is false on
    /// a disk error. Commits E -> O and answers the reader.
    pub fn filled(&mut self, key: PageKey, ok: bool) -> Vec<Action> {
        let mut out = Vec::new();
        let stale = self.stale.remove(&key);
        let Some(mut e) = self.table.get(&key) else {
            return out; // the reader failed meanwhile
        };
        let Phase::Exclusive { by_dir: true, tag } = e.phase else {
            return out;
        };
        let node = e.owner;
        let reply = if stale {
            // Its block changed meanwhile: the reader asks again and is
            // filled with the new bytes.
            self.table.remove(&key);
            self.stats.retries += 1;
            PageReply::Retry
        } else if ok {
            e.phase = Phase::Owned;
            self.store(key, &e);
            PageReply::Owner { gfn: e.gfn }
        } else {
            self.table.remove(&key);
            PageReply::IoError
        };
        out.push(Action::Reply { node, tag, reply });
        out
    }

    /// The blocks of file `ino` behind pages `from_idx..=to_idx` changed
    /// (a write, a truncation, an unlink): fills from disk of those pages
    /// still in flight read older bytes. Each is marked stale, and its
    /// completion ([`PageDir::filled`]) answers the reader `Retry` instead
    /// of committing the page, so the directory need not wait for them
    /// before changing the file. Returns how many were marked.
    pub fn stale_fills(&mut self, ino: u64, from_idx: u64, to_idx: u64) -> usize {
        let mut n = 0;
        for key in self.table.keys_between(ino, from_idx, to_idx) {
            let filling = self
                .table
                .get(&key)
                .is_some_and(|e| matches!(e.phase, Phase::Exclusive { by_dir: true, .. }));
            if filling && self.stale.insert(key) {
                n += 1;
            }
        }
        n
    }

    /// Is the fill of `key` stale (see [`PageDir::stale_fills`])?
    pub fn fill_is_stale(&self, key: &PageKey) -> bool {
        self.stale.contains(key)
    }

    /// Does an invalidation of `key` wait for `node`'s ack? `Some(true)`:
    /// as a sharer (the ack only says the mapping is gone); `Some(false)`:
    /// as the owner (a file eviction's last step: the owner frees its
    /// frame); `None`: no.
    pub fn awaits_ack(&self, node: u8, key: &PageKey) -> Option<bool> {
        let e = self.table.get(key)?;
        match e.phase {
            Phase::Invalidating { pending, .. } if pending & bit(node) != 0 => {
                Some(e.owner != node)
            }
            _ => None,
        }
    }

    /// An INV_ACK from sharer `node` for `key`, with the dirty bit it saw.
    pub fn ack(&mut self, node: u8, key: PageKey, dirty: bool) -> Vec<Action> {
        let mut out = Vec::new();
        if !self.node_ok(node) {
            return out;
        }
        self.stats.acks += 1;
        self.ack_page(node, key, dirty, &mut out);
        self.coalesce(&mut out);
        out
    }

    /// The one ack of an INV_RANGE from `node`: every page of `span` that
    /// awaits `node`'s ack is acknowledged (`dirty` counts for each; a
    /// file's teardown writes nothing back anyway). Pages that await no
    /// ack of `node` are left alone, so a duplicate changes nothing.
    pub fn ack_range(&mut self, node: u8, span: PageSpan, dirty: bool) -> Vec<Action> {
        let mut out = Vec::new();
        if !self.node_ok(node) {
            return out;
        }
        self.stats.range_acks += 1;
        for key in self.table.keys_between(span.ino, span.first, span.last()) {
            self.ack_page(node, key, dirty, &mut out);
        }
        if !self.delegs.is_empty() {
            self.cut_acked(node, span, &mut out);
        }
        self.coalesce(&mut out);
        out
    }

    /// Does every cached page of `span` that awaits an ack of `node` await
    /// it as a sharer's (see [`PageDir::awaits_ack`])? `None` if no page
    /// awaits one. A delegation's cut awaits its holder's ack as an
    /// owner's (`Some(false)`: the holder frees its pages).
    pub fn awaits_range_ack(&self, node: u8, span: &PageSpan) -> Option<bool> {
        if self.awaits_cut_ack(node, span) {
            return Some(false);
        }
        let mut any = None;
        for key in self.table.keys_between(span.ino, span.first, span.last()) {
            match self.awaits_ack(node, &key) {
                Some(false) => return Some(false),
                Some(true) => any = Some(true),
                None => {}
            }
        }
        any
    }

    /// The DIR_INVs of a file's teardown (pages in `evicting`) travel as
    /// INV_RANGEs: one per node per run of contiguous pages, after every
    /// other action of the step (an owner's is preceded by its frame's
    /// unexport, which stays before it).
    fn coalesce(&mut self, out: &mut Vec<Action>) {
        if self.evicting.is_empty() {
            return;
        }
        let mut pages: Vec<(u8, PageKey)> = Vec::new();
        out.retain(|a| match *a {
            Action::Invalidate { node, key } if self.evicting.contains_key(&key) => {
                pages.push((node, key));
                false
            }
            _ => true,
        });
        if pages.is_empty() {
            return;
        }
        self.stats.dir_invs -= pages.len() as u64;
        self.stats.range_pages += pages.len() as u64;
        pages.sort_unstable();
        pages.dedup();
        let mut run: Option<(u8, PageSpan)> = None;
        for (node, key) in pages {
            if let Some((n, s)) = run.as_mut() {
                if *n == node
                    && s.ino == key.ino
                    && s.count < MAX_SPAN
                    && s.first.checked_add(s.count) == Some(key.idx)
                {
                    s.count += 1;
                    continue;
                }
                out.push(Action::InvalidateRange { node: *n, span: *s });
                self.stats.range_invs += 1;
            }
            run = Some((node, PageSpan::page(key)));
        }
        if let Some((node, span)) = run {
            out.push(Action::InvalidateRange { node, span });
            self.stats.range_invs += 1;
        }
    }

    /// One page's share of an ack.
    fn ack_page(&mut self, node: u8, key: PageKey, dirty: bool, out: &mut Vec<Action>) {
        if let Some(mut e) = self.table.get(&key) {
            if let Phase::Invalidating { pending, tag } = e.phase {
                if pending & bit(node) != 0 {
                    e.phase = Phase::Invalidating {
                        pending: pending & !bit(node),
                        tag,
                    };
                    e.sharers &= !bit(node);
                    e.dirty |= dirty;
                    self.store(key, &e);
                    self.settle(key, out);
                }
            }
        }
    }

    /// An invalidation may have received its last ack: move on. A file
    /// eviction whose sharers are all gone unexports the frame and only
    /// then tells the owner to free it (the owner's ack completes it); any
    /// other invalidation completes.
    fn settle(&mut self, key: PageKey, out: &mut Vec<Action>) {
        let Some(mut e) = self.table.get(&key) else {
            return;
        };
        let Phase::Invalidating { pending: 0, tag } = e.phase else {
            return;
        };
        if e.sharers & bit(e.owner) != 0 {
            if let Some(told) = self.evicting.get_mut(&key) {
                *told = true;
                e.phase = Phase::Invalidating {
                    pending: bit(e.owner),
                    tag,
                };
                self.store(key, &e);
                self.stats.dir_invs += 1;
                out.push(Action::Export {
                    gfn: e.gfn,
                    on: false,
                });
                out.push(Action::Invalidate { node: e.owner, key });
                return;
            }
        }
        self.complete(key, out);
    }

    /// Every sharer acked: write back if dirty (unless the file's data is
    /// gone), unexport, answer the owner and forget the page (all nodes
    /// back to I).
    fn complete(&mut self, key: PageKey, out: &mut Vec<Action>) {
        let Some(e) = self.table.remove(&key) else {
            return;
        };
        let evicted = self.evicting.remove(&key);
        let written = e.dirty && evicted.is_none();
        if written {
            self.stats.writebacks += 1;
            out.push(Action::WriteBack { key, gfn: e.gfn });
        }
        // An evicted page's owner was told after the frame was unexported
        // and may have reused the frame since: leave its bit alone.
        if evicted != Some(true) {
            out.push(Action::Export {
                gfn: e.gfn,
                on: false,
            });
        }
        if let Phase::Invalidating { tag, .. } = e.phase {
            if tag != 0 {
                out.push(Action::Reply {
                    node: e.owner,
                    tag,
                    reply: PageReply::Done { written },
                });
            }
        }
    }
}

#[cfg(test)]
mod tests;

/// Who sent a request: its answer goes back to `node` under `tag`.
#[derive(Clone, Copy)]
struct Requester {
    node: u8,
    tag: u32,
}

impl Requester {
    fn reply(self, out: &mut Vec<Action>, reply: PageReply) {
        out.push(Action::Reply {
            node: self.node,
            tag: self.tag,
            reply,
        });
    }
}
