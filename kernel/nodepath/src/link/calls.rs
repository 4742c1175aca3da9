//! Calls that nobody blocks on: a task's metadata call is sent
//! ([`Link::start_call`]), and its answer is picked up later
//! ([`Link::poll_call`]). On the rings, by whoever reads the response ring
//! first (a data batch waiting for its own answers stores it on the way,
//! see [`crate::client::Client::register`]); in `net` mode, by whoever
//! reads the TCP stream first (a synchronous call or a read batch keeps
//! the answers it meets, see [`crate::netclient::NetClient`]). Several
//! such calls are in flight together; the directory serves a node's
//! requests in order (ring or connection), so calls sent one after the
//! other take effect in that order.

use fabric::proto::{Errno, Op, Request, Response};

use super::{wait_once, Link, Session};
use crate::env::{Env, FileServer};

impl<E: Env> Link<E> {
    /// Send `req` (on the rings, or over `net` mode's connection) and
    /// return its tag without waiting; its answer is kept for
    /// [`Link::poll_call`].
    pub fn start_call(&mut self, req: &Request, svc: &mut dyn Session<E>) -> Result<u32, Errno> {
        self.start_call_in(req, svc, false)
    }

    /// [`Link::start_call`] whose frame may wait (`net` mode) until
    /// [`Link::send_started`] (or the next call, poll or wait): several
    /// calls started together go out together. On the rings the same as
    /// [`Link::start_call`].
    pub fn start_call_later(
        &mut self,
        req: &Request,
        svc: &mut dyn Session<E>,
    ) -> Result<u32, Errno> {
        self.start_call_in(req, svc, true)
    }

    /// Send what [`Link::start_call_later`] left waiting.
    pub fn send_started(&mut self) {
        if let Some(net) = self.net() {
            net.send_started();
        }
    }

    fn start_call_in(
        &mut self,
        req: &Request,
        svc: &mut dyn Session<E>,
        later: bool,
    ) -> Result<u32, Errno> {
        if !self.rings() {
            let deadline = self.env.now_ns().saturating_add(self.rpc_timeout_ns);
            let net = self.net().ok_or(Errno::Unavailable)?;
            let tag = if later {
                net.start_later(req)?
            } else {
                net.start(req)?
            };
            self.net_calls.insert(tag, deadline);
            return Ok(tag);
        }
        let tag = self.send(req, svc)?;
        let deadline = self.env.now_ns().saturating_add(self.rpc_timeout_ns);
        let client = self.client.as_mut().ok_or(Errno::Unavailable)?;
        client.register(tag, deadline);
        // A new request: the wait for answers starts now, with its spin
        // (else a wait whose spin ran out long ago would halt at once and
        // need a doorbell for an answer due in microseconds).
        self.calls_wait.reset();
        Ok(tag)
    }

    /// The answer to the call `tag` of opcode `op`, if it came: `None`
    /// while it is in flight; `Unavailable` past its give-up time or if
    /// the session that sent it is gone (the answer is then late).
    pub fn poll_call(&mut self, tag: u32, op: Op) -> Option<Result<Response, Errno>> {
        let now = self.env.now_ns();
        if !self.rings() {
            return self.poll_net_call(tag, op, now);
        }
        let Some(client) = self.client.as_mut() else {
            return Some(Err(Errno::Unavailable));
        };
        // Take in what came: registered answers are stored, the rest is
        // late (no synchronous call is waiting while a task polls).
        loop {
            match client.recv(self.env.mem()) {
                Ok(Some((t, d))) => client.keep_late(t, d),
                Ok(None) => break,
                Err(e) => return Some(Err(e)),
            }
        }
        let (deadline, answered) = match client.registered(tag) {
            None => return Some(Err(Errno::Unavailable)),
            Some((deadline, a)) => (deadline, a.is_some()),
        };
        if answered {
            let d = client.unregister(tag)?;
            self.calls_wait.reset(); // progress
            self.reported = false;
            return Some(match Response::decode(&d, op) {
                Ok((_, Response::Err(e))) => Err(e),
                Ok((_, r)) => Ok(r),
                Err(_) => Err(Errno::Io),
            });
        }
        if now > deadline {
            client.unregister(tag);
            log::warn!("call {tag} ({op:?}): no answer within the call timeout");
            return Some(Err(Errno::Unavailable));
        }
        None
    }

    /// Take in what arrived for the calls in flight, once for a round of
    /// [`Link::poll_call_kept`] (`net` mode: one pass over the socket, not
    /// one per call still in flight; on the rings each poll reads the
    /// ring anyway).
    pub fn take_in(&mut self) {
        if let Some(net) = self.net() {
            net.pump();
        }
    }

    /// [`Link::poll_call`] after [`Link::take_in`]: in `net` mode it looks
    /// only at what was taken in.
    pub fn poll_call_kept(&mut self, tag: u32, op: Op) -> Option<Result<Response, Errno>> {
        if self.rings() {
            return self.poll_call(tag, op);
        }
        let now = self.env.now_ns();
        self.poll_net_call_in(tag, op, now, true)
    }

    /// `net` mode's [`Link::poll_call`].
    fn poll_net_call(&mut self, tag: u32, op: Op, now: u64) -> Option<Result<Response, Errno>> {
        self.poll_net_call_in(tag, op, now, false)
    }

    fn poll_net_call_in(
        &mut self,
        tag: u32,
        op: Op,
        now: u64,
        kept: bool,
    ) -> Option<Result<Response, Errno>> {
        let Some(&deadline) = self.net_calls.get(&tag) else {
            return Some(Err(Errno::Unavailable));
        };
        let Some(net) = self.net() else {
            self.net_calls.remove(&tag);
            return Some(Err(Errno::Unavailable));
        };
        let r = if kept {
            net.take_kept(tag)
        } else {
            net.take(tag)
        };
        match r {
            Some(r) => {
                self.net_calls.remove(&tag);
                if r.is_ok() {
                    self.calls_wait.reset(); // progress
                }
                Some(match r {
                    Ok(Response::Err(e)) => Err(e),
                    r => r,
                })
            }
            None if now > deadline => {
                net.forget(tag);
                self.net_calls.remove(&tag);
                log::warn!("call {tag} ({op:?}): no answer within the call timeout");
                Some(Err(Errno::Unavailable))
            }
            None => None,
        }
    }

    /// Calls sent with [`Link::start_call`] still waiting for an answer.
    pub fn calls_in_flight(&self) -> usize {
        if !self.rings() {
            return self.net_calls.len();
        }
        self.client
            .as_ref()
            .map(|c| c.registered_waiting())
            .unwrap_or(0)
    }

    /// Nothing else to do: one wait step for the answers of the calls in
    /// flight (spin, then sleep until a doorbell or the wait's give-up
    /// time; notices are serviced meanwhile). False once the wait gave
    /// up (the calls' own give-up times then end them).
    pub fn wait_calls(&mut self, svc: &mut dyn Session<E>) -> bool {
        if !self.rings() {
            if self.net_calls.is_empty() {
                return true;
            }
            return match self.net() {
                Some(net) => {
                    net.wait();
                    true
                }
                None => false,
            };
        }
        let Some(layout) = self.layout else {
            return false;
        };
        if self.calls_in_flight() == 0 {
            return true;
        }
        wait_once(&self.env, layout, self.id, false, &mut self.calls_wait, svc)
    }
}
