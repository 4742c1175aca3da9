//! File-server writes in flight for tasks' write-backs, the engine shared
//! by `private` and `net` mode's dirty pages (`private/inflight.rs`) and
//! relaxed mode's private copies (`singlecopy/inflight.rs`): jobs of
//! writes, each a run of contiguous pages of one file whose bytes the job
//! took when it started, sent as the pieces of it this node wrote (as a
//! synchronous write-back, `crate::dirty::Run`).
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
use crate::dirty::Run;
use crate::env::Env;

/// The bulk slot the writes go through.
pub const SLOT: u32 = 2;

/// The session [`WriteJobs::pump`] sends with: the write-backs' owners
/// have nothing to service while they send (and `pump` borrows them).
struct NoSession;

impl<E: Env> Session<E> for NoSession {}

/// One run of a job: pages `[first, first + n)` of the job's file,
/// written as its pieces (the bytes this node wrote, `crate::dirty`).
#[derive(Debug)]
pub struct Write {
    /// First page and number of pages.
    pub first: u64,
    pub n: usize,
    /// Bytes of the run (0: the pages were wholly past the end).
    pub len: usize,
    /// One file-server write each; none if nothing is to be sent.
    pub pieces: Vec<Piece>,
}

/// One file-server write of a run.
#[derive(Debug)]
pub struct Piece {
    /// Byte offset in the file.
    offset: u64,
    /// The bytes, until sent.
    data: Option<Vec<u8>>,
    /// Its call, once sent.
    tag: Option<u32>,
    /// Bytes.
    pub len: usize,
    /// The directory's answer, once in (or why none will come).
    pub answer: Option<Result<Response, Errno>>,
}

impl Piece {
    /// The file's attributes after this write, or why it failed
    /// ([`crate::dirty::written`]).
    pub fn written(&self) -> Result<&fabric::proto::Attr, Errno> {
        match &self.answer {
            Some(Ok(r)) => crate::dirty::written(Some(r), self.len),
            Some(Err(e)) => Err(*e),
            None => Err(Errno::Io),
        }
    }
}

impl Write {
    /// Every piece answered (a run with nothing to send is).
    fn answered(&self) -> bool {
        self.pieces.iter().all(|p| p.answer.is_some())
    }
}

/// One task's write-back in flight.
#[derive(Debug)]
pub struct Job {
    pub id: u64,
    pub ino: u64,
    /// The generation of `ino` the bytes were written to (see
    /// [`crate::link::WriteReq::gen`]).
    pub gen: u64,
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

    /// Start job [`WriteJobs::next_id`] of generation `gen` of `ino`:
    /// `runs` in page order, each sent as its pieces (a run without any,
    /// such as pages wholly past the end, needs no write). Its id.
    pub fn push<E: Env>(
        &mut self,
        link: &mut Link<E>,
        (ino, gen): (u64, u64),
        runs: Vec<Run>,
    ) -> u64 {
        let id = self.next_id();
        let writes = runs
            .into_iter()
            .map(|run| Write {
                first: run.first,
                n: run.n,
                len: run.data.len(),
                pieces: run
                    .pieces
                    .iter()
                    .map(|p| Piece {
                        offset: run.offset(p),
                        data: Some(run.data[p.clone()].to_vec()),
                        tag: None,
                        len: p.len(),
                        answer: None,
                    })
                    .collect(),
            })
            .collect();
        self.next_id = id;
        self.jobs.push_back(Job {
            id,
            ino,
            gen,
            writes,
        });
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
            let ino = job.ino;
            let pieces = job.writes.iter_mut().flat_map(|w| w.pieces.iter_mut());
            for p in pieces.filter(|p| p.answer.is_none()) {
                if let Some(tag) = p.tag {
                    p.answer = link.poll_call(tag, Op::Write);
                    if p.answer.is_some() {
                        self.unanswered -= 1;
                    }
                    if matches!(p.answer, Some(Err(Errno::Unavailable))) {
                        link.doubt(ino); // sent, given up: it may land
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
            .is_some_and(|j| j.writes.iter().all(Write::answered));
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
            let (ino, gen) = (job.ino, job.gen);
            let pieces = job.writes.iter_mut().flat_map(|w| w.pieces.iter_mut());
            for p in pieces.filter(|p| p.data.is_some()) {
                let full = if net {
                    self.unanswered >= MAX_RING_READS
                } else {
                    cap > 0 && (self.slot_used + p.len > cap || self.writes >= MAX_RING_READS)
                };
                if full {
                    return; // in order: nothing overtakes this write
                }
                let Some(data) = p.data.take() else { continue };
                let at = if net { 0 } else { self.slot_used };
                let sent = link.bulk_write(SLOT, at, &data).and_then(|()| {
                    let req = Request::Data {
                        gen,
                        op: Op::Write,
                        slot: SLOT,
                        at: at as u32,
                        ino,
                        offset: p.offset,
                        len: data.len() as u32,
                    };
                    link.start_call(&req, &mut NoSession)
                });
                match sent {
                    Ok(tag) => {
                        p.tag = Some(tag);
                        self.slot_used += data.len();
                        self.writes += 1;
                        self.unanswered += 1;
                    }
                    // Not sent: its pages stay dirty.
                    Err(e) => p.answer = Some(Err(e)),
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
