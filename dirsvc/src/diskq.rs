//! The directory's disk queue: page fills waiting for the device, fills in
//! flight, and what a completion means. Pure bookkeeping; the serving loop
//! ([`crate::server`]) moves the bytes.
//!
//! A READ miss makes the page directory reserve the page (E, filled by the
//! directory) and ask for a fill ([`crate::pagedir::Action::Fill`]). With
//! an asynchronous device the fill becomes a [`Fill`] pushed here: it waits
//! in [`DiskQueue::push`] order until fewer than `depth` reads are in
//! flight, goes out ([`DiskQueue::next_submit`]), and its completion
//! ([`DiskQueue::complete`]) hands the fill back so the loop can check the
//! block, copy it into the requester's frame and commit E -> O. Meanwhile
//! the loop serves everything else: other nodes' lookups of cached pages,
//! acks, file requests. A request for the page being filled gets `Retry`
//! from the page directory, as before. A file-server read over the rings
//! (`private` mode's miss) queues one [`Fill`] per block with
//! [`Dest::Read`], in the same queue: it is ordered, cancelled and
//! counted like a page fill (`server/fileread.rs` gathers its blocks).
//!
//! Ordering: a fill only reads. Its requester may fail meanwhile
//! ([`DiskQueue::cancel_node`]: queued fills are dropped, fills in flight
//! are remembered as cancelled and their completion is discarded: the
//! frame belongs to the node again, or to nobody). A request that changes
//! a file's blocks (write, truncate, unlink) must not overtake a read of
//! them in flight: the loop first waits for every fill of that file
//! ([`DiskQueue::busy_ino`]) or of every file ([`DiskQueue::is_idle`]).
//! Writes go through the write queue; a fill of a block with a write
//! pending takes the write's bytes instead of reading the device.

use alloc::collections::{BTreeMap, VecDeque};

use crate::pagedir::{Entry, Phase};
use fabric::proto::PageKey;

/// Where a fill's block goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dest {
    /// A single-copy page fill: the requester's frame (global frame
    /// number).
    Frame(u64),
    /// A block of an asynchronous file-server read (`private` mode's
    /// misses over the rings): the directory's id of that read, which
    /// gathers its blocks and answers once all arrived.
    Read(u64),
}

/// One disk read of the directory: device block `lba` into the
/// requester's frame (a page fill) or into a file-server read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fill {
    /// The page (for a file-server read: the file and the block's number
    /// in it).
    pub key: PageKey,
    /// Where the block goes.
    pub dest: Dest,
    /// The requester.
    pub node: u8,
    /// Its request's tag.
    pub tag: u32,
    /// The device block.
    pub lba: u64,
    /// Bytes of file data in the block (the rest of the page is zeros).
    pub len: usize,
}

impl Fill {
    /// Is the page directory's entry still the reservation this page fill
    /// was started for (same requester, frame and request)? If not, the
    /// requester failed or gave the page up meanwhile, and the bytes must
    /// not touch the frame. A file-server read's block is never a page's.
    pub fn wanted(&self, entry: Option<Entry>) -> bool {
        let Dest::Frame(gfn) = self.dest else {
            return false;
        };
        entry.is_some_and(|e| {
            e.owner == self.node
                && e.gfn == gfn
                && e.phase
                    == Phase::Exclusive {
                        by_dir: true,
                        tag: self.tag,
                    }
        })
    }
}

/// A fill in flight.
#[derive(Debug, Clone, Copy)]
enum Slot {
    Live(Fill),
    /// Its requester failed: the completion is discarded.
    Cancelled(Fill),
}

impl Slot {
    fn fill(&self) -> &Fill {
        match self {
            Slot::Live(f) | Slot::Cancelled(f) => f,
        }
    }
}

/// Counters of the queue.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct QueueStats {
    /// Fills pushed.
    pub pushed: u64,
    /// Reads submitted to the device.
    pub submitted: u64,
    /// Completions handed back live.
    pub completed: u64,
    /// Fills dropped or discarded because their requester failed.
    pub cancelled: u64,
    /// Most reads in flight at once.
    pub max_in_flight: u64,
    /// Times a request waited for fills in flight (ordering).
    pub barriers: u64,
    /// Page requests answered at once while reads were in flight (what
    /// a blocking directory could not do).
    pub answered_while_busy: u64,
    /// Page fills whose block changed while they were in flight (a write,
    /// truncation or unlink of their file went ahead without waiting):
    /// discarded, their readers told to retry.
    pub stale: u64,
}

/// Fills waiting and in flight.
#[derive(Debug)]
pub struct DiskQueue {
    depth: usize,
    next_id: u64,
    waiting: VecDeque<(u64, Fill)>,
    in_flight: BTreeMap<u64, Slot>,
    stats: QueueStats,
}

impl DiskQueue {
    /// A queue keeping at most `depth` reads in flight (at least 1).
    pub fn new(depth: usize) -> DiskQueue {
        DiskQueue {
            depth: depth.max(1),
            next_id: 1,
            waiting: VecDeque::new(),
            in_flight: BTreeMap::new(),
            stats: QueueStats::default(),
        }
    }

    /// Most reads in flight at once.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// Queue a fill; returns its id.
    pub fn push(&mut self, fill: Fill) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.waiting.push_back((id, fill));
        self.stats.pushed += 1;
        id
    }

    /// The next fill to submit (id and device block), if one waits and
    /// fewer than `depth` are in flight; it counts as in flight from now.
    pub fn next_submit(&mut self) -> Option<(u64, u64)> {
        if self.in_flight.len() >= self.depth {
            return None;
        }
        let (id, f) = self.waiting.pop_front()?;
        self.in_flight.insert(id, Slot::Live(f));
        self.stats.submitted += 1;
        self.stats.max_in_flight = self.stats.max_in_flight.max(self.in_flight.len() as u64);
        Some((id, f.lba))
    }

    /// The device refused to start read `id`: it is no longer in flight.
    /// Returns the fill if it is still live (to fail it).
    pub fn submit_failed(&mut self, id: u64) -> Option<Fill> {
        self.complete(id)
    }

    /// Read `id` completed. Returns the fill if its requester is still
    /// waiting; `None` for a cancelled fill or an unknown id (a device
    /// that completes twice or invents ids is ignored).
    pub fn complete(&mut self, id: u64) -> Option<Fill> {
        match self.in_flight.remove(&id)? {
            Slot::Live(f) => {
                self.stats.completed += 1;
                Some(f)
            }
            Slot::Cancelled(_) => None,
        }
    }

    /// `node` failed or left: drop its waiting fills and cancel those in
    /// flight. Returns how many were affected.
    pub fn cancel_node(&mut self, node: u8) -> usize {
        let before = self.waiting.len();
        self.waiting.retain(|(_, f)| f.node != node);
        let mut n = before - self.waiting.len();
        for s in self.in_flight.values_mut() {
            if let Slot::Live(f) = *s {
                if f.node == node {
                    *s = Slot::Cancelled(f);
                    n += 1;
                }
            }
        }
        self.stats.cancelled += n as u64;
        n
    }

    /// Does a file-read block ([`Dest::Read`]) of file `ino` wait or fly
    /// (cancelled ones included: the device is still reading the block)?
    pub fn busy_ino_reads(&self, ino: u64) -> bool {
        let read = |f: &Fill| f.key.ino == ino && matches!(f.dest, Dest::Read(_));
        self.waiting.iter().any(|(_, f)| read(f)) || self.in_flight.values().any(|s| read(s.fill()))
    }

    /// Does any fill of file `ino` wait or fly (cancelled ones included:
    /// the device is still reading the block)?
    pub fn busy_ino(&self, ino: u64) -> bool {
        self.waiting.iter().any(|(_, f)| f.key.ino == ino)
            || self.in_flight.values().any(|s| s.fill().key.ino == ino)
    }

    /// Nothing waits and nothing flies.
    pub fn is_idle(&self) -> bool {
        self.waiting.is_empty() && self.in_flight.is_empty()
    }

    /// Reads in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Fills waiting for room in the device.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Count one page request answered at once while reads were in flight.
    pub fn count_answered_while_busy(&mut self) {
        self.stats.answered_while_busy += 1;
    }

    /// Count one page fill found stale at its completion.
    pub fn count_stale(&mut self) {
        self.stats.stale += 1;
    }

    /// Count one request that waited for fills (see the module doc).
    pub fn count_barrier(&mut self) {
        self.stats.barriers += 1;
    }

    /// Counters.
    pub fn stats(&self) -> QueueStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(node: u8, ino: u64, idx: u64) -> Fill {
        Fill {
            key: PageKey { ino, idx },
            dest: Dest::Frame(100 + idx),
            node,
            tag: idx as u32,
            lba: 1000 + idx,
            len: 4096,
        }
    }

    #[test]
    fn keeps_at_most_depth_in_flight_in_push_order() {
        let mut q = DiskQueue::new(2);
        let ids: Vec<u64> = (0..4).map(|i| q.push(fill(1, 1, i))).collect();
        assert_eq!(q.next_submit(), Some((ids[0], 1000)));
        assert_eq!(q.next_submit(), Some((ids[1], 1001)));
        assert_eq!(q.next_submit(), None, "depth 2 reached");
        assert_eq!((q.in_flight(), q.waiting()), (2, 2));
        // The second completes first: room for exactly one more.
        assert_eq!(q.complete(ids[1]), Some(fill(1, 1, 1)));
        assert_eq!(q.next_submit(), Some((ids[2], 1002)));
        assert_eq!(q.next_submit(), None);
        assert_eq!(q.complete(ids[0]), Some(fill(1, 1, 0)));
        assert_eq!(q.complete(ids[2]), Some(fill(1, 1, 2)));
        assert_eq!(q.next_submit(), Some((ids[3], 1003)));
        assert_eq!(q.complete(ids[3]), Some(fill(1, 1, 3)));
        assert!(q.is_idle());
        let s = q.stats();
        assert_eq!(
            (s.pushed, s.submitted, s.completed, s.max_in_flight),
            (4, 4, 4, 2)
        );
    }

    #[test]
    fn unknown_and_repeated_completions_are_ignored() {
        let mut q = DiskQueue::new(4);
        let id = q.push(fill(1, 1, 0));
        assert_eq!(q.complete(id), None, "not submitted yet");
        q.next_submit();
        assert!(q.complete(id).is_some());
        assert_eq!(q.complete(id), None, "completed twice");
        assert_eq!(q.complete(999), None, "invented id");
        assert!(q.is_idle());
    }

    #[test]
    fn a_failed_node_loses_its_fills_waiting_and_in_flight() {
        let mut q = DiskQueue::new(1);
        let a = q.push(fill(1, 1, 0));
        let b = q.push(fill(2, 1, 1));
        let c = q.push(fill(1, 2, 2));
        assert_eq!(q.next_submit(), Some((a, 1000)));
        assert_eq!(q.cancel_node(1), 2, "one in flight, one waiting");
        // The device still reads the cancelled block: the file is busy.
        assert!(q.busy_ino(1));
        assert!(!q.busy_ino(2), "node 1's fill of inode 2 was dropped");
        assert_eq!(
            q.next_submit(),
            None,
            "the cancelled read still occupies the device"
        );
        assert_eq!(q.complete(a), None, "discarded");
        assert_eq!(q.next_submit(), Some((b, 1001)));
        assert_eq!(q.complete(b), Some(fill(2, 1, 1)));
        assert_eq!(q.next_submit(), None, "c was dropped");
        assert!(q.is_idle());
        assert_eq!(q.stats().cancelled, 2);
        let _ = c;
    }

    #[test]
    fn busy_ino_sees_waiting_and_flying_fills() {
        let mut q = DiskQueue::new(1);
        assert!(!q.busy_ino(1));
        let a = q.push(fill(1, 1, 0));
        assert!(q.busy_ino(1), "waiting");
        q.next_submit();
        assert!(q.busy_ino(1), "in flight");
        assert!(!q.busy_ino(2));
        q.complete(a);
        assert!(!q.busy_ino(1));
    }

    #[test]
    fn submit_failure_frees_the_slot() {
        let mut q = DiskQueue::new(1);
        let a = q.push(fill(1, 1, 0));
        let b = q.push(fill(1, 1, 1));
        q.next_submit();
        assert_eq!(q.submit_failed(a), Some(fill(1, 1, 0)));
        assert_eq!(q.next_submit(), Some((b, 1001)));
    }

    #[test]
    fn a_fill_is_wanted_only_by_its_own_reservation() {
        let f = fill(2, 1, 3);
        let e = Entry {
            owner: 2,
            gfn: 103,
            sharers: 0,
            dirty: false,
            phase: Phase::Exclusive {
                by_dir: true,
                tag: f.tag,
            },
        };
        assert!(f.wanted(Some(e)));
        assert!(!f.wanted(None), "entry gone: the requester failed");
        assert!(!f.wanted(Some(Entry { owner: 3, ..e })));
        assert!(!f.wanted(Some(Entry { gfn: 7, ..e })));
        assert!(!f.wanted(Some(Entry {
            phase: Phase::Exclusive {
                by_dir: true,
                tag: 99
            },
            ..e
        })));
        assert!(!f.wanted(Some(Entry {
            phase: Phase::Owned,
            ..e
        })));
        let read = Fill {
            dest: Dest::Read(103),
            ..f
        };
        assert!(!read.wanted(Some(e)), "a file read's block is no page's");
        assert!(!f.wanted(Some(Entry {
            phase: Phase::Exclusive {
                by_dir: false,
                tag: f.tag
            },
            ..e
        })));
    }
}
