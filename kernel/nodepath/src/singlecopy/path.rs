//! The single-copy path as the VFS's [`DataPath`] (modes `strong` and
//! `relaxed`).

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::AtomicU64;
use osapi::keys;

use fabric::layout::Layout;
use fabric::proto::{Errno, PageKey, Request};

use super::{ScState, BATCH};
use crate::env::Env;
use crate::link::{Link, Session};
use crate::pagecache::{Mode, PAGE};
use crate::tickets::TicketDone;
use crate::vfs::{getattr, DataPath, Meta, WbStart, WbWhy};

mod copies;
mod publish;

/// Most private copies (relaxed mode): each is a 4 KiB heap page. At the
/// bound the oldest [`PRIVATE_WRITEBACK_BATCH`] are written back and
/// freed.
pub const MAX_PRIVATE_PAGES: usize = 1024;
/// Private copies written back together at the bound, oldest first.
pub const PRIVATE_WRITEBACK_BATCH: usize = 32;

/// Most times a write is redone because another node changed the file
/// before its size was published.
pub const MAX_PUBLISH_TRIES: u32 = 16;

/// The single-copy path: the protocol session and the emulated CXL
/// latency of copies from a peer's frame.
pub struct SingleCopy {
    st: ScState,
    cxl_ns: u64,
    /// Most private copies (relaxed).
    max_private: usize,
    /// Private copies by when they were made (relaxed), both ways; may
    /// name copies already written back (skipped when met).
    private_age: BTreeMap<PageKey, u64>,
    private_order: BTreeMap<u64, PageKey>,
    next_age: u64,
    /// Moves whenever private copies were lost unwritten (see
    /// [`DataPath::losses`]).
    losses: Arc<AtomicU64>,
}

impl SingleCopy {
    /// Not joined yet; `remote_limit` remote mappings at most,
    /// `max_private` private copies (0: [`MAX_PRIVATE_PAGES`]).
    pub fn new(mode: Mode, remote_limit: usize, cxl_ns: u64, max_private: usize) -> SingleCopy {
        SingleCopy {
            st: ScState::new(mode, remote_limit),
            cxl_ns,
            max_private: if max_private == 0 {
                MAX_PRIVATE_PAGES
            } else {
                max_private
            },
            private_age: BTreeMap::new(),
            losses: Arc::new(AtomicU64::new(0)),
            private_order: BTreeMap::new(),
            next_age: 0,
        }
    }

    /// Ask for delegations of file ranges (strong mode; boot option
    /// `delegation`).
    pub fn set_delegation(&mut self, on: bool) {
        self.st.set_delegation(on);
    }

    /// The eviction policy every cache of this node starts with.
    pub fn set_default_policy(&mut self, p: fabric::config::PolicyName) {
        let mut k = self.st.controls();
        k.policy = p;
        self.st.set_controls(k);
    }

    /// Write back `ino` (its size from `meta`).
    fn fsync_ino<E: Env>(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        ino: u64,
    ) -> Result<(), Errno> {
        let size = meta.size_of(ino);
        let r = self.st.fsync(link, (ino, meta.gen(ino)), size);
        self.written_back(meta, ino);
        r
    }

    /// Write back every inode with dirty pages or private copies.
    fn fsync_dirty<E: Env>(&mut self, link: &mut Link<E>, meta: &mut Meta) -> Result<(), Errno> {
        let inos = self
            .st
            .coh
            .as_ref()
            .map(|c| c.cache.dirty_inodes())
            .unwrap_or_default();
        for ino in inos {
            if meta.get(ino).is_none() {
                let a = getattr(link, &mut self.st, ino)?;
                meta.learn(&a);
            }
            self.fsync_ino(link, meta, ino)?;
        }
        Ok(())
    }
}

impl<E: Env> Session<E> for SingleCopy {
    fn joined(&mut self, env: &E, layout: Layout, node: u32) {
        self.losing_copies();
        self.st.joined(env, layout, node);
    }
    fn service(&mut self, env: &E) -> usize {
        self.st.service(env)
    }
    fn disconnect(&mut self, env: &E) {
        self.losing_copies();
        self.st.disconnect(env);
    }
    fn broken(&self) -> bool {
        Session::<E>::broken(&self.st)
    }
    fn quiet(&mut self) -> bool {
        Session::<E>::quiet(&mut self.st)
    }
}

impl<E: Env> DataPath<E> for SingleCopy {
    fn mode(&self) -> Mode {
        self.st.mode
    }

    fn set_append_deadline(&mut self, deadline: Option<u64>) {
        self.st.set_append_deadline(deadline);
    }

    /// Pages are kept coherent by the protocol; only the size moves.
    fn sizes_move(&self) -> bool {
        true
    }

    fn losses(&self) -> Option<Arc<AtomicU64>> {
        Some(self.losses.clone())
    }

    fn evict(&mut self, env: &E, ino: u64, size: u64) {
        self.st.evict_local(env, ino, size);
    }

    /// Relaxed private copies of the older file go (its frames are the
    /// directory's to tear down: the removal did).
    fn stale_gen(&mut self, ino: u64) {
        self.drop_copies(ino);
    }

    /// Relaxed mode is close-to-open: replicas of the file's pages go (see
    /// `pagecache::promote`). Strong replicas never miss a write (every
    /// store revokes them first), so they stay.
    fn opened(&mut self, ino: u64) {
        if self.st.mode != Mode::Relaxed {
            return;
        }
        if let Some(c) = self.st.cache() {
            c.drop_replicas(ino);
        }
    }

    fn page_requests(&self) -> u64 {
        self.st.coh.as_ref().map_or(u64::MAX, |c| {
            let s = c.cache.stats();
            s.misses.wrapping_add(s.retries)
        })
    }

    fn read(
        &mut self,
        link: &mut Link<E>,
        _meta: &mut Meta,
        ino: u64,
        pos: u64,
        buf: &mut [u8],
    ) -> Result<usize, Errno> {
        let n = self.st.read(link, ino, pos, buf, self.cxl_ns)?;
        self.st.trim(link)?;
        Ok(n)
    }

    fn write(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        ino: u64,
        pos: u64,
        data: &[u8],
    ) -> Result<usize, Errno> {
        // At most BATCH pages go in before their size is published: pages
        // beyond the published end of file are not written back, so a
        // write larger than the pool must not reclaim its own pages first.
        let made = |s: &Self| s.st.coh.as_ref().map_or(0, |c| c.cache.private_made());
        let made_before = made(self);
        let mut n = 0;
        for chunk in data.chunks(BATCH * PAGE) {
            n += self.write_chunk(link, meta, ino, pos + n as u64, chunk)?;
        }
        if self.st.mode == Mode::Relaxed {
            // A rewrite of copies we hold made none: nothing new to track
            // (their age is their first write's, as Linux ages dirty data).
            if made(self) != made_before {
                let first = pos / PAGE as u64;
                let last = (pos + n as u64).div_ceil(PAGE as u64);
                self.track_private(ino, first, last);
            }
            // Bound the heap: the oldest copies go back in batches.
            self.bound_private(link, meta)?;
        }
        Ok(n)
    }

    /// The directory tears pages down only when the file shrinks; learn
    /// the current size so this node retires exactly the same pages.
    fn truncate_prepare(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        ino: u64,
        size: u64,
    ) -> Result<(), Errno> {
        // Relaxed: the private copies below the new end, the one holding
        // it included, go back first (the directory cuts the file from
        // its own bytes, so the head of that page must be there); those
        // past it are retired in `truncate_done`. The new size then
        // replaces any local extension.
        // Tasks' copies' writes in flight go first: one sent after the
        // `Setattr` would write old bytes past the new end.
        self.st.finish_copies(link);
        // Strong: pages placed under a delegation of the file go back
        // first, so the directory cuts them as any owned page.
        self.st.return_file(link, ino)?;
        let keep = size.div_ceil(PAGE as u64);
        let copies: Vec<PageKey> = self
            .st
            .coh
            .as_ref()
            .map(|c| c.cache.private_pages(ino))
            .unwrap_or_default()
            .into_iter()
            .filter(|k| k.idx < keep)
            .collect();
        if !copies.is_empty() {
            let now = meta.size_of(ino);
            self.st
                .write_back_private(link, (ino, meta.gen(ino)), &copies, now)?;
            self.written_back(meta, ino);
        }
        meta.clear_local_size(ino);
        Ok(())
    }

    /// The size before tells whether the file shrank.
    fn truncate_needs_old(&self) -> bool {
        true
    }

    fn truncate_done(&mut self, env: &E, _meta: &mut Meta, ino: u64, size: u64, old: Option<u64>) {
        if old.is_some_and(|o| size < o) {
            self.st.evict_local(env, ino, size);
        } else if let Some(c) = self.st.coh.as_mut() {
            // Relaxed: the directory's file did not shrink, but a local
            // extension did: the private copies wholly past the new end
            // are cut (those below it went back in `truncate_prepare`);
            // kept, they would be written back at the next fsync.
            let from = size.div_ceil(PAGE as u64);
            for key in c.cache.private_pages(ino) {
                if key.idx >= from {
                    c.cache.drop_private(&key);
                }
            }
        }
        self.untrack(ino);
    }

    /// Relaxed mode writes back our private copies at close
    /// (close-to-open consistency: the next open anywhere sees them), as
    /// `private` and `net` write back their dirty pages at close: through
    /// the storage server, without the directory's flush to stable
    /// storage, which is `fsync`'s (and `sync`'s) job in every mode.
    /// Strong mode has no private copies.
    fn close(&mut self, link: &mut Link<E>, meta: &mut Meta, ino: u64) -> Result<(), Errno> {
        let dirty = self
            .st
            .coh
            .as_ref()
            .is_some_and(|c| !c.cache.private_pages(ino).is_empty());
        if dirty {
            let size = meta.size_of(ino);
            let r = self.st.write_back(link, (ino, meta.gen(ino)), size);
            self.reported(meta, ino, r)?;
        }
        Ok(())
    }

    /// A task's fsync, and relaxed mode's close: the file's dirty frames'
    /// WRITEBACKs and its private copies' writes in flight
    /// (`singlecopy/inflight.rs`); a close without private copies has
    /// nothing to write (as [`DataPath::close`]). A truncate: the private
    /// copies below the new end, the one holding it included (as
    /// [`DataPath::truncate_prepare`], which then finds them written).
    fn write_back_start(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        ino: u64,
        why: WbWhy,
    ) -> Result<Option<WbStart>, Errno> {
        let copies = self
            .st
            .coh
            .as_ref()
            .is_some_and(|c| !c.cache.private_pages(ino).is_empty());
        let (frames, below) = match why {
            WbWhy::Close if !copies => return Ok(Some(WbStart::Done)),
            WbWhy::Close | WbWhy::Fsync => (true, u64::MAX),
            WbWhy::Truncate(size) => (false, size.div_ceil(PAGE as u64)),
        };
        let size = meta.size_of(ino);
        let started = self
            .st
            .write_back_start(link, (ino, meta.gen(ino)), size, frames, below)?;
        if started.is_none() && frames {
            self.written_back(meta, ino);
        }
        Ok(Some(started.map_or(WbStart::Done, WbStart::Started)))
    }

    fn write_back_poll(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        id: u64,
    ) -> Option<Result<(), Errno>> {
        let (ino, r) = self.st.write_back_poll(link, id)?;
        if ino == 0 {
            return Some(r);
        }
        // As the synchronous write-back: no copy left, no local size.
        Some(self.reported(meta, ino, r))
    }

    fn fsync_prepare(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        ino: u64,
    ) -> Result<(), Errno> {
        let size = meta.size_of(ino);
        let r = self.st.write_back(link, (ino, meta.gen(ino)), size);
        self.reported(meta, ino, r)
    }

    fn write_back_all(&mut self, link: &mut Link<E>, meta: &mut Meta) -> Result<(), Errno> {
        self.fsync_dirty(link, meta)
    }

    fn holds(&self, ino: u64, idx: u64) -> bool {
        self.st.holds(&PageKey { ino, idx })
    }

    /// Resolve the pages together (up to [`super::BATCH`] page requests per
    /// directory round trip), so a batch's misses are in flight at once.
    fn prefetch(
        &mut self,
        link: &mut Link<E>,
        _meta: &mut Meta,
        pages: &[(u64, u64)],
    ) -> Result<(), Errno> {
        let keys: Vec<PageKey> = pages
            .iter()
            .map(|&(ino, idx)| PageKey { ino, idx })
            .collect();
        self.st.resolve(link, &keys, false).map(|_| ())
    }

    fn has_task_reads(&self) -> bool {
        true
    }

    fn task_reads_start(
        &mut self,
        link: &mut Link<E>,
        _meta: &mut Meta,
        ino: u64,
        first: u64,
        end: u64,
        epoch: Option<u64>,
    ) -> Result<Option<u64>, Errno> {
        self.st.reads_start(link, ino, first, end, epoch)
    }

    fn task_reads_progress(&mut self, link: &mut Link<E>, _meta: &mut Meta) -> bool {
        self.st.reads_poll(link);
        self.st.reads_changed()
    }

    fn task_reads_ticket(&mut self, id: u64) -> Option<TicketDone> {
        self.st.reads_ticket(id)
    }

    fn task_reads_cancel(&mut self, link: &mut Link<E>, _meta: &mut Meta, id: u64) {
        self.st.reads_cancel(link, id);
    }

    fn task_reads_idle(&mut self, link: &mut Link<E>, _meta: &mut Meta) {
        self.st.reads_idle(link);
    }

    fn drop_cache(&mut self, link: &mut Link<E>, meta: &mut Meta) -> Result<String, Errno> {
        self.fsync_dirty(link, meta)?;
        link.fs_call(&Request::Fsync { ino: 0 }, self)?;
        let (owned, remote) = self.st.drop_all(link)?;
        Ok(format!(
            "invalidated {owned} owned pages, dropped {remote} remote mappings"
        ))
    }

    fn invalidate_page(&mut self, link: &mut Link<E>, ino: u64, idx: u64) -> Result<bool, Errno> {
        self.st.invalidate_one(link, PageKey { ino, idx })
    }

    fn set_watermarks(&mut self, marks: crate::watermark::Watermarks) {
        self.st.set_watermarks(marks);
    }

    fn reclaim_ahead(
        &mut self,
        link: &mut Link<E>,
        _meta: &mut Meta,
        settle: bool,
    ) -> Result<usize, Errno> {
        self.st.reclaim_ahead(link, settle)
    }

    fn stats(&self) -> Result<Vec<(String, String)>, Errno> {
        let c = self.st.coh.as_ref().ok_or(Errno::Unavailable)?;
        let s = c.cache.stats();
        let (owned, remote, private) = c.cache.counts();
        let (free, pool) = (c.cache.free_frames(), c.cache.pool_frames());
        let (faults, misses) = self.st.fault_counts();
        let mut v: Vec<(String, String)> = Vec::new();
        let mut put = |k: &str, x: String| v.push((k.to_string(), x));
        put(keys::cache::RESIDENT_OWNED, format!("{owned}"));
        put(keys::cache::REMOTE_MAPPINGS, format!("{remote}"));
        put(keys::cache::PRIVATE_COPIES, format!("{private}"));
        put(keys::cache::POOL_FRAMES, format!("{free}/{pool}"));
        put(keys::cache::HITS_LOCAL, format!("{}", s.hits_local));
        put(keys::cache::HITS_REMOTE, format!("{}", s.hits_remote));
        put(keys::cache::HITS_PRIVATE, format!("{}", s.hits_private));
        put(keys::cache::MISSES, format!("{}", s.misses));
        put(keys::cache::DISK_READS_FILLS, format!("{}", s.fills));
        put(keys::cache::REMOTE_MAPS, format!("{}", s.remote_maps));
        put(keys::cache::RETRIES, format!("{}", s.retries));
        put(keys::cache::INVALIDATIONS_SENT, format!("{}", s.invs_sent));
        put(
            keys::cache::INVALIDATION_ENTRIES,
            format!("{}", s.inv_entries),
        );
        put(
            keys::cache::INVALIDATIONS_RECEIVED,
            format!("{}", s.invs_received),
        );
        put(keys::cache::REMOTE_DROPS, format!("{}", s.drops));
        put(keys::cache::WRITEBACKS, format!("{}", s.writebacks));
        put(keys::cache::REFUSED_MAPPINGS, format!("{}", s.refused_maps));
        put(keys::cache::PAGE_BATCHES, format!("{}", s.page_batches));
        put(keys::cache::HITS_REPLICA, format!("{}", s.hits_replica));
        put(keys::cache::PROMOTIONS, format!("{}", s.promotions));
        put(keys::cache::DEMOTIONS, format!("{}", s.demotions));
        put(keys::cache::REVOCATIONS, format!("{}", s.revocations));
        put(
            keys::cache::PROMOTIONS_REFUSED,
            format!("{}", s.promotions_refused),
        );
        put(
            keys::cache::REPLICA_PAGES,
            format!("{}", c.cache.replica_pages()),
        );
        put(keys::cache::MMAP_FAULTS, format!("{faults}"));
        put(keys::cache::MMAP_EVICTED_FAULTS, format!("{misses}"));
        put(
            keys::cache::FAULTAROUND_PAGES,
            format!("{}", self.st.faultaround_count()),
        );
        let (jobs, max, pages) = self.st.wb_counts();
        put(keys::cache::TASK_WRITE_BACKS, format!("{jobs}/{max}"));
        put(keys::cache::TASK_WRITEBACK_PAGES, format!("{pages}"));
        let (sent, max, _) = self.st.reads_counts();
        put(keys::cache::TASK_READS, format!("{sent}/{max}"));
        put(keys::cache::RECLAIMS_AHEAD, format!("{}", s.reclaims_ahead));
        put(
            keys::cache::MISSES_WAITED_RECLAIM,
            format!("{}", s.waited_misses),
        );
        let total = c.cache.limit().map_or(pool, |l| l.min(pool));
        put(
            keys::cache::RECLAIM_WATERMARKS,
            crate::private::watermarks(self.st.watermarks(), total),
        );
        if self.st.mode == Mode::Relaxed {
            put(
                keys::cache::PRIVATE_STAGED,
                format!("{}", self.st.staged_max() >> 10),
            );
        }
        Ok(v)
    }

    fn single_copy(&mut self) -> Option<&mut ScState> {
        Some(&mut self.st)
    }
}

/// The end of `ino` this node knows (local extension included), past which
/// a page has no old bytes; an unknown file has none: every page may.
fn known_end(meta: &Meta, ino: u64) -> u64 {
    meta.get(ino).map_or(u64::MAX, |m| m.size)
}
