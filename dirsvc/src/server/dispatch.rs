//! Dispatch: polling every member's ack and request rings, decoding,
//! routing (page requests to the page directory, the rest to the file
//! server), and publishing answers and notices.

use alloc::collections::VecDeque;
use alloc::vec;
use alloc::vec::Vec;

use fabric::bulk::ShmBulk;
use fabric::layout::{Header, NodeState};
use fabric::proto::{
    op_of, DecodeError, Desc, Errno, Notice, Op, PageReq, PageSpan, Raw, Request, Response,
};
use fabric::ring::{Producer, RingError};
use fabric::shm::SharedMem;
use flatfs::BlockDevice;

use super::reply::Via;
use super::writes::Then;
use super::{Directory, Event, InvOut, Poll};
use crate::pagedir::Action;

impl<D: BlockDevice> Directory<D> {
    /// Serve up to `cfg.batch` requests of every member.
    pub fn serve(&mut self, mem: &(impl SharedMem + ?Sized)) -> Poll {
        let mut out = Poll {
            completed: self.poll_disk(mem),
            ..Poll::default()
        };
        for node in 1..=self.layout.max_nodes {
            if !self.peers[(node - 1) as usize].member {
                continue;
            }
            match self.serve_node(mem, node) {
                Ok(n) => out.served += n,
                Err(error) => self.corrupt(mem, node, error, &mut out),
            }
            if let Some(e) = self.last_bad.take() {
                out.events.push(e);
            }
        }
        self.requests += out.served as u64;
        self.take_quiet_acks(mem, &mut out);
        self.take_deliveries(&mut out);
        out
    }

    /// `node`'s rings are corrupt: fail it (its pages are torn down once
    /// it is fenced, `server/fencing.rs`).
    pub(super) fn corrupt(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        node: u32,
        error: RingError,
        out: &mut Poll,
    ) {
        self.peers[(node - 1) as usize].member = false;
        Header::new(mem, self.layout).set_node_state(node, NodeState::Failed);
        out.events.push(Event::Corrupt { node, error });
        self.failed(mem, node, out);
    }

    /// Which nodes' response or notify rings moved since the last report
    /// (whatever published them: a request, an ack, a lost member). A
    /// node whose new notices were all DIR_INVs taken as acknowledged
    /// (`server/quiet.rs`) is not reported: it need not wake for them.
    fn take_deliveries(&mut self, out: &mut Poll) {
        for (i, p) in self.peers.iter_mut().enumerate().take(64) {
            let now = (p.resp.published(), p.notify.published());
            if now.0 != p.reported.0 {
                out.responded |= 1 << i;
            }
            let needs_wake =
                p.wake_notice || !p.invs_out.is_empty() || !p.notify_backlog.is_empty();
            if now.1 != p.reported.1 && needs_wake {
                out.noticed |= 1 << i;
            }
            p.wake_notice = false;
            p.reported = now;
        }
    }

    fn serve_node(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        node: u32,
    ) -> Result<usize, RingError> {
        let i = (node - 1) as usize;
        // Acks first: they complete invalidations others wait for.
        let acks = self.serve_acks(mem, node, 4 * self.cfg.batch)?;
        self.flush(mem, node)?;
        let mut served = 0;
        while served < self.cfg.batch {
            if !self.peers[i].backlog.is_empty() {
                break; // the node is not draining its responses
            }
            let Some(d) = self.peers[i].req.pop(mem)? else {
                break;
            };
            served += 1;
            self.handle(mem, node, &d);
        }
        // The sweep's last writes go to the queue before anything else.
        self.flush_write_group(mem);
        self.flush(mem, node)?;
        if served > 0 {
            self.batches[served.min(64)] += 1;
        }
        Ok(served + acks)
    }

    /// Take up to `max` acks from `node`'s ack ring; how many were taken.
    pub(super) fn serve_acks(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        node: u32,
        max: usize,
    ) -> Result<usize, RingError> {
        let i = (node - 1) as usize;
        let mut acks = 0;
        while acks < max {
            let Some(d) = self.peers[i].ack.pop(mem)? else {
                break;
            };
            acks += 1;
            match Notice::decode(&d) {
                Ok(Notice::InvAck { key, dirty }) => {
                    log::debug!("node {node}: ack {key:?} dirty={dirty}");
                    let arg = fabric::trace::key_arg(key.ino, key.idx);
                    fabric::trace::record(fabric::trace::Kind::AckTaken, node, 0, 0, arg);
                    let inv = InvOut {
                        span: PageSpan::page(key),
                        range: false,
                    };
                    if self.absorb_ack(node, inv) {
                        continue; // taken while it slept (`server/quiet.rs`)
                    }
                    let a = self.pages.ack(node as u8, key, dirty);
                    self.run(mem, a);
                }
                Ok(Notice::InvRangeAck { span, dirty }) => {
                    log::debug!("node {node}: range ack {span:?} dirty={dirty}");
                    let arg = fabric::trace::key_arg(span.ino, span.first);
                    fabric::trace::record(fabric::trace::Kind::AckTaken, node, 0, 0, arg);
                    if self.absorb_ack(node, InvOut { span, range: true }) {
                        continue;
                    }
                    let a = self.pages.ack_range(node as u8, span, dirty);
                    self.run(mem, a);
                }
                Ok(Notice::RevokeAck(key)) => self.revoke_acked(mem, node, key),
                Ok(
                    n @ (Notice::DirInv(_)
                    | Notice::InvRange(_)
                    | Notice::Sharers { .. }
                    | Notice::Revoke(_)
                    | Notice::ReplicasUsed
                    | Notice::Recall(_)),
                ) => {
                    let op = match n {
                        Notice::DirInv(_) => Op::DirInv,
                        Notice::InvRange(_) => Op::InvRange,
                        Notice::Revoke(_) => Op::Revoke,
                        Notice::ReplicasUsed => Op::ReplicasUsed,
                        Notice::Recall(_) => Op::DelegRecall,
                        _ => Op::Sharers,
                    };
                    self.last_bad = Some(Event::BadRequest {
                        node,
                        error: DecodeError::BadOpcode(op as u16),
                    })
                }
                Err(error) => self.last_bad = Some(Event::BadRequest { node, error }),
            }
        }
        Ok(acks)
    }

    /// Answer (now or later) one request descriptor from `node`, timing
    /// it if it is a miss (see `misstime`).
    fn handle(&mut self, mem: &(impl SharedMem + ?Sized), node: u32, d: &Desc) {
        self.miss.taken();
        self.handle_one(mem, node, d);
        self.miss.answered();
        self.miss.handled();
    }

    fn handle_one(&mut self, mem: &(impl SharedMem + ?Sized), node: u32, d: &Desc) {
        let (tag, req) = match Request::decode(d) {
            Ok(x) => x,
            Err(error) => {
                self.flush_write_group(mem);
                self.last_bad = Some(Event::BadRequest { node, error });
                self.respond(mem, node, Raw::invalid_answer(d));
                return;
            }
        };
        if !self.extends_write_group(node, &req) {
            // Whatever this request is, the writes before it are queued.
            self.flush_write_group(mem);
        }
        let op = op_of(&req);
        if fabric::trace::enabled() {
            let (op, arg) = fabric::trace::req_args(&req);
            fabric::trace::record(fabric::trace::Kind::Serve, node, tag, op, arg);
        }
        self.ops[(op as usize).min(31)] += 1;
        log::trace!("node {node} tag {tag}: {req:?}");
        if let Request::Page(p) = req {
            if self.fs.is_none() {
                self.respond(mem, node, Response::Err(Errno::Unavailable).encode(op, tag));
                return;
            }
            match p {
                PageReq::Promote { key } => return self.promote(mem, node, tag, key),
                PageReq::Unprotect { key } => return self.unprotect(mem, node, tag, key),
                _ => {}
            }
            self.page_ops.insert((node as u8, tag), op);
            log::debug!("node {node} tag {tag}: {p:?}");
            let before = self.sharer_view(&p.key());
            let busy = self.disk.in_flight() > 0;
            let writing = self.writes.in_flight() > 0;
            let a = self.pages.handle(&self.layout, node as u8, tag, p);
            let answered = a.iter().any(|x| {
                matches!(x, Action::Reply { node: n, tag: t, .. } if u32::from(*n) == node && *t == tag)
            });
            if busy && answered {
                self.disk.count_answered_while_busy();
            }
            if writing && answered {
                self.writes.count_answered_while_busy();
            }
            self.group_pages = true;
            self.run(mem, a);
            self.report_sharers(mem, p.key(), before);
            return;
        }
        if let Request::PageRun(run) = req {
            if self.fs.is_none() {
                self.respond(mem, node, Response::Err(Errno::Unavailable).encode(op, tag));
                return;
            }
            return self.page_run(mem, node as u8, tag, run);
        }
        if let Request::AppendLock { ino, hold, renew } = req {
            let resp = self
                .append_lock(node, ino, hold, renew)
                .unwrap_or_else(Response::Err);
            self.respond(mem, node, resp.encode(op, tag));
            return;
        }
        if let Err(e) = self
            .check_generation(&req)
            .and_then(|()| self.check_locked_publication(node, &req))
        {
            self.respond(mem, node, Response::Err(e).encode(op, tag));
            return;
        }
        if let Request::DaxFill { slot } = req {
            if let Some(resp) = self.dax_fill(mem, node, tag, slot) {
                self.respond(mem, node, resp.encode(op, tag));
            }
            return;
        }
        if let Request::Fsync { ino } = req {
            self.settle_sizes(mem, ino);
        }
        if self.defer_fsync(node, Via::Ring, op, tag, &req) {
            return; // answered once its file's writes landed
        }
        let read = super::fileread::ReadReq::of(node, tag, Via::Ring, &req);
        if let Some(r) = read.filter(|_| self.fill_depth() > 0) {
            // Asynchronous, as page fills (`server/fileread.rs`).
            if let Some((resp, _)) = self.read_file(mem, r) {
                self.respond(mem, node, resp.encode(op, tag));
            }
            return;
        }
        let ino = match req {
            Request::Data { ino, .. } | Request::Setattr { ino, .. } => ino,
            _ => 0,
        };
        let is_write = matches!(req, Request::Data { op: Op::Write, .. });
        let mut bulk = ShmBulk::new(mem, self.layout, node);
        self.defer_writes = self.async_writes();
        self.requester = u8::try_from(node).ok();
        let resp = self
            .execute(mem, &mut bulk, req)
            .unwrap_or_else(Response::Err);
        self.requester = None;
        self.defer_writes = false;
        let staged = core::mem::take(&mut self.staged);
        if staged.is_empty() {
            self.respond(mem, node, resp.encode(op, tag));
        } else if is_write {
            let ok = resp.encode(op, tag);
            self.group_write(node, ino, staged, (op, tag, ok), mem);
        } else {
            // A namespace change or truncation: a barrier job, answered
            // once it landed (a creation's file is known by its answer).
            let inos = match resp {
                Response::Attr(a) => vec![a.ino],
                _ if ino != 0 => vec![ino],
                _ => Vec::new(),
            };
            let ok = resp.encode(op, tag);
            let then = Then::Respond {
                node,
                via: Via::Ring,
                op,
                tag,
                ok,
            };
            self.queue_barrier(mem, inos, staged, then);
        }
    }

    /// Push backlogged responses and notifications of `node`.
    pub(super) fn flush(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        node: u32,
    ) -> Result<(), RingError> {
        let p = &mut self.peers[(node - 1) as usize];
        drain(mem, &mut p.resp, &mut p.backlog)?;
        while let Some(d) = p.notify_backlog.front() {
            match p.notify.push(mem, d) {
                Ok(()) => {}
                Err(RingError::Full) => break,
                Err(e) => return Err(e),
            }
            match Notice::decode(d) {
                Ok(Notice::DirInv(key)) => {
                    let arg = fabric::trace::key_arg(key.ino, key.idx);
                    fabric::trace::record(fabric::trace::Kind::InvSent, node, 0, 0, arg);
                    p.invs_out.push_back(InvOut {
                        span: PageSpan::page(key),
                        range: false,
                    })
                }
                Ok(Notice::InvRange(span)) => {
                    let arg = fabric::trace::key_arg(span.ino, span.first);
                    fabric::trace::record(fabric::trace::Kind::InvSent, node, 0, 0, arg);
                    p.invs_out.push_back(InvOut { span, range: true })
                }
                _ => p.wake_notice = true,
            }
            p.notify_backlog.pop_front();
        }
        Ok(())
    }

    /// Queue (or, when nothing is queued before it, publish at once) a
    /// response to `node`.
    pub(super) fn respond(&mut self, mem: &(impl SharedMem + ?Sized), node: u32, d: Desc) {
        fabric::trace::record(fabric::trace::Kind::Reply, node, Raw::decode(&d).tag, 0, 0);
        if let Some(p) = self.peers.get_mut((node as usize).wrapping_sub(1)) {
            if p.member && !(p.backlog.is_empty() && p.resp.push(mem, &d).is_ok()) {
                p.backlog.push_back(d);
            }
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
