//! The single-copy data path (modes `strong` and `relaxed`): the node side
//! of the DPC protocol over the rings, with [`NodeCache`] doing the
//! bookkeeping.
//!
//! * Reads: local hit (our frame) or remote hit (CH-R: the owner's frame)
//!   copy straight from the shared region; misses go out as one batch of
//!   page READs (up to [`BATCH`] descriptors published together) and come
//!   back as fills into our pre-allocated frames (CM) or mappings of a
//!   peer's frame (CM-R).
//! * Strong writes: into our frame, or straight into the owner's frame (a
//!   single copy, so every reader sees it at once); a full-page write miss
//!   goes through LOOKUP_LOCK / UNLOCK.
//! * Relaxed writes: into our frame, or into a private copy of a peer's
//!   page, written back through the storage server at fsync/close, which
//!   reconciles the owner's frame.
//! * Reclaim: when free frames drop under the low mark, victims are
//!   invalidated in the background between operations (`inval`); when the
//!   pool runs dry anyway, a miss waits for those, or invalidates victims
//!   in a batch itself (BATCH_INV); dirty ones are written back by the
//!   directory before it answers.
//! * Invalidations (DIR_INV) are serviced whenever this node waits or
//!   idles ([`Session::service`]): the page is forgotten, unmapped from the
//!   mmap window (with its TLB flush), then acknowledged on the ack ring.
//!
//! Files: this one (state), `inval` (DPC's Invalidation Manager:
//! DIR_INV and INV_RANGE taken and acked, reclaim's INV runs, the quiet
//! sleeps of lazy acks), `resolve` (misses in batches of page requests),
//! `session` (join, servicing notices, leave), `batch`
//! (batched page calls, deferred DROPs, late answers), `inflight` (tasks'
//! write-backs in flight), `reads` (tasks' read misses in flight), `rw`
//! (read, write), `writeback` (write-back and fsync), `remote` (DPC's
//! Remote MM: a peer's frames, replicas, the store guard, the mmap
//! windows in `remote/mmap`), `path` (the [`DataPath`]).
//!
//! [`DataPath`]: crate::vfs::DataPath

mod batch;
mod control;
mod deleg;
mod groups;
mod inflight;
mod inval;
pub(crate) mod path;
mod reads;
mod remote;
mod resolve;
mod rw;
mod session;
mod writeback;

pub use control::Controls;
pub use deleg::DelegCounts;
pub use groups::group_errno;
pub use path::SingleCopy;
pub use remote::mmap::{window_va, MMAP_BASE};

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use fabric::layout::Layout;
use fabric::proto::Errno;
use fabric::proto::{PageKey, PageReq};
use fabric::shm::SharedMem;

use crate::client::Notifier;
use crate::env::{Env, Mapper};
use crate::link::Link;
use crate::pagecache::{Mode, NodeCache, Slot};

/// Page requests published together.
pub const BATCH: usize = 32;
/// Pages one sweep of `cache drop` takes: contiguous pages of a file go
/// as one INV run each, so a sweep is many pages but few requests.
const DROP_SWEEP: usize = 8 * BATCH;
/// Rounds of `Retry` before a page operation gives up.
const MAX_RETRIES: u32 = 20_000;

/// One joined session's coherence state.
pub struct Coherence {
    notifier: Notifier,
    /// Bookkeeping.
    pub cache: NodeCache,
    layout: Layout,
    /// The mmap windows' mappings and faults (`mmap`).
    win: remote::mmap::Windows,
    /// The notify ring was found corrupt: no more servicing; calls fail
    /// until the link's next membership check rejoins (fresh rings).
    broken: bool,
    /// Disconnected: nothing to service until the next join.
    detached: bool,
    /// This node's id.
    node: u32,
    /// Relaxed mode's deferred DROPs, unsent and in flight (`batch`).
    drops: batch::Drops,
    /// Exchanges given up unanswered, and late grants given back (`batch`).
    late: batch::Late,
    /// Replicas of hot pages: seen in use, a PROMOTE in flight (`remote`).
    replicas: remote::Replicas,
    /// Reclaim ahead of need: its INVs in flight, a round under way
    /// (`ahead`).
    refill: inval::Refill,
    /// Relaxed mode: the bytes of each private copy this node wrote
    /// (`crate::dirty`), reset when a copy is made; a write-back sends
    /// only those.
    written: BTreeMap<PageKey, crate::dirty::DirtyBytes>,
    /// Strong mode: ranges delegated to this node (`deleg`).
    delegs: deleg::Delegs,
}

/// Most abandoned LOOKUP_LOCK and INV tags remembered.
const MAX_ABANDONED: usize = 256;

/// The single-copy session: none until joined.
pub struct ScState {
    mode: Mode,
    remote_limit: usize,
    /// Eviction controls, kept across rejoins (each join makes a new
    /// cache): see `control`.
    controls: control::Controls,
    /// Task groups' settings in id order, kept across rejoins: see
    /// `groups`.
    groups: Vec<crate::policy::GroupConf>,
    /// The group of the tasks running.
    task_group: crate::policy::GroupId,
    coh: Option<Coherence>,
    /// Tasks' write-backs in flight (`singlecopy/inflight.rs`), kept
    /// across rejoins (a job of an old session ends with its calls).
    wb: inflight::WbJobs,
    /// Tasks' read misses in flight (`singlecopy/reads.rs`).
    reads: reads::ReadJobs,
    /// mmap fault-around block, pages (0 or 1: only the faulting page).
    faultaround: u32,
    /// Pages mapped around faults (since boot).
    faultaround_mapped: u64,
    /// The most bytes of private copies staged at once (copied out of
    /// the copies) for one write-back's sends (`cache stats`).
    staged_max: usize,
    /// Free-frame marks of reclaim ahead of need, kept across rejoins.
    marks: crate::watermark::Watermarks,
    /// Set while a strong-mode append runs under its append lock: no
    /// store into a frame and no size publication at or past this
    /// instant (this node's clock), when the lease may have gone to
    /// another node (see `vfs.rs`, `append_locked`).
    append_deadline: Option<u64>,
    /// Ask for delegations of whole-page writes' ranges (`deleg`).
    delegation: bool,
}

impl Coherence {
    /// Remove `key`'s mapping from its window, if any (with the TLB flush).
    fn unmap(&mut self, m: &impl Mapper, key: &PageKey) {
        self.win.unmap(m, key);
    }

    /// Remove every window mapping.
    fn unmap_all(&mut self, m: &impl Mapper) {
        self.win.unmap_all(m);
    }
}

/// Is `gfn` exported by its owner (export bitmap in the region)?
pub fn exported(mem: &(impl SharedMem + ?Sized), layout: &Layout, gfn: u64) -> bool {
    fabric::layout::Header::new(mem, *layout).exported(gfn)
}

impl Coherence {
    /// In the shared cache (not broken, not disconnected): its slots are
    /// the directory's view.
    pub fn active(&self) -> bool {
        !self.broken && !self.detached
    }
}

impl ScState {
    /// Not joined yet.
    pub fn new(mode: Mode, remote_limit: usize) -> ScState {
        ScState {
            mode,
            remote_limit,
            controls: control::Controls::default(),
            groups: Vec::new(),
            task_group: crate::policy::DEFAULT_GROUP,
            coh: None,
            wb: inflight::WbJobs::default(),
            reads: reads::ReadJobs::default(),
            faultaround: 0,
            faultaround_mapped: 0,
            staged_max: 0,
            marks: crate::watermark::Watermarks::OFF,
            append_deadline: None,
            delegation: false,
        }
    }

    /// The most bytes of private copies staged at once for a write-back.
    pub fn staged_max(&self) -> usize {
        self.staged_max
    }

    /// On an mmap fault, map the cached pages of the aligned block of
    /// `pages` pages around it too (0 or 1: only the faulting page).
    pub fn set_faultaround(&mut self, pages: u32) {
        self.faultaround = pages;
    }

    /// The session, if joined.
    pub fn coherence(&self) -> Option<&Coherence> {
        self.coh.as_ref()
    }

    fn c(&mut self) -> Result<&mut Coherence, Errno> {
        self.coh.as_mut().ok_or(Errno::Unavailable)
    }

    /// `Unavailable` once the session is broken (its notify ring found
    /// corrupt): invalidations may have been lost with the ring, so no
    /// slot can be trusted until the membership check rejoins (after
    /// writing back what is dirty, which needs no slot lookup).
    /// Under an append lock, is its budget still running at `now_ns`?
    /// [`Errno::Busy`] if not: the lease may be another node's by now,
    /// so nothing more may be stored or published under it.
    pub(super) fn in_append_budget(&self, now_ns: u64) -> Result<(), Errno> {
        match self.append_deadline {
            Some(d) if now_ns >= d => {
                log::warn!("append lock budget spent: the append stops here");
                Err(Errno::Busy)
            }
            _ => Ok(()),
        }
    }

    /// Under an append lock until `deadline` (this node's clock), or not.
    pub fn set_append_deadline(&mut self, deadline: Option<u64>) {
        self.append_deadline = deadline;
    }

    /// Is an append lock held (its deadline set)?
    pub(super) fn appending(&self) -> bool {
        self.append_deadline.is_some()
    }

    pub(super) fn intact(&self) -> Result<(), Errno> {
        if self.coh.as_ref().is_some_and(|c| c.broken) {
            return Err(Errno::Unavailable);
        }
        Ok(())
    }

    /// Is `key` usable here without a page request (ours, mapped, a
    /// private copy)? A slot being torn down or filled is not.
    pub fn holds(&self, key: &PageKey) -> bool {
        self.coh.as_ref().is_some_and(|c| {
            matches!(
                c.cache.slot(key),
                Some(s) if !matches!(s, Slot::Reclaiming { .. }) && !c.cache.in_flight(key)
            )
        })
    }

    /// The cache, if joined.
    fn cache(&mut self) -> Option<&mut NodeCache> {
        self.coh.as_mut().map(|c| &mut c.cache)
    }

    /// Drop remote mappings above the limit (called after reads).
    pub fn trim<E: Env>(&mut self, link: &mut Link<E>) -> Result<(), Errno> {
        let extra = self.cache().map(|c| c.over_limit()).unwrap_or_default();
        self.drop_mappings(link, extra, BATCH)
    }

    /// Give back remote mappings, `batch` DROPs published together.
    fn drop_mappings<E: Env>(
        &mut self,
        link: &mut Link<E>,
        keys: Vec<(PageKey, bool)>,
        batch: usize,
    ) -> Result<(), Errno> {
        if let Some(c) = self.coh.as_mut() {
            for (k, _) in &keys {
                c.unmap(&link.env, k);
            }
        }
        for chunk in keys.chunks(batch.max(1)) {
            let reqs: Vec<PageReq> = chunk
                .iter()
                .map(|(key, dirty)| PageReq::Drop {
                    key: *key,
                    dirty: *dirty,
                })
                .collect();
            self.page_calls(link, &reqs)?;
            // The directory has the dirty bits now.
            if let Some(c) = self.cache() {
                for (k, _) in chunk {
                    c.drop_done(k);
                }
            }
        }
        Ok(())
    }

    /// `cache drop`: give back every page through the protocol. Returns
    /// (owned pages invalidated, remote mappings dropped).
    pub fn drop_all<E: Env>(&mut self, link: &mut Link<E>) -> Result<(usize, usize), Errno> {
        self.flush_drops(link)?;
        self.settle_invs(link); // the background INVs first
        let remote = self.cache().map(|c| c.all_remote()).unwrap_or_default();
        let nr = remote.len();
        self.drop_mappings(link, remote, BATCH)?;
        let mut owned = 0;
        loop {
            let n = self.reclaim(link, DROP_SWEEP)?;
            if n == 0 {
                break;
            }
            owned += n;
        }
        Ok((owned, nr))
    }

    /// Directory throughput: map and drop the pages `[0, pages)` of `ino`
    /// (owned by another node) `rounds` times, `batch` page requests
    /// published together per round trip. Returns the page operations.
    pub fn bench_dir<E: Env>(
        &mut self,
        link: &mut Link<E>,
        ino: u64,
        pages: u64,
        rounds: u32,
        batch: usize,
    ) -> Result<u64, Errno> {
        let batch = batch.clamp(1, crate::MAX_DIR_BATCH);
        let keys: Vec<PageKey> = (0..pages).map(|idx| PageKey { ino, idx }).collect();
        let mut ops = 0u64;
        for _ in 0..rounds {
            for chunk in keys.chunks(batch) {
                let missing = self
                    .cache()
                    .map(|c| chunk.iter().filter(|k| c.slot(k).is_none()).count())
                    .unwrap_or(0) as u64;
                self.resolve_in(link, chunk, false, batch)?;
                ops += missing;
                let remote: Vec<(PageKey, bool)> = self
                    .cache()
                    .map(|c| {
                        chunk
                            .iter()
                            .filter(|k| matches!(c.slot(k), Some(Slot::Remote { .. })))
                            .map(|k| (*k, false))
                            .collect()
                    })
                    .unwrap_or_default();
                if remote.len() != chunk.len() {
                    return Err(Errno::Invalid); // we own some: use a file owned elsewhere
                }
                if let Some(c) = self.cache() {
                    c.forget_remote(&remote);
                }
                ops += remote.len() as u64;
                self.drop_mappings(link, remote, batch)?;
            }
        }
        Ok(ops)
    }
}
