//! Write-backs of pool frames to the disk. The page directory hands them
//! out page by page; the write-backs of contiguous pages of one file that
//! follow each other in an action list (a reclaim's INV run, an fsync's
//! WRITEBACK run, an fsync settling a grown size, a failed owner's pages)
//! go to the file system as one write of the whole run: its data blocks,
//! and its checksum-table blocks and inode record built once, not once
//! per page (each is a 4 KiB block the file system encodes and stages).

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use crate::pagedir::Action;
use fabric::proto::PageKey;
use fabric::shm::SharedMem;
use fabric::PAGE_SIZE;
use flatfs::{BlockDevice, Staged};

use super::Directory;

/// Most pages written back in one file-system write (the run's bytes are
/// copied out of the frames into one buffer first).
pub(super) const MAX_RUN_PAGES: usize = 64;

/// Take from the front of `queue` the write-backs of the pages after
/// `first` (in frame `gfn`) of the same file, in order, up to
/// [`MAX_RUN_PAGES`] pages, with the replies and export-bit changes
/// between them (a page's own, which come after its write-back). Returns
/// the run's frames (`first`'s included) and those other actions, in
/// their order, to run after the run's write (each came after a
/// write-back of the run, so after its frame was read); the queue keeps
/// everything from the first action that does not extend the run.
pub(super) fn take_run(
    queue: &mut VecDeque<Action>,
    first: PageKey,
    gfn: u64,
) -> (Vec<u64>, Vec<Action>) {
    let mut frames = alloc::vec![gfn];
    let mut take = 0;
    let mut i = 0;
    while i < queue.len() && frames.len() < MAX_RUN_PAGES {
        match &queue[i] {
            Action::Reply { .. } | Action::Export { .. } => {}
            Action::WriteBack { key, gfn }
                if key.ino == first.ino
                    && Some(key.idx) == first.idx.checked_add(frames.len() as u64) =>
            {
                frames.push(*gfn);
                take = i + 1;
            }
            _ => break,
        }
        i += 1;
    }
    let between = queue
        .drain(..take)
        .filter(|a| !matches!(a, Action::WriteBack { .. }));
    (frames, between.collect())
}

impl<D: BlockDevice> Directory<D> {
    /// Write the bytes of pool frames `frames` (pages `first`, `first` +
    /// 1, ...) that lie inside the file back to the disk, as one write
    /// (best effort: a failed write leaves the disk's older copy). Pages
    /// wholly past the end of file stay dirty: their bytes are the
    /// file's once its size is published. With asynchronous writes the
    /// block writes are staged and returned (the caller queues them);
    /// else they are done.
    pub(super) fn write_back_run(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        first: PageKey,
        frames: &[u64],
    ) -> Vec<Staged> {
        let page = PAGE_SIZE as u64;
        let deferred = self.async_writes();
        let Some(fs) = self.fs.as_mut() else {
            return Vec::new();
        };
        let Some(start) = first.idx.checked_mul(page) else {
            return Vec::new();
        };
        let Ok(attr) = fs.getattr(first.ino) else {
            return Vec::new();
        };
        // Pages of the run inside the file; the rest keep their bytes
        // dirty until the size covers them.
        let inside = attr.size.saturating_sub(start).div_ceil(page);
        let inside = inside.min(frames.len() as u64) as usize;
        for k in inside..frames.len() {
            let key = PageKey {
                ino: first.ino,
                idx: first.idx + k as u64,
            };
            self.pages.still_dirty(key);
        }
        if inside == 0 {
            return Vec::new();
        }
        // The page directory names only pool frames; a run stops short
        // of one that is not.
        let offs: Vec<usize> = frames[..inside]
            .iter()
            .map_while(|&gfn| self.layout.frame_off(gfn))
            .collect();
        if offs.len() < inside {
            log::warn!("write-back of {first:?}: a frame outside the pool");
        }
        let inside = offs.len();
        if inside == 0 {
            return Vec::new();
        }
        let len = ((attr.size - start) as usize).min(inside * PAGE_SIZE);
        let mut buf = alloc::vec![0u8; len];
        for (chunk, &off) in buf.chunks_mut(PAGE_SIZE).zip(&offs) {
            mem.read(off, chunk);
        }
        let Some(fs) = self.fs.as_mut() else {
            return Vec::new();
        };
        if deferred {
            fs.begin_deferred();
        }
        match fs.write(first.ino, start, &buf) {
            // Its data first, then the size it held back (same job).
            Ok(_) => self.pages_written(first.ino, first.idx..first.idx + inside as u64),
            Err(e) => log::warn!("write-back of {inside} pages from {first:?}: {e:?}"),
        }
        match self.fs.as_mut() {
            Some(fs) if deferred => fs.end_deferred(),
            _ => Vec::new(),
        }
    }
}
