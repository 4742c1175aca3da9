//! What Filebench's three personalities here share: the fileset (files
//! `DIR/dNNNN/fNNNNNN`, `dirwidth` to a directory, sizes drawn from
//! Filebench's gamma distribution with shape 1.5), its dataset plan,
//! round-robin `openfile`, and the flowops as timed steps.
//!
//! On a shared dataset, several nodes run the same personality at once.
//! Filebench's flowops that read existing files (`openfile`,
//! `readwholefile`, `statfile`) use the shared fileset; the ones that
//! change files (`createfile`, `writewholefile`, `appendfilerand`,
//! `fsync`, `deletefile`) work on this node's own files in `DIR/nK/`,
//! so two nodes never create or delete the same name.

use alloc::collections::VecDeque;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use core::cell::{Cell, RefCell};
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};

use super::dataset::{pattern_fill, Manifest};
use super::meter::Meter;
use super::rng::{hash2, Rng};
use super::{AppError, Run};
use crate::os::{Errno, Fd, OpenFlags};
use crate::task::Tasks;

/// Filebench's `iosize` (1 MiB): the largest single read or write.
pub const IOSIZE: u64 = 1 << 20;
/// Filebench's `meanappendsize` (16 KiB): appends are 1..=16 KiB.
pub const APPEND_MAX: u64 = 16 << 10;

/// The shared fileset as the manifest describes it.
#[derive(Debug, Clone)]
pub struct FileSet {
    /// Dataset directory.
    pub dir: String,
    /// Files.
    pub files: u64,
    /// Files per directory.
    pub width: u64,
    /// Mean file size (gamma, shape 1.5).
    pub mean: u64,
    /// Dataset seed.
    pub seed: u64,
    /// Next file for `openfile` (round robin over the set, as Filebench).
    next: Cell<u64>,
}

pub use datasets::fileset::{file_path, file_size, plan};

impl FileSet {
    /// The fileset of workload `app` in `dir` (its manifest).
    pub fn load(ex: &Tasks<'_>, dir: &str, app: &str) -> Result<FileSet, AppError> {
        let m = ex.with_os(|os| Manifest::load(os, dir, app))?;
        Ok(FileSet {
            dir: String::from(dir),
            files: m.num_in("files", 1, 1 << 32)?,
            width: m.num_in("dirwidth", 1, 1 << 32)?,
            mean: m.num_in("meansize", 1, 1 << 30)?,
            seed: m.num("seed")?,
            next: Cell::new(0),
        })
    }

    /// The next file for `openfile`, round robin (starting at a place
    /// that depends on `seed`, so nodes with different seeds start
    /// apart).
    pub fn next_path(&self, run_seed: u64) -> String {
        let n = self.next.get();
        self.next.set(n + 1);
        let i = (hash2(run_seed, 0) % self.files + n) % self.files;
        file_path(&self.dir, self.width, i)
    }

    /// This node's directory for the files it changes.
    pub fn own_dir(&self, node: u16) -> String {
        format!("{}/n{node}", self.dir)
    }
}

/// Files a run keeps open at once, at most (a node's VFS has 64
/// descriptors; Filebench's webserver runs 100 threads).
pub const MAX_OPEN: usize = 48;

/// A counting semaphore for open files: a task that finds none free
/// waits (its waker queued) until a close gives one back, so the
/// executor still flushes the I/O of the tasks holding them.
pub struct Slots {
    free: Cell<usize>,
    waiters: RefCell<VecDeque<Waker>>,
}

impl Slots {
    /// `n` slots.
    pub fn new(n: usize) -> Slots {
        Slots {
            free: Cell::new(n),
            waiters: RefCell::new(VecDeque::new()),
        }
    }

    /// Wait for a slot and take it.
    pub fn acquire(&self) -> Acquire<'_> {
        Acquire { slots: self }
    }

    /// Give a slot back (and wake a waiter).
    pub fn release(&self) {
        self.free.set(self.free.get() + 1);
        if let Some(w) = self.waiters.borrow_mut().pop_front() {
            w.wake();
        }
    }
}

/// [`Slots::acquire`].
pub struct Acquire<'s> {
    slots: &'s Slots,
}

impl Future for Acquire<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let s = self.slots;
        if s.free.get() > 0 {
            s.free.set(s.free.get() - 1);
            return Poll::Ready(());
        }
        s.waiters.borrow_mut().push_back(cx.waker().clone());
        Poll::Pending
    }
}

/// Await the metadata call `call` (the task yields while it is out) and
/// record its time as operation `op`.
pub async fn timed<R>(
    ex: &Tasks<'_>,
    m: &Meter,
    op: usize,
    call: impl Future<Output = Result<R, Errno>>,
) -> Result<R, Errno> {
    let t0 = ex.uptime_ns();
    let r = call.await;
    let t1 = ex.uptime_ns();
    if r.is_ok() {
        m.record(op, t1.saturating_sub(t0), 0, 0, t1);
    }
    r
}

/// `openfile`: open `path` for reading and writing (after waiting for
/// a slot of `slots`, not timed).
pub async fn open(
    ex: &Tasks<'_>,
    m: &Meter,
    op: usize,
    path: &str,
    slots: &Slots,
) -> Result<Fd, AppError> {
    open_with(ex, m, op, path, slots, OpenFlags::default(), "open").await
}

/// `createfile`: create (or truncate) `path` (after waiting for a
/// slot).
pub async fn create(
    ex: &Tasks<'_>,
    m: &Meter,
    op: usize,
    path: &str,
    slots: &Slots,
) -> Result<Fd, AppError> {
    let flags = OpenFlags {
        create: true,
        truncate: true,
        ..OpenFlags::default()
    };
    open_with(ex, m, op, path, slots, flags, "create").await
}

async fn open_with(
    ex: &Tasks<'_>,
    m: &Meter,
    op: usize,
    path: &str,
    slots: &Slots,
    flags: OpenFlags,
    what: &str,
) -> Result<Fd, AppError> {
    slots.acquire().await;
    let r = timed(ex, m, op, ex.open(path, flags)).await;
    if r.is_err() {
        slots.release();
    }
    r.map_err(|e| AppError::new(format!("{path}: {what}: {e}")))
}

/// `closefile` (the slot is given back even if the close fails).
pub async fn close(
    ex: &Tasks<'_>,
    m: &Meter,
    op: usize,
    fd: Fd,
    path: &str,
    slots: &Slots,
) -> Result<(), AppError> {
    let r = timed(ex, m, op, ex.close(fd)).await;
    slots.release();
    r.map_err(|e| AppError::new(format!("{path}: close: {e}")))
}

/// `fsync`.
pub async fn fsync(
    ex: &Tasks<'_>,
    m: &Meter,
    op: usize,
    fd: Fd,
    path: &str,
) -> Result<(), AppError> {
    timed(ex, m, op, ex.fsync(fd))
        .await
        .map_err(|e| AppError::new(format!("{path}: fsync: {e}")))
}

/// `deletefile`: remove `path` (a missing file is fine: nothing to do).
pub async fn delete(ex: &Tasks<'_>, m: &Meter, op: usize, path: &str) -> Result<(), AppError> {
    let unlink = async {
        match ex.unlink(path).await {
            Err(Errno::NotFound) => Ok(()),
            r => r,
        }
    };
    timed(ex, m, op, unlink)
        .await
        .map_err(|e| AppError::new(format!("{path}: delete: {e}")))
}

/// `statfile`.
pub async fn stat(ex: &Tasks<'_>, m: &Meter, op: usize, path: &str) -> Result<u64, AppError> {
    timed(ex, m, op, ex.stat(path))
        .await
        .map(|a| a.size)
        .map_err(|e| AppError::new(format!("{path}: stat: {e}")))
}

/// `readwholefile`: read `fd` from 0 to its end in I/Os of up to
/// [`IOSIZE`] (queued with the other tasks' I/Os); the bytes read.
pub async fn read_whole(
    ex: &Tasks<'_>,
    m: &Meter,
    op: usize,
    fd: Fd,
    path: &str,
) -> Result<u64, AppError> {
    let t0 = ex.uptime_ns();
    let mut off = 0u64;
    // Start small: most files are a few KiB; grow up to IOSIZE.
    let mut len = 16usize << 10;
    loop {
        let done = ex.pread(fd, off, vec![0u8; len]).await;
        let n = done
            .result
            .map_err(|e| AppError::new(format!("{path}: read at {off}: {e}")))?;
        off += n as u64;
        if n < len {
            break;
        }
        len = (len * 2).min(IOSIZE as usize);
    }
    let t1 = ex.uptime_ns();
    m.record(op, t1.saturating_sub(t0), off, 0, t1);
    Ok(off)
}

/// `writewholefile`: write `size` bytes of pattern `key` from offset 0
/// in I/Os of up to [`IOSIZE`].
pub async fn write_whole(
    ex: &Tasks<'_>,
    m: &Meter,
    op: usize,
    fd: Fd,
    path: &str,
    size: u64,
    key: u64,
) -> Result<(), AppError> {
    let t0 = ex.uptime_ns();
    let mut off = 0u64;
    while off < size {
        let len = (size - off).min(IOSIZE) as usize;
        let mut buf = vec![0u8; len];
        pattern_fill(key, off, &mut buf);
        let done = ex.pwrite(fd, off, buf).await;
        match done.result {
            Ok(n) if n == len => {}
            Ok(n) => {
                return Err(AppError::new(format!(
                    "{path}: write at {off}: short ({n} of {len})"
                )))
            }
            Err(e) => return Err(AppError::new(format!("{path}: write at {off}: {e}"))),
        }
        off += len as u64;
    }
    let t1 = ex.uptime_ns();
    m.record(op, t1.saturating_sub(t0), 0, size, t1);
    Ok(())
}

/// `appendfilerand`: write 1..=[`APPEND_MAX`] bytes (uniform) at the
/// end of the file, whose size the caller tracks in `end` (the range is
/// reserved before the write goes out, so tasks appending to one file
/// never overlap); the bytes written.
pub async fn append_rand(
    ex: &Tasks<'_>,
    m: &Meter,
    op: usize,
    fd: Fd,
    path: &str,
    end: &Cell<u64>,
    rng: &mut Rng,
) -> Result<u64, AppError> {
    let len = rng.range(1, APPEND_MAX) as usize;
    let at = end.get();
    end.set(at + len as u64);
    let mut buf = vec![0u8; len];
    pattern_fill(rng.next_u64(), 0, &mut buf);
    let t0 = ex.uptime_ns();
    let done = ex.pwrite(fd, at, buf).await;
    match done.result {
        Ok(n) if n == len => {}
        Ok(n) => {
            return Err(AppError::new(format!(
                "{path}: append at {at}: short ({n} of {len})"
            )))
        }
        Err(e) => return Err(AppError::new(format!("{path}: append at {at}: {e}"))),
    }
    let t1 = ex.uptime_ns();
    m.record(op, t1.saturating_sub(t0), 0, len as u64, t1);
    Ok(len as u64)
}

/// What a run of a create-and-delete personality (fileserver, varmail)
/// works in: workload `app`'s shared set, this node's own directory
/// (made if missing) and the open-file slots.
pub fn prepare(ex: &Tasks<'_>, run: &Run, app: &str) -> Result<(FileSet, String, Slots), AppError> {
    let set = FileSet::load(ex, &run.dir, app)?;
    let own = set.own_dir(run.env.node);
    ensure_dir(ex, &own)?;
    Ok((set, own, Slots::new(MAX_OPEN)))
}

/// Delete the files a create-and-delete run left (each thread's last),
/// so the node's directory is as it was (not timed): the first error
/// other than `NotFound`, after trying them all.
pub fn delete_leftovers(ex: &Tasks<'_>, paths: &[String]) -> Result<(), AppError> {
    let mut out = Ok(());
    for p in paths {
        if let Err(e) = ex.with_os(|os| os.unlink(p)) {
            if e != Errno::NotFound && out.is_ok() {
                out = Err(AppError::new(format!("{p}: delete: {e}")));
            }
        }
    }
    out
}

/// Make `dir` if it is missing.
pub fn ensure_dir(ex: &Tasks<'_>, dir: &str) -> Result<(), AppError> {
    ex.with_os(|os| match os.mkdir(dir) {
        Ok(()) | Err(Errno::Exists) => Ok(()),
        Err(e) => Err(AppError::new(format!("{dir}: mkdir: {e}"))),
    })
}
