//! The node's side of the rings: joining the cluster and request/response
//! calls to the directory.
//!
//! Waiting is the caller's business: every loop here calls a `wait`
//! closure between polls, which returns `false` to give up (timeout,
//! directory gone). The kernel's closure halts or spins and checks the
//! clock; host tests run the directory inside it.

use fabric::layout::{Header, Layout, NodeState};
use fabric::proto::{Errno, Raw, Request, Response};
use fabric::ring::{Consumer, Producer, RingError};
use fabric::shm::SharedMem;

/// Ring polls before the first call of the wait hook.
const SPIN_POLLS: u32 = 4096;

/// A joined node's connection to the directory.
#[derive(Debug)]
pub struct Client {
    node: u32,
    layout: Layout,
    req: Producer,
    resp: Consumer,
    next_tag: u32,
    epoch: u64,
}

fn ring_err(e: RingError) -> Errno {
    match e {
        RingError::Full => Errno::Unavailable,
        RingError::Corrupt { .. } => Errno::Io,
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

    /// Send `req` without waiting; returns its tag. `Full` comes back as
    /// `Err(Unavailable)` only after `wait` gave up.
    pub fn send(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        req: &Request,
        wait: &mut dyn FnMut() -> bool,
    ) -> Result<u32, Errno> {
        let tag = self.next_tag;
        self.next_tag = self.next_tag.wrapping_add(1).max(1);
        let d = req.encode(tag);
        loop {
            match self.req.push(mem, &d) {
                Ok(()) => return Ok(tag),
                Err(RingError::Full) => {
                    if !wait() {
                        return Err(Errno::Unavailable);
                    }
                }
                Err(e) => return Err(ring_err(e)),
            }
        }
    }

    /// The next response, if one is waiting: its tag and raw descriptor
    /// (decode it with [`Response::decode`] and the opcode sent).
    pub fn recv(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
    ) -> Result<Option<(u32, fabric::proto::Desc)>, Errno> {
        Ok(self
            .resp
            .pop(mem)
            .map_err(ring_err)?
            .map(|d| (Raw::decode(&d).tag, d)))
    }

    /// Send `req` and wait for its response. Responses with other tags
    /// (answers to calls that timed out earlier) are discarded.
    pub fn call(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        req: &Request,
        wait: &mut dyn FnMut() -> bool,
    ) -> Result<Response, Errno> {
        let tag = self.next_tag;
        self.next_tag = self.next_tag.wrapping_add(1).max(1);
        let d = req.encode(tag);
        let op = fabric::proto::op_of(req);
        loop {
            match self.req.push(mem, &d) {
                Ok(()) => break,
                Err(RingError::Full) => {
                    if !wait() {
                        return Err(Errno::Unavailable);
                    }
                }
                Err(e) => return Err(ring_err(e)),
            }
        }
        let mut spins = 0u32;
        loop {
            if let Some(r) = self.resp.pop(mem).map_err(ring_err)? {
                match Response::decode(&r, op) {
                    Ok((t, resp)) if t == tag => {
                        return match resp {
                            Response::Err(e) => Err(e),
                            ok => Ok(ok),
                        };
                    }
                    // A late answer to an abandoned call, or garbage.
                    _ => continue,
                }
            }
            // Answers usually come within microseconds: poll the ring
            // alone for a while before paying for the caller's wait hook.
            // (No PAUSE here: under QEMU's TCG it leaves the translated-code
            // loop and costs about a microsecond per iteration.)
            if spins < SPIN_POLLS {
                spins += 1;
                continue;
            }
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

    /// The next invalidation, if any (malformed notices are skipped and
    /// reported as `Err(Invalid)`).
    pub fn poll(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
    ) -> Result<Option<fabric::proto::PageKey>, Errno> {
        match self.notify.pop(mem).map_err(ring_err)? {
            None => Ok(None),
            Some(d) => match fabric::proto::Notice::decode(&d) {
                Ok(fabric::proto::Notice::DirInv(k)) => Ok(Some(k)),
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
        let d = fabric::proto::Notice::InvAck { key, dirty }.encode();
        loop {
            match self.ack.push(mem, &d) {
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
}
