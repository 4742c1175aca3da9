//! Membership: joins, heartbeats, failures, leaves and session epochs,
//! and the fencing of failed nodes (`fencing.rs`).
//!
//! [`Members`] owns who is a member, each member's last heartbeat, the
//! fences asked for, and the clock of the last pass; everything else a
//! lost node held (pages, fills, reads, fsyncs, locks, replicas) is
//! dropped by [`Directory::lose`] through its owners. Called by the
//! serving loop ([`Directory::membership`]) and, for
//! [`Members::is_member`], by whatever publishes to a node.

mod fencing;

use alloc::vec::Vec;

use fabric::layout::{Header, NodeState};
use fabric::ring::RingError;
use fabric::shm::SharedMem;
use flatfs::BlockDevice;

use super::{Directory, Event, Poll};

/// One node as membership sees it.
#[derive(Debug, Default, Clone, Copy)]
struct Member {
    up: bool,
    last_hb: u64,
    last_hb_change_ns: u64,
}

/// Who is a member, heartbeats, fences (index `node - 1`), and the clock
/// of the last pass: owned here, changed only by this module and
/// `fencing.rs`; everyone else asks [`Members::is_member`] (and the
/// append locks [`Members::now_ns`]).
pub(super) struct Members {
    nodes: Vec<Member>,
    /// Failed nodes waiting for their fence (`fencing.rs`).
    fences: fencing::Fences,
    /// The clock of the last [`Directory::membership`] (append leases).
    now_ns: u64,
}

impl Members {
    /// Nodes `1..=max_nodes`, none a member.
    pub(super) fn new(max_nodes: u32) -> Members {
        Members {
            nodes: alloc::vec![Member::default(); max_nodes as usize],
            fences: fencing::Fences::default(),
            now_ns: 0,
        }
    }

    /// Is `node` a member (joined, and not failed or left since)?
    pub(super) fn is_member(&self, node: u32) -> bool {
        self.nodes
            .get((node as usize).wrapping_sub(1))
            .is_some_and(|m| m.up)
    }

    /// The clock of the last pass.
    pub(super) fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// `node` is no member any more; true if it was one.
    fn drop_member(&mut self, node: u32) -> bool {
        match self.nodes.get_mut((node as usize).wrapping_sub(1)) {
            Some(m) if m.up => {
                m.up = false;
                true
            }
            _ => false,
        }
    }
}

impl<D: BlockDevice> Directory<D> {
    /// Joins, leaves and heartbeat checks. `now_ns` is a monotonic clock.
    /// Cheap, but not needed on every spin: the kernel runs it every few
    /// tens of microseconds and [`Directory::serve`] in between.
    pub fn membership(&mut self, mem: &(impl SharedMem + ?Sized), now_ns: u64) -> Poll {
        self.members.now_ns = self.members.now_ns.max(now_ns);
        let h = Header::new(mem, self.layout);
        let mut out = Poll::default();
        // Before the node states: a failed node that rejoins is dropped
        // (its fence answered) before its join is looked at.
        self.fences(mem, now_ns, &mut out);
        for node in 1..=self.layout.max_nodes {
            match h.node_state(node) {
                Some(NodeState::Joining) => self.joining(mem, node, now_ns, &mut out),
                Some(NodeState::Up) if self.members.is_member(node) => {
                    self.heartbeat(mem, node, now_ns, &mut out)
                }
                Some(NodeState::Left) if self.members.drop_member(node) => {
                    out.events.push(Event::Left { node });
                    self.lose(mem, node);
                }
                _ => {}
            }
        }
        out
    }

    /// `node` asks to join: admit it once nothing uses its frames.
    fn joining(&mut self, mem: &(impl SharedMem + ?Sized), node: u32, now_ns: u64, out: &mut Poll) {
        let h = Header::new(mem, self.layout);
        // A node that restarted before its heartbeat timed out: tear its
        // previous life down first.
        if self.members.drop_member(node) {
            self.lose(mem, node);
        }
        // Its frames may still be mapped by others until their acks
        // arrive: admit it only when nothing uses them.
        if self.pages.holds_frames_of(node as u8) {
            return;
        }
        // Drop whatever the previous session left behind.
        h.reset_channel(node);
        self.links.reset(&self.layout, node);
        self.inval.reset(node);
        if let Some(m) = self.members.nodes.get_mut((node - 1) as usize) {
            *m = Member {
                up: true,
                last_hb: h.node_heartbeat(node),
                last_hb_change_ns: now_ns,
            };
        }
        let epoch = h.next_epoch();
        h.set_node_epoch(node, epoch);
        h.set_node_state(node, NodeState::Up);
        out.events.push(Event::Joined { node, epoch });
    }

    /// Member `node` is up: note a changed heartbeat, or fail it once its
    /// heartbeat stood still past the timeout.
    fn heartbeat(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        node: u32,
        now_ns: u64,
        out: &mut Poll,
    ) {
        let h = Header::new(mem, self.layout);
        let hb = h.node_heartbeat(node);
        let timeout = self.cfg.heartbeat_timeout_ns;
        let Some(m) = self.members.nodes.get_mut((node - 1) as usize) else {
            return;
        };
        if hb != m.last_hb {
            m.last_hb = hb;
            m.last_hb_change_ns = now_ns;
        } else if now_ns.saturating_sub(m.last_hb_change_ns) > timeout {
            let silent_ms = (now_ns - m.last_hb_change_ns) / 1_000_000;
            m.up = false;
            h.set_node_state(node, NodeState::Failed);
            out.events.push(Event::Failed { node, silent_ms });
            self.failed(mem, node, out);
        }
    }

    /// `node`'s rings are corrupt: fail it (its pages are torn down once
    /// it is fenced, `fencing.rs`).
    pub(super) fn corrupt(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        node: u32,
        error: RingError,
        out: &mut Poll,
    ) {
        self.members.drop_member(node);
        Header::new(mem, self.layout).set_node_state(node, NodeState::Failed);
        out.events.push(Event::Corrupt { node, error });
        self.failed(mem, node, out);
    }

    /// `node` is gone (failed, left, restarted): drop it from the page
    /// directory and forget its unanswered page requests.
    pub(super) fn lose(&mut self, mem: &(impl SharedMem + ?Sized), node: u32) {
        self.cancel_fills(node);
        self.cancel_reads(node);
        self.dax_reclaim(mem, node);
        self.cancel_fsyncs(node);
        self.drop_append_locks(node);
        self.forget_replica_node(mem, node);
        let a = self.pages.node_failed(node as u8);
        self.run(mem, a);
        self.requests.forget_node(node as u8);
    }
}
