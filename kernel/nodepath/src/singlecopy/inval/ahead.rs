//! Reclaim ahead of need (`crate::watermark`): when the free frames drop
//! under the low mark, the eviction policy's victims are invalidated in
//! the background, between operations and at idle: their INVs go out as
//! calls nobody blocks on ([`Link::start_call`]), a batch at a time, and
//! their answers are taken in later ([`ScState::reap_invs`]), so the
//! directory's write-back of dirty victims overlaps this node's next
//! operations. A miss that finds no frame first waits for the evictions
//! in flight, and reclaims synchronously only when none is
//! ([`ScState::reclaim_waiting`]).

use alloc::vec::Vec;

use fabric::proto::{Errno, Op, PageRun, PageSpan, Request, Response, RunKind};

use crate::env::Env;
use crate::link::Link;
use crate::singlecopy::{ScState, BATCH};
use crate::watermark::Watermarks;

/// Most background INVs in flight together (the rest of the request ring
/// is left for the operations' own requests).
pub(super) const MAX_INVS_IN_FLIGHT: usize = 2 * BATCH;

/// Reclaim ahead of need under way.
#[derive(Debug, Default)]
pub(in crate::singlecopy) struct Refill {
    /// Background INVs of reclaim ahead of need in flight, by tag: one
    /// run of a file's pages each (`ahead`).
    invs: Vec<(u32, PageSpan)>,
    /// A round of reclaim ahead of need is under way (started under the
    /// low mark, going on to the high one).
    on: bool,
}

impl ScState {
    /// The free-frame marks of every cache of this node.
    pub fn set_watermarks(&mut self, marks: Watermarks) {
        self.marks = marks;
        if let Some(c) = self.cache() {
            c.set_watermarks(marks);
        }
    }

    /// The free-frame marks.
    pub fn watermarks(&self) -> Watermarks {
        self.marks
    }

    /// Pages of background INVs in flight.
    pub fn invs_in_flight(&self) -> usize {
        self.coh.as_ref().map_or(0, |c| {
            c.refill.invs.iter().map(|(_, s)| s.count as usize).sum()
        })
    }

    /// Between operations: take in the answers of background INVs, and
    /// if the free frames are under the low mark start INVs of victims up
    /// to the high mark (at most [`MAX_INVS_IN_FLIGHT`] out). With
    /// `settle` (idle), wait until every one is answered. Returns the
    /// INVs started.
    pub fn reclaim_ahead<E: Env>(
        &mut self,
        link: &mut Link<E>,
        settle: bool,
    ) -> Result<usize, Errno> {
        if self.coh.as_ref().is_none_or(|c| !c.active()) {
            return Ok(0);
        }
        self.answer_recalls(link);
        self.reap_invs(link);
        let mut started = 0;
        loop {
            let out = self.invs_in_flight();
            let Some(c) = self.coh.as_mut() else { break };
            // Under the low mark a round starts; it goes on (in later
            // calls too) until the high mark is free.
            let want = c.cache.reclaim_wanted(out, c.refill.on);
            c.refill.on = want > 0;
            let n = want.min(MAX_INVS_IN_FLIGHT.saturating_sub(out)).min(BATCH);
            if n == 0 {
                if want > 0 && settle && out > 0 {
                    // Idle: wait for room in flight, then go on.
                    if !link.wait_calls(self) {
                        break;
                    }
                    self.reap_invs(link);
                    continue;
                }
                break;
            }
            let victims = c.cache.pick_victims(n);
            if victims.is_empty() {
                c.refill.on = false;
                break; // nothing owned that may go
            }
            started += victims.len();
            self.start_invs(link, victims)?;
        }
        if settle {
            self.settle_invs(link);
        }
        Ok(started)
    }

    /// Wait until every background INV is answered (or given up).
    pub(in crate::singlecopy) fn settle_invs<E: Env>(&mut self, link: &mut Link<E>) {
        self.reap_invs(link);
        while self.invs_in_flight() > 0 {
            if !link.wait_calls(self) {
                break; // the calls' own give-up times end them
            }
            self.reap_invs(link);
        }
    }

    /// Send the INVs of `victims` (already `Reclaiming`) without waiting,
    /// one entry per contiguous run of a file's pages.
    fn start_invs<E: Env>(
        &mut self,
        link: &mut Link<E>,
        victims: Vec<(fabric::proto::PageKey, bool)>,
    ) -> Result<(), Errno> {
        // Pages listed under a delegation become known owned pages first.
        if let Err(e) = self.return_for_victims(link, &victims) {
            if let Some(c) = self.cache() {
                for (k, _) in &victims {
                    c.reclaim_failed(k);
                }
            }
            return Err(e);
        }
        // Our own mappings of these frames go first.
        if let Some(c) = self.coh.as_mut() {
            for (k, _) in &victims {
                c.unmap(&link.env, k);
            }
        }
        let mut victims = victims;
        victims.sort_unstable_by_key(|v| v.0);
        let runs = PageRun::split(RunKind::Inv, &victims);
        for (i, run) in runs.iter().enumerate() {
            match link.start_call(&Request::PageRun(*run), self) {
                Ok(tag) => {
                    if let Some(c) = self.coh.as_mut() {
                        c.refill.invs.push((tag, run.span));
                        c.cache.count_inv_entry();
                    }
                }
                Err(e) => {
                    // Not sent: the pages stay as they were (as dirty: at
                    // worst one write-back too many).
                    if let Some(c) = self.cache() {
                        for r in &runs[i..] {
                            for (k, _) in r.pages() {
                                c.reclaim_failed(&k);
                            }
                        }
                    }
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Take in the answers of background INVs that came: a page done
    /// frees its frame, a refused one goes back to the cache, one given up
    /// unanswered stays torn down until its late answer (or the
    /// directory's DIR_INV). Returns the frames freed.
    pub(in crate::singlecopy) fn reap_invs<E: Env>(&mut self, link: &mut Link<E>) -> usize {
        let Some(c) = self.coh.as_mut() else { return 0 };
        let mut freed = 0;
        let mut i = 0;
        while i < c.refill.invs.len() {
            let (tag, span) = c.refill.invs[i];
            let Some(r) = link.poll_call(tag, Op::PageInvRun) else {
                i += 1;
                continue;
            };
            c.refill.invs.swap_remove(i);
            let done = match r {
                Ok(Response::Run(r)) => r.done,
                Err(Errno::Unavailable) => {
                    c.late.abandon(tag, span, Op::PageInvRun);
                    continue;
                }
                Ok(_) | Err(_) => 0,
            };
            let n = c.cache.run_answered(span, done);
            c.cache.count_reclaimed_ahead(n);
            freed += n;
        }
        freed
    }

    /// A miss found no frame: wait for the background INVs in flight,
    /// else reclaim `n` pages now (from the task's group if it is at its
    /// limit). Counted as a miss that waited. Returns the frames freed.
    pub(in crate::singlecopy) fn reclaim_waiting<E: Env>(
        &mut self,
        link: &mut Link<E>,
        n: usize,
    ) -> Result<usize, Errno> {
        if let Some(c) = self.cache() {
            c.count_waited_miss();
        }
        while self.invs_in_flight() > 0 {
            let freed = self.reap_invs(link);
            if freed > 0 {
                return Ok(freed);
            }
            if self.invs_in_flight() == 0 {
                break;
            }
            if !link.wait_calls(self) {
                return Err(Errno::Unavailable);
            }
        }
        self.reclaim_for_miss(link, n)
    }
}
