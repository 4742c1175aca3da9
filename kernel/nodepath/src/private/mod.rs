//! The private-cache data path (modes `private` and `net`): a per-node
//! page cache with close-to-open consistency, filled through the
//! directory's file server (the rings and bulk slots, or TCP in `net`
//! mode: [`Link`] picks the transport).
//!
//! Cache rule: every answer from the directory carries the inode's
//! `version`. A cached file whose version differs from the directory's at
//! open (or after an operation) loses its clean pages.
//!
//! Writes (`baseline_writes=back`, the default, as the Linux page cache
//! under NFS or virtiofs): a write to a cached page is a copy; a write to
//! an uncached page allocates one (a partial page inside the file is read
//! first, a full page or one past the end is not). A write past the end
//! sets the node's local size ([`Meta::set_local_size`]). Dirty pages go
//! to the file server ([`Op::Write`], contiguous pages in one request of
//! up to a bulk slot) at fsync, at close (close-to-open), at sync and
//! shutdown, and oldest first, [`WRITEBACK_BATCH`] at a time, when the
//! cache is full. Our own write-backs move the directory's version by one
//! each, which keeps our pages; any other move drops the clean ones.
//! `baseline_writes=through`: every write goes to the directory, pages
//! this node holds are patched and kept only if the version moved by
//! exactly our write. Clean pages are all dropped when the cache is full
//! ([`MAX_CACHED_PAGES`]).

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use fabric::config::{BaselineWrites, Mode};
use fabric::proto::{Attr, Errno, Op, Request, Response};

use osapi::keys::cache as keys;

use crate::env::Env;
use crate::link::{Link, Session};
use crate::vfs::{DataPath, Meta, WbStart, WbWhy};

type Page = Box<[u8; PAGE]>;

mod ahead;
pub mod dax;
mod inflight;
mod reads;
mod room;
mod writeback;

use fabric::PAGE_SIZE as PAGE;
/// Most cached pages before the cache is emptied.
pub const MAX_CACHED_PAGES: usize = 2048;
/// Reads [`Private::prefetch`] puts in flight together.
const PREFETCH_BATCH: usize = 32;
/// Dirty pages written back together (oldest first) when the cache is
/// full.
pub const WRITEBACK_BATCH: usize = 32;

/// A read of pages `[first, first+n)` of generation `gen` of `ino` into
/// bulk slot 1.
fn read_req((ino, gen): (u64, u64), first: u64, n: usize) -> Request {
    Request::Data {
        gen,
        op: Op::Read,
        slot: 1,
        at: 0,
        ino,
        offset: first * PAGE as u64,
        len: (n * PAGE) as u32,
    }
}

/// The private-cache path.
pub struct Private {
    mode: Mode,
    writes: BaselineWrites,
    /// Most cached pages.
    max_pages: usize,
    /// Page reads served from the cache / fetched.
    hits: u64,
    misses: u64,
    pages: BTreeMap<u64, BTreeMap<u64, Page>>,
    cached_pages: usize,
    /// Dirty pages (inode, index) and when each was first dirtied.
    dirty: BTreeMap<(u64, u64), u64>,
    /// The same pages, oldest first.
    dirty_age: BTreeMap<u64, (u64, u64)>,
    /// The bytes of each dirty page this node wrote (`crate::dirty`).
    written: BTreeMap<(u64, u64), crate::dirty::DirtyBytes>,
    next_age: u64,
    /// Pages written back.
    written_back: u64,
    /// Tasks' write-backs in flight (fsync, close).
    inflight: inflight::InFlight,
    /// Tasks' reads in flight (`private/reads.rs`).
    reads: reads::ReadJobs,
    /// Write-back jobs in flight that make room for tasks' writes
    /// (`private/room.rs`), and the tickets that waited for room.
    room: Vec<u64>,
    room_tickets: u64,
    /// Free pages kept between these marks ahead of need (`ahead`).
    marks: crate::watermark::Watermarks,
    /// Pages freed ahead of need, and reads or writes that found the
    /// cache full and made room first.
    ahead: u64,
    waited: u64,
    /// `daxfs` mode: the shared slot cache (`private/dax.rs`), known once
    /// joined.
    dax: Option<dax::Dax>,
    /// `daxfs` mode: the slots this node claimed and had filled, with the
    /// page each was filled with (what `cache drop` gives back).
    dax_filled: BTreeMap<usize, daxcache::pcache::Tag>,
}

impl<E: Env> Session<E> for Private {
    /// A new session: tasks' reads of the old one are void.
    fn joined(&mut self, env: &E, layout: fabric::layout::Layout, node: u32) {
        self.reads_session_ended();
        if self.mode == Mode::Daxfs {
            self.dax = dax::Dax::new(&layout, node);
            self.dax_filled.clear();
            match &mut self.dax {
                Some(d) => d.start_sweeps(env.now_ns()),
                None => log::error!("daxfs: the region has no slot cache for node {node}"),
            }
        }
    }
}

impl Private {
    /// An empty cache for `mode` (`private` or `net`) of at most
    /// `max_pages` pages (0: [`MAX_CACHED_PAGES`]).
    pub fn new(mode: Mode, writes: BaselineWrites, max_pages: usize) -> Private {
        Private {
            mode,
            writes,
            max_pages: if max_pages == 0 {
                MAX_CACHED_PAGES
            } else {
                max_pages
            },
            hits: 0,
            misses: 0,
            pages: BTreeMap::new(),
            cached_pages: 0,
            dirty: BTreeMap::new(),
            dirty_age: BTreeMap::new(),
            written: BTreeMap::new(),
            next_age: 0,
            written_back: 0,
            inflight: inflight::InFlight::default(),
            reads: reads::ReadJobs::default(),
            room: Vec::new(),
            room_tickets: 0,
            marks: crate::watermark::Watermarks::OFF,
            ahead: 0,
            waited: 0,
            dax: None,
            dax_filled: BTreeMap::new(),
        }
    }

    /// Dirty pages not written back yet.
    pub fn dirty_pages(&self) -> usize {
        self.dirty.len()
    }

    fn is_dirty(&self, ino: u64, idx: u64) -> bool {
        self.dirty.contains_key(&(ino, idx))
    }

    /// (page hits, pages fetched, pages cached).
    pub fn counts(&self) -> (u64, u64, usize) {
        (self.hits, self.misses, self.cached_pages)
    }

    /// Forget the clean pages of `ino` (dirty ones stay).
    fn drop_pages(&mut self, ino: u64) {
        let dirty = &self.dirty;
        if let Some(p) = self.pages.get_mut(&ino) {
            let before = p.len();
            p.retain(|idx, _| dirty.contains_key(&(ino, *idx)));
            self.cached_pages -= before - p.len();
        }
    }

    /// Forget every clean page.
    fn drop_all(&mut self) {
        let inos: Vec<u64> = self.pages.keys().copied().collect();
        for ino in inos {
            self.drop_pages(ino);
        }
        self.pages.retain(|_, p| !p.is_empty());
    }

    /// Bring the cache of `a.ino` in line with the directory's view.
    fn revalidate(&mut self, meta: &mut Meta, a: &Attr) {
        if meta.learn(a) {
            self.drop_pages(a.ino);
        }
    }

    fn cached(&self, ino: u64, idx: u64) -> bool {
        self.pages.get(&ino).is_some_and(|p| p.contains_key(&idx))
    }

    /// Fetch pages `[first, first+n)` of `ino` (one round trip for up to a
    /// bulk slot's worth).
    fn fetch<E: Env>(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        ino: u64,
        first: u64,
        n: usize,
    ) -> Result<(), Errno> {
        self.settle_reads(link, meta); // slot 1 is ours alone now
        if self.cached(ino, first) {
            return Ok(()); // a task's read in flight brought it
        }
        let cap = link.bulk_cap(1)?;
        let n = n.min(cap / PAGE).max(1);
        let r = link.fs_call(&read_req((ino, meta.gen(ino)), first, n), self)?;
        let Response::Data { bytes, attr } = r else {
            return Err(Errno::Io);
        };
        let t0 = link.env.now_ns();
        let bytes = (bytes as usize).min(n * PAGE);
        let mut data = alloc::vec![0u8; bytes];
        link.bulk_read(1, &mut data)?;
        self.install(meta, ino, (first, n), &data, &attr, false);
        link.add_fill(t0);
        Ok(())
    }

    /// Put the answer of a read of pages `[first, first+n)` into the cache
    /// (dirty pages keep our newer bytes). `only_absent`: a cached page
    /// keeps its bytes too (a task's read answered after the page was
    /// written or filled meanwhile, `private/reads.rs`); only the pages
    /// filled count as fetched.
    fn install(
        &mut self,
        meta: &mut Meta,
        ino: u64,
        (first, n): (u64, usize),
        data: &[u8],
        attr: &Attr,
        only_absent: bool,
    ) {
        let bytes = data.len().min(n * PAGE);
        self.revalidate(meta, attr);
        if self.cached_pages + n > self.max_pages {
            self.drop_all();
        }
        let dirty = &self.dirty;
        let entry = self.pages.entry(ino).or_default();
        let mut skipped = 0u64;
        for i in 0..n {
            let lo = i * PAGE;
            if lo >= bytes && (first + i as u64) * PAGE as u64 >= attr.size {
                break;
            }
            if dirty.contains_key(&(ino, first + i as u64)) {
                continue; // our newer data stays
            }
            if only_absent && entry.contains_key(&(first + i as u64)) {
                skipped += 1;
                continue;
            }
            let mut page = Box::new([0u8; PAGE]);
            let hi = bytes.min(lo + PAGE);
            if hi > lo {
                page[..hi - lo].copy_from_slice(&data[lo..hi]);
            }
            if entry.insert(first + i as u64, page).is_none() {
                self.cached_pages += 1;
            }
        }
        self.misses += n as u64 - skipped;
    }
}

impl<E: Env> DataPath<E> for Private {
    fn mode(&self) -> Mode {
        self.mode
    }

    fn sizes_move(&self) -> bool {
        false
    }

    fn forget_pages(&mut self, ino: u64) {
        self.void_reads(Some(ino));
        self.drop_pages(ino);
    }

    fn stale_gen(&mut self, ino: u64) {
        // Tasks' write-backs in flight took their bytes and carry the
        // older generation: refused, they leave nothing to clean.
        self.void_reads(Some(ino));
        self.discard_from(ino, 0);
    }

    fn read(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        ino: u64,
        pos: u64,
        buf: &mut [u8],
    ) -> Result<usize, Errno> {
        let want = buf.len();
        let mut done = 0;
        if self.mode == Mode::Daxfs {
            // The caller clipped the read to the file's size.
            while done < want {
                let at = pos + done as u64;
                let in_page = (at % PAGE as u64) as usize;
                let n = (PAGE - in_page).min(want - done);
                let idx = at / PAGE as u64;
                self.dax_read_page(link, ino, idx, in_page, &mut buf[done..done + n])?;
                done += n;
            }
            return Ok(done);
        }
        while done < want {
            let at = pos + done as u64;
            let idx = at / PAGE as u64;
            let in_page = (at % PAGE as u64) as usize;
            if self.cached(ino, idx) {
                self.hits += 1;
            } else {
                let pages_left = (want - done + in_page).div_ceil(PAGE);
                let cap = (link.bulk_cap(1)? / PAGE).max(1);
                self.make_room(link, meta, pages_left.min(cap))?;
                self.fetch(link, meta, ino, idx, pages_left)?;
            }
            let n = (PAGE - in_page).min(want - done);
            match self.pages.get(&ino).and_then(|c| c.get(&idx)) {
                Some(page) => buf[done..done + n].copy_from_slice(&page[in_page..in_page + n]),
                // A hole below our local size (buffered writes past the
                // directory's end): zeros.
                None if meta.local_size(ino).is_some_and(|s| at < s) => buf[done..done + n].fill(0),
                None => break, // the file shrank under us
            }
            done += n;
        }
        Ok(done)
    }

    fn write(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        ino: u64,
        pos: u64,
        data: &[u8],
    ) -> Result<usize, Errno> {
        match self.writes {
            BaselineWrites::Back => self.write_buffered(link, meta, ino, pos, data),
            BaselineWrites::Through => self.write_through(link, meta, ino, pos, data),
        }
    }

    /// Buffered writes go to the file server first, so that it cuts the
    /// file at the right place.
    fn truncate_prepare(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        ino: u64,
        _size: u64,
    ) -> Result<(), Errno> {
        self.write_back_ino(link, meta, ino)?;
        meta.clear_local_size(ino);
        Ok(())
    }

    /// The buffered file goes to the directory (close-to-open).
    fn close(&mut self, link: &mut Link<E>, meta: &mut Meta, ino: u64) -> Result<(), Errno> {
        let r = self.write_back_ino(link, meta, ino);
        self.reported(meta, ino, r)
    }

    /// The same write-back for all three: the file's dirty pages.
    fn write_back_start(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        ino: u64,
        _why: WbWhy,
    ) -> Result<Option<WbStart>, Errno> {
        Private::write_back_start(self, link, meta, ino).map(Some)
    }

    fn write_back_poll(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        id: u64,
    ) -> Option<Result<(), Errno>> {
        Private::write_back_poll(self, link, meta, id)
    }

    fn fsync_prepare(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        ino: u64,
    ) -> Result<(), Errno> {
        let r = self.write_back_ino(link, meta, ino);
        self.reported(meta, ino, r)
    }

    fn write_back_all(&mut self, link: &mut Link<E>, meta: &mut Meta) -> Result<(), Errno> {
        let keys: Vec<(u64, u64)> = self.dirty.keys().copied().collect();
        self.write_back(link, meta, &keys)
    }

    /// Pages past the new end go, dirty or not.
    fn evict(&mut self, _env: &E, ino: u64, size: u64) {
        self.void_reads(Some(ino));
        self.discard_from(ino, size.div_ceil(PAGE as u64));
    }

    fn holds(&self, ino: u64, idx: u64) -> bool {
        self.cached(ino, idx)
    }

    /// Every page of `pages` that is not cached comes in, with the reads in
    /// flight together where the transport can pipeline them (`net`: up to
    /// 32 requests per batch; the rings: one at a time). Contiguous pages
    /// of a file go in one read of up to a bulk slot.
    fn prefetch(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        pages: &[(u64, u64)],
    ) -> Result<(), Errno> {
        if self.mode == Mode::Daxfs {
            return Ok(()); // no private cache to fill
        }
        self.settle_reads(link, meta); // slot 1 is ours alone now
        let max_run = (link.bulk_cap(1)? / PAGE).max(1);
        let mut runs: Vec<(u64, u64, usize)> = Vec::new();
        for &(ino, idx) in pages {
            let Some(m) = meta.get(ino) else {
                continue; // not open here: nothing to fill
            };
            if self.cached(ino, idx) || idx * PAGE as u64 >= m.size {
                continue;
            }
            match runs.last_mut() {
                Some((i, first, n)) if *i == ino && *first + *n as u64 == idx && *n < max_run => {
                    *n += 1
                }
                _ => runs.push((ino, idx, 1)),
            }
        }
        for chunk in runs.chunks(PREFETCH_BATCH) {
            let n: usize = chunk.iter().map(|r| r.2).sum();
            self.make_room(link, meta, n)?;
            let reqs: Vec<Request> = chunk
                .iter()
                .map(|&(ino, first, n)| read_req((ino, meta.gen(ino)), first, n))
                .collect();
            let answers = link.fs_read_batch(&reqs, self)?;
            for (&(ino, first, n), (resp, data)) in chunk.iter().zip(answers) {
                match resp {
                    Response::Data { attr, .. } => {
                        self.install(meta, ino, (first, n), &data, &attr, false)
                    }
                    Response::Err(e) => return Err(e),
                    _ => return Err(Errno::Io),
                }
            }
        }
        Ok(())
    }

    fn has_task_reads(&self) -> bool {
        // `private` on the rings, `net` over its connection; `daxfs`
        // reads the slot cache synchronously.
        self.mode != Mode::Daxfs
    }

    fn task_reads_start(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        ino: u64,
        first: u64,
        end: u64,
        epoch: Option<u64>,
    ) -> Result<Option<u64>, Errno> {
        Ok(self.task_reads_begin(link, meta, ino, first, end, epoch))
    }

    fn task_reads_progress(&mut self, link: &mut Link<E>, meta: &mut Meta) -> bool {
        self.reads_progress(link, meta);
        self.room_progress(link, meta);
        self.reads_changed()
    }

    fn task_room_may_wait(&self, pages: usize) -> bool {
        self.room_may_wait(pages)
    }

    fn task_room_start(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        ino: u64,
        need: usize,
    ) -> Option<u64> {
        self.room_start(link, meta, ino, need)
    }

    fn task_reads_ticket(&mut self, id: u64) -> Option<crate::tickets::TicketDone> {
        self.reads_ticket(id)
    }

    fn task_reads_cancel(&mut self, link: &mut Link<E>, meta: &mut Meta, id: u64) {
        self.reads_cancel(link, meta, id);
    }

    fn task_reads_idle(&mut self, link: &mut Link<E>, meta: &mut Meta) {
        self.reads_idle(link, meta);
    }

    /// Dirty pages are written back first (tasks' reads in flight are
    /// taken in before). `daxfs`: the shared slots this node filled.
    fn drop_cache(&mut self, link: &mut Link<E>, meta: &mut Meta) -> Result<String, Errno> {
        if self.dax.is_some() {
            return self.dax_drop(link);
        }
        self.settle_reads(link, meta);
        DataPath::<E>::write_back_all(self, link, meta)?;
        self.drop_all();
        Ok("dropped the private cache".to_string())
    }

    /// The baseline's invalidation: drop one page of our own private cache
    /// (no one else holds it), as DPC's 11 us Linux figure does. A dirty
    /// page stays (false).
    fn invalidate_page(&mut self, _link: &mut Link<E>, ino: u64, idx: u64) -> Result<bool, Errno> {
        // `daxfs`: no copy of our own; the shared slots are freed by the
        // file server on a write.
        if self.dax.is_some() {
            return Err(Errno::NotSupported);
        }
        if self.is_dirty(ino, idx) {
            return Ok(false);
        }
        let gone = self
            .pages
            .get_mut(&ino)
            .and_then(|c| c.remove(&idx))
            .is_some();
        if gone {
            self.cached_pages -= 1;
        }
        Ok(gone)
    }

    fn set_watermarks(&mut self, marks: crate::watermark::Watermarks) {
        self.marks = marks;
    }

    fn reclaim_ahead(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        _settle: bool,
    ) -> Result<usize, Errno> {
        // `daxfs` mode keeps no private pages: its background work is
        // MH-clock's sweep of the shared slots.
        if self.dax.is_some() {
            self.dax_sweep(link);
            return Ok(0);
        }
        self.reclaim_ahead_now(link, meta)
    }

    fn dax_hold(
        &mut self,
        link: &mut Link<E>,
        ino: u64,
        idx: u64,
        pin: bool,
    ) -> Result<String, Errno> {
        let what = if pin {
            dax::Hold::Pin
        } else {
            dax::Hold::Claim
        };
        self.dax_hold_page(link, ino, idx, what)
    }

    fn stats(&self) -> Result<Vec<(String, String)>, Errno> {
        let (hits, fetched, cached) = self.counts();
        let mut v: Vec<(String, String)> = Vec::new();
        let mut put = |k: &str, x: String| v.push((k.to_string(), x));
        put(keys::RESIDENT_PRIVATE, format!("{cached}"));
        put(keys::REMOTE_MAPPINGS, "0".to_string());
        put(keys::HITS_LOCAL, format!("{hits}"));
        put(keys::HITS_REMOTE, "0".to_string());
        put(keys::MISSES, format!("{fetched}"));
        put(keys::DISK_READS_PAGES, format!("{fetched}"));
        put(keys::BASELINE_WRITES, self.writes.as_str().to_string());
        put(keys::DIRTY_PAGES, format!("{}", self.dirty.len()));
        put(keys::PAGES_WRITTEN_BACK, format!("{}", self.written_back));
        {
            let f = &self.inflight.q;
            put(
                keys::TASK_WRITE_BACKS,
                format!("{}/{}", f.started, f.max_jobs),
            );
        }
        let (sent, max) = self.reads_counts();
        put(keys::TASK_READS, format!("{sent}/{max}"));
        put(keys::TASK_ROOM_WAITS, format!("{}", self.room_count()));
        put(keys::RECLAIMS_AHEAD, format!("{}", self.ahead));
        put(keys::MISSES_WAITED_RECLAIM, format!("{}", self.waited));
        put(
            keys::RECLAIM_WATERMARKS,
            watermarks(self.marks, self.max_pages),
        );
        if let Some(d) = &self.dax {
            put(keys::DAXFS_SLOTS, format!("{}", d.slots()));
            put(keys::DAXFS_HITS, format!("{}", d.hits));
            put(keys::DAXFS_CLAIMS, format!("{}", d.claims));
            put(keys::DAXFS_WAITS, format!("{}", d.waits));
            put(
                keys::DAXFS_SWEEPS,
                format!("{}/{}", d.sweeps_won, d.sweeps_lost),
            );
        }
        Ok(v)
    }
}

/// The `cache stats` value of the marks for `total` frames.
pub(crate) fn watermarks(marks: crate::watermark::Watermarks, total: usize) -> String {
    if marks.off() {
        return "off".to_string();
    }
    let (low, high) = marks.frames(total);
    format!("{low}/{high}")
}
