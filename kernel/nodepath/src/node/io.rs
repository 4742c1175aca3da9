//! A node's batched and task I/O: a flush's batch of positioned reads
//! (its pages and readahead fetched together first), and tasks' reads
//! started as calls of their own and polled by ticket.

use super::*;

impl<E: Env> Node<E> {
    /// The pages a read of `len` bytes at `offset` of `fd` touches, up to
    /// the file's end: its inode and the page indices.
    fn read_pages(&self, fd: Fd, offset: u64, len: usize) -> Result<(u64, Range<u64>), Errno> {
        let (ino, size) = self.vfs.fd_info(fd)?;
        let end = offset.saturating_add(len as u64).min(size);
        Ok((ino, offset / 4096..end.div_ceil(4096)))
    }

    /// Does this node hold every page of `pages` (of inode `ino`)?
    fn holds_all(&self, ino: u64, mut pages: Range<u64>) -> bool {
        let dp = self.vfs.data_path_ref();
        pages.all(|idx| dp.holds(ino, idx))
    }

    /// Does this node hold every page the batch's reads touch?
    fn batch_held(&self, ios: &[BatchIo<'_>]) -> bool {
        ios.iter()
            .filter(|io| !io.write && !io.buf.is_empty())
            .all(|io| match self.read_pages(io.fd, io.offset, io.buf.len()) {
                Ok((ino, pages)) => self.holds_all(ino, pages),
                Err(_) => false,
            })
    }

    /// The pages a batch's reads touch, as (inode, index), sorted.
    pub fn batch_pages(&self, ios: &[BatchIo<'_>]) -> Result<Vec<(u64, u64)>, Errno> {
        let mut pages = Vec::new();
        for io in ios {
            if io.write || io.buf.is_empty() {
                continue;
            }
            let (ino, range) = self.read_pages(io.fd, io.offset, io.buf.len())?;
            pages.extend(range.map(|idx| (ino, idx)));
        }
        pages.sort_unstable();
        pages.dedup();
        Ok(pages)
    }

    /// The readahead windows of a batch's reads (see [`Vfs::readahead`]),
    /// as (inode, index).
    fn batch_readahead(&mut self, ios: &[BatchIo<'_>]) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        for io in ios.iter().filter(|io| !io.write && !io.buf.is_empty()) {
            let Ok((_, r)) = self.read_pages(io.fd, io.offset, io.buf.len()) else {
                continue;
            };
            if let Some((ino, w)) = self.vfs.readahead(io.fd, r.start, r.end) {
                out.extend(w.map(|idx| (ino, idx)));
            }
        }
        out
    }

    /// Before a batch of I/Os: bring every page its reads touch in, the
    /// misses in flight together (the reads are hits afterwards).
    pub fn prepare_batch(&mut self, ios: &[BatchIo<'_>]) -> Result<(), Errno> {
        self.guard()?;
        let ahead = self.batch_readahead(ios);
        if ahead.is_empty() && self.batch_held(ios) {
            return Ok(()); // all hits: nothing to ask, nothing to allocate
        }
        let mut pages = self.batch_pages(ios)?;
        if !ahead.is_empty() {
            let dp = self.vfs.data_path_ref();
            pages.extend(ahead.into_iter().filter(|&(ino, idx)| !dp.holds(ino, idx)));
            pages.sort_unstable();
            pages.dedup();
        }
        let epoch = self.link.meta_epoch();
        let (dp, meta) = self.vfs.parts();
        dp.prefetch(&mut self.link, meta, &pages)?;
        // The batch's reads copy pages it fetched without a validation of
        // their own: if any file changed while it fetched (a truncate by
        // another node can complete meanwhile), refresh the batch's files
        // first, so no read sees fetched pages under a stale size.
        if epoch.is_some() && self.link.meta_epoch() != epoch {
            let inos: alloc::collections::BTreeSet<u64> = pages.iter().map(|p| p.0).collect();
            for ino in inos {
                self.vfs.revalidate(&mut self.link, ino)?;
            }
        }
        Ok(())
    }

    /// Tasks' positioned I/Os, first step (`userland::os::Os::io_start`):
    /// start the misses of each read without waiting; per I/O, `None` if
    /// it can run now or a ticket for [`Node::io_poll`]. `NotSupported`
    /// where the data path has no such reads and with `task_reads=batch`
    /// (the caller runs the batch through [`Node::prepare_batch`]).
    pub fn io_start(&mut self, ios: &[IoSpan]) -> Result<Vec<Option<u64>>, Errno> {
        self.guard()?;
        if !self.task_reads_each || !self.vfs.data_path_ref().has_task_reads() {
            return Err(Errno::NotSupported);
        }
        // A bad descriptor runs at once and reports its own error.
        // A read's ticket waits for its readahead window too.
        let mut out = self.start_reads(ios, |n, io| {
            if io.write || io.len == 0 {
                return None;
            }
            let (ino, r) = n.read_pages(io.fd, io.offset, io.len).ok()?;
            match n.vfs.readahead(io.fd, r.start, r.end) {
                Some((_, w)) => Some((ino, r.start.min(w.start)..r.end.max(w.end))),
                None => Some((ino, r)),
            }
        })?;
        for (slot, io) in out.iter_mut().zip(ios) {
            if io.write && io.len > 0 {
                *slot = self.start_room(io);
            }
        }
        Ok(out)
    }

    /// A task's write of pages not cached here, when the cache is full of
    /// dirty pages (`private`, `net`): a ticket that waits for room being
    /// made in flight (`private/room.rs`), or `None` to run it now.
    fn start_room(&mut self, io: &IoSpan) -> Option<u64> {
        let end = io.offset.saturating_add(io.len as u64).div_ceil(4096);
        let pages = usize::try_from(end - io.offset / 4096).unwrap_or(usize::MAX);
        if !self.vfs.data_path_ref().task_room_may_wait(pages) {
            return None; // the common case: nothing to count
        }
        let (ino, _) = self.vfs.fd_info(io.fd).ok()?;
        let dp = self.vfs.data_path_ref();
        let need = (io.offset / 4096..end)
            .filter(|&idx| !dp.holds(ino, idx))
            .count();
        if need == 0 {
            return None;
        }
        let (dp, meta) = self.vfs.parts();
        dp.task_room_start(&mut self.link, meta, ino, need)
    }

    /// The loop of [`Node::io_start`] and [`Node::mmap_start`]: per I/O,
    /// the pages it reads (`None`: it waits for nothing here, it runs at
    /// once), then a ticket for their misses; the misses of all of them
    /// go out together.
    pub(super) fn start_reads<T>(
        &mut self,
        ios: &[T],
        pages_of: impl Fn(&mut Self, &T) -> Option<(u64, Range<u64>)>,
    ) -> Result<Vec<Option<u64>>, Errno> {
        let epoch = self.link.meta_epoch();
        let mut out = alloc::vec![None; ios.len()];
        for (slot, io) in out.iter_mut().zip(ios) {
            if let Some((ino, pages)) = pages_of(self, io) {
                *slot = self.start_read(ino, pages, epoch)?;
            }
        }
        self.link.send_started(); // `net`: the misses go out together
        Ok(out)
    }

    /// One I/O's share of [`Node::io_start`] (and of
    /// [`Node::mmap_start`]): a ticket for the misses among `pages` of
    /// `ino`, or `None` if it can run now. Only `NotSupported` is an
    /// error: any other leaves the I/O to its own read.
    fn start_read(
        &mut self,
        ino: u64,
        pages: Range<u64>,
        epoch: Option<u64>,
    ) -> Result<Option<u64>, Errno> {
        if pages.is_empty() || self.holds_all(ino, pages.clone()) {
            return Ok(None); // hits allocate nothing
        }
        let (dp, meta) = self.vfs.parts();
        let (first, end) = (pages.start, pages.end);
        match dp.task_reads_start(&mut self.link, meta, ino, first, end, epoch) {
            Ok(t) => Ok(t),
            Err(Errno::NotSupported) => Err(Errno::NotSupported),
            Err(_) => Ok(None),
        }
    }

    /// Take in the answers to tasks' reads (see [`Node::io_poll`]); true
    /// if a ticket may be done since the last call.
    pub fn io_progress(&mut self) -> bool {
        let (dp, meta) = self.vfs.parts();
        dp.task_reads_progress(&mut self.link, meta)
    }

    /// Can the I/O of `ticket` run (see [`Node::io_start`]), as of the
    /// last [`Node::io_progress`]? A file that changed while its pages
    /// came (the metadata epoch moved) is refreshed first, as a batch
    /// does.
    pub fn io_poll(&mut self, ticket: u64) -> Option<Result<(), Errno>> {
        let done = self.vfs.data_path().task_reads_ticket(ticket)?;
        // The last ticket: what no ticket wants any more is waited for.
        let (dp, meta) = self.vfs.parts();
        dp.task_reads_idle(&mut self.link, meta);
        if done.result.is_ok() && done.epoch.is_some() && self.link.meta_epoch() != done.epoch {
            if let Err(e) = self.vfs.revalidate(&mut self.link, done.ino) {
                return Some(Err(e));
            }
        }
        Some(done.result)
    }

    /// Forget `ticket` (its task is gone).
    pub fn io_cancel(&mut self, ticket: u64) {
        let (dp, meta) = self.vfs.parts();
        dp.task_reads_cancel(&mut self.link, meta, ticket);
    }

    /// Nothing else to do: one wait step for the answers of every call in
    /// flight (tasks' reads and metadata calls). Once answers come, it
    /// lingers while more keep coming (each within [`TASK_LINGER_NS`] of
    /// the last): the answers of one flush come a directory service time
    /// apart, and running their tasks together keeps their next requests
    /// together too (one wave of work for the directory, not one request
    /// at a time). An answer that is later (a disk fill) is not waited
    /// for.
    pub fn io_wait(&mut self) {
        // Every task waits: time to free frames ahead of need.
        self.reclaim_ahead(false);
        let before = self.link.calls_in_flight();
        if before == 0 {
            // Tickets wait for pages that cannot start yet (a DIR_INV to
            // come, a full slot): one halting step, notices serviced,
            // instead of spinning (they give up after a call's timeout).
            self.link.env.wait_step(false);
            self.service();
            return;
        }
        self.link.wait_calls(self.vfs.session());
        self.link.drain_late(); // registered answers are stored
        let mut left = self.link.calls_in_flight();
        if left == 0 || left == before {
            return; // all in, or none (a notice, a give-up step)
        }
        let mut last = self.link.env.now_ns();
        while self.link.env.now_ns().saturating_sub(last) < TASK_LINGER_NS {
            self.link.env.wait_step(true);
            self.link.drain_late();
            let now_left = self.link.calls_in_flight();
            if now_left == 0 {
                return;
            }
            if now_left < left {
                left = now_left;
                last = self.link.env.now_ns();
            }
        }
    }
}
