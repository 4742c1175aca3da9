//! Readahead per open file: the window logic of [`crate::readahead`] fed
//! with what this node's cache holds, and the books the data path keeps
//! around it (marker pages, pages read ahead and not read yet, counters).
//! Mode-neutral: it asks the data path only [`DataPath::holds`]; the
//! caller fetches the pages it returns the way its mode fetches a miss
//! (single copy: the same page requests as any miss, batched; private and
//! `net`: contiguous runs as one file-server read), so a page read ahead
//! is exactly as fresh as a page read on demand.

use alloc::collections::BTreeSet;
use core::ops::Range;

use super::DataPath;
use crate::env::Env;
use crate::readahead::{FileReadahead, Plan, Read};

/// Pages read ahead and not read yet that one open file keeps track of, in
/// windows of the largest size (past it the lowest go: a reader that
/// skipped them will not come back).
const AHEAD_WINDOWS: usize = 8;

/// Marker pages one open file keeps (one per stream, and those of streams
/// replaced since).
const MARKERS: usize = 2 * crate::readahead::STREAMS;

/// Readahead counters (`cache stats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RaStats {
    /// Pages fetched beyond what reads asked for.
    pub pages: u64,
    /// Of those, pages a read later found cached.
    pub hits: u64,
    /// Of those, pages gone before a read reached them (counted when a
    /// read reaches them or the file is closed).
    pub wasted: u64,
}

/// One open file's readahead state.
#[derive(Debug)]
pub(super) struct RaFile {
    ra: FileReadahead,
    /// Pages whose read starts the next window.
    markers: BTreeSet<u64>,
    /// Pages read ahead that no read reached yet.
    ahead: BTreeSet<u64>,
}

impl RaFile {
    pub(super) fn new(max_pages: u32) -> RaFile {
        RaFile {
            ra: FileReadahead::new(max_pages),
            markers: BTreeSet::new(),
            ahead: BTreeSet::new(),
        }
    }

    /// A read of pages `[first, end)` of `ino` (a file of `eof_pages`
    /// pages) is about to run: the pages to fetch with it (the read's own
    /// included), or `None` when the read needs no readahead.
    pub(super) fn on_read<E: Env>(
        &mut self,
        dp: &dyn DataPath<E>,
        stats: &mut RaStats,
        ino: u64,
        first: u64,
        end: u64,
        eof_pages: u64,
    ) -> Option<Range<u64>> {
        if first >= end {
            return None;
        }
        // Pages read ahead that this read reaches: used, or gone unused
        // (the window is cut there, so the stream's next one restarts
        // small: the cache is thrashing).
        let reached: alloc::vec::Vec<u64> = self.ahead.range(first..end).copied().collect();
        for idx in reached {
            self.ahead.remove(&idx);
            if dp.holds(ino, idx) {
                stats.hits += 1;
            } else {
                stats.wasted += 1;
                self.ra.evicted(idx);
            }
        }
        let first_miss = (first..end).find(|&idx| !dp.holds(ino, idx));
        let marker = self.markers.range(first..end).next().copied();
        if let Some(m) = marker {
            self.markers.remove(&m);
        }
        let pages = u32::try_from(end - first).unwrap_or(u32::MAX);
        let w = match self.ra.on_read(Read {
            index: first,
            pages,
            first_miss,
            marker,
            eof_pages,
        }) {
            Plan::None => return None,
            Plan::Sync(w) | Plan::Async(w) => w,
        };
        if let Some(m) = w.marker() {
            self.markers.insert(m);
            while self.markers.len() > MARKERS {
                self.markers.pop_first();
            }
        }
        for idx in w.start.max(end)..w.end() {
            if !dp.holds(ino, idx) && self.ahead.insert(idx) {
                stats.pages += 1;
            }
        }
        let most = (self.ra.max_pages() as usize).saturating_mul(AHEAD_WINDOWS);
        while self.ahead.len() > most {
            if let Some(idx) = self.ahead.pop_first() {
                if !dp.holds(ino, idx) {
                    stats.wasted += 1;
                }
            }
        }
        Some(first.min(w.start)..end.max(w.end()))
    }

    /// The file shrank to `eof_pages` pages: windows stop there, and the
    /// pages past it were not wasted by readahead (the truncate took them).
    pub(super) fn truncate(&mut self, eof_pages: u64) {
        self.ra.truncate(eof_pages);
        self.markers.split_off(&eof_pages);
        self.ahead.split_off(&eof_pages);
    }

    /// The file is closed: pages read ahead and gone unread were wasted.
    pub(super) fn closed<E: Env>(&self, dp: &dyn DataPath<E>, stats: &mut RaStats, ino: u64) {
        stats.wasted += self
            .ahead
            .iter()
            .filter(|&&idx| !dp.holds(ino, idx))
            .count() as u64;
    }
}
