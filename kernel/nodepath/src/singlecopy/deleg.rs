//! Delegated ownership, node side (strong mode, boot option `delegation`;
//! the directory's side is `dirsvc::pagedir::deleg`, the wire format and
//! the list frame's records `fabric::proto::deleg`).
//!
//! A whole-page write to pages this node holds in no form asks the
//! directory for their 2 MiB range once (one DELEGATE); granted, the
//! range's pages are placed in frames of this node's pool with no request
//! per page. Each placed page is listed (frame, dirty) in the
//! delegation's list frame *before* the write returns, so the list always
//! names every page written under the delegation: a RECALL is answered
//! with the list as it stands, and a failed holder's pages are found in
//! its list by the directory. A placed page is written and never written
//! back while the range is held, so every record says dirty.
//!
//! The range goes back (one DELEG_RETURN; from its sending on the listed
//! pages are ordinary owned pages, the directory installs them dirty):
//!
//! * on a RECALL, serviced as a notice in every wait and answered at the
//!   next wait step of a page exchange, between operations, and when
//!   idle; a range recalled is not asked for again in this session;
//! * before reclaim of one of its pages (an INV of a page the directory
//!   does not know would free it unwritten);
//! * before a write-back or fsync of the file (the directory writes back
//!   only pages it knows), and before this node truncates or removes it.
//!
//! Another node's removal of the file cuts the range with an INV_RANGE:
//! the cut pages' records are cleared before the ack, and a range cut from
//! its first page is forgotten (its list frame is free again).

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::vec::Vec;

use fabric::proto::{
    DelegList, DelegRange, Errno, Op, PageKey, PageReply, PageReq, PageSpan, Request, Response,
    DELEG_RECORD,
};
use fabric::shm::SharedMem;

use super::remote::frame_off;
use super::{Coherence, ScState};
use crate::env::Env;
use crate::link::Link;
use crate::pagecache::{Mode, PAGE};

/// Most ranges remembered as not to be asked for again (denied or
/// recalled); past it the memory starts over.
const MAX_SKIP: usize = 1024;

/// A range this node holds.
#[derive(Debug)]
struct Held {
    /// Its list frame.
    list: u64,
    /// Pages placed under it (listed).
    pages: BTreeSet<u64>,
}

/// Counters (`cache stats`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DelegCounts {
    /// DELEGATEs granted.
    pub granted: u64,
    /// DELEGATEs denied.
    pub denied: u64,
    /// Ranges given back on a RECALL.
    pub recalled: u64,
    /// Ranges given back on this node's own (reclaim, fsync, cuts).
    pub returned: u64,
    /// Pages placed with no request.
    pub placed: u64,
}

/// One session's delegations.
#[derive(Debug, Default)]
pub(super) struct Delegs {
    held: BTreeMap<DelegRange, Held>,
    /// RECALLs (and late grants) to answer with a DELEG_RETURN, with the
    /// list frame to free at its answer when the range is not held.
    recalls: Vec<(DelegRange, Option<u64>)>,
    /// DELEG_RETURNs sent without waiting: tag -> the list frame freed at
    /// the answer.
    returning: BTreeMap<u32, Option<u64>>,
    /// DELEGATEs given up unanswered: tag -> (range, list frame kept
    /// zeroed until the answer says).
    asking: BTreeMap<u32, (DelegRange, u64)>,
    /// The range whose DELEGATE is being exchanged now: a RECALL of it
    /// waits until the answer is applied.
    asking_now: Option<DelegRange>,
    /// Not to be asked for again (denied, recalled).
    skip: BTreeSet<DelegRange>,
    /// Counters.
    pub(super) counts: DelegCounts,
}

impl Delegs {
    fn skip(&mut self, range: DelegRange) {
        if self.skip.len() >= MAX_SKIP {
            self.skip.clear();
        }
        self.skip.insert(range);
    }

    /// Held ranges of `ino`.
    fn of_file(&self, ino: u64) -> Vec<DelegRange> {
        self.held.keys().filter(|r| r.ino == ino).copied().collect()
    }
}

impl Coherence {
    /// Write record `rec` of page `idx` into `range`'s list frame `list`.
    fn write_record(
        &self,
        mem: &(impl SharedMem + ?Sized),
        list: u64,
        range: &DelegRange,
        idx: u64,
        rec: u64,
    ) {
        let at = frame_off(list) + (idx - range.base) as usize * DELEG_RECORD;
        mem.write(at, &rec.to_le_bytes());
    }

    /// A RECALL of `range` came (serviced with the notices): answered at
    /// the next chance ([`ScState::answer_recalls`]).
    pub(super) fn recalled(&mut self, range: DelegRange) {
        log::debug!("RECALL of {range:?}");
        if !self.delegs.recalls.iter().any(|(r, _)| *r == range) {
            self.delegs.recalls.push((range, None));
        }
    }

    /// Another node's cut reached `span` (an INV_RANGE, before its ack):
    /// the cut pages leave their lists; a range cut from its first page
    /// is over (the directory reads its list no more).
    pub(super) fn deleg_cut(&mut self, mem: &(impl SharedMem + ?Sized), span: &PageSpan) {
        let ranges: Vec<DelegRange> = self
            .delegs
            .held
            .keys()
            .filter(|r| r.ino == span.ino && r.last() >= span.first && r.base <= span.last())
            .copied()
            .collect();
        for range in ranges {
            let Some(h) = self.delegs.held.get(&range) else {
                continue;
            };
            let list = h.list;
            let cut: Vec<u64> = h
                .pages
                .iter()
                .copied()
                .filter(|i| *i >= span.first && *i <= span.last())
                .collect();
            for idx in &cut {
                self.write_record(mem, list, &range, *idx, 0);
            }
            if span.first <= range.base {
                self.delegs.held.remove(&range);
                self.cache.give_frame(list);
            } else if let Some(h) = self.delegs.held.get_mut(&range) {
                h.pages.retain(|i| !cut.contains(i));
            }
        }
    }
}

impl ScState {
    /// Ask for delegations (strong mode only; boot option `delegation`).
    pub fn set_delegation(&mut self, on: bool) {
        self.delegation = on && self.mode == Mode::Strong;
    }

    /// Delegation counters of this session.
    pub fn deleg_counts(&self) -> DelegCounts {
        self.coh
            .as_ref()
            .map_or_else(DelegCounts::default, |c| c.delegs.counts)
    }

    /// Place the whole pages `keys` (sorted, held in no form) of a write
    /// of `data` at `pos` under delegations, asking for their ranges as
    /// needed; returns the pages placed (written and listed), the others
    /// are left to the page requests.
    pub(super) fn place_delegated<E: Env>(
        &mut self,
        link: &mut Link<E>,
        pos: u64,
        data: &[u8],
        keys: &[PageKey],
    ) -> Result<Vec<PageKey>, Errno> {
        let mut placed = Vec::new();
        if !self.delegation || self.appending() {
            return Ok(placed);
        }
        let mut i = 0;
        while i < keys.len() {
            let range = DelegRange::of(keys[i]);
            let j = keys[i..]
                .iter()
                .position(|k| !range.contains(k))
                .map_or(keys.len(), |p| i + p);
            if self.ensure_delegated(link, range)? {
                self.place_in(link, range, pos, data, &keys[i..j], &mut placed);
            }
            i = j;
        }
        Ok(placed)
    }

    /// Place `keys` (all of `range`, held here) while frames are free.
    fn place_in<E: Env>(
        &mut self,
        link: &Link<E>,
        range: DelegRange,
        pos: u64,
        data: &[u8],
        keys: &[PageKey],
        placed: &mut Vec<PageKey>,
    ) {
        let mem = link.env.mem();
        let Some(c) = self.coh.as_mut() else { return };
        let Some(list) = c.delegs.held.get(&range).map(|h| h.list) else {
            return;
        };
        for k in keys {
            let Some(gfn) = c.cache.place_delegated(*k) else {
                return; // no room: the usual way (which reclaims)
            };
            let Some(rec) = DelegList::record(gfn, true) else {
                // Cannot be listed (checked when asked): never placed.
                c.cache.give_frame(gfn);
                return;
            };
            let off = (k.idx * PAGE as u64 - pos) as usize;
            mem.write(frame_off(gfn), &data[off..off + PAGE]);
            c.write_record(mem, list, &range, k.idx, rec);
            if let Some(h) = c.delegs.held.get_mut(&range) {
                h.pages.insert(k.idx);
            }
            c.delegs.counts.placed += 1;
            placed.push(*k);
        }
    }

    /// Is `range` delegated here (asking for it once)?
    fn ensure_delegated<E: Env>(
        &mut self,
        link: &mut Link<E>,
        range: DelegRange,
    ) -> Result<bool, Errno> {
        let node = self.c()?.node;
        let c = self.c()?;
        if c.delegs.held.contains_key(&range) {
            return Ok(true);
        }
        if c.delegs.skip.contains(&range) || c.layout.pool_gfns(node).1 > u64::from(u32::MAX) {
            return Ok(false);
        }
        let Some(list) = c.cache.take_frame() else {
            return Ok(false);
        };
        link.env.mem().write(frame_off(list), &[0u8; PAGE]);
        c.delegs.asking_now = Some(range);
        let req = Request::Page(PageReq::Delegate { range, list });
        let sent = link.send(&req, self);
        let tag = match sent {
            Ok(t) => t,
            Err(e) => {
                if let Ok(c) = self.c() {
                    c.delegs.asking_now = None;
                    c.cache.give_frame(list);
                }
                return Err(e);
            }
        };
        let mut out = [None];
        let mut fatal = None;
        self.collect(link, &[tag], &mut out, &mut fatal, |_, d| {
            matches!(
                Response::decode(d, Op::PageDelegate),
                Ok((_, Response::Page(PageReply::Delegated { granted: true })))
            )
        });
        let c = self.c()?;
        c.delegs.asking_now = None;
        match out[0] {
            Some(true) => {
                log::debug!("delegation of {range:?} granted, list in frame {list}");
                c.delegs.counts.granted += 1;
                c.delegs.held.insert(
                    range,
                    Held {
                        list,
                        pages: BTreeSet::new(),
                    },
                );
                Ok(true)
            }
            Some(false) => {
                c.delegs.counts.denied += 1;
                c.delegs.skip(range);
                c.cache.give_frame(list);
                Ok(false)
            }
            None => {
                // Its grant may still come: the list frame stays zeroed
                // and reserved until the answer (`deleg_late`).
                c.delegs.asking.insert(tag, (range, list));
                Err(fatal.unwrap_or(Errno::Unavailable))
            }
        }
    }

    /// Answer the RECALLs serviced so far: one DELEG_RETURN each, sent
    /// without waiting (its answer frees the list frame). From here on
    /// the listed pages are ordinary owned pages.
    pub fn answer_recalls<E: Env>(&mut self, link: &mut Link<E>) {
        let Some(c) = self.coh.as_mut() else { return };
        if c.delegs.recalls.is_empty() || !c.active() {
            return;
        }
        let now = c.delegs.asking_now;
        let mut todo = core::mem::take(&mut c.delegs.recalls);
        // A RECALL of the range being asked for waits for the answer.
        c.delegs.recalls = todo
            .iter()
            .filter(|(r, _)| Some(*r) == now)
            .copied()
            .collect();
        todo.retain(|(r, _)| Some(*r) != now);
        for (range, list) in todo {
            let Some(c) = self.coh.as_mut() else { return };
            let held = c.delegs.held.remove(&range);
            c.delegs.skip(range);
            let req = Request::Page(PageReq::DelegReturn { range });
            match link.send(&req, self) {
                Ok(tag) => {
                    let Some(c) = self.coh.as_mut() else { return };
                    if held.is_some() {
                        c.delegs.counts.recalled += 1;
                    }
                    log::debug!("RECALL of {range:?} answered (tag {tag})");
                    c.delegs
                        .returning
                        .insert(tag, held.map(|h| h.list).or(list));
                }
                Err(e) => {
                    // Not sent: the session is going (a rejoin forgets
                    // every page); kept for a later try meanwhile.
                    log::debug!("DELEG_RETURN of {range:?} not sent: {e}");
                    let Some(c) = self.coh.as_mut() else { return };
                    if let Some(h) = held {
                        c.delegs.held.insert(range, h);
                    }
                    c.delegs.recalls.push((range, list));
                    return;
                }
            }
        }
    }

    /// An answer whose call nobody waits for: a DELEG_RETURN's (its list
    /// frame is free again) or a given-up DELEGATE's (a late grant is
    /// given back at once). False: not a delegation's.
    pub(super) fn deleg_late(&mut self, tag: u32, d: &fabric::proto::Desc) -> bool {
        let Some(c) = self.coh.as_mut() else {
            return false;
        };
        if let Some(list) = c.delegs.returning.remove(&tag) {
            let done = matches!(
                Response::decode(d, Op::PageDelegReturn),
                Ok((_, Response::Page(PageReply::Done { .. })))
            );
            if let (true, Some(g)) = (done, list) {
                c.cache.give_frame(g);
            }
            return true;
        }
        if let Some((range, list)) = c.delegs.asking.remove(&tag) {
            let granted = matches!(
                Response::decode(d, Op::PageDelegate),
                Ok((_, Response::Page(PageReply::Delegated { granted: true })))
            );
            if granted {
                log::debug!("late grant of {range:?}: given back");
                c.delegs.recalls.push((range, Some(list)));
            } else {
                c.cache.give_frame(list);
            }
            return true;
        }
        false
    }

    /// Give `ranges` back now and wait for the answers (reclaim, fsync,
    /// cuts). Ranges not held are skipped.
    fn return_ranges<E: Env>(
        &mut self,
        link: &mut Link<E>,
        ranges: Vec<DelegRange>,
    ) -> Result<(), Errno> {
        let mut sent = Vec::new();
        let mut fatal = None;
        for range in ranges {
            let Some(h) = self.coh.as_mut().and_then(|c| c.delegs.held.remove(&range)) else {
                continue;
            };
            match link.send(&Request::Page(PageReq::DelegReturn { range }), self) {
                Ok(tag) => sent.push((tag, h.list)),
                Err(e) => {
                    if let Some(c) = self.coh.as_mut() {
                        c.delegs.held.insert(range, h);
                    }
                    fatal = Some(e);
                    break;
                }
            }
        }
        let tags: Vec<u32> = sent.iter().map(|(t, _)| *t).collect();
        let mut out = alloc::vec![None; tags.len()];
        self.collect(link, &tags, &mut out, &mut fatal, |_, d| {
            matches!(
                Response::decode(d, Op::PageDelegReturn),
                Ok((_, Response::Page(PageReply::Done { .. })))
            )
        });
        if let Some(c) = self.coh.as_mut() {
            for ((tag, list), a) in sent.into_iter().zip(out) {
                c.delegs.counts.returned += 1;
                match a {
                    Some(true) => c.cache.give_frame(list),
                    Some(false) => {} // refused: the frame stays out of use
                    None => {
                        c.delegs.returning.insert(tag, Some(list));
                    }
                }
            }
        }
        fatal.map_or(Ok(()), Err)
    }

    /// Give back every range of `ino` held here (before its write-back,
    /// fsync, truncate or removal).
    pub fn return_file<E: Env>(&mut self, link: &mut Link<E>, ino: u64) -> Result<(), Errno> {
        let ranges = self.coh.as_ref().map(|c| c.delegs.of_file(ino));
        match ranges {
            Some(r) if !r.is_empty() => self.return_ranges(link, r),
            _ => Ok(()),
        }
    }

    /// Give back the ranges holding a listed page among `victims` (before
    /// their INVs).
    pub(super) fn return_for_victims<E: Env>(
        &mut self,
        link: &mut Link<E>,
        victims: &[(PageKey, bool)],
    ) -> Result<(), Errno> {
        let ranges: Vec<DelegRange> = match self.coh.as_ref() {
            Some(c) if !c.delegs.held.is_empty() => {
                let mut r: Vec<DelegRange> = victims
                    .iter()
                    .map(|(k, _)| DelegRange::of(*k))
                    .filter(|r| c.delegs.held.contains_key(r))
                    .filter(|r| {
                        victims
                            .iter()
                            .any(|(k, _)| c.delegs.held[r].pages.contains(&k.idx) && r.contains(k))
                    })
                    .collect();
                r.sort_unstable();
                r.dedup();
                r
            }
            _ => return Ok(()),
        };
        if ranges.is_empty() {
            return Ok(());
        }
        self.return_ranges(link, ranges)
    }
}
