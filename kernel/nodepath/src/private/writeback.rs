//! The private-cache path's writes: buffered (`baseline_writes=back`:
//! dirty pages, their write-back in runs, reclaim under pressure) and
//! write-through.

use alloc::boxed::Box;
use alloc::vec::Vec;
use fabric::proto::{Attr, Errno, Op, Request, Response};

use super::{Private, PAGE, WRITEBACK_BATCH};
use crate::dirty::Run;
use crate::env::Env;
use crate::link::{contiguous_runs, Link, WriteReq};
use crate::vfs::{FileMeta, Meta};

impl Private {
    pub(super) fn mark_dirty(&mut self, ino: u64, idx: u64) {
        if let alloc::collections::btree_map::Entry::Vacant(e) = self.dirty.entry((ino, idx)) {
            e.insert(self.next_age);
            self.dirty_age.insert(self.next_age, (ino, idx));
            self.next_age += 1;
        }
    }

    pub(super) fn mark_clean(&mut self, ino: u64, idx: u64) {
        self.written.remove(&(ino, idx));
        if let Some(age) = self.dirty.remove(&(ino, idx)) {
            self.dirty_age.remove(&age);
        }
    }

    /// Forget clean page `idx` of `ino`.
    pub(super) fn forget_page(&mut self, ino: u64, idx: u64) {
        if self.dirty.contains_key(&(ino, idx)) {
            return;
        }
        if let Some(p) = self.pages.get_mut(&ino) {
            if p.remove(&idx).is_some() {
                self.cached_pages -= 1;
            }
        }
    }

    /// Forget pages of `ino` from index `from` on, dirty ones too.
    pub(super) fn discard_from(&mut self, ino: u64, from: u64) {
        let gone: Vec<u64> = self
            .pages
            .get(&ino)
            .map(|p| p.range(from..).map(|(i, _)| *i).collect())
            .unwrap_or_default();
        for idx in gone {
            self.mark_clean(ino, idx);
            if let Some(p) = self.pages.get_mut(&ino) {
                p.remove(&idx);
                self.cached_pages -= 1;
            }
        }
    }

    /// Make room for `n` more pages: drop the clean pages, then write back
    /// the oldest dirty ones (and drop them) until they fit.
    pub(super) fn make_room<E: Env>(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        n: usize,
    ) -> Result<(), Errno> {
        if self.cached_pages + n <= self.max_pages {
            return Ok(());
        }
        self.waited += 1;
        self.drop_all();
        while self.cached_pages + n > self.max_pages && !self.dirty.is_empty() {
            let mut keys: Vec<(u64, u64)> = self
                .dirty_age
                .values()
                .take(WRITEBACK_BATCH)
                .copied()
                .collect();
            keys.sort_unstable();
            self.write_back(link, meta, &keys)?;
            self.drop_all();
        }
        Ok(())
    }

    /// Send the dirty pages `keys` (sorted) to the file server: runs of
    /// contiguous pages of one file in one write of up to a bulk slot,
    /// the last page of a file clipped to its size. They stay cached,
    /// clean.
    pub(super) fn write_back<E: Env>(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        keys: &[(u64, u64)],
    ) -> Result<(), Errno> {
        if keys.is_empty() {
            return Ok(()); // nothing dirty: no call, not even for the slot
        }
        // After the tasks' write-backs in flight: they hold the slot, and
        // their writes come first. The pages they cleaned need no write
        // (one written in part is gone from the cache: sent, it would be
        // zeros).
        self.finish_in_flight(link, meta)?;
        let keys: Vec<(u64, u64)> = keys
            .iter()
            .filter(|k| self.dirty.contains_key(k))
            .copied()
            .collect();
        let keys = &keys[..];
        let max_run = (link.bulk_cap(2)? / PAGE).max(1);
        let runs = self.runs(meta, keys, max_run);
        // Every piece in flight together (as many as the write slot
        // holds), answered in order: our versions follow one another.
        let reqs: Vec<WriteReq<'_>> = runs
            .iter()
            .flat_map(|(ino, r)| r.writes(*ino, meta.gen(*ino)))
            .collect();
        let mut answers = link.fs_write_batch(&reqs, self)?.into_iter();
        let mut err = None;
        for (ino, run) in &runs {
            let mut ok = true;
            for p in &run.pieces {
                match crate::dirty::written(answers.next().as_ref(), p.len()) {
                    Ok(attr) => self.learn_own_write(meta, attr),
                    Err(e) => {
                        err.get_or_insert(e);
                        ok = false;
                    }
                }
            }
            if !ok {
                continue; // still dirty
            }
            self.written_back += run.data.len().div_ceil(PAGE) as u64;
            // Pages wholly past the end (the file shrank) had nothing to send.
            for k in 0..run.n as u64 {
                self.clean_written(*ino, run.first + k);
            }
            if !self.dirty.range((*ino, 0)..=(*ino, u64::MAX)).any(|_| true) {
                meta.clear_local_size(*ino);
            }
        }
        err.map_or(Ok(()), Err)
    }

    /// The runs of the dirty pages `keys` (sorted) to write back:
    /// contiguous pages of one file, up to `max_run` pages each, the last
    /// page of a file clipped to its size, each with the pieces of it this
    /// node wrote (the only bytes sent).
    pub(super) fn runs(&self, meta: &Meta, keys: &[(u64, u64)], max_run: usize) -> Vec<(u64, Run)> {
        contiguous_runs(keys, max_run, |&(ino, idx), n| (ino, idx + n))
            .into_iter()
            .map(|r| {
                let (ino, first) = keys[r.start];
                let data = self.run_bytes(meta, ino, first, r.len());
                let run = Run::new(first, r.len(), data, |k| {
                    self.written.get(&(ino, first + k as u64))
                });
                (ino, run)
            })
            .collect()
    }

    /// Page `idx` of `ino` was written back: it is clean. A page we wrote
    /// in part holds older bytes elsewhere, which another node may have
    /// rewritten: it goes (the next read fetches the file server's).
    pub(super) fn clean_written(&mut self, ino: u64, idx: u64) {
        let partial = self
            .written
            .get(&(ino, idx))
            .is_some_and(|w| *w != crate::dirty::DirtyBytes::whole());
        self.mark_clean(ino, idx);
        if partial {
            self.forget_page(ino, idx);
        }
    }

    /// The bytes of pages `[first, first+n)` of `ino` to write back (the
    /// last page clipped to the file's size; empty past the end).
    pub(super) fn run_bytes(&self, meta: &Meta, ino: u64, first: u64, n: usize) -> Vec<u8> {
        let start = first * PAGE as u64;
        let size = meta.size_of(ino);
        let len = (size.saturating_sub(start)).min((n * PAGE) as u64) as usize;
        let mut buf = alloc::vec![0u8; len];
        for (k, chunk) in buf.chunks_mut(PAGE).enumerate() {
            if let Some(p) = self
                .pages
                .get(&ino)
                .and_then(|c| c.get(&(first + k as u64)))
            {
                chunk.copy_from_slice(&p[..chunk.len()]);
            }
        }
        buf
    }

    /// The directory's answer to our own write: our pages stay if the
    /// version moved by exactly that write, else the clean ones go.
    pub(super) fn learn_own_write(&mut self, meta: &mut Meta, attr: &Attr) {
        match meta.get(attr.ino) {
            Some(m) if attr.version == m.version.wrapping_add(1) => meta.set(
                attr.ino,
                FileMeta {
                    version: attr.version,
                    size: attr.size,
                },
            ),
            _ => {
                self.drop_pages(attr.ino);
                meta.learn(attr);
            }
        }
    }

    /// `r`, the result of a write-back of `ino` that a close or fsync
    /// reports. A failure the directory answered loses exactly what it
    /// could not write ([`crate::dirty::drops_unwritten`]): the pages left
    /// dirty go, and so does the size they extended the file to. Kept,
    /// they would read here under the size other nodes' writes publish
    /// meanwhile (zeros past this node's old end, its own unwritten bytes
    /// where another node's completed write landed), and a later
    /// write-back would carry them over those writes.
    pub(super) fn reported(
        &mut self,
        meta: &mut Meta,
        ino: u64,
        r: Result<(), Errno>,
    ) -> Result<(), Errno> {
        if let Some(e) = r.err().filter(|&e| crate::dirty::drops_unwritten(e)) {
            log::warn!("write-back of inode {ino} failed ({e:?}): its unwritten pages dropped");
            let left: Vec<u64> = self
                .dirty
                .range((ino, 0)..=(ino, u64::MAX))
                .map(|(k, _)| k.1)
                .collect();
            for idx in left {
                self.mark_clean(ino, idx);
                self.forget_page(ino, idx);
            }
            meta.forget_local_size(ino);
        }
        r
    }

    /// Write back every dirty page of `ino`.
    pub(super) fn write_back_ino<E: Env>(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        ino: u64,
    ) -> Result<(), Errno> {
        let keys: Vec<(u64, u64)> = self
            .dirty
            .range((ino, 0)..=(ino, u64::MAX))
            .map(|(k, _)| *k)
            .collect();
        self.write_back(link, meta, &keys)
    }

    /// Patch cached pages with data we just wrote, if our write is the only
    /// change the directory saw; otherwise drop them.
    pub(super) fn after_write(
        &mut self,
        meta: &mut Meta,
        ino: u64,
        at: u64,
        data: &[u8],
        attr: &Attr,
    ) {
        let Some(m) = meta.get(ino) else {
            self.revalidate(meta, attr);
            return;
        };
        if attr.version != m.version.wrapping_add(1) {
            self.drop_pages(ino);
        } else if let Some(pages) = self.pages.get_mut(&ino) {
            let mut o = 0usize;
            while o < data.len() {
                let a = at + o as u64;
                let idx = a / PAGE as u64;
                let ip = (a % PAGE as u64) as usize;
                let n = (PAGE - ip).min(data.len() - o);
                if let Some(p) = pages.get_mut(&idx) {
                    p[ip..ip + n].copy_from_slice(&data[o..o + n]);
                }
                o += n;
            }
        }
        meta.set(
            ino,
            FileMeta {
                version: attr.version,
                size: attr.size,
            },
        );
    }

    /// `baseline_writes=through`: every write to the directory.
    pub(super) fn write_through<E: Env>(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        ino: u64,
        pos: u64,
        data: &[u8],
    ) -> Result<usize, Errno> {
        let cap = link.bulk_cap(2)?;
        self.finish_in_flight(link, meta)?; // they hold the slot
        let gen = meta.gen(ino);
        let mut done = 0;
        while done < data.len() {
            let n = (data.len() - done).min(cap);
            link.bulk_write(2, 0, &data[done..done + n])?;
            let at = pos + done as u64;
            let r = link.fs_call(
                &Request::Data {
                    gen,
                    op: Op::Write,
                    slot: 2,
                    at: 0,
                    ino,
                    offset: at,
                    len: n as u32,
                },
                self,
            )?;
            let Response::Data { bytes, attr } = r else {
                return Err(Errno::Io);
            };
            let bytes = (bytes as usize).min(n);
            self.after_write(meta, ino, at, &data[done..done + bytes], &attr);
            done += bytes;
            if bytes < n {
                break;
            }
        }
        Ok(done)
    }

    /// `baseline_writes=back`: a copy into the cache.
    pub(super) fn write_buffered<E: Env>(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        ino: u64,
        pos: u64,
        data: &[u8],
    ) -> Result<usize, Errno> {
        let mut done = 0;
        while done < data.len() {
            let at = pos + done as u64;
            let idx = at / PAGE as u64;
            let in_page = (at % PAGE as u64) as usize;
            let n = (PAGE - in_page).min(data.len() - done);
            if self.cached(ino, idx) {
                self.hits += 1;
            } else {
                self.make_room(link, meta, 1)?;
                if n < PAGE && idx * (PAGE as u64) < meta.size_of(ino) {
                    // A partial page inside the file: its other bytes first.
                    self.fetch(link, meta, ino, idx, 1)?;
                }
                if !self.cached(ino, idx) {
                    let page = Box::new([0u8; PAGE]);
                    self.pages.entry(ino).or_default().insert(idx, page);
                    self.cached_pages += 1;
                }
            }
            let page = self
                .pages
                .get_mut(&ino)
                .and_then(|c| c.get_mut(&idx))
                .ok_or(Errno::Io)?;
            page[in_page..in_page + n].copy_from_slice(&data[done..done + n]);
            self.mark_dirty(ino, idx);
            self.written
                .entry((ino, idx))
                .or_default()
                .add(in_page..in_page + n);
            self.inflight.touched(ino, idx);
            done += n;
            // The size grows page by page: a later page's `make_room` may
            // write this one back, and a write-back sends a page only up to
            // the size (it would have sent nothing of a page past the old
            // end, then dropped it clean: the bytes were lost).
            let end = pos + done as u64;
            if end > meta.size_of(ino) {
                meta.set_local_size(ino, end);
            }
        }
        Ok(done)
    }
}
