//! Metadata calls of tasks: a call goes out at once
//! ([`crate::os::Os::meta_start`]) and its task yields until the answer
//! is in, so other tasks' data I/O and metadata calls go on meanwhile
//! (several tasks' calls may be in flight together). The executor polls
//! the calls in flight whenever no task can run, and waits for answers
//! ([`crate::os::Os::meta_wait`]) only when nothing else is left to do.

use alloc::string::String;
use alloc::vec::Vec;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};

use super::Tasks;
use crate::meta::{MetaCall, MetaDone, MetaStart, MetaTicket};
use crate::os::{Attr, DirEntry, Errno, Fd, OpenFlags};

/// How the metadata calls of a run went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MetaStats {
    /// Calls that went out and were waited for (`Pending`).
    pub yielded: u64,
    /// Calls that finished at once.
    pub immediate: u64,
    /// Most calls in flight together.
    pub max_in_flight: u64,
}

#[derive(Debug)]
struct Call {
    ticket: MetaTicket,
    /// `Some` once answered.
    result: Option<Result<MetaDone, Errno>>,
    waker: Option<Waker>,
    /// Its future was dropped before the answer: poll it to the end and
    /// drop the result (an orphaned open's descriptor is closed).
    orphan: bool,
}

/// The calls in flight (and those answered but not yet collected).
#[derive(Debug, Default)]
pub(super) struct Calls {
    slots: Vec<Option<Call>>,
    free: Vec<usize>,
    in_flight: usize,
    stats: MetaStats,
}

impl Calls {
    fn push(&mut self, ticket: MetaTicket, waker: Waker) -> usize {
        let call = Some(Call {
            ticket,
            result: None,
            waker: Some(waker),
            orphan: false,
        });
        self.in_flight += 1;
        self.stats.yielded += 1;
        self.stats.max_in_flight = self.stats.max_in_flight.max(self.in_flight as u64);
        if let Some(i) = self.free.pop() {
            if let Some(s) = self.slots.get_mut(i) {
                *s = call;
                return i;
            }
        }
        self.slots.push(call);
        self.slots.len() - 1
    }

    fn release(&mut self, i: usize) {
        if let Some(s) = self.slots.get_mut(i) {
            if s.take().is_some() {
                self.free.push(i);
            }
        }
    }

    /// The result of slot `i` if answered (the slot is freed); otherwise
    /// remember `waker`.
    fn take_done(&mut self, i: usize, waker: &Waker) -> Option<Result<MetaDone, Errno>> {
        let call = self.slots.get_mut(i)?.as_mut()?;
        match call.result.take() {
            Some(r) => {
                self.release(i);
                Some(r)
            }
            None => {
                if !call.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
                    call.waker = Some(waker.clone());
                }
                None
            }
        }
    }

    /// Calls still waiting for their answer.
    pub(super) fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// The tickets of the calls in flight, with their slots.
    fn waiting(&self) -> Vec<(usize, MetaTicket)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s {
                Some(c) if c.result.is_none() => Some((i, c.ticket)),
                _ => None,
            })
            .collect()
    }

    /// Record the answer of slot `i`: its waker, to wake; and, for an
    /// orphan, the descriptor an open left behind (to close).
    fn answer(&mut self, i: usize, r: Result<MetaDone, Errno>) -> (Option<Waker>, Option<Fd>) {
        let Some(Some(call)) = self.slots.get_mut(i) else {
            return (None, None);
        };
        self.in_flight = self.in_flight.saturating_sub(1);
        if call.orphan {
            let fd = match r {
                Ok(MetaDone::Fd(fd)) => Some(fd),
                _ => None,
            };
            self.release(i);
            return (None, fd);
        }
        call.result = Some(r);
        (call.waker.take(), None)
    }
}

impl<'a> Tasks<'a> {
    /// Poll every call in flight once; wake the tasks whose answer came.
    /// How many finished.
    pub(super) fn poll_calls(&self) -> usize {
        let waiting = self.calls.borrow().waiting();
        let mut n = 0;
        for (i, ticket) in waiting {
            let Some(r) = self.with_os(|os| os.meta_poll(ticket)) else {
                continue;
            };
            n += 1;
            let (waker, orphan_fd) = self.calls.borrow_mut().answer(i, r);
            if let Some(w) = waker {
                w.wake();
            }
            if let Some(fd) = orphan_fd {
                let _ = self.with_os(|os| os.close(fd));
            }
        }
        n
    }

    /// Wait a little for answers to the calls in flight.
    pub(super) fn wait_calls(&self) {
        self.with_os(|os| os.meta_wait());
    }

    /// Poll the orphaned calls (their tasks are gone) until every one is
    /// answered; the OS's call timeout bounds each.
    pub(super) fn drain_orphans(&self) {
        // Started I/Os of dropped tasks: the OS forgets their tickets.
        {
            let mut q = self.queue.borrow_mut();
            let mut os = self.os.borrow_mut();
            q.cancel_dropped(&mut **os);
        }
        while self.calls.borrow().in_flight() > 0 {
            if self.poll_calls() == 0 {
                self.wait_calls();
            }
        }
    }

    /// The metadata calls so far.
    pub fn meta_stats(&self) -> MetaStats {
        self.calls.borrow().stats
    }

    /// Start `call`; the task yields until its answer is in.
    pub fn meta(&self, call: MetaCall) -> MetaFuture<'_, 'a> {
        MetaFuture {
            ex: self,
            call: Some(call),
            slot: None,
        }
    }

    /// Open `path` ([`crate::os::Os::open`]), yielding while the
    /// directory answers.
    pub async fn open(&self, path: &str, flags: OpenFlags) -> Result<Fd, Errno> {
        let path = String::from(path);
        self.meta(MetaCall::Open { path, flags }).await?.fd()
    }

    /// Attributes of `path`, yielding while the directory answers.
    pub async fn stat(&self, path: &str) -> Result<Attr, Errno> {
        let path = String::from(path);
        self.meta(MetaCall::Stat { path }).await?.attr()
    }

    /// Close `fd`.
    pub async fn close(&self, fd: Fd) -> Result<(), Errno> {
        self.meta(MetaCall::Close { fd }).await.map(|_| ())
    }

    /// Flush `fd`, yielding while the directory flushes.
    pub async fn fsync(&self, fd: Fd) -> Result<(), Errno> {
        self.meta(MetaCall::Fsync { fd }).await.map(|_| ())
    }

    /// Set the size of `fd`.
    pub async fn truncate(&self, fd: Fd, size: u64) -> Result<(), Errno> {
        self.meta(MetaCall::Truncate { fd, size }).await.map(|_| ())
    }

    /// Remove the file `path`, yielding while the directory answers.
    pub async fn unlink(&self, path: &str) -> Result<(), Errno> {
        let path = String::from(path);
        self.meta(MetaCall::Unlink { path }).await.map(|_| ())
    }

    /// Create the directory `path`, yielding while the directory answers.
    pub async fn mkdir(&self, path: &str) -> Result<(), Errno> {
        let path = String::from(path);
        self.meta(MetaCall::Mkdir { path }).await.map(|_| ())
    }

    /// Remove the empty directory `path`.
    pub async fn rmdir(&self, path: &str) -> Result<(), Errno> {
        let path = String::from(path);
        self.meta(MetaCall::Rmdir { path }).await.map(|_| ())
    }

    /// The entries of the directory `path`, sorted by name.
    pub async fn readdir(&self, path: &str) -> Result<Vec<DirEntry>, Errno> {
        let path = String::from(path);
        self.meta(MetaCall::Readdir { path }).await?.entries()
    }
}

/// One metadata call of a task: the first poll sends it; it is ready
/// once its answer is in.
pub struct MetaFuture<'t, 'a> {
    ex: &'t Tasks<'a>,
    call: Option<MetaCall>,
    slot: Option<usize>,
}

impl Future for MetaFuture<'_, '_> {
    type Output = Result<MetaDone, Errno>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Some(call) = this.call.take() {
            return match this.ex.with_os(|os| os.meta_start(call)) {
                MetaStart::Done(r) => {
                    this.ex.calls.borrow_mut().stats.immediate += 1;
                    Poll::Ready(r)
                }
                MetaStart::Pending(t) => {
                    let i = this.ex.calls.borrow_mut().push(t, cx.waker().clone());
                    this.slot = Some(i);
                    Poll::Pending
                }
            };
        }
        let Some(i) = this.slot else {
            // Polled again after it completed: a caller bug, not a panic.
            return Poll::Ready(Err(Errno::Invalid));
        };
        match this.ex.calls.borrow_mut().take_done(i, cx.waker()) {
            Some(r) => {
                this.slot = None;
                Poll::Ready(r)
            }
            None => Poll::Pending,
        }
    }
}

impl Drop for MetaFuture<'_, '_> {
    fn drop(&mut self) {
        let Some(i) = self.slot.take() else { return };
        let Ok(mut calls) = self.ex.calls.try_borrow_mut() else {
            return;
        };
        let answered = match calls.slots.get_mut(i) {
            Some(Some(c)) if c.result.is_none() => {
                // Still in flight: the executor polls it to the end.
                c.orphan = true;
                c.waker = None;
                return;
            }
            Some(slot) => slot.take(),
            None => None,
        };
        let Some(call) = answered else { return };
        calls.free.push(i);
        drop(calls);
        // Answered but never collected: an open's descriptor would leak.
        if let Some(Ok(MetaDone::Fd(fd))) = call.result {
            if let Ok(mut os) = self.ex.os.try_borrow_mut() {
                let _ = os.close(fd);
            }
        }
    }
}
