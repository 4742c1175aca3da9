//! Write-backs in flight for tasks: a task's fsync, close or truncate
//! sends its file's dirty pages and yields, instead of waiting inside the
//! call (`private` mode on the rings, and `net` mode over its connection;
//! see [`Private::write_back_start`]).
//!
//! A job takes its pages' bytes when it starts. Its writes go out side by
//! side in the write slot (bulk slot 2), after the writes of the jobs
//! before it, as far as the slot has room (64 KiB, at most
//! [`MAX_RING_READS`] writes); the rest go out, in order, once every write
//! in the slot is answered ([`Private::pump`], run whenever answers are
//! taken in), so a write-back larger than the slot is in flight too, a
//! slot at a time. Several jobs (several tasks' fsyncs) are in flight
//! together; every other user of the slot (a synchronous write-back, a
//! write-through write) first waits for all of them
//! ([`Private::finish_in_flight`]). Answers are applied job by job in the
//! order the jobs were started, so our own writes still move a file's
//! version one by one ([`Private::learn_own_write`]).
//!
//! A page stays dirty (and cached) while its write is in flight. It turns
//! clean when the write is answered only if no write touched it since the
//! job took its bytes, and no later job took them again (`sent`): a page
//! written again meanwhile stays dirty for a later write-back, and one
//! that a later job sends is cleaned by that job's answer. A failed write
//! leaves its pages dirty.

use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;

use fabric::proto::{Errno, Op, Request, Response};

use super::{Private, PAGE};
use crate::env::Env;
use crate::link::{contiguous_runs, Link, Session, MAX_RING_READS};
use crate::vfs::{Meta, WbStart};

/// The bulk slot the writes go through.
const SLOT: u32 = 2;

/// The session [`Private::pump`] sends with: `Private` has nothing to
/// service (its session is the default), and `pump` borrows its fields.
struct NoSession;

impl<E: Env> Session<E> for NoSession {}

/// One write of a job: pages `[first, first + n)` of the job's file.
#[derive(Debug)]
struct Write {
    /// The bytes, until sent.
    data: Option<Vec<u8>>,
    /// Its call, once sent.
    tag: Option<u32>,
    first: u64,
    n: usize,
    /// Bytes sent (0: the pages were wholly past the end, nothing sent).
    len: usize,
    answer: Option<Result<Response, Errno>>,
}

/// One task's write-back in flight.
#[derive(Debug)]
struct Job {
    id: u64,
    ino: u64,
    writes: Vec<Write>,
}

/// The jobs in flight and what they hold.
#[derive(Debug, Default)]
pub(super) struct InFlight {
    /// In the order sent.
    jobs: VecDeque<Job>,
    next_id: u64,
    /// Results of jobs applied, until their task takes them.
    done: BTreeMap<u64, Result<(), Errno>>,
    /// Pages whose bytes a job in flight took and that no write touched
    /// since, with the last such job: only that job's answer may clean
    /// the page (an earlier job sent older bytes, or the same ones; if
    /// the last job fails, the page stays dirty).
    sent: BTreeMap<(u64, u64), u64>,
    /// Bytes of the write slot the writes sent hold, until all are
    /// answered.
    slot_used: usize,
    /// Writes sent into the slot since it was last empty.
    writes: usize,
    /// Writes sent and not answered yet.
    unanswered: usize,
    /// Jobs started, and the most in flight together.
    pub(super) started: u64,
    pub(super) max_jobs: usize,
}

impl InFlight {
    /// A write touched page `idx` of `ino`: if a job in flight took its
    /// bytes, they are not the latest any more.
    pub(super) fn touched(&mut self, ino: u64, idx: u64) {
        if !self.sent.is_empty() {
            self.sent.remove(&(ino, idx));
        }
    }

    /// Job `id` is answered for `key`: forget the page's entry if that
    /// job is the last that took its bytes (true: it may be cleaned).
    fn take(&mut self, key: (u64, u64), id: u64) -> bool {
        let last = self.sent.get(&key) == Some(&id);
        if last {
            self.sent.remove(&key);
        }
        last
    }

    /// Is anything in flight?
    pub(super) fn busy(&self) -> bool {
        !self.jobs.is_empty()
    }
}

impl Private {
    /// Start writing back `ino`'s dirty pages without waiting for the
    /// answers (a task's fsync, close or truncate);
    /// [`Private::write_back_poll`] says when they are in (`net` mode
    /// too: see [`Private::pump`]). Pages a job in flight is sending are sent
    /// again (a second fsync of the file must not be answered before its
    /// pages are written, and the first job may fail).
    pub(super) fn write_back_start<E: Env>(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        ino: u64,
    ) -> Result<WbStart, Errno> {
        let keys: Vec<(u64, u64)> = self
            .dirty
            .range((ino, 0)..=(ino, u64::MAX))
            .map(|(k, _)| *k)
            .collect();
        if keys.is_empty() {
            return Ok(WbStart::Done);
        }
        let cap = link.bulk_cap(SLOT)?;
        let id = self.inflight.next_id + 1;
        let mut writes = Vec::new();
        for r in contiguous_runs(&keys, (cap / PAGE).max(1), |&(ino, idx), n| (ino, idx + n)) {
            let first = keys[r.start].1;
            let data = self.run_bytes(meta, ino, first, r.len());
            for k in 0..r.len() as u64 {
                self.inflight.sent.insert((ino, first + k), id);
            }
            writes.push(Write {
                len: data.len(),
                // Wholly past the end (the file shrank): nothing to send.
                answer: data.is_empty().then_some(Ok(Response::Ok)),
                data: (!data.is_empty()).then_some(data),
                tag: None,
                first,
                n: r.len(),
            });
        }
        let f = &mut self.inflight;
        f.next_id = id;
        f.jobs.push_back(Job { id, ino, writes });
        f.started += 1;
        f.max_jobs = f.max_jobs.max(f.jobs.len());
        self.pump(link);
        Ok(WbStart::Started(id))
    }

    /// Take in the answers that came, send what waits for room, apply
    /// the jobs they complete (in the order the jobs started), and say
    /// whether job `id` is done: `None` while it (or a job before it)
    /// waits for an answer.
    pub(super) fn write_back_poll<E: Env>(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        id: u64,
    ) -> Option<Result<(), Errno>> {
        self.apply_answered(link, meta);
        if let Some(r) = self.inflight.done.remove(&id) {
            return Some(r);
        }
        if self.inflight.jobs.iter().any(|j| j.id == id) {
            None
        } else {
            Some(Err(Errno::Invalid)) // unknown, or taken already
        }
    }

    /// Wait for every job in flight and apply it (before any other use of
    /// the write slot, and before a synchronous write-back, which must
    /// come after them).
    pub(super) fn finish_in_flight<E: Env>(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
    ) -> Result<(), Errno> {
        loop {
            self.apply_answered(link, meta);
            if !self.inflight.busy() {
                return Ok(());
            }
            // Every write has its own give-up time (`poll_call`), so this
            // ends even if the directory never answers.
            link.wait_calls(self);
        }
    }

    /// Take in the answers that came, send what waits for room in the
    /// slot, and apply each job whose writes are all answered, front
    /// first.
    fn apply_answered<E: Env>(&mut self, link: &mut Link<E>, meta: &mut Meta) {
        loop {
            for job in self.inflight.jobs.iter_mut() {
                for w in job.writes.iter_mut().filter(|w| w.answer.is_none()) {
                    if let Some(tag) = w.tag {
                        w.answer = link.poll_call(tag, Op::Write);
                        if w.answer.is_some() {
                            self.inflight.unanswered -= 1;
                        }
                    }
                }
            }
            self.pump(link);
            let complete = self
                .inflight
                .jobs
                .front()
                .is_some_and(|j| j.writes.iter().all(|w| w.answer.is_some()));
            if !complete {
                return;
            }
            let Some(job) = self.inflight.jobs.pop_front() else {
                return;
            };
            let r = self.apply(meta, &job);
            self.inflight.done.insert(job.id, r);
            if !self.inflight.busy() {
                self.inflight.sent.clear();
            }
        }
    }

    /// Send the writes that wait, in the order their jobs started, as far
    /// as the slot has room (it is reused once every write in it is
    /// answered). `net` mode stages each write at the start of the slot,
    /// whose bytes go into the request's frame as it is started, so it
    /// only bounds the writes unanswered.
    fn pump<E: Env>(&mut self, link: &mut Link<E>) {
        let f = &mut self.inflight;
        if f.unanswered == 0 {
            f.slot_used = 0;
            f.writes = 0;
        }
        let net = !link.rings();
        // 0: no session; the sends below then fail.
        let cap = link.bulk_cap(SLOT).unwrap_or_default();
        for job in f.jobs.iter_mut() {
            let ino = job.ino;
            for w in job.writes.iter_mut().filter(|w| w.data.is_some()) {
                let full = if net {
                    f.unanswered >= MAX_RING_READS
                } else {
                    cap > 0 && (f.slot_used + w.len > cap || f.writes >= MAX_RING_READS)
                };
                if full {
                    return; // in order: nothing overtakes this write
                }
                let Some(data) = w.data.take() else { continue };
                let at = if net { 0 } else { f.slot_used };
                let sent = link.bulk_write(SLOT, at, &data).and_then(|()| {
                    let req = Request::Data {
                        op: Op::Write,
                        slot: SLOT,
                        at: at as u32,
                        ino,
                        offset: w.first * PAGE as u64,
                        len: data.len() as u32,
                    };
                    link.start_call(&req, &mut NoSession)
                });
                match sent {
                    Ok(tag) => {
                        w.tag = Some(tag);
                        f.slot_used += data.len();
                        f.writes += 1;
                        f.unanswered += 1;
                    }
                    // Not sent: its pages stay dirty.
                    Err(e) => w.answer = Some(Err(e)),
                }
            }
        }
    }

    /// A job's answers, in order: as the synchronous write-back does,
    /// except that a page written since it was sent stays dirty.
    fn apply(&mut self, meta: &mut Meta, job: &Job) -> Result<(), Errno> {
        let (ino, id) = (job.ino, job.id);
        let mut err = None;
        for w in &job.writes {
            if w.len > 0 {
                match &w.answer {
                    Some(Ok(Response::Data { bytes, attr })) if *bytes as usize >= w.len => {
                        self.learn_own_write(meta, attr);
                        self.written_back += w.len.div_ceil(PAGE) as u64;
                    }
                    Some(Err(e)) => {
                        err.get_or_insert(*e);
                        self.unsend(ino, id, w);
                        continue;
                    }
                    _ => {
                        err.get_or_insert(Errno::Io);
                        self.unsend(ino, id, w);
                        continue;
                    }
                }
            }
            for k in 0..w.n as u64 {
                if self.inflight.take((ino, w.first + k), id) {
                    self.mark_clean(ino, w.first + k);
                }
            }
        }
        if !self.dirty.range((ino, 0)..=(ino, u64::MAX)).any(|_| true) {
            meta.clear_local_size(ino);
        }
        err.map_or(Ok(()), Err)
    }

    /// A write of job `id` that failed: its pages stay dirty.
    fn unsend(&mut self, ino: u64, id: u64, w: &Write) {
        for k in 0..w.n as u64 {
            self.inflight.take((ino, w.first + k), id);
        }
    }
}
