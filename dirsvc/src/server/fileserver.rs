//! The file server: metadata and data requests against the file system,
//! for the rings and for `net` mode alike (the request's variable-length
//! data lives behind a [`Bulk`]). Requests that change cached pages
//! (unlink, truncate, writes through the storage server) also tear down or
//! refresh their single copies. On the ring path a write's block writes
//! may be deferred (`server/writes.rs`): they are staged for the caller,
//! which answers once they landed.

use alloc::vec;
use alloc::vec::Vec;

use crate::pagedir::{Action, Phase};
use fabric::bulk::Bulk;
use fabric::layout::Header;
use fabric::proto::{Errno, Op, PageKey, Request, Response, DIRENT_SIZE};
use fabric::shm::SharedMem;
use fabric::PAGE_SIZE;
use flatfs::BlockDevice;

use super::Directory;

impl<D: BlockDevice> Directory<D> {
    /// A data or size request through a descriptor names the generation
    /// of the file it was opened on ([`fabric::proto::Attr::gen`]): if
    /// the inode is gone or now holds another file (its number reused),
    /// it is refused with [`Errno::StaleHandle`] before anything is read
    /// or changed. Requests without a generation (0) are not checked.
    pub(super) fn check_generation(&mut self, req: &Request) -> Result<(), Errno> {
        let (ino, gen) = match *req {
            Request::Data { ino, gen, .. } | Request::Setattr { ino, gen, .. } => (ino, gen),
            _ => return Ok(()),
        };
        if gen == 0 {
            return Ok(());
        }
        // Without a file system the request fails on its own.
        let Some(fs) = self.fs.as_mut() else {
            return Ok(());
        };
        match fs.getattr(ino) {
            Ok(a) if a.gen() == gen => Ok(()),
            Ok(_) | Err(Errno::NotFound) => {
                log::debug!("request on {ino} of generation {gen}: stale handle");
                Err(Errno::StaleHandle)
            }
            Err(e) => Err(e),
        }
    }

    /// Execute a non-page request whose variable-length data lives in
    /// `bulk`. `mem` is only used for page-directory actions (evicting or
    /// refreshing single-copy frames the request touched).
    pub(crate) fn execute(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        bulk: &mut dyn Bulk,
        req: Request,
    ) -> Result<Response, Errno> {
        if let Some(r) = self.answer_without_files(&req) {
            return Ok(r);
        }
        if req.may_change_files() {
            // Before the change can be seen: a node whose read ends at an
            // unchanged epoch needs no validation round trip.
            Header::new(mem, self.layout).bump_meta_epoch();
        }
        let defer = self.defers(&req);
        self.order_before(mem, &req, defer);
        if self.fs.is_none() {
            return Err(Errno::Unavailable);
        }
        match req {
            Request::Nop
            | Request::Stats
            | Request::PageStats
            | Request::InvStats
            | Request::DelegStats
            | Request::MissStats { .. }
            | Request::Page(_)
            | Request::PageRun(_) => Ok(Response::Ok),
            // Served with the requester known (`server/appendlock.rs`,
            // `server/daxfill.rs`).
            Request::AppendLock { .. } | Request::DaxFill { .. } => Err(Errno::Invalid),
            Request::Path {
                op,
                slot,
                at,
                len,
                exclusive,
            } => self.path_call(mem, bulk, defer, op, (slot, at, len), exclusive),
            Request::Readdir { slot, ino, cookie } => self.readdir(bulk, slot, ino, cookie),
            Request::Getattr { ino } => self
                .fs
                .as_mut()
                .ok_or(Errno::Unavailable)?
                .getattr(ino)
                .map(Response::Attr),
            Request::Setattr {
                ino, size, expect, ..
            } => self.setattr(mem, defer, ino, size, expect),
            Request::Data {
                op,
                slot,
                at,
                ino,
                offset,
                len,
                ..
            } => {
                let (at, buf) = slot_buffer(bulk, slot, at, len)?;
                if op == Op::Write {
                    self.data_write(mem, bulk, defer, (slot, at), (ino, offset), buf)
                } else {
                    self.data_read(bulk, (slot, at), ino, offset, buf)
                }
            }
            Request::Fsync { .. } => self
                .fs
                .as_mut()
                .ok_or(Errno::Unavailable)?
                .sync()
                .map(|_| Response::Ok),
            Request::Locality { slot, ino, first } => self.locality(bulk, slot, ino, first),
        }
    }

    /// The answer to `req` if it needs no file system: a NOP or the
    /// statistics.
    fn answer_without_files(&self, req: &Request) -> Option<Response> {
        Some(match *req {
            Request::Nop => Response::Ok,
            Request::Stats => Response::Stats(self.stats()),
            Request::PageStats => Response::PageStats(self.page_stats()),
            Request::MissStats { kind } => Response::MissStats(self.counters.miss.stats(kind)),
            Request::InvStats => Response::InvStats(self.inv_stats()),
            Request::DelegStats => Response::DelegStats(self.deleg_stats()),
            _ => return None,
        })
    }

    /// A path operation: the path sits in bulk slot `slot` at `at`.
    fn path_call(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        bulk: &mut dyn Bulk,
        defer: bool,
        op: Op,
        (slot, at, len): (u32, u32, u32),
        exclusive: bool,
    ) -> Result<Response, Errno> {
        let fs = self.fs.as_mut().ok_or(Errno::Unavailable)?;
        let (at, buf) = slot_buffer(bulk, slot, at, len)?;
        // The path sits at `at`: read the slot up to its end.
        let mut head = vec![0u8; at + buf.len()];
        bulk.read(slot, &mut head)?;
        let path = head.get(at..).ok_or(Errno::Invalid)?;
        let path = core::str::from_utf8(path).map_err(|_| Errno::Invalid)?;
        match op {
            Op::Lookup => fs.lookup(path).map(Response::Attr),
            Op::Create => self
                .staging(defer, |fs| fs.create(path, exclusive))
                .map(Response::Attr),
            Op::Mkdir => self.staging(defer, |fs| fs.mkdir(path)).map(Response::Attr),
            Op::Unlink => {
                let a = fs.lookup(path)?;
                // Its blocks are freed (a later write may reuse
                // them): a file-server read of them is waited for,
                // page fills still reading them are stale.
                self.drain_file_reads(mem, a.ino);
                self.staging(defer, |fs| fs.unlink(path))?;
                self.size_forgotten(a.ino);
                self.dax_invalidate(mem, a.ino, 0, u64::MAX);
                self.pages.stale_fills(a.ino, 0, u64::MAX);
                let acts = self.pages.evict_file_by(a.ino, 0, self.requester);
                self.run(mem, acts);
                Ok(Response::Ok)
            }
            Op::Rmdir => self
                .staging(defer, |fs| fs.rmdir(path))
                .map(|_| Response::Ok),
            _ => Err(Errno::Invalid),
        }
    }

    /// Directory entries of `ino` from `cookie`, as many as slot `slot`
    /// holds.
    fn readdir(
        &mut self,
        bulk: &mut dyn Bulk,
        slot: u32,
        ino: u64,
        cookie: u64,
    ) -> Result<Response, Errno> {
        let fs = self.fs.as_mut().ok_or(Errno::Unavailable)?;
        let cap = bulk.cap(slot).ok_or(Errno::Invalid)?;
        let max = cap / DIRENT_SIZE;
        let (entries, next) = fs.readdir(ino, cookie, max)?;
        let mut rec = [0u8; DIRENT_SIZE];
        for (k, e) in entries.iter().take(max).enumerate() {
            e.encode(&mut rec);
            bulk.write(slot, k * DIRENT_SIZE, &rec)?;
        }
        Ok(Response::Entries {
            count: entries.len().min(max) as u32,
            next_cookie: next,
        })
    }

    /// Set `ino`'s size (a truncate, or a write's size publication),
    /// tearing down or refreshing the cached pages it changes.
    fn setattr(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        defer: bool,
        ino: u64,
        size: u64,
        expect: Option<u64>,
    ) -> Result<Response, Errno> {
        let fs = self.fs.as_mut().ok_or(Errno::Unavailable)?;
        let old = fs.getattr(ino)?;
        if expect.is_some_and(|v| v != old.version) {
            return Err(Errno::Stale);
        }
        let f = PAGE_SIZE as u64;
        // A growth over pages an earlier shrink is still tearing
        // down waits until they are gone: their owner (or a sharer
        // yet to ack) may have stored this very write into the old
        // frame, which the teardown frees unwritten; published now,
        // the size would show zeros there. The writer redoes its
        // write after the wait, into a fresh copy.
        if size > old.size && self.pages.tearing_down(ino, old.size / f, (size - 1) / f) {
            return Err(Errno::Busy);
        }
        // Pages delegated to another node change: it gives them back
        // first (its list may hold the page the cut keeps in part, and
        // pages a growth would show), and the caller tries again.
        let lo = old.size.min(size) / f;
        if self
            .pages
            .delegated_to_other(ino, lo, u64::MAX, self.requester)
        {
            let acts = self.pages.recall_between(ino, lo, u64::MAX);
            self.run(mem, acts);
            return Err(Errno::Busy);
        }
        // From the page holding the lower end on, the blocks
        // change (cut, zeroed past the end, or freed): fills of
        // them in flight are stale.
        self.pages
            .stale_fills(ino, old.size.min(size) / f, u64::MAX);
        if size < old.size && !size.is_multiple_of(f) {
            // The page holding the new end of file survives in
            // part: its head may be dirty in the owner's frame
            // (strong mode), so write it back before cutting.
            let key = PageKey { ino, idx: size / f };
            if let Some(gfn) = self.owned_frame(&key) {
                self.run(mem, vec![Action::WriteBack { key, gfn }]);
                if !defer {
                    // The cut below writes synchronously: after
                    // it. (Staged, it is a barrier job queued
                    // after the write-back's.)
                    self.drain_writes(mem, None);
                }
            }
        }
        // A growth's record waits for the cached pages under it.
        let hold = self.size_changing(ino, old.size, size);
        let a = self.staging(defer, |fs| {
            fs.hold_size(ino, hold)?;
            fs.set_size(ino, size)
        })?;
        self.dax_invalidate(mem, ino, old.size.min(size) / f, u64::MAX);
        if size < old.size {
            // Cached pages wholly past the new end of file are
            // stale: tear them down cluster-wide.
            let from = self.cut_tail(mem, ino, size);
            let acts = self.pages.evict_file_by(ino, from, self.requester);
            self.run(mem, acts);
        }
        Ok(Response::Attr(a))
    }

    /// A write through the file server: the data sits in bulk slot `slot`
    /// at `at`; the frames of cached pages it touches are refreshed.
    fn data_write(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        bulk: &mut dyn Bulk,
        defer: bool,
        (slot, at): (u32, usize),
        (ino, offset): (u64, u64),
        mut buf: Vec<u8>,
    ) -> Result<Response, Errno> {
        let fs = self.fs.as_mut().ok_or(Errno::Unavailable)?;
        // The data sits at `at`: read the slot up to its end.
        let mut head = vec![0u8; at + buf.len()];
        bulk.read(slot, &mut head)?;
        buf.copy_from_slice(head.get(at..).ok_or(Errno::Invalid)?);
        let old_end = fs.getattr(ino).map_or(offset, |a| a.size);
        if !buf.is_empty() {
            let f = PAGE_SIZE as u64;
            let end = offset.checked_add(buf.len() as u64).ok_or(Errno::Invalid)?;
            let last = (end - 1) / f;
            // A growth over pages a shrink is still tearing down waits,
            // as a size publication does: it would patch their frames,
            // and their owner's later stores inside the new size would
            // go with the frames. The writer keeps its pages dirty and
            // sends them again once the teardown ended.
            if end > old_end && self.pages.tearing_down(ino, old_end / f, last) {
                return Err(Errno::Busy);
            }
            // Pages delegated to another node may hold newer bytes than
            // the disk: they are given back first, the writer tries again.
            let first = old_end.min(offset) / f;
            if self
                .pages
                .delegated_to_other(ino, first, last, self.requester)
            {
                let acts = self.pages.recall_between(ino, first, last);
                self.run(mem, acts);
                return Err(Errno::Busy);
            }
            // The blocks it writes (from the old end, when it
            // starts past it: the gap reads as zeros): fills
            // of them in flight are stale.
            let from = old_end.min(offset);
            self.pages.stale_fills(ino, from / f, last);
        }
        let (n, attr) = self.staging(defer, |fs| fs.write(ino, offset, &buf))?;
        if n > 0 {
            self.refresh_frames(mem, ino, old_end, offset, &buf[..n])?;
            let f = PAGE_SIZE as u64;
            let last = offset.saturating_add(n as u64 - 1) / f;
            self.dax_invalidate(mem, ino, old_end.min(offset) / f, last);
        }
        Ok(Response::Data {
            bytes: n as u32,
            attr,
        })
    }

    /// A read through the file server into bulk slot `slot` at `at`.
    fn data_read(
        &mut self,
        bulk: &mut dyn Bulk,
        (slot, at): (u32, usize),
        ino: u64,
        offset: u64,
        mut buf: Vec<u8>,
    ) -> Result<Response, Errno> {
        let fs = self.fs.as_mut().ok_or(Errno::Unavailable)?;
        let lookup = self.counters.miss.now();
        let n = fs.read(ino, offset, &mut buf)?;
        let disk = self.counters.miss.now();
        bulk.write(slot, at, &buf[..n])?;
        let attr = fs.getattr(ino)?;
        let filled = self.counters.miss.now();
        self.counters.miss.file_read(lookup, disk, filled);
        Ok(Response::Data {
            bytes: n as u32,
            attr,
        })
    }

    /// Will `req`'s block writes be staged for the write queue rather than
    /// written synchronously? Writes, namespace changes and truncations
    /// from the rings, once writes are asynchronous (`Batch::begin`); not
    /// a creation that must first raise the file system's sequence floor
    /// (flushed before the record: [`flatfs::Fs::next_create_raises_floor`]).
    pub(super) fn defers(&self, req: &Request) -> bool {
        if !self.io.batch.defers() {
            return false;
        }
        match *req {
            Request::Data { op, .. } => op == Op::Write,
            Request::Setattr { .. } => true,
            Request::Path { op, .. } => match op {
                Op::Unlink | Op::Rmdir => true,
                Op::Create | Op::Mkdir => self
                    .fs
                    .as_ref()
                    .is_some_and(|fs| !fs.next_create_raises_floor()),
                _ => false,
            },
            _ => false,
        }
    }

    /// Run `f` on the file system, its block writes staged into
    /// the sweep's `Batch` when `defer` (see [`Directory::defers`]). The staging
    /// ends with `f`: what runs after it (page-directory actions, whose
    /// write-backs stage their own jobs) writes on its own.
    fn staging<R>(
        &mut self,
        defer: bool,
        f: impl FnOnce(&mut flatfs::Fs<D>) -> Result<R, Errno>,
    ) -> Result<R, Errno> {
        let fs = self.fs.as_mut().ok_or(Errno::Unavailable)?;
        if defer {
            fs.begin_deferred();
        }
        let r = f(fs);
        if defer {
            self.io.batch.stage(fs.end_deferred());
        }
        r
    }

    /// Reconcile the single copy with a write through the file server of
    /// `data` at `offset` of `ino`, whose end of file was `old_end`: the
    /// bytes written go into the frame of every cached page the write
    /// touched, also one being invalidated whose owner still reads it (a
    /// page torn down by a truncate or unlink of an earlier life of the
    /// file stays readable in its owner's frame until the sharers acked).
    /// Only those bytes: a frame's other bytes may be the owner's writes
    /// not written back yet (relaxed mode's close writes back private
    /// copies, not frames), which a reload from disk would lose. In an
    /// evicted page the bytes from the old end to the write read as zeros
    /// now (the gap), not as the torn-down file's.
    fn refresh_frames(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        ino: u64,
        old_end: u64,
        offset: u64,
        data: &[u8],
    ) -> Result<(), Errno> {
        let f = PAGE_SIZE as u64;
        let Some(len) = (data.len() as u64).checked_sub(1) else {
            return Ok(());
        };
        let last = offset.checked_add(len).ok_or(Errno::Invalid)? / f;
        // Cached pages only (a gap may span many pages nobody holds).
        for key in self
            .pages
            .cached_between(ino, old_end.min(offset) / f, last)
        {
            let Some(gfn) = self.pages.frame_held(&key) else {
                continue;
            };
            if old_end < offset && self.pages.evicted_unreleased(&key) {
                self.zero_frame(mem, gfn, key.idx, old_end, offset)?;
            }
            self.patch_frame(mem, gfn, key.idx, offset, data)?;
        }
        Ok(())
    }

    /// Zero the bytes of file range `[from, to)` that fall in page `idx`,
    /// held in frame `gfn`.
    fn zero_frame(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        gfn: u64,
        idx: u64,
        from: u64,
        to: u64,
    ) -> Result<(), Errno> {
        let f = PAGE_SIZE as u64;
        let start = idx.checked_mul(f).ok_or(Errno::Invalid)?;
        let (lo, hi) = (from.max(start), to.min(start.saturating_add(f)));
        if lo < hi {
            self.patch_frame(mem, gfn, idx, lo, &vec![0u8; (hi - lo) as usize])?;
        }
        Ok(())
    }

    /// `ino` shrank to `size`: the page holding a new end inside it stays
    /// cached (as Linux keeps the partial page of a truncate), only its
    /// bytes past the end are zeroed in its frame, so a later write into
    /// its head (inside the file: no size to publish) lands in a page
    /// nobody tears down, and a later growth reads zeros there, not the
    /// cut bytes. Its replicas are revoked (the zeros are a store). Returns
    /// the first page to tear down: the next one, or that page itself if
    /// its frame could not be zeroed.
    fn cut_tail(&mut self, mem: &(impl SharedMem + ?Sized), ino: u64, size: u64) -> u64 {
        let f = PAGE_SIZE as u64;
        let key = PageKey { ino, idx: size / f };
        if size.is_multiple_of(f) {
            return key.idx;
        }
        if let Some(gfn) = self.pages.frame_held(&key) {
            let end = key.idx.saturating_add(1).saturating_mul(f);
            if self.zero_frame(mem, gfn, key.idx, size, end).is_err() {
                return key.idx;
            }
            self.revoke_replicas(mem, key);
        }
        key.idx + 1
    }

    /// The owner's frame of page `key` if the page is cached and settled
    /// (not being filled or invalidated).
    fn owned_frame(&self, key: &PageKey) -> Option<u64> {
        self.pages
            .entry(key)
            .filter(|e| e.phase == Phase::Owned)
            .map(|e| e.gfn)
    }
}

/// A zeroed buffer of `len` bytes for slot `slot`, if the request's length
/// fits the slot (both come from an untrusted request).
fn slot_buffer(
    bulk: &(impl Bulk + ?Sized),
    slot: u32,
    at: u32,
    len: u32,
) -> Result<(usize, Vec<u8>), Errno> {
    let cap = bulk.cap(slot).ok_or(Errno::Invalid)?;
    let (at, len) = (at as usize, len as usize);
    match at.checked_add(len) {
        Some(end) if end <= cap => Ok((at, vec![0u8; len])),
        _ => Err(Errno::Invalid),
    }
}
