//! Room for tasks' writes (`private` and `net` mode, buffered writes,
//! `task_reads=each`): a write to pages not cached here needs room, and
//! when the cache is full of dirty pages that room comes from writing the
//! oldest of them back. A write run inside a flush would do that
//! synchronously and hold every task of the flush until the disk wrote
//! them; instead its flush starts that write-back in flight
//! ([`Private::write_back_keys`], the jobs of `private/inflight.rs`) and
//! the write waits for it with a ticket (`crate::tickets`, the same ones
//! as tasks' reads), while the other tasks run.
//!
//! One room job is in flight at a time: [`WRITEBACK_BATCH`] oldest dirty
//! pages not already being written, one job per file among them. A write
//! that needs room while room jobs are out waits for those. Once they are
//! answered the pages are clean, and the write's own `make_room` drops
//! clean pages instead of writing back; if other writes took that room
//! meanwhile, it writes back synchronously as before (so a room job's
//! failure only costs that). A ticket never fails: the write reports its
//! own error.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use fabric::config::BaselineWrites;

use super::{Private, WRITEBACK_BATCH};
use crate::env::Env;
use crate::link::Link;
use crate::vfs::{Meta, WbStart};

/// The inode of a room ticket's keys: (ROOM, job id) is never a page.
const ROOM: u64 = u64::MAX;

impl Private {
    /// A write of `need` pages not cached here (of `ino`) is about to
    /// run: a ticket if it must wait for room (a write-back in flight),
    /// `None` if it can run now.
    pub(super) fn room_start<E: Env>(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        ino: u64,
        need: usize,
    ) -> Option<u64> {
        if need == 0 || !self.room_may_wait(need) {
            return None; // room now, or after dropping clean pages
        }
        if self.room.is_empty() {
            self.room_launch(link, meta);
        }
        if self.room.is_empty() {
            return None; // nothing to write back: the write says why
        }
        let wait: Vec<(u64, u64)> = self.room.iter().map(|&id| (ROOM, id)).collect();
        self.room_tickets += 1;
        Some(self.reads.tickets.open(ino, wait, None))
    }

    /// Could a write of `need` uncached pages have to wait for room? Not
    /// with write-through, nor while the cache has room for them or its
    /// clean pages can be dropped for them.
    pub(super) fn room_may_wait(&self, need: usize) -> bool {
        self.writes == BaselineWrites::Back
            && self.cached_pages + need > self.max_pages
            && self.dirty.len() + need > self.max_pages
    }

    /// Start writing back the oldest dirty pages that no job is sending
    /// yet, one job per file.
    fn room_launch<E: Env>(&mut self, link: &mut Link<E>, meta: &mut Meta) {
        let mut by_file: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
        for &(ino, idx) in self
            .dirty_age
            .values()
            .filter(|k| !self.inflight.sending(k))
            .take(WRITEBACK_BATCH)
        {
            by_file.entry(ino).or_default().push((ino, idx));
        }
        for (ino, mut keys) in by_file {
            keys.sort_unstable();
            match self.write_back_keys(link, meta, ino, &keys) {
                Ok(WbStart::Started(id)) => self.room.push(id),
                Ok(_) => {}
                // The write makes its own room (and reports its error).
                Err(e) => log::debug!("room write-back of inode {ino}: {e}"),
            }
        }
    }

    /// Take in the room jobs' answers (their tickets settle as each job
    /// is applied).
    pub(super) fn room_progress<E: Env>(&mut self, link: &mut Link<E>, meta: &mut Meta) {
        if !self.room.is_empty() {
            self.apply_answered(link, meta);
        }
    }

    /// No ticket waits any more: wait for the room jobs in flight (and
    /// the jobs before them), so an idle node leaves none out.
    pub(super) fn room_settle<E: Env>(&mut self, link: &mut Link<E>, meta: &mut Meta) {
        if !self.room.is_empty() {
            // Errors stay with the pages (they stay dirty).
            let _ = self.finish_in_flight(link, meta);
        }
    }

    /// Job `id` was applied: if it made room, its tickets stop waiting
    /// (true); otherwise a task's job (false).
    pub(super) fn room_job_done(&mut self, id: u64) -> bool {
        let Some(i) = self.room.iter().position(|&j| j == id) else {
            return false;
        };
        self.room.swap_remove(i);
        self.reads.tickets.settled(&(ROOM, id), None);
        true
    }

    /// Tickets that waited for room (since boot).
    pub(super) fn room_count(&self) -> u64 {
        self.room_tickets
    }
}
