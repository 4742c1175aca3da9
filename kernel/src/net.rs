//! The `net` mode's TCP/IP: `smoltcp` over the virtio-net NICs.
//!
//! Topology: one point-to-point link per node (a QEMU `-netdev stream`
//! over a unix socket, set up by `qemu-run.sh`). On link K the directory is
//! `10.0.K.1` and node K is `10.0.K.2`; the addresses exist only inside the
//! two guests. The directory listens on [`fabric::netwire::PORT`] on every
//! link and serves the same file server as the rings
//! ([`dirsvc::server::Directory::serve_net`]); a node keeps one connection
//! and sends one request frame at a time (NFS-like, synchronous RPC).
//!
//! smoltcp pitfalls handled here: delayed ACK and Nagle are off (a request
//! or response that ends mid-segment would otherwise wait for a timer), and
//! the polling loops call `Interface::poll` whenever a frame is waiting or
//! `poll_at` says a timer (retransmit, ARP) is due, never less.

use alloc::vec::Vec;

use fabric::netorder::AnswerOrder;
use fabric::netwire::{self, FrameReader};
use fabric::proto::op_of;
use fabric::proto::{Errno, Request, Response};
use nodepath::netclient::{retry_safe, NetClient};
use nodepath::netlink::{self, dir_step, Connect, Connector, DirStep, KEEPALIVE_MS};
use smoltcp::iface::{Config, Interface, PollResult, SocketHandle, SocketSet};
use smoltcp::socket::tcp;
use smoltcp::time::Instant;
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr, Ipv4Address};

use crate::arch::{cpu, time};
use crate::drivers::net::Nic;

/// Answers the directory queues for one link before it stops reading
/// that link's requests.
const OUT_MAX: usize = 1 << 20;

/// Requests of one link waiting for their answers (for the disk, or for
/// an earlier request's answer) before the directory stops reading that
/// link's requests. The frames of one receive already taken are still
/// served, so this bounds the waiting list near this plus what one
/// receive holds.
const WAITING_MAX: usize = 64;

/// smoltcp's clock.
fn now() -> Instant {
    Instant::from_micros((time::now_ns() / 1000) as i64)
}

/// Address of one end of link `k`: `side` 1 is the directory, 2 the node.
pub fn addr(k: u32, side: u8) -> Ipv4Address {
    Ipv4Address::new(10, 0, k.min(255) as u8, side)
}

/// One interface with one TCP socket.
pub struct Stack {
    nic: Nic,
    iface: Interface,
    sockets: SocketSet<'static>,
    tcp: SocketHandle,
}

impl Stack {
    /// Bring up `nic` as `ip`/24 with one TCP socket.
    pub fn new(mut nic: Nic, ip: Ipv4Address) -> Stack {
        let mut cfg = Config::new(HardwareAddress::Ethernet(EthernetAddress(nic.mac())));
        // smoltcp draws initial sequence numbers and ephemeral ports from
        // this seed: the same seed in every run made them predictable.
        cfg.random_seed = cpu::entropy64();
        let mut iface = Interface::new(cfg, &mut nic, now());
        iface.update_ip_addrs(|a| {
            // A fresh interface has room for its one address.
            let _ = a.push(IpCidr::new(IpAddress::Ipv4(ip), 24));
        });
        let mut sockets = SocketSet::new(Vec::new());
        let tcp = sockets.add(netlink::new_socket());
        Stack {
            nic,
            iface,
            sockets,
            tcp,
        }
    }

    /// Run the stack once: receive what is waiting, send what is due.
    /// True if a socket changed state or a frame was processed.
    pub fn poll(&mut self) -> bool {
        self.iface.poll(now(), &mut self.nic, &mut self.sockets) != PollResult::None
    }

    /// Does the stack need a poll now (a frame waits or a timer is due)?
    pub fn due(&mut self) -> bool {
        if self.nic.rx_pending() {
            return true;
        }
        let t = now();
        self.iface
            .poll_at(t, &self.sockets)
            .is_some_and(|at| at <= t)
    }

    /// Nothing to do: halt until a frame arrives or the next timer tick
    /// (the NIC's interrupt wakes us; without one, just pause). The halt
    /// frees the host core for QEMU's own threads, which carry the frames.
    pub fn idle(&mut self) {
        if !self.nic.arm_wakeup() {
            cpu::pause();
            return;
        }
        x86_64::instructions::interrupts::disable();
        if self.due() {
            x86_64::instructions::interrupts::enable();
            return;
        }
        cpu::wait_for_interrupt();
    }

    /// Arm the wakeup and report whether work is waiting (for loops that
    /// serve several links and halt once for all of them).
    pub fn arm(&mut self) -> bool {
        self.nic.arm_wakeup();
        self.due()
    }

    /// The TCP socket.
    pub fn socket(&mut self) -> &mut tcp::Socket<'static> {
        self.sockets.get_mut::<tcp::Socket>(self.tcp)
    }

    /// Frames received and sent by the NIC.
    pub fn frames(&self) -> (u64, u64) {
        (self.nic.rx_frames, self.nic.tx_frames)
    }
}

// ---------------------------------------------------------------------
// Node side

/// A node's connection to the directory's file server.
pub struct NetConn {
    stack: Stack,
    client: NetClient,
    /// Bytes of frames not yet taken by the socket, in request order.
    tx: Vec<u8>,
    remote: (Ipv4Address, u16),
    next_port: u16,
    timeout_ns: u64,
    /// Requests answered, bytes sent and received (frames).
    pub calls: u64,
    pub bytes_out: u64,
    pub bytes_in: u64,
}

impl NetConn {
    /// Set up node `id`'s end of its link; connects on first use.
    pub fn new(nic: Nic, id: u32, timeout_ns: u64) -> NetConn {
        NetConn {
            stack: Stack::new(nic, addr(id, 2)),
            client: NetClient::new(),
            tx: Vec::new(),
            remote: (addr(id, 1), netwire::PORT),
            next_port: netlink::FIRST_PORT,
            timeout_ns,
            calls: 0,
            bytes_out: 0,
            bytes_in: 0,
        }
    }

    /// Capacity of staging slot `slot` (the network's bulk slots).
    pub fn bulk_cap(&self, slot: u32) -> Result<usize, Errno> {
        self.client.bulk_cap(slot).ok_or(Errno::Invalid)
    }

    /// Stage request payload in `slot`.
    pub fn bulk_write(&mut self, slot: u32, at: usize, data: &[u8]) -> Result<(), Errno> {
        self.client.bulk_write(slot, at, data)
    }

    /// Read answer payload from `slot`.
    pub fn bulk_read(&self, slot: u32, buf: &mut [u8]) -> Result<(), Errno> {
        self.client.bulk_read(slot, buf)
    }

    /// Frames received and sent by the NIC.
    pub fn frames(&self) -> (u64, u64) {
        self.stack.frames()
    }

    /// The TCP connection's state (for `cache stats`).
    pub fn state(&mut self) -> tcp::State {
        self.stack.socket().state()
    }

    fn drop_connection(&mut self, why: &str) -> Errno {
        log::warn!("net: connection to the file server dropped: {why}");
        self.stack.socket().abort();
        self.stack.poll();
        self.client.reset();
        self.tx.clear();
        Errno::Unavailable
    }

    /// Make sure the connection is up (connecting if needed), by
    /// `deadline`. An attempt refused or reset (the directory's end still
    /// holds a connection it has not seen die, or is not listening yet) is
    /// tried again after a wait that grows ([`Backoff`]), until the
    /// deadline or the last attempt.
    fn connect(&mut self, deadline: u64) -> Result<(), Errno> {
        let mut c = Connector::default();
        loop {
            self.stack.poll();
            let Stack {
                iface,
                sockets,
                tcp: h,
                ..
            } = &mut self.stack;
            let s = sockets.get_mut::<tcp::Socket>(*h);
            let state = s.state();
            let remote = self.remote.into();
            match c.step(time::now_ns(), iface, s, remote, &mut self.next_port) {
                Connect::Up { failed } => {
                    if failed > 0 {
                        log::info!(
                            "net: connected to the file server after {failed} failed attempts"
                        );
                    }
                    return Ok(());
                }
                Connect::GaveUp { tries } => {
                    log::warn!(
                        "net: no connection to the file server {}:{} after {tries} attempts",
                        self.remote.0,
                        self.remote.1,
                    );
                    return Err(Errno::Unavailable);
                }
                Connect::Error => return Err(Errno::Unavailable),
                Connect::Attempted => {
                    self.client.reset();
                    self.tx.clear();
                }
                Connect::Waiting => {}
            }
            if time::now_ns() > deadline {
                self.stack.socket().abort();
                self.stack.poll();
                log::warn!(
                    "net: no connection to the file server {}:{} (state {state}, {} failed attempts)",
                    self.remote.0,
                    self.remote.1,
                    c.failed()
                );
                return Err(Errno::Unavailable);
            }
            if !self.stack.due() {
                self.stack.idle(); // the SYN-ACK (or a timer tick) wakes us
            }
        }
    }

    /// One request/response exchange with the file server. If the
    /// connection breaks before the answer (dropped, reset, timed out), a
    /// request that may be served twice ([`retry_safe`]) is sent once more
    /// on a new connection; any other fails with `Unavailable` (it may
    /// have been served), and the next call reconnects.
    pub fn call(&mut self, req: &Request) -> Result<Response, Errno> {
        match self.call_once(req) {
            Err(Errno::Unavailable)
                if retry_safe(req) && self.stack.socket().state() != tcp::State::Established =>
            {
                log::info!("net: {:?} resent on a new connection", op_of(req));
                self.call_once(req)
            }
            r => r,
        }
    }

    fn call_once(&mut self, req: &Request) -> Result<Response, Errno> {
        let deadline = time::now_ns() + self.timeout_ns;
        self.connect(deadline)?;
        let frame = self.client.request(req);
        self.tx.extend_from_slice(&frame);
        let mut got = None;
        self.exchange(deadline, |c, bytes| {
            got = c.feed(bytes)?;
            Ok(got.is_some())
        })?;
        self.calls += 1;
        match got {
            Some(Response::Err(e)) => Err(e),
            Some(r) => Ok(r),
            None => Err(Errno::Io),
        }
    }

    /// Several requests without payload (reads) in flight at once: their
    /// frames go out together and the answers come back in order, each
    /// with its data.
    pub fn call_batch(&mut self, reqs: &[Request]) -> Result<Vec<(Response, Vec<u8>)>, Errno> {
        let mut out = Vec::with_capacity(reqs.len());
        for chunk in reqs.chunks(nodepath::netclient::MAX_BATCH) {
            let deadline = time::now_ns() + self.timeout_ns;
            self.connect(deadline)?;
            let frames = self.client.request_batch(chunk)?;
            self.tx.extend_from_slice(&frames);
            self.exchange(deadline, |c, bytes| {
                c.feed_batch(bytes, &mut out)?;
                Ok(c.batch_pending() == 0)
            })?;
            self.calls += chunk.len() as u64;
        }
        Ok(out)
    }

    /// Hand the socket what it takes of the unsent frames.
    fn flush_tx(&mut self) -> Result<(), Errno> {
        if self.tx.is_empty() {
            return Ok(());
        }
        let s = self.stack.socket();
        if !s.may_send() {
            return Err(self.drop_connection("peer closed while sending"));
        }
        match s.send_slice(&self.tx) {
            Ok(n) => {
                self.tx.drain(..n);
                self.bytes_out += n as u64;
                Ok(())
            }
            Err(_) => Err(self.drop_connection("send failed")),
        }
    }

    /// Send the unsent frames, then hand every received byte to `take`
    /// until it says the exchange is complete; halts on the NIC while
    /// waiting. Any error or the deadline drops the connection (the next
    /// call reconnects).
    fn exchange(
        &mut self,
        deadline: u64,
        mut take: impl FnMut(&mut NetClient, &[u8]) -> Result<bool, Errno>,
    ) -> Result<(), Errno> {
        loop {
            self.flush_tx()?;
            self.stack.poll();
            if self.receive(&mut take)? {
                return Ok(());
            }
            if !self.stack.socket().may_recv() && self.tx.is_empty() {
                return Err(self.drop_connection("peer closed before answering"));
            }
            if time::now_ns() > deadline {
                return Err(self.drop_connection("no answer before the RPC timeout"));
            }
            if !self.stack.due() {
                // Halt at once: spinning here would keep this instance's
                // QEMU I/O thread, which carries the answer, off the core.
                self.stack.idle();
            }
        }
    }

    /// Send `req` without waiting (a task's call in flight): its tag. The
    /// answer is kept for [`NetConn::take`]; the connection's order holds
    /// for everything sent after it.
    pub fn start(&mut self, req: &Request) -> Result<u32, Errno> {
        let tag = self.start_later(req)?;
        self.flush_tx()?;
        self.stack.poll();
        Ok(tag)
    }

    /// [`NetConn::start`] that leaves the frame unsent until
    /// [`NetConn::send_started`] (or the next call, take or wait): the
    /// reads of one flush go out together, in one segment where they fit,
    /// not one segment (and one interrupt at each end) per read.
    pub fn start_later(&mut self, req: &Request) -> Result<u32, Errno> {
        let deadline = time::now_ns() + self.timeout_ns;
        self.connect(deadline)?;
        let (tag, frame) = self.client.start(req);
        self.tx.extend_from_slice(&frame);
        Ok(tag)
    }

    /// Send the frames [`NetConn::start_later`] left unsent.
    pub fn send_started(&mut self) {
        if self.flush_tx().is_ok() {
            self.stack.poll();
        }
    }

    /// The answer to started request `tag`, taking in what arrived (see
    /// [`NetClient::take`]); a broken connection loses it (`Unavailable`).
    pub fn take(&mut self, tag: u32) -> Option<Result<Response, Errno>> {
        if let Some(r) = self.client.take(tag) {
            return Some(self.answered(r));
        }
        if let Err(e) = self.pump() {
            return Some(Err(e));
        }
        self.client.take(tag).map(|r| self.answered(r))
    }

    /// [`NetConn::take`] without taking anything in: `None` until an
    /// earlier pump or take received its answer.
    pub fn take_kept(&mut self, tag: u32) -> Option<Result<Response, Errno>> {
        let r = self.client.take(tag)?;
        Some(self.answered(r))
    }

    /// Send what is unsent and take in what arrived (once for a round of
    /// [`NetConn::take_kept`]); a broken connection is dropped, and its
    /// started requests are then answered `Unavailable`.
    pub fn pump_started(&mut self) {
        let _ = self.pump();
    }

    fn answered(&mut self, r: Result<Response, Errno>) -> Result<Response, Errno> {
        if r.is_ok() {
            self.calls += 1;
        }
        r
    }

    /// Hand the bytes received so far to `take` until it says the
    /// exchange is complete (`true`) or none are left (`false`); a
    /// receive error or a malformed answer drops the connection.
    fn receive(
        &mut self,
        take: &mut impl FnMut(&mut NetClient, &[u8]) -> Result<bool, Errno>,
    ) -> Result<bool, Errno> {
        let mut buf = [0u8; 16 * 1024];
        loop {
            let s = self.stack.socket();
            if !s.can_recv() {
                return Ok(false);
            }
            let n = match s.recv_slice(&mut buf) {
                Ok(n) => n,
                Err(_) => return Err(self.drop_connection("receive failed")),
            };
            self.bytes_in += n as u64;
            match take(&mut self.client, &buf[..n]) {
                Ok(true) => return Ok(true),
                Ok(false) => {}
                Err(_) => return Err(self.drop_connection("malformed answer")),
            }
        }
    }

    /// Send what is unsent and take in what arrived, for started requests.
    fn pump(&mut self) -> Result<(), Errno> {
        self.flush_tx()?;
        self.stack.poll();
        self.receive(&mut |c, bytes| c.feed_started(bytes).map(|()| false))?;
        if self.client.outstanding() > 0 && !self.stack.socket().may_recv() {
            return Err(self.drop_connection("peer closed before answering"));
        }
        Ok(())
    }

    /// The caller of started request `tag` gave up.
    pub fn forget(&mut self, tag: u32) {
        self.client.forget(tag);
    }

    /// Nothing else to do: send what is unsent, then halt until the NIC's
    /// interrupt or a timer (unless the stack has work due).
    pub fn wait(&mut self) {
        if self.flush_tx().is_err() {
            return;
        }
        self.stack.poll();
        if !self.stack.due() {
            self.stack.idle();
        }
    }
}

// ---------------------------------------------------------------------
// Directory side

/// The directory's end of one link.
pub struct DirLink {
    stack: Stack,
    node: u32,
    /// The epoch of the node's membership this link serves; `None`: the
    /// node is not up, the link is closed (a SYN gets a reset).
    epoch: Option<u64>,
    reader: FrameReader,
    /// The connection's requests whose answers are not sent yet, in
    /// order (a later one may be answered first: `serve_net` answers
    /// what waits for the disk later).
    order: AnswerOrder<netwire::Frame>,
    out: Vec<u8>,
    out_off: usize,
}

impl DirLink {
    /// Bring up the directory's end of `node`'s link and listen.
    pub fn new(nic: Nic, node: u32) -> DirLink {
        let mut l = DirLink {
            stack: Stack::new(nic, addr(node, 1)),
            node,
            epoch: None,
            reader: FrameReader::new(),
            order: AnswerOrder::new(),
            out: Vec::new(),
            out_off: 0,
        };
        l.close();
        l
    }

    /// Follow the node's membership: `epoch` is its current epoch if it
    /// is up. When it leaves or fails, its connection is aborted (a reset
    /// goes out) and the link stops listening; when it rejoins (a new
    /// epoch), whatever connection the old session had is aborted and the
    /// link listens again.
    pub fn set_member(&mut self, epoch: Option<u64>) {
        if epoch == self.epoch {
            return;
        }
        let had = !matches!(
            self.stack.socket().state(),
            tcp::State::Closed | tcp::State::Listen
        );
        self.epoch = epoch;
        match epoch {
            Some(e) => {
                if had {
                    log::info!(
                        "net: link to node {}: node rejoined (epoch {e}): old connection reset",
                        self.node
                    );
                }
                self.relisten();
            }
            None => {
                log::info!(
                    "net: link to node {}: node is not up: {}link closed (connections refused)",
                    self.node,
                    if had { "connection reset, " } else { "" }
                );
                self.close();
            }
        }
    }

    /// Abort any connection (the reset goes out now) and do not listen.
    fn close(&mut self) {
        self.reader = FrameReader::new();
        self.order.reset();
        self.out.clear();
        self.out_off = 0;
        self.stack.socket().abort();
        self.stack.poll();
    }

    fn relisten(&mut self) {
        self.close();
        if self.epoch.is_none() {
            return;
        }
        // Keep-alive on: see `nodepath::netlink` (a dead connection
        // would hold the link's one socket for good).
        if let Err(e) = netlink::listen(self.stack.socket(), netwire::PORT, Some(KEEPALIVE_MS)) {
            log::error!("net: link to node {}: listen: {e}", self.node);
        }
    }

    /// The node at the other end.
    pub fn node(&self) -> u32 {
        self.node
    }

    /// Arm this link's wakeup; true if work is already waiting (requests
    /// received count only while the link reads them: with
    /// `WAITING_MAX` answers outstanding it waits for the disk first).
    pub fn arm(&mut self) -> bool {
        let reading = self.order.len() < WAITING_MAX;
        self.out_off < self.out.len()
            || self.stack.arm()
            || (reading && self.stack.socket().can_recv())
    }

    /// The answer to the request of `token`, served later: sent once every
    /// earlier request of the connection is answered (dropped if the
    /// connection it was for is gone).
    pub fn answer(&mut self, token: u64, frame: netwire::Frame) {
        if self.order.answer(token, frame) {
            self.release();
        }
    }

    /// Queue the answers that may go out now (in request order).
    fn release(&mut self) {
        if !self.order.ready() {
            return;
        }
        if self.out_off == self.out.len() {
            self.out.clear();
            self.out_off = 0;
        }
        for r in self.order.release() {
            netwire::encode_frame(&r.desc, &r.payload, &mut self.out);
        }
    }

    /// Serve what arrived on this link: `handle` serves one request frame
    /// with the token for its answer, and returns the answer if it is
    /// ready now (else it comes through [`DirLink::answer`]). Returns the
    /// number of frames served. Unless `accept`, nothing more is read from
    /// the peer (the directory's write queue is full: TCP throttles it);
    /// answers still go out.
    pub fn serve(
        &mut self,
        accept: bool,
        mut handle: impl FnMut(u32, u64, &netwire::Frame) -> Option<netwire::Frame>,
    ) -> usize {
        let pending_out = self.out_off < self.out.len();
        if !pending_out && !self.stack.due() && !self.stack.socket().can_recv() {
            return 0;
        }
        self.stack.poll();
        let mut served = 0;
        match dir_step(self.stack.socket().state(), self.epoch.is_some()) {
            DirStep::Serve => {}
            DirStep::Finish => {
                // The node closed its end: finish ours, then listen again.
                self.stack.socket().close();
            }
            // Not up: stay closed; frames still need polling (a SYN from
            // the node's old life gets a reset).
            DirStep::StayClosed => return 0,
            DirStep::Relisten => {
                log::info!("net: link to node {}: connection closed", self.node);
                self.relisten();
                return 0;
            }
        }
        let mut buf = [0u8; 16 * 1024];
        loop {
            // Backpressure: a peer that sends requests without reading the
            // answers, or whose answers wait for the disk, stops being
            // read (TCP then throttles it).
            if !accept || self.out.len() - self.out_off > OUT_MAX || self.order.len() >= WAITING_MAX
            {
                break;
            }
            let s = self.stack.socket();
            if !s.can_recv() {
                break;
            }
            match s.recv_slice(&mut buf) {
                Ok(n) => self.reader.push(&buf[..n]),
                Err(_) => break,
            }
            loop {
                match self.reader.next_frame() {
                    Ok(Some(f)) => {
                        let token = self.order.push(None);
                        if let Some(r) = handle(self.node, token, &f) {
                            self.order.answer(token, r);
                        }
                        self.release();
                        served += 1;
                    }
                    Ok(None) => break,
                    Err(e) => {
                        log::warn!(
                            "net: link to node {}: malformed frame ({e:?}); dropping the connection",
                            self.node
                        );
                        self.relisten();
                        return served;
                    }
                }
            }
        }
        if self.out_off < self.out.len() {
            let s = self.stack.socket();
            if s.may_send() {
                if let Ok(n) = s.send_slice(&self.out[self.out_off..]) {
                    self.out_off += n;
                }
            }
            self.stack.poll();
        }
        served
    }
}
