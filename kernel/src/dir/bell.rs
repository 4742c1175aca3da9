//! The directory's use of the doorbell: sleeping, ringing the nodes it
//! answered, and the first-delivery log lines.

use dirsvc::server::Event;
use fabric::layout::Header;
use fabric::shm::RawShm;

use super::disklog::new_power_of_two;

/// The directory's use of the doorbell: sleeping and the first-delivery
/// log lines.
pub(super) struct DirBell {
    d: &'static crate::drivers::ivshmem::Doorbell,
    layout: fabric::layout::Layout,
    first_received: bool,
    first_woken: bool,
    notify_seen: u64,
    /// Invalidations taken from quiet sleepers, last logged.
    quiet_taken: u64,
}

impl DirBell {
    pub(super) fn new(
        d: &'static crate::drivers::ivshmem::Doorbell,
        layout: fabric::layout::Layout,
    ) -> Self {
        DirBell {
            d,
            layout,
            first_received: false,
            first_woken: false,
            notify_seen: 0,
            quiet_taken: 0,
        }
    }

    /// Log the invalidations taken from quietly sleeping sharers: the
    /// first, then at each power of two.
    pub(super) fn note_quiet(&mut self, s: dirsvc::server::QuietStats) {
        if new_power_of_two(&mut self.quiet_taken, s.taken) {
            log::info!(
                "doorbell: {} invalidations taken from quietly sleeping sharers without waking them ({} of their late acks dropped)",
                s.taken,
                s.absorbed
            );
        }
    }

    /// After a vector-1 doorbell: answer the nodes' echo words.
    pub(super) fn echo(&mut self, nodes: u32) {
        let n = self.d.received(fabric::doorbell::VEC_NOTIFY);
        if n != self.notify_seen {
            self.notify_seen = n;
            self.d.answer_echoes(nodes);
        }
    }

    /// After a pass: ring every node that got a notice (vector 1) or a
    /// response (vector 2) and sleeps, checking its word without a fence
    /// (owed checks are settled by [`DirBell::settle`] once due: most nodes
    /// take their answer first); and every node admitted (vector 2).
    pub(super) fn deliver(&self, p: &dirsvc::server::Poll) {
        use fabric::doorbell::{VEC_NOTIFY, VEC_RESPONSE};
        for (node, notice) in p.deliveries() {
            if (1..fabric::doorbell::ENTRIES).contains(&node) {
                self.d
                    .ring_deferred(node, if notice { VEC_NOTIFY } else { VEC_RESPONSE });
            }
        }
        for e in &p.events {
            if let Event::Joined { node, .. } = e {
                self.d.ring_node(*node, VEC_RESPONSE);
            }
        }
    }

    /// Settle the owed checks of [`DirBell::deliver`] that are due (all if
    /// `force`): a node that has taken its responses and notices needs no
    /// ring.
    pub(super) fn settle(&self, force: bool) {
        let (layout, shm) = (self.layout, self.d.region());
        self.d.settle(force, |node| {
            if !layout.valid_node(node) {
                return true;
            }
            let ch = layout.channel(node);
            ch.response.unread(shm) || ch.notify.unread(shm)
        });
    }

    /// Does every member that is up ring the directory for its requests?
    pub(super) fn members_ring(&self, h: &Header<'_, RawShm>, nodes: u32) -> bool {
        (1..=nodes).all(|k| {
            h.node_state(k) != Some(fabric::layout::NodeState::Up) || self.d.rings_directory(k)
        })
    }

    /// Halt until a doorbell, another interrupt or `deadline_ns`, unless
    /// `has_work` finds work.
    pub(super) fn sleep(&mut self, deadline_ns: u64, has_work: impl FnOnce() -> bool) {
        use crate::drivers::ivshmem::Wake;
        self.settle(true);
        let w = self.d.sleep_until_event(deadline_ns, false, has_work);
        if !self.first_received && self.d.received_total() > 0 {
            self.first_received = true;
            let s = self.d.stats();
            log::info!(
                "doorbell: first doorbell received (per vector {:?}){}",
                s.received,
                if w == Wake::Doorbell {
                    ", it woke the directory"
                } else {
                    ""
                }
            );
        }
        if w == Wake::Doorbell && !self.first_woken {
            self.first_woken = true;
            log::info!(
                "doorbell: directory woken by a doorbell for the first time (vector 0: {})",
                self.d.received(fabric::doorbell::VEC_REQUEST)
            );
        }
    }
}
