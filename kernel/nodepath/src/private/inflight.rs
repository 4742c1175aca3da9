//! Write-backs in flight for tasks: a task's fsync, close or truncate
//! sends its file's dirty pages and yields, instead of waiting inside the
//! call (`private` mode on the rings, and `net` mode over its connection;
//! see [`Private::write_back_start`]). The writes go out through
//! [`WriteJobs`] (`link/wbflight.rs`: side by side in the write slot, in
//! job order, a slot at a time); every other user of the slot (a
//! synchronous write-back, a write-through write) first waits for all of
//! them ([`Private::finish_in_flight`]). Answers are applied job by job in
//! the order the jobs were started, so our own writes still move a file's
//! version one by one ([`Private::learn_own_write`]).
//!
//! A page stays dirty (and cached) while its write is in flight. It turns
//! clean when the write is answered only if no write touched it since the
//! job took its bytes, and no later job took them again (`sent`): a page
//! written again meanwhile stays dirty for a later write-back, and one
//! that a later job sends is cleaned by that job's answer. A failed write
//! leaves its pages dirty.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use fabric::proto::Errno;

use super::{Private, PAGE};
use crate::dirty::{drops_unwritten, Run};
use crate::env::Env;
use crate::link::wbflight::{Job, Write, WriteJobs, SLOT};
use crate::link::Link;
use crate::vfs::{Meta, WbStart};

/// The jobs in flight and what they hold.
#[derive(Debug, Default)]
pub(super) struct InFlight {
    /// The writes.
    pub(super) q: WriteJobs,
    /// Results of jobs applied, until their task takes them.
    done: BTreeMap<u64, Result<(), Errno>>,
    /// Pages whose bytes a job in flight took and that no write touched
    /// since, with the last such job: only that job's answer may clean
    /// the page (an earlier job sent older bytes, or the same ones; if
    /// the last job fails, the page stays dirty).
    sent: BTreeMap<(u64, u64), u64>,
}

impl InFlight {
    /// Is a job in flight sending page `k`?
    pub(super) fn sending(&self, k: &(u64, u64)) -> bool {
        self.sent.contains_key(k)
    }

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
}

impl Private {
    /// Start writing back `ino`'s dirty pages without waiting for the
    /// answers (a task's fsync, close or truncate);
    /// [`Private::write_back_poll`] says when they are in. Pages a job in
    /// flight is sending are sent again (a second fsync of the file must
    /// not be answered before its pages are written, and the first job
    /// may fail).
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
        self.write_back_keys(link, meta, ino, &keys)
    }

    /// [`Private::write_back_start`] of the dirty pages `keys` of `ino`
    /// (sorted), as one job.
    pub(super) fn write_back_keys<E: Env>(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        ino: u64,
        keys: &[(u64, u64)],
    ) -> Result<WbStart, Errno> {
        if keys.is_empty() {
            return Ok(WbStart::Done);
        }
        let cap = link.bulk_cap(SLOT)?;
        let id = self.inflight.q.next_id();
        let runs: Vec<Run> = self
            .runs(meta, keys, (cap / PAGE).max(1))
            .into_iter()
            .map(|(_, run)| run)
            .collect();
        for run in &runs {
            for k in 0..run.n as u64 {
                self.inflight.sent.insert((ino, run.first + k), id);
            }
        }
        let pushed = self.inflight.q.push(link, (ino, meta.gen(ino)), runs);
        debug_assert_eq!(pushed, id);
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
        if self.inflight.q.has(id) {
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
        let mut q = core::mem::take(&mut self.inflight.q);
        let mut jobs = Vec::new();
        q.finish(link, self, |job| jobs.push(job));
        self.inflight.q = q;
        for job in jobs {
            self.apply_job(meta, job);
        }
        self.inflight.sent.clear(); // nothing in flight
        Ok(())
    }

    /// Take in the answers that came, send what waits for room in the
    /// slot, and apply each job whose writes are all answered, front
    /// first.
    pub(super) fn apply_answered<E: Env>(&mut self, link: &mut Link<E>, meta: &mut Meta) {
        self.inflight.q.take_answers(link);
        while let Some(job) = self.inflight.q.pop_complete() {
            self.apply_job(meta, job);
        }
        if !self.inflight.q.busy() {
            self.inflight.sent.clear();
        }
    }

    /// Apply `job` and keep its result for its task (a job that makes
    /// room for tasks' writes settles their tickets instead).
    fn apply_job(&mut self, meta: &mut Meta, job: Job) {
        // A task's close, fsync or truncate reports its job's failure: what
        // it could not write goes (as `Private::reported`). Room jobs'
        // pages stay dirty for the file's close to write.
        let reported = !self.room.contains(&job.id);
        let r = self.apply(meta, &job, reported);
        if !self.room_job_done(job.id) {
            self.inflight.done.insert(job.id, r);
        }
    }

    /// A job's answers, in order: as the synchronous write-back does,
    /// except that a page written since it was sent stays dirty. A failed
    /// write's pages stay dirty too unless the failure is `reported` and
    /// loses them ([`drops_unwritten`]): then they go, with the size they
    /// extended the file to.
    fn apply(&mut self, meta: &mut Meta, job: &Job, reported: bool) -> Result<(), Errno> {
        let (ino, id) = (job.ino, job.id);
        let mut err = None;
        for w in &job.writes {
            let mut failed = None;
            for p in &w.pieces {
                match p.written() {
                    Ok(attr) => self.learn_own_write(meta, attr),
                    Err(e) => {
                        err.get_or_insert(e);
                        failed.get_or_insert(e);
                    }
                }
            }
            if let Some(e) = failed {
                self.unsend(ino, id, w, reported && drops_unwritten(e));
                continue;
            }
            self.written_back += w.len.div_ceil(PAGE) as u64;
            for k in 0..w.n as u64 {
                if self.inflight.take((ino, w.first + k), id) {
                    self.clean_written(ino, w.first + k);
                }
            }
        }
        if !self.dirty.range((ino, 0)..=(ino, u64::MAX)).any(|_| true) {
            match err {
                Some(e) if reported && drops_unwritten(e) => {
                    log::warn!(
                        "write-back of inode {ino} failed ({e:?}): its unwritten pages dropped"
                    );
                    meta.forget_local_size(ino);
                }
                _ => meta.clear_local_size(ino),
            }
        }
        err.map_or(Ok(()), Err)
    }

    /// A write of job `id` that failed: its pages stay dirty, or go if
    /// `drop` (those no later write or job took again).
    fn unsend(&mut self, ino: u64, id: u64, w: &Write, drop: bool) {
        for k in 0..w.n as u64 {
            let idx = w.first + k;
            if self.inflight.take((ino, idx), id) && drop {
                self.mark_clean(ino, idx);
                self.forget_page(ino, idx);
            }
        }
    }
}
