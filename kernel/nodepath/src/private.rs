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

use userland::stats::keys::cache as keys;

use crate::env::Env;
use crate::link::{Link, Session};
use crate::vfs::{attr_of, DataPath, FileMeta, Meta};

type Page = Box<[u8; PAGE]>;

const PAGE: usize = 4096;
/// Most cached pages before the cache is emptied.
pub const MAX_CACHED_PAGES: usize = 2048;
/// Reads [`Private::prefetch`] puts in flight together.
const PREFETCH_BATCH: usize = 32;
/// Dirty pages written back together (oldest first) when the cache is
/// full.
pub const WRITEBACK_BATCH: usize = 32;

/// A read of pages `[first, first+n)` of `ino` into bulk slot 1.
fn read_req(ino: u64, first: u64, n: usize) -> Request {
    Request::Data {
        op: Op::Read,
        slot: 1,
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
    next_age: u64,
    /// Pages written back.
    written_back: u64,
}

impl<E: Env> Session<E> for Private {}

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
            next_age: 0,
            written_back: 0,
        }
    }

    /// Dirty pages not written back yet.
    pub fn dirty_pages(&self) -> usize {
        self.dirty.len()
    }

    fn is_dirty(&self, ino: u64, idx: u64) -> bool {
        self.dirty.contains_key(&(ino, idx))
    }

    fn mark_dirty(&mut self, ino: u64, idx: u64) {
        if let alloc::collections::btree_map::Entry::Vacant(e) = self.dirty.entry((ino, idx)) {
            e.insert(self.next_age);
            self.dirty_age.insert(self.next_age, (ino, idx));
            self.next_age += 1;
        }
    }

    fn mark_clean(&mut self, ino: u64, idx: u64) {
        if let Some(age) = self.dirty.remove(&(ino, idx)) {
            self.dirty_age.remove(&age);
        }
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

    /// Forget pages of `ino` from index `from` on, dirty ones too.
    fn discard_from(&mut self, ino: u64, from: u64) {
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
    fn make_room<E: Env>(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        n: usize,
    ) -> Result<(), Errno> {
        if self.cached_pages + n <= self.max_pages {
            return Ok(());
        }
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
    fn write_back<E: Env>(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        keys: &[(u64, u64)],
    ) -> Result<(), Errno> {
        let max_run = (link.bulk_cap(2)? / PAGE).max(1);
        let mut i = 0;
        while i < keys.len() {
            let (ino, first) = keys[i];
            let mut n = 1;
            while i + n < keys.len() && n < max_run && keys[i + n] == (ino, first + n as u64) {
                n += 1;
            }
            self.write_run(link, meta, ino, first, n)?;
            i += n;
            if !self.dirty.range((ino, 0)..=(ino, u64::MAX)).any(|_| true) {
                meta.clear_local_size(ino);
            }
        }
        Ok(())
    }

    /// Write back pages `[first, first+n)` of `ino`.
    fn write_run<E: Env>(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        ino: u64,
        first: u64,
        n: usize,
    ) -> Result<(), Errno> {
        let start = first * PAGE as u64;
        let size = meta.size_of(ino);
        let len = (size.saturating_sub(start)).min((n * PAGE) as u64) as usize;
        if len > 0 {
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
            link.bulk_write(2, 0, &buf)?;
            let r = link.fs_call(
                &Request::Data {
                    op: Op::Write,
                    slot: 2,
                    ino,
                    offset: start,
                    len: len as u32,
                },
                self,
            )?;
            let Response::Data { bytes, attr } = r else {
                return Err(Errno::Io);
            };
            if (bytes as usize) < len {
                return Err(Errno::Io);
            }
            self.learn_own_write(meta, &attr);
            self.written_back += len.div_ceil(PAGE) as u64;
        }
        // Pages wholly past the end (the file shrank) have nothing to send.
        for k in 0..n as u64 {
            self.mark_clean(ino, first + k);
        }
        Ok(())
    }

    /// The directory's answer to our own write: our pages stay if the
    /// version moved by exactly that write, else the clean ones go.
    fn learn_own_write(&mut self, meta: &mut Meta, attr: &Attr) {
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

    /// Write back every dirty page of `ino`.
    fn write_back_ino<E: Env>(
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
        let cap = link.bulk_cap(1)?;
        let n = n.min(cap / PAGE).max(1);
        let r = link.fs_call(&read_req(ino, first, n), self)?;
        let Response::Data { bytes, attr } = r else {
            return Err(Errno::Io);
        };
        let bytes = (bytes as usize).min(n * PAGE);
        let mut data = alloc::vec![0u8; bytes];
        link.bulk_read(1, &mut data)?;
        self.install(meta, ino, first, n, &data, &attr);
        Ok(())
    }

    /// Put the answer of a read of pages `[first, first+n)` into the cache.
    fn install(
        &mut self,
        meta: &mut Meta,
        ino: u64,
        first: u64,
        n: usize,
        data: &[u8],
        attr: &Attr,
    ) {
        let bytes = data.len().min(n * PAGE);
        self.revalidate(meta, attr);
        if self.cached_pages + n > self.max_pages {
            self.drop_all();
        }
        let dirty = &self.dirty;
        let entry = self.pages.entry(ino).or_default();
        for i in 0..n {
            let lo = i * PAGE;
            if lo >= bytes && (first + i as u64) * PAGE as u64 >= attr.size {
                break;
            }
            if dirty.contains_key(&(ino, first + i as u64)) {
                continue; // our newer data stays
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
        self.misses += n as u64;
    }

    /// Patch cached pages with data we just wrote, if our write is the only
    /// change the directory saw; otherwise drop them.
    fn after_write(&mut self, meta: &mut Meta, ino: u64, at: u64, data: &[u8], attr: &Attr) {
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
}

impl Private {
    /// `baseline_writes=through`: every write to the directory.
    fn write_through<E: Env>(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        ino: u64,
        pos: u64,
        data: &[u8],
    ) -> Result<usize, Errno> {
        let cap = link.bulk_cap(2)?;
        let mut done = 0;
        while done < data.len() {
            let n = (data.len() - done).min(cap);
            link.bulk_write(2, 0, &data[done..done + n])?;
            let at = pos + done as u64;
            let r = link.fs_call(
                &Request::Data {
                    op: Op::Write,
                    slot: 2,
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
    fn write_buffered<E: Env>(
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
            done += n;
        }
        let end = pos + done as u64;
        if end > meta.size_of(ino) {
            meta.set_local_size(ino, end);
        }
        Ok(done)
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
        self.drop_pages(ino);
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
    fn truncate(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        ino: u64,
        size: u64,
    ) -> Result<Attr, Errno> {
        self.write_back_ino(link, meta, ino)?;
        meta.clear_local_size(ino);
        attr_of(link.fs_call(&Request::Setattr { ino, size }, self)?)
    }

    /// The buffered file goes to the directory (close-to-open).
    fn close(&mut self, link: &mut Link<E>, meta: &mut Meta, ino: u64) -> Result<(), Errno> {
        self.write_back_ino(link, meta, ino)
    }

    fn fsync(&mut self, link: &mut Link<E>, meta: &mut Meta, ino: u64) -> Result<(), Errno> {
        self.write_back_ino(link, meta, ino)?;
        link.fs_call(&Request::Fsync { ino }, self).map(|_| ())
    }

    fn write_back_all(&mut self, link: &mut Link<E>, meta: &mut Meta) -> Result<(), Errno> {
        let keys: Vec<(u64, u64)> = self.dirty.keys().copied().collect();
        self.write_back(link, meta, &keys)
    }

    /// Pages past the new end go, dirty or not.
    fn evict(&mut self, _env: &E, ino: u64, size: u64) {
        self.discard_from(ino, size.div_ceil(PAGE as u64));
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
            let reqs: Vec<Request> = chunk
                .iter()
                .map(|&(ino, first, n)| read_req(ino, first, n))
                .collect();
            let answers = link.fs_read_batch(&reqs, self)?;
            for (&(ino, first, n), (resp, data)) in chunk.iter().zip(answers) {
                match resp {
                    Response::Data { attr, .. } => self.install(meta, ino, first, n, &data, &attr),
                    Response::Err(e) => return Err(e),
                    _ => return Err(Errno::Io),
                }
            }
        }
        Ok(())
    }

    /// Dirty pages are written back first.
    fn drop_cache(&mut self, link: &mut Link<E>, meta: &mut Meta) -> Result<String, Errno> {
        DataPath::<E>::write_back_all(self, link, meta)?;
        self.drop_all();
        Ok("dropped the private cache".to_string())
    }

    /// The baseline's invalidation: drop one page of our own private cache
    /// (no one else holds it), as DPC's 11 us Linux figure does. A dirty
    /// page stays (false).
    fn invalidate_page(&mut self, _link: &mut Link<E>, ino: u64, idx: u64) -> Result<bool, Errno> {
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

    fn stats(&self) -> Result<Vec<(String, String)>, Errno> {
        let (hits, fetched, cached) = self.counts();
        let mut v: Vec<(String, String)> = Vec::new();
        let mut put = |k: &str, x: String| v.push((k.to_string(), x));
        put("resident pages (private copies)", format!("{cached}"));
        put("remote mappings", "0".to_string());
        put("hits local", format!("{hits}"));
        put("hits remote", "0".to_string());
        put("misses", format!("{fetched}"));
        put("disk reads caused (pages)", format!("{fetched}"));
        put(keys::BASELINE_WRITES, self.writes.as_str().to_string());
        put(keys::DIRTY_PAGES, format!("{}", self.dirty.len()));
        put(keys::PAGES_WRITTEN_BACK, format!("{}", self.written_back));
        Ok(v)
    }
}
