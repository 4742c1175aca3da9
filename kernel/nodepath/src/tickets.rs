//! Tickets of tasks' reads in flight (`Os::io_start`): one per I/O,
//! naming the pages it waits for; done once each of them is settled
//! (installed, failed, or given up). Pure bookkeeping, shared by the
//! single-copy path (`singlecopy/reads.rs`, pages are [`PageKey`]s) and
//! the private cache (`private/reads.rs`, pages are (inode, index)).
//!
//! Small vectors, not trees: a node has a few dozen tasks and an I/O a
//! few pages, and every allocation costs under TCG (one per ticket here).
//!
//! [`PageKey`]: fabric::proto::PageKey

use alloc::vec::Vec;

use fabric::proto::Errno;

/// A finished ticket: its result, its file, and the metadata epoch it
/// started under (the caller refreshes the file if the epoch moved
/// meanwhile, as a batch does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TicketDone {
    pub result: Result<(), Errno>,
    pub ino: u64,
    pub epoch: Option<u64>,
}

#[derive(Debug)]
struct Ticket<K> {
    id: u64,
    wait: Vec<K>,
    err: Option<Errno>,
    epoch: Option<u64>,
    ino: u64,
}

/// Pages waiting to be started with nothing in flight (a page being torn
/// down whose DIR_INV never comes, a full slot): once that lasts longer
/// than a call's give-up time, the pages fail with `Unavailable`, so a
/// task never waits for good (as a synchronous call would give up).
#[derive(Debug, Default)]
pub struct Stuck {
    since: Option<u64>,
}

impl Stuck {
    /// Look at an engine with `in_flight` reads out and `waiting` pages
    /// to start, at `now`: true (logged) once pages have waited with
    /// nothing in flight for longer than `timeout_ns`; the caller fails
    /// them.
    pub fn give_up(&mut self, in_flight: usize, waiting: usize, now: u64, timeout_ns: u64) -> bool {
        let stuck = in_flight == 0 && waiting > 0;
        if self.expired(stuck, now, timeout_ns) {
            log::warn!("{waiting} page reads could not start: given up");
            return true;
        }
        false
    }

    /// [`Stuck::give_up`] for an engine whose `waiting` pages to start
    /// are `todo`: the pages given up (taken out of `todo`; the caller
    /// fails them with `Unavailable`), or none.
    pub fn give_up_todo<C: Default>(
        &mut self,
        in_flight: usize,
        waiting: usize,
        todo: &mut C,
        now: u64,
        timeout_ns: u64,
    ) -> C {
        if self.give_up(in_flight, waiting, now, timeout_ns) {
            core::mem::take(todo)
        } else {
            C::default()
        }
    }

    /// Look at the engine now: `stuck` (pages wait, nothing in flight).
    /// True once it has been stuck for longer than `timeout_ns`.
    pub fn expired(&mut self, stuck: bool, now: u64, timeout_ns: u64) -> bool {
        if !stuck {
            self.since = None;
            return false;
        }
        let since = *self.since.get_or_insert(now);
        if now.saturating_sub(since) > timeout_ns {
            self.since = None;
            return true;
        }
        false
    }
}

/// The open tickets.
#[derive(Debug)]
pub struct Tickets<K> {
    next: u64,
    open: Vec<Ticket<K>>,
    started: u64,
    /// A ticket stopped waiting for a page since [`Tickets::take_changed`].
    changed: bool,
}

impl<K> Default for Tickets<K> {
    fn default() -> Self {
        Tickets {
            next: 0,
            open: Vec::new(),
            started: 0,
            changed: false,
        }
    }
}

impl<K: PartialEq + Copy> Tickets<K> {
    /// A ticket for an I/O of `ino` waiting for the pages `wait` (not
    /// none; a page twice counts once).
    pub fn open(&mut self, ino: u64, mut wait: Vec<K>, epoch: Option<u64>) -> u64 {
        self.next += 1;
        self.started += 1;
        let mut i = 0;
        while i < wait.len() {
            if wait[..i].contains(&wait[i]) {
                wait.swap_remove(i);
            } else {
                i += 1;
            }
        }
        let w = wait;
        self.open.push(Ticket {
            id: self.next,
            wait: w,
            err: None,
            epoch,
            ino,
        });
        self.next
    }

    /// Page `key` is settled (`err`: it failed): every ticket waiting for
    /// it stops waiting.
    pub fn settled(&mut self, key: &K, err: Option<Errno>) {
        for t in self.open.iter_mut() {
            if let Some(p) = t.wait.iter().position(|k| k == key) {
                t.wait.swap_remove(p);
                self.changed = true;
                if let Some(e) = err {
                    t.err.get_or_insert(e);
                }
            }
        }
    }

    /// Does an open ticket wait for `key`?
    pub fn wanted(&self, key: &K) -> bool {
        self.open.iter().any(|t| t.wait.contains(key))
    }

    /// Ticket `id`'s result once it waits for nothing (it is then
    /// forgotten); `None` while it waits; an unknown ticket is `Invalid`.
    pub fn take(&mut self, id: u64) -> Option<TicketDone> {
        let Some(i) = self.open.iter().position(|t| t.id == id) else {
            return Some(TicketDone {
                result: Err(Errno::Invalid),
                ino: 0,
                epoch: None,
            });
        };
        if !self.open[i].wait.is_empty() {
            return None;
        }
        let t = self.open.swap_remove(i);
        Some(TicketDone {
            result: t.err.map_or(Ok(()), Err),
            ino: t.ino,
            epoch: t.epoch,
        })
    }

    /// Forget ticket `id`; true if no ticket is left open.
    pub fn cancel(&mut self, id: u64) -> bool {
        if let Some(i) = self.open.iter().position(|t| t.id == id) {
            self.open.swap_remove(i);
        }
        self.open.is_empty()
    }

    /// Did a ticket stop waiting for a page since the last call (so one
    /// may be done)? The executor polls its tickets only then.
    /// No ticket open?
    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    pub fn take_changed(&mut self) -> bool {
        core::mem::take(&mut self.changed)
    }

    /// Tickets opened since boot.
    pub fn started(&self) -> u64 {
        self.started
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(k: &[u32]) -> Vec<u32> {
        k.to_vec()
    }

    #[test]
    fn a_ticket_is_done_once_every_page_settled() {
        let mut t = Tickets::default();
        let a = t.open(7, set(&[1, 2]), Some(3));
        let b = t.open(8, set(&[2]), None);
        assert_eq!(t.take(a), None);
        assert!(!t.take_changed());
        t.settled(&2, None);
        assert!(t.take_changed());
        assert!(!t.take_changed(), "taken");
        assert_eq!(
            t.take(b),
            Some(TicketDone {
                result: Ok(()),
                ino: 8,
                epoch: None
            })
        );
        assert!(t.wanted(&1));
        t.settled(&1, Some(Errno::Io));
        assert!(!t.wanted(&1));
        assert_eq!(
            t.take(a),
            Some(TicketDone {
                result: Err(Errno::Io),
                ino: 7,
                epoch: Some(3)
            })
        );
        assert_eq!(t.take(a).map(|d| d.result), Some(Err(Errno::Invalid)));
        assert_eq!(t.started(), 2);
    }

    #[test]
    fn being_stuck_expires_after_the_timeout_only_without_progress() {
        let mut s = Stuck::default();
        assert!(!s.expired(true, 100, 50));
        assert!(!s.expired(true, 150, 50));
        assert!(!s.expired(false, 151, 50), "progress resets it");
        assert!(!s.expired(true, 160, 50));
        assert!(s.expired(true, 211, 50));
        assert!(!s.expired(true, 212, 50), "and starts over");
    }

    #[test]
    fn the_first_error_stays_and_cancel_says_when_none_is_left() {
        let mut t = Tickets::default();
        let a = t.open(1, set(&[1, 2]), None);
        let b = t.open(1, set(&[3, 3]), None);
        t.settled(&3, None);
        assert_eq!(
            t.take(b).map(|d| d.result),
            Some(Ok(())),
            "a page twice counts once"
        );
        let b = t.open(1, set(&[3]), None);
        t.settled(&1, Some(Errno::Refused));
        t.settled(&2, Some(Errno::Io));
        assert_eq!(t.take(a).map(|d| d.result), Some(Err(Errno::Refused)));
        assert!(t.cancel(b));
        assert!(!t.wanted(&3));
    }
}
