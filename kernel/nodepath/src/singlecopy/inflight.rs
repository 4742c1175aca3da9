//! A task's fsync in the single-copy modes without waiting inside the
//! call: the WRITEBACK page requests of the file's dirty frames (own or
//! mapped) go out as calls nobody blocks on ([`Link::start_call`]), up to
//! [`BATCH`] in flight per job, and the task yields; its poll applies the
//! answers as they come. Each page sent is claimed by the job
//! (`pagecache/slots.rs`): a store into the page meanwhile (or any change
//! of its slot) drops the claim, so the answer leaves that page dirty for
//! the next write-back instead of marking clean bytes the directory may not
//! have copied. A failed or unanswered WRITEBACK leaves its page dirty and
//! the job's result is the first error.
//!
//! Only frames: a file with relaxed private copies (written back through
//! the storage server's write slot) is written back synchronously, as
//! before, and so are close and truncate (their single-copy work is the
//! private copies only).

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use fabric::proto::{op_of, Errno, PageKey, PageReply, PageReq, Request, Response};

use super::{ScState, BATCH};
use crate::env::Env;
use crate::link::Link;

/// One task's write-back of one file's dirty frames.
#[derive(Debug)]
struct Job {
    /// Pages not sent yet.
    todo: Vec<PageKey>,
    /// Pages whose WRITEBACK is in flight, with its call's tag.
    flying: Vec<(PageKey, u32)>,
    /// The first error (the job stops sending and ends when the rest
    /// answered).
    err: Option<Errno>,
}

/// The write-back jobs of this node's tasks.
#[derive(Debug, Default)]
pub struct WbJobs {
    next: u64,
    jobs: BTreeMap<u64, Job>,
    /// Jobs started and pages sent, since boot; most jobs in flight.
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
    /// Start writing back `ino`'s dirty frames without waiting; `None` if
    /// none is dirty (nothing to wait for). Dirty mappings dropped with
    /// their DROP unanswered are settled first, synchronously, as the
    /// synchronous write-back does.
    pub(super) fn write_back_start_frames<E: Env>(
        &mut self,
        jobs: &mut WbJobs,
        link: &mut Link<E>,
        ino: u64,
    ) -> Result<Option<u64>, Errno> {
        self.flush_drops(link)?;
        let dirty = self.cache().map(|c| c.dirty_pages(ino)).unwrap_or_default();
        if dirty.is_empty() {
            return Ok(None);
        }
        let id = jobs.next;
        jobs.next += 1;
        jobs.started += 1;
        let mut job = Job {
            todo: dirty,
            flying: Vec::new(),
            err: None,
        };
        // Sent in page order: `todo` is popped from the back.
        job.todo.reverse();
        self.pump(jobs, link, id, &mut job);
        jobs.jobs.insert(id, job);
        jobs.max = jobs.max.max(jobs.jobs.len());
        Ok(Some(id))
    }

    /// Send `job`'s next pages while it has fewer than [`BATCH`] in flight.
    fn pump<E: Env>(&mut self, jobs: &mut WbJobs, link: &mut Link<E>, id: u64, job: &mut Job) {
        while job.err.is_none() && job.flying.len() < BATCH {
            let Some(key) = job.todo.pop() else { break };
            // Claimed before it is sent: a store after this point keeps it
            // dirty. A page cleaned meanwhile needs no write-back.
            if !self.cache().is_some_and(|c| c.claim_writeback(key, id)) {
                continue;
            }
            match link.start_call(&writeback(key), self) {
                Ok(tag) => {
                    jobs.sent += 1;
                    job.flying.push((key, tag));
                }
                Err(e) => job.err = Some(e),
            }
        }
    }

    /// Apply what came of job `id`; its result once every page answered.
    pub(super) fn write_back_poll_frames<E: Env>(
        &mut self,
        jobs: &mut WbJobs,
        link: &mut Link<E>,
        id: u64,
    ) -> Option<Result<(), Errno>> {
        let Some(mut job) = jobs.jobs.remove(&id) else {
            return Some(Err(Errno::Invalid));
        };
        let req = writeback(PageKey { ino: 0, idx: 0 });
        let op = op_of(&req);
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
        self.pump(jobs, link, id, &mut job);
        if !job.flying.is_empty() || (job.err.is_none() && !job.todo.is_empty()) {
            jobs.jobs.insert(id, job);
            return None;
        }
        if let Some(c) = self.cache() {
            c.release_claims(id);
        }
        Some(job.err.map_or(Ok(()), Err))
    }
}
