//! Reclaim's INVs, waited for: the eviction policy's victims (or a
//! task group's) go to the directory as one BATCH_INV of one entry per
//! contiguous run of a file's pages, at most [`BATCH`] pages per round
//! trip; a page done frees its frame, a refused one stays ours.

use alloc::vec::Vec;

use fabric::proto::{Errno, PageKey, PageReply, PageReq, PageRun, RunKind};

use crate::env::Env;
use crate::link::Link;
use crate::singlecopy::{ScState, BATCH};

impl ScState {
    /// Invalidate up to `n` owned pages the eviction policy picks (one
    /// BATCH_INV).
    pub fn reclaim<E: Env>(&mut self, link: &mut Link<E>, n: usize) -> Result<usize, Errno> {
        let victims = self.cache().map(|c| c.pick_victims(n)).unwrap_or_default();
        self.invalidate_victims(link, victims)
    }

    /// Reclaim for a miss the cache refused: from the task's group if it
    /// is at its own limit (through its policy), else for the node.
    pub(in crate::singlecopy) fn reclaim_for_miss<E: Env>(
        &mut self,
        link: &mut Link<E>,
        n: usize,
    ) -> Result<usize, Errno> {
        let victims = (self.cache())
            .map(|c| c.pick_victims_in(c.reclaim_target(), n))
            .unwrap_or_default();
        self.invalidate_victims(link, victims)
    }

    /// Invalidate pages already taken as victims (`Reclaiming`) in one
    /// BATCH_INV of one entry per contiguous run of a file's pages;
    /// returns how many pages.
    pub(in crate::singlecopy) fn invalidate_victims<E: Env>(
        &mut self,
        link: &mut Link<E>,
        victims: Vec<(PageKey, bool)>,
    ) -> Result<usize, Errno> {
        if victims.is_empty() {
            return Ok(0);
        }
        // Pages listed under a delegation become known owned pages first.
        if let Err(e) = self.return_for_victims(link, &victims) {
            if let Some(c) = self.cache() {
                for (key, _) in &victims {
                    c.reclaim_failed(key);
                }
            }
            return Err(e);
        }
        fabric::trace::record(
            fabric::trace::Kind::EvictStart,
            0,
            0,
            0,
            victims.len() as u64,
        );
        // Our own mappings of these frames go first.
        if let Some(c) = self.coh.as_mut() {
            for (k, _) in &victims {
                c.unmap(&link.env, k);
            }
        }
        // One entry per contiguous run of one file's pages, at most
        // [`BATCH`] pages per round trip (the directory serves a batch's
        // write-backs before it answers: more would hold its loop, and the
        // answer, past the call timeout under emulation).
        let mut victims = victims;
        victims.sort_unstable_by_key(|v| v.0);
        let mut err = None;
        let mut freed = 0u64;
        for pages in victims.chunks(BATCH) {
            let chunk = &PageRun::split(RunKind::Inv, pages)[..];
            if err.is_some() {
                // Not sent: the pages stay ours (as dirty: at worst one
                // write-back too many).
                if let Some(c) = self.cache() {
                    for (key, _) in chunk.iter().flat_map(|r| r.pages()) {
                        c.reclaim_failed(&key);
                    }
                }
                continue;
            }
            freed += self.invalidate_runs(link, chunk, &mut err);
        }
        fabric::trace::record(fabric::trace::Kind::EvictEnd, 0, 0, 0, freed);
        match err {
            Some(e) => Err(e),
            None => Ok(victims.len()),
        }
    }

    /// Send the INV runs `runs` (at most [`BATCH`]) together and take
    /// their answers; the first error goes to `err`. Returns the pages
    /// freed.
    fn invalidate_runs<E: Env>(
        &mut self,
        link: &mut Link<E>,
        runs: &[PageRun],
        err: &mut Option<Errno>,
    ) -> u64 {
        // Every answered page is completed even if others were refused; an
        // unanswered one stays torn down until the directory's DIR_INV.
        let (answers, fatal) = self.run_batch(link, runs);
        if let Some(e) = fatal {
            err.get_or_insert(e);
        }
        let mut freed = 0u64;
        if let Some(c) = self.cache() {
            for (run, a) in runs.iter().zip(answers) {
                match a {
                    Some(Ok(r)) => {
                        for (i, (key, _)) in run.pages().enumerate() {
                            if r.done & (1 << i) != 0 {
                                c.reclaimed(&key);
                                freed += 1;
                            } else {
                                c.reclaim_failed(&key);
                            }
                        }
                    }
                    Some(Err(e)) => {
                        for (key, _) in run.pages() {
                            c.reclaim_failed(&key);
                        }
                        err.get_or_insert(e);
                    }
                    None => {}
                }
            }
        }
        freed
    }

    /// Invalidate one page we own, synchronously (`bench inv`). Returns
    /// false if we do not own it.
    pub fn invalidate_one<E: Env>(
        &mut self,
        link: &mut Link<E>,
        key: PageKey,
    ) -> Result<bool, Errno> {
        let Some(dirty) = self.cache().and_then(|c| c.take_victim(&key)) else {
            return Ok(false);
        };
        if let Err(e) = self.return_for_victims(link, &[(key, dirty)]) {
            if let Some(c) = self.cache() {
                c.reclaim_failed(&key);
            }
            return Err(e);
        }
        if let Some(c) = self.coh.as_mut() {
            c.unmap(&link.env, &key);
        }
        let r = self.page_calls(link, &[PageReq::Inv { key, dirty }])?;
        if let Some(c) = self.cache() {
            match r.first() {
                Some(PageReply::Done { .. }) => c.reclaimed(&key),
                _ => c.reclaim_failed(&key),
            }
        }
        Ok(true)
    }
}
