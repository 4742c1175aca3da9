//! A per-client queue of outgoing messages with a bounded backlog and a
//! stall clock, so one slow client can never block the server.
//!
//! The queue is generic over the fd handle (`T`) and the actual send is a
//! closure, so the logic is tested here without sockets.

use std::collections::VecDeque;
use std::io;
use std::time::{Duration, Instant};

/// The backlog is full: the client is not reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overflow;

#[derive(Debug)]
struct Pending<T> {
    bytes: [u8; 8],
    fd: Option<T>,
}

#[derive(Debug)]
pub struct Outbox<T> {
    queue: VecDeque<Pending<T>>,
    /// Bytes of the front message already sent (its fd went with the first).
    sent: usize,
    limit: usize,
    /// Since when the queue has been non-empty without any progress.
    stalled_since: Option<Instant>,
}

impl<T> Outbox<T> {
    /// A queue holding at most `limit` messages.
    pub fn new(limit: usize) -> Self {
        Outbox {
            queue: VecDeque::new(),
            sent: 0,
            limit,
            stalled_since: None,
        }
    }

    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Queue one message; [`Overflow`] if the backlog is full.
    pub fn push(&mut self, bytes: [u8; 8], fd: Option<T>) -> Result<(), Overflow> {
        if self.queue.len() >= self.limit {
            return Err(Overflow);
        }
        self.queue.push_back(Pending { bytes, fd });
        Ok(())
    }

    /// Send as much as the socket takes. `send(bytes, fd)` is one
    /// non-blocking sendmsg: the number of bytes taken, or `WouldBlock`
    /// when the socket is full. A partially sent message is finished
    /// without its fd (the kernel delivered the fd with the first byte).
    /// Returns the number of messages completed; any error other than
    /// `WouldBlock`/`Interrupted` is returned (the client is gone).
    pub fn flush<F>(&mut self, now: Instant, mut send: F) -> io::Result<usize>
    where
        F: FnMut(&[u8], Option<&T>) -> io::Result<usize>,
    {
        let mut done = 0;
        let mut progress = false;
        while let Some(front) = self.queue.front() {
            let fd = if self.sent == 0 {
                front.fd.as_ref()
            } else {
                None
            };
            match send(&front.bytes[self.sent..], fd) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
                Ok(n) => {
                    progress = true;
                    self.sent += n.min(8 - self.sent);
                    if self.sent == 8 {
                        self.sent = 0;
                        self.queue.pop_front();
                        done += 1;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        if self.queue.is_empty() {
            self.stalled_since = None;
        } else if progress || self.stalled_since.is_none() {
            self.stalled_since = Some(now);
        }
        Ok(done)
    }

    /// When this client will have been stuck for `timeout`, if it is stuck.
    pub fn deadline(&self, timeout: Duration) -> Option<Instant> {
        self.stalled_since.map(|t| t + timeout)
    }

    /// Pending messages and no progress for at least `timeout`.
    pub fn is_stalled(&self, now: Instant, timeout: Duration) -> bool {
        self.deadline(timeout).is_some_and(|d| now >= d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn would_block() -> io::Error {
        io::Error::from(io::ErrorKind::WouldBlock)
    }

    #[test]
    fn sends_in_order_with_fds() {
        let mut o = Outbox::new(8);
        o.push(1i64.to_le_bytes(), None).unwrap();
        o.push((-1i64).to_le_bytes(), Some(7)).unwrap();
        let mut wire = Vec::new();
        let n = o
            .flush(Instant::now(), |b, fd| {
                wire.push((b.to_vec(), fd.copied()));
                Ok(b.len())
            })
            .unwrap();
        assert_eq!(n, 2);
        assert_eq!(wire[0], (1i64.to_le_bytes().to_vec(), None));
        assert_eq!(wire[1], (vec![0xff; 8], Some(7)));
        assert!(o.is_empty());
        assert_eq!(o.deadline(Duration::from_secs(1)), None);
    }

    #[test]
    fn partial_send_finishes_without_fd() {
        let mut o = Outbox::new(8);
        o.push(0x0102_0304_0506_0708i64.to_le_bytes(), Some(3))
            .unwrap();
        let mut calls = Vec::new();
        let mut budget = [3usize, 0, 5].into_iter();
        let t0 = Instant::now();
        let send = |b: &[u8], fd: Option<&i32>, calls: &mut Vec<(usize, Option<i32>)>, n| {
            calls.push((b.len(), fd.copied()));
            if n == 0 {
                Err(would_block())
            } else {
                Ok(n)
            }
        };
        o.flush(t0, |b, fd| send(b, fd, &mut calls, budget.next().unwrap()))
            .unwrap();
        assert_eq!(o.len(), 1);
        o.flush(t0, |b, fd| send(b, fd, &mut calls, budget.next().unwrap()))
            .unwrap();
        assert_eq!(calls, vec![(8, Some(3)), (5, None), (5, None)]);
        assert!(o.is_empty());
    }

    #[test]
    fn backlog_is_bounded() {
        let mut o = Outbox::new(2);
        o.push([0; 8], None::<i32>).unwrap();
        o.push([0; 8], None).unwrap();
        assert_eq!(o.push([0; 8], None), Err(Overflow));
        assert_eq!(o.len(), 2);
    }

    #[test]
    fn stall_clock_runs_only_without_progress() {
        let timeout = Duration::from_millis(100);
        let t0 = Instant::now();
        let mut o = Outbox::new(8);
        for _ in 0..3 {
            o.push([0; 8], None::<i32>).unwrap();
        }
        // Socket full from the start: the clock starts.
        o.flush(t0, |_, _| Err(would_block())).unwrap();
        assert_eq!(o.deadline(timeout), Some(t0 + timeout));
        // Still nothing at t0+50: the clock keeps its start.
        o.flush(t0 + timeout / 2, |_, _| Err(would_block()))
            .unwrap();
        assert!(!o.is_stalled(t0 + timeout / 2, timeout));
        assert!(o.is_stalled(t0 + timeout, timeout));
        // One message goes out at t0+90: the clock restarts there.
        let mut first = true;
        let t1 = t0 + Duration::from_millis(90);
        o.flush(t1, |b, _| {
            if std::mem::take(&mut first) {
                Ok(b.len())
            } else {
                Err(would_block())
            }
        })
        .unwrap();
        assert_eq!(o.len(), 2);
        assert!(!o.is_stalled(t0 + timeout, timeout));
        assert!(o.is_stalled(t1 + timeout, timeout));
        // Drained: no deadline at all.
        o.flush(t1, |b, _| Ok(b.len())).unwrap();
        assert_eq!(o.deadline(timeout), None);
    }

    #[test]
    fn hard_errors_are_returned() {
        let mut o = Outbox::new(8);
        o.push([0; 8], None::<i32>).unwrap();
        let e = o
            .flush(Instant::now(), |_, _| {
                Err(io::Error::from(io::ErrorKind::BrokenPipe))
            })
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::BrokenPipe);
        let e = o.flush(Instant::now(), |_, _| Ok(0)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WriteZero);
    }
}
