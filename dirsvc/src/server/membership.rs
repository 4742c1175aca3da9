//! Membership: joins, heartbeats, failures, leaves and session epochs.

use fabric::layout::{Header, NodeState};
use fabric::shm::SharedMem;
use flatfs::BlockDevice;

use super::{Directory, Event, Peer, Poll};

impl<D: BlockDevice> Directory<D> {
    /// Joins, leaves and heartbeat checks. `now_ns` is a monotonic clock.
    /// Cheap, but not needed on every spin: the kernel runs it every few
    /// tens of microseconds and [`Directory::serve`] in between.
    pub fn membership(&mut self, mem: &(impl SharedMem + ?Sized), now_ns: u64) -> Poll {
        self.now_ns = self.now_ns.max(now_ns);
        let h = Header::new(mem, self.layout);
        let mut out = Poll::default();
        // Before the node states: a failed node that rejoins is dropped
        // (its fence answered) before its join is looked at.
        self.fences(mem, now_ns, &mut out);
        for node in 1..=self.layout.max_nodes {
            let i = (node - 1) as usize;
            match h.node_state(node) {
                Some(NodeState::Joining) => {
                    // A node that restarted before its heartbeat timed out:
                    // tear its previous life down first.
                    if self.peers[i].member {
                        self.peers[i].member = false;
                        self.lose(mem, node);
                    }
                    // Its frames may still be mapped by others until their
                    // acks arrive: admit it only when nothing uses them.
                    if self.pages.holds_frames_of(node as u8) {
                        continue;
                    }
                    // Drop whatever the previous session left behind.
                    h.reset_channel(node);
                    let p = &mut self.peers[i];
                    *p = Peer::new(&self.layout, node);
                    p.member = true;
                    p.last_hb = h.node_heartbeat(node);
                    p.last_hb_change_ns = now_ns;
                    let epoch = h.next_epoch();
                    h.set_node_epoch(node, epoch);
                    h.set_node_state(node, NodeState::Up);
                    out.events.push(Event::Joined { node, epoch });
                }
                Some(NodeState::Up) if self.peers[i].member => {
                    let hb = h.node_heartbeat(node);
                    let p = &mut self.peers[i];
                    if hb != p.last_hb {
                        p.last_hb = hb;
                        p.last_hb_change_ns = now_ns;
                    } else if now_ns.saturating_sub(p.last_hb_change_ns)
                        > self.cfg.heartbeat_timeout_ns
                    {
                        let silent_ms = (now_ns - p.last_hb_change_ns) / 1_000_000;
                        p.member = false;
                        h.set_node_state(node, NodeState::Failed);
                        out.events.push(Event::Failed { node, silent_ms });
                        self.failed(mem, node, &mut out);
                    }
                }
                Some(NodeState::Left) if self.peers[i].member => {
                    self.peers[i].member = false;
                    out.events.push(Event::Left { node });
                    self.lose(mem, node);
                }
                _ => {}
            }
        }
        out
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
        self.page_ops.retain(|(n, _), _| *n as u32 != node);
        self.runs.forget_node(node as u8);
    }
}
