//! Delegated ownership (strong mode, boot option `delegation`): one node
//! holds a whole [`DelegRange`] of a file and allocates, writes, extends
//! and frees its pages without a request per page (the wire messages and
//! the list frame's format are in `fabric::proto::deleg`).
//!
//! The directory does not know the pages a holder keeps under its
//! delegation: it learns them from the holder's list frame when the
//! delegation ends. So, while a range is delegated:
//!
//! * a READ or LOOKUP_LOCK of one of its pages from another node is
//!   *parked*: the holder gets one RECALL, answers with one DELEG_RETURN,
//!   the directory reads the list ([`Action::ReadList`],
//!   [`PageDir::list_read`]), installs the listed pages as owned (dirty
//!   ones dirty) and only then serves the parked requests in order;
//! * the holder's own page requests are served as usual (a READ of a page
//!   it does not hold is a fill from the disk: it cannot be in its list);
//! * every cached entry of the range is the holder's, with no sharer (the
//!   grant requires it and parking keeps it; [`PageDir::check`]);
//! * a holder that fails: its list is read from the region, which
//!   survived it, and every listed page written back, as a failed owner's
//!   frames are; then the parked requests are served. Until then
//!   [`PageDir::holds_frames_of`] says its frames are in use.
//!
//! Cuts (truncate, unlink): the holder cuts its own list before it sends
//! the SETATTR or UNLINK, so its own cut needs nothing here but, for a
//! range cut whole, the end of the delegation. Another node's cut sends
//! the holder an INV_RANGE of the cut part of the range (it frees those
//! pages and acks) and the range stays delegated, its requests parked,
//! until that ack: until then a list the holder wrote may still hold cut
//! pages, so a list read then installs only the pages below the cut.
//!
//! A holder that neither returns nor fails keeps the parked requests
//! waiting: the heartbeat timeout fails it, which ends the wait.

use alloc::collections::BTreeSet;
use alloc::vec::Vec;

use fabric::proto::{DelegPage, DelegRange, PageKey, PageReply, PageReq, PageSpan};

use super::requests::Requester;
use super::{bit, Action, Entry, FrameOwner, PageDir, Phase};

/// A request that found its page delegated to another node: served once
/// the delegation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parked {
    /// Requester.
    pub node: u8,
    /// Its tag.
    pub tag: u32,
    /// A READ or LOOKUP_LOCK (its frame already checked).
    pub req: PageReq,
}

/// One delegated range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delegation {
    /// The node holding it.
    pub holder: u8,
    /// The holder's list frame.
    pub list: u64,
    /// The RECALL was sent.
    pub recalled: bool,
    /// The holder's DELEG_RETURN whose list is being read (its tag).
    pub returning: Option<u32>,
    /// The holder gave it back (its list was read): it stays only until
    /// the cuts below are acknowledged.
    pub returned: bool,
    /// The holder failed: its list is being read.
    pub failed: bool,
    /// Another node's cuts not yet acknowledged by the holder (the
    /// INV_RANGE spans sent, in order).
    pub cuts: Vec<PageSpan>,
    /// A cut reached the range's first page: the delegation ends with
    /// the acknowledgement of the cuts, and no list of it is read any
    /// more (the holder may have reused its list frame).
    pub gone: bool,
    /// Lowest page the holder cut itself while its list was being read
    /// (that list may still hold the cut pages).
    pub floor: u64,
    /// Requests waiting for the end of the delegation, in arrival order.
    pub parked: Vec<Parked>,
}

impl Delegation {
    /// Lowest page index cut and not yet acknowledged.
    fn cut(&self, range: &DelegRange) -> u64 {
        if self.gone {
            return range.base;
        }
        self.cuts.iter().map(|s| s.first).fold(self.floor, u64::min)
    }
}

impl PageDir {
    /// Turn delegation on or off (boot option `delegation`, strong mode
    /// only). Off, every DELEGATE is answered `granted: false`; ranges
    /// already delegated stay so until they are given back.
    pub fn set_delegation(&mut self, on: bool) {
        self.delegation = on;
    }

    /// The delegation of `range`, if any.
    pub fn delegation(&self, range: &DelegRange) -> Option<&Delegation> {
        self.delegs.get(range)
    }

    /// Delegated ranges, in order.
    pub fn delegations(&self) -> impl Iterator<Item = (&DelegRange, &Delegation)> {
        self.delegs.iter()
    }

    /// Is any page of `ino` in `from..=to` delegated? Whoever changes
    /// those pages' disk blocks behind the page cache (the file server's
    /// writes) recalls them first ([`PageDir::recall_between`]).
    pub fn delegated_between(&self, ino: u64, from: u64, to: u64) -> bool {
        !self.delegs_between(ino, from, to).is_empty()
    }

    /// Is any page of `ino` in `from..=to` delegated to a node other than
    /// `by`?
    pub fn delegated_to_other(&self, ino: u64, from: u64, to: u64, by: Option<u8>) -> bool {
        self.delegs_between(ino, from, to)
            .iter()
            .any(|r| self.delegs.get(r).is_some_and(|d| Some(d.holder) != by))
    }

    /// Delegated ranges of `ino` holding a page of `from..=to`.
    fn delegs_between(&self, ino: u64, from: u64, to: u64) -> Vec<DelegRange> {
        if from > to {
            return Vec::new();
        }
        let lo = DelegRange::of(PageKey { ino, idx: from });
        let hi = DelegRange::of(PageKey { ino, idx: to });
        self.delegs.range(lo..=hi).map(|(r, _)| *r).collect()
    }

    /// Recall every delegation of `ino` in `from..=to` (the RECALLs not
    /// yet sent); the caller waits until [`PageDir::delegated_between`]
    /// is false.
    pub fn recall_between(&mut self, ino: u64, from: u64, to: u64) -> Vec<Action> {
        let mut out = Vec::new();
        for r in self.delegs_between(ino, from, to) {
            self.recall(r, &mut out);
        }
        out
    }

    fn recall(&mut self, range: DelegRange, out: &mut Vec<Action>) {
        if let Some(d) = self.delegs.get_mut(&range) {
            if !d.recalled && !d.failed && !d.returned && !d.gone && d.returning.is_none() {
                d.recalled = true;
                self.stats.recalls += 1;
                out.push(Action::Recall {
                    node: d.holder,
                    range,
                });
            }
        }
    }

    /// A READ or LOOKUP_LOCK of `key` by `to` (its frame checked): if
    /// another node holds the page's range, park the request and recall
    /// the range. True if parked.
    pub(super) fn park_if_delegated(
        &mut self,
        to: Requester,
        req: PageReq,
        out: &mut Vec<Action>,
    ) -> bool {
        let range = DelegRange::of(req.key());
        match self.delegs.get_mut(&range) {
            Some(d) if d.holder != to.node && range.contains(&req.key()) => {
                d.parked.push(Parked {
                    node: to.node,
                    tag: to.tag,
                    req,
                });
                self.stats.parked += 1;
                self.recall(range, out);
                true
            }
            _ => false,
        }
    }

    /// DELEGATE: grant `range` to `to` if delegation is on and every
    /// cached page of the range is `to`'s own, owned, unshared and
    /// stable (in particular: no page cached, as for a file it just
    /// created).
    pub(super) fn delegate(
        &mut self,
        frames: &impl FrameOwner,
        to: Requester,
        range: DelegRange,
        list: u64,
        out: &mut Vec<Action>,
    ) {
        if frames.owner_of(list) != Some(to.node) || u32::try_from(list).is_err() {
            self.stats.refused += 1;
            to.reply(out, PageReply::Refused);
            return;
        }
        let granted = match self.delegs.get(&range) {
            // A repeated request (its answer was lost to a timeout).
            Some(d) => {
                d.holder == to.node
                    && d.list == list
                    && !d.recalled
                    && !d.returned
                    && !d.gone
                    && d.returning.is_none()
            }
            None => {
                let free = self.delegation
                    && self
                        .table
                        .keys_between(range.ino, range.base, range.last())
                        .iter()
                        .all(|k| {
                            self.table.get(k).is_some_and(|e| {
                                e.owner == to.node
                                    && e.phase == Phase::Owned
                                    && e.sharers == 0
                                    && e.gfn != list
                            }) && !self.evicting.contains_key(k)
                        });
                if free {
                    self.delegs.insert(
                        range,
                        Delegation {
                            holder: to.node,
                            list,
                            recalled: false,
                            returning: None,
                            returned: false,
                            failed: false,
                            cuts: Vec::new(),
                            gone: false,
                            floor: u64::MAX,
                            parked: Vec::new(),
                        },
                    );
                    self.stats.delegations += 1;
                }
                free
            }
        };
        if !granted {
            self.stats.deleg_denied += 1;
        }
        to.reply(out, PageReply::Delegated { granted });
    }

    /// DELEG_RETURN: the holder gives `range` back (a recall's ack, or on
    /// its own). Its list is read next ([`Action::ReadList`]); the answer
    /// follows in [`PageDir::list_read`]. A return of a range the sender
    /// does not hold (cut meanwhile) is answered `Done` at once, and so is
    /// one of a range cut whole (nothing of it is left to install).
    pub(super) fn deleg_return(&mut self, to: Requester, range: DelegRange, out: &mut Vec<Action>) {
        match self.delegs.get_mut(&range) {
            Some(d) if d.holder == to.node && !d.returned && !d.failed && d.gone => {
                if d.returning.is_none() {
                    d.returned = true;
                    self.stats.returns += 1;
                }
                to.reply(out, PageReply::Done { written: false });
                if d.cuts.is_empty() {
                    self.end(range, out);
                }
            }
            Some(d) if d.holder == to.node && !d.returned && !d.failed => {
                if d.returning.is_some() {
                    // A second return while the first one's list is read.
                    self.stats.refused += 1;
                    to.reply(out, PageReply::Refused);
                    return;
                }
                d.returning = Some(to.tag);
                out.push(Action::ReadList {
                    node: to.node,
                    range,
                    gfn: d.list,
                });
            }
            _ => to.reply(out, PageReply::Done { written: false }),
        }
    }

    /// The list frame of `node`'s delegation of `range` was read (an
    /// [`Action::ReadList`]): `pages` as decoded, or `None` when it was
    /// malformed (nothing of it is installed). A returning holder's pages
    /// are installed as owned, a failed holder's written back; then the
    /// return is answered and, unless cuts still await the holder's ack,
    /// the delegation ends and the parked requests are served.
    pub fn list_read(
        &mut self,
        frames: &impl FrameOwner,
        node: u8,
        range: DelegRange,
        pages: Option<&[DelegPage]>,
    ) -> Vec<Action> {
        let mut out = Vec::new();
        let Some(d) = self.delegs.get(&range) else {
            return out;
        };
        if d.holder != node || !(d.failed || d.returning.is_some()) {
            return out;
        }
        let (failed, list, cut) = (d.failed, d.list, d.cut(&range));
        if pages.is_none() {
            log::warn!("delegation {range:?} of node {node}: malformed list, its pages are lost");
            self.stats.refused += 1;
        }
        // Frames the holder's entries use already (a list naming one of
        // them again is not installed).
        let mut used: BTreeSet<u64> = self
            .table
            .iter()
            .filter(|(_, e)| e.owner == node)
            .map(|(_, e)| e.gfn)
            .collect();
        used.insert(list);
        for p in pages.unwrap_or(&[]) {
            let fits = range.contains(&p.key)
                && p.key.idx < cut
                && frames.owner_of(p.gfn) == Some(node)
                && !self.table.contains(&p.key)
                && used.insert(p.gfn);
            if !fits {
                self.stats.refused += 1;
                continue;
            }
            self.stats.deleg_pages += 1;
            if failed {
                // As a failed owner's frame: written back, whatever its
                // dirty bit says (the holder's last stores may not be in
                // it).
                self.stats.writebacks += 1;
                out.push(Action::WriteBack {
                    key: p.key,
                    gfn: p.gfn,
                });
                continue;
            }
            let e = Entry {
                owner: node,
                gfn: p.gfn,
                sharers: 0,
                dirty: p.dirty,
                phase: Phase::Owned,
            };
            if self.table.put(p.key, &e).is_err() {
                self.stats.refused += 1;
            }
        }
        let Some(d) = self.delegs.get_mut(&range) else {
            return out;
        };
        if let Some(tag) = d.returning.take() {
            d.returned = true;
            self.stats.returns += 1;
            out.push(Action::Reply {
                node,
                tag,
                reply: PageReply::Done { written: false },
            });
        }
        if failed || d.cuts.is_empty() {
            self.end(range, &mut out);
        }
        out
    }

    /// The delegation of `range` is over: forget it and serve what
    /// waited for it (answering a return whose list was not read).
    fn end(&mut self, range: DelegRange, out: &mut Vec<Action>) {
        let Some(d) = self.delegs.remove(&range) else {
            return;
        };
        if let Some(tag) = d.returning {
            out.push(Action::Reply {
                node: d.holder,
                tag,
                reply: PageReply::Done { written: false },
            });
        }
        for p in d.parked {
            let to = Requester {
                node: p.node,
                tag: p.tag,
            };
            match p.req {
                PageReq::Read { key, frame } => self.lookup_checked(to, key, frame, true, out),
                PageReq::LookupLock { key, frame } => {
                    self.lookup_checked(to, key, frame, false, out)
                }
                // Only lookups are parked.
                _ => to.reply(out, PageReply::Refused),
            }
        }
    }

    /// A file's pages from `from_idx` on are cut (truncate, unlink) by
    /// node `by` (`None`: not a node, or unknown). See the module doc.
    pub(super) fn cut_delegations(
        &mut self,
        ino: u64,
        from_idx: u64,
        by: Option<u8>,
        out: &mut Vec<Action>,
    ) {
        for range in self.delegs_between(ino, from_idx, u64::MAX) {
            let Some(d) = self.delegs.get_mut(&range) else {
                continue;
            };
            let whole = from_idx <= range.base;
            if by == Some(d.holder) && !d.failed {
                // The holder cut its own list first; a list being read
                // now was written before.
                if d.returning.is_some() {
                    d.floor = d.floor.min(from_idx.max(range.base));
                }
                if whole {
                    d.gone = true;
                    if d.cuts.is_empty() {
                        self.end(range, out);
                    }
                }
                continue;
            }
            let first = from_idx.max(range.base);
            if first > range.last() {
                continue;
            }
            let span = PageSpan {
                ino,
                first,
                count: range.last() - first + 1,
            };
            d.cuts.push(span);
            d.gone |= whole;
            if !d.failed {
                out.push(Action::InvalidateRange {
                    node: d.holder,
                    span,
                });
            }
        }
    }

    /// Is `span` a cut of a range `node` holds, not yet acknowledged?
    pub(super) fn awaits_cut_ack(&self, node: u8, span: &PageSpan) -> bool {
        let range = DelegRange::of(PageKey {
            ino: span.ino,
            idx: span.first,
        });
        self.delegs
            .get(&range)
            .is_some_and(|d| d.holder == node && d.cuts.contains(span))
    }

    /// An INV_RANGE ack from `node` for `span`: if it acknowledges a cut
    /// of a range `node` holds, that cut is done; with the last one, a
    /// returned or wholly cut delegation ends.
    pub(super) fn cut_acked(&mut self, node: u8, span: PageSpan, out: &mut Vec<Action>) {
        let range = DelegRange::of(PageKey {
            ino: span.ino,
            idx: span.first,
        });
        let Some(d) = self.delegs.get_mut(&range) else {
            return;
        };
        if d.holder != node {
            return;
        }
        let Some(i) = d.cuts.iter().position(|c| *c == span) else {
            return;
        };
        d.cuts.remove(i);
        if d.cuts.is_empty() && (d.returned || d.gone) && d.returning.is_none() {
            self.end(range, out);
        }
    }

    /// `node` failed: its delegations' lists are read (and their pages
    /// written back, [`PageDir::list_read`]); its parked requests are
    /// dropped (nobody waits for their answers).
    pub(super) fn deleg_node_failed(&mut self, node: u8, out: &mut Vec<Action>) {
        let mut ended = Vec::new();
        for (range, d) in self.delegs.iter_mut() {
            d.parked.retain(|p| p.node != node);
            if d.holder != node || d.failed {
                continue;
            }
            d.failed = true;
            d.returning = None;
            if d.returned || d.gone {
                // Its list was read already, or holds nothing left.
                ended.push(*range);
            } else {
                out.push(Action::ReadList {
                    node,
                    range: *range,
                    gfn: d.list,
                });
            }
        }
        for r in ended {
            self.end(r, out);
        }
    }

    /// Invariants of the delegations (part of [`PageDir::check`]).
    pub(super) fn check_delegations(&self) -> Result<(), alloc::string::String> {
        use alloc::format;
        for (range, d) in &self.delegs {
            if d.holder == 0 || d.holder > self.max_nodes() {
                return Err(format!("{range:?}: holder {} out of range", d.holder));
            }
            if d.parked.iter().any(|p| p.node == d.holder) {
                return Err(format!("{range:?}: the holder's own request parked"));
            }
            if d.returned && d.returning.is_some() {
                return Err(format!("{range:?}: returned twice"));
            }
            for k in self.table.keys_between(range.ino, range.base, range.last()) {
                let Some(e) = self.table.get(&k) else {
                    continue;
                };
                if e.owner != d.holder || e.sharers & !bit(d.holder) != 0 {
                    return Err(format!("{k:?}: {e:?} in a range delegated to {}", d.holder));
                }
                if e.gfn == d.list && !d.failed {
                    return Err(format!("{k:?}: in the list frame of its delegation"));
                }
            }
        }
        Ok(())
    }
}
