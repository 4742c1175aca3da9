//! Where pages live, as the directory tells it: the sharer counts it
//! reports to owners (a `Sharers` notice when a node maps or drops one of
//! their pages, for cluster-aware eviction) and `locality PATH`'s runs of
//! pages (owner and sharers, or on disk only).

use crate::pagedir::Phase;
use fabric::bulk::Bulk;
use fabric::proto::{Errno, LocalityRange, Notice, PageKey, Response, LOCALITY_RECORD};
use fabric::shm::SharedMem;
use fabric::PAGE_SIZE;
use flatfs::BlockDevice;

use super::Directory;

/// Most pages one `Locality` request looks at (bounded work per request;
/// the answer's `next_page` continues).
pub const LOCALITY_SCAN: u64 = 1 << 16;

/// Owner and sharer count of a settled page.
pub(super) type SharerView = Option<(u8, u32)>;

impl<D: BlockDevice> Directory<D> {
    /// Owner and number of sharers of `key` if it is settled (O + S).
    pub(super) fn sharer_view(&self, key: &PageKey) -> SharerView {
        self.pages
            .entry(key)
            .filter(|e| e.phase == Phase::Owned)
            .map(|e| (e.owner, e.sharers.count_ones()))
    }

    /// After a page request: if the page's sharer count changed under the
    /// same owner, tell the owner (no ack; a lost or late count only
    /// changes an eviction order).
    pub(super) fn report_sharers(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        key: PageKey,
        before: SharerView,
    ) {
        // An uncached page (a miss) had no view: no page lookup for it.
        let Some((owner, old)) = before else {
            return;
        };
        let Some((now_owner, count)) = self.sharer_view(&key) else {
            return;
        };
        if owner != now_owner || old == count {
            return;
        }
        self.notify_sharers(mem, owner, key, count);
    }

    /// Tell `owner` that `key` has `count` sharers now.
    pub(super) fn notify_sharers(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        owner: u8,
        key: PageKey,
        count: u32,
    ) {
        if self.members.is_member(owner.into()) {
            self.links
                .notify(owner.into(), Notice::Sharers { key, count }.encode());
            let _ = self.flush(mem, owner.into());
        }
    }

    /// `Locality`: runs of pages of `ino` from page `first` on, as
    /// [`LocalityRange`] records in `slot`; `next_cookie` is where to go on
    /// (0: the end of the file was reached).
    pub(super) fn locality(
        &mut self,
        bulk: &mut dyn Bulk,
        slot: u32,
        ino: u64,
        first: u64,
    ) -> Result<Response, Errno> {
        let fs = self.fs.as_mut().ok_or(Errno::Unavailable)?;
        let size = fs.getattr(ino)?.size;
        let pages = size.div_ceil(PAGE_SIZE as u64);
        let max = bulk.cap(slot).ok_or(Errno::Invalid)? / LOCALITY_RECORD;
        if max == 0 {
            return Err(Errno::Invalid);
        }
        let end = pages.min(first.saturating_add(LOCALITY_SCAN));
        let mut count = 0usize;
        let mut run: Option<LocalityRange> = None;
        let mut idx = first;
        while idx < end {
            let (owner, sharers) = self
                .pages
                .entry(&PageKey { ino, idx })
                .map_or((0, 0), |e| (e.owner, e.sharers.count_ones() as u8));
            match run.as_mut() {
                Some(r) if r.owner == owner && r.sharers == sharers && r.pages < u32::MAX => {
                    r.pages += 1
                }
                _ => {
                    if let Some(r) = run.take() {
                        if count == max {
                            // The slot is full: continue at this run.
                            return Ok(Response::Entries {
                                count: count as u32,
                                next_cookie: r.first,
                            });
                        }
                        bulk.write(slot, count * LOCALITY_RECORD, &r.encode())?;
                        count += 1;
                    }
                    run = Some(LocalityRange {
                        first: idx,
                        pages: 1,
                        owner,
                        sharers,
                    });
                }
            }
            idx += 1;
        }
        if let Some(r) = run {
            if count == max {
                return Ok(Response::Entries {
                    count: count as u32,
                    next_cookie: r.first,
                });
            }
            bulk.write(slot, count * LOCALITY_RECORD, &r.encode())?;
            count += 1;
        }
        Ok(Response::Entries {
            count: count as u32,
            next_cookie: if end < pages { end } else { 0 },
        })
    }
}
