//! The node's link to the directory: membership (layout, join, rejoin,
//! leaving the shared cache when the directory falls silent: `membership`),
//! calls on the
//! rings with the one wait routine ([`crate::wait`]), and the file
//! server's transport (the rings with this node's bulk slots, or `net`
//! mode's [`FileServer`]).
//!
//! Every wait services the data path's session first ([`Session`]: DIR_INV
//! notices and deferred acks), so no global state is needed.

use alloc::vec::Vec;

use fabric::bulk::{Bulk, ShmBulk};
use fabric::config::Mode;
use fabric::layout::{Header, Layout, NodeState};
use fabric::proto::{Desc, Errno, Request, Response};

use crate::client::Client;
use crate::env::{Env, FileServer};
use crate::wait::{Step, Waiter, DIR_SILENT_NS};

/// What a data path does with its protocol session: set it up after a
/// join, service notices while the node waits, forget it when the
/// directory is gone. The private-cache path has no session (`()`).
pub trait Session<E: Env> {
    /// A join succeeded (fresh rings and epoch).
    fn joined(&mut self, _env: &E, _layout: Layout, _node: u32) {}
    /// Service pending notices; how many were handled.
    fn service(&mut self, _env: &E) -> usize {
        0
    }
    /// The directory is gone: forget every page, unmap everything.
    fn disconnect(&mut self, _env: &E) {}
    /// May the directory take a DIR_INV published while this node sleeps
    /// as acknowledged (nothing in flight that it could race, no page
    /// dirtied through a peer's frame)? See `fabric::doorbell`.
    fn quiet(&mut self) -> bool {
        false
    }
    /// The session cannot go on (a corrupt notify ring): new calls fail as
    /// "directory unavailable" (but the node's write-back before it
    /// rejoins, see [`Link::recovering`]), and the next membership check
    /// ([`Link::check`]) rejoins with fresh rings.
    fn broken(&self) -> bool {
        false
    }
}

impl<E: Env> Session<E> for () {}

/// How file-server requests travel.
enum Files<N> {
    /// The rings and this node's bulk slots in the shared region.
    Rings,
    /// `net` mode: `None` when its NIC is missing (never the rings).
    Net(Option<N>),
}

/// The link to the directory.
pub struct Link<E: Env> {
    /// The host (devices, clock, shared region).
    pub env: E,
    id: u32,
    mode: Mode,
    layout: Option<Layout>,
    client: Option<Client>,
    rpc_timeout_ns: u64,
    /// Set once "directory unavailable" was logged, cleared on success.
    reported: bool,
    /// A join this node asked for was not answered in time: the directory
    /// may admit it later (it waits for others to let go of the node's
    /// frames first), and the next membership check takes that admission
    /// (or asks again) instead of leaving the node out until a call needs
    /// the directory.
    join_pending: bool,
    /// `net` mode's calls in flight ([`Link::start_call`]): tag -> the
    /// time they are given up.
    net_calls: alloc::collections::BTreeMap<u32, u64>,
    /// Wait state of the current asynchronous exchange (reset on progress).
    pending: Waiter,
    /// Wait state of the calls nobody blocks on (reset on an answer).
    calls_wait: Waiter,
    /// Last directory heartbeat seen and when it changed.
    dir_hb: (u64, u64),
    /// The directory is presumed dead once its heartbeat stood still this
    /// long ([`Link::guard`]; the kernel sets `hb_timeout_ms`).
    dir_timeout_ns: u64,
    /// Calls are allowed although the session is broken: the node writes
    /// back its dirty pages before rejoining (a rejoin drops them).
    pub recovering: bool,
    files: Files<E::Net>,
    /// `private` mode: reads of one batch in flight together over the
    /// rings (1..=[`MAX_RING_READS`]).
    pub ring_reads: usize,
    /// Read batches sent over the rings: (groups, requests, most requests
    /// in flight together).
    pub ring_read_stats: (u64, u64, u64),
    /// Write batches sent over the rings ([`Link::fs_write_batch`]):
    /// (groups, requests, most requests in flight together).
    pub ring_write_stats: (u64, u64, u64),
    /// Where this node's time in misses went (`bench miss`).
    pub probe: Probe,
    /// Files with a write given up unanswered ([`Link::in_doubt`]).
    in_doubt: alloc::collections::BTreeSet<u64>,
}

/// Time this node spent in exchanges with the directory and installing
/// what their answers brought, summed since boot on the node's clock
/// (`bench miss`: a miss's time minus these is the node's own work; the
/// round trips minus the directory's service time is transport).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Probe {
    /// From publishing a call's (or a batch's) requests until its last
    /// answer was taken: every file-server call and page-request batch.
    pub round_trip_ns: u64,
    /// Answers installed: a private read's bytes copied from the bulk slot
    /// into the page cache; a page miss's answer applied to the node cache
    /// (frame owned, or the owner's frame mapped).
    pub fill_ns: u64,
}

/// Does node `id` have something to read: a response, a notice, or (while
/// joining) its admission? What a sleeper re-checks after announcing its
/// sleep, so a doorbell suppressed just before cannot be lost.
fn inbound<E: Env>(env: &E, layout: Layout, id: u32, joining: bool) -> bool {
    let mem = env.mem();
    let ch = layout.channel(id);
    ch.response.unread(mem)
        || ch.notify.unread(mem)
        || (joining && Header::new(mem, layout).node_state(id) != Some(NodeState::Joining))
}

/// Service the session; if that published acks, ring the directory.
fn service<E: Env>(env: &E, svc: &mut dyn Session<E>) -> usize {
    let n = svc.service(env);
    if n > 0 {
        env.ring_directory();
    }
    n
}

/// One wait step: service the session, then step `w` against the clock
/// and the directory's heartbeat. Past the spinning phase the node sleeps
/// until a doorbell (or its next give-up time), or without doorbells halts
/// until the next interrupt. False: give up.
fn wait_once<E: Env>(
    env: &E,
    layout: Layout,
    id: u32,
    joining: bool,
    w: &mut Waiter,
    svc: &mut dyn Session<E>,
) -> bool {
    service(env, svc);
    let hb = Header::new(env.mem(), layout).dir_heartbeat();
    match w.step(env.now_ns(), hb) {
        Step::Spin => env.wait_step(true),
        Step::Halt => {
            let mut has_work = || inbound(env, layout, id, joining);
            if env.sleep_until_event(w.deadline(), svc.quiet(), &mut has_work) {
                // Notices first: a DIR_INV the directory took as acked
                // while we slept must be applied before the caller goes on.
                service(env, svc);
            } else {
                env.wait_step(false);
            }
        }
        Step::GiveUp => return false,
    }
    true
}

mod calls;
pub mod client;
mod membership;
mod reads;
pub mod wait;
pub mod wbflight;
mod writes;

pub use reads::MAX_RING_READS;
pub use writes::{contiguous_runs, WriteReq};

impl<E: Env> Link<E> {
    /// A link for node `id` in `mode` that is not joined yet. `net`: `net`
    /// mode's transport, if its device was found (file requests never fall
    /// back to the rings in that mode; other modes ignore it).
    pub fn new(env: E, id: u32, mode: Mode, rpc_timeout_ns: u64, net: Option<E::Net>) -> Link<E> {
        let spin_ns = env.spin_ns();
        Link {
            env,
            id,
            mode,
            layout: None,
            client: None,
            rpc_timeout_ns,
            reported: false,
            join_pending: false,
            net_calls: alloc::collections::BTreeMap::new(),
            pending: Waiter::new(rpc_timeout_ns).spinning(spin_ns),
            calls_wait: Waiter::new(rpc_timeout_ns).spinning(spin_ns),
            dir_hb: (0, 0),
            dir_timeout_ns: DIR_SILENT_NS,
            recovering: false,
            ring_reads: MAX_RING_READS,
            ring_read_stats: (0, 0, 0),
            ring_write_stats: (0, 0, 0),
            probe: Probe::default(),
            in_doubt: alloc::collections::BTreeSet::new(),
            files: if mode == Mode::Net {
                Files::Net(net)
            } else {
                Files::Rings
            },
        }
    }

    /// This node's id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The page-cache mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The validated layout, once read.
    pub fn layout(&self) -> Option<Layout> {
        self.layout
    }

    /// The region's metadata epoch (rings modes, once the layout is
    /// known): it moves before any file's version or size can change.
    pub fn meta_epoch(&self) -> Option<u64> {
        if self.mode == Mode::Net {
            return None;
        }
        self.layout
            .map(|l| Header::new(self.env.mem(), l).meta_epoch())
    }

    /// The ring client, if joined.
    pub fn client(&self) -> Option<&Client> {
        self.client.as_ref()
    }

    /// `net` mode's transport, if any.
    pub fn net(&mut self) -> Option<&mut E::Net> {
        match &mut self.files {
            Files::Net(n) => n.as_mut(),
            Files::Rings => None,
        }
    }

    /// One synchronous call on the rings.
    pub fn call(&mut self, req: &Request, svc: &mut dyn Session<E>) -> Result<Response, Errno> {
        let layout = self.ensure_joined(svc)?;
        let t0 = self.env.now_ns();
        let r = self.call_joined(layout, req, svc);
        self.add_round_trip(t0);
        r
    }

    /// Count the time since `t0` as a round trip ([`Probe`]).
    pub fn add_round_trip(&mut self, t0: u64) {
        let d = self.env.now_ns().saturating_sub(t0);
        self.probe.round_trip_ns = self.probe.round_trip_ns.saturating_add(d);
    }

    /// Count the time since `t0` as installing answers ([`Probe`]).
    pub fn add_fill(&mut self, t0: u64) {
        let d = self.env.now_ns().saturating_sub(t0);
        self.probe.fill_ns = self.probe.fill_ns.saturating_add(d);
    }

    fn call_joined(
        &mut self,
        layout: Layout,
        req: &Request,
        svc: &mut dyn Session<E>,
    ) -> Result<Response, Errno> {
        let mut w = Waiter::new(self.rpc_timeout_ns).spinning(self.env.spin_ns());
        let env = &self.env;
        let id = self.id;
        let client = self.client.as_mut().ok_or(Errno::Unavailable)?;
        let mut wait = || wait_once(env, layout, id, false, &mut w, svc);
        match client.call_then(env.mem(), req, &mut || env.ring_directory(), &mut wait) {
            Err(Errno::Unavailable) => {
                Err(self.unavailable("no answer (timeout or no heartbeat)", svc))
            }
            r => {
                if r.is_ok() {
                    self.reported = false;
                }
                r
            }
        }
    }

    /// Publish a request on the rings; returns its tag.
    pub fn send(&mut self, req: &Request, svc: &mut dyn Session<E>) -> Result<u32, Errno> {
        let layout = self.ensure_joined(svc)?;
        let mut w = Waiter::new(self.rpc_timeout_ns).spinning(self.env.spin_ns());
        let env = &self.env;
        let id = self.id;
        let client = self.client.as_mut().ok_or(Errno::Unavailable)?;
        let mut wait = || wait_once(env, layout, id, false, &mut w, svc);
        let tag = client.send(env.mem(), req, &mut wait)?;
        env.ring_directory();
        // A new request: the wait for answers starts now. (A wait an
        // earlier exchange left behind, its caller having stopped for
        // another reason, would otherwise count against this one and give
        // up at its first step.)
        self.pending.reset();
        Ok(tag)
    }

    /// Answers that came after their call was given up (see
    /// [`Client::keep_late`]); none without a session.
    pub fn take_late(&mut self) -> Vec<(u32, Desc)> {
        self.client
            .as_mut()
            .map(|c| c.take_late())
            .unwrap_or_default()
    }

    /// Between calls every answer on the response ring is late: keep them
    /// (see [`Link::take_late`]).
    pub fn drain_late(&mut self) {
        let Some(c) = self.client.as_mut() else {
            return;
        };
        while let Ok(Some((tag, d))) = c.recv(self.env.mem()) {
            c.keep_late(tag, d);
        }
    }

    /// Keep a late answer `d` met while waiting for others.
    pub fn keep_late(&mut self, tag: u32, d: Desc) {
        if let Some(c) = self.client.as_mut() {
            c.keep_late(tag, d);
        }
    }

    /// A response, if one is waiting.
    pub fn recv(&mut self) -> Result<Option<(u32, Desc)>, Errno> {
        let client = self.client.as_mut().ok_or(Errno::Unavailable)?;
        let r = client.recv(self.env.mem())?;
        if r.is_some() {
            self.pending.reset(); // progress
        }
        Ok(r)
    }

    /// Service pending notices (the idle loop), ringing the directory if
    /// acks were published; how many were handled.
    pub fn service(&mut self, svc: &mut dyn Session<E>) -> usize {
        service(&self.env, svc)
    }

    /// Idle: sleep until a doorbell, an interrupt or `deadline_ns` unless
    /// a notice or response is waiting. False: no doorbells (the caller
    /// halts until the next interrupt itself).
    /// After a sleep, pending notices are serviced (before the caller
    /// runs anything that could touch a shared page).
    pub fn idle_sleep(
        &mut self,
        deadline_ns: u64,
        other_work: &mut dyn FnMut() -> bool,
        svc: &mut dyn Session<E>,
    ) -> bool {
        let (layout, id, joined) = (self.layout, self.id, self.client.is_some());
        let env = &self.env;
        let mut has_work =
            || other_work() || (joined && layout.is_some_and(|l| inbound(env, l, id, false)));
        let quiet = joined && svc.quiet();
        let slept = env.sleep_until_event(deadline_ns, quiet, &mut has_work);
        if slept {
            service(env, svc);
        }
        slept
    }

    /// One wait step of an asynchronous exchange; false: give up.
    pub fn wait(&mut self, svc: &mut dyn Session<E>) -> bool {
        let Some(layout) = self.layout else {
            return false;
        };
        if wait_once(&self.env, layout, self.id, false, &mut self.pending, svc) {
            return true;
        }
        self.unavailable("no answer (timeout or no heartbeat)", svc);
        false
    }

    /// How long a call waits for its answer before it gives up.
    pub fn rpc_timeout_ns(&self) -> u64 {
        self.rpc_timeout_ns
    }

    /// When a wait started now gives up: one RPC timeout from now (a call
    /// answered `Busy` is asked again until then).
    pub fn deadline(&self) -> u64 {
        self.env.now_ns().saturating_add(self.rpc_timeout_ns)
    }

    /// This node's bulk slot `slot` in the shared region: (offset, size).
    pub fn ring_bulk(&self, slot: u32) -> Result<(usize, usize), Errno> {
        self.client
            .as_ref()
            .and_then(|c| c.bulk(slot))
            .ok_or(Errno::Unavailable)
    }

    fn shm_bulk(&self) -> Result<ShmBulk<'_, E::Mem>, Errno> {
        match (&self.client, self.layout) {
            (Some(_), Some(layout)) => Ok(ShmBulk::new(self.env.mem(), layout, self.id)),
            _ => Err(Errno::Unavailable),
        }
    }

    /// One file-server request (metadata or data).
    pub fn fs_call(&mut self, req: &Request, svc: &mut dyn Session<E>) -> Result<Response, Errno> {
        match &mut self.files {
            Files::Net(Some(n)) => {
                let t0 = self.env.now_ns();
                let r = n.call(req);
                self.add_round_trip(t0);
                r
            }
            Files::Net(None) => Err(Errno::Unavailable),
            Files::Rings => self.call(req, svc),
        }
    }

    /// Do file-server requests travel on the rings (not `net` mode)?
    pub fn rings(&self) -> bool {
        matches!(self.files, Files::Rings)
    }

    /// The file-server transport's name (`bench rpc`).
    pub fn fs_kind(&self) -> &'static str {
        match self.files {
            Files::Net(Some(_)) => "tcp",
            _ => "ring",
        }
    }

    /// Capacity of bulk slot `slot`.
    pub fn bulk_cap(&self, slot: u32) -> Result<usize, Errno> {
        match &self.files {
            Files::Net(Some(n)) => n.bulk_cap(slot),
            _ => self.shm_bulk()?.cap(slot).ok_or(Errno::Invalid),
        }
    }

    /// Put `data` at byte `at` of bulk slot `slot`.
    pub fn bulk_write(&mut self, slot: u32, at: usize, data: &[u8]) -> Result<(), Errno> {
        if let Files::Net(Some(n)) = &mut self.files {
            return n.bulk_write(slot, at, data);
        }
        self.shm_bulk()?.write(slot, at, data)
    }

    /// Copy `buf.len()` bytes at byte `at` of ring bulk slot `slot` into
    /// `buf` (bounds-checked against the validated layout).
    pub fn bulk_read_at(&mut self, slot: u32, at: usize, buf: &mut [u8]) -> Result<(), Errno> {
        if let Files::Net(Some(n)) = &mut self.files {
            return if at == 0 {
                n.bulk_read(slot, buf)
            } else {
                Err(Errno::Invalid)
            };
        }
        self.shm_bulk()?.read_at(slot, at, buf)
    }

    /// Copy the head of bulk slot `slot` into `buf`.
    pub fn bulk_read(&mut self, slot: u32, buf: &mut [u8]) -> Result<(), Errno> {
        if let Files::Net(Some(n)) = &mut self.files {
            return n.bulk_read(slot, buf);
        }
        self.shm_bulk()?.read(slot, buf)
    }

    /// Several reads (`Request::Data` into slot 1), each answer with its
    /// data: pipelined in `net` mode; on the rings up to
    /// [`Link::ring_reads`] requests in flight together, their data side by
    /// side in slot 1 (see `link/reads.rs`). A request the server refused
    /// is answered `Response::Err` in place.
    pub fn fs_read_batch(
        &mut self,
        reqs: &[Request],
        svc: &mut dyn Session<E>,
    ) -> Result<Vec<(Response, Vec<u8>)>, Errno> {
        match &mut self.files {
            Files::Net(Some(n)) => n.call_batch(reqs),
            Files::Net(None) => Err(Errno::Unavailable),
            Files::Rings => self.ring_read_batch(reqs, svc),
        }
    }

    /// Leave the cluster (shutdown).
    pub fn leave(&mut self) {
        if let Some(layout) = self.layout {
            Header::new(self.env.mem(), layout).set_node_state(self.id, NodeState::Left);
        }
    }
}
