//! The TCP policy of `net` mode's links, the same for the kernel's stack
//! (`kernel/src/net.rs`, smoltcp over its virtio-net NICs) and for the
//! host tests (smoltcp over an in-memory wire, `netlink/tests.rs`): the
//! socket's settings, what the directory's end of a link does in each
//! TCP state, and the node's connection attempts.
//!
//! A link has one socket at each end. If the node drops its connection
//! and its reset never reaches the directory (the directory's instance
//! was stopped, or the frame was lost), the directory's socket stays
//! established with a peer that is gone; having nothing to send, it
//! never learns it, and answers each new connection attempt of the node
//! (another port) with a reset. The directory's end therefore probes an
//! idle connection with a keep-alive every [`KEEPALIVE_MS`]: the node's
//! stack, which has no socket for the old connection, answers it with a
//! reset, and the link listens again ([`dir_step`]).

use alloc::vec;

use smoltcp::iface::Interface;
use smoltcp::socket::tcp;
use smoltcp::time::Duration;
use smoltcp::wire::IpEndpoint;

use crate::netclient::Backoff;

/// TCP send and receive buffer size (room for a 64 KiB frame and more; the
/// window scale option lets the peer use all of it).
pub const SOCK_BUF: usize = 128 * 1024;

/// The directory's end of a link probes an idle connection this often.
pub const KEEPALIVE_MS: u64 = 1_000;

/// The first local port of a node's connections (each attempt takes the
/// next).
pub const FIRST_PORT: u16 = 49152;

/// A link's socket. Nagle and delayed ACK are off: a request or answer
/// that ends mid-segment would otherwise wait for a timer.
pub fn new_socket() -> tcp::Socket<'static> {
    let mut s = tcp::Socket::new(
        tcp::SocketBuffer::new(vec![0; SOCK_BUF]),
        tcp::SocketBuffer::new(vec![0; SOCK_BUF]),
    );
    s.set_nagle_enabled(false);
    s.set_ack_delay(None);
    s
}

/// The directory's end listens on `port` again, probing an idle
/// connection every `keep_alive_ms` (the kernel: [`KEEPALIVE_MS`];
/// `None` only for the tests that show what it is for). No dead-peer
/// timeout: a node busy without calls polls nothing, and its live
/// connection must not be dropped for that.
pub fn listen(
    s: &mut tcp::Socket<'static>,
    port: u16,
    keep_alive_ms: Option<u64>,
) -> Result<(), tcp::ListenError> {
    s.set_keep_alive(keep_alive_ms.map(Duration::from_millis));
    s.listen(port)
}

/// What the directory's end of a link does, its socket in `state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirStep {
    /// Serve what arrived (listening, connecting, connected, or closing
    /// with answers still to go).
    Serve,
    /// The node closed its end: close ours (then listen again).
    Finish,
    /// The node is not a member: stay closed (frames are still polled, so
    /// a SYN from its old life gets a reset).
    StayClosed,
    /// The connection is gone (closed by either end, reset, or found dead
    /// by a keep-alive's reset): listen again.
    Relisten,
}

/// [`DirStep`] for a socket in `state`, the node a member or not.
pub fn dir_step(state: tcp::State, member: bool) -> DirStep {
    match state {
        tcp::State::Listen
        | tcp::State::SynSent
        | tcp::State::SynReceived
        | tcp::State::Established
        | tcp::State::FinWait1
        | tcp::State::FinWait2
        | tcp::State::LastAck => DirStep::Serve,
        tcp::State::CloseWait => DirStep::Finish,
        tcp::State::Closed if !member => DirStep::StayClosed,
        tcp::State::Closed | tcp::State::TimeWait | tcp::State::Closing => DirStep::Relisten,
    }
}

/// Where a node's connection attempts stand ([`Connector::step`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connect {
    /// Connected, after this many failed attempts.
    Up { failed: u32 },
    /// An attempt just went out (a connection's staged state must be
    /// reset: nothing of an older connection is answered on it).
    Attempted,
    /// Waiting for an answer, or for the next attempt's time.
    Waiting,
    /// No attempt left ([`Backoff::MAX_TRIES`] refused).
    GaveUp { tries: u32 },
    /// The stack refused to start an attempt.
    Error,
}

/// A node's attempts to connect for one call: an attempt refused or reset
/// (the directory's end still holds a connection it has not seen die, or
/// is not listening yet) is tried again, from the next local port, after
/// a wait that grows ([`Backoff`]); the caller stops at its deadline.
#[derive(Debug, Default)]
pub struct Connector {
    backoff: Backoff,
    attempted: bool,
    retry_at: u64,
}

impl Connector {
    /// Attempts that failed so far.
    pub fn failed(&self) -> u32 {
        self.backoff.tries()
    }

    /// One step at `now_ns` (after a poll of the stack): connect `s` to
    /// `remote` from port `*next_port` (then advanced) when an attempt is
    /// due.
    pub fn step(
        &mut self,
        now_ns: u64,
        iface: &mut Interface,
        s: &mut tcp::Socket<'static>,
        remote: IpEndpoint,
        next_port: &mut u16,
    ) -> Connect {
        match s.state() {
            tcp::State::Established => Connect::Up {
                failed: self.backoff.tries(),
            },
            tcp::State::Closed => {
                if self.attempted {
                    self.attempted = false;
                    match self.backoff.failed() {
                        Some(w) => self.retry_at = now_ns.saturating_add(w),
                        None => {
                            return Connect::GaveUp {
                                tries: self.backoff.tries(),
                            }
                        }
                    }
                }
                if now_ns < self.retry_at {
                    return Connect::Waiting;
                }
                let port = *next_port;
                *next_port = if port == u16::MAX {
                    FIRST_PORT
                } else {
                    port + 1
                };
                if let Err(e) = s.connect(iface.context(), remote, port) {
                    log::warn!("net: connect: {e}");
                    return Connect::Error;
                }
                self.attempted = true;
                Connect::Attempted
            }
            tcp::State::SynSent | tcp::State::SynReceived => Connect::Waiting,
            _ => {
                // Half-closed or closing: start over.
                s.abort();
                Connect::Waiting
            }
        }
    }
}

#[cfg(test)]
mod tests;
