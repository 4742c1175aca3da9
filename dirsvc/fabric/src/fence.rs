//! Fencing of failed nodes: the words of the protocol and both sides'
//! pure decisions.
//!
//! The directory declares a node failed on a heartbeat timeout, but a
//! node that was only paused (a stopped QEMU, a long host stall) can come
//! back and store into frames of the shared region. Before the directory
//! reuses any frame the node owned or mapped, that node must be unable to
//! touch the region again:
//!
//! 1. The directory writes the failed session's epoch into the node's
//!    `fence_request` word ([`Header::set_fence_request`]) and keeps every
//!    frame of that node, and every frame it mapped, out of use.
//! 2. A fencer on the host (the ivshmem server, which has the region's
//!    file open; with `--doorbell off` the launcher starts it alone) sees
//!    the request ([`pending`]), kills that instance's QEMU, waits until
//!    the process is gone and writes the epoch into `fence_done`
//!    ([`Header::set_fence_done`]).
//! 3. The directory sees `fence_done == fence_request`, withdraws the
//!    request and only then tears the node's pages down (frames reused).
//!
//! A node that rejoins (`Joining` in its state word) has dropped every
//! mapping first (see [`standing`]): the directory takes that as the
//! confirmation too. Without either, the frames stay out of use for good
//! (the directory logs it once the fence timeout passes): never reused
//! without a confirmation. On real CXL hardware the fencer is the fabric
//! manager, which revokes the host's access to the shared memory device.
//!
//! Every word has one writer (QEMU's single-threaded TCG does not make
//! `lock cmpxchg` atomic across instances). The fencer accesses the region
//! through the file (`pread`/`pwrite`), whose copies are not guaranteed to
//! be single accesses: it acts only on a request it read twice alike, and
//! the directory accepts only a confirmation equal to its request (a torn
//! write of the fencer's value equals it only once complete).

use alloc::vec::Vec;

use crate::layout::{Header, NodeState};
use crate::shm::SharedMem;

/// What a node's own words say about its session of epoch `epoch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Up in this epoch: it may touch the region.
    Member,
    /// The directory declared it failed: stop every store, drop every
    /// mapping before anything else.
    Failed,
    /// Its state or epoch moved on (a restarted directory formatted the
    /// region, or another session took the id): the same as failed.
    Stale,
}

/// The standing of node `node`'s session `epoch`.
pub fn standing<M: SharedMem + ?Sized>(h: &Header<'_, M>, node: u32, epoch: u64) -> Standing {
    match h.node_state(node) {
        Some(NodeState::Up) if h.node_epoch(node) == epoch => Standing::Member,
        Some(NodeState::Failed) => Standing::Failed,
        _ => Standing::Stale,
    }
}

/// The fences asked for and not confirmed yet: (node, epoch). The fencer
/// calls it twice and acts on what both calls agree on (see the module
/// documentation).
pub fn pending<M: SharedMem + ?Sized>(h: &Header<'_, M>) -> Vec<(u32, u64)> {
    (1..=h.layout().max_nodes)
        .filter_map(|node| {
            let want = h.fence_request(node);
            (want != 0 && h.fence_done(node) != want).then_some((node, want))
        })
        .collect()
}

/// Where the directory stands with one failed node's fence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FenceCheck {
    /// No answer yet.
    Waiting,
    /// The fencer confirmed the epoch fenced.
    Confirmed,
    /// The node itself asked to rejoin: it dropped its mappings first.
    Rejoining,
}

/// The directory's check of node `node`'s fence for session `epoch`.
pub fn check<M: SharedMem + ?Sized>(h: &Header<'_, M>, node: u32, epoch: u64) -> FenceCheck {
    if h.fence_done(node) == epoch {
        FenceCheck::Confirmed
    } else if h.node_state(node) == Some(NodeState::Joining) {
        FenceCheck::Rejoining
    } else {
        FenceCheck::Waiting
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Layout;
    use crate::shm::HeapShm;

    fn region() -> (HeapShm, Layout) {
        let mem = HeapShm::new(4 << 20);
        let l = Layout::compute(mem.size(), 3).expect("layout");
        l.format(&*mem, 0);
        (mem, l)
    }

    #[test]
    fn a_request_is_pending_until_its_epoch_is_confirmed() {
        let (mem, l) = region();
        let h = Header::new(&*mem, l);
        assert!(pending(&h).is_empty());
        h.set_fence_request(2, 7);
        assert_eq!(pending(&h), vec![(2, 7)]);
        assert_eq!(check(&h, 2, 7), FenceCheck::Waiting);
        // An older confirmation does not answer a newer request.
        h.set_fence_done(2, 6);
        assert_eq!(pending(&h), vec![(2, 7)]);
        assert_eq!(check(&h, 2, 7), FenceCheck::Waiting);
        h.set_fence_done(2, 7);
        assert!(pending(&h).is_empty());
        assert_eq!(check(&h, 2, 7), FenceCheck::Confirmed);
        // Withdrawn: nothing to do for the fencer.
        h.set_fence_request(2, 0);
        assert!(pending(&h).is_empty());
    }

    #[test]
    fn a_torn_confirmation_is_not_taken() {
        let (mem, l) = region();
        let h = Header::new(&*mem, l);
        let (old, new) = (0x00ff_u64, 0x0100_u64);
        h.set_fence_done(1, old);
        h.set_fence_request(1, new);
        // Half the bytes of the new value written: neither value.
        h.set_fence_done(1, (old & !0xff) | (new & 0xff));
        assert_eq!(check(&h, 1, new), FenceCheck::Waiting);
        h.set_fence_done(1, new);
        assert_eq!(check(&h, 1, new), FenceCheck::Confirmed);
    }

    #[test]
    fn a_rejoining_node_answers_its_own_fence() {
        let (mem, l) = region();
        let h = Header::new(&*mem, l);
        h.set_node_state(3, NodeState::Failed);
        h.set_fence_request(3, 4);
        assert_eq!(check(&h, 3, 4), FenceCheck::Waiting);
        h.set_node_state(3, NodeState::Joining);
        assert_eq!(check(&h, 3, 4), FenceCheck::Rejoining);
    }

    #[test]
    fn standing_follows_state_and_epoch() {
        let (mem, l) = region();
        let h = Header::new(&*mem, l);
        h.set_node_epoch(1, 5);
        h.set_node_state(1, NodeState::Up);
        assert_eq!(standing(&h, 1, 5), Standing::Member);
        assert_eq!(standing(&h, 1, 4), Standing::Stale);
        h.set_node_state(1, NodeState::Failed);
        assert_eq!(standing(&h, 1, 5), Standing::Failed);
        // A restarted directory formatted the region.
        l.format(&*mem, 0);
        assert_eq!(standing(&h, 1, 5), Standing::Stale);
        // Invalid ids are never members.
        assert_eq!(standing(&h, 0, 0), Standing::Stale);
        assert_eq!(standing(&h, 99, 0), Standing::Stale);
    }
}
