//! Reclaim ahead of need in the private-cache modes (`crate::watermark`):
//! between operations and at idle, when the cache's room drops under the
//! low mark, clean pages are dropped and the oldest dirty ones written
//! back and dropped until the high mark is free, so a read or write that
//! comes next finds room without writing back first.

use alloc::vec::Vec;

use fabric::proto::Errno;

use super::{Private, WRITEBACK_BATCH};
use crate::env::Env;
use crate::link::Link;
use crate::vfs::Meta;

impl Private {
    /// Free pages of the cache (room for pages not cached yet).
    fn room_now(&self) -> usize {
        self.max_pages.saturating_sub(self.cached_pages)
    }

    /// Drop up to `n` clean pages, lowest file and page first; how many.
    fn drop_clean(&mut self, n: usize) -> usize {
        let mut gone = 0;
        let inos: Vec<u64> = self.pages.keys().copied().collect();
        for ino in inos {
            if gone >= n {
                break;
            }
            let dirty = &self.dirty;
            let Some(p) = self.pages.get_mut(&ino) else {
                continue;
            };
            let clean: Vec<u64> = p
                .keys()
                .filter(|idx| !dirty.contains_key(&(ino, **idx)))
                .take(n - gone)
                .copied()
                .collect();
            for idx in &clean {
                p.remove(idx);
            }
            gone += clean.len();
            if p.is_empty() {
                self.pages.remove(&ino);
            }
        }
        self.cached_pages -= gone;
        gone
    }

    /// See the module: pages freed ahead of need.
    pub(super) fn reclaim_ahead_now<E: Env>(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
    ) -> Result<usize, Errno> {
        let mut want = self.marks.wanted(self.max_pages, self.room_now(), 0);
        if want == 0 {
            return Ok(0);
        }
        let mut freed = self.drop_clean(want);
        want -= freed;
        while want > 0 && !self.dirty.is_empty() {
            let mut keys: Vec<(u64, u64)> = self
                .dirty_age
                .values()
                .take(WRITEBACK_BATCH.min(want))
                .copied()
                .collect();
            keys.sort_unstable();
            if let Err(e) = self.write_back(link, meta, &keys) {
                self.ahead += freed as u64;
                return Err(e);
            }
            let n = self.drop_clean(want);
            if n == 0 {
                break;
            }
            freed += n;
            want -= n;
        }
        self.ahead += freed as u64;
        Ok(freed)
    }
}
