//! The node's side of the rings: joining the cluster and request/response
//! calls to the directory.
//!
//! Waiting is the caller's business: every loop here calls a `wait`
//! closure between polls, which returns `false` to give up (timeout,
//! directory gone). The kernel's closure halts or spins and checks the
//! clock; host tests run the directory inside it.

use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;

use fabric::layout::{Header, Layout, NodeState};
use fabric::proto::{Desc, Errno, Raw, Request, Response};
use fabric::ring::{Consumer, Producer, RingError};
use fabric::shm::SharedMem;

/// A joined node's connection to the directory.
#[derive(Debug)]
pub struct Client {
    node: u32,
    layout: Layout,
    req: Producer,
    resp: Consumer,
    next_tag: u32,
    epoch: u64,
    /// Answers to calls given up (timed out), newest last, at most
    /// [`MAX_LATE`]: a late grant must still be released (see
    /// `ScState::late_answer`).
    late: VecDeque<(u32, Desc)>,
    /// Calls in flight that nobody blocks on (tasks' metadata calls, see
    /// [`Client::register`]): tag -> (give-up time, the answer once it
    /// came). Whoever reads the response ring stores their answers here.
    inflight: BTreeMap<u32, (u64, Option<Desc>)>,
}

/// Late answers kept for the session to look at.
pub const MAX_LATE: usize = 64;

fn ring_err(e: RingError) -> Errno {
    match e {
        RingError::Full => Errno::Unavailable,
        RingError::Corrupt { .. } => Errno::Io,
    }
}

/// Publish `d` on `ring`, calling `wait` while the ring is full; `false`
/// from `wait` gives up with `Unavailable`.
fn push_waiting(
    ring: &mut Producer,
    mem: &(impl SharedMem + ?Sized),
    d: &Desc,
    wait: &mut dyn FnMut() -> bool,
) -> Result<(), Errno> {
    loop {
        match ring.push(mem, d) {
            Ok(()) => return Ok(()),
            Err(RingError::Full) => {
                if !wait() {
                    return Err(Errno::Unavailable);
                }
            }
            Err(e) => return Err(ring_err(e)),
        }
    }
}

impl Client {
    /// Ask to join as `node` and wait until the directory admits us.
    /// Returns the client and the session epoch.
    pub fn join(
        mem: &(impl SharedMem + ?Sized),
        layout: Layout,
        node: u32,
        nonce: u64,
        wait: &mut dyn FnMut() -> bool,
    ) -> Result<Client, Errno> {
        if !layout.valid_node(node) {
            return Err(Errno::Invalid);
        }
        let h = Header::new(mem, layout);
        h.set_join_nonce(node, nonce);
        h.set_node_state(node, NodeState::Joining);
        Client::admitted(mem, layout, node, wait)
    }

    /// Wait until the directory admits the join this node asked for
    /// earlier (its record says `Up`), without asking again. Returns the
    /// client of that session.
    pub fn admitted(
        mem: &(impl SharedMem + ?Sized),
        layout: Layout,
        node: u32,
        wait: &mut dyn FnMut() -> bool,
    ) -> Result<Client, Errno> {
        if !layout.valid_node(node) {
            return Err(Errno::Invalid);
        }
        let h = Header::new(mem, layout);
        loop {
            if h.node_state(node) == Some(NodeState::Up) {
                break;
            }
            if !wait() {
                return Err(Errno::Unavailable);
            }
        }
        let ch = layout.channel(node);
        Ok(Client {
            node,
            layout,
            req: Producer::new(ch.request),
            resp: Consumer::new(ch.response),
            next_tag: 1,
            epoch: h.node_epoch(node),
            late: VecDeque::new(),
            inflight: BTreeMap::new(),
        })
    }

    /// This node's id.
    pub fn node(&self) -> u32 {
        self.node
    }

    /// Session epoch given at join.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The validated layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Offset and size of one of this node's bulk slots.
    pub fn bulk(&self, slot: u32) -> Option<(usize, usize)> {
        self.layout.bulk_slot(self.node, slot)
    }

    /// Keep the answer `d` to a call nobody blocks on: a registered
    /// call's answer is stored for it, any other is late (the oldest
    /// goes beyond [`MAX_LATE`]).
    pub fn keep_late(&mut self, tag: u32, d: Desc) {
        if let Some((_, answer)) = self.inflight.get_mut(&tag) {
            *answer = Some(d);
            return;
        }
        if self.late.len() >= MAX_LATE {
            self.late.pop_front();
        }
        self.late.push_back((tag, d));
    }

    /// The late answers kept so far (see [`Client::keep_late`]).
    pub fn take_late(&mut self) -> Vec<(u32, Desc)> {
        self.late.drain(..).collect()
    }

    /// Send `req` without waiting; returns its tag. `Full` comes back as
    /// `Err(Unavailable)` only after `wait` gave up.
    pub fn send(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        req: &Request,
        wait: &mut dyn FnMut() -> bool,
    ) -> Result<u32, Errno> {
        let tag = self.next_tag;
        // Never 0, never a directory's own tag.
        self.next_tag = (self.next_tag.wrapping_add(1) & !fabric::proto::DIR_TAG).max(1);
        let d = req.encode(tag);
        push_waiting(&mut self.req, mem, &d, wait)?;
        if fabric::trace::enabled() {
            let (op, arg) = fabric::trace::req_args(req);
            fabric::trace::record(fabric::trace::Kind::ReqSent, 0, tag, op, arg);
        }
        Ok(tag)
    }

    /// The next response, if one is waiting: its tag and raw descriptor
    /// (decode it with [`Response::decode`] and the opcode sent).
    /// Answers of registered calls ([`Client::register`]) are stored for
    /// them on the way and never returned here.
    pub fn recv(&mut self, mem: &(impl SharedMem + ?Sized)) -> Result<Option<(u32, Desc)>, Errno> {
        while let Some(d) = self.resp.pop(mem).map_err(ring_err)? {
            let tag = Raw::decode(&d).tag;
            fabric::trace::record(fabric::trace::Kind::RespTaken, 0, tag, 0, 0);
            match self.inflight.get_mut(&tag) {
                Some((_, answer)) => *answer = Some(d),
                None => return Ok(Some((tag, d))),
            }
        }
        Ok(None)
    }

    /// The call `tag` (just sent) is in flight with nobody blocking on
    /// it: store its answer whenever any reader of the ring meets it;
    /// it is given up at `deadline_ns`.
    pub fn register(&mut self, tag: u32, deadline_ns: u64) {
        self.inflight.insert(tag, (deadline_ns, None));
    }

    /// A registered call: `None` if not registered (any more), else its
    /// give-up time and its answer if it came.
    pub fn registered(&self, tag: u32) -> Option<(u64, Option<&Desc>)> {
        self.inflight.get(&tag).map(|(t, a)| (*t, a.as_ref()))
    }

    /// Forget a registered call (answered or given up): a later answer
    /// is late.
    pub fn unregister(&mut self, tag: u32) -> Option<Desc> {
        self.inflight.remove(&tag).and_then(|(_, a)| a)
    }

    /// Registered calls still waiting for their answer.
    pub fn registered_waiting(&self) -> usize {
        self.inflight.values().filter(|(_, a)| a.is_none()).count()
    }

    /// Send `req` and wait for its response. Responses with other tags
    /// (answers to calls that timed out earlier) are discarded.
    pub fn call(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        req: &Request,
        wait: &mut dyn FnMut() -> bool,
    ) -> Result<Response, Errno> {
        self.call_then(mem, req, &mut || {}, wait)
    }

    /// [`Client::call`], running `published` once the request is on the
    /// ring (the node rings the directory's doorbell there).
    pub fn call_then(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        req: &Request,
        published: &mut dyn FnMut(),
        wait: &mut dyn FnMut() -> bool,
    ) -> Result<Response, Errno> {
        let tag = self.send(mem, req, wait)?;
        published();
        let op = fabric::proto::op_of(req);
        loop {
            if let Some(r) = self.resp.pop(mem).map_err(ring_err)? {
                let t = Raw::decode(&r).tag;
                fabric::trace::record(fabric::trace::Kind::RespTaken, 0, t, 0, 0);
                match Response::decode(&r, op) {
                    Ok((t, resp)) if t == tag => {
                        return match resp {
                            Response::Err(e) => Err(e),
                            ok => Ok(ok),
                        };
                    }
                    // A late answer to an abandoned call, or garbage.
                    other => {
                        log::trace!("call {tag}: late or unreadable answer {other:?}");
                        self.keep_late(Raw::decode(&r).tag, r);
                        continue;
                    }
                }
            }
            // The caller's wait hook spins, then sleeps, exactly as every
            // other wait for the directory (the page misses' included), so
            // a call and a miss wait the same way in every mode.
            if !wait() {
                return Err(Errno::Unavailable);
            }
        }
    }
}

/// The node's end of the notify (directory -> node) and ack (node ->
/// directory) rings: invalidations and their acknowledgements travel apart
/// from requests, so an ack never waits behind a request (DPC §4.3).
#[derive(Debug)]
pub struct Notifier {
    notify: Consumer,
    ack: Producer,
}

impl Notifier {
    /// Fresh endpoints for a node that just joined.
    pub fn new(layout: &Layout, node: u32) -> Notifier {
        let ch = layout.channel(node);
        Notifier {
            notify: Consumer::new(ch.notify),
            ack: Producer::new(ch.ack),
        }
    }

    /// The next notice for this node, if any: an invalidation (DIR_INV),
    /// a sharer count of a page we own, or a REVOKE of a replica.
    /// Malformed notices (and acks,
    /// which never travel this way) are skipped and reported as
    /// `Err(Invalid)`.
    pub fn poll(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
    ) -> Result<Option<fabric::proto::Notice>, Errno> {
        use fabric::proto::Notice;
        match self.notify.pop(mem).map_err(ring_err)? {
            None => Ok(None),
            Some(d) => match Notice::decode(&d) {
                Ok(Notice::DirInv(key)) => {
                    let arg = fabric::trace::key_arg(key.ino, key.idx);
                    fabric::trace::record(fabric::trace::Kind::InvTaken, 0, 0, 0, arg);
                    Ok(Some(Notice::DirInv(key)))
                }
                Ok(Notice::InvRange(span)) => {
                    let arg = fabric::trace::key_arg(span.ino, span.first);
                    fabric::trace::record(fabric::trace::Kind::InvTaken, 0, 0, 0, arg);
                    Ok(Some(Notice::InvRange(span)))
                }
                Ok(
                    n @ (Notice::Sharers { .. }
                    | Notice::Revoke(_)
                    | Notice::ReplicasUsed
                    | Notice::Recall(_)),
                ) => Ok(Some(n)),
                _ => Err(Errno::Invalid),
            },
        }
    }

    /// Acknowledge an invalidation (spins while the ack ring is full: the
    /// directory drains it first on every sweep).
    pub fn ack(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        key: fabric::proto::PageKey,
        dirty: bool,
        wait: &mut dyn FnMut() -> bool,
    ) -> Result<(), Errno> {
        self.send(mem, fabric::proto::Notice::InvAck { key, dirty }, wait)
    }

    /// Publish `n` on the ack ring (spins while it is full, as
    /// [`Notifier::ack`]). An invalidation's ack, of one page or of a
    /// range, is an `ack_sent` on the timeline.
    pub fn send(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        n: fabric::proto::Notice,
        wait: &mut dyn FnMut() -> bool,
    ) -> Result<(), Errno> {
        use fabric::proto::Notice;
        push_waiting(&mut self.ack, mem, &n.encode(), wait)?;
        let arg = match n {
            Notice::InvAck { key, .. } => Some(fabric::trace::key_arg(key.ino, key.idx)),
            Notice::InvRangeAck { span, .. } => Some(fabric::trace::key_arg(span.ino, span.first)),
            _ => None,
        };
        if let Some(arg) = arg {
            fabric::trace::record(fabric::trace::Kind::AckSent, 0, 0, 0, arg);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fabric::proto::{Notice, PageKey};
    use fabric::shm::HeapShm;

    const REGION: usize = 2 << 20;

    /// A client of node 1 on a fresh region (the wait hook plays the
    /// directory admitting it).
    fn joined() -> (HeapShm, Layout, Client) {
        let mem = HeapShm::new(REGION);
        let layout = Layout::compute(REGION, 1).unwrap();
        layout.format(&*mem, 0);
        let h = Header::new(&*mem, layout);
        let mut admit = || {
            h.set_node_state(1, NodeState::Up);
            true
        };
        let c = Client::join(&*mem, layout, 1, 7, &mut admit).unwrap();
        (mem, layout, c)
    }

    #[test]
    fn a_full_request_ring_waits_then_gives_up_or_goes_on() {
        let (mem, layout, mut c) = joined();
        let slots = layout.channel(1).request.slots;
        let mut never = || -> bool { panic!("the ring is not full yet") };
        for _ in 0..slots {
            c.send(&*mem, &Request::Nop, &mut never).unwrap();
        }
        // Full: `send` and `call` ask the hook, and give up when it says so.
        let mut waits = 0;
        let mut give_up = || {
            waits += 1;
            false
        };
        assert_eq!(
            c.send(&*mem, &Request::Nop, &mut give_up),
            Err(Errno::Unavailable)
        );
        assert_eq!(
            c.call(&*mem, &Request::Nop, &mut give_up),
            Err(Errno::Unavailable)
        );
        assert_eq!(waits, 2);
        // The hook frees a slot (the directory takes one request): the
        // push goes through on the next try, with the next tag.
        let mut dir = Consumer::new(layout.channel(1).request);
        let mut drain = || dir.pop(&*mem).unwrap().is_some();
        let tag = c.send(&*mem, &Request::Nop, &mut drain).unwrap();
        assert!(tag > slots, "a fresh tag, not one already in the ring");
    }

    #[test]
    fn a_full_ack_ring_waits_then_gives_up() {
        let (mem, layout, _c) = joined();
        let mut n = Notifier::new(&layout, 1);
        let key = PageKey { ino: 2, idx: 3 };
        let slots = layout.channel(1).ack.slots;
        for _ in 0..slots {
            n.ack(&*mem, key, true, &mut || false).unwrap();
        }
        assert_eq!(
            n.ack(&*mem, key, true, &mut || false),
            Err(Errno::Unavailable)
        );
        let mut dir = Consumer::new(layout.channel(1).ack);
        let d = dir.pop(&*mem).unwrap().unwrap();
        assert_eq!(Notice::decode(&d), Ok(Notice::InvAck { key, dirty: true }));
        n.ack(&*mem, key, false, &mut || false).unwrap();
    }

    /// The ack of a page and the ack of a range are both `ack_sent` on the
    /// timeline, with the page (the range's first) as their argument.
    #[test]
    fn page_and_range_acks_are_recorded_on_the_timeline() {
        use fabric::proto::PageSpan;
        use fabric::trace::{self, Kind};
        fn clock() -> u64 {
            7
        }
        let _one = crate::tests::TRACE_TESTS
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let (mem, layout, _c) = joined();
        let mut n = Notifier::new(&layout, 1);
        // Distinctive files: tests alongside may record their own acks.
        let key = PageKey { ino: 9_001, idx: 3 };
        let span = PageSpan {
            ino: 9_002,
            first: 5,
            count: 4,
        };
        trace::set_clock(clock);
        trace::set_enabled(true);
        n.ack(&*mem, key, false, &mut || false).unwrap();
        let range = Notice::InvRangeAck { span, dirty: false };
        n.send(&*mem, range, &mut || false).unwrap();
        trace::set_enabled(false);
        let acks: Vec<u64> = (trace::snapshot().0.into_iter())
            .filter(|e| e.kind == Kind::AckSent)
            .map(|e| e.arg)
            .collect();
        for want in [trace::key_arg(9_001, 3), trace::key_arg(9_002, 5)] {
            assert!(acks.contains(&want), "{want} not among the acks {acks:?}");
        }
    }
}
