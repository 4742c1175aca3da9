//! Fencing, the directory's side (the protocol: `fabric::fence`).
//!
//! A node failed on its heartbeat (or on a corrupt ring) may only be
//! paused: if its frames, or the frames it mapped, were reused while it
//! can still run, its next store would land in another file's page. With
//! [`Config::fencing`](super::super::Config::fencing) the directory asks the
//! host's fencer to fence the failed session and keeps the node in the
//! page directory, so nothing reuses those frames, until the fencer
//! confirms or the node rejoins (it drops every mapping before it asks);
//! only then does it tear the node's pages down ([`Directory::lose`]). If
//! no confirmation comes within the fence timeout it says so once and
//! keeps waiting: frames are never reused without one.

use alloc::vec::Vec;

use fabric::fence::{self, FenceCheck};
use fabric::layout::Header;
use fabric::shm::SharedMem;
use flatfs::BlockDevice;

use super::super::{Directory, Event, Poll};

/// One failed session waiting for its fence.
#[derive(Debug, Clone, Copy)]
struct Waiting {
    node: u32,
    epoch: u64,
    /// When [`Directory::fences`] first saw it (its clock).
    asked_ns: Option<u64>,
    overdue: bool,
}

/// Failed nodes waiting for their fence.
#[derive(Debug, Default)]
pub(super) struct Fences {
    waiting: Vec<Waiting>,
}

impl<D: BlockDevice> Directory<D> {
    /// `node` was declared failed (its state word says so): without
    /// fencing drop it from the page directory now; with fencing ask for
    /// its session to be fenced and drop it once that is confirmed
    /// ([`Directory::fences`]).
    pub(super) fn failed(&mut self, mem: &(impl SharedMem + ?Sized), node: u32, out: &mut Poll) {
        if !self.cfg.fencing {
            self.lose(mem, node);
            return;
        }
        let h = Header::new(mem, self.layout);
        let epoch = h.node_epoch(node);
        h.set_fence_request(node, epoch);
        self.members.fences.waiting.retain(|w| w.node != node);
        self.members.fences.waiting.push(Waiting {
            node,
            epoch,
            asked_ns: None,
            overdue: false,
        });
        out.events.push(Event::FenceAsked { node, epoch });
    }

    /// Look at the fences asked for: a confirmed one (or a node that
    /// rejoined) is withdrawn and its node dropped from the page
    /// directory; one unanswered past the fence timeout is reported once.
    pub(super) fn fences(&mut self, mem: &(impl SharedMem + ?Sized), now_ns: u64, out: &mut Poll) {
        let mut i = 0;
        while i < self.members.fences.waiting.len() {
            let w = &mut self.members.fences.waiting[i];
            let asked = *w.asked_ns.get_or_insert(now_ns);
            let waited_ms = now_ns.saturating_sub(asked) / 1_000_000;
            let h = Header::new(mem, self.layout);
            let by_rejoin = match fence::check(&h, w.node, w.epoch) {
                FenceCheck::Waiting => {
                    if !w.overdue && now_ns.saturating_sub(asked) > self.cfg.fence_timeout_ns {
                        w.overdue = true;
                        out.events.push(Event::FenceOverdue {
                            node: w.node,
                            waited_ms,
                        });
                    }
                    i += 1;
                    continue;
                }
                FenceCheck::Confirmed => false,
                FenceCheck::Rejoining => true,
            };
            let node = w.node;
            h.set_fence_request(node, 0);
            self.members.fences.waiting.swap_remove(i);
            out.events.push(Event::Fenced {
                node,
                after_ms: waited_ms,
                by_rejoin,
            });
            self.lose(mem, node);
        }
    }

    /// Is a fence of `node` asked for and not confirmed yet?
    pub fn fence_pending(&self, node: u32) -> bool {
        self.members.fences.waiting.iter().any(|w| w.node == node)
    }
}
