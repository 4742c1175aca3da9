//! An in-memory [`Os`] for the fio tests: files, descriptors with
//! positions, `seek`, `mmap_io`, a clock that I/O calls advance, a log of
//! every data operation, and fault injection. `FakeOs` keeps the default
//! [`Os::io_batch`]; [`Batcher`] wraps it to see (and time, or fail) the
//! batches.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::cell::Cell;

use crate::os::traits::*;
use crate::os::{
    Attr, BatchIo, ClusterInfo, DirEntry, Errno, Fd, FileKind, NodeInfo, OpenFlags, RingSamples,
};

/// One logged operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// A read/write/mmap call: (write?, path, offset, len, mmap?).
    Io {
        write: bool,
        path: String,
        off: u64,
        len: usize,
        mmap: bool,
    },
    Open(String),
    Close(String),
    Seek(String, u64),
    Fsync(String),
    Truncate(String, u64),
    Drop,
    /// An `io_batch` call through [`Batcher`] of this many I/Os.
    Batch(usize),
}

/// How long each data call takes: `(call number, write?, offset) -> ns`.
pub type CostFn = fn(u64, bool, u64) -> u64;

pub struct FakeOs {
    pub files: BTreeMap<String, Vec<u8>>,
    pub dirs: BTreeSet<String>,
    fds: BTreeMap<u32, (String, u64)>,
    next_fd: u32,
    pub clock: Cell<u64>,
    /// Added to the clock by every `uptime_ns` call.
    pub uptime_tick: u64,
    pub cost: CostFn,
    calls: u64,
    pub can_seek: bool,
    pub can_mmap: bool,
    pub can_drop: Result<(), Errno>,
    pub max_io: usize,
    pub log: Vec<Op>,
    pub out: String,
    /// `(op, ok calls left, errno)`.
    pub fault: Option<(&'static str, u32, Errno)>,
    pub mode: Option<String>,
    /// `cache_drop` also truncates this file to this length.
    pub on_drop: Option<(String, usize)>,
}

pub fn flat_cost(_call: u64, _write: bool, _off: u64) -> u64 {
    1000
}

impl FakeOs {
    pub fn new() -> FakeOs {
        let mut dirs = BTreeSet::new();
        dirs.insert("/".to_string());
        FakeOs {
            files: BTreeMap::new(),
            dirs,
            fds: BTreeMap::new(),
            next_fd: 3,
            clock: Cell::new(1_000_000),
            uptime_tick: 0,
            cost: flat_cost,
            calls: 0,
            can_seek: true,
            can_mmap: false,
            can_drop: Ok(()),
            max_io: usize::MAX,
            log: Vec::new(),
            out: String::new(),
            fault: None,
            mode: None,
            on_drop: None,
        }
    }

    pub fn open_fds(&self) -> usize {
        self.fds.len()
    }

    /// Every logged data I/O (after `skip` log entries).
    pub fn ios(&self) -> Vec<(bool, String, u64, usize)> {
        self.log
            .iter()
            .filter_map(|o| match o {
                Op::Io {
                    write,
                    path,
                    off,
                    len,
                    ..
                } => Some((*write, path.clone(), *off, *len)),
                _ => None,
            })
            .collect()
    }

    pub fn count(&self, f: impl Fn(&Op) -> bool) -> usize {
        self.log.iter().filter(|o| f(o)).count()
    }

    fn check(&mut self, op: &'static str) -> Result<(), Errno> {
        match &mut self.fault {
            Some((o, 0, e)) if *o == op => Err(*e),
            Some((o, n, _)) if *o == op => {
                *n -= 1;
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn tick(&mut self, write: bool, off: u64) {
        let c = (self.cost)(self.calls, write, off);
        self.calls += 1;
        self.clock.set(self.clock.get() + c);
    }

    fn parent(path: &str) -> &str {
        match path.rfind('/') {
            Some(0) | None => "/",
            Some(i) => &path[..i],
        }
    }
}

impl Console for FakeOs {
    fn print(&mut self, s: &str) {
        self.out.push_str(s);
    }

    fn uptime_ns(&self) -> u64 {
        let t = self.clock.get();
        self.clock.set(t + self.uptime_tick);
        t
    }
}

impl Files for FakeOs {
    fn open(&mut self, path: &str, flags: OpenFlags) -> Result<Fd, Errno> {
        self.check("open")?;
        assert!(path.starts_with('/'), "{path}");
        if self.dirs.contains(path) {
            return Err(Errno::IsDir);
        }
        if !self.files.contains_key(path) {
            if !flags.create {
                return Err(Errno::NotFound);
            }
            if !self.dirs.contains(Self::parent(path)) {
                return Err(Errno::NotFound);
            }
            self.files.insert(path.to_string(), Vec::new());
        }
        if flags.truncate {
            self.files.insert(path.to_string(), Vec::new());
        }
        let pos = if flags.append {
            self.files.get(path).map_or(0, |d| d.len() as u64)
        } else {
            0
        };
        let fd = self.next_fd;
        self.next_fd += 1;
        self.fds.insert(fd, (path.to_string(), pos));
        self.log.push(Op::Open(path.to_string()));
        Ok(Fd(fd))
    }

    fn read(&mut self, fd: Fd, buf: &mut [u8]) -> Result<usize, Errno> {
        self.check("read")?;
        let (path, pos) = self.fds.get(&fd.0).cloned().ok_or(Errno::BadFd)?;
        let data = self.files.get(&path).ok_or(Errno::BadFd)?;
        let p = pos as usize;
        let n = buf.len().min(data.len().saturating_sub(p)).min(self.max_io);
        if n > 0 {
            buf[..n].copy_from_slice(&data[p..p + n]);
        }
        self.fds.insert(fd.0, (path.clone(), pos + n as u64));
        self.tick(false, pos);
        self.log.push(Op::Io {
            write: false,
            path,
            off: pos,
            len: n,
            mmap: false,
        });
        Ok(n)
    }

    fn write(&mut self, fd: Fd, data: &[u8]) -> Result<usize, Errno> {
        self.check("write")?;
        let (path, pos) = self.fds.get(&fd.0).cloned().ok_or(Errno::BadFd)?;
        let file = self.files.get_mut(&path).ok_or(Errno::BadFd)?;
        let p = pos as usize;
        let n = data.len().min(self.max_io);
        if file.len() < p + n {
            file.resize(p + n, 0);
        }
        file[p..p + n].copy_from_slice(&data[..n]);
        self.fds.insert(fd.0, (path.clone(), pos + n as u64));
        self.tick(true, pos);
        self.log.push(Op::Io {
            write: true,
            path,
            off: pos,
            len: n,
            mmap: false,
        });
        Ok(n)
    }

    fn truncate(&mut self, fd: Fd, size: u64) -> Result<(), Errno> {
        self.check("truncate")?;
        let (path, _) = self.fds.get(&fd.0).cloned().ok_or(Errno::BadFd)?;
        self.files
            .get_mut(&path)
            .ok_or(Errno::BadFd)?
            .resize(size as usize, 0);
        self.log.push(Op::Truncate(path, size));
        Ok(())
    }

    fn fsync(&mut self, fd: Fd) -> Result<(), Errno> {
        self.check("fsync")?;
        let (path, _) = self.fds.get(&fd.0).cloned().ok_or(Errno::BadFd)?;
        self.log.push(Op::Fsync(path));
        Ok(())
    }

    fn close(&mut self, fd: Fd) -> Result<(), Errno> {
        let (path, _) = self.fds.remove(&fd.0).ok_or(Errno::BadFd)?;
        self.log.push(Op::Close(path));
        self.check("close")
    }

    fn stat(&mut self, path: &str) -> Result<Attr, Errno> {
        self.check("stat")?;
        if self.dirs.contains(path) {
            return Ok(Attr {
                ino: 1,
                kind: FileKind::Dir,
                size: 0,
                version: 1,
            });
        }
        let d = self.files.get(path).ok_or(Errno::NotFound)?;
        Ok(Attr {
            ino: 2,
            kind: FileKind::File,
            size: d.len() as u64,
            version: 1,
        })
    }

    fn readdir(&mut self, _path: &str) -> Result<Vec<DirEntry>, Errno> {
        Err(Errno::NotSupported)
    }

    fn mkdir(&mut self, path: &str) -> Result<(), Errno> {
        self.dirs.insert(path.to_string());
        Ok(())
    }

    fn rmdir(&mut self, _path: &str) -> Result<(), Errno> {
        Err(Errno::NotSupported)
    }

    fn unlink(&mut self, path: &str) -> Result<(), Errno> {
        self.files.remove(path).map(|_| ()).ok_or(Errno::NotFound)
    }

    fn sync(&mut self) -> Result<(), Errno> {
        Ok(())
    }

    fn seek(&mut self, fd: Fd, pos: u64) -> Result<(), Errno> {
        if !self.can_seek {
            return Err(Errno::NotSupported);
        }
        self.check("seek")?;
        let e = self.fds.get_mut(&fd.0).ok_or(Errno::BadFd)?;
        e.1 = pos;
        let path = e.0.clone();
        self.log.push(Op::Seek(path, pos));
        Ok(())
    }
}

impl AsyncIo for FakeOs {
    fn mmap_io(
        &mut self,
        path: &str,
        offset: u64,
        len: usize,
        write: bool,
        buf: &mut [u8],
    ) -> Result<(), Errno> {
        if !self.can_mmap {
            return Err(Errno::NotSupported);
        }
        if len == 0 {
            return Ok(());
        }
        self.check("mmap_io")?;
        let file = self.files.get_mut(path).ok_or(Errno::NotFound)?;
        let o = offset as usize;
        if o + len > file.len() || buf.len() < len {
            return Err(Errno::Invalid);
        }
        if write {
            file[o..o + len].copy_from_slice(&buf[..len]);
        } else {
            buf[..len].copy_from_slice(&file[o..o + len]);
        }
        self.tick(write, offset);
        self.log.push(Op::Io {
            write,
            path: path.to_string(),
            off: offset,
            len,
            mmap: true,
        });
        Ok(())
    }
}

impl CacheControl for FakeOs {
    fn cluster(&mut self) -> ClusterInfo {
        ClusterInfo {
            epoch: 1,
            self_id: 3,
            nodes: alloc::vec![NodeInfo {
                id: 0,
                state: "up".to_string(),
                heartbeat: 1,
                epoch: 0,
            }],
        }
    }

    fn cache_stats(&mut self) -> Result<Vec<(String, String)>, Errno> {
        match &self.mode {
            Some(m) => Ok(alloc::vec![(
                crate::stats::keys::cache::MODE.to_string(),
                m.clone()
            )]),
            None => Err(Errno::NotSupported),
        }
    }

    fn cache_drop(&mut self) -> Result<String, Errno> {
        self.can_drop?;
        self.log.push(Op::Drop);
        if let Some((path, len)) = &self.on_drop {
            if let Some(f) = self.files.get_mut(path) {
                f.truncate(*len);
            }
        }
        Ok("dropped 3 pages".to_string())
    }
}

impl Benches for FakeOs {
    fn bench_ring(&mut self, _count: usize) -> Result<RingSamples, Errno> {
        Err(Errno::NotSupported)
    }
}

/// How long a batch takes: `(batch number from 0, I/Os) -> ns`.
pub type BatchCostFn = fn(u64, usize) -> u64;

/// One I/O of a logged batch: (fd, offset, write?, len).
pub type BatchEntry = (u32, u64, bool, usize);

/// A [`FakeOs`] whose `io_batch` calls are logged (also as [`Op::Batch`]
/// in the fake's log) before going to the fake's default `io_batch`.
pub struct Batcher<'a> {
    pub inner: &'a mut FakeOs,
    /// Every call, the probe included.
    pub batches: Vec<Vec<BatchEntry>>,
    /// If set, a call takes exactly this long on the fake clock (instead
    /// of the sum of its reads and writes).
    pub cost: Option<BatchCostFn>,
    /// `(call number, errno)`: that call fails as a whole.
    pub fail: Option<(usize, Errno)>,
}

impl<'a> Batcher<'a> {
    pub fn new(inner: &'a mut FakeOs) -> Batcher<'a> {
        Batcher {
            inner,
            batches: Vec::new(),
            cost: None,
            fail: None,
        }
    }

    /// The batches of the run (without the empty probe).
    pub fn data_batches(&self) -> Vec<Vec<BatchEntry>> {
        self.batches
            .iter()
            .filter(|b| b.iter().any(|io| io.3 > 0))
            .cloned()
            .collect()
    }

    /// Sizes of the batches of the run.
    pub fn sizes(&self) -> Vec<usize> {
        self.data_batches().iter().map(Vec::len).collect()
    }
}

impl Console for Batcher<'_> {
    fn print(&mut self, s: &str) {
        self.inner.print(s)
    }

    fn uptime_ns(&self) -> u64 {
        self.inner.uptime_ns()
    }
}

impl Files for Batcher<'_> {
    fn open(&mut self, path: &str, flags: OpenFlags) -> Result<Fd, Errno> {
        self.inner.open(path, flags)
    }

    fn read(&mut self, fd: Fd, buf: &mut [u8]) -> Result<usize, Errno> {
        self.inner.read(fd, buf)
    }

    fn write(&mut self, fd: Fd, data: &[u8]) -> Result<usize, Errno> {
        self.inner.write(fd, data)
    }

    fn truncate(&mut self, fd: Fd, size: u64) -> Result<(), Errno> {
        self.inner.truncate(fd, size)
    }

    fn fsync(&mut self, fd: Fd) -> Result<(), Errno> {
        self.inner.fsync(fd)
    }

    fn close(&mut self, fd: Fd) -> Result<(), Errno> {
        self.inner.close(fd)
    }

    fn stat(&mut self, path: &str) -> Result<Attr, Errno> {
        self.inner.stat(path)
    }

    fn readdir(&mut self, path: &str) -> Result<Vec<DirEntry>, Errno> {
        self.inner.readdir(path)
    }

    fn mkdir(&mut self, path: &str) -> Result<(), Errno> {
        self.inner.mkdir(path)
    }

    fn rmdir(&mut self, path: &str) -> Result<(), Errno> {
        self.inner.rmdir(path)
    }

    fn unlink(&mut self, path: &str) -> Result<(), Errno> {
        self.inner.unlink(path)
    }

    fn sync(&mut self) -> Result<(), Errno> {
        self.inner.sync()
    }

    fn seek(&mut self, fd: Fd, pos: u64) -> Result<(), Errno> {
        self.inner.seek(fd, pos)
    }
}

impl AsyncIo for Batcher<'_> {
    fn mmap_io(
        &mut self,
        path: &str,
        offset: u64,
        len: usize,
        write: bool,
        buf: &mut [u8],
    ) -> Result<(), Errno> {
        self.inner.mmap_io(path, offset, len, write, buf)
    }

    fn io_batch(&mut self, ios: &mut [BatchIo<'_>]) -> Result<(), Errno> {
        let call = self.batches.len();
        self.batches.push(
            ios.iter()
                .map(|io| (io.fd.0, io.offset, io.write, io.buf.len()))
                .collect(),
        );
        self.inner.log.push(Op::Batch(ios.len()));
        if let Some((n, e)) = self.fail {
            if n == call {
                return Err(e);
            }
        }
        let t0 = self.inner.clock.get();
        let r = self.inner.io_batch(ios);
        if let Some(cost) = self.cost {
            self.inner.clock.set(t0 + cost(call as u64, ios.len()));
        }
        r
    }
}

impl CacheControl for Batcher<'_> {
    fn cluster(&mut self) -> ClusterInfo {
        self.inner.cluster()
    }

    fn cache_stats(&mut self) -> Result<Vec<(String, String)>, Errno> {
        self.inner.cache_stats()
    }

    fn cache_drop(&mut self) -> Result<String, Errno> {
        self.inner.cache_drop()
    }
}

impl Benches for Batcher<'_> {
    fn bench_ring(&mut self, count: usize) -> Result<RingSamples, Errno> {
        self.inner.bench_ring(count)
    }
}
