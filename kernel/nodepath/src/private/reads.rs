//! Tasks' reads in flight one by one (`private` mode, and `net` mode
//! over its connection): each
//! task's I/O runs as soon as its own pages are in, not when the slowest
//! read of its flush is (see `crate::tickets` and, for the single-copy
//! modes, `singlecopy/reads.rs`).
//!
//! A missing page goes out in a file-server read (contiguous missing
//! pages of one file in one read) sent as a call nobody blocks on
//! ([`Link::start_call`]). Its data lands in a sub-slot of bulk slot 1
//! that the read holds until its answer is taken in: reads in flight sit
//! side by side in the slot, at most `ring_reads` of them. In `net` mode
//! a read's data comes in its answer's frame, which the connection keeps
//! until the answer is taken (then it is at the start of the local slot
//! 1, copied out at once): no sub-slots there. Every
//! synchronous user of slot 1 (a read miss, a batch's prefetch) first
//! waits for them all ([`Private::settle_reads`]).
//!
//! An answer fills only pages that are still absent: a page written (or
//! filled) meanwhile keeps the newer bytes. It is not installed at all,
//! nor its attributes learned, if the file's cached metadata moved since
//! the read went out (another answer or call taught us something newer),
//! or if the file's pages were dropped meanwhile (a truncate, an unlink,
//! a new version, `cache drop`): its tickets finish, and each I/O's own
//! read fetches its pages again. A read given up unanswered keeps its
//! sub-slot until the session ends (its answer may still land there).

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::vec;
use alloc::vec::Vec;

use fabric::proto::{Errno, Op, Request, Response};

use super::{Private, PAGE};
use crate::env::Env;
use crate::link::Link;
use crate::tickets::{Stuck, TicketDone, Tickets};
use crate::vfs::Meta;

/// Most pages of one read.
const MAX_RUN: usize = 16;

/// One read in flight.
#[derive(Debug, Clone, Copy)]
struct Flight {
    ino: u64,
    first: u64,
    n: usize,
    /// First 4 KiB unit of slot 1 it holds (on the rings; `net` mode:
    /// `None`, its data comes in the answer's frame and is put at the
    /// start of the node's local slot 1 when the answer is taken).
    unit: Option<usize>,
    /// [`ReadJobs::gen`] when it went out.
    gen: u64,
    /// The file's cached (version, size) when it went out.
    meta: Option<(u64, u64)>,
}

/// The reads of this node's tasks.
#[derive(Debug, Default)]
pub(super) struct ReadJobs {
    pub(super) tickets: Tickets<(u64, u64)>,
    /// Reads in flight, by call tag.
    flying: BTreeMap<u32, Flight>,
    /// Pages in flight, with their read's tag.
    paged: BTreeMap<(u64, u64), u32>,
    /// Pages to read on the next poll.
    todo: BTreeSet<(u64, u64)>,
    /// Units of slot 1: held by a read in flight (or lost to one given
    /// up unanswered).
    used: Vec<bool>,
    /// Bumped whenever reads in flight are voided; a read is voided if
    /// its file's (or every file's) void came after it went out.
    gen: u64,
    voided: BTreeMap<u64, u64>,
    void_all: u64,
    /// Reads sent, most in flight together (since boot).
    sent: u64,
    max: usize,
    /// Pages waiting with nothing in flight, since when.
    stuck: Stuck,
}

impl ReadJobs {
    fn voided(&self, f: &Flight) -> bool {
        self.void_all > f.gen || self.voided.get(&f.ino).is_some_and(|&g| g > f.gen)
    }

    /// A free run of `n` units (first fit).
    fn alloc(&mut self, n: usize) -> Option<usize> {
        let mut run = 0;
        for i in 0..self.used.len() {
            run = if self.used[i] { 0 } else { run + 1 };
            if run == n {
                let at = i + 1 - n;
                self.used[at..=i].iter_mut().for_each(|u| *u = true);
                return Some(at);
            }
        }
        None
    }

    fn free(&mut self, unit: Option<usize>, n: usize) {
        let Some(unit) = unit else { return };
        if let Some(u) = self.used.get_mut(unit..unit + n) {
            u.iter_mut().for_each(|u| *u = false);
        }
    }

    /// Page `key` settled: its tickets stop waiting.
    fn settle(&mut self, key: &(u64, u64), err: Option<Errno>) {
        self.todo.remove(key);
        self.paged.remove(key);
        self.tickets.settled(key, err);
    }
}

impl Private {
    /// Start reading the pages `[first, end)` of `ino` that are missing
    /// here; a ticket, or `None` if none is.
    pub(super) fn task_reads_begin<E: Env>(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        ino: u64,
        first: u64,
        end: u64,
        epoch: Option<u64>,
    ) -> Option<u64> {
        let wait: Vec<(u64, u64)> = (first..end)
            .filter(|&idx| !self.cached(ino, idx))
            .map(|idx| (ino, idx))
            .collect();
        if wait.is_empty() {
            return None;
        }
        for k in &wait {
            if !self.reads.paged.contains_key(k) {
                self.reads.todo.insert(*k);
            }
        }
        let id = self.reads.tickets.open(ino, wait, epoch);
        self.reads_launch(link, meta);
        Some(id)
    }

    /// Send the reads of `todo` while there is room (ring and slot 1).
    /// In `net` mode their frames wait for [`Link::send_started`]: the
    /// caller of [`Private::task_reads_begin`] sends a flush's reads
    /// together (`Node::io_start`), [`Private::reads_progress`] its own.
    fn reads_launch<E: Env>(&mut self, link: &mut Link<E>, meta: &mut Meta) {
        let Ok(cap) = link.bulk_cap(1) else { return };
        let units = cap / PAGE;
        if self.reads.used.len() != units && self.reads.flying.is_empty() {
            self.reads.used = vec![false; units];
        }
        let most = link.ring_reads.clamp(1, crate::link::MAX_RING_READS);
        while self.reads.flying.len() < most {
            let Some(&(ino, first)) = self.reads.todo.iter().next() else {
                break;
            };
            let key = (ino, first);
            if !self.reads.tickets.wanted(&key) || self.cached(ino, first) {
                self.reads.settle(&key, None);
                continue;
            }
            let Some(m) = meta.get(ino) else {
                self.reads.settle(&key, None); // not open here: its read says
                continue;
            };
            // The run: this page and the next missing ones asked for.
            let mut n = 1;
            while n < MAX_RUN
                && self.reads.todo.contains(&(ino, first + n as u64))
                && !self.cached(ino, first + n as u64)
                && (first + n as u64) * (PAGE as u64) < m.size
            {
                n += 1;
            }
            let snapshot = Some((m.version, m.size));
            let unit = if !link.rings() {
                None // `net`: no sub-slots, each answer has its own frame
            } else {
                match self.reads.alloc(n) {
                    Some(u) => Some(u),
                    None => match self.reads.alloc(1) {
                        Some(u) => {
                            n = 1;
                            Some(u)
                        }
                        None => break, // slot 1 full: after the next answers
                    },
                }
            };
            if let Err(e) = self.make_room(link, meta, n) {
                self.reads.free(unit, n);
                self.reads.settle(&key, Some(e));
                continue;
            }
            let req = Request::Data {
                gen: fabric::proto::gen_of_version(m.version),
                op: Op::Read,
                slot: 1,
                at: (unit.unwrap_or(0) * PAGE) as u32,
                ino,
                offset: first * PAGE as u64,
                len: (n * PAGE) as u32,
            };
            match link.start_call_later(&req, self) {
                Ok(tag) => {
                    for i in 0..n as u64 {
                        self.reads.todo.remove(&(ino, first + i));
                        self.reads.paged.insert((ino, first + i), tag);
                    }
                    let gen = self.reads.gen;
                    self.reads.flying.insert(
                        tag,
                        Flight {
                            ino,
                            first,
                            n,
                            unit,
                            gen,
                            meta: snapshot,
                        },
                    );
                    self.reads.sent += 1;
                    self.reads.max = self.reads.max.max(self.reads.flying.len());
                }
                Err(e) => {
                    self.reads.free(unit, n);
                    self.reads.settle(&key, Some(e));
                }
            }
        }
    }

    /// Take in the answers that came and send what waits; true if any
    /// read was answered (or given up).
    pub(super) fn reads_progress<E: Env>(&mut self, link: &mut Link<E>, meta: &mut Meta) -> bool {
        if self.reads.flying.is_empty() && self.reads.todo.is_empty() {
            return false;
        }
        let tags: Vec<u32> = self.reads.flying.keys().copied().collect();
        let mut any = false;
        if !tags.is_empty() {
            link.take_in();
        }
        for tag in tags {
            let Some(r) = link.poll_call_kept(tag, Op::Read) else {
                continue;
            };
            any = true;
            let Some(f) = self.reads.flying.remove(&tag) else {
                continue;
            };
            let err = match r {
                Ok(Response::Data { bytes, attr }) if bytes as usize <= f.n * PAGE => {
                    let fresh = !self.reads.voided(&f)
                        && meta.get(f.ino).map(|m| (m.version, m.size)) == f.meta;
                    let mut r = Ok(());
                    if fresh {
                        let t0 = link.env.now_ns();
                        let mut data = vec![0u8; bytes as usize];
                        r = link.bulk_read_at(1, f.unit.unwrap_or(0) * PAGE, &mut data);
                        if r.is_ok() {
                            self.install(meta, f.ino, (f.first, f.n), &data, &attr, true);
                            link.add_fill(t0);
                        }
                    }
                    self.reads.free(f.unit, f.n);
                    r.err()
                }
                Ok(Response::Err(e)) => {
                    self.reads.free(f.unit, f.n);
                    Some(e)
                }
                Ok(_) => {
                    self.reads.free(f.unit, f.n);
                    Some(Errno::Io)
                }
                // Given up: the answer may still land in the sub-slot,
                // which stays held until the session ends.
                Err(e) => Some(e),
            };
            for i in 0..f.n as u64 {
                self.reads.settle(&(f.ino, f.first + i), err);
            }
        }
        if self.reads.flying.is_empty() {
            self.reads.voided.clear();
        }
        self.reads_launch(link, meta);
        link.send_started();
        // Nothing in flight and pages that cannot start (slot 1 lost to
        // reads given up): they fail after a call's give-up time.
        let (now, timeout) = (link.env.now_ns(), link.rpc_timeout_ns());
        let (out, waiting) = (self.reads.flying.len(), self.reads.todo.len());
        let todo = &mut self.reads.todo;
        let stuck = self
            .reads
            .stuck
            .give_up_todo(out, waiting, todo, now, timeout);
        for k in stuck {
            self.reads.settle(&k, Some(Errno::Unavailable));
            any = true;
        }
        any
    }

    /// Did a ticket stop waiting for a page since the last call?
    pub(super) fn reads_changed(&mut self) -> bool {
        self.reads.tickets.take_changed()
    }

    /// Ticket `id`'s result once its pages are settled.
    pub(super) fn reads_ticket(&mut self, id: u64) -> Option<TicketDone> {
        self.reads.tickets.take(id)
    }

    /// Forget ticket `id`; with none left, wait for the reads (and the
    /// room write-backs, `private/room.rs`) in flight: an idle node leaves
    /// nothing in flight ([`Private::reads_idle`]).
    pub(super) fn reads_cancel<E: Env>(&mut self, link: &mut Link<E>, meta: &mut Meta, id: u64) {
        self.reads.tickets.cancel(id);
        self.reads_idle(link, meta);
    }

    /// With no ticket open (the last one taken or cancelled), wait for the
    /// reads and room write-backs still in flight.
    pub(super) fn reads_idle<E: Env>(&mut self, link: &mut Link<E>, meta: &mut Meta) {
        if !self.reads.tickets.is_empty() {
            return;
        }
        self.reads.todo.clear();
        self.settle_reads(link, meta);
        self.room_settle(link, meta);
    }

    /// Before a synchronous use of slot 1: wait for every read in flight
    /// (bounded by the calls' give-up time).
    pub(super) fn settle_reads<E: Env>(&mut self, link: &mut Link<E>, meta: &mut Meta) {
        while !self.reads.flying.is_empty() {
            if self.reads_progress(link, meta) {
                continue;
            }
            if !link.wait_calls(self) {
                self.reads_progress(link, meta);
                return;
            }
        }
    }

    /// Reads in flight of `ino` (every file: `None`) must not fill the
    /// cache: its pages were dropped or its data changed.
    pub(super) fn void_reads(&mut self, ino: Option<u64>) {
        if self.reads.flying.is_empty() {
            return;
        }
        self.reads.gen += 1;
        match ino {
            Some(ino) => {
                self.reads.voided.insert(ino, self.reads.gen);
            }
            None => self.reads.void_all = self.reads.gen,
        }
    }

    /// A new session: reads of the old one are void, and slot 1 is free.
    pub(super) fn reads_session_ended(&mut self) {
        let flights: Vec<Flight> = self.reads.flying.values().copied().collect();
        self.reads.flying.clear();
        for f in flights {
            for i in 0..f.n as u64 {
                self.reads.settle(&(f.ino, f.first + i), None);
            }
        }
        self.reads.used.iter_mut().for_each(|u| *u = false);
        self.reads.voided.clear();
    }

    /// Reads sent, most in flight together.
    pub(super) fn reads_counts(&self) -> (u64, usize) {
        (self.reads.sent, self.reads.max)
    }
}
