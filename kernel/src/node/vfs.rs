//! The node's tiny VFS: a descriptor table over directory-served metadata
//! and a private per-node page cache with close-to-open consistency (the
//! `private` baseline: data travels through the directory's storage
//! server via this node's bulk slots).
//!
//! Cache rule: every answer from the directory carries the inode's
//! `version`. A cached file whose version differs from the directory's at
//! open (or after an operation) loses its pages. Writes go through to the
//! directory; pages this node holds are patched, and kept only if the
//! directory's version moved by exactly our write.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use fabric::config::Mode;
use nodepath::client::Client;

use super::coherent::{self, Transport};
use fabric::proto::{Attr, DirEntry, Errno, FileKind, Op, Request, Response, DIRENT_SIZE};
use userland::os::{Fd, OpenFlags};

const PAGE: usize = 4096;
/// Most open descriptors.
pub const MAX_FILES: usize = 64;
/// Most cached pages before the cache is emptied (private mode baseline).
pub const MAX_CACHED_PAGES: usize = 2048;
/// Most private copies (relaxed mode) before they are written back: each
/// is a 4 KiB heap page.
pub const MAX_PRIVATE_PAGES: usize = 1024;

struct OpenFile {
    ino: u64,
    pos: u64,
    append: bool,
}

struct CachedFile {
    version: u64,
    size: u64,
    pages: BTreeMap<u64, Box<[u8; PAGE]>>,
}

/// The VFS of one node.
pub struct Vfs {
    mode: Mode,
    /// Private mode: page reads served from the cache / fetched.
    hits: u64,
    misses: u64,
    files: Vec<Option<OpenFile>>,
    cache: BTreeMap<u64, CachedFile>,
    cached_pages: usize,
}

/// Reads [`Vfs::prefetch`] puts in flight together.
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

/// How the VFS reaches the directory's file server: the transport, the
/// joined client (single-copy write-back uses its bulk slots in the shared
/// region) and the file server's four bulk slots, which are the per-node
/// slots of the shared region, or local staging buffers shipped with each
/// request and answer in `net` mode.
pub trait Rpc: Transport {
    /// The client, if joined.
    fn client(&self) -> Option<&Client>;
    /// One file-server request (metadata or data).
    fn fs_call(&mut self, req: &Request) -> Result<Response, Errno>;
    /// Capacity of bulk slot `slot`.
    fn bulk_cap(&self, slot: u32) -> Result<usize, Errno>;
    /// Put `data` at byte `at` of bulk slot `slot`.
    fn bulk_write(&mut self, slot: u32, at: usize, data: &[u8]) -> Result<(), Errno>;
    /// Copy the head of bulk slot `slot` into `buf`.
    fn bulk_read(&mut self, slot: u32, buf: &mut [u8]) -> Result<(), Errno>;

    /// Several read requests (`Request::Data` reads into slot 1), each
    /// answer with its data; a transport that can pipeline puts them in
    /// flight together ([`read_one_by_one`] otherwise). A request the
    /// server refused is answered `Response::Err` in place.
    fn fs_read_batch(&mut self, reqs: &[Request]) -> Result<Vec<(Response, Vec<u8>)>, Errno>;
}

/// [`Rpc::fs_read_batch`] for a transport without pipelining: one request
/// after the other.
pub fn read_one_by_one<R: Rpc + ?Sized>(
    rpc: &mut R,
    reqs: &[Request],
) -> Result<Vec<(Response, Vec<u8>)>, Errno> {
    let mut out = Vec::with_capacity(reqs.len());
    for req in reqs {
        match rpc.fs_call(req) {
            Ok(Response::Data { bytes, attr }) => {
                let mut data = alloc::vec![0u8; bytes as usize];
                rpc.bulk_read(1, &mut data)?;
                out.push((Response::Data { bytes, attr }, data));
            }
            Ok(r) => out.push((r, Vec::new())),
            Err(Errno::Unavailable) => return Err(Errno::Unavailable),
            Err(e) => out.push((Response::Err(e), Vec::new())),
        }
    }
    Ok(out)
}

fn t(rpc: &mut dyn Rpc) -> &mut dyn Transport {
    rpc
}

impl Vfs {
    /// An empty VFS.
    pub fn new(mode: Mode) -> Vfs {
        let mut files = Vec::new();
        files.resize_with(MAX_FILES, || None);
        Vfs {
            mode,
            hits: 0,
            misses: 0,
            files,
            cache: BTreeMap::new(),
            cached_pages: 0,
        }
    }

    /// Forget every cached page (rejoin, or the directory restarted).
    pub fn drop_cache(&mut self) {
        // Pages only: open files keep their size and version.
        for c in self.cache.values_mut() {
            c.pages.clear();
        }
        self.cached_pages = 0;
    }

    /// A bulk slot in the shared region (single-copy write-back).
    fn slot(&self, rpc: &dyn Rpc, slot: u32) -> Result<(usize, usize), Errno> {
        rpc.client()
            .and_then(|c| c.bulk(slot))
            .ok_or(Errno::Unavailable)
    }

    fn call(&mut self, rpc: &mut dyn Rpc, req: &Request) -> Result<Response, Errno> {
        rpc.fs_call(req)
    }

    /// The mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Drop page `idx` of `ino` from the private cache (private and net
    /// modes); true if it was cached.
    pub fn invalidate_page(&mut self, ino: u64, idx: u64) -> bool {
        let gone = self
            .cache
            .get_mut(&ino)
            .and_then(|c| c.pages.remove(&idx))
            .is_some();
        if gone {
            self.cached_pages -= 1;
        }
        gone
    }

    /// Private-mode counters: (page hits, pages fetched, pages cached).
    pub fn private_stats(&self) -> (u64, u64, usize) {
        (self.hits, self.misses, self.cached_pages)
    }

    fn size_of(&self, ino: u64) -> u64 {
        self.cache.get(&ino).map(|c| c.size).unwrap_or(0)
    }

    /// Refresh the size of `ino` from the directory.
    fn refresh(&mut self, rpc: &mut dyn Rpc, ino: u64) -> Result<u64, Errno> {
        let a = Self::attr_of(self.call(rpc, &Request::Getattr { ino })?)?;
        if self.mode.single_copy() {
            // Pages are kept coherent by the protocol; only the size moves.
            let e = self.cache.entry(ino).or_insert(CachedFile {
                version: a.version,
                size: a.size,
                pages: BTreeMap::new(),
            });
            e.size = a.size;
            e.version = a.version;
        } else {
            self.revalidate(&a);
        }
        Ok(a.size)
    }

    fn path_op(
        &mut self,
        rpc: &mut dyn Rpc,
        op: Op,
        path: &str,
        exclusive: bool,
    ) -> Result<Response, Errno> {
        let cap = rpc.bulk_cap(0)?;
        if path.len() > cap || path.len() > fabric::proto::MAX_PATH {
            return Err(Errno::NameTooLong);
        }
        rpc.bulk_write(0, 0, path.as_bytes())?;
        self.call(
            rpc,
            &Request::Path {
                op,
                slot: 0,
                len: path.len() as u32,
                exclusive,
            },
        )
    }

    fn attr_of(r: Response) -> Result<Attr, Errno> {
        match r {
            Response::Attr(a) => Ok(a),
            Response::Data { attr, .. } => Ok(attr),
            _ => Err(Errno::Io),
        }
    }

    /// Bring the cache entry of `a.ino` in line with the directory's view.
    fn revalidate(&mut self, a: &Attr) {
        let entry = self.cache.entry(a.ino).or_insert(CachedFile {
            version: a.version,
            size: a.size,
            pages: BTreeMap::new(),
        });
        if entry.version != a.version {
            self.cached_pages -= entry.pages.len();
            entry.pages.clear();
            entry.version = a.version;
        }
        entry.size = a.size;
    }

    /// Attributes of a path.
    pub fn stat(&mut self, rpc: &mut dyn Rpc, path: &str) -> Result<Attr, Errno> {
        Self::attr_of(self.path_op(rpc, Op::Lookup, path, false)?)
    }

    /// Open a file.
    pub fn open(&mut self, rpc: &mut dyn Rpc, path: &str, flags: OpenFlags) -> Result<Fd, Errno> {
        let slot = self
            .files
            .iter()
            .position(Option::is_none)
            .ok_or(Errno::TooManyFiles)?;
        let mut a = if flags.create {
            Self::attr_of(self.path_op(rpc, Op::Create, path, flags.exclusive)?)?
        } else {
            Self::attr_of(self.path_op(rpc, Op::Lookup, path, false)?)?
        };
        if a.kind == FileKind::Dir {
            return Err(Errno::IsDir);
        }
        if flags.truncate && a.size != 0 {
            a = Self::attr_of(self.call(
                rpc,
                &Request::Setattr {
                    ino: a.ino,
                    size: 0,
                },
            )?)?;
            if self.mode.single_copy() {
                coherent::evict_local(a.ino, 0);
            }
        }
        self.revalidate(&a);
        self.files[slot] = Some(OpenFile {
            ino: a.ino,
            pos: 0,
            append: flags.append,
        });
        Ok(Fd(slot as u32))
    }

    fn file(&mut self, fd: Fd) -> Result<&mut OpenFile, Errno> {
        self.files
            .get_mut(fd.0 as usize)
            .and_then(Option::as_mut)
            .ok_or(Errno::BadFd)
    }

    /// Close a descriptor (relaxed mode writes back our private copies:
    /// close-to-open consistency).
    pub fn close(&mut self, rpc: &mut dyn Rpc, fd: Fd) -> Result<(), Errno> {
        let f = self.files.get_mut(fd.0 as usize).ok_or(Errno::BadFd)?;
        let f = f.take().ok_or(Errno::BadFd)?;
        if self.mode == Mode::Relaxed {
            let dirty =
                coherent::with(|c| !c.cache.private_pages(f.ino).is_empty()).unwrap_or(false);
            if dirty {
                self.fsync_ino(rpc, f.ino)?;
            }
        }
        Ok(())
    }

    /// Fetch pages `[first, first+n)` of `ino` from the directory into the
    /// cache (one round trip for up to a bulk slot's worth).
    fn fetch(&mut self, rpc: &mut dyn Rpc, ino: u64, first: u64, n: usize) -> Result<(), Errno> {
        let cap = rpc.bulk_cap(1)?;
        let n = n.min(cap / PAGE).max(1);
        let r = self.call(rpc, &read_req(ino, first, n))?;
        let Response::Data { bytes, attr } = r else {
            return Err(Errno::Io);
        };
        let bytes = (bytes as usize).min(n * PAGE);
        let mut data = alloc::vec![0u8; bytes];
        rpc.bulk_read(1, &mut data)?;
        self.install(ino, first, n, &data, &attr)
    }

    /// Put the answer of a read of pages `[first, first+n)` into the cache.
    fn install(
        &mut self,
        ino: u64,
        first: u64,
        n: usize,
        data: &[u8],
        attr: &Attr,
    ) -> Result<(), Errno> {
        let bytes = data.len().min(n * PAGE);
        self.revalidate(attr);
        if self.cached_pages + n > MAX_CACHED_PAGES {
            self.drop_cache();
            self.revalidate(attr);
        }
        let entry = self.cache.get_mut(&ino).ok_or(Errno::Io)?;
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
            if entry.pages.insert(first + i as u64, page).is_none() {
                self.cached_pages += 1;
            }
        }
        self.misses += n as u64;
        Ok(())
    }

    /// Private and net modes: bring every page of `pages` (inode, index)
    /// that is not cached into the cache, with the reads in flight together
    /// where the transport can pipeline them (`net`: up to 32 requests per
    /// batch; the rings: one at a time). Contiguous pages of a file go in
    /// one read of up to a bulk slot.
    pub fn prefetch(&mut self, rpc: &mut dyn Rpc, pages: &[(u64, u64)]) -> Result<(), Errno> {
        let max_run = (rpc.bulk_cap(1)? / PAGE).max(1);
        let mut runs: Vec<(u64, u64, usize)> = Vec::new();
        for &(ino, idx) in pages {
            let Some(c) = self.cache.get(&ino) else {
                continue; // not open here: nothing to fill
            };
            if c.pages.contains_key(&idx) || idx * PAGE as u64 >= c.size {
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
            let answers = rpc.fs_read_batch(&reqs)?;
            for (&(ino, first, n), (resp, data)) in chunk.iter().zip(answers) {
                match resp {
                    Response::Data { attr, .. } => self.install(ino, first, n, &data, &attr)?,
                    Response::Err(e) => return Err(e),
                    _ => return Err(Errno::Io),
                }
            }
        }
        Ok(())
    }

    /// Read at the descriptor's position.
    pub fn read(&mut self, rpc: &mut dyn Rpc, fd: Fd, buf: &mut [u8]) -> Result<usize, Errno> {
        let (ino, pos) = {
            let f = self.file(fd)?;
            (f.ino, f.pos)
        };
        let mut size = self.size_of(ino);
        if buf.is_empty() {
            return Ok(0);
        }
        if pos >= size && self.mode.single_copy() {
            // Another node may have extended the file (strong mode).
            size = self.refresh(rpc, ino)?;
        }
        if pos >= size {
            return Ok(0);
        }
        let want = (buf.len() as u64).min(size - pos) as usize;
        if self.mode.single_copy() {
            let n = coherent::read(t(rpc), ino, pos, &mut buf[..want])?;
            coherent::trim(t(rpc))?;
            self.file(fd)?.pos = pos + n as u64;
            return Ok(n);
        }
        let mut done = 0;
        while done < want {
            let at = pos + done as u64;
            let idx = at / PAGE as u64;
            let in_page = (at % PAGE as u64) as usize;
            let cached = self
                .cache
                .get(&ino)
                .is_some_and(|c| c.pages.contains_key(&idx));
            if cached {
                self.hits += 1;
            } else {
                let pages_left = (want - done + in_page).div_ceil(PAGE);
                self.fetch(rpc, ino, idx, pages_left)?;
            }
            let Some(page) = self.cache.get(&ino).and_then(|c| c.pages.get(&idx)) else {
                break; // the file shrank under us
            };
            let n = (PAGE - in_page).min(want - done);
            buf[done..done + n].copy_from_slice(&page[in_page..in_page + n]);
            done += n;
        }
        self.file(fd)?.pos = pos + done as u64;
        Ok(done)
    }

    /// Write at the descriptor's position (end of file with append).
    pub fn write(&mut self, rpc: &mut dyn Rpc, fd: Fd, data: &[u8]) -> Result<usize, Errno> {
        let (ino, append, mut pos) = {
            let f = self.file(fd)?;
            (f.ino, f.append, f.pos)
        };
        if append {
            pos = if self.mode.single_copy() {
                self.refresh(rpc, ino)?
            } else {
                self.size_of(ino)
            };
        }
        if self.mode.single_copy() {
            let end = pos + data.len() as u64;
            if end > self.size_of(ino) {
                // Grow the file first so that every reader sees the size.
                let a = Self::attr_of(self.call(rpc, &Request::Setattr { ino, size: end })?)?;
                if let Some(c) = self.cache.get_mut(&ino) {
                    c.size = a.size;
                    c.version = a.version;
                }
            }
            let n = coherent::write(t(rpc), ino, pos, data)?;
            self.file(fd)?.pos = pos + n as u64;
            if self.mode == Mode::Relaxed {
                let private = coherent::with(|c| c.cache.counts().2).unwrap_or(0);
                if private > MAX_PRIVATE_PAGES {
                    // Bound the heap: write the private copies back early.
                    let inos = coherent::with(|c| c.cache.dirty_inodes()).unwrap_or_default();
                    for i in inos {
                        if !self.cache.contains_key(&i) {
                            self.refresh(rpc, i)?;
                        }
                        self.fsync_ino(rpc, i)?;
                    }
                }
            }
            return Ok(n);
        }
        let cap = rpc.bulk_cap(2)?;
        let mut done = 0;
        while done < data.len() {
            let n = (data.len() - done).min(cap);
            rpc.bulk_write(2, 0, &data[done..done + n])?;
            let at = pos + done as u64;
            let r = self.call(
                rpc,
                &Request::Data {
                    op: Op::Write,
                    slot: 2,
                    ino,
                    offset: at,
                    len: n as u32,
                },
            )?;
            let Response::Data { bytes, attr } = r else {
                return Err(Errno::Io);
            };
            let bytes = (bytes as usize).min(n);
            self.after_write(ino, at, &data[done..done + bytes], &attr);
            done += bytes;
            if bytes < n {
                break;
            }
        }
        self.file(fd)?.pos = pos + done as u64;
        Ok(done)
    }

    /// Patch cached pages with data we just wrote, if our write is the only
    /// change the directory saw; otherwise drop them.
    fn after_write(&mut self, ino: u64, at: u64, data: &[u8], attr: &Attr) {
        let Some(c) = self.cache.get_mut(&ino) else {
            self.revalidate(attr);
            return;
        };
        if attr.version != c.version.wrapping_add(1) {
            self.cached_pages -= c.pages.len();
            c.pages.clear();
        } else {
            let mut o = 0usize;
            while o < data.len() {
                let a = at + o as u64;
                let idx = a / PAGE as u64;
                let ip = (a % PAGE as u64) as usize;
                let n = (PAGE - ip).min(data.len() - o);
                if let Some(p) = c.pages.get_mut(&idx) {
                    p[ip..ip + n].copy_from_slice(&data[o..o + n]);
                }
                o += n;
            }
        }
        c.version = attr.version;
        c.size = attr.size;
    }

    /// Set the size of an open file.
    pub fn truncate(&mut self, rpc: &mut dyn Rpc, fd: Fd, size: u64) -> Result<(), Errno> {
        let ino = self.file(fd)?.ino;
        // The directory tears pages down only when the file shrinks; learn
        // the current size so this node retires exactly the same pages.
        let old = if self.mode.single_copy() {
            self.refresh(rpc, ino)?
        } else {
            0
        };
        let a = Self::attr_of(self.call(rpc, &Request::Setattr { ino, size })?)?;
        if self.mode.single_copy() && size < old {
            coherent::evict_local(ino, size);
        }
        if let Some(c) = self.cache.get_mut(&ino) {
            self.cached_pages -= c.pages.len();
            c.pages.clear();
        }
        self.revalidate(&a);
        Ok(())
    }

    /// Flush an open file.
    pub fn fsync(&mut self, rpc: &mut dyn Rpc, fd: Fd) -> Result<(), Errno> {
        let ino = self.file(fd)?.ino;
        self.fsync_ino(rpc, ino)
    }

    fn fsync_ino(&mut self, rpc: &mut dyn Rpc, ino: u64) -> Result<(), Errno> {
        if self.mode.single_copy() {
            let size = self.size_of(ino);
            let bulk = self.slot(rpc, 2)?;
            return coherent::fsync(t(rpc), ino, size, bulk);
        }
        self.call(rpc, &Request::Fsync { ino }).map(|_| ())
    }

    /// Flush everything.
    pub fn sync(&mut self, rpc: &mut dyn Rpc) -> Result<(), Errno> {
        if self.mode.single_copy() {
            let inos = coherent::with(|c| c.cache.dirty_inodes()).unwrap_or_default();
            for ino in inos {
                if !self.cache.contains_key(&ino) {
                    self.refresh(rpc, ino)?;
                }
                self.fsync_ino(rpc, ino)?;
            }
        }
        self.call(rpc, &Request::Fsync { ino: 0 }).map(|_| ())
    }

    /// Set the position of an open file (positioned I/O for fio).
    pub fn seek(&mut self, fd: Fd, pos: u64) -> Result<(), Errno> {
        self.file(fd)?.pos = pos;
        Ok(())
    }

    /// The inode and size of an open file.
    pub fn fd_info(&self, fd: Fd) -> Result<(u64, u64), Errno> {
        let f = self
            .files
            .get(fd.0 as usize)
            .and_then(Option::as_ref)
            .ok_or(Errno::BadFd)?;
        Ok((f.ino, self.size_of(f.ino)))
    }

    /// List a directory, sorted by name.
    pub fn readdir(&mut self, rpc: &mut dyn Rpc, path: &str) -> Result<Vec<DirEntry>, Errno> {
        let a = self.stat(rpc, path)?;
        if a.kind != FileKind::Dir {
            return Err(Errno::NotDir);
        }
        let cap = rpc.bulk_cap(3)?;
        let mut out = Vec::new();
        let mut cookie = 0;
        loop {
            let r = self.call(
                rpc,
                &Request::Readdir {
                    slot: 3,
                    ino: a.ino,
                    cookie,
                },
            )?;
            let Response::Entries { count, next_cookie } = r else {
                return Err(Errno::Io);
            };
            let count = (count as usize).min(cap / DIRENT_SIZE);
            let mut recs = alloc::vec![0u8; count * DIRENT_SIZE];
            rpc.bulk_read(3, &mut recs)?;
            for rec in recs.chunks_exact(DIRENT_SIZE) {
                let rec: &[u8; DIRENT_SIZE] = rec.try_into().map_err(|_| Errno::Io)?;
                out.push(DirEntry::decode(rec).ok_or(Errno::Io)?);
            }
            if next_cookie == 0 || count == 0 || out.len() > 1_000_000 {
                break;
            }
            cookie = next_cookie;
        }
        out.sort_by(|x, y| x.name.cmp(&y.name));
        Ok(out)
    }

    /// Create a directory.
    pub fn mkdir(&mut self, rpc: &mut dyn Rpc, path: &str) -> Result<(), Errno> {
        self.path_op(rpc, Op::Mkdir, path, false).map(|_| ())
    }

    /// Remove an empty directory.
    pub fn rmdir(&mut self, rpc: &mut dyn Rpc, path: &str) -> Result<(), Errno> {
        self.path_op(rpc, Op::Rmdir, path, false).map(|_| ())
    }

    /// Remove a file (and forget its cached pages).
    pub fn unlink(&mut self, rpc: &mut dyn Rpc, path: &str) -> Result<(), Errno> {
        let a = self.stat(rpc, path)?;
        self.path_op(rpc, Op::Unlink, path, false)?;
        if self.mode.single_copy() {
            coherent::evict_local(a.ino, 0);
        }
        if let Some(c) = self.cache.remove(&a.ino) {
            self.cached_pages -= c.pages.len();
        }
        Ok(())
    }
}
