//! The single-copy data path (modes `strong` and `relaxed`): the node side
//! of the DPC protocol over the rings, with [`nodepath::pagecache::NodeCache`]
//! doing the bookkeeping.
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
//! * Reclaim: when our pool runs dry, the oldest owned pages are
//!   invalidated in a batch (BATCH_INV); dirty ones are written back by the
//!   directory before it answers.
//! * Invalidations (DIR_INV) are serviced whenever this node waits or
//!   idles: the page is forgotten, unmapped from the mmap window with a TLB
//!   flush, then acknowledged on the ack ring.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use fabric::layout::Layout;
use fabric::proto::{op_of, Errno, Op, Request, Response};
use fabric::proto::{PageKey, PageReply, PageReq};
use fabric::shm::{RawShm, SharedMem};
use nodepath::client::Notifier;
use nodepath::pagecache::{Hit, Installed, Mode, NodeCache, PAGE};
use spin::Mutex;

use crate::mm::paging;

/// Page requests published together.
pub const BATCH: usize = 32;
/// Rounds of `Retry` before a page operation gives up.
const MAX_RETRIES: u32 = 20_000;
/// Base of the mmap windows (lower half, canonical, far from RAM). Each
/// inode gets a 4 GiB window: `MMAP_BASE + (ino mod 2^12) * 4 GiB`.
pub const MMAP_BASE: u64 = paging::WINDOW.start;

/// Virtual address of page `key` in its inode's mmap window.
pub fn window_va(key: &PageKey) -> u64 {
    MMAP_BASE + ((key.ino & 0xFFF) << 32) + (key.idx & 0xF_FFFF) * PAGE as u64
}

/// The node's coherence state, reachable from the wait loop.
pub struct Coherence {
    notifier: Notifier,
    /// Bookkeeping.
    pub cache: NodeCache,
    layout: Layout,
    /// Pages mapped in the mmap window, by page -> virtual address.
    mapped: BTreeMap<PageKey, u64>,
    /// Physical address of the shared region (BAR2).
    bar_pa: u64,
    /// Lazily mapped windows: window slot -> inode (`mmap_lazy`).
    windows: BTreeMap<u64, u64>,
    /// Window page faults served with our or the owner's frame.
    faults: u64,
    /// Window page faults on a page no longer resident (served with the
    /// zero page; the reader retries).
    fault_misses: u64,
    /// A zeroed frame for faults on pages that are not resident.
    zero_pa: u64,
}

static COH: Mutex<Option<Coherence>> = Mutex::new(None);
/// Emulated CXL access latency added to every copy from a peer's frame.
static CXL_NS: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// Set the emulated CXL latency (boot option `cxl_ns`).
pub fn set_cxl_latency(ns: u64) {
    CXL_NS.store(ns, core::sync::atomic::Ordering::Relaxed);
}

/// Spin for the emulated CXL latency (no-op at 0).
fn cxl_delay() {
    let ns = CXL_NS.load(core::sync::atomic::Ordering::Relaxed);
    if ns > 0 {
        let t0 = crate::arch::time::now_ns();
        while crate::arch::time::now_ns() - t0 < ns {}
    }
}

/// (Re)initialise after a join: fresh notify/ack endpoints, an empty cache
/// over our pool, nothing mapped.
pub fn reset(layout: Layout, node: u32, mode: Mode, remote_limit: usize, bar_pa: u64) {
    let mut g = COH.lock();
    if let Some(old) = g.as_mut() {
        old.unmap_all();
    }
    let zero_pa = paging::zero_page().unwrap_or(0);
    *g = Some(Coherence {
        notifier: Notifier::new(&layout, node),
        cache: NodeCache::new(mode, layout.pool_gfns(node), remote_limit),
        layout,
        mapped: BTreeMap::new(),
        bar_pa,
        windows: BTreeMap::new(),
        faults: 0,
        fault_misses: 0,
        zero_pa,
    });
    drop(g);
    crate::arch::interrupts::set_window_fault_handler(window_fault);
}

/// Run `f` on the coherence state, if joined. Never call a wait from `f`.
pub fn with<R>(f: impl FnOnce(&mut Coherence) -> R) -> Option<R> {
    COH.lock().as_mut().map(f)
}

/// Service pending invalidations: forget, unmap + flush, acknowledge.
/// An invalidation of a page whose READ / LOOKUP_LOCK is still unanswered
/// is acknowledged only once the answer is applied (`NodeCache::dir_inv`):
/// acking earlier would let the directory finish before we install what the
/// answer grants. Returns how many notices were handled. Called from every
/// wait and the idle loop.
pub fn service(shm: &RawShm) -> usize {
    let mut g = COH.lock();
    let Some(c) = g.as_mut() else { return 0 };
    let mut n = 0;
    loop {
        let key = match c.notifier.poll(shm) {
            Ok(Some(k)) => k,
            Ok(None) => break,
            Err(e) => {
                log::warn!("notify ring: {e}; dropping the notice");
                continue;
            }
        };
        n += 1;
        match c.cache.dir_inv(&key) {
            Some(dirty) => {
                log::debug!("DIR_INV {key:?}: acked, dirty={dirty}");
                c.ack(shm, key, dirty);
            }
            None => log::debug!("DIR_INV {key:?}: our miss is in flight, ack deferred"),
        }
    }
    c.send_due_acks(shm);
    n
}

impl Coherence {
    /// Remove `key`'s mapping from its window, if any (with the TLB flush).
    fn unmap(&mut self, key: &PageKey) {
        if let Some(va) = self.mapped.remove(key) {
            paging::unmap_4k(va);
        }
    }

    /// Remove every window mapping.
    fn unmap_all(&mut self) {
        for va in self.mapped.values() {
            paging::unmap_4k(*va);
        }
        self.mapped.clear();
        self.windows.clear();
    }

    /// Unmap `key` from the window (flushing the TLB), then acknowledge.
    fn ack(&mut self, shm: &RawShm, key: PageKey, dirty: bool) {
        self.unmap(&key); // the TLB flush comes before the ack
        let mut spins = 0u32;
        if self
            .notifier
            .ack(shm, key, dirty, &mut || {
                spins += 1;
                spins < 10_000_000
            })
            .is_err()
        {
            log::warn!("ack ring stuck; the directory will time this node out");
        }
    }

    /// Send the acks of deferred invalidations that became due.
    fn send_due_acks(&mut self, shm: &RawShm) {
        for (key, dirty) in self.cache.take_acks() {
            log::debug!("DIR_INV {key:?}: deferred ack, dirty={dirty}");
            self.ack(shm, key, dirty);
        }
    }
}

/// The transport the data path needs (implemented by the node's `Conn`).
pub trait Transport {
    /// Publish a request; returns its tag.
    fn send(&mut self, req: &Request) -> Result<u32, Errno>;
    /// A response, if one is waiting.
    fn recv(&mut self) -> Result<Option<(u32, fabric::proto::Desc)>, Errno>;
    /// One wait step (services invalidations); false: give up.
    fn wait(&mut self) -> bool;
    /// One synchronous call.
    fn call(&mut self, req: &Request) -> Result<Response, Errno>;
}

/// Send `reqs` together and collect their answers in order.
fn page_calls(t: &mut dyn Transport, reqs: &[PageReq]) -> Result<Vec<PageReply>, Errno> {
    let mut tags = Vec::with_capacity(reqs.len());
    for r in reqs {
        let req = Request::Page(*r);
        tags.push((t.send(&req)?, op_of(&req)));
    }
    let mut out: Vec<Option<PageReply>> = alloc::vec![None; reqs.len()];
    let mut left = reqs.len();
    while left > 0 {
        match t.recv()? {
            Some((tag, d)) => {
                let Some(i) = tags.iter().position(|(t, _)| *t == tag) else {
                    continue; // a late answer to an abandoned call
                };
                let reply = match Response::decode(&d, tags[i].1) {
                    Ok((_, Response::Page(p))) => p,
                    Ok((_, Response::Err(e))) => return Err(e),
                    _ => PageReply::Refused,
                };
                if out[i].replace(reply).is_none() {
                    left -= 1;
                }
            }
            None => {
                if !t.wait() {
                    return Err(Errno::Unavailable);
                }
            }
        }
    }
    Ok(out
        .into_iter()
        .map(|r| r.unwrap_or(PageReply::Refused))
        .collect())
}

/// Invalidate up to `n` of our oldest owned pages (one BATCH_INV).
pub fn reclaim(t: &mut dyn Transport, n: usize) -> Result<usize, Errno> {
    let victims = with(|c| c.cache.pick_victims(n)).unwrap_or_default();
    if victims.is_empty() {
        return Ok(0);
    }
    // Our own mappings of these frames go first.
    with(|c| {
        for (k, _) in &victims {
            c.unmap(k);
        }
    });
    let reqs: Vec<PageReq> = victims
        .iter()
        .map(|(key, dirty)| PageReq::Inv {
            key: *key,
            dirty: *dirty,
        })
        .collect();
    let replies = page_calls(t, &reqs)?;
    with(|c| {
        for ((key, _), r) in victims.iter().zip(&replies) {
            match r {
                PageReply::Done { .. } => c.cache.reclaimed(key),
                _ => c.cache.reclaim_failed(key),
            }
        }
    });
    Ok(victims.len())
}

/// Invalidate one page we own, synchronously (`bench inv`). Returns
/// false if we do not own it.
pub fn invalidate_one(t: &mut dyn Transport, key: PageKey) -> Result<bool, Errno> {
    let Some(dirty) = with(|c| c.cache.take_victim(&key)).flatten() else {
        return Ok(false);
    };
    with(|c| {
        c.unmap(&key);
    });
    let r = page_calls(t, &[PageReq::Inv { key, dirty }])?;
    with(|c| match r.first() {
        Some(PageReply::Done { .. }) => c.cache.reclaimed(&key),
        _ => c.cache.reclaim_failed(&key),
    });
    Ok(true)
}

/// Directory throughput: map and drop the pages `[0, pages)` of `ino`
/// (owned by another node) `rounds` times, `batch` page requests published together per
/// round trip. Returns (page operations, elapsed cycles).
pub fn bench_dir(
    t: &mut dyn Transport,
    ino: u64,
    pages: u64,
    rounds: u32,
    batch: usize,
) -> Result<(u64, u64), Errno> {
    let batch = batch.clamp(1, userland::os::MAX_DIR_BATCH);
    let keys: Vec<PageKey> = (0..pages).map(|idx| PageKey { ino, idx }).collect();
    let t0 = crate::arch::cpu::rdtsc();
    let mut ops = 0u64;
    for _ in 0..rounds {
        for chunk in keys.chunks(batch) {
            let missing = with(|c| chunk.iter().filter(|k| c.cache.slot(k).is_none()).count())
                .unwrap_or(0) as u64;
            resolve_in(t, chunk, false, batch)?;
            ops += missing;
            let remote: Vec<(PageKey, bool)> = with(|c| {
                chunk
                    .iter()
                    .filter(|k| {
                        matches!(
                            c.cache.slot(k),
                            Some(nodepath::pagecache::Slot::Remote { .. })
                        )
                    })
                    .map(|k| (*k, false))
                    .collect()
            })
            .unwrap_or_default();
            if remote.len() != chunk.len() {
                return Err(Errno::Invalid); // we own some: use a file owned elsewhere
            }
            with(|c| c.cache.forget_remote(&remote));
            ops += remote.len() as u64;
            drop_mappings_in(t, remote, batch)?;
        }
    }
    Ok((ops, crate::arch::cpu::rdtsc() - t0))
}

/// Make `keys` resident or mapped here (one batch per [`BATCH`] pages).
/// `full_write`: the caller will overwrite whole pages (strong mode asks
/// LOOKUP_LOCK instead of READ). Returns the pages left in E (reserved),
/// which the caller must write and UNLOCK.
pub fn resolve(
    t: &mut dyn Transport,
    keys: &[PageKey],
    full_write: bool,
) -> Result<Vec<(PageKey, u64)>, Errno> {
    resolve_in(t, keys, full_write, BATCH)
}

/// [`resolve`] with up to `max_batch` page requests published together.
fn resolve_in(
    t: &mut dyn Transport,
    keys: &[PageKey],
    full_write: bool,
    max_batch: usize,
) -> Result<Vec<(PageKey, u64)>, Errno> {
    let mut reserved = Vec::new();
    let mut todo: Vec<PageKey> = keys.to_vec();
    let mut rounds = 0u32;
    while !todo.is_empty() {
        rounds += 1;
        if rounds > MAX_RETRIES {
            return Err(Errno::Io);
        }
        let mut batch = Vec::new();
        let mut rest = Vec::new();
        for key in todo.drain(..) {
            if batch.len() >= max_batch {
                rest.push(key);
                continue;
            }
            let slot = with(|c| {
                c.cache
                    .slot(&key)
                    .map(|s| matches!(s, nodepath::pagecache::Slot::Reclaiming { .. }))
            })
            .ok_or(Errno::Unavailable)?;
            match slot {
                // Usable already (ours, mapped, private or reserved).
                Some(false) => continue,
                // Being torn down: wait for the directory's DIR_INV.
                Some(true) => {
                    rest.push(key);
                    continue;
                }
                None => {}
            }
            let req = with(|c| c.cache.start_miss(key, full_write)).ok_or(Errno::Unavailable)?;
            match req {
                Some(r) => batch.push((key, r)),
                None => {
                    // Pool empty: reclaim, then try this page again.
                    let freed = reclaim(t, BATCH)?;
                    if freed == 0 && batch.is_empty() {
                        return Err(Errno::NoSpace);
                    }
                    rest.push(key);
                }
            }
        }
        todo = rest;
        if batch.is_empty() {
            // Only pages being torn down are left: let the invalidations in.
            if !todo.is_empty() && !t.wait() {
                return Err(Errno::Unavailable);
            }
            continue;
        }
        let reqs: Vec<PageReq> = batch.iter().map(|(_, r)| *r).collect();
        let replies = page_calls(t, &reqs)?;
        log::debug!("resolve: {reqs:?} -> {replies:?}");
        let shm = crate::node::shm();
        for ((key, _), reply) in batch.iter().zip(replies) {
            let r = with(|c| {
                let layout = c.layout;
                c.cache
                    .complete_miss(*key, reply, |gfn| exported(shm, &layout, gfn))
            })
            .ok_or(Errno::Unavailable)?;
            match r {
                Installed::Local(_) | Installed::Remote(_) => {}
                Installed::Reserved(gfn) => reserved.push((*key, gfn)),
                Installed::Retry => todo.push(*key),
                Installed::Failed => {
                    return Err(match reply {
                        PageReply::IoError => Errno::Io,
                        _ => Errno::Refused,
                    })
                }
            }
        }
        // Invalidations that raced these misses are due now.
        with(|c| c.send_due_acks(shm));
        if !todo.is_empty() && !t.wait() {
            return Err(Errno::Unavailable);
        }
    }
    Ok(reserved)
}

/// Is `gfn` exported by its owner (export bitmap in the region)?
pub fn exported(shm: &RawShm, layout: &Layout, gfn: u64) -> bool {
    fabric::layout::Header::new(shm, *layout).exported(gfn)
}

/// Offset of frame `gfn` in the region (an impossible one is refused by
/// the region's bounds check).
fn frame_off(gfn: u64) -> usize {
    Layout::gfn_offset(gfn).unwrap_or(usize::MAX)
}

/// Read `buf.len()` bytes at `pos` of `ino` (the caller clipped to EOF).
pub fn read(t: &mut dyn Transport, ino: u64, pos: u64, buf: &mut [u8]) -> Result<usize, Errno> {
    let shm = crate::node::shm();
    let first = pos / PAGE as u64;
    let last = (pos + buf.len() as u64).div_ceil(PAGE as u64);
    let mut done = 0usize;
    let mut idx = first;
    while idx < last {
        // Resolve a batch of upcoming misses at once.
        let end = (idx + BATCH as u64).min(last);
        let missing: Vec<PageKey> = (idx..end)
            .map(|i| PageKey { ino, idx: i })
            .filter(|k| with(|c| c.cache.slot(k).is_none()).unwrap_or(true))
            .collect();
        if !missing.is_empty() {
            resolve(t, &missing, false)?;
        }
        while idx < end {
            let key = PageKey { ino, idx };
            let at = pos + done as u64;
            let in_page = (at % PAGE as u64) as usize;
            let n = (PAGE - in_page).min(buf.len() - done);
            let copied = with(|c| match c.cache.lookup(&key) {
                Hit::Local(g) => {
                    shm.read(frame_off(g) + in_page, &mut buf[done..done + n]);
                    true
                }
                Hit::Remote(g) => {
                    cxl_delay();
                    shm.read(frame_off(g) + in_page, &mut buf[done..done + n]);
                    true
                }
                Hit::Private => {
                    let p = c.cache.private(&key).map(|p| &p[in_page..in_page + n]);
                    if let Some(p) = p {
                        buf[done..done + n].copy_from_slice(p);
                    }
                    p.is_some()
                }
                Hit::Miss => false,
            })
            .ok_or(Errno::Unavailable)?;
            if !copied {
                // Invalidated while we waited for another page: again.
                resolve(t, &[key], false)?;
                continue;
            }
            done += n;
            idx += 1;
        }
    }
    Ok(done)
}

/// Write `data` at `pos` of `ino`.
pub fn write(t: &mut dyn Transport, ino: u64, pos: u64, data: &[u8]) -> Result<usize, Errno> {
    let shm = crate::node::shm();
    let mode = with(|c| c.cache.mode()).ok_or(Errno::Unavailable)?;
    let mut done = 0usize;
    let mut tries = 0u32;
    while done < data.len() {
        let at = pos + done as u64;
        let key = PageKey {
            ino,
            idx: at / PAGE as u64,
        };
        let in_page = (at % PAGE as u64) as usize;
        let n = (PAGE - in_page).min(data.len() - done);
        let chunk = &data[done..done + n];
        let hit = with(|c| c.cache.lookup(&key)).ok_or(Errno::Unavailable)?;
        log::trace!("write {key:?} +{in_page} len {n}: {hit:?}");
        match (hit, mode) {
            (Hit::Local(g), _) | (Hit::Remote(g), Mode::Strong) => {
                shm.write(frame_off(g) + in_page, chunk);
                with(|c| c.cache.mark_dirty(&key));
            }
            (Hit::Remote(g), _) => {
                // Relaxed: a private copy, written back at fsync.
                let mut p = Box::new([0u8; PAGE]);
                shm.read(frame_off(g), &mut p[..]);
                p[in_page..in_page + n].copy_from_slice(chunk);
                if with(|c| c.cache.make_private(key, p)).unwrap_or(false) {
                    page_calls(t, &[PageReq::Drop { key, dirty: false }])?;
                    with(|c| c.cache.drop_done(&key));
                }
            }
            (Hit::Private, _) => {
                with(|c| {
                    if let Some(p) = c.cache.private_mut(&key) {
                        p[in_page..in_page + n].copy_from_slice(chunk);
                    }
                });
            }
            (Hit::Miss, _) => {
                tries += 1;
                if tries > MAX_RETRIES {
                    return Err(Errno::Io);
                }
                let full = n == PAGE;
                for (k, gfn) in resolve(t, &[key], full)? {
                    // E: we install the page: write it whole, then UNLOCK.
                    let mut page = [0u8; PAGE];
                    page[in_page..in_page + n].copy_from_slice(chunk);
                    shm.write(frame_off(gfn), &page);
                    page_calls(t, &[PageReq::Unlock { key: k }])?;
                    with(|c| c.cache.unlocked(k));
                    done += n;
                    tries = 0;
                }
                continue;
            }
        }
        done += n;
        tries = 0;
    }
    Ok(done)
}

/// Write back what this node dirtied of `ino` (frames through WRITEBACK,
/// relaxed private copies through the storage server), then flush.
pub fn fsync(
    t: &mut dyn Transport,
    ino: u64,
    size: u64,
    bulk: (usize, usize),
) -> Result<(), Errno> {
    let shm = crate::node::shm();
    let dirty = with(|c| c.cache.dirty_pages(ino)).unwrap_or_default();
    for chunk in dirty.chunks(BATCH) {
        let reqs: Vec<PageReq> = chunk
            .iter()
            .map(|k| PageReq::Writeback {
                key: *k,
                dirty: true,
            })
            .collect();
        let replies = page_calls(t, &reqs)?;
        with(|c| {
            for (k, r) in chunk.iter().zip(replies) {
                if let PageReply::Done { written } = r {
                    c.cache.cleaned(k);
                    if written {
                        c.cache.count_writeback();
                    }
                }
            }
        });
    }
    for key in with(|c| c.cache.private_pages(ino)).unwrap_or_default() {
        let start = key.idx * PAGE as u64;
        if start < size {
            let n = ((size - start) as usize).min(PAGE).min(bulk.1);
            let page = with(|c| c.cache.private(&key).copied()).flatten();
            if let Some(p) = page {
                shm.write(bulk.0, &p[..n]);
                let r = t.call(&Request::Data {
                    op: Op::Write,
                    slot: 2,
                    ino,
                    offset: start,
                    len: n as u32,
                })?;
                if !matches!(r, Response::Data { .. }) {
                    return Err(Errno::Io);
                }
                with(|c| c.cache.count_writeback());
            }
        }
        with(|c| c.cache.drop_private(&key));
    }
    t.call(&Request::Fsync { ino }).map(|_| ())
}

/// Drop remote mappings above the limit (called after reads).
pub fn trim(t: &mut dyn Transport) -> Result<(), Errno> {
    let extra = with(|c| c.cache.over_limit()).unwrap_or_default();
    drop_mappings(t, extra)
}

fn drop_mappings(t: &mut dyn Transport, keys: Vec<(PageKey, bool)>) -> Result<(), Errno> {
    drop_mappings_in(t, keys, BATCH)
}

/// [`drop_mappings`], `batch` DROPs published together.
fn drop_mappings_in(
    t: &mut dyn Transport,
    keys: Vec<(PageKey, bool)>,
    batch: usize,
) -> Result<(), Errno> {
    with(|c| {
        for (k, _) in &keys {
            c.unmap(k);
        }
    });
    for chunk in keys.chunks(batch.max(1)) {
        let reqs: Vec<PageReq> = chunk
            .iter()
            .map(|(key, dirty)| PageReq::Drop {
                key: *key,
                dirty: *dirty,
            })
            .collect();
        page_calls(t, &reqs)?;
        // The directory has the dirty bits now.
        with(|c| {
            for (k, _) in chunk {
                c.cache.drop_done(k);
            }
        });
    }
    Ok(())
}

/// `cache drop`: give back every page through the protocol.
pub fn drop_all(t: &mut dyn Transport) -> Result<(usize, usize), Errno> {
    let remote = with(|c| c.cache.all_remote()).unwrap_or_default();
    let nr = remote.len();
    drop_mappings(t, remote)?;
    let mut owned = 0;
    loop {
        let n = reclaim(t, BATCH)?;
        if n == 0 {
            break;
        }
        owned += n;
    }
    Ok((owned, nr))
}

/// Resolve the pages `[0, pages)` of `ino` through the protocol (batched)
/// and open its window without mapping anything: the first access to each
/// page faults, and [`window_fault`] maps our frame or the owner's frame.
pub fn mmap_lazy(t: &mut dyn Transport, ino: u64, pages: u64) -> Result<u64, Errno> {
    let keys: Vec<PageKey> = (0..pages).map(|idx| PageKey { ino, idx }).collect();
    resolve(t, &keys, false)?;
    with(|c| c.windows.insert(ino & 0xFFF, ino)).ok_or(Errno::Unavailable)?;
    Ok(window_va(&PageKey { ino, idx: 0 }))
}

/// (faults served, faults on pages no longer resident).
pub fn fault_counts() -> (u64, u64) {
    with(|c| (c.faults, c.fault_misses)).unwrap_or((0, 0))
}

/// The page-fault handler of the mmap windows (runs in the fault, with
/// interrupts off; takes no lock that a window access could hold). Maps
/// the faulting page to our frame or the owner's frame in BAR2; a page
/// that is no longer resident (invalidated after `mmap_lazy` resolved it)
/// gets the zero page and is counted, so the reader can retry.
fn window_fault(va: u64) -> bool {
    let Some(mut g) = COH.try_lock() else {
        return false;
    };
    let Some(c) = g.as_mut() else { return false };
    let off = va - MMAP_BASE;
    let Some(ino) = c.windows.get(&(off >> 32)).copied() else {
        return false;
    };
    let key = PageKey {
        ino,
        idx: (off & 0xFFFF_FFFF) >> 12,
    };
    let page_va = va & !0xFFF;
    let pa = match c.cache.slot(&key) {
        Some(nodepath::pagecache::Slot::Local { gfn, .. })
        | Some(nodepath::pagecache::Slot::Remote { gfn, .. }) => {
            c.faults += 1;
            c.bar_pa + gfn * PAGE as u64
        }
        _ if c.zero_pa != 0 => {
            c.fault_misses += 1;
            c.zero_pa
        }
        _ => return false,
    };
    if paging::map_4k(page_va, pa).is_err() {
        return false;
    }
    c.mapped.insert(key, page_va);
    true
}

/// Make one page mapped in its window (resolving it if needed) and return
/// its address and whether it is a peer's frame. Private copies (relaxed
/// writes) cannot be mapped: `NotSupported`.
pub fn map_page(t: &mut dyn Transport, key: PageKey) -> Result<(u64, bool), Errno> {
    for _ in 0..MAX_RETRIES {
        if let Some(va) = with(|c| c.mapped.get(&key).copied()).flatten() {
            let remote = with(|c| {
                matches!(
                    c.cache.slot(&key),
                    Some(nodepath::pagecache::Slot::Remote { .. })
                )
            })
            .unwrap_or(false);
            return Ok((va, remote));
        }
        let target = with(|c| match c.cache.slot(&key) {
            Some(nodepath::pagecache::Slot::Local { gfn, .. }) => Some(Ok((*gfn, false))),
            Some(nodepath::pagecache::Slot::Remote { gfn, .. }) => Some(Ok((*gfn, true))),
            Some(nodepath::pagecache::Slot::Private(_)) => Some(Err(Errno::NotSupported)),
            _ => None,
        })
        .ok_or(Errno::Unavailable)?;
        match target {
            Some(Ok((gfn, remote))) => {
                let va = window_va(&key);
                with(|c| {
                    let pa = c.bar_pa + gfn * PAGE as u64;
                    paging::map_4k(va, pa).map(|_| c.mapped.insert(key, va))
                })
                .ok_or(Errno::Unavailable)?
                .map_err(|_| Errno::NoSpace)?;
                return Ok((va, remote));
            }
            Some(Err(e)) => return Err(e),
            None => {
                resolve(t, &[key], false)?;
            }
        }
    }
    Err(Errno::Io)
}

/// Record a store through the mapping of `key` (strong mode: into the
/// one frame; the page is written back like any dirty page).
pub fn mapped_write(key: &PageKey) {
    with(|c| c.cache.mark_dirty(key));
}

/// The file shrank to `size` (or was removed, `size` 0): retire our pages
/// from the one holding the new end on (see `NodeCache::evict_local`).
pub fn evict_local(ino: u64, size: u64) {
    with(|c| {
        let from = size / PAGE as u64;
        let gone: Vec<PageKey> = c
            .mapped
            .range(PageKey { ino, idx: from }..=PageKey { ino, idx: u64::MAX })
            .map(|(k, _)| *k)
            .collect();
        for k in gone {
            c.unmap(&k);
        }
        c.cache.evict_local(ino, from);
    });
}

/// Leave the shared cache: forget every page, unmap the window.
pub fn disconnect() {
    with(|c| {
        c.unmap_all();
        c.cache.forget_all();
    });
}

/// Unmap the whole mmap window.
pub fn munmap() {
    with(|c| {
        c.unmap_all();
    });
}
