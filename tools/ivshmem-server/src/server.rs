//! The event loop: accept clients, hand out fds, drop clients that leave,
//! send a byte, or stop reading.

use std::collections::BTreeMap;
use std::io::{self, IoSlice, Read};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::rc::Rc;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::eventfd::{EfdFlags, EventFd};
use nix::sys::signal::Signal;
use nix::sys::signalfd::SignalFd;
use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags};

use crate::log::Log;
use crate::outbox::Outbox;
use crate::peers::{FdRef, Outgoing, PeerId, PeerTable};

const LISTENER: u64 = 0;
const SIGNALS: u64 = 1;
const FIRST_CLIENT: u64 = 2;

/// Most messages queued for one client: a full setup with 64 vectors and
/// 1000 peers, and then some.
pub const BACKLOG_LIMIT: usize = 1 << 17;

struct Client {
    stream: UnixStream,
    /// Our own eventfds, one per vector. Queued messages hold clones, so an
    /// eventfd is closed once the peer is gone and no message carries it.
    eventfds: Vec<Rc<OwnedFd>>,
    outbox: Outbox<Rc<OwnedFd>>,
    /// EPOLLOUT is armed (the outbox was not empty after the last flush).
    want_out: bool,
}

pub struct Server {
    listener: UnixListener,
    signals: SignalFd,
    epoll: Epoll,
    shm: Rc<OwnedFd>,
    table: PeerTable,
    clients: BTreeMap<PeerId, Client>,
    stall_timeout: Duration,
    log: Log,
    /// Fences failed nodes between events (`--fence-run-dir`).
    fencer: Option<crate::fencer::Fencer>,
}

fn io_err(e: Errno) -> io::Error {
    io::Error::from(e)
}

fn token(id: PeerId) -> u64 {
    FIRST_CLIENT + u64::from(id)
}

impl Server {
    /// A server on a bound, listening socket. `signals` must already have
    /// its signals blocked.
    pub fn new(
        listener: UnixListener,
        signals: SignalFd,
        shm: OwnedFd,
        vectors: u16,
        stall_timeout: Duration,
        log: Log,
    ) -> io::Result<Self> {
        listener.set_nonblocking(true)?;
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).map_err(io_err)?;
        epoll
            .add(&listener, EpollEvent::new(EpollFlags::EPOLLIN, LISTENER))
            .map_err(io_err)?;
        epoll
            .add(&signals, EpollEvent::new(EpollFlags::EPOLLIN, SIGNALS))
            .map_err(io_err)?;
        Ok(Server {
            listener,
            signals,
            epoll,
            shm: Rc::new(shm),
            table: PeerTable::new(vectors),
            clients: BTreeMap::new(),
            stall_timeout,
            log,
            fencer: None,
        })
    }

    /// Fence failed nodes with `f` (polled every [`crate::fencer::POLL`]).
    pub fn set_fencer(&mut self, f: Option<crate::fencer::Fencer>) {
        self.fencer = f;
    }

    /// Serve until SIGTERM, SIGINT or SIGHUP; returns the signal.
    pub fn run(&mut self) -> io::Result<Signal> {
        let mut events = vec![EpollEvent::empty(); 64];
        loop {
            let timeout = self.next_timeout();
            let n = match self.epoll.wait(&mut events, timeout) {
                Ok(n) => n,
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(io_err(e)),
            };
            for ev in &events[..n] {
                match ev.data() {
                    LISTENER => self.accept_all(),
                    SIGNALS => {
                        if let Some(sig) = self.read_signal()? {
                            self.shutdown();
                            return Ok(sig);
                        }
                    }
                    t => {
                        let id = PeerId::try_from(t - FIRST_CLIENT).expect("client token");
                        self.client_event(id, ev.events());
                    }
                }
            }
            self.drop_stalled();
            if let Some(f) = self.fencer.as_mut() {
                f.poll();
            }
        }
    }

    fn read_signal(&mut self) -> io::Result<Option<Signal>> {
        match self.signals.read_signal() {
            Ok(Some(info)) => {
                let sig = Signal::try_from(info.ssi_signo as i32).unwrap_or(Signal::SIGTERM);
                self.log.info(format_args!("{sig} received, shutting down"));
                Ok(Some(sig))
            }
            Ok(None) | Err(Errno::EAGAIN) | Err(Errno::EINTR) => Ok(None),
            Err(e) => Err(io_err(e)),
        }
    }

    /// Milliseconds until the earliest stalled client must be dropped.
    fn next_timeout(&self) -> EpollTimeout {
        let now = Instant::now();
        let next = self
            .clients
            .values()
            .filter_map(|c| c.outbox.deadline(self.stall_timeout))
            .min();
        let cap = match self.fencer {
            Some(_) => crate::fencer::POLL.as_millis(),
            None => 60_000,
        };
        match next {
            None if self.fencer.is_none() => EpollTimeout::NONE,
            None => EpollTimeout::try_from(cap as i32).unwrap_or(EpollTimeout::NONE),
            Some(d) => {
                let ms = d.saturating_duration_since(now).as_millis() + 1;
                EpollTimeout::try_from(ms.min(cap) as i32).unwrap_or(EpollTimeout::NONE)
            }
        }
    }

    fn accept_all(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => self.admit(stream),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // EMFILE and friends: keep serving the peers we have.
                    self.log.warn(format_args!("accept failed: {e}"));
                    return;
                }
            }
        }
    }

    fn admit(&mut self, stream: UnixStream) {
        let Some(id) = self.table.next_id() else {
            self.log.warn(format_args!(
                "refusing a client: all 65536 peer ids have been used"
            ));
            return;
        };
        let client = match self.new_client(id, stream) {
            Ok(c) => c,
            Err(e) => {
                self.log
                    .warn(format_args!("refusing a client (would be peer {id}): {e}"));
                return;
            }
        };
        self.clients.insert(id, client);
        let (admitted, plan) = self.table.admit().expect("an id was free");
        debug_assert_eq!(admitted, id);
        self.log.info(format_args!(
            "peer {id} connected ({} peers)",
            self.table.len()
        ));
        self.deliver(plan);
    }

    fn new_client(&self, id: PeerId, stream: UnixStream) -> io::Result<Client> {
        stream.set_nonblocking(true)?;
        let mut eventfds = Vec::new();
        for _ in 0..self.table.vectors() {
            let efd = EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)
                .map_err(io_err)?;
            eventfds.push(Rc::new(OwnedFd::from(efd)));
        }
        let flags = EpollFlags::EPOLLIN | EpollFlags::EPOLLRDHUP;
        self.epoll
            .add(&stream, EpollEvent::new(flags, token(id)))
            .map_err(io_err)?;
        Ok(Client {
            stream,
            eventfds,
            outbox: Outbox::new(BACKLOG_LIMIT),
            want_out: false,
        })
    }

    fn client_event(&mut self, id: PeerId, ev: EpollFlags) {
        if !self.clients.contains_key(&id) {
            return; // dropped earlier in this batch
        }
        if ev.intersects(EpollFlags::EPOLLIN | EpollFlags::EPOLLRDHUP) {
            let client = self.clients.get_mut(&id).expect("checked");
            let mut buf = [0u8; 64];
            let why = match client.stream.read(&mut buf) {
                Ok(0) => Some("disconnected".to_string()),
                Ok(n) => Some(format!("sent {n} byte(s); clients must not write")),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => None,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => None,
                Err(e) => Some(format!("read failed: {e}")),
            };
            if let Some(why) = why {
                return self.drop_peers(vec![(id, why)]);
            }
        }
        if ev.intersects(EpollFlags::EPOLLHUP | EpollFlags::EPOLLERR) {
            return self.drop_peers(vec![(id, "hung up".to_string())]);
        }
        if ev.contains(EpollFlags::EPOLLOUT) {
            let mut doomed = Vec::new();
            self.flush(id, &mut doomed);
            self.drop_peers(doomed);
        }
    }

    /// Queue a plan's messages, resolving fds, then flush every receiver.
    fn deliver(&mut self, plan: Vec<Outgoing>) {
        let mut doomed: Vec<(PeerId, String)> = Vec::new();
        let mut touched = Vec::new();
        for out in plan {
            let fd = match out.msg.fd {
                None => None,
                Some(FdRef::Shm) => Some(self.shm.clone()),
                Some(FdRef::Vector { peer, vector }) => self
                    .clients
                    .get(&peer)
                    .and_then(|c| c.eventfds.get(usize::from(vector)))
                    .cloned(),
            };
            if out.msg.fd.is_some() && fd.is_none() {
                // Cannot happen: plans only name fds of connected peers.
                self.log.warn(format_args!("no fd for {:?}", out.msg));
                continue;
            }
            if self.log.verbose() {
                self.log.debug(format_args!(
                    "to peer {}: {}{}",
                    out.to,
                    out.msg.value,
                    match out.msg.fd {
                        None => String::new(),
                        Some(FdRef::Shm) => " + shm fd".to_string(),
                        Some(FdRef::Vector { peer, vector }) =>
                            format!(" + eventfd (peer {peer}, vector {vector})"),
                    }
                ));
            }
            let Some(client) = self.clients.get_mut(&out.to) else {
                continue;
            };
            if client.outbox.push(out.msg.bytes(), fd).is_err() {
                if !doomed.iter().any(|(d, _)| *d == out.to) {
                    doomed.push((out.to, format!("backlog of {BACKLOG_LIMIT} messages full")));
                }
            } else if touched.last() != Some(&out.to) {
                touched.push(out.to);
            }
        }
        touched.sort_unstable();
        touched.dedup();
        for id in touched {
            self.flush(id, &mut doomed);
        }
        self.drop_peers(doomed);
    }

    /// Send what the client's socket takes; arm or disarm EPOLLOUT.
    fn flush(&mut self, id: PeerId, doomed: &mut Vec<(PeerId, String)>) {
        let Some(client) = self.clients.get_mut(&id) else {
            return;
        };
        let sock = client.stream.as_raw_fd();
        let result = client.outbox.flush(Instant::now(), |bytes, fd| {
            let iov = [IoSlice::new(bytes)];
            let raw;
            let cmsg;
            let cmsgs: &[ControlMessage] = match fd {
                Some(fd) => {
                    raw = [fd.as_raw_fd()];
                    cmsg = [ControlMessage::ScmRights(&raw)];
                    &cmsg
                }
                None => &[],
            };
            let flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
            sendmsg::<()>(sock, &iov, cmsgs, flags, None).map_err(io_err)
        });
        if let Err(e) = result {
            doomed.push((id, format!("send failed: {e}")));
            return;
        }
        let want_out = !client.outbox.is_empty();
        if want_out != client.want_out {
            let mut flags = EpollFlags::EPOLLIN | EpollFlags::EPOLLRDHUP;
            if want_out {
                flags |= EpollFlags::EPOLLOUT;
            }
            let mut ev = EpollEvent::new(flags, token(id));
            if let Err(e) = self.epoll.modify(client.stream.as_fd(), &mut ev) {
                doomed.push((id, format!("epoll: {e}")));
                return;
            }
            client.want_out = want_out;
        }
    }

    fn drop_stalled(&mut self) {
        let now = Instant::now();
        let doomed: Vec<_> = self
            .clients
            .iter()
            .filter(|(_, c)| c.outbox.is_stalled(now, self.stall_timeout))
            .map(|(&id, c)| {
                let why = format!(
                    "not reading: {} message(s) pending for {} ms",
                    c.outbox.len(),
                    self.stall_timeout.as_millis()
                );
                (id, why)
            })
            .collect();
        self.drop_peers(doomed);
    }

    /// Drop peers (and any peer that overflows while being told).
    fn drop_peers(&mut self, mut doomed: Vec<(PeerId, String)>) {
        while let Some((id, why)) = doomed.pop() {
            let Some(client) = self.clients.remove(&id) else {
                continue;
            };
            // Closing the stream removes it from the epoll set as well.
            let _ = self.epoll.delete(client.stream.as_fd());
            drop(client);
            let plan = self.table.remove(id);
            self.log.info(format_args!(
                "peer {id} removed: {why} ({} peers)",
                self.table.len()
            ));
            let before = self.clients.len();
            self.deliver(plan);
            debug_assert!(self.clients.len() <= before);
        }
    }

    /// Close every client (each is told of the others' departure, as
    /// QEMU's reference server does).
    fn shutdown(&mut self) {
        let ids: Vec<_> = self.clients.keys().copied().collect();
        for id in ids {
            self.drop_peers(vec![(id, "server shutting down".to_string())]);
        }
    }

    pub fn peer_count(&self) -> usize {
        self.table.len()
    }
}
