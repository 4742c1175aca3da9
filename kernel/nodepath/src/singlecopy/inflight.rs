//! A task's fsync (and relaxed mode's close and truncate) in the
//! single-copy modes without waiting inside the call. Two parts, one job:
//!
//! * the WRITEBACK page requests of the file's dirty frames (own or
//!   mapped) go out as calls nobody blocks on ([`Link::start_call`]), up
//!   to [`BATCH`] in flight per job;
//! * relaxed mode's private copies of the file go to the storage server as
//!   file-server writes through [`WriteJobs`] (`link/wbflight.rs`: side by
//!   side in the write slot, in job order), their bytes taken when the job
//!   starts, clipped to the file's size, only the bytes this node wrote
//!   (as the synchronous write-back, [`ScState::copy_runs`]).
//!
//! The task yields; its poll applies the answers as they come. Each page
//! sent is claimed by the job (`pagecache/slots.rs`): a store into the
//! page meanwhile (or any change of its slot) drops the claim, so the
//! answer leaves a frame dirty, or a private copy in place, for the next
//! write-back instead of marking clean (or forgetting) bytes the directory
//! may not have. A failed or unanswered write leaves its page as it was;
//! the job's result is the first error. Every synchronous user of the
//! write slot first waits for the private copies' writes in flight
//! ([`ScState::finish_copies`]).
//!
//! A truncate sends its private copies below the new end the same way
//! (no frames: a truncate writes none back).

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use fabric::proto::{op_of, Errno, PageKey, PageReply, PageReq, Request, Response};

use super::{ScState, BATCH};
use crate::env::Env;
use crate::link::wbflight::{Job as CopiesJob, WriteJobs, SLOT};
use crate::link::Link;
use crate::pagecache::PAGE;

/// One task's write-back of one file.
#[derive(Debug)]
struct Job {
    ino: u64,
    /// The generation of `ino` its private copies were written to.
    gen: u64,
    /// Frames not sent yet.
    todo: Vec<PageKey>,
    /// Frames whose WRITEBACK is in flight, with its call's tag.
    flying: Vec<(PageKey, u32)>,
    /// The private copies' job in [`WbJobs::copies`], until it is done.
    copies: Option<u64>,
    /// The first error (the job stops sending frames and ends when the
    /// rest answered).
    err: Option<Errno>,
    /// The private copies it writes: those below `below`, clipped to
    /// `size`; sent again while refused as `Busy` (a growth over pages a
    /// shrink is still tearing down) until `busy_until`.
    below: u64,
    size: u64,
    busy_until: u64,
}

/// The write-back jobs of this node's tasks.
#[derive(Debug, Default)]
pub struct WbJobs {
    next: u64,
    jobs: BTreeMap<u64, Job>,
    /// The private copies' writes, and which job each copies job is for.
    copies: WriteJobs,
    copies_of: BTreeMap<u64, u64>,
    /// Results of copies jobs applied, by job.
    copies_done: BTreeMap<u64, Result<(), Errno>>,
    /// Jobs started, pages (frames and copies) sent, since boot; most
    /// jobs in flight.
    started: u64,
    sent: u64,
    max: usize,
}

impl WbJobs {
    /// Jobs started, the most in flight together, pages sent (since boot).
    pub fn counts(&self) -> (u64, usize, u64) {
        (self.started, self.max, self.sent)
    }
}

/// The WRITEBACK of `key`.
fn writeback(key: PageKey) -> Request {
    Request::Page(PageReq::Writeback { key, dirty: true })
}

impl ScState {
    /// Start writing back `ino` (its dirty frames if `frames`, and its
    /// private copies of pages below `below`, clipped to `size`) without
    /// waiting; `None` if nothing is to be written. Dirty mappings dropped
    /// with their DROP unanswered are settled first, synchronously, as the
    /// synchronous write-back does.
    pub(super) fn write_back_start<E: Env>(
        &mut self,
        link: &mut Link<E>,
        (ino, gen): (u64, u64),
        size: u64,
        frames: bool,
        below: u64,
    ) -> Result<Option<u64>, Errno> {
        let dirty = match frames {
            true => {
                self.flush_drops(link)?;
                self.return_file(link, ino)?;
                self.cache().map(|c| c.dirty_pages(ino)).unwrap_or_default()
            }
            false => Vec::new(),
        };
        let mut private = self
            .cache()
            .map(|c| c.private_pages(ino))
            .unwrap_or_default();
        private.retain(|k| k.idx < below);
        if dirty.is_empty() && private.is_empty() {
            return Ok(None);
        }
        self.wb.next += 1;
        let id = self.wb.next;
        self.wb.started += 1;
        let mut job = Job {
            ino,
            gen,
            todo: dirty,
            flying: Vec::new(),
            copies: None,
            err: None,
            below,
            size,
            busy_until: link.deadline(),
        };
        // Sent in page order: `todo` is popped from the back.
        job.todo.reverse();
        if !private.is_empty() {
            match self.start_copies(link, id, (ino, gen), &private, size) {
                Ok(c) => job.copies = Some(c),
                Err(e) => job.err = Some(e),
            }
        }
        self.pump_frames(link, id, &mut job);
        self.wb.jobs.insert(id, job);
        self.wb.max = self.wb.max.max(self.wb.jobs.len());
        Ok(Some(id))
    }

    /// Claim `keys` (private copies of `ino`) for job `id`, take their
    /// bytes and start their writes; the copies job's id.
    fn start_copies<E: Env>(
        &mut self,
        link: &mut Link<E>,
        id: u64,
        (ino, gen): (u64, u64),
        keys: &[PageKey],
        size: u64,
    ) -> Result<u64, Errno> {
        let max_run = (link.bulk_cap(SLOT)? / PAGE).max(1);
        let runs = self.copy_runs(ino, keys, size, max_run);
        let staged: usize = runs.iter().map(|(_, _, r)| r.data.len()).sum();
        self.staged_max = self.staged_max.max(staged);
        let Some(c) = self.cache() else {
            return Err(Errno::Unavailable);
        };
        for key in keys {
            c.claim_writeback(*key, id);
        }
        let runs = runs.into_iter().map(|(_, _, run)| run).collect();
        self.wb.sent += keys.len() as u64;
        let copies = self.wb.copies.push(link, (ino, gen), runs);
        self.wb.copies_of.insert(copies, id);
        Ok(copies)
    }

    /// Send `job`'s next frames while it has fewer than [`BATCH`] in
    /// flight.
    fn pump_frames<E: Env>(&mut self, link: &mut Link<E>, id: u64, job: &mut Job) {
        while job.err.is_none() && job.flying.len() < BATCH {
            let Some(key) = job.todo.pop() else { break };
            // Claimed before it is sent: a store after this point keeps it
            // dirty. A page cleaned meanwhile needs no write-back.
            if !self.cache().is_some_and(|c| c.claim_writeback(key, id)) {
                continue;
            }
            match link.start_call(&writeback(key), self) {
                Ok(tag) => {
                    self.wb.sent += 1;
                    job.flying.push((key, tag));
                }
                Err(e) => job.err = Some(e),
            }
        }
    }

    /// Apply what came of job `id`: its result and file once every page
    /// answered.
    pub(super) fn write_back_poll<E: Env>(
        &mut self,
        link: &mut Link<E>,
        id: u64,
    ) -> Option<(u64, Result<(), Errno>)> {
        self.copies_answered(link);
        let Some(mut job) = self.wb.jobs.remove(&id) else {
            return Some((0, Err(Errno::Invalid)));
        };
        let op = op_of(&writeback(PageKey { ino: 0, idx: 0 }));
        let mut i = 0;
        while i < job.flying.len() {
            let (key, tag) = job.flying[i];
            let Some(r) = link.poll_call(tag, op) else {
                i += 1;
                continue;
            };
            job.flying.swap_remove(i);
            match r {
                Ok(Response::Page(PageReply::Done { written })) => {
                    if let Some(c) = self.cache() {
                        c.cleaned_by(&key, id);
                        if written {
                            c.count_writeback();
                        }
                    }
                }
                Ok(_) => {
                    job.err.get_or_insert(Errno::Io);
                }
                Err(e) => {
                    job.err.get_or_insert(e);
                }
            }
        }
        self.pump_frames(link, id, &mut job);
        if let Some(c) = job.copies {
            if let Some(r) = self.wb.copies_done.remove(&c) {
                job.copies = None;
                match r {
                    // The copies not written stay: they go again, with
                    // their bytes of now (a store meanwhile is newer).
                    Err(Errno::Busy) if link.env.now_ns() < job.busy_until => {
                        self.restart_copies(link, id, &mut job);
                    }
                    Err(e) => {
                        job.err.get_or_insert(e);
                    }
                    Ok(()) => {}
                }
            }
        }
        let frames_left = !job.flying.is_empty() || (job.err.is_none() && !job.todo.is_empty());
        if frames_left || job.copies.is_some() {
            self.wb.jobs.insert(id, job);
            return None;
        }
        if let Some(c) = self.cache() {
            c.release_claims(id);
        }
        Some((job.ino, job.err.map_or(Ok(()), Err)))
    }

    /// Send job `id`'s private copies still held again (after `Busy`).
    fn restart_copies<E: Env>(&mut self, link: &mut Link<E>, id: u64, job: &mut Job) {
        log::debug!("write-back of {}: pages under it torn down, again", job.ino);
        let mut private = self
            .cache()
            .map(|c| c.private_pages(job.ino))
            .unwrap_or_default();
        private.retain(|k| k.idx < job.below);
        if private.is_empty() {
            return;
        }
        match self.start_copies(link, id, (job.ino, job.gen), &private, job.size) {
            Ok(c) => job.copies = Some(c),
            Err(e) => job.err = Some(e),
        }
    }

    /// Take in the private copies' answers and apply the copies jobs they
    /// complete.
    fn copies_answered<E: Env>(&mut self, link: &mut Link<E>) {
        self.wb.copies.take_answers(link);
        while let Some(job) = self.wb.copies.pop_complete() {
            self.apply_copies(job);
        }
    }

    /// Wait for every private copy's write in flight and apply it (before
    /// any other use of the write slot).
    pub(super) fn finish_copies<E: Env>(&mut self, link: &mut Link<E>) {
        if !self.wb.copies.busy() {
            return;
        }
        let mut q = core::mem::take(&mut self.wb.copies);
        let mut jobs = Vec::new();
        q.finish(link, self, |job| jobs.push(job));
        self.wb.copies = q;
        for job in jobs {
            self.apply_copies(job);
        }
    }

    /// A copies job's answers: each written copy whose claim held is
    /// forgotten (the next access maps the reconciled single copy); a
    /// failed write leaves its copies.
    fn apply_copies(&mut self, job: CopiesJob) {
        let Some(id) = self.wb.copies_of.remove(&job.id) else {
            return;
        };
        let mut err = None;
        for w in &job.writes {
            if let Some(e) = w.pieces.iter().find_map(|p| p.written().err()) {
                if e != Errno::Busy {
                    log::warn!("write-back of inode {} at page {}: {e:?}", job.ino, w.first);
                }
                // Any other error outranks `Busy` (sent again).
                if err.is_none_or(|x| x == Errno::Busy) {
                    err = Some(e);
                }
                continue;
            }
            if let Some(c) = self.coh.as_mut() {
                for k in 0..w.n as u64 {
                    let key = PageKey {
                        ino: job.ino,
                        idx: w.first + k,
                    };
                    if c.cache.cleaned_by(&key, id) {
                        c.cache.count_writeback();
                        c.written.remove(&key);
                    }
                }
            }
        }
        self.wb.copies_done.insert(job.id, err.map_or(Ok(()), Err));
    }

    /// Jobs started, the most in flight together, pages sent.
    pub(super) fn wb_counts(&self) -> (u64, usize, u64) {
        self.wb.counts()
    }
}
