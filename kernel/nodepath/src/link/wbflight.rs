//! File-server writes in flight for tasks' write-backs, the engine shared
//! by `private` and `net` mode's dirty pages (`private/inflight.rs`) and
//! relaxed mode's private copies (`singlecopy/inflight.rs`): jobs of
//! writes, each a run of contiguous pages of one file whose bytes the job
//! took when it started.
//!
//! On the rings a job's writes go out side by side in the write slot (bulk
//! slot 2), after the writes of the jobs before it, as far as the slot has
//! room (64 KiB, at most [`MAX_RING_READS`] writes); the rest go out, in
//! order, once every write in the slot is answered ([`WriteJobs::pump`]),
//! so a write-back larger than the slot is in flight too, a slot at a
//! time. In `net` mode each write is staged at the start of the slot and
//! copied into its frame as it is started, so only the writes unanswered
//! are bounded. Nothing overtakes: a later job may carry newer bytes of
//! the same page. Jobs complete in the order they started
//! ([`WriteJobs::pop_complete`]); what an answer means for the pages is
//! the caller's (which pages to clean).
//!
//! Every other user of the write slot must first wait for every job
//! (each user's `finish_in_flight`).

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use fabric::proto::{Errno, Op, Request, Response};

use super::{Link, Session, MAX_RING_READS};
use crate::env::Env;

/// The bulk slot the writes go through.
pub const SLOT: u32 = 2;

/// The session [`WriteJobs::pump`] sends with: the write-backs' owners
/// have nothing to service while they send (and `pump` borrows them).
struct NoSession;

impl<E: Env> Session<E> for NoSession {}

/// One write of a job: pages `[first, first + n)` of the job's file.
#[derive(Debug)]
pub struct Write {
    /// The bytes, until sent.
    data: Option<Vec<u8>>,
    /// Its call, once sent.
    tag: Option<u32>,
    /// First page and number of pages.
    pub first: u64,
    pub n: usize,
    /// Bytes sent (0: the pages were wholly past the end, nothing sent).
    pub len: usize,
    /// The directory's answer, once in (or why none will come).
    pub answer: Option<Result<Response, Errno>>,
}

/// One task's write-back in flight.
#[derive(Debug)]
pub struct Job {
    pub id: u64,
    pub ino: u64,
    pub writes: Vec<Write>,
}

/// The jobs in flight and the write slot they hold.
#[derive(Debug, Default)]
pub struct WriteJobs {
    /// In the order started.
    jobs: VecDeque<Job>,
    next_id: u64,
    /// Bytes of the write slot the writes sent hold, until all are
    /// answered.
    slot_used: usize,
    /// Writes sent into the slot since it was last empty.
    writes: usize,
    /// Writes sent and not answered yet.
    unanswered: usize,
    /// Jobs started, and the most in flight together.
    pub started: u64,
    pub max_jobs: usize,
}

impl WriteJobs {
    /// The id the next job will have (ids start at 1).
    pub fn next_id(&self) -> u64 {
        self.next_id + 1
    }

    /// Start job [`WriteJobs::next_id`] of `ino`: `runs` are (first page,
    /// pages, bytes) in page order; empty bytes (pages wholly past the
    /// end) need no write. Its id.
    pub fn push<E: Env>(
        &mut self,
        link: &mut Link<E>,
        ino: u64,
        runs: Vec<(u64, usize, Vec<u8>)>,
    ) -> u64 {
        let id = self.next_id();
        let writes = runs
            .into_iter()
            .map(|(first, n, data)| Write {
                len: data.len(),
                answer: data.is_empty().then_some(Ok(Response::Ok)),
                data: (!data.is_empty()).then_some(data),
                tag: None,
                first,
                n,
            })
            .collect();
        self.next_id = id;
        self.jobs.push_back(Job { id, ino, writes });
        self.started += 1;
        self.max_jobs = self.max_jobs.max(self.jobs.len());
        self.pump(link);
        id
    }

    /// Is anything in flight?
    pub fn busy(&self) -> bool {
        !self.jobs.is_empty()
    }

    /// Is job `id` still in flight?
    pub fn has(&self, id: u64) -> bool {
        self.jobs.iter().any(|j| j.id == id)
    }

    /// Take in the answers that came and send what waits for room.
    pub fn take_answers<E: Env>(&mut self, link: &mut Link<E>) {
        for job in self.jobs.iter_mut() {
            for w in job.writes.iter_mut().filter(|w| w.answer.is_none()) {
                if let Some(tag) = w.tag {
                    w.answer = link.poll_call(tag, Op::Write);
                    if w.answer.is_some() {
                        self.unanswered -= 1;
                    }
                }
            }
        }
        self.pump(link);
    }

    /// The oldest job, if every write of it is answered.
    pub fn pop_complete(&mut self) -> Option<Job> {
        let complete = self
            .jobs
            .front()
            .is_some_and(|j| j.writes.iter().all(|w| w.answer.is_some()));
        if complete {
            self.jobs.pop_front()
        } else {
            None
        }
    }

    /// Send the writes that wait, in the order their jobs started, as far
    /// as the slot has room (it is reused once every write in it is
    /// answered); in `net` mode as far as [`MAX_RING_READS`] unanswered.
    pub fn pump<E: Env>(&mut self, link: &mut Link<E>) {
        if self.unanswered == 0 {
            self.slot_used = 0;
            self.writes = 0;
        }
        let net = !link.rings();
        // 0: no session; the sends below then fail.
        let cap = link.bulk_cap(SLOT).unwrap_or_default();
        for job in self.jobs.iter_mut() {
            let ino = job.ino;
            for w in job.writes.iter_mut().filter(|w| w.data.is_some()) {
                let full = if net {
                    self.unanswered >= MAX_RING_READS
                } else {
                    cap > 0 && (self.slot_used + w.len > cap || self.writes >= MAX_RING_READS)
                };
                if full {
                    return; // in order: nothing overtakes this write
                }
                let Some(data) = w.data.take() else { continue };
                let at = if net { 0 } else { self.slot_used };
                let sent = link.bulk_write(SLOT, at, &data).and_then(|()| {
                    let req = Request::Data {
                        gen: 0,
                        op: Op::Write,
                        slot: SLOT,
                        at: at as u32,
                        ino,
                        offset: w.first * fabric::PAGE_SIZE as u64,
                        len: data.len() as u32,
                    };
                    link.start_call(&req, &mut NoSession)
                });
                match sent {
                    Ok(tag) => {
                        w.tag = Some(tag);
                        self.slot_used += data.len();
                        self.writes += 1;
                        self.unanswered += 1;
                    }
                    // Not sent: its pages stay dirty.
                    Err(e) => w.answer = Some(Err(e)),
                }
            }
        }
    }

    /// Wait for every job in flight and hand each, oldest first, to
    /// `apply` (before any other use of the write slot).
    pub fn finish<E: Env>(
        &mut self,
        link: &mut Link<E>,
        svc: &mut dyn Session<E>,
        mut apply: impl FnMut(Job),
    ) {
        loop {
            self.take_answers(link);
            while let Some(job) = self.pop_complete() {
                apply(job);
            }
            if !self.busy() {
                return;
            }
            // Every write has its own give-up time (`poll_call`), so this
            // ends even if the directory never answers.
            link.wait_calls(svc);
        }
    }
}
