//! The directory's ends of every node's four rings (request, response,
//! notify, ack), the answers and notices that did not fit yet, and what
//! was last reported as delivered ([`Poll::responded`] /
//! [`Poll::noticed`]).
//!
//! [`Links`] owns only ring positions and backlogs: who is a member is
//! `server/membership/`'s, which invalidations are outstanding is
//! `server/inval/`'s (it is told of every notice published, through
//! [`Links::flush`]'s callback). Called by dispatch (requests and acks
//! in, answers out), the invalidation manager and the replica and
//! locality notices (notices out), and membership (a fresh channel on a
//! join).
//!
//! [`Directory::respond`] and [`Directory::flush`] publish through it:
//! an answer only to a member, and each notice published is handed to
//! the invalidation manager.

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use fabric::layout::Layout;
use fabric::proto::{Desc, Raw};
use fabric::ring::{Consumer, Producer, RingError};
use fabric::shm::SharedMem;

use flatfs::BlockDevice;

use super::{Directory, Poll};

/// One node's rings, the directory's ends.
struct Link {
    req: Consumer,
    resp: Producer,
    notify: Producer,
    ack: Consumer,
    /// Responses that did not fit in the response ring yet.
    backlog: VecDeque<Desc>,
    /// Notices that did not fit in the notify ring yet.
    notify_backlog: VecDeque<Desc>,
    /// Response and notify heads last reported in [`Poll::responded`] /
    /// [`Poll::noticed`].
    reported: (u32, u32),
    /// A notice other than an invalidation was published since the last
    /// report (the node must be woken for it).
    wake_notice: bool,
}

impl Link {
    /// Fresh endpoints of `node`'s channel.
    fn new(layout: &Layout, node: u32) -> Link {
        let ch = layout.channel(node);
        Link {
            req: Consumer::new(ch.request),
            resp: Producer::new(ch.response),
            notify: Producer::new(ch.notify),
            ack: Consumer::new(ch.ack),
            backlog: VecDeque::new(),
            notify_backlog: VecDeque::new(),
            reported: (0, 0),
            wake_notice: false,
        }
    }
}

/// Every node's rings (index `node - 1`): owns the ring positions and
/// backlogs; called by dispatch, the invalidation manager, replicas,
/// locality and membership (see the module comment).
pub(super) struct Links {
    links: Vec<Link>,
}

impl Links {
    /// Fresh endpoints for every node of `layout`.
    pub(super) fn new(layout: &Layout) -> Links {
        Links {
            links: (1..=layout.max_nodes)
                .map(|n| Link::new(layout, n))
                .collect(),
        }
    }

    fn get_mut(&mut self, node: u32) -> Option<&mut Link> {
        self.links.get_mut((node as usize).wrapping_sub(1))
    }

    /// Start `node`'s channel afresh (it joined: the rings were reset).
    pub(super) fn reset(&mut self, layout: &Layout, node: u32) {
        if let Some(l) = self.get_mut(node) {
            *l = Link::new(layout, node);
        }
    }

    /// Are answers to `node` backlogged (it is not draining them: take
    /// no new request of it until it does)?
    pub(super) fn answers_waiting(&self, node: u32) -> bool {
        self.links
            .get((node as usize).wrapping_sub(1))
            .is_some_and(|l| !l.backlog.is_empty())
    }

    /// The next request of `node`.
    pub(super) fn pop_request(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        node: u32,
    ) -> Result<Option<Desc>, RingError> {
        match self.get_mut(node) {
            Some(l) => l.req.pop(mem),
            None => Ok(None),
        }
    }

    /// The next ack of `node`.
    pub(super) fn pop_ack(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        node: u32,
    ) -> Result<Option<Desc>, RingError> {
        match self.get_mut(node) {
            Some(l) => l.ack.pop(mem),
            None => Ok(None),
        }
    }

    /// Publish answer `d` to `node` now, or behind its backlog.
    pub(super) fn respond(&mut self, mem: &(impl SharedMem + ?Sized), node: u32, d: Desc) {
        if let Some(l) = self.get_mut(node) {
            if !(l.backlog.is_empty() && l.resp.push(mem, &d).is_ok()) {
                l.backlog.push_back(d);
            }
        }
    }

    /// Queue notice `d` for `node` (published by the next
    /// [`Links::flush`]).
    pub(super) fn notify(&mut self, node: u32, d: Desc) {
        if let Some(l) = self.get_mut(node) {
            l.notify_backlog.push_back(d);
        }
    }

    /// Push backlogged answers and notices of `node`. `published` is told
    /// of every notice that went out and says whether it was an
    /// invalidation (whose ack is awaited); any other notice wakes the
    /// node.
    pub(super) fn flush(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        node: u32,
        mut published: impl FnMut(&Desc) -> bool,
    ) -> Result<(), RingError> {
        let Some(l) = self.get_mut(node) else {
            return Ok(());
        };
        drain(mem, &mut l.resp, &mut l.backlog)?;
        while let Some(d) = l.notify_backlog.front() {
            match l.notify.push(mem, d) {
                Ok(()) => {}
                Err(RingError::Full) => break,
                Err(e) => return Err(e),
            }
            if !published(d) {
                l.wake_notice = true;
            }
            l.notify_backlog.pop_front();
        }
        Ok(())
    }

    /// Answers and notices waiting for room in every node's rings.
    pub(super) fn backlogged(&self) -> usize {
        self.links
            .iter()
            .map(|l| l.backlog.len() + l.notify_backlog.len())
            .sum()
    }

    /// Answers and notices of `node` waiting for room in its rings.
    pub(super) fn backlogs(&self, node: u32) -> (usize, usize) {
        self.links
            .get((node as usize).wrapping_sub(1))
            .map_or((0, 0), |l| (l.backlog.len(), l.notify_backlog.len()))
    }

    /// Which nodes' response or notify rings moved since the last report
    /// (whatever published them: a request, an ack, a lost member). A
    /// node whose new notices were all invalidations taken as
    /// acknowledged (`owes(node)` false: it owes no ack) is not reported:
    /// it need not wake for them.
    pub(super) fn take_deliveries(&mut self, out: &mut Poll, owes: impl Fn(u32) -> bool) {
        for (i, l) in self.links.iter_mut().enumerate().take(64) {
            let now = (l.resp.published(), l.notify.published());
            if now.0 != l.reported.0 {
                out.responded |= 1 << i;
            }
            let needs_wake = l.wake_notice || owes(i as u32 + 1) || !l.notify_backlog.is_empty();
            if now.1 != l.reported.1 && needs_wake {
                out.noticed |= 1 << i;
            }
            l.wake_notice = false;
            l.reported = now;
        }
    }
}

impl<D: BlockDevice> Directory<D> {
    /// Push backlogged responses and notifications of `node`.
    pub(super) fn flush(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        node: u32,
    ) -> Result<(), RingError> {
        let inval = &mut self.inval;
        self.links.flush(mem, node, |d| inval.published(node, d))
    }

    /// Queue (or, when nothing is queued before it, publish at once) a
    /// response to `node`.
    pub(super) fn respond(&mut self, mem: &(impl SharedMem + ?Sized), node: u32, d: Desc) {
        fabric::trace::record(fabric::trace::Kind::Reply, node, Raw::decode(&d).tag, 0, 0);
        if self.members.is_member(node) {
            self.links.respond(mem, node, d);
        }
    }
}

/// Publish the front of `backlog` on `ring` until the ring is full or the
/// backlog empty.
fn drain(
    mem: &(impl SharedMem + ?Sized),
    ring: &mut Producer,
    backlog: &mut VecDeque<Desc>,
) -> Result<(), RingError> {
    while let Some(d) = backlog.front() {
        match ring.push(mem, d) {
            Ok(()) => {
                backlog.pop_front();
            }
            Err(RingError::Full) => break,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
