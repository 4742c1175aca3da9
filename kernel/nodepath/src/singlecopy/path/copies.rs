//! Relaxed mode's private copies on the single-copy path: their ages,
//! the bound on their number (the oldest written back first), and what a
//! write-back, a failed one or a lost session leaves of them.

use alloc::vec::Vec;
use core::sync::atomic::Ordering;

use fabric::proto::{Errno, PageKey};

use super::{SingleCopy, PRIVATE_WRITEBACK_BATCH};
use crate::env::Env;
use crate::link::Link;
use crate::pagecache::PAGE;
use crate::vfs::Meta;

impl SingleCopy {
    /// Does every page `[pos, pos + len)` of `ino` live in a private
    /// copy here?
    pub(super) fn all_private(&self, ino: u64, pos: u64, len: usize) -> bool {
        let page = PAGE as u64;
        let end = pos + len as u64;
        (pos / page..end.div_ceil(page)).all(|idx| self.is_private(&PageKey { ino, idx }))
    }

    fn is_private(&self, key: &PageKey) -> bool {
        self.st
            .coh
            .as_ref()
            .is_some_and(|c| c.cache.private(key).is_some())
    }

    /// Note the private copies among pages `[first, last)` of `ino`.
    pub(super) fn track_private(&mut self, ino: u64, first: u64, last: u64) {
        for idx in first..last {
            let key = PageKey { ino, idx };
            if self.is_private(&key) && !self.private_age.contains_key(&key) {
                self.private_age.insert(key, self.next_age);
                self.private_order.insert(self.next_age, key);
                self.next_age += 1;
            }
        }
    }

    /// `ino`'s private copies were written back (all of them, or a
    /// batch): forget the tracking of those gone, and once none is left
    /// the local size too (the write-backs, clipped to it, extended the
    /// directory's file to it).
    pub(super) fn written_back(&mut self, meta: &mut Meta, ino: u64) {
        self.untrack(ino);
        let left = self
            .st
            .coh
            .as_ref()
            .is_some_and(|c| !c.cache.private_pages(ino).is_empty());
        if !left {
            meta.clear_local_size(ino);
        }
    }

    /// Forget the tracking of `ino`'s copies that are gone.
    pub(super) fn untrack(&mut self, ino: u64) {
        let keys: Vec<PageKey> = self
            .private_age
            .range(PageKey { ino, idx: 0 }..=PageKey { ino, idx: u64::MAX })
            .map(|(k, _)| *k)
            .collect();
        for key in keys {
            if !self.is_private(&key) {
                if let Some(age) = self.private_age.remove(&key) {
                    self.private_order.remove(&age);
                }
            }
        }
    }

    /// At the bound: write back and free the oldest private copies.
    pub(super) fn bound_private<E: Env>(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
    ) -> Result<(), Errno> {
        let count = |s: &Self| {
            s.st.coh
                .as_ref()
                .map(|c| c.cache.private_count())
                .unwrap_or(0)
        };
        while count(self) >= self.max_private {
            let mut batch: Vec<PageKey> = Vec::new();
            while batch.len() < PRIVATE_WRITEBACK_BATCH {
                let Some((_, key)) = self.private_order.pop_first() else {
                    break;
                };
                self.private_age.remove(&key);
                if self.is_private(&key) {
                    batch.push(key);
                }
            }
            if batch.is_empty() {
                // Copies we never saw made: write back everything.
                return self.fsync_dirty(link, meta);
            }
            batch.sort_unstable();
            for ino_run in batch.chunk_by(|a, b| a.ino == b.ino) {
                let ino = ino_run[0].ino;
                let size = meta.size_of(ino);
                self.st
                    .write_back_private(link, (ino, meta.gen(ino)), ino_run, size)?;
                if meta.local_size(ino).is_some() {
                    self.written_back(meta, ino);
                }
            }
        }
        Ok(())
    }

    /// Forget `ino`'s private copies unwritten.
    pub(super) fn drop_copies(&mut self, ino: u64) {
        if let Some(c) = self.st.coh.as_mut() {
            for key in c.cache.private_pages(ino) {
                c.cache.drop_private(&key);
                c.written.remove(&key);
            }
        }
        self.untrack(ino);
    }

    /// `r`, the result of a write-back of `ino` that a close, fsync or
    /// truncate reports. A failure the directory answered loses exactly
    /// what it could not write ([`crate::dirty::drops_unwritten`]): the
    /// private copies left go, and so does the size they extended the
    /// file to. Kept, they would read here under the size other nodes'
    /// writes publish meanwhile (zeros past this node's old end, its own
    /// unwritten bytes where another node's completed write landed), and
    /// a later write-back would carry them over those writes.
    pub(super) fn reported(
        &mut self,
        meta: &mut Meta,
        ino: u64,
        r: Result<(), Errno>,
    ) -> Result<(), Errno> {
        match r {
            Err(e) if crate::dirty::drops_unwritten(e) => {
                log::warn!(
                    "write-back of inode {ino} failed ({e:?}): its unwritten copies dropped"
                );
                self.drop_copies(ino);
                meta.forget_local_size(ino);
            }
            _ => self.written_back(meta, ino),
        }
        r
    }

    /// The session is about to drop every page, private copies included:
    /// if it holds any, they are lost unwritten.
    pub(super) fn losing_copies(&mut self) {
        let held = self
            .st
            .coh
            .as_ref()
            .is_some_and(|c| c.cache.private_count() > 0);
        if held {
            log::warn!("private copies lost unwritten: local sizes go back to the directory's");
            self.losses.fetch_add(1, Ordering::Release);
            self.private_age.clear();
            self.private_order.clear();
        }
    }
}
