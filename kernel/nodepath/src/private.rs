//! The private-cache data path (modes `private` and `net`): a per-node
//! page cache with close-to-open consistency, filled through the
//! directory's file server (the rings and bulk slots, or TCP in `net`
//! mode: [`Link`] picks the transport).
//!
//! Cache rule: every answer from the directory carries the inode's
//! `version`. A cached file whose version differs from the directory's at
//! open (or after an operation) loses its pages. Writes go through to the
//! directory; pages this node holds are patched, and kept only if the
//! directory's version moved by exactly our write. The cache is emptied
//! when it exceeds [`MAX_CACHED_PAGES`].

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use fabric::config::Mode;
use fabric::proto::{Attr, Errno, Op, Request, Response};

use crate::env::Env;
use crate::link::{Link, Session};
use crate::vfs::{attr_of, DataPath, FileMeta, Meta};

const PAGE: usize = 4096;
/// Most cached pages before the cache is emptied.
pub const MAX_CACHED_PAGES: usize = 2048;
/// Reads [`Private::prefetch`] puts in flight together.
const PREFETCH_BATCH: usize = 32;

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
    /// Page reads served from the cache / fetched.
    hits: u64,
    misses: u64,
    pages: BTreeMap<u64, BTreeMap<u64, Box<[u8; PAGE]>>>,
    cached_pages: usize,
}

impl<E: Env> Session<E> for Private {}

impl Private {
    /// An empty cache for `mode` (`private` or `net`).
    pub fn new(mode: Mode) -> Private {
        Private {
            mode,
            hits: 0,
            misses: 0,
            pages: BTreeMap::new(),
            cached_pages: 0,
        }
    }

    /// (page hits, pages fetched, pages cached).
    pub fn counts(&self) -> (u64, u64, usize) {
        (self.hits, self.misses, self.cached_pages)
    }

    fn drop_pages(&mut self, ino: u64) {
        if let Some(p) = self.pages.get_mut(&ino) {
            self.cached_pages -= p.len();
            p.clear();
        }
    }

    /// Forget every cached page.
    fn drop_all(&mut self) {
        self.pages.clear();
        self.cached_pages = 0;
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
        if self.cached_pages + n > MAX_CACHED_PAGES {
            self.drop_all();
        }
        let entry = self.pages.entry(ino).or_default();
        for i in 0..n {
            let lo = i * PAGE;
            if lo >= bytes && (first + i as u64) * PAGE as u64 >= attr.size {
                break;
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
                self.fetch(link, meta, ino, idx, pages_left)?;
            }
            let Some(page) = self.pages.get(&ino).and_then(|c| c.get(&idx)) else {
                break; // the file shrank under us
            };
            let n = (PAGE - in_page).min(want - done);
            buf[done..done + n].copy_from_slice(&page[in_page..in_page + n]);
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

    fn truncate(
        &mut self,
        link: &mut Link<E>,
        _meta: &mut Meta,
        ino: u64,
        size: u64,
    ) -> Result<Attr, Errno> {
        attr_of(link.fs_call(
            &Request::Setattr {
                ino,
                size,
                expect: None,
            },
            self,
        )?)
    }

    fn fsync(&mut self, link: &mut Link<E>, _meta: &mut Meta, ino: u64) -> Result<(), Errno> {
        link.fs_call(&Request::Fsync { ino }, self).map(|_| ())
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

    fn drop_cache(&mut self, _link: &mut Link<E>, _meta: &mut Meta) -> Result<String, Errno> {
        self.drop_all();
        Ok("dropped the private cache".to_string())
    }

    /// The baseline's invalidation: drop one page of our own private cache
    /// (no one else holds it), as DPC's 11 us Linux figure does.
    fn invalidate_page(&mut self, _link: &mut Link<E>, ino: u64, idx: u64) -> Result<bool, Errno> {
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
        Ok(v)
    }
}
