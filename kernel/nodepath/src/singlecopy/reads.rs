//! Tasks' read misses in flight, each task going on as soon as its own
//! pages are in.
//!
//! The batch path ([`ScState::resolve`]) sends a batch's page READs
//! together and returns when the last one answered: every task of a
//! flush waited for the slowest miss of the flush (a CM-R mapping behind
//! a disk fill). Here each page's READ is a call nobody blocks on
//! ([`Link::start_call`]); a *ticket* (`crate::tickets`) names the pages
//! one task's I/O waits for, and is done once each of them was installed
//! (or failed). The executor polls tickets and runs a task's I/O (a hit
//! by then) as soon as its ticket is done, while the other misses are
//! still out.
//!
//! A page is in flight at most once (one READ, whichever tickets wait for
//! it). A page that cannot start yet (pool empty, being torn down, in
//! flight on the synchronous path, told to retry) waits in `todo` and is
//! started by a later poll; at most [`BATCH`] READs are in flight, the
//! rest of the request ring is left for acks and other calls. A
//! synchronous resolve (or a write) of a page in flight here first waits
//! for it ([`ScState::settle_reads`]), so the two paths never answer one
//! miss twice and a READ's answer never replaces bytes written meanwhile.
//! A rejoin ends every miss in flight without installing it: the tickets
//! finish, and the I/O's own read fetches the page again. The lists are
//! small vectors: at most [`BATCH`] READs, a few dozen tickets, and every
//! allocation costs under TCG.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use fabric::proto::{op_of, Errno, Op, PageKey, PageReply, PageReq, Request, Response};

use super::{exported, ScState, BATCH, MAX_RETRIES};
use crate::env::Env;
use crate::link::Link;
use crate::pagecache::{Installed, Slot};
use crate::tickets::{Stuck, TicketDone, Tickets};

/// The read misses of this node's tasks.
#[derive(Debug, Default)]
pub struct ReadJobs {
    tickets: Tickets<PageKey>,
    /// READs in flight: page and call tag.
    flying: Vec<(PageKey, u32)>,
    /// Pages to start (or restart) on the next poll, oldest first.
    todo: Vec<PageKey>,
    /// Retries so far per page (a page told to retry too often fails).
    retries: BTreeMap<PageKey, u32>,
    /// READs sent, most in flight together (since boot).
    sent: u64,
    max: usize,
    /// Pages waiting with nothing in flight, since when.
    stuck: Stuck,
}

impl ReadJobs {
    /// READs sent, the most in flight together, tickets started.
    pub fn counts(&self) -> (u64, usize, u64) {
        (self.sent, self.max, self.tickets.started())
    }

    fn flying(&self, key: &PageKey) -> bool {
        self.flying.iter().any(|(k, _)| k == key)
    }

    fn unqueue(&mut self, key: &PageKey) {
        self.todo.retain(|k| k != key);
    }

    /// `key` is settled (installed, failed with `err`, or given up):
    /// every ticket waiting for it stops waiting.
    fn finish(&mut self, key: &PageKey, err: Option<Errno>) {
        self.unqueue(key);
        if !self.retries.is_empty() {
            self.retries.remove(key);
        }
        self.tickets.settled(key, err);
    }
}

/// The opcode of a page READ's answer.
fn read_op() -> Op {
    op_of(&Request::Page(PageReq::Read {
        key: PageKey { ino: 0, idx: 0 },
        frame: 0,
    }))
}

impl ScState {
    /// Start the misses among the pages `[first, end)` of `ino` without
    /// waiting; `None` if every page is usable here already. `epoch`: the
    /// link's metadata epoch now, handed back with the ticket's result.
    pub fn reads_start<E: Env>(
        &mut self,
        link: &mut Link<E>,
        ino: u64,
        first: u64,
        end: u64,
        epoch: Option<u64>,
    ) -> Result<Option<u64>, Errno> {
        if self.coh.is_none() {
            return Err(Errno::Unavailable);
        }
        let wait: Vec<PageKey> = (first..end)
            .map(|idx| PageKey { ino, idx })
            .filter(|k| !self.holds(k))
            .collect();
        if wait.is_empty() {
            return Ok(None);
        }
        for k in &wait {
            if !self.reads.flying(k) && !self.reads.todo.contains(k) {
                self.reads.todo.push(*k);
            }
        }
        let id = self.reads.tickets.open(ino, wait, epoch);
        self.reads_launch(link);
        Ok(Some(id))
    }

    /// Send the READs of `todo` while fewer than [`BATCH`] are in flight.
    fn reads_launch<E: Env>(&mut self, link: &mut Link<E>) {
        let mut i = 0;
        let mut reclaimed = false;
        while i < self.reads.todo.len() && self.reads.flying.len() < BATCH {
            let key = self.reads.todo[i];
            if !self.reads.tickets.wanted(&key) {
                self.reads.todo.remove(i);
                continue;
            }
            let Some(c) = self.coh.as_mut() else {
                self.reads.finish(&key, Some(Errno::Unavailable));
                continue;
            };
            match c.cache.slot(&key) {
                // Being torn down: its DIR_INV comes first.
                Some(Slot::Reclaiming { .. }) => {
                    i += 1;
                    continue;
                }
                Some(_) => {
                    self.reads.finish(&key, None); // usable already
                    continue;
                }
                None => {}
            }
            if c.cache.in_flight(&key) {
                i += 1; // the synchronous path's miss: wait for it
                continue;
            }
            let req = match c.cache.start_miss(key, false) {
                Some(r) => r,
                None => {
                    // Pool empty (or a limit): reclaim once per launch,
                    // unless background INVs are in flight: their frames
                    // come back to a later poll, the ticket waits.
                    if !reclaimed && self.invs_in_flight() > 0 {
                        reclaimed = true;
                        if let Some(c) = self.cache() {
                            c.count_waited_miss();
                        }
                    }
                    if !reclaimed {
                        reclaimed = true;
                        if let Some(c) = self.cache() {
                            c.count_waited_miss();
                        }
                        match self.reclaim_for_miss(link, BATCH) {
                            Ok(0) if self.reads.flying.is_empty() => {
                                self.reads.finish(&key, Some(Errno::NoSpace));
                                continue;
                            }
                            Ok(_) => {}
                            Err(e) => {
                                self.reads.finish(&key, Some(e));
                                continue;
                            }
                        }
                    }
                    i += 1;
                    continue;
                }
            };
            self.reads.todo.remove(i);
            match link.start_call(&Request::Page(req), self) {
                Ok(tag) => {
                    self.reads.flying.push((key, tag));
                    self.reads.sent += 1;
                    self.reads.max = self.reads.max.max(self.reads.flying.len());
                }
                Err(e) => {
                    if let Some(c) = self.coh.as_mut() {
                        c.cache.cancel_miss(&key, false);
                    }
                    self.reads.finish(&key, Some(e));
                }
            }
        }
    }

    /// Apply the answers that came, start what waits; true if any page
    /// was settled.
    pub fn reads_poll<E: Env>(&mut self, link: &mut Link<E>) -> bool {
        // Frames of background evictions answered meanwhile: misses
        // waiting for a frame can start.
        self.reap_invs(link);
        if self.reads.flying.is_empty() && self.reads.todo.is_empty() {
            return false;
        }
        let op = read_op();
        let mut settled = false;
        let t_fill = link.env.now_ns();
        let mut i = 0;
        while i < self.reads.flying.len() {
            let (key, tag) = self.reads.flying[i];
            let Some(r) = link.poll_call(tag, op) else {
                i += 1;
                continue;
            };
            self.reads.flying.swap_remove(i);
            settled = true;
            self.read_answered(link, key, r);
        }
        if settled {
            link.add_fill(t_fill);
            // Invalidations that raced these misses are due now.
            if let Some(c) = self.coh.as_mut() {
                c.send_due_acks(&link.env);
            }
        }
        self.reads_launch(link);
        let (now, timeout) = (link.env.now_ns(), link.rpc_timeout_ns());
        let (out, waiting) = (self.reads.flying.len(), self.reads.todo.len());
        let todo = &mut self.reads.todo;
        let stuck = self
            .reads
            .stuck
            .give_up_todo(out, waiting, todo, now, timeout);
        for k in stuck {
            self.reads.finish(&k, Some(Errno::Unavailable));
            settled = true;
        }
        settled
    }

    /// Apply the answer (or the failure) of `key`'s READ.
    fn read_answered<E: Env>(
        &mut self,
        link: &mut Link<E>,
        key: PageKey,
        r: Result<Response, Errno>,
    ) {
        let Some(c) = self.coh.as_mut() else {
            self.reads.finish(&key, Some(Errno::Unavailable));
            return;
        };
        let reply = match r {
            Ok(Response::Page(p)) => p,
            Ok(_) => {
                c.cache.cancel_miss(&key, false);
                self.reads.finish(&key, Some(Errno::Io));
                return;
            }
            Err(e) => {
                // Unavailable: given up unanswered (the answer may still
                // come: the frame is set aside).
                c.cache.cancel_miss(&key, e == Errno::Unavailable);
                self.reads.finish(&key, Some(e));
                return;
            }
        };
        let layout = c.layout;
        let mem = link.env.mem();
        match c
            .cache
            .complete_miss(key, reply, |gfn| exported(mem, &layout, gfn))
        {
            Installed::Local(_) | Installed::Remote(_) => self.reads.finish(&key, None),
            // A READ is never granted E; should one come, the I/O's own
            // read settles the page.
            Installed::Reserved(_) => self.reads.finish(&key, None),
            Installed::Retry => {
                let n = self.reads.retries.entry(key).or_insert(0);
                *n += 1;
                if *n > MAX_RETRIES {
                    log::warn!("read of {key:?}: retried {n} times, failed");
                    self.reads.finish(&key, Some(Errno::Io));
                } else if !self.reads.todo.contains(&key) {
                    self.reads.todo.push(key);
                }
            }
            Installed::Failed => {
                let e = match reply {
                    PageReply::IoError => Errno::Io,
                    _ => Errno::Refused,
                };
                log::warn!("read of {key:?}: the directory answered {reply:?}");
                self.reads.finish(&key, Some(e));
            }
        }
    }

    /// Ticket `id`'s result once every page it waits for is settled
    /// (`None`: not yet); an unknown ticket is `Invalid`.
    pub fn reads_ticket(&mut self, id: u64) -> Option<TicketDone> {
        self.reads.tickets.take(id)
    }

    /// Forget ticket `id` (its task is gone). Once no ticket is left, the
    /// READs still in flight are waited for here: an idle node leaves no
    /// miss in flight (a DIR_INV for such a page would wait for its
    /// answer to be applied).
    pub fn reads_cancel<E: Env>(&mut self, link: &mut Link<E>, id: u64) {
        self.reads.tickets.cancel(id);
        self.reads_idle(link);
    }

    /// With no ticket open (the last one taken or cancelled), wait for the
    /// READs still in flight (pages no ticket wants any more): an idle
    /// node leaves no miss in flight, whose page a DIR_INV would wait for.
    pub fn reads_idle<E: Env>(&mut self, link: &mut Link<E>) {
        if !self.reads.tickets.is_empty() {
            return;
        }
        self.reads.todo.clear();
        if !self.reads.flying.is_empty() {
            let keys: Vec<PageKey> = self.reads.flying.iter().map(|(k, _)| *k).collect();
            self.settle_reads(link, &keys);
        }
    }

    /// Before a synchronous resolve of `keys` (or a write to them): wait
    /// for those of them whose READ is in flight here (bounded by the
    /// calls' give-up time), so one miss is never answered on both paths.
    pub(super) fn settle_reads<E: Env>(&mut self, link: &mut Link<E>, keys: &[PageKey]) {
        while !self.reads.flying.is_empty() && keys.iter().any(|k| self.reads.flying(k)) {
            if self.reads_poll(link) {
                continue;
            }
            if !link.wait_calls(self) {
                // The wait gave up: the calls' own give-up times end them.
                self.reads_poll(link);
                return;
            }
        }
    }

    /// Did a ticket stop waiting for a page since the last call?
    pub(super) fn reads_changed(&mut self) -> bool {
        self.reads.tickets.take_changed()
    }

    /// Are tasks' READs in flight?
    pub(super) fn reads_in_flight(&self) -> bool {
        !self.reads.flying.is_empty()
    }

    /// A new session: the READs of the old one are void (their frames
    /// were the old pool's). Their pages are settled without an install;
    /// each waiting I/O's own read fetches them again.
    pub(super) fn reads_session_ended(&mut self) {
        let flying = core::mem::take(&mut self.reads.flying);
        for (k, _) in flying {
            self.reads.finish(&k, None);
        }
    }

    /// READs sent, most in flight, tickets started (`cache stats`).
    pub(super) fn reads_counts(&self) -> (u64, usize, u64) {
        self.reads.counts()
    }
}
