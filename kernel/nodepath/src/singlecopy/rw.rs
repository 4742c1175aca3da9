//! Reads and writes of the single-copy path (write-back and fsync:
//! `writeback`).

use alloc::boxed::Box;
use alloc::vec::Vec;

use fabric::proto::{Errno, PageKey, PageReq};
use fabric::shm::SharedMem;

use super::remote::{cxl_delay, frame_off};
use super::{ScState, BATCH, MAX_RETRIES};
use crate::env::Env;
use crate::link::Link;
use crate::pagecache::{Hit, Mode, Slot, PAGE};

/// Relaxed mode: does a write to a page this node does not hold need no
/// old bytes? Yes if it covers the page `whole`, or the page starts at or
/// past `zeros_from`, the end of file this node knows.
fn no_old_bytes(start: u64, whole: bool, zeros_from: u64) -> bool {
    whole || start >= zeros_from
}

/// A page holding `chunk` at `in_page` and zeros elsewhere. A whole page
/// is copied into a fresh allocation without zeroing it first (the common
/// case of a relaxed write to a page this node does not hold).
fn page_with(in_page: usize, chunk: &[u8]) -> Box<[u8; PAGE]> {
    if chunk.len() == PAGE {
        if let Ok(p) = Box::<[u8; PAGE]>::try_from(chunk.to_vec().into_boxed_slice()) {
            return p;
        }
    }
    let mut p = Box::new([0u8; PAGE]);
    p[in_page..in_page + chunk.len()].copy_from_slice(chunk);
    p
}

impl ScState {
    /// Read `buf.len()` bytes at `pos` of `ino` (the caller clipped to
    /// EOF). Copies from a peer's frame cost `cxl_ns` more.
    pub fn read<E: Env>(
        &mut self,
        link: &mut Link<E>,
        ino: u64,
        pos: u64,
        buf: &mut [u8],
        cxl_ns: u64,
    ) -> Result<usize, Errno> {
        let first = pos / PAGE as u64;
        let last = (pos + buf.len() as u64).div_ceil(PAGE as u64);
        let mut done = 0usize;
        let mut idx = first;
        let mut stuck = 0u32;
        while idx < last {
            // The time the eviction policy stamps on these accesses (TTL).
            let now = link.env.now_ns();
            if let Some(c) = self.cache() {
                c.set_clock(now);
            }
            // Resolve a batch of upcoming misses at once.
            let end = (idx + BATCH as u64).min(last);
            let missing: Vec<PageKey> = (idx..end)
                .map(|i| PageKey { ino, idx: i })
                .filter(|k| self.cache().map(|c| c.slot(k).is_none()).unwrap_or(true))
                .collect();
            if !missing.is_empty() {
                self.resolve(link, &missing, false)?;
            }
            while idx < end {
                // A notify ring found corrupt (here or in an earlier call
                // of this operation) may have lost invalidations of any
                // page held here: nothing more comes from this cache.
                self.intact()?;
                let key = PageKey { ino, idx };
                let at = pos + done as u64;
                let in_page = (at % PAGE as u64) as usize;
                let n = (PAGE - in_page).min(buf.len() - done);
                let mem = link.env.mem();
                let c = self.c()?;
                let mut promote = None;
                let copied = match c.cache.lookup(&key) {
                    Hit::Local(g) => {
                        mem.read(frame_off(g) + in_page, &mut buf[done..done + n]);
                        true
                    }
                    Hit::Remote(g) => {
                        cxl_delay(&link.env, cxl_ns);
                        mem.read(frame_off(g) + in_page, &mut buf[done..done + n]);
                        if c.cache.wants_replica(&key) {
                            promote = Some(g);
                        }
                        true
                    }
                    Hit::Replica(_) => {
                        let p = c.cache.replica(&key).map(|p| &p[in_page..in_page + n]);
                        if let Some(p) = p {
                            buf[done..done + n].copy_from_slice(p);
                        }
                        p.is_some()
                    }
                    Hit::Private => {
                        let p = c.cache.private(&key).map(|p| &p[in_page..in_page + n]);
                        if let Some(p) = p {
                            buf[done..done + n].copy_from_slice(p);
                        }
                        p.is_some()
                    }
                    Hit::Miss => false,
                };
                if !copied {
                    // Invalidated while we waited for another page: again
                    // (bounded: a page that never becomes readable is an
                    // error, not a loop that services nothing).
                    stuck += 1;
                    if stuck > MAX_RETRIES {
                        log::warn!("read of {key:?}: the page never became readable");
                        return Err(Errno::Io);
                    }
                    self.resolve(link, &[key], false)?;
                    continue;
                }
                stuck = 0;
                if let Some(g) = promote {
                    self.promote(link, key, g, cxl_ns);
                }
                done += n;
                idx += 1;
            }
        }
        Ok(done)
    }

    /// Relaxed mode: would a write of `len` bytes at `pos` of `ino` land
    /// in private copies only (pages already private, pages mapped from a
    /// peer, whole pages or pages at or past `zeros_from` that this node
    /// does not hold)? Then it needs no directory call at all, and its
    /// extension of the file can stay local until the copies are written
    /// back (see `SingleCopy::write_chunk`). A page in our frame, being
    /// torn down or in flight, or a partial page with old bytes to read,
    /// says no.
    pub fn private_only(&self, ino: u64, pos: u64, len: usize, zeros_from: u64) -> bool {
        let Some(c) = self.coh.as_ref().filter(|c| c.active()) else {
            return false;
        };
        if c.cache.mode() != Mode::Relaxed || len == 0 {
            return false;
        }
        let page = PAGE as u64;
        let end = pos + len as u64;
        (pos / page..end.div_ceil(page)).all(|idx| {
            let key = PageKey { ino, idx };
            let start = idx * page;
            let whole = pos <= start && end >= start + page;
            !c.cache.in_flight(&key)
                && match c.cache.slot(&key) {
                    Some(Slot::Private(_)) | Some(Slot::Remote { .. }) => true,
                    None => no_old_bytes(start, whole, zeros_from),
                    Some(_) => false,
                }
        })
    }

    /// Write `data` at `pos` of `ino`. Relaxed mode: `zeros_from` is the
    /// file size this node knows; a page this node does not hold that
    /// starts there or later has no old bytes to read, so a partial write
    /// to it makes a private copy at once, as a whole-page write does.
    pub fn write<E: Env>(
        &mut self,
        link: &mut Link<E>,
        ino: u64,
        pos: u64,
        data: &[u8],
        zeros_from: u64,
    ) -> Result<usize, Errno> {
        let mode = self.c()?.cache.mode();
        self.settle_reads_of(link, ino, pos, data.len());
        let mut done = 0usize;
        let mut tries = 0u32;
        let now = link.env.now_ns();
        if let Some(c) = self.cache() {
            c.set_clock(now);
        }
        // Under an append lock every store is checked against its budget
        // just before it happens (below): no batch of whole pages stored
        // after one round trip.
        let written = if mode == Mode::Strong && !self.appending() {
            self.write_full_pages(link, ino, pos, data)?
        } else {
            Vec::new()
        };
        while done < data.len() {
            let at = pos + done as u64;
            let key = PageKey {
                ino,
                idx: at / PAGE as u64,
            };
            let in_page = (at % PAGE as u64) as usize;
            let n = (PAGE - in_page).min(data.len() - done);
            if written.binary_search(&key).is_ok() {
                done += n;
                continue;
            }
            let chunk = &data[done..done + n];
            // As in `read`: no store through a slot whose invalidation
            // may have been lost (the frame may be another page's now).
            self.intact()?;
            let hit = self.c()?.cache.lookup(&key);
            log::trace!("write {key:?} +{in_page} len {n}: {hit:?}");
            let stored = match (hit, mode) {
                (Hit::Local(g), _)
                | (Hit::Remote(g), Mode::Strong)
                | (Hit::Replica(g), Mode::Strong) => {
                    self.store_in_frame(link, key, g, in_page, chunk)?
                }
                (Hit::Remote(g) | Hit::Replica(g), _) => {
                    self.copy_peer_page(link, key, g, in_page, chunk)?;
                    true
                }
                (Hit::Private, _) => {
                    if let Some(p) = self.cache().and_then(|c| c.private_mut(&key)) {
                        p[in_page..in_page + n].copy_from_slice(chunk);
                    }
                    self.wrote_copy(key, in_page..in_page + n, false);
                    true
                }
                (Hit::Miss, Mode::Relaxed)
                    if no_old_bytes(key.idx * PAGE as u64, n == PAGE, zeros_from) =>
                {
                    self.copy_new_page(link, key, in_page, chunk);
                    true
                }
                (Hit::Miss, _) => {
                    tries += 1;
                    if tries > MAX_RETRIES {
                        log::warn!(
                            "write of {key:?}: the page was never installed (retries exhausted)"
                        );
                        return Err(Errno::Io);
                    }
                    let installed = self.install_missed(link, key, in_page, chunk)?;
                    if installed > 0 {
                        done += n * installed;
                        tries = 0;
                    }
                    continue;
                }
            };
            if !stored {
                // Replicas revoked: look the page up again.
                tries += 1;
                if tries > MAX_RETRIES {
                    log::warn!("write of {key:?}: replicas kept being revoked (retries exhausted)");
                    return Err(Errno::Io);
                }
                continue;
            }
            done += n;
            tries = 0;
        }
        Ok(done)
    }

    /// A task's READ in flight of a page a write of `len` bytes at `pos`
    /// of `ino` covers is applied first: its answer must not replace the
    /// bytes written (relaxed mode makes private copies without asking the
    /// directory).
    fn settle_reads_of<E: Env>(&mut self, link: &mut Link<E>, ino: u64, pos: u64, len: usize) {
        if self.reads_in_flight() {
            let last = (pos + len.max(1) as u64 - 1) / PAGE as u64;
            let keys: Vec<PageKey> = (pos / PAGE as u64..=last)
                .map(|idx| PageKey { ino, idx })
                .collect();
            self.settle_reads(link, &keys);
        }
    }

    /// Store `chunk` at `in_page` of `key` straight into frame `g` (ours,
    /// or strong mode's peer frame), within an append's budget; `false`
    /// if the page's replicas were revoked meanwhile (look it up again).
    fn store_in_frame<E: Env>(
        &mut self,
        link: &mut Link<E>,
        key: PageKey,
        g: u64,
        in_page: usize,
        chunk: &[u8],
    ) -> Result<bool, Errno> {
        if !self.begin_store(link, key, g)? {
            return Ok(false);
        }
        if let Err(e) = self.in_append_budget(link.env.now_ns()) {
            self.end_store(link);
            return Err(e);
        }
        link.env.mem().write(frame_off(g) + in_page, chunk);
        self.end_store(link);
        if let Some(c) = self.cache() {
            c.mark_dirty(&key);
        }
        Ok(true)
    }

    /// Relaxed: a write to a page mapped from a peer's frame `g` makes a
    /// private copy, written back at fsync (a replica goes with the
    /// mapping). A whole page needs none of the peer's bytes.
    fn copy_peer_page<E: Env>(
        &mut self,
        link: &mut Link<E>,
        key: PageKey,
        g: u64,
        in_page: usize,
        chunk: &[u8],
    ) -> Result<(), Errno> {
        let n = chunk.len();
        let p = if n == PAGE {
            page_with(0, chunk)
        } else {
            let mut p = Box::new([0u8; PAGE]);
            link.env.mem().read(frame_off(g), &mut p[..]);
            p[in_page..in_page + n].copy_from_slice(chunk);
            p
        };
        // The window mapping of the peer's frame goes too:
        // the owner may reuse that frame for another page.
        if let Ok(c) = self.c() {
            c.unmap(&link.env, &key);
        }
        self.wrote_copy(key, in_page..in_page + n, true);
        if self
            .cache()
            .map(|c| c.make_private(key, p))
            .unwrap_or(false)
        {
            // The DROP goes with the next batch (no wait here).
            self.defer_drop(link, key)?;
        }
        Ok(())
    }

    /// Relaxed: a full page, or one past the end of the file, needs no
    /// old data: a private copy at once, no READ fill, no directory call.
    fn copy_new_page<E: Env>(
        &mut self,
        link: &Link<E>,
        key: PageKey,
        in_page: usize,
        chunk: &[u8],
    ) {
        let p = page_with(in_page, chunk);
        if let Ok(c) = self.c() {
            c.unmap(&link.env, &key);
        }
        self.wrote_copy(key, in_page..in_page + chunk.len(), true);
        if let Some(c) = self.cache() {
            c.make_private(key, p);
        }
    }

    /// A page held in no form: resolve it; each page granted E is
    /// installed here whole with `chunk` at `in_page`, then UNLOCKed (past
    /// an append's budget, as the page with no data it was: another node
    /// may append there now). Returns how many were installed.
    fn install_missed<E: Env>(
        &mut self,
        link: &mut Link<E>,
        key: PageKey,
        in_page: usize,
        chunk: &[u8],
    ) -> Result<usize, Errno> {
        let full = chunk.len() == PAGE;
        let mut installed = 0;
        for (k, gfn) in self.resolve(link, &[key], full)? {
            let late = self.in_append_budget(link.env.now_ns());
            let mut page = [0u8; PAGE];
            if late.is_ok() {
                page[in_page..in_page + chunk.len()].copy_from_slice(chunk);
            }
            link.env.mem().write(frame_off(gfn), &page);
            let r = self.page_calls(link, &[PageReq::Unlock { key: k }]);
            self.unlocked_or_broken(r)?;
            if let Some(c) = self.cache() {
                c.unlocked(k);
            }
            late?;
            installed += 1;
        }
        Ok(installed)
    }

    /// Relaxed mode: bytes `r` of the private copy of `key` were written
    /// (`fresh`: into a copy just made, which holds nothing else of ours).
    fn wrote_copy(&mut self, key: PageKey, r: core::ops::Range<usize>, fresh: bool) {
        if let Some(c) = self.coh.as_mut() {
            let w = c.written.entry(key).or_default();
            if fresh {
                *w = crate::dirty::DirtyBytes::default();
            }
            w.add(r);
        }
    }

    /// The UNLOCK of pages we wrote under E failed (timed out, or the
    /// rings broke): the directory may still hold them locked by us and
    /// our slots stay reserved, which nothing here can undo. The session
    /// is marked broken: calls fail as "directory unavailable" until the
    /// next membership check rejoins with a new epoch (forgetting every
    /// slot), instead of later accesses waiting on those slots for good.
    fn unlocked_or_broken<T>(&mut self, r: Result<T, Errno>) -> Result<(), Errno> {
        if let Err(e) = r {
            log::warn!(
                "UNLOCK failed ({e:?}): session broken, rejoining at the next membership check"
            );
            if let Ok(c) = self.c() {
                c.broken = true;
            }
            return Err(e);
        }
        Ok(())
    }

    /// Strong mode: the pages `data` covers whole and this node holds in
    /// no form are resolved together (LOOKUP_LOCKs, up to [`BATCH`] per
    /// round trip), written into the frames granted E, and UNLOCKed
    /// together: two round trips per [`BATCH`] pages instead of two per
    /// page. Returns the pages written (ascending); the others (owned
    /// elsewhere: a `Shared` answer maps the owner's frame) are left to
    /// the page-by-page loop. Pages granted E are written and UNLOCKed
    /// even when other pages of the batch failed, so no page is left
    /// locked or holding anything but the caller's bytes.
    fn write_full_pages<E: Env>(
        &mut self,
        link: &mut Link<E>,
        ino: u64,
        pos: u64,
        data: &[u8],
    ) -> Result<Vec<PageKey>, Errno> {
        let page = PAGE as u64;
        let end = pos + data.len() as u64;
        let keys: Vec<PageKey> = (pos.div_ceil(page)..end / page)
            .map(|idx| PageKey { ino, idx })
            .filter(|k| {
                self.cache()
                    .is_some_and(|c| c.slot(k).is_none() && !c.in_flight(k))
            })
            .collect();
        // Under a delegation of their range: placed with no request.
        let mut written = self.place_delegated(link, pos, data, &keys)?;
        let keys: Vec<PageKey> = keys
            .into_iter()
            .filter(|k| written.binary_search(k).is_err())
            .collect();
        for chunk in keys.chunks(BATCH) {
            let mut reserved = Vec::new();
            let r = self.resolve_into(link, chunk, true, BATCH, &mut reserved);
            reserved.sort_unstable();
            for (k, gfn) in &reserved {
                let off = (k.idx * page - pos) as usize;
                link.env
                    .mem()
                    .write(frame_off(*gfn), &data[off..off + PAGE]);
            }
            if !reserved.is_empty() {
                let unlocks: Vec<PageReq> = reserved
                    .iter()
                    .map(|(key, _)| PageReq::Unlock { key: *key })
                    .collect();
                let r = self.page_calls(link, &unlocks);
                self.unlocked_or_broken(r)?;
                if let Some(c) = self.cache() {
                    for (k, _) in &reserved {
                        c.unlocked(*k);
                    }
                }
                written.extend(reserved.iter().map(|(k, _)| *k));
            }
            r?;
        }
        written.sort_unstable();
        Ok(written)
    }
}

#[cfg(test)]
mod tests {
    use super::{page_with, PAGE};

    #[test]
    fn a_page_holds_the_chunk_and_zeros_elsewhere() {
        let whole: alloc::vec::Vec<u8> = (0..PAGE).map(|i| (i % 251) as u8 + 1).collect();
        assert_eq!(&page_with(0, &whole)[..], &whole[..]);
        let p = page_with(100, &[7u8; 10]);
        assert!(p[..100].iter().all(|&b| b == 0));
        assert_eq!(&p[100..110], &[7u8; 10]);
        assert!(p[110..].iter().all(|&b| b == 0));
        let tail = page_with(PAGE - 3, &[9u8; 3]);
        assert_eq!(&tail[PAGE - 3..], &[9u8; 3]);
        assert!(tail[..PAGE - 3].iter().all(|&b| b == 0));
    }
}
