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

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use fabric::proto::{PageKey, PageReply, PageReq};

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

/// Bytes of directory state per cached page (key + entry), for `dir stats`.
pub const BYTES_PER_ENTRY: usize = core::mem::size_of::<PageKey>() + core::mem::size_of::<Entry>();

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
    /// [`PageDir::filled`] (which replies to the requester).
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
    /// DIR_INV notifications sent.
    pub dir_invs: u64,
    /// INV_ACKs received.
    pub acks: u64,
    /// DROP requests.
    pub drops: u64,
    /// Write-backs to disk.
    pub writebacks: u64,
    /// Retry answers.
    pub retries: u64,
    /// Refused requests.
    pub refused: u64,
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

/// The page directory.
#[derive(Debug, Default)]
pub struct PageDir {
    entries: BTreeMap<PageKey, Entry>,
    /// Entries torn down by [`PageDir::evict_file`]; `true` once the
    /// sharers are gone, the frame unexported and the owner told.
    evicting: BTreeMap<PageKey, bool>,
    stats: PageStats,
}

fn bit(node: u8) -> u64 {
    1u64 << (node - 1)
}

impl PageDir {
    /// An empty directory.
    pub fn new() -> PageDir {
        PageDir::default()
    }

    /// Counters.
    pub fn stats(&self) -> PageStats {
        self.stats
    }

    /// Cached pages.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// No cached pages.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry of a page, if cached.
    pub fn entry(&self, key: &PageKey) -> Option<&Entry> {
        self.entries.get(key)
    }

    /// Every entry (for checks and `dir stats`).
    pub fn entries(&self) -> impl Iterator<Item = (&PageKey, &Entry)> {
        self.entries.iter()
    }

    /// The state of `key` on `node`.
    pub fn state_of(&self, key: &PageKey, node: u8) -> PageState {
        let Some(e) = self.entries.get(key) else {
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
        let reply =
            |out: &mut Vec<Action>, reply: PageReply| out.push(Action::Reply { node, tag, reply });
        if node == 0 || node > 64 {
            self.stats.refused += 1;
            reply(&mut out, PageReply::Refused);
            return out;
        }
        match req {
            PageReq::Read { key, frame } | PageReq::LookupLock { key, frame } => {
                let read = matches!(req, PageReq::Read { .. });
                if read {
                    self.stats.reads += 1;
                } else {
                    self.stats.lookup_locks += 1;
                }
                if frames.owner_of(frame) != Some(node) {
                    self.stats.refused += 1;
                    reply(&mut out, PageReply::Refused);
                    return out;
                }
                match self.entries.get_mut(&key) {
                    None => {
                        self.entries.insert(
                            key,
                            Entry {
                                owner: node,
                                gfn: frame,
                                sharers: 0,
                                dirty: false,
                                phase: Phase::Exclusive { by_dir: read, tag },
                            },
                        );
                        if read {
                            // The reply follows in `filled`.
                            self.stats.fills += 1;
                            out.push(Action::Fill { key, gfn: frame });
                        } else {
                            reply(&mut out, PageReply::Exclusive { gfn: frame });
                        }
                    }
                    Some(e) => match e.phase {
                        Phase::Owned if e.owner == node => {
                            reply(&mut out, PageReply::Owner { gfn: e.gfn })
                        }
                        Phase::Owned => {
                            if e.sharers == 0 {
                                out.push(Action::Export {
                                    gfn: e.gfn,
                                    on: true,
                                });
                            }
                            e.sharers |= bit(node);
                            self.stats.remote_maps += 1;
                            reply(
                                &mut out,
                                PageReply::Shared {
                                    owner: e.owner,
                                    gfn: e.gfn,
                                },
                            );
                        }
                        Phase::Exclusive { .. } | Phase::Invalidating { .. } => {
                            self.stats.retries += 1;
                            reply(&mut out, PageReply::Retry);
                        }
                    },
                }
            }
            PageReq::Unlock { key } => {
                self.stats.unlocks += 1;
                match self.entries.get_mut(&key) {
                    Some(e)
                        if e.owner == node
                            && matches!(e.phase, Phase::Exclusive { by_dir: false, .. }) =>
                    {
                        e.phase = Phase::Owned;
                        e.dirty = true;
                        reply(&mut out, PageReply::Done { written: false });
                    }
                    _ => {
                        self.stats.refused += 1;
                        reply(&mut out, PageReply::Refused);
                    }
                }
            }
            PageReq::Inv { key, dirty } => {
                self.stats.invs += 1;
                match self.entries.get_mut(&key) {
                    Some(e) if e.owner == node && e.phase == Phase::Owned => {
                        e.dirty |= dirty;
                        let pending = e.sharers;
                        e.phase = Phase::Invalidating { pending, tag };
                        for n in 1..=64u8 {
                            if pending & bit(n) != 0 {
                                self.stats.dir_invs += 1;
                                out.push(Action::Invalidate { node: n, key });
                            }
                        }
                        self.settle(key, &mut out);
                    }
                    _ => {
                        self.stats.refused += 1;
                        reply(&mut out, PageReply::Refused);
                    }
                }
            }
            PageReq::Drop { key, dirty } => {
                self.stats.drops += 1;
                match self.entries.get_mut(&key) {
                    Some(e) if e.owner != node && e.sharers & bit(node) != 0 => {
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
                                e.sharers &= !bit(node);
                                if e.sharers == 0 {
                                    out.push(Action::Export {
                                        gfn: e.gfn,
                                        on: false,
                                    });
                                }
                            }
                        }
                        reply(&mut out, PageReply::Done { written: false });
                    }
                    _ => {
                        self.stats.refused += 1;
                        reply(&mut out, PageReply::Refused);
                    }
                }
            }
            PageReq::Writeback { key, dirty } => match self.entries.get_mut(&key) {
                Some(e)
                    if e.phase == Phase::Owned
                        && (e.owner == node || e.sharers & bit(node) != 0) =>
                {
                    let written = e.dirty || dirty;
                    if written {
                        e.dirty = false;
                        self.stats.writebacks += 1;
                        out.push(Action::WriteBack { key, gfn: e.gfn });
                    }
                    reply(&mut out, PageReply::Done { written });
                }
                _ => {
                    self.stats.refused += 1;
                    reply(&mut out, PageReply::Refused);
                }
            },
        }
        out
    }

    /// The fill of `key` (an [`Action::Fill`]) finished; `ok` is false on
    /// a disk error. Commits E -> O and answers the reader.
    pub fn filled(&mut self, key: PageKey, ok: bool) -> Vec<Action> {
        let mut out = Vec::new();
        let Some(e) = self.entries.get_mut(&key) else {
            return out; // the reader failed meanwhile
        };
        let Phase::Exclusive { by_dir: true, tag } = e.phase else {
            return out;
        };
        let node = e.owner;
        let reply = if ok {
            e.phase = Phase::Owned;
            PageReply::Owner { gfn: e.gfn }
        } else {
            self.entries.remove(&key);
            PageReply::IoError
        };
        out.push(Action::Reply { node, tag, reply });
        out
    }

    /// An INV_ACK from sharer `node` for `key`, with the dirty bit it saw.
    pub fn ack(&mut self, node: u8, key: PageKey, dirty: bool) -> Vec<Action> {
        let mut out = Vec::new();
        if node == 0 || node > 64 {
            return out;
        }
        self.stats.acks += 1;
        if let Some(e) = self.entries.get_mut(&key) {
            if let Phase::Invalidating { pending, .. } = &mut e.phase {
                if *pending & bit(node) != 0 {
                    *pending &= !bit(node);
                    e.sharers &= !bit(node);
                    e.dirty |= dirty;
                    self.settle(key, &mut out);
                }
            }
        }
        out
    }

    /// An invalidation may have received its last ack: move on. A file
    /// eviction whose sharers are all gone unexports the frame and only
    /// then tells the owner to free it (the owner's ack completes it); any
    /// other invalidation completes.
    fn settle(&mut self, key: PageKey, out: &mut Vec<Action>) {
        let Some(e) = self.entries.get_mut(&key) else {
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
        let Some(e) = self.entries.remove(&key) else {
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

    /// Node `node` failed (heartbeat timeout) or rejoined: drop it from
    /// every sharer set (completing invalidations that waited for it) and
    /// tear down every page it owned (its sharers are told to unmap; dirty
    /// pages are written back from the frame first, best effort).
    pub fn node_failed(&mut self, node: u8) -> Vec<Action> {
        let mut out = Vec::new();
        if node == 0 || node > 64 {
            return out;
        }
        let keys: Vec<PageKey> = self.entries.keys().copied().collect();
        for key in keys {
            let Some(e) = self.entries.get_mut(&key) else {
                continue;
            };
            if e.owner == node {
                match e.phase {
                    Phase::Exclusive { .. } => {
                        self.entries.remove(&key);
                    }
                    Phase::Owned => {
                        let pending = e.sharers;
                        e.phase = Phase::Invalidating { pending, tag: 0 };
                        for n in 1..=64u8 {
                            if pending & bit(n) != 0 {
                                self.stats.dir_invs += 1;
                                out.push(Action::Invalidate { node: n, key });
                            }
                        }
                        self.settle(key, &mut out);
                    }
                    Phase::Invalidating { pending, .. } => {
                        // The owner's own ack (file eviction) will not come,
                        // nor will anybody wait for the answer.
                        let pending = pending & !bit(node);
                        e.sharers &= !bit(node);
                        e.phase = Phase::Invalidating { pending, tag: 0 };
                        self.settle(key, &mut out);
                    }
                }
            } else if e.sharers & bit(node) != 0 {
                e.sharers &= !bit(node);
                // The sharer may have written the frame (strong mode) and
                // its dirty bit died with it: write the page back to be safe.
                e.dirty = true;
                match &mut e.phase {
                    Phase::Invalidating { pending, .. } => {
                        *pending &= !bit(node);
                        self.settle(key, &mut out);
                    }
                    _ => {
                        if e.sharers == 0 {
                            out.push(Action::Export {
                                gfn: e.gfn,
                                on: false,
                            });
                        }
                    }
                }
            }
        }
        out
    }

    /// The file shrank or went away: tear down every cached page of `ino`
    /// from page `from_idx` on (no write-back: the data is gone). The
    /// sharers are told to drop the page first; once they all acked, the
    /// frame is unexported and the owner told to free it (never earlier: a
    /// sharer could still be using the frame); the entry leaves with the
    /// owner's ack. Pages in E or already in TBI are left alone (their
    /// installer will find the file's size when it commits; an owner's
    /// invalidation completes with its write-back as usual).
    pub fn evict_file(&mut self, ino: u64, from_idx: u64) -> Vec<Action> {
        let mut out = Vec::new();
        let lo = PageKey { ino, idx: from_idx };
        let hi = PageKey { ino, idx: u64::MAX };
        let keys: Vec<PageKey> = self.entries.range(lo..=hi).map(|(k, _)| *k).collect();
        for key in keys {
            let Some(e) = self.entries.get_mut(&key) else {
                continue;
            };
            if e.phase != Phase::Owned {
                continue;
            }
            e.dirty = false;
            let pending = e.sharers;
            // The owner's bit marks "still to be told" (see `settle`).
            e.sharers |= bit(e.owner);
            e.phase = Phase::Invalidating { pending, tag: 0 };
            self.evicting.insert(key, false);
            for n in 1..=64u8 {
                if pending & bit(n) != 0 {
                    self.stats.dir_invs += 1;
                    out.push(Action::Invalidate { node: n, key });
                }
            }
            self.settle(key, &mut out);
        }
        out
    }

    /// Does any entry still use a frame of `node`'s pool (as owner)? A
    /// rejoining node must not reuse its frames before this is false.
    pub fn holds_frames_of(&self, node: u8) -> bool {
        self.entries.values().any(|e| e.owner == node)
    }

    /// Check the entry-level invariants; `Err` names the first violation.
    pub fn check(&self) -> Result<(), alloc::string::String> {
        use alloc::format;
        // Frame -> page, for frames still in use: an evicted page's owner
        // may reuse its frame once told (it is then the only one left).
        let mut frames: BTreeMap<u64, PageKey> = BTreeMap::new();
        for (k, e) in &self.entries {
            if e.owner == 0 || e.owner > 64 {
                return Err(format!("{k:?}: owner {} out of range", e.owner));
            }
            let evicting = self.evicting.get(k).copied();
            if evicting.is_some() && !matches!(e.phase, Phase::Invalidating { tag: 0, .. }) {
                return Err(format!("{k:?}: evicted but {:?}", e.phase));
            }
            if e.sharers & bit(e.owner) != 0 && evicting.is_none() {
                return Err(format!("{k:?}: owner {} is also a sharer", e.owner));
            }
            match e.phase {
                Phase::Exclusive { .. } if e.sharers != 0 => {
                    return Err(format!("{k:?}: sharers while in E"));
                }
                Phase::Invalidating { pending, .. } if pending & !e.sharers != 0 => {
                    return Err(format!("{k:?}: waiting for acks of non-sharers"));
                }
                Phase::Invalidating { pending, .. }
                    if evicting == Some(true) && pending != bit(e.owner) =>
                {
                    return Err(format!("{k:?}: owner told before the sharers acked"));
                }
                _ => {}
            }
            if evicting != Some(true) {
                if let Some(other) = frames.insert(e.gfn, *k) {
                    return Err(format!("{k:?}: frame {} also holds {other:?}", e.gfn));
                }
            }
        }
        if let Some(k) = self.evicting.keys().find(|k| !self.entries.contains_key(k)) {
            return Err(format!("{k:?}: evicted but not cached"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
