//! Write-back and fsync of the single-copy path: dirty frames through
//! WRITEBACK runs, relaxed private copies through the file server.

use alloc::vec::Vec;

use fabric::proto::{Errno, PageKey, PageRun, Request, RunKind};

use super::{ScState, BATCH};
use crate::dirty::Run;
use crate::env::Env;
use crate::link::{contiguous_runs, Link, WriteReq};
use crate::pagecache::PAGE;

impl ScState {
    /// Write back what this node dirtied of `ino` (frames through
    /// WRITEBACK, relaxed private copies through the storage server and
    /// this node's bulk slot 2), then flush.
    pub fn fsync<E: Env>(
        &mut self,
        link: &mut Link<E>,
        (ino, gen): (u64, u64),
        size: u64,
    ) -> Result<(), Errno> {
        self.write_back(link, (ino, gen), size)?;
        link.call(&Request::Fsync { ino }, self).map(|_| ())
    }

    /// [`ScState::fsync`] but the `Fsync` request: write back `ino`'s
    /// dirty pages and private copies.
    pub fn write_back<E: Env>(
        &mut self,
        link: &mut Link<E>,
        (ino, gen): (u64, u64),
        size: u64,
    ) -> Result<(), Errno> {
        self.flush_drops(link)?;
        // Pages placed under a delegation: the directory learns them.
        self.return_file(link, ino)?;
        let mut dirty: Vec<(PageKey, bool)> = (self.cache())
            .map(|c| c.dirty_pages(ino))
            .unwrap_or_default()
            .into_iter()
            .map(|k| (k, true))
            .collect();
        dirty.sort_unstable_by_key(|d| d.0);
        // One WRITEBACK entry per contiguous run: the directory writes a
        // run's pages as one job (contiguous blocks, each checksum-table
        // block and the inode record once), at most [`BATCH`] pages per
        // round trip (as a reclaim sweep's INVs).
        for pages in dirty.chunks(BATCH) {
            let chunk = &PageRun::split(RunKind::Writeback, pages)[..];
            let (answers, fatal) = self.run_batch(link, chunk);
            if let Some(c) = self.cache() {
                for (run, a) in chunk.iter().zip(&answers) {
                    let Some(Ok(r)) = a else { continue };
                    for (i, (k, _)) in run.pages().enumerate() {
                        if r.done & (1 << i) != 0 {
                            c.cleaned(&k);
                            if r.written & (1 << i) != 0 {
                                c.count_writeback();
                            }
                        }
                    }
                }
            }
            if let Some(e) = fatal {
                return Err(e);
            }
            if let Some(Some(Err(e))) = answers.into_iter().find(|a| matches!(a, Some(Err(_)))) {
                return Err(e);
            }
        }
        let private = self
            .cache()
            .map(|c| c.private_pages(ino))
            .unwrap_or_default();
        self.write_back_private(link, (ino, gen), &private, size)
    }

    /// Write the private copies `keys` of `ino` (sorted) back through the
    /// storage server and this node's bulk slot 2, contiguous pages in one
    /// write of up to the slot, clipped to `size`; then forget them (the
    /// next access maps the reconciled single copy). `gen`: the generation
    /// of `ino` they were written to (refused if the number names another
    /// file now).
    pub fn write_back_private<E: Env>(
        &mut self,
        link: &mut Link<E>,
        (ino, gen): (u64, u64),
        keys: &[PageKey],
        size: u64,
    ) -> Result<(), Errno> {
        // A write growing the file over pages another node's shrink is
        // still tearing down is refused (`Busy`) until they are gone: the
        // copies not written stay and go again, servicing our notices
        // meanwhile (this node may be the owner to tell).
        let deadline = link.deadline();
        loop {
            match self.write_back_private_once(link, (ino, gen), keys, size) {
                Err(Errno::Busy) if link.env.now_ns() < deadline => {
                    log::debug!("write-back of {ino}: pages under it torn down, waiting");
                    // Our own tasks' READs of those pages hold their acks
                    // until their answers are applied.
                    self.reads_poll(link);
                    link.service(self);
                    link.env.wait_step(false);
                }
                r => return r,
            }
        }
    }

    /// One pass of [`ScState::write_back_private`]: the copies still held
    /// go; `Busy` if the directory refused some of them only for that.
    fn write_back_private_once<E: Env>(
        &mut self,
        link: &mut Link<E>,
        (ino, gen): (u64, u64),
        keys: &[PageKey],
        size: u64,
    ) -> Result<(), Errno> {
        // Tasks' writes in flight hold the slot and carry older bytes;
        // the copies they wrote are gone once applied: only those left
        // go (a page without its copy would go out as zeros).
        self.finish_copies(link);
        let left: Vec<PageKey> = match self.cache() {
            Some(c) => keys
                .iter()
                .filter(|k| c.private(k).is_some())
                .copied()
                .collect(),
            None => Vec::new(),
        };
        // A write slot's worth of copies at a time: staged all at once, a
        // write-back doubles the heap its copies hold (up to the bound on
        // private copies, a third of the heap) when only a slot of it can
        // be in flight anyway.
        let max_run = (link.bulk_cap(2)? / PAGE).max(1);
        let mut err = None;
        for chunk in left.chunks(max_run) {
            let runs = self.copy_runs(ino, chunk, size, max_run);
            let staged: usize = runs.iter().map(|(_, _, r)| r.data.len()).sum();
            self.staged_max = self.staged_max.max(staged);
            // Every piece of the chunk in flight together.
            let reqs: Vec<WriteReq<'_>> = runs
                .iter()
                .flat_map(|(_, _, r)| r.writes(ino, gen))
                .collect();
            let mut answers = link.fs_write_batch(&reqs, self)?.into_iter();
            for (keys, pages, run) in &runs {
                let mut ok = true;
                for p in &run.pieces {
                    if let Err(e) = crate::dirty::written(answers.next().as_ref(), p.len()) {
                        if e != Errno::Busy {
                            log::warn!("write-back of inode {ino} at page {}: {e:?}", run.first);
                        }
                        // Any other error outranks `Busy` (asked again).
                        if err.is_none_or(|x| x == Errno::Busy) {
                            err = Some(e);
                        }
                        ok = false;
                    }
                }
                if !ok {
                    continue; // the copies stay, to be written back again
                }
                if let Some(c) = self.coh.as_mut() {
                    for _ in 0..*pages {
                        c.cache.count_writeback();
                    }
                    for key in keys.iter() {
                        c.cache.drop_private(key);
                        c.written.remove(key);
                    }
                }
            }
        }
        err.map_or(Ok(()), Err)
    }

    /// The runs of the private copies `keys` of `ino` (sorted) to write
    /// back: contiguous pages, up to `max_run` each, clipped to `size`,
    /// each with the pieces of it this node wrote (the only bytes sent);
    /// with the run's keys and the copies it holds (a page without its
    /// copy reads as zeros, and is no piece).
    pub(super) fn copy_runs<'k>(
        &self,
        ino: u64,
        keys: &'k [PageKey],
        size: u64,
        max_run: usize,
    ) -> Vec<(&'k [PageKey], u64, Run)> {
        let Some(coh) = self.coh.as_ref() else {
            return Vec::new();
        };
        let after = |k: &PageKey, n: u64| PageKey {
            ino,
            idx: k.idx + n,
        };
        let mut runs = Vec::new();
        for r in contiguous_runs(keys, max_run, after) {
            let run = &keys[r.clone()];
            let start = run[0].idx * PAGE as u64;
            let len = (size.saturating_sub(start) as usize).min(run.len() * PAGE);
            let mut buf = alloc::vec![0u8; len];
            let mut pages = 0u64;
            for (k, chunk) in buf.chunks_mut(PAGE).enumerate() {
                if let Some(p) = coh.cache.private(&run[k]) {
                    chunk.copy_from_slice(&p[..chunk.len()]);
                    pages += 1;
                }
            }
            let empty = crate::dirty::DirtyBytes::default();
            let dirty = |k: usize| match coh.cache.private(&run[k]) {
                Some(_) => coh.written.get(&run[k]),
                None => Some(&empty),
            };
            runs.push((run, pages, Run::new(run[0].idx, run.len(), buf, dirty)));
        }
        runs
    }
}
