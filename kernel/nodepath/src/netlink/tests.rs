//! A link's two ends over an in-memory wire that can lose the frames
//! one end sends, on a simulated clock: the directory's end run as the
//! kernel's `DirLink` runs it ([`dir_step`], [`listen`]), the node's as
//! its `NetConn::connect` ([`Connector`]). The case the keep-alive is
//! for: the node drops its connection and its reset is lost, leaving
//! the directory's end established with a peer that is gone and nothing
//! to send on it.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::vec::Vec;

use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::phy::{Device, DeviceCapabilities, Medium, RxToken, TxToken};
use smoltcp::socket::tcp;
use smoltcp::time::Instant;
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr, IpEndpoint, Ipv4Address};

use super::*;

const PORT: u16 = fabric::netwire::PORT;
/// Simulated time per step of the loops.
const TICK_NS: u64 = 1_000_000;

/// Frames in flight each way; `lose[k]` drops what end `k` sends.
#[derive(Default)]
struct Wire {
    to: [VecDeque<Vec<u8>>; 2],
    lose: [bool; 2],
    lost: [u64; 2],
}

/// End `me` (0: the directory, 1: the node) of the wire.
struct Port {
    me: usize,
    wire: Rc<RefCell<Wire>>,
}

struct Rx(Vec<u8>);

struct Tx<'a>(&'a mut Port);

impl RxToken for Rx {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0)
    }
}

impl TxToken for Tx<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut buf = vec![0u8; len];
        let r = f(&mut buf);
        let mut w = self.0.wire.borrow_mut();
        let me = self.0.me;
        if w.lose[me] {
            w.lost[me] += 1;
        } else {
            w.to[1 - me].push_back(buf);
        }
        r
    }
}

impl Device for Port {
    type RxToken<'a> = Rx;
    type TxToken<'a> = Tx<'a>;

    fn receive(&mut self, _now: Instant) -> Option<(Rx, Tx<'_>)> {
        let f = self.wire.borrow_mut().to[self.me].pop_front()?;
        Some((Rx(f), Tx(self)))
    }

    fn transmit(&mut self, _now: Instant) -> Option<Tx<'_>> {
        Some(Tx(self))
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = 1514;
        caps
    }
}

/// One end: interface, its one socket, its port on the wire.
struct End {
    port: Port,
    iface: Interface,
    sockets: SocketSet<'static>,
    tcp: SocketHandle,
}

impl End {
    fn new(wire: &Rc<RefCell<Wire>>, me: usize, now: Instant) -> End {
        let mut port = Port {
            me,
            wire: wire.clone(),
        };
        let mac = EthernetAddress([2, 0, 0, 0, 0, me as u8 + 1]);
        let mut cfg = Config::new(HardwareAddress::Ethernet(mac));
        cfg.random_seed = 0x5eed + me as u64;
        let mut iface = Interface::new(cfg, &mut port, now);
        iface.update_ip_addrs(|a| {
            let _ = a.push(IpCidr::new(IpAddress::Ipv4(ip(me)), 24));
        });
        let mut sockets = SocketSet::new(Vec::new());
        let tcp = sockets.add(new_socket());
        End {
            port,
            iface,
            sockets,
            tcp,
        }
    }

    fn poll(&mut self, now: Instant) {
        self.iface.poll(now, &mut self.port, &mut self.sockets);
    }

    fn socket(&mut self) -> &mut tcp::Socket<'static> {
        self.sockets.get_mut::<tcp::Socket>(self.tcp)
    }
}

fn ip(me: usize) -> Ipv4Address {
    Ipv4Address::new(10, 0, 1, me as u8 + 1)
}

/// The link: the directory's end (listening, a member), the node's, the
/// wire and the clock.
struct Link {
    wire: Rc<RefCell<Wire>>,
    dir: End,
    node: End,
    keep_alive_ms: Option<u64>,
    next_port: u16,
    now_ns: u64,
}

impl Link {
    fn new(keep_alive_ms: Option<u64>) -> Link {
        let wire = Rc::new(RefCell::new(Wire::default()));
        let t = Instant::from_micros(0);
        let mut l = Link {
            dir: End::new(&wire, 0, t),
            node: End::new(&wire, 1, t),
            wire,
            keep_alive_ms,
            next_port: FIRST_PORT,
            now_ns: 0,
        };
        l.relisten();
        l
    }

    fn now(&self) -> Instant {
        Instant::from_micros((self.now_ns / 1000) as i64)
    }

    /// The directory's `DirLink::relisten`: abort (the reset goes out),
    /// listen again.
    fn relisten(&mut self) {
        let now = self.now();
        self.dir.socket().abort();
        self.dir.poll(now);
        let k = self.keep_alive_ms;
        listen(self.dir.socket(), PORT, k).unwrap();
    }

    /// One step of the directory's end (`DirLink::serve`): poll, act on
    /// the socket's state, take what arrived.
    fn dir_serve(&mut self) -> Vec<u8> {
        let now = self.now();
        self.dir.poll(now);
        let mut got = Vec::new();
        match dir_step(self.dir.socket().state(), true) {
            DirStep::Serve => {
                let s = self.dir.socket();
                while s.can_recv() {
                    let mut buf = [0u8; 512];
                    match s.recv_slice(&mut buf) {
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                        Err(_) => break,
                    }
                }
            }
            DirStep::Finish => self.dir.socket().close(),
            DirStep::StayClosed => {}
            DirStep::Relisten => self.relisten(),
        }
        got
    }

    /// Both ends run for one tick.
    fn tick(&mut self) -> Vec<u8> {
        self.now_ns += TICK_NS;
        let now = self.now();
        self.node.poll(now);
        self.dir_serve()
    }

    /// The node's `NetConn::connect` with `limit_ns` to succeed: the time
    /// it took and the failed attempts, or `None` (gave up, or out of
    /// time).
    fn connect(&mut self, limit_ns: u64) -> Option<(u64, u32)> {
        let start = self.now_ns;
        let remote = IpEndpoint::new(IpAddress::Ipv4(ip(0)), PORT);
        let mut c = Connector::default();
        while self.now_ns - start <= limit_ns {
            let now = self.now();
            self.node.poll(now);
            let End {
                iface,
                sockets,
                tcp: h,
                ..
            } = &mut self.node;
            let s = sockets.get_mut::<tcp::Socket>(*h);
            match c.step(self.now_ns, iface, s, remote, &mut self.next_port) {
                Connect::Up { failed } => return Some((self.now_ns - start, failed)),
                Connect::GaveUp { .. } | Connect::Error => return None,
                Connect::Attempted | Connect::Waiting => {}
            }
            self.tick();
        }
        None
    }

    /// The node sends `msg`; the directory receives it within a second.
    fn exchange(&mut self, msg: &[u8]) {
        assert_eq!(self.node.socket().send_slice(msg), Ok(msg.len()));
        let mut got = Vec::new();
        for _ in 0..1000 {
            got.extend(self.tick());
            if got.len() >= msg.len() {
                break;
            }
        }
        assert_eq!(got, msg, "the directory received the request");
    }

    /// The node drops its connection (`NetConn::drop_connection`: abort,
    /// the reset goes out) while what it sends is lost (`lose_reset`) or
    /// not; then both ends run idle for `idle_ns` with the wire whole.
    fn node_drops_connection(&mut self, lose_reset: bool, idle_ns: u64) {
        self.wire.borrow_mut().lose[1] = lose_reset;
        let now = self.now();
        self.node.socket().abort();
        self.node.poll(now);
        self.wire.borrow_mut().lose[1] = false;
        for _ in 0..idle_ns / TICK_NS {
            self.tick();
        }
    }
}

/// A connection up, a request through, then the node's reset lost: the
/// time the node's next connection took and its refused attempts.
fn reconnect_after_a_lost_reset(keep_alive_ms: Option<u64>, idle_ns: u64) -> Option<(u64, u32)> {
    let mut l = Link::new(keep_alive_ms);
    let up = l.connect(5_000_000_000);
    assert!(matches!(up, Some((_, 0))), "first connection: {up:?}");
    l.exchange(b"request 1");
    l.node_drops_connection(true, idle_ns);
    assert!(l.wire.borrow().lost[1] > 0, "the node's reset was lost");
    let r = l.connect(60_000_000_000);
    if r.is_some() {
        l.exchange(b"request 2");
    } else {
        // The dead connection still holds the directory's one socket.
        assert_eq!(l.dir.socket().state(), tcp::State::Established);
    }
    r
}

/// Without the keep-alive, a lost reset leaves the link dead: every new
/// connection of the node is refused (the directory's socket is held by
/// the old one, which it never probes) until the node gives up.
#[test]
fn without_the_keep_alive_a_lost_reset_leaves_the_link_dead() {
    let r = reconnect_after_a_lost_reset(None, 100_000_000);
    assert_eq!(r, None, "the link recovered without the keep-alive");
}

/// With the keep-alive, the link recovers: the directory's probe of the
/// idle dead connection draws a reset from the node's stack (polled while
/// it reconnects), the link listens again, and the node's next attempt
/// is accepted, within one keep-alive period plus the longest wait
/// between attempts ([`Backoff::MAX_NS`]). Both whether the node tries
/// at once or after the link sat idle.
#[test]
fn with_the_keep_alive_a_lost_reset_is_recovered_from() {
    let bound = KEEPALIVE_MS * 1_000_000 + Backoff::MAX_NS;
    for idle_ns in [0, 100_000_000, 2_500_000_000, 10_000_000_000] {
        let r = reconnect_after_a_lost_reset(Some(KEEPALIVE_MS), idle_ns);
        let Some((took, failed)) = r else {
            panic!("idle {idle_ns} ns: the link never recovered");
        };
        eprintln!("idle {idle_ns} ns: connected after {took} ns, {failed} refused attempts");
        assert!(
            took <= bound,
            "idle {idle_ns} ns: took {took} ns, {failed} refused attempts"
        );
        // Trying before the first probe, the node meets the dead
        // connection: refused until the probe frees it.
        if idle_ns < KEEPALIVE_MS * 1_000_000 {
            assert!(failed > 0, "idle {idle_ns} ns: no dead connection formed");
        }
    }
}

/// The dead connection forms only if the reset is lost: a reset that
/// arrives frees the directory's end at once, keep-alive or not.
#[test]
fn a_reset_that_arrives_frees_the_link_at_once() {
    for ka in [None, Some(KEEPALIVE_MS)] {
        let mut l = Link::new(ka);
        assert!(l.connect(5_000_000_000).is_some());
        l.exchange(b"request 1");
        l.node_drops_connection(false, 10_000_000);
        let r = l.connect(5_000_000_000);
        assert!(matches!(r, Some((_, 0))), "{ka:?}: {r:?}");
        l.exchange(b"request 2");
    }
}
