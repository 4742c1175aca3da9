//! Tasks' read misses in flight, each task going on as soon as its own
//! pages are in.
//!
//! The batch path ([`ScState::resolve`]) sends a batch's page READs
//! together and returns when the last one answered: every task of a
//! flush waited for the slowest miss of the flush (a CM-R mapping behind
//! a disk fill). Here each page's READ is a call nobody blocks on
//! ([`Link::start_call`]); a *ticket* names the pages one task's I/O
//! waits for, and is done once each of them was installed (or failed).
//! The executor polls tickets and runs a task's I/O (a hit by then) as
//! soon as its ticket is done, while the other misses are still out.
//!
//! A page is in flight at most once (one READ, whichever tickets wait for
//! it). A page that cannot start yet (pool empty, being torn down, in
//! flight on the synchronous path, told to retry) waits in `todo` and is
//! started by a later poll; at most [`BATCH`] READs are in flight, the
//! rest of the request ring is left for acks and other calls. A
//! synchronous resolve of a page in flight here first waits for it
//! ([`ScState::settle_reads`]), so the two paths never answer one miss
//! twice. A rejoin ends every miss in flight without installing it: the
//! tickets finish, and the I/O's own read fetches the page again.

use alloc::collections::{BTreeMap, BTreeSet};

use alloc::vec::Vec;

use fabric::proto::{op_of, Errno, Op, PageKey, PageReply, PageReq, Request, Response};

use super::{exported, ScState, BATCH, MAX_RETRIES};
use crate::env::Env;
use crate::link::Link;
use crate::pagecache::{Installed, Slot};
use crate::tickets::{TicketDone, Tickets};

/// The read misses of this node's tasks.
#[derive(Debug, Default)]
pub struct ReadJobs {
    tickets: Tickets<PageKey>,
    /// READs in flight: page -> call tag.
    flying: BTreeMap<PageKey, u32>,
    /// Pages to start (or restart) on the next poll.
    todo: BTreeSet<PageKey>,
    /// Retries so far per page (a page told to retry too often fails).
    retries: BTreeMap<PageKey, u32>,
    /// READs sent, most in flight together (since boot).
    sent: u64,
    max: usize,
}

impl ReadJobs {
    /// READs sent, the most in flight together, tickets started.
    pub fn counts(&self) -> (u64, usize, u64) {
        (self.sent, self.max, self.tickets.started())
    }

    /// `key` is settled (installed, failed with `err`, or given up):
    /// every ticket waiting for it stops waiting.
    fn finish(&mut self, key: &PageKey, err: Option<Errno>) {
        self.todo.remove(key);
        self.retries.remove(key);
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
    /// Start the misses among `keys` (pages of inode `ino`) without
    /// waiting; `None` if every page is usable here already. `epoch`: the
    /// link's metadata epoch now, handed back with the ticket's result.
    pub fn reads_start<E: Env>(
        &mut self,
        link: &mut Link<E>,
        ino: u64,
        keys: &[PageKey],
        epoch: Option<u64>,
    ) -> Result<Option<u64>, Errno> {
        if self.coh.is_none() {
            return Err(Errno::Unavailable);
        }
        let wait: BTreeSet<PageKey> = keys.iter().filter(|k| !self.holds(k)).copied().collect();
        if wait.is_empty() {
            return Ok(None);
        }
        for k in &wait {
            if !self.reads.flying.contains_key(k) {
                self.reads.todo.insert(*k);
            }
        }
        let id = self.reads.tickets.open(ino, wait, epoch);
        self.reads_launch(link);
        Ok(Some(id))
    }

    /// Send the READs of `todo` while fewer than [`BATCH`] are in flight.
    fn reads_launch<E: Env>(&mut self, link: &mut Link<E>) {
        let todo: Vec<PageKey> = self.reads.todo.iter().copied().collect();
        let mut reclaimed = false;
        for key in todo {
            if self.reads.flying.len() >= BATCH {
                break;
            }
            if !self.reads.tickets.wanted(&key) {
                self.reads.todo.remove(&key);
                continue;
            }
            let Some(c) = self.coh.as_mut() else {
                self.reads.finish(&key, Some(Errno::Unavailable));
                continue;
            };
            match c.cache.slot(&key) {
                // Being torn down: its DIR_INV comes first.
                Some(Slot::Reclaiming { .. }) => continue,
                Some(_) => {
                    self.reads.finish(&key, None); // usable already
                    continue;
                }
                None => {}
            }
            if c.cache.in_flight(&key) {
                continue; // the synchronous path's miss: wait for it
            }
            let req = match c.cache.start_miss(key, false) {
                Some(r) => r,
                None => {
                    // Pool empty (or a limit): reclaim once per launch.
                    if reclaimed {
                        continue;
                    }
                    reclaimed = true;
                    match self.reclaim_for_miss(link, BATCH) {
                        Ok(0) if self.reads.flying.is_empty() => {
                            self.reads.finish(&key, Some(Errno::NoSpace));
                        }
                        Ok(_) => {}
                        Err(e) => self.reads.finish(&key, Some(e)),
                    }
                    continue;
                }
            };
            match link.start_call(&Request::Page(req), self) {
                Ok(tag) => {
                    self.reads.todo.remove(&key);
                    self.reads.flying.insert(key, tag);
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
        if self.reads.flying.is_empty() && self.reads.todo.is_empty() {
            return false;
        }
        let op = read_op();
        let flying: Vec<(PageKey, u32)> = self.reads.flying.iter().map(|(k, t)| (*k, *t)).collect();
        let mut settled = false;
        let t_fill = link.env.now_ns();
        for (key, tag) in flying {
            let Some(r) = link.poll_call(tag, op) else {
                continue;
            };
            self.reads.flying.remove(&key);
            settled = true;
            let Some(c) = self.coh.as_mut() else {
                self.reads.finish(&key, Some(Errno::Unavailable));
                continue;
            };
            let reply = match r {
                Ok(Response::Page(p)) => p,
                Ok(_) => {
                    c.cache.cancel_miss(&key, false);
                    self.reads.finish(&key, Some(Errno::Io));
                    continue;
                }
                Err(e) => {
                    // Unavailable: given up unanswered (the answer may
                    // still come: the frame is set aside).
                    c.cache.cancel_miss(&key, e == Errno::Unavailable);
                    self.reads.finish(&key, Some(e));
                    continue;
                }
            };
            let layout = c.layout;
            let mem = link.env.mem();
            match c
                .cache
                .complete_miss(key, reply, |gfn| exported(mem, &layout, gfn))
            {
                Installed::Local(_) | Installed::Remote(_) => self.reads.finish(&key, None),
                // A READ is never granted E; should one come, the I/O's
                // own read settles the page.
                Installed::Reserved(_) => self.reads.finish(&key, None),
                Installed::Retry => {
                    let n = self.reads.retries.entry(key).or_insert(0);
                    *n += 1;
                    if *n > MAX_RETRIES {
                        self.reads.finish(&key, Some(Errno::Io));
                    } else {
                        self.reads.todo.insert(key);
                    }
                }
                Installed::Failed => {
                    let e = match reply {
                        PageReply::IoError => Errno::Io,
                        _ => Errno::Refused,
                    };
                    self.reads.finish(&key, Some(e));
                }
            }
        }
        if settled {
            link.add_fill(t_fill);
            // Invalidations that raced these misses are due now.
            if let Some(c) = self.coh.as_mut() {
                c.send_due_acks(&link.env);
            }
        }
        self.reads_launch(link);
        settled
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
        if self.reads.tickets.cancel(id) {
            self.reads.todo.clear();
            let keys: Vec<PageKey> = self.reads.flying.keys().copied().collect();
            self.settle_reads(link, &keys);
        }
    }

    /// Before a synchronous resolve of `keys`: wait for those of them
    /// whose READ is in flight here (bounded by the calls' give-up time),
    /// so one miss is never answered on both paths.
    pub(super) fn settle_reads<E: Env>(&mut self, link: &mut Link<E>, keys: &[PageKey]) {
        while keys.iter().any(|k| self.reads.flying.contains_key(k)) {
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

    /// A new session: the READs of the old one are void (their frames
    /// were the old pool's). Their pages are settled without an install;
    /// each waiting I/O's own read fetches them again.
    pub(super) fn reads_session_ended(&mut self) {
        let keys: Vec<PageKey> = self.reads.flying.keys().copied().collect();
        self.reads.flying.clear();
        for k in keys {
            self.reads.finish(&k, None);
        }
    }

    /// Are tasks' READs in flight?
    pub(super) fn reads_in_flight(&self) -> bool {
        !self.reads.flying.is_empty()
    }

    /// READs sent, most in flight, tickets started (`cache stats`).
    pub(super) fn reads_counts(&self) -> (u64, usize, u64) {
        self.reads.counts()
    }
}
