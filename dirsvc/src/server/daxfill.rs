//! `daxfs` mode: the directory as DaxFS's fill thread, and the one writer
//! of the disk keeping the shared slot cache ([`daxcache::pcache`]) in
//! step with it.
//!
//! * **Fill.** A node that claimed a slot (PENDING) sends
//!   [`Request::DaxFill`] with the slot's index, which also wakes us (the
//!   request ring's doorbell; DaxFS's fill thread polls every 1-2 ms
//!   instead). The page to fill is the tag in the slot word, not anything
//!   the node says: the slot must be PENDING and claimed by that node
//!   (else `Invalid`). The page is read as a file-server read (the disk
//!   queue, or the bytes of a write pending to it), copied into the slot's
//!   frame (zeros past the end of file), and the slot published VALID by
//!   CAS; the answer carries the file's attributes. A read that fails
//!   gives the slot back (FREE), and the node's waiters claim again.
//! * **Invalidation.** Writes go through the file server (until the hash
//!   overlay is in): a write, truncation or unlink frees the VALID slots
//!   of the pages it changed, before it is answered. A fill of one of
//!   those pages still reading the disk was waited for first (a write
//!   orders after the file's reads in flight), and a fill that starts
//!   later reads the new bytes. A slot pinned by a reader (copying the
//!   page out) is retired instead of waited for: no lookup finds it any
//!   more, its readers finish their copy of the old bytes (their reads
//!   began before this write is answered), and its last unpin (or the
//!   reclaim of a failed reader's pin) frees it.
//! * **Failure.** A node that failed or left has its CLAIMED and PENDING
//!   slots and its recorded pins given back
//!   ([`daxcache::pcache::PageCache::reclaim_owner`]) when the directory
//!   drops it, which (with fencing) is once it is fenced.
//!
//! Participant (owner) ids in the slot words are node ids minus one.

use alloc::vec;

use daxcache::pcache::{FillJob, PageCache, Tag};
use fabric::layout::DaxLayout;
use fabric::proto::{Errno, Op, Response};
use fabric::shm::{RegionWords, SharedMem};
use fabric::PAGE_SIZE;
use flatfs::BlockDevice;

use super::fileread::ReadReq;
use super::reply::Via;
use super::Directory;

/// The directory's `daxfs` counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DaxStats {
    /// Pages filled into slots and published.
    pub fills: u64,
    /// Fill requests refused (slot not PENDING for the requester) or
    /// failed (the read failed; the slot was given back).
    pub fill_errors: u64,
    /// Slots freed because a write made them stale.
    pub invalidated: u64,
    /// Stale slots retired while pinned (freed at their last unpin).
    pub retired: u64,
    /// Claims and pins of failed nodes given back.
    pub reclaimed: u64,
}

/// `daxfs` mode's state: where the slot cache lies (`None`: not this
/// mode) and the counters. Owned here; only this file's fills,
/// invalidations and reclaims use it.
#[derive(Debug, Default)]
pub(super) struct Dax {
    layout: Option<DaxLayout>,
    stats: DaxStats,
}

impl Dax {
    /// `daxfs` mode over `layout` (`None`: another mode).
    pub(super) fn new(layout: Option<DaxLayout>) -> Dax {
        Dax {
            layout,
            stats: DaxStats::default(),
        }
    }
}

/// The owner id of `node` in the slot words.
pub fn owner_of(node: u32) -> Option<u8> {
    u8::try_from(node.checked_sub(1)?)
        .ok()
        .filter(|o| usize::from(*o) < daxcache::pcache::MAX_OWNERS)
}

fn cache<'a, M: SharedMem + ?Sized>(
    mem: &'a M,
    d: &DaxLayout,
) -> Option<(RegionWords<'a, M>, usize)> {
    Some((d.words(mem)?, d.slots))
}

impl<D: BlockDevice> Directory<D> {
    /// Formats the slot array (every slot FREE), before any node joined.
    pub(super) fn dax_format(mem: &(impl SharedMem + ?Sized), d: &DaxLayout) -> bool {
        match cache(mem, d) {
            Some((w, slots)) => PageCache::format(&w, 0, slots).is_ok(),
            None => false,
        }
    }

    /// The `daxfs` counters, if this directory serves that mode.
    pub fn dax_stats(&self) -> Option<DaxStats> {
        self.dax.layout.map(|_| self.dax.stats)
    }

    /// [`Request::DaxFill`] of `slot` from `node`: `Some` answer now (an
    /// error, or a page read without the disk), `None` when it goes out
    /// once the page's blocks arrived.
    pub(super) fn dax_fill(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        node: u32,
        tag: u32,
        slot: u64,
    ) -> Option<Response> {
        match self.dax_fill_start(mem, node, tag, slot) {
            Ok(r) => r,
            Err(e) => {
                self.dax.stats.fill_errors += 1;
                Some(Response::Err(e))
            }
        }
    }

    fn dax_fill_start(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        node: u32,
        tag: u32,
        slot: u64,
    ) -> Result<Option<Response>, Errno> {
        let d = self.dax.layout.ok_or(Errno::Invalid)?;
        let slot = usize::try_from(slot).map_err(|_| Errno::Invalid)?;
        let (w, slots) = cache(mem, &d).ok_or(Errno::Io)?;
        let pc = PageCache::attach(&w, 0, slots).map_err(|_| Errno::Io)?;
        let job = pc
            .pending_at(slot)
            .map_err(|_| Errno::Invalid)?
            .filter(|j| Some(j.owner) == owner_of(node))
            .ok_or(Errno::Invalid)?;
        let r = ReadReq {
            node,
            op: Op::DaxFill,
            tag,
            slot: 0,
            at: 0,
            via: Via::Ring,
            ino: job.tag.ino(),
            offset: job.tag.pgoff() * PAGE_SIZE as u64,
            len: PAGE_SIZE as u32,
            dax: Some(job),
        };
        if self.fill_depth() > 0 {
            return match self.read_file(mem, r) {
                Some((resp, _)) => Ok(Some(resp)),
                None => Ok(None),
            };
        }
        // Synchronous device: read now.
        let fs = self.fs.as_mut().ok_or(Errno::Unavailable)?;
        let mut buf = vec![0u8; PAGE_SIZE];
        let got = fs.read(r.ino, r.offset, &mut buf);
        let attr = got.and_then(|_| fs.getattr(r.ino));
        let data = got.map(|n| &buf[..n.min(PAGE_SIZE)]);
        Ok(Some(self.dax_publish(mem, &job, data, attr)))
    }

    /// The page of `job` was read (`data`, the bytes inside the file) or
    /// failed: copy it into the slot's frame and publish it, or give the
    /// slot back. The answer to the requester.
    pub(super) fn dax_publish(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        job: &FillJob,
        data: Result<&[u8], Errno>,
        attr: Result<fabric::proto::Attr, Errno>,
    ) -> Response {
        let Some(d) = self.dax.layout else {
            return Response::Err(Errno::Invalid);
        };
        let Some((w, slots)) = cache(mem, &d) else {
            return Response::Err(Errno::Io);
        };
        let Ok(pc) = PageCache::attach(&w, 0, slots) else {
            return Response::Err(Errno::Io);
        };
        let (data, attr) = match (data, attr) {
            (Ok(data), Ok(attr)) => (data, attr),
            (Err(e), _) | (_, Err(e)) => {
                self.dax.stats.fill_errors += 1;
                let _ = pc.abort_fill(job);
                return Response::Err(e);
            }
        };
        let (Some(off), Some(data)) =
            (d.frame_off(job.slot), data.get(..data.len().min(PAGE_SIZE)))
        else {
            self.dax.stats.fill_errors += 1;
            let _ = pc.abort_fill(job);
            return Response::Err(Errno::Io);
        };
        // Still PENDING for the same claim? (A failed requester's slot may
        // have been given back and claimed again meanwhile: then this fill
        // is dropped and its frame left to the new claim.)
        match pc.pending_at(job.slot) {
            Ok(Some(now)) if now == *job => {}
            _ => return Response::Err(Errno::Stale),
        }
        mem.write(off, data);
        mem.zero(off + data.len(), PAGE_SIZE - data.len());
        // The frame's stores are ordered before the publishing CAS (a
        // locked instruction on x86).
        match pc.publish(job) {
            Ok(true) => {
                self.dax.stats.fills += 1;
                let _ = pc.count_fill();
                Response::Data {
                    bytes: data.len() as u32,
                    attr,
                }
            }
            _ => Response::Err(Errno::Stale),
        }
    }

    /// A write, truncation or unlink changed pages `[first, last]` of `ino`
    /// (`last` `u64::MAX`: to the end): free their slots.
    pub(super) fn dax_invalidate(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        ino: u64,
        first: u64,
        last: u64,
    ) {
        let Some(d) = self.dax.layout else { return };
        let Some((w, slots)) = cache(mem, &d) else {
            return;
        };
        let Ok(pc) = PageCache::attach(&w, 0, slots) else {
            log::error!("daxfs: the slot array's header is corrupt");
            return;
        };
        let few = last.saturating_sub(first) < 64;
        let got = if few {
            let mut sum = daxcache::pcache::Invalidated::default();
            for idx in first..=last {
                let Ok(t) = Tag::new(ino, idx) else { break };
                match pc.invalidate(t) {
                    Ok(x) => {
                        sum.freed += x.freed;
                        sum.retired += x.retired;
                    }
                    Err(e) => {
                        log::error!("daxfs: invalidate ino {ino} page {idx}: {e}");
                    }
                }
            }
            Ok(sum)
        } else {
            pc.invalidate_where(|t| t.ino() == ino && (first..=last).contains(&t.pgoff()))
        };
        let Ok(got) = got else {
            log::error!("daxfs: invalidate ino {ino}: corrupt slot array");
            return;
        };
        self.dax.stats.invalidated += got.freed as u64;
        self.dax.stats.retired += got.retired as u64;
    }

    /// `node` is gone: give back its claims and pins.
    pub(super) fn dax_reclaim(&mut self, mem: &(impl SharedMem + ?Sized), node: u32) {
        let (Some(d), Some(owner)) = (self.dax.layout, owner_of(node)) else {
            return;
        };
        let Some((w, slots)) = cache(mem, &d) else {
            return;
        };
        let Ok(pc) = PageCache::attach(&w, 0, slots) else {
            return;
        };
        match pc.reclaim_owner(owner) {
            Ok(r) => {
                self.dax.stats.reclaimed += (r.claims + r.pins) as u64;
                if r.claims + r.pins + r.uncertain > 0 {
                    log::info!(
                        "daxfs: node {node}: {} claim(s) and {} pin(s) given back, {} uncertain pin(s) left",
                        r.claims,
                        r.pins,
                        r.uncertain
                    );
                }
            }
            Err(e) => log::error!("daxfs: reclaim of node {node}: {e}"),
        }
    }
}
