//! The I/O side of [`Tasks`]: I/O futures that queue themselves and
//! yield, and the queue that one flush sends out together.
//!
//! An I/O owns its buffer while it is queued (as with io_uring): the
//! task hands a `Vec<u8>` in and gets it back in [`IoDone`], so nothing
//! is borrowed across the `.await`.

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};

use super::Tasks;
use crate::os::{BatchIo, Errno, Fd, MmapIo, Os};

/// What an I/O goes to.
#[derive(Debug)]
enum Target {
    /// A positioned read or write of a descriptor ([`Os::io_batch`]).
    Fd(Fd),
    /// A load or store through the mapping of a file ([`Os::mmap_batch`]).
    Map(String),
}

/// An I/O before it is queued.
#[derive(Debug)]
struct Req {
    target: Target,
    offset: u64,
    write: bool,
    buf: Vec<u8>,
}

#[derive(Debug, Clone, Copy)]
enum State {
    Queued,
    Done {
        result: Result<usize, Errno>,
        completed_ns: u64,
    },
}

#[derive(Debug)]
struct Slot {
    req: Req,
    submitted_ns: u64,
    state: State,
    waker: Option<Waker>,
}

/// A completed I/O: its buffer back, and how it went.
#[derive(Debug)]
pub struct IoDone {
    /// The buffer handed in (holding the data read, for a read).
    pub buf: Vec<u8>,
    /// Bytes moved (all of `buf`, fewer for a read reaching the end of
    /// the file), or the error.
    pub result: Result<usize, Errno>,
    /// When the I/O was queued ([`Os::uptime_ns`]).
    pub submitted_ns: u64,
    /// When the flush that carried it completed.
    pub completed_ns: u64,
}

impl IoDone {
    /// Completion latency: queued to completed.
    pub fn latency_ns(&self) -> u64 {
        self.completed_ns.saturating_sub(self.submitted_ns)
    }
}

/// The I/Os queued for the next flush (and those done but not yet
/// collected by their futures).
#[derive(Debug, Default)]
pub(super) struct Queue {
    slots: Vec<Option<Slot>>,
    free: Vec<usize>,
    /// Wakers of the I/Os the last flush completed.
    woken: Vec<Waker>,
    /// Scratch of [`Queue::flush`], kept to avoid allocating per flush
    /// (allocations cost under TCG): slot indices of the positioned
    /// and the mapped I/Os, and their results.
    fd_at: Vec<usize>,
    map_at: Vec<usize>,
    done: Vec<Result<usize, Errno>>,
}

impl Queue {
    fn push(&mut self, req: Req, now: u64, waker: Waker) -> usize {
        let slot = Some(Slot {
            req,
            submitted_ns: now,
            state: State::Queued,
            waker: Some(waker),
        });
        if let Some(i) = self.free.pop() {
            if let Some(s) = self.slots.get_mut(i) {
                *s = slot;
                return i;
            }
        }
        self.slots.push(slot);
        self.slots.len() - 1
    }

    /// The I/O in slot `i` if it is done (the slot is freed); otherwise
    /// remember `waker` for it.
    fn take_done(&mut self, i: usize, waker: &Waker) -> Option<IoDone> {
        let entry = self.slots.get_mut(i)?;
        let s = entry.as_mut()?;
        match s.state {
            State::Queued => {
                if !s.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
                    s.waker = Some(waker.clone());
                }
                None
            }
            State::Done {
                result,
                completed_ns,
            } => {
                let s = entry.take()?;
                self.free.push(i);
                Some(IoDone {
                    buf: s.req.buf,
                    result,
                    submitted_ns: s.submitted_ns,
                    completed_ns,
                })
            }
        }
    }

    /// Withdraw slot `i` (its future was dropped).
    fn remove(&mut self, i: usize) {
        if let Some(entry) = self.slots.get_mut(i) {
            if entry.take().is_some() {
                self.free.push(i);
            }
        }
    }

    /// Send every queued I/O out: positioned I/Os in one
    /// [`Os::io_batch`] call, mapped ones in one [`Os::mmap_batch`]
    /// call. A call that fails as a whole fails each of its I/Os with
    /// its error. Returns how many I/Os went out.
    pub(super) fn flush(&mut self, os: &mut dyn Os) -> usize {
        let Queue {
            slots,
            woken,
            fd_at,
            map_at,
            done,
            ..
        } = self;
        fd_at.clear();
        map_at.clear();
        done.clear();
        let mut ios: Vec<BatchIo<'_>> = Vec::new();
        let mut maps: Vec<MmapIo<'_>> = Vec::new();
        for (i, entry) in slots.iter_mut().enumerate() {
            let Some(s) = entry else { continue };
            if !matches!(s.state, State::Queued) {
                continue;
            }
            let Req {
                target,
                offset,
                write,
                buf,
            } = &mut s.req;
            match target {
                Target::Fd(fd) => {
                    fd_at.push(i);
                    ios.push(BatchIo::new(*fd, *offset, *write, buf));
                }
                Target::Map(path) => {
                    map_at.push(i);
                    maps.push(MmapIo::new(path, *offset, *write, buf));
                }
            }
        }
        let n = fd_at.len() + map_at.len();
        if n == 0 {
            return 0;
        }
        if !ios.is_empty() {
            match os.io_batch(&mut ios) {
                Ok(()) => done.extend(ios.iter().map(|io| io.done)),
                Err(e) => done.extend(ios.iter().map(|_| Err(e))),
            }
        }
        if !maps.is_empty() {
            match os.mmap_batch(&mut maps) {
                Ok(()) => done.extend(maps.iter().map(|io| io.done)),
                Err(e) => done.extend(maps.iter().map(|_| Err(e))),
            }
        }
        drop(ios);
        drop(maps);
        let completed_ns = os.uptime_ns();
        for (&i, &result) in fd_at.iter().chain(map_at.iter()).zip(done.iter()) {
            if let Some(Some(s)) = slots.get_mut(i) {
                s.state = State::Done {
                    result,
                    completed_ns,
                };
                if let Some(w) = s.waker.take() {
                    woken.push(w);
                }
            }
        }
        n
    }

    /// The wakers of the I/Os the last flush completed (give the vector
    /// back with [`Queue::return_wakers`] to reuse it).
    pub(super) fn take_wakers(&mut self) -> Vec<Waker> {
        core::mem::take(&mut self.woken)
    }

    /// The emptied vector of [`Queue::take_wakers`], for the next flush.
    pub(super) fn return_wakers(&mut self, mut v: Vec<Waker>) {
        v.clear();
        if self.woken.is_empty() {
            self.woken = v;
        }
    }
}

/// One queued I/O: the first poll queues it and yields; it is ready once
/// a flush has carried it.
pub struct IoFuture<'t, 'a> {
    ex: &'t Tasks<'a>,
    req: Option<Req>,
    slot: Option<usize>,
}

impl Future for IoFuture<'_, '_> {
    type Output = IoDone;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<IoDone> {
        let this = self.get_mut();
        if let Some(req) = this.req.take() {
            let now = this.ex.uptime_ns();
            let i = this
                .ex
                .queue
                .borrow_mut()
                .push(req, now, cx.waker().clone());
            this.slot = Some(i);
            return Poll::Pending;
        }
        let Some(i) = this.slot else {
            // Polled again after it completed: a caller bug, not a panic.
            return Poll::Ready(IoDone {
                buf: Vec::new(),
                result: Err(Errno::Invalid),
                submitted_ns: 0,
                completed_ns: 0,
            });
        };
        match this.ex.queue.borrow_mut().take_done(i, cx.waker()) {
            Some(done) => {
                this.slot = None;
                Poll::Ready(done)
            }
            None => Poll::Pending,
        }
    }
}

impl Drop for IoFuture<'_, '_> {
    fn drop(&mut self) {
        if let Some(i) = self.slot.take() {
            if let Ok(mut q) = self.ex.queue.try_borrow_mut() {
                q.remove(i);
            }
        }
    }
}

/// Yield once: the task goes to the back of the round.
#[derive(Debug, Default)]
pub struct YieldNow {
    yielded: bool,
}

impl Future for YieldNow {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this.yielded {
            return Poll::Ready(());
        }
        this.yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

impl<'a> Tasks<'a> {
    fn io(&self, target: Target, offset: u64, write: bool, buf: Vec<u8>) -> IoFuture<'_, 'a> {
        IoFuture {
            ex: self,
            req: Some(Req {
                target,
                offset,
                write,
                buf,
            }),
            slot: None,
        }
    }

    /// Read `buf.len()` bytes of `fd` at `offset` (pread): queued, and
    /// sent out with every other waiting task's I/O.
    pub fn pread(&self, fd: Fd, offset: u64, buf: Vec<u8>) -> IoFuture<'_, 'a> {
        self.io(Target::Fd(fd), offset, false, buf)
    }

    /// Write `buf` to `fd` at `offset` (pwrite), queued like
    /// [`Tasks::pread`].
    pub fn pwrite(&self, fd: Fd, offset: u64, buf: Vec<u8>) -> IoFuture<'_, 'a> {
        self.io(Target::Fd(fd), offset, true, buf)
    }

    /// Load `buf.len()` bytes at `offset` of `path` through its mapping
    /// (the range lies within the file), queued like [`Tasks::pread`].
    pub fn mmap_read(&self, path: &str, offset: u64, buf: Vec<u8>) -> IoFuture<'_, 'a> {
        self.io(Target::Map(path.to_string()), offset, false, buf)
    }

    /// Store `buf` at `offset` of `path` through its mapping.
    pub fn mmap_write(&self, path: &str, offset: u64, buf: Vec<u8>) -> IoFuture<'_, 'a> {
        self.io(Target::Map(path.to_string()), offset, true, buf)
    }

    /// Let every other ready task run first.
    pub fn yield_now(&self) -> YieldNow {
        YieldNow::default()
    }
}
