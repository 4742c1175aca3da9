//! Tasks on a node: a small cooperative executor for the shell's
//! workloads (every `fio` job is a task; the application workloads
//! use the same API).
//!
//! A kernel here has one vCPU and no threads, so concurrency is I/O
//! level: a task is a `Future` polled round-robin by [`Tasks::run`]. A
//! task's data I/O ([`Tasks::pread`], [`Tasks::pwrite`],
//! [`Tasks::mmap_read`], [`Tasks::mmap_write`]) enqueues itself and
//! yields. When no task can make progress, the executor flushes every
//! queued I/O through **one** [`Os::io_batch`] call (and one
//! [`Os::mmap_batch`] call for mapped I/O), so the page misses of all
//! waiting tasks go out together, then completes the I/Os and wakes
//! their tasks. Metadata operations (open, close, fsync, stat, seek)
//! stay synchronous: a task calls them through [`Tasks::with_os`], which
//! lends the [`Os`] for the duration of a closure (so it is never
//! borrowed across an `.await`).
//!
//! The executor never spins: if every unfinished task is waiting and
//! nothing is queued (a task awaits something that no flush will
//! complete), [`Tasks::run`] returns [`Stalled`] instead of looping.
//!
//! ```ignore
//! let ex = Tasks::new(os);
//! let results = ex.run_n(8, |id| {
//!     let ex = &ex;
//!     async move {
//!         let done = ex.pread(fd, id as u64 * 4096, vec![0; 4096]).await;
//!         done.result
//!     }
//! })?;
//! let depth = ex.stats(); // I/Os in flight at each flush: mean and max
//! ```

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::task::Wake;
use alloc::vec::Vec;
use core::cell::{Cell, RefCell};
use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::sync::atomic::{AtomicBool, Ordering};
use core::task::{Context, Poll, Waker};

use crate::os::Os;

mod io;
mod meta;
#[cfg(test)]
mod tests;

use io::Queue;
pub use io::{IoDone, IoFuture, YieldNow};
use meta::Calls;
pub use meta::{MetaFuture, MetaStats};

/// A task: a boxed future borrowing from the executor's scope.
pub type Task<'t, T> = Pin<Box<dyn Future<Output = T> + 't>>;

/// How many I/Os were in flight when each flush went out: the depth
/// really in flight (the flush's own I/Os plus those started by earlier
/// flushes that still wait for their pages).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlushStats {
    /// Flushes that carried at least one I/O.
    pub flushes: u64,
    /// I/Os in flight at those flushes, summed.
    pub ios: u64,
    /// Most I/Os in flight at one flush.
    pub max: u64,
    /// I/Os the flushes sent out (each once): `sent / flushes` is the
    /// I/Os per flush, how well the waiting tasks' I/Os were gathered.
    pub sent: u64,
}

impl FlushStats {
    /// The figures since `earlier` (a snapshot of the same executor);
    /// `max` stays the maximum over the whole run.
    pub fn since(&self, earlier: &FlushStats) -> FlushStats {
        FlushStats {
            flushes: self.flushes.saturating_sub(earlier.flushes),
            ios: self.ios.saturating_sub(earlier.ios),
            max: self.max,
            sent: self.sent.saturating_sub(earlier.sent),
        }
    }

    /// Mean I/Os in flight at a flush, rounded to the nearest integer (0 with no
    /// flush).
    pub fn mean_rounded(&self) -> u32 {
        let mean = self
            .ios
            .saturating_add(self.flushes / 2)
            .checked_div(self.flushes)
            .unwrap_or(0);
        u32::try_from(mean).unwrap_or(u32::MAX)
    }

    /// I/Os sent per flush in thousandths (0 with no flush).
    pub fn per_flush_milli(&self) -> u64 {
        self.sent
            .saturating_mul(1000)
            .checked_div(self.flushes)
            .unwrap_or(0)
    }

    /// Mean I/Os in flight at a flush in thousandths (for a `x.yyy`
    /// figure).
    pub fn mean_milli(&self) -> u64 {
        self.ios
            .saturating_mul(1000)
            .checked_div(self.flushes)
            .unwrap_or(0)
    }
}

/// [`Tasks::run`] found every unfinished task waiting with nothing
/// queued: nothing would ever wake them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stalled {
    /// Tasks still waiting.
    pub waiting: usize,
}

impl fmt::Display for Stalled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} task(s) wait with no I/O queued (nothing would wake them)",
            self.waiting
        )
    }
}

/// A task's wake-up flag (the [`Waker`] sets it; the executor polls only
/// tasks whose flag is set).
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::Release);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::Release);
    }
}

/// The executor and what its tasks share: the [`Os`] (lent out by
/// [`Tasks::with_os`]) and the queue of I/Os waiting for the next flush.
pub struct Tasks<'a> {
    os: RefCell<&'a mut dyn Os>,
    queue: RefCell<Queue>,
    /// Metadata calls in flight.
    calls: RefCell<Calls>,
    stats: Cell<FlushStats>,
    /// The task being polled (for [`Tasks::current`]).
    current: Cell<usize>,
}

impl<'a> Tasks<'a> {
    /// An executor over `os` with nothing queued.
    pub fn new(os: &'a mut dyn Os) -> Tasks<'a> {
        Tasks {
            os: RefCell::new(os),
            queue: RefCell::new(Queue::default()),
            calls: RefCell::new(Calls::default()),
            stats: Cell::new(FlushStats::default()),
            current: Cell::new(0),
        }
    }

    /// Lend the [`Os`] to `f` (a synchronous call: open, fsync, the
    /// clock, ...). Never call it from inside another `with_os`.
    pub fn with_os<R>(&self, f: impl FnOnce(&mut dyn Os) -> R) -> R {
        let mut os = self.os.borrow_mut();
        f(&mut **os)
    }

    /// The [`Os`] clock.
    pub fn uptime_ns(&self) -> u64 {
        self.os.borrow().uptime_ns()
    }

    /// The flushes so far.
    pub fn stats(&self) -> FlushStats {
        self.stats.get()
    }

    /// Index of the task being polled (its position in [`Tasks::run`]'s
    /// list, the `id` of [`Tasks::run_n`]).
    pub fn current(&self) -> usize {
        self.current.get()
    }

    /// Run `n` tasks, task `id` being `f(id)`, until all finish; their
    /// outputs in task order.
    pub fn run_n<'t, T, F, Fut>(&'t self, n: usize, mut f: F) -> Result<Vec<T>, Stalled>
    where
        F: FnMut(usize) -> Fut,
        Fut: Future<Output = T> + 't,
    {
        let tasks: Vec<Task<'t, T>> = (0..n).map(|id| Box::pin(f(id)) as Task<'t, T>).collect();
        self.run(tasks)
    }

    /// Run `tasks` until all finish; their outputs in task order.
    ///
    /// Every pass polls each task whose waker fired, in order (round
    /// robin: a task that is ready again waits for the others' turns).
    /// When a pass finds no task ready, the queued I/Os are flushed
    /// together and their tasks woken; with nothing queued either, the
    /// run ends with [`Stalled`] (the unfinished tasks are dropped,
    /// which withdraws their queued I/Os).
    pub fn run<'t, T>(&'t self, mut tasks: Vec<Task<'t, T>>) -> Result<Vec<T>, Stalled> {
        let n = tasks.len();
        let flags: Vec<Arc<Flag>> = (0..n)
            .map(|_| Arc::new(Flag(AtomicBool::new(true))))
            .collect();
        let wakers: Vec<Waker> = flags.iter().map(|f| Waker::from(f.clone())).collect();
        let mut out: Vec<Option<T>> = (0..n).map(|_| None).collect();
        let mut left = n;
        // The task polled last, for the timeline's task switches.
        let mut last = None;
        while left > 0 {
            let mut polled = false;
            for (i, ((task, slot), (flag, waker))) in tasks
                .iter_mut()
                .zip(out.iter_mut())
                .zip(flags.iter().zip(&wakers))
                .enumerate()
            {
                if slot.is_some() || !flag.0.swap(false, Ordering::Acquire) {
                    continue;
                }
                polled = true;
                self.current.set(i);
                if last != Some(i) {
                    last = Some(i);
                    fabric::trace::record(fabric::trace::Kind::TaskSwitch, 0, 0, 0, i as u64);
                }
                let mut cx = Context::from_waker(waker);
                if let Poll::Ready(v) = task.as_mut().poll(&mut cx) {
                    *slot = Some(v);
                    left -= 1;
                }
            }
            if polled || left == 0 {
                continue;
            }
            // No task can run: collect the metadata answers already in,
            // else send the queued data I/O out, else wait for answers.
            if self.calls.borrow().in_flight() > 0 && self.poll_calls() > 0 {
                continue;
            }
            // Both, every time: tasks whose I/Os are hits keep the flush
            // busy, and must not starve the I/Os waiting for their pages.
            let ran = self.poll_ios();
            if self.flush() + ran > 0 {
                continue;
            }
            let started = self.queue.borrow().started();
            if self.calls.borrow().in_flight() == 0 && started == 0 {
                drop(tasks);
                self.drain_orphans();
                return Err(Stalled { waiting: left });
            }
            if started > 0 {
                self.os.borrow_mut().io_wait();
            } else {
                self.wait_calls();
            }
        }
        drop(tasks);
        self.drain_orphans();
        Ok(out.into_iter().flatten().collect())
    }

    /// Send every queued I/O out together, complete them and wake their
    /// tasks; how many there were.
    fn flush(&self) -> usize {
        let mut q = self.queue.borrow_mut();
        let before = q.started();
        let n = {
            let mut os = self.os.borrow_mut();
            q.flush(&mut **os)
        };
        if n > 0 {
            // The depth in flight: this flush's I/Os and those started
            // earlier that still wait for their pages.
            let depth = (n + before) as u64;
            let mut s = self.stats.get();
            s.flushes += 1;
            s.ios += depth;
            s.max = s.max.max(depth);
            s.sent += n as u64;
            self.stats.set(s);
        }
        drop(q);
        self.wake_done();
        n
    }

    /// Run the started I/Os whose pages came in and wake their tasks; how
    /// many completed.
    fn poll_ios(&self) -> usize {
        let n = {
            let mut q = self.queue.borrow_mut();
            let mut os = self.os.borrow_mut();
            q.poll_started(&mut **os)
        };
        self.wake_done();
        n
    }

    /// Wake the tasks of the I/Os just completed.
    fn wake_done(&self) {
        let mut wake = self.queue.borrow_mut().take_wakers();
        for w in wake.drain(..) {
            w.wake();
        }
        self.queue.borrow_mut().return_wakers(wake);
    }
}
