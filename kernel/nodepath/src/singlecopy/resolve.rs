//! Resolving pages on the single-copy path: the misses of a set of pages
//! go out in batches of page requests, and each answer installs the page
//! (our frame, a peer's frame mapped, or E granted to write it whole).

use alloc::vec::Vec;

use fabric::proto::{Errno, PageKey, PageReply, PageReq};

use super::{exported, ScState, BATCH, MAX_RETRIES};
use crate::env::Env;
use crate::link::Link;
use crate::pagecache::{Installed, Slot};

impl ScState {
    /// Make `keys` resident or mapped here (one batch per [`BATCH`]
    /// pages). `full_write`: the caller will overwrite whole pages (strong
    /// mode asks LOOKUP_LOCK instead of READ). Returns the pages left in E
    /// (reserved), which the caller must write and UNLOCK.
    pub fn resolve<E: Env>(
        &mut self,
        link: &mut Link<E>,
        keys: &[PageKey],
        full_write: bool,
    ) -> Result<Vec<(PageKey, u64)>, Errno> {
        self.resolve_in(link, keys, full_write, BATCH)
    }

    /// [`ScState::resolve`] with up to `max_batch` page requests published
    /// together.
    pub(super) fn resolve_in<E: Env>(
        &mut self,
        link: &mut Link<E>,
        keys: &[PageKey],
        full_write: bool,
        max_batch: usize,
    ) -> Result<Vec<(PageKey, u64)>, Errno> {
        let mut reserved = Vec::new();
        let r = self.resolve_into(link, keys, full_write, max_batch, &mut reserved);
        // A caller resolving one page to write never gets E grants with an
        // error; several pages go through `resolve_into` (see
        // `rw::write_full_pages`), which hands them back either way.
        debug_assert!(r.is_ok() || reserved.is_empty());
        r.map(|()| reserved)
    }

    /// [`ScState::resolve_in`] that puts the pages granted E (which the
    /// caller must write and UNLOCK) in `reserved`, also when it returns
    /// an error for other pages.
    pub(super) fn resolve_into<E: Env>(
        &mut self,
        link: &mut Link<E>,
        keys: &[PageKey],
        full_write: bool,
        max_batch: usize,
        reserved: &mut Vec<(PageKey, u64)>,
    ) -> Result<(), Errno> {
        self.settle_reads(link, keys);
        let mut todo: Vec<PageKey> = keys.to_vec();
        let mut rounds = 0u32;
        while !todo.is_empty() {
            rounds += 1;
            if rounds > MAX_RETRIES {
                log::warn!(
                    "{} pages never resolved (retries exhausted), e.g. {:?}",
                    todo.len(),
                    todo.first()
                );
                return Err(Errno::Io);
            }
            // A page whose background eviction was answered is free to
            // ask for again (its frame back in the pool).
            self.reap_invs(link);
            let batch = self.start_misses(link, &mut todo, full_write, max_batch)?;
            if batch.is_empty() {
                // Only pages being torn down are left: let the invalidations in.
                if !todo.is_empty() && !link.wait(self) {
                    return Err(Errno::Unavailable);
                }
                continue;
            }
            let reqs: Vec<PageReq> = batch.iter().map(|(_, r)| *r).collect();
            let (answers, fatal) = self.page_batch(link, &reqs);
            log::debug!("resolve: {reqs:?} -> {answers:?}");
            let t_fill = link.env.now_ns();
            let err = self.complete_misses(link, &batch, answers, fatal, &mut todo, reserved)?;
            link.add_fill(t_fill);
            // Invalidations that raced these misses are due now.
            if let Some(c) = self.coh.as_mut() {
                c.send_due_acks(&link.env);
            }
            if let Some(e) = err {
                // Pages granted E in this or an earlier round are in
                // `reserved`: the caller writes and UNLOCKs them.
                return Err(e);
            }
            if !todo.is_empty() && !link.wait(self) {
                return Err(Errno::Unavailable);
            }
        }
        Ok(())
    }

    /// Start the misses of up to `max_batch` pages of `todo` (their
    /// requests); `todo` keeps the pages to ask for in a later round
    /// (being torn down, in flight in another exchange, or waiting for a
    /// free frame). Pages usable already are done.
    fn start_misses<E: Env>(
        &mut self,
        link: &mut Link<E>,
        todo: &mut Vec<PageKey>,
        full_write: bool,
        max_batch: usize,
    ) -> Result<Vec<(PageKey, PageReq)>, Errno> {
        let mut batch = Vec::new();
        let mut rest = Vec::new();
        for key in todo.drain(..) {
            if batch.len() >= max_batch {
                rest.push(key);
                continue;
            }
            let c = self.c()?;
            match c.cache.slot(&key) {
                // Being torn down: wait for the directory's DIR_INV.
                Some(Slot::Reclaiming { .. }) => {
                    rest.push(key);
                    continue;
                }
                // Usable already (ours, mapped, private or reserved).
                Some(_) => continue,
                None => {}
            }
            match c.cache.start_miss(key, full_write) {
                Some(r) => batch.push((key, r)),
                // Another exchange of ours has it in flight: not an
                // empty pool.
                None if c.cache.in_flight(&key) => rest.push(key),
                None => {
                    // Pool empty (or the node's or group's limit):
                    // reclaim, then try this page again.
                    let freed = self.reclaim_waiting(link, BATCH)?;
                    if freed == 0 && batch.is_empty() {
                        return Err(Errno::NoSpace);
                    }
                    rest.push(key);
                }
            }
        }
        *todo = rest;
        Ok(batch)
    }

    /// Every page of the batch is completed, whatever happened to the
    /// others: its answer applied, or its miss cancelled (frame back to
    /// the pool, a deferred ack sent). Pages granted E go to `reserved`,
    /// pages to ask for again to `todo`; the first error of the batch
    /// (`fatal`: the exchange's own) is returned.
    fn complete_misses<E: Env>(
        &mut self,
        link: &Link<E>,
        batch: &[(PageKey, PageReq)],
        answers: Vec<Option<Result<PageReply, Errno>>>,
        fatal: Option<Errno>,
        todo: &mut Vec<PageKey>,
        reserved: &mut Vec<(PageKey, u64)>,
    ) -> Result<Option<Errno>, Errno> {
        let mut err = fatal;
        for ((key, _), answer) in batch.iter().zip(answers) {
            let c = self.c()?;
            let reply = match answer {
                Some(Ok(reply)) => reply,
                Some(Err(e)) => {
                    c.cache.cancel_miss(key, false);
                    err.get_or_insert(e);
                    continue;
                }
                None => {
                    c.cache.cancel_miss(key, true);
                    err.get_or_insert(Errno::Unavailable);
                    continue;
                }
            };
            let layout = c.layout;
            let mem = link.env.mem();
            let r = c
                .cache
                .complete_miss(*key, reply, |gfn| exported(mem, &layout, gfn));
            match r {
                Installed::Local(_) | Installed::Remote(_) => {}
                Installed::Reserved(gfn) => reserved.push((*key, gfn)),
                Installed::Retry => todo.push(*key),
                Installed::Failed => {
                    err.get_or_insert(match reply {
                        PageReply::IoError => Errno::Io,
                        _ => Errno::Refused,
                    });
                }
            }
        }
        Ok(err)
    }
}
