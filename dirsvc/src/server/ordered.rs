//! Ordered sizes: the size a file's record on the disk says never covers
//! data that is not on the disk yet (a page cache's ordered mode, as
//! ext4's `data=ordered`: after a crash a file shows an older size, never
//! a newer size over blocks nobody wrote).
//!
//! A node grows a file by storing the new bytes into frames of the shared
//! region and then publishing the new size (`Setattr`); the frames are
//! written back later (eviction, write-back, fsync). If the directory
//! recorded the new size at once, a directory crash before those
//! write-backs would leave the file's new size over zeros. So a growth by
//! `Setattr` holds the recorded size ([`flatfs::Fs::hold_size`]) below
//! the pages of the grown range that are cached (the only places the new
//! bytes can be); every write-back of such pages raises the hold in the
//! same write job as the page's data (the record is the job's last
//! phase, and a later job's record of the same table block goes out
//! after it); a page whose entry is gone without a write-back holds
//! nothing (clean, or its data was lost with its owner). An fsync of the
//! file (or a sync) writes back the pages still holding the size and
//! records the whole size before it is answered, so after an fsync both
//! the data and the size are durable.
//!
//! A growth by a data write through the file server (`Data`) needs none
//! of this: its blocks and its record go in one job, data first.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::vec::Vec;

use crate::pagedir::{Action, Phase};
use fabric::proto::PageKey;
use fabric::shm::SharedMem;
use fabric::PAGE_SIZE;
use flatfs::BlockDevice;

use super::writes::Then;
use super::Directory;

const PAGE: u64 = PAGE_SIZE as u64;

/// A file grown past what its record on the disk says.
#[derive(Debug, Default, Clone)]
pub(crate) struct Grown {
    /// The recorded size when the growth started (or a truncation below
    /// it since): the hold never goes under it.
    base: u64,
    /// Pages of the grown range that were cached when it grew and not
    /// written back since.
    pages: BTreeSet<u64>,
}

impl Grown {
    /// The size the record may say: up to the first page still waiting.
    fn cap(&self) -> Option<u64> {
        self.pages
            .first()
            .map(|&p| p.saturating_mul(PAGE).max(self.base))
    }
}

/// Files whose recorded size is held below cached data, by inode. Owned
/// here; the file server reports size changes, the executor's
/// write-backs and fsyncs release the holds.
#[derive(Debug, Default)]
pub(super) struct Sizes {
    grown: BTreeMap<u64, Grown>,
    /// Files an fsync (or a sync) is settling: their grown pages are
    /// written back a batch at a time, as the write queue has room
    /// ([`Directory::continue_settling`]), then their whole size is
    /// recorded; their fsyncs wait until then. By inode: the first page
    /// not looked at yet.
    settling: BTreeMap<u64, u64>,
    /// No new batch starts ([`Sizes::pause_settling`]).
    paused: bool,
}

/// Pages an fsync writes back per batch while it settles a file's size:
/// bounded, so a file with thousands of cached grown pages does not hold
/// them all in the directory's heap at once.
const SETTLE_BATCH: usize = 64;

impl Sizes {
    /// Pause every settling: no new batch starts (a synchronous drain of
    /// the write queue waits only for what is queued); the files stay
    /// settling, so their fsyncs keep waiting.
    pub(super) fn pause_settling(&mut self) {
        self.paused = true;
    }

    /// Let the settlings go on.
    pub(super) fn resume_settling(&mut self) {
        self.paused = false;
    }

    /// Files whose grown size waits for its data.
    pub(super) fn len(&self) -> usize {
        self.grown.len()
    }

    /// Is an fsync of `ino` (0: a sync) still settling sizes?
    pub(super) fn settling(&self, ino: u64) -> bool {
        if ino == 0 {
            !self.settling.is_empty()
        } else {
            self.settling.contains_key(&ino)
        }
    }
}

impl<D: BlockDevice> Directory<D> {
    /// `Setattr` of `ino` from `old` to `new` bytes is about to run: track
    /// what a growth leaves in the cache, forget what a truncation cuts.
    /// Returns the hold to set before the size changes (`None`: none).
    pub(super) fn size_changing(&mut self, ino: u64, old: u64, new: u64) -> Option<u64> {
        if new < old {
            if let Some(g) = self.sizes.grown.get_mut(&ino) {
                g.base = g.base.min(new);
                let keep = new.div_ceil(PAGE);
                g.pages.retain(|&p| p < keep);
            }
        } else if new > old {
            let last = new.div_ceil(PAGE) - 1;
            let mut cached: Vec<u64> = self
                .pages
                .cached_between(ino, old / PAGE, last)
                .into_iter()
                .map(|k| k.idx)
                .collect();
            // Pages of a delegated range may hold the new bytes in the
            // holder's frames, unknown here until its list is read: they
            // hold the size as cached pages do.
            let first = old / PAGE;
            for (r, _) in self.pages.delegations() {
                if r.ino == ino && r.base <= last && r.last() >= first {
                    cached.extend(r.base.max(first)..=r.last().min(last));
                }
            }
            if !cached.is_empty() {
                let base = self
                    .fs
                    .as_ref()
                    .and_then(|fs| fs.durable_size(ino).ok())
                    .unwrap_or(0);
                let g = self.sizes.grown.entry(ino).or_insert_with(|| Grown {
                    base,
                    pages: BTreeSet::new(),
                });
                g.pages.extend(cached);
            }
        }
        self.current_cap(ino)
    }

    /// The hold of `ino` now: its waiting pages that are still cached
    /// (an entry gone without a write-back holds nothing); forgets the
    /// file once none is left.
    fn current_cap(&mut self, ino: u64) -> Option<u64> {
        let g = self.sizes.grown.get_mut(&ino)?;
        let pages = &self.pages;
        g.pages.retain(|&idx| {
            pages.entry(&PageKey { ino, idx }).is_some() || pages.delegated_between(ino, idx, idx)
        });
        let cap = g.cap();
        if cap.is_none() {
            self.sizes.grown.remove(&ino);
        }
        cap
    }

    /// Pages `idxs` of `ino` were just written (or staged) to the disk
    /// in one write: they no longer hold its size, and the hold is raised
    /// once. Call right after the data write, inside the same deferred
    /// staging, so the raised record follows the data (the file system's
    /// phase order within a job).
    pub(super) fn pages_written(&mut self, ino: u64, idxs: core::ops::Range<u64>) {
        let Some(g) = self.sizes.grown.get_mut(&ino) else {
            return;
        };
        let before = g.pages.len();
        for idx in idxs {
            g.pages.remove(&idx);
        }
        if g.pages.len() == before {
            return;
        }
        let cap = self.current_cap(ino);
        if let Some(fs) = self.fs.as_mut() {
            if let Err(e) = fs.hold_size(ino, cap) {
                log::warn!("recording the size of inode {ino}: {e:?}");
            }
        }
    }

    /// An fsync of `ino` (0: a sync) arrived: write back the pages still
    /// holding its size (from their owners' frames) and record its whole
    /// size, so the fsync's answer, which waits for the file's writes and
    /// for this ([`Sizes::settling`]), covers both. The write-backs go a
    /// batch at a time as the write queue has room.
    pub(super) fn settle_sizes(&mut self, mem: &(impl SharedMem + ?Sized), ino: u64) {
        let inos: Vec<u64> = if ino == 0 {
            self.sizes.grown.keys().copied().collect()
        } else if self.sizes.grown.contains_key(&ino) {
            alloc::vec![ino]
        } else {
            Vec::new()
        };
        for i in inos {
            // From its first page again (an fsync arriving while one
            // settles the file covers what was cached since).
            self.sizes.settling.insert(i, 0);
        }
        self.continue_settling(mem);
    }

    /// Write back the next batches of the files being settled while the
    /// write queue has room; record the size of each file whose pages are
    /// all written back.
    pub(super) fn continue_settling(&mut self, mem: &(impl SharedMem + ?Sized)) {
        while let Some((&ino, &from)) = self.sizes.settling.first_key_value() {
            if self.write_queue_full() || self.sizes.paused {
                return;
            }
            match self.settle_batch(ino, from) {
                Some((acts, next)) => {
                    self.sizes.settling.insert(ino, next);
                    self.run(mem, acts);
                }
                None => {
                    self.sizes.settling.remove(&ino);
                    self.record_whole_size(mem, ino);
                }
            }
        }
    }

    /// Write-backs of the pages of `ino` from page `from` on still holding
    /// its size (at most [`SETTLE_BATCH`]) and the page to go on from;
    /// `None` once none is left. A page in transition (a fill, an
    /// invalidation whose write-back comes with its acks) is passed over:
    /// the fsync records the whole size anyway.
    fn settle_batch(&self, ino: u64, from: u64) -> Option<(Vec<Action>, u64)> {
        let g = self.sizes.grown.get(&ino)?;
        let mut acts = Vec::new();
        let mut next = from;
        for &idx in g.pages.range(from..) {
            if acts.len() == SETTLE_BATCH {
                break;
            }
            next = idx.checked_add(1)?;
            let key = PageKey { ino, idx };
            if let Some(e) = self.pages.entry(&key).filter(|e| e.phase == Phase::Owned) {
                acts.push(Action::WriteBack { key, gfn: e.gfn });
            }
        }
        (next != from).then_some((acts, next))
    }

    /// Record the size of `ino` now that its growth is settled: the whole
    /// size, unless pages grown after the scan passed them (a growth
    /// after the fsync arrived) still sit unwritten in their owners'
    /// frames, which keep holding it. Pages in transition hold nothing
    /// (their write-backs come with their acks).
    fn record_whole_size(&mut self, mem: &(impl SharedMem + ?Sized), ino: u64) {
        let Some(g) = self.sizes.grown.get_mut(&ino) else {
            return;
        };
        let pages = &self.pages;
        g.pages.retain(|&idx| {
            pages
                .entry(&PageKey { ino, idx })
                .is_some_and(|e| e.phase == Phase::Owned)
                || pages.delegated_between(ino, idx, idx)
        });
        let cap = if g.pages.is_empty() {
            self.sizes.grown.remove(&ino);
            None
        } else {
            self.current_cap(ino)
        };
        let deferred = self.async_writes();
        let Some(fs) = self.fs.as_mut() else {
            return;
        };
        if deferred {
            fs.begin_deferred();
        }
        if let Err(e) = fs.hold_size(ino, cap) {
            log::warn!("recording the size of inode {ino}: {e:?}");
        }
        if deferred {
            let staged = fs.end_deferred();
            if !staged.is_empty() {
                self.queue_writes(mem, alloc::vec![ino], staged, Then::Actions(Vec::new()));
            }
        }
    }

    /// The file `ino` was removed: forget its growth.
    pub(super) fn size_forgotten(&mut self, ino: u64) {
        self.sizes.grown.remove(&ino);
        self.sizes.settling.remove(&ino);
    }
}
