//! Write-backs in flight for tasks: a task's fsync, close or truncate
//! sends its file's dirty pages and yields, instead of waiting inside the
//! call (`private` mode on the rings; see [`Private::write_back_start`]).
//!
//! A job's writes sit side by side in the write slot (bulk slot 2), after
//! the writes of the jobs before it, until the directory answers them.
//! Several jobs (several tasks' fsyncs) are in flight together while the
//! slot has room; every other user of the slot (a synchronous write-back,
//! a write-through write) first waits for all of them
//! ([`Private::finish_in_flight`]). Answers are applied job by job in the
//! order the jobs were sent, so our own writes still move a file's
//! version one by one ([`Private::learn_own_write`]).
//!
//! A page stays dirty (and cached) while its write is in flight. It turns
//! clean when the write is answered only if no write touched it since the
//! job took its bytes (`sent`): a page written again meanwhile stays dirty
//! for a later write-back. A failed write leaves its pages dirty.

use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::vec::Vec;

use fabric::proto::{Errno, Op, Request, Response};

use super::{Private, PAGE};
use crate::env::Env;
use crate::link::{contiguous_runs, Link, MAX_RING_READS};
use crate::vfs::{Meta, WbStart};

/// The bulk slot the writes go through.
const SLOT: u32 = 2;

/// One write of a job: pages `[first, first + n)` of the job's file.
#[derive(Debug)]
struct Write {
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
    /// since.
    sent: BTreeSet<(u64, u64)>,
    /// Bytes of the write slot the jobs in flight hold.
    slot_used: usize,
    /// Writes in flight.
    writes: usize,
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

    /// Is anything in flight?
    pub(super) fn busy(&self) -> bool {
        !self.jobs.is_empty()
    }
}

impl Private {
    /// Start writing back `ino`'s dirty pages without waiting for the
    /// answers (a task's fsync, close or truncate);
    /// [`Private::write_back_poll`] says when they are in. Falls back to
    /// the synchronous write-back (and answers [`WbStart::Done`]) where
    /// nothing can stay in flight: `net` mode, or more dirty data than the
    /// write slot holds. Pages a job in flight is sending are sent again
    /// (a second fsync of the file must not be answered before its pages
    /// are written, and the first job may fail).
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
        if !link.rings() {
            self.write_back(link, meta, &keys)?;
            return Ok(WbStart::Done);
        }
        let cap = link.bulk_cap(SLOT)?;
        let mut runs: Vec<(u64, usize, Vec<u8>)> = Vec::new();
        for r in contiguous_runs(&keys, (cap / PAGE).max(1), |&(ino, idx), n| (ino, idx + n)) {
            let first = keys[r.start].1;
            runs.push((first, r.len(), self.run_bytes(meta, ino, first, r.len())));
        }
        let bytes: usize = runs.iter().map(|r| r.2.len()).sum();
        let sends = runs.iter().filter(|r| !r.2.is_empty()).count();
        if bytes > cap || sends > MAX_RING_READS {
            self.write_back(link, meta, &keys)?;
            return Ok(WbStart::Done);
        }
        if self.inflight.slot_used + bytes > cap || self.inflight.writes + sends > MAX_RING_READS {
            // No room beside the jobs in flight: let them finish first.
            self.finish_in_flight(link, meta)?;
        }
        let mut writes = Vec::with_capacity(runs.len());
        for (first, n, data) in runs {
            let mut w = Write {
                tag: None,
                first,
                n,
                len: data.len(),
                answer: None,
            };
            if data.is_empty() {
                // Wholly past the end (the file shrank): nothing to send.
                w.answer = Some(Ok(Response::Ok));
            } else {
                let at = self.inflight.slot_used;
                let sent = link.bulk_write(SLOT, at, &data).and_then(|()| {
                    let req = Request::Data {
                        op: Op::Write,
                        slot: SLOT,
                        at: at as u32,
                        ino,
                        offset: first * PAGE as u64,
                        len: data.len() as u32,
                    };
                    link.start_call(&req, self)
                });
                match sent {
                    Ok(tag) => {
                        w.tag = Some(tag);
                        self.inflight.slot_used += data.len();
                        self.inflight.writes += 1;
                    }
                    // Not sent: its pages stay dirty.
                    Err(e) => w.answer = Some(Err(e)),
                }
            }
            if !matches!(w.answer, Some(Err(_))) {
                for k in 0..n as u64 {
                    self.inflight.sent.insert((ino, first + k));
                }
            }
            writes.push(w);
        }
        let f = &mut self.inflight;
        f.next_id += 1;
        let id = f.next_id;
        f.jobs.push_back(Job { id, ino, writes });
        f.started += 1;
        f.max_jobs = f.max_jobs.max(f.jobs.len());
        Ok(WbStart::Started(id))
    }

    /// Take in the answers that came, apply the jobs they complete (in
    /// the order sent), and say whether job `id` is done: `None` while it
    /// (or a job before it) waits for an answer.
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

    /// Poll the front jobs' writes; apply each job whose writes are all
    /// answered, front first.
    fn apply_answered<E: Env>(&mut self, link: &mut Link<E>, meta: &mut Meta) {
        while let Some(job) = self.inflight.jobs.front_mut() {
            for w in job.writes.iter_mut().filter(|w| w.answer.is_none()) {
                w.answer = match w.tag {
                    Some(tag) => link.poll_call(tag, Op::Write),
                    None => Some(Err(Errno::Io)), // not sent (not reached)
                };
            }
            if job.writes.iter().any(|w| w.answer.is_none()) {
                return;
            }
            let Some(job) = self.inflight.jobs.pop_front() else {
                return;
            };
            let r = self.apply(meta, job.ino, &job.writes);
            self.inflight.done.insert(job.id, r);
            if !self.inflight.busy() {
                self.inflight.slot_used = 0;
                self.inflight.writes = 0;
                self.inflight.sent.clear();
            }
        }
    }

    /// A job's answers, in order: as the synchronous write-back does,
    /// except that a page written since it was sent stays dirty.
    fn apply(&mut self, meta: &mut Meta, ino: u64, writes: &[Write]) -> Result<(), Errno> {
        let mut err = None;
        for w in writes {
            if w.len > 0 {
                match &w.answer {
                    Some(Ok(Response::Data { bytes, attr })) if *bytes as usize >= w.len => {
                        self.learn_own_write(meta, attr);
                        self.written_back += w.len.div_ceil(PAGE) as u64;
                    }
                    Some(Err(e)) => {
                        err.get_or_insert(*e);
                        self.unsend(ino, w);
                        continue;
                    }
                    _ => {
                        err.get_or_insert(Errno::Io);
                        self.unsend(ino, w);
                        continue;
                    }
                }
            }
            for k in 0..w.n as u64 {
                if self.inflight.sent.remove(&(ino, w.first + k)) {
                    self.mark_clean(ino, w.first + k);
                }
            }
        }
        if !self.dirty.range((ino, 0)..=(ino, u64::MAX)).any(|_| true) {
            meta.clear_local_size(ino);
        }
        err.map_or(Ok(()), Err)
    }

    /// A write that failed: its pages stay dirty.
    fn unsend(&mut self, ino: u64, w: &Write) {
        for k in 0..w.n as u64 {
            self.inflight.sent.remove(&(ino, w.first + k));
        }
    }
}
