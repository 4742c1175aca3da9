//! The I/O side of [`Tasks`]: I/O futures that queue themselves and
//! yield, and the queue that one flush sends out together.
//!
//! A flush starts the positioned I/Os' page misses together
//! ([`Os::io_start`]) and runs at once those that wait for nothing; each
//! of the others runs when its own pages are in ([`Os::io_poll`]), so a
//! task whose page is a peer's mapping does not wait for another task's
//! disk fill. Mapped I/Os go the same way through [`Os::mmap_start`].
//! Where the OS has no such path (`NotSupported`), the flush is one
//! [`Os::io_batch`] (or [`Os::mmap_batch`]) call that returns when every
//! I/O is done.
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
use crate::os::{BatchIo, Errno, Fd, IoSpan, MapSpan, MmapIo, Os};

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
    /// Sent out: runs once [`Os::io_poll`] says its pages are in.
    Started(u64),
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
    /// Scratch of [`Queue::flush`] and [`Queue::poll_started`], kept to avoid allocating per flush
    /// (allocations cost under TCG): slot indices of the positioned
    /// and the mapped I/Os, and their results.
    fd_at: Vec<usize>,
    map_at: Vec<usize>,
    done: Vec<Result<usize, Errno>>,
    /// I/Os started and not run yet.
    started: usize,
    /// The OS said [`Os::io_start`] is not supported: every flush is one
    /// [`Os::io_batch`].
    no_start: bool,
    /// The same for [`Os::mmap_start`] and [`Os::mmap_batch`].
    no_map_start: bool,
    /// Tickets of started I/Os whose futures were dropped, for
    /// [`Os::io_cancel`].
    cancelled: Vec<u64>,
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
            State::Queued | State::Started(_) => {
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
            if let Some(s) = entry.take() {
                if let State::Started(t) = s.state {
                    self.started = self.started.saturating_sub(1);
                    self.cancelled.push(t);
                }
                self.free.push(i);
            }
        }
    }

    /// I/Os started and waiting for their pages.
    pub(super) fn started(&self) -> usize {
        self.started
    }

    /// Tell the OS about started I/Os whose futures were dropped.
    pub(super) fn cancel_dropped(&mut self, os: &mut dyn Os) {
        for t in self.cancelled.drain(..) {
            os.io_cancel(t);
        }
    }

    /// Run the positioned I/Os of the slots `at` (all `Queued` or
    /// `Started`) through one [`Os::io_batch`] call and complete them.
    fn run_fd(&mut self, os: &mut dyn Os, at: &[usize]) {
        if at.is_empty() {
            return;
        }
        let Queue {
            slots, woken, done, ..
        } = self;
        done.clear();
        let mut ios: Vec<BatchIo<'_>> = Vec::with_capacity(at.len());
        let mut ran: Vec<usize> = Vec::with_capacity(at.len());
        for (i, s) in pick(slots, at) {
            if let Target::Fd(fd) = s.req.target {
                ran.push(i);
                ios.push(BatchIo::new(fd, s.req.offset, s.req.write, &mut s.req.buf));
            }
        }
        match os.io_batch(&mut ios) {
            Ok(()) => done.extend(ios.iter().map(|io| io.done)),
            Err(e) => done.extend(ios.iter().map(|_| Err(e))),
        }
        drop(ios);
        let now = os.uptime_ns();
        complete_all(slots, woken, &mut self.started, &ran, done, now);
    }

    /// Run the started I/Os whose pages are in (and fail those whose
    /// fetch failed); how many completed.
    pub(super) fn poll_started(&mut self, os: &mut dyn Os) -> usize {
        self.cancel_dropped(os);
        if self.started == 0 {
            return 0;
        }
        if !os.io_progress() {
            return 0;
        }
        // The scratch vectors of `flush` (not running now): no allocation
        // per poll.
        let mut fd_ready = core::mem::take(&mut self.fd_at);
        let mut map_ready = core::mem::take(&mut self.map_at);
        fd_ready.clear();
        map_ready.clear();
        let mut failed = Vec::new(); // allocates only on a failure
        for (i, entry) in self.slots.iter().enumerate() {
            let Some(Slot {
                state: State::Started(t),
                req,
                ..
            }) = entry
            else {
                continue;
            };
            match os.io_poll(*t) {
                None => {}
                Some(Ok(())) => match req.target {
                    Target::Fd(_) => fd_ready.push(i),
                    Target::Map(_) => map_ready.push(i),
                },
                Some(Err(e)) => failed.push((i, e)),
            }
        }
        let n = fd_ready.len() + map_ready.len() + failed.len();
        if !failed.is_empty() {
            let now = os.uptime_ns();
            let Queue {
                slots,
                woken,
                started,
                ..
            } = self;
            for (i, e) in failed {
                complete(slots, woken, started, i, Err(e), now);
            }
        }
        self.run_fd(os, &fd_ready);
        if !map_ready.is_empty() {
            self.run_maps(os, &map_ready);
        }
        self.fd_at = fd_ready;
        self.map_at = map_ready;
        n
    }

    /// Send every queued I/O out: the positioned I/Os' misses together
    /// through [`Os::io_start`] (those that wait for nothing run at once
    /// in one [`Os::io_batch`] call; without `io_start`, all of them do),
    /// mapped ones in one [`Os::mmap_batch`] call. A call that fails as a
    /// whole fails each of its I/Os with its error. Returns how many I/Os
    /// went out.
    pub(super) fn flush(&mut self, os: &mut dyn Os) -> usize {
        self.cancel_dropped(os);
        let mut fd_at = core::mem::take(&mut self.fd_at);
        let mut map_at = core::mem::take(&mut self.map_at);
        fd_at.clear();
        map_at.clear();
        for (i, entry) in self.slots.iter().enumerate() {
            let Some(s) = entry else { continue };
            if !matches!(s.state, State::Queued) {
                continue;
            }
            match s.req.target {
                Target::Fd(_) => fd_at.push(i),
                Target::Map(_) => map_at.push(i),
            }
        }
        let n = fd_at.len() + map_at.len();
        if !fd_at.is_empty() {
            let now_ready = self.start_fd(os, &fd_at);
            self.run_fd(os, &now_ready);
        }
        if !map_at.is_empty() {
            let now_ready = self.start_maps(os, &map_at);
            if !now_ready.is_empty() {
                self.run_maps(os, &now_ready);
            }
        }
        self.fd_at = fd_at;
        self.map_at = map_at;
        n
    }

    /// Start the positioned I/Os of the slots `at` ([`Os::io_start`]):
    /// those that wait for pages become `Started`; the ones to run now are
    /// returned (all of them where the OS has no such path).
    fn start_fd(&mut self, os: &mut dyn Os, at: &[usize]) -> Vec<usize> {
        if self.no_start {
            return at.to_vec();
        }
        let spans: Vec<IoSpan> = reqs(&self.slots, at)
            .filter_map(|r| match r.target {
                Target::Fd(fd) => Some(IoSpan {
                    fd,
                    offset: r.offset,
                    len: r.buf.len(),
                    write: r.write,
                }),
                Target::Map(_) => None,
            })
            .collect();
        let tickets = os.io_start(&spans);
        self.take_tickets(os, at, tickets, false)
    }

    /// The answer of [`Os::io_start`] (or [`Os::mmap_start`], `map`) for
    /// the slots `at`: those given a ticket become `Started`; the ones to
    /// run now are returned (all of them where the OS has no such path,
    /// which is remembered).
    fn take_tickets(
        &mut self,
        os: &mut dyn Os,
        at: &[usize],
        tickets: Result<Vec<Option<u64>>, Errno>,
        map: bool,
    ) -> Vec<usize> {
        let tickets = match tickets {
            Ok(t) if t.len() == at.len() => t,
            Ok(_) => alloc::vec![None; at.len()], // a miscounting OS: run them now
            Err(Errno::NotSupported) => {
                if map {
                    self.no_map_start = true;
                } else {
                    self.no_start = true;
                }
                return at.to_vec();
            }
            Err(e) => {
                let now = os.uptime_ns();
                let Queue {
                    slots,
                    woken,
                    started,
                    ..
                } = self;
                for &i in at {
                    complete(slots, woken, started, i, Err(e), now);
                }
                return Vec::new();
            }
        };
        let mut now_ready = Vec::new();
        for (&i, t) in at.iter().zip(tickets) {
            match (t, self.slots.get_mut(i)) {
                (Some(t), Some(Some(s))) => {
                    s.state = State::Started(t);
                    self.started += 1;
                }
                (None, _) => now_ready.push(i),
                (Some(t), _) => os.io_cancel(t),
            }
        }
        now_ready
    }

    /// [`Queue::start_fd`] for the mapped I/Os of the slots `at`
    /// ([`Os::mmap_start`]).
    fn start_maps(&mut self, os: &mut dyn Os, at: &[usize]) -> Vec<usize> {
        if self.no_map_start {
            return at.to_vec();
        }
        let tickets = {
            let spans: Vec<MapSpan<'_>> = reqs(&self.slots, at)
                .filter_map(|r| match &r.target {
                    Target::Map(path) => Some(MapSpan {
                        path,
                        offset: r.offset,
                        len: r.buf.len(),
                        write: r.write,
                    }),
                    Target::Fd(_) => None,
                })
                .collect();
            os.mmap_start(&spans)
        };
        self.take_tickets(os, at, tickets, true)
    }

    /// Run the mapped I/Os of the slots `at` through one
    /// [`Os::mmap_batch`] call and complete them.
    fn run_maps(&mut self, os: &mut dyn Os, at: &[usize]) {
        let Queue {
            slots, woken, done, ..
        } = self;
        done.clear();
        let mut maps: Vec<MmapIo<'_>> = Vec::with_capacity(at.len());
        let mut ran: Vec<usize> = Vec::with_capacity(at.len());
        for (i, s) in pick(slots, at) {
            let Req {
                target,
                offset,
                write,
                buf,
            } = &mut s.req;
            if let Target::Map(path) = target {
                ran.push(i);
                maps.push(MmapIo::new(path, *offset, *write, buf));
            }
        }
        match os.mmap_batch(&mut maps) {
            Ok(()) => done.extend(maps.iter().map(|io| io.done)),
            Err(e) => done.extend(maps.iter().map(|_| Err(e))),
        }
        drop(maps);
        let now = os.uptime_ns();
        complete_all(slots, woken, &mut self.started, &ran, done, now);
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

/// The requests of the occupied slots among the indices `at` (others are
/// skipped), in the order of `at`.
fn reqs<'s>(slots: &'s [Option<Slot>], at: &'s [usize]) -> impl Iterator<Item = &'s Req> {
    at.iter()
        .filter_map(|&i| slots.get(i).and_then(Option::as_ref).map(|s| &s.req))
}

/// The occupied slots among the indices `at` (ascending, as the queue
/// builds them; others are skipped), each once, in index order.
fn pick<'s, 'i>(
    slots: &'s mut [Option<Slot>],
    at: &'i [usize],
) -> impl Iterator<Item = (usize, &'s mut Slot)> + use<'s, 'i> {
    let mut next = 0usize;
    slots.iter_mut().enumerate().filter_map(move |(i, entry)| {
        while at.get(next).is_some_and(|&w| w < i) {
            next += 1; // out of order or repeated: skipped
        }
        if at.get(next) != Some(&i) {
            return None;
        }
        next += 1;
        entry.as_mut().map(|s| (i, s))
    })
}

/// Complete the slots `ran` with their `done` results (in order).
fn complete_all(
    slots: &mut [Option<Slot>],
    woken: &mut Vec<Waker>,
    started: &mut usize,
    ran: &[usize],
    done: &[Result<usize, Errno>],
    completed_ns: u64,
) {
    for (&i, &result) in ran.iter().zip(done.iter()) {
        complete(slots, woken, started, i, result, completed_ns);
    }
}

/// Complete slot `i` with `result`: its waker goes to `woken`; a started
/// I/O leaves the `started` count.
fn complete(
    slots: &mut [Option<Slot>],
    woken: &mut Vec<Waker>,
    started: &mut usize,
    i: usize,
    result: Result<usize, Errno>,
    completed_ns: u64,
) {
    if let Some(Some(s)) = slots.get_mut(i) {
        if matches!(s.state, State::Started(_)) {
            *started = started.saturating_sub(1);
        }
        s.state = State::Done {
            result,
            completed_ns,
        };
        if let Some(w) = s.waker.take() {
            woken.push(w);
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
