//! Dispatch: one sweep over every member (its acks first, through the
//! invalidation manager, then up to `Config::batch` requests), each
//! request decoded and routed once: a page request to the page directory
//! ([`Directory::page_request`]), a run to `runs.rs`, the rest to the
//! file server ([`Directory::file_request`]). Answers and notices go out
//! through `links.rs`.

use alloc::vec;
use alloc::vec::Vec;

use fabric::bulk::ShmBulk;
use fabric::proto::{op_of, Desc, Errno, Op, PageReq, Raw, Request, Response};
use fabric::ring::RingError;
use fabric::shm::SharedMem;
use flatfs::BlockDevice;

use super::reply::Via;
use super::writes::Then;
use super::{Directory, Event, Poll};
use crate::pagedir::Action;

impl<D: BlockDevice> Directory<D> {
    /// Serve up to `cfg.batch` requests of every member.
    pub fn serve(&mut self, mem: &(impl SharedMem + ?Sized)) -> Poll {
        let mut out = Poll {
            completed: self.poll_disk(mem),
            ..Poll::default()
        };
        for node in 1..=self.layout.max_nodes {
            if !self.members.is_member(node) {
                continue;
            }
            match self.serve_node(mem, node) {
                Ok(n) => out.served += n,
                Err(error) => self.corrupt(mem, node, error, &mut out),
            }
            if let Some(e) = self.counters.take_bad() {
                out.events.push(e);
            }
        }
        self.counters.count_requests(out.served as u64);
        self.take_quiet_acks(mem, &mut out);
        self.take_deliveries(&mut out);
        out
    }

    /// Which nodes' response or notify rings moved since the last report
    /// (whatever published them: a request, an ack, a lost member). A
    /// node whose new notices were all DIR_INVs taken as acknowledged
    /// (`server/inval/quiet.rs`) is not reported: it need not wake for them.
    fn take_deliveries(&mut self, out: &mut Poll) {
        let inval = &self.inval;
        self.links.take_deliveries(out, |node| inval.owes(node));
    }

    fn serve_node(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        node: u32,
    ) -> Result<usize, RingError> {
        // Acks first: they complete invalidations others wait for.
        let acks = self.serve_acks(mem, node, 4 * self.cfg.batch)?;
        self.flush(mem, node)?;
        let mut served = 0;
        while served < self.cfg.batch {
            if self.links.answers_waiting(node) {
                break; // the node is not draining its responses
            }
            if self.write_backlogged() {
                break; // the disk first: see `Config::write_backlog_max`
            }
            let Some(d) = self.links.pop_request(mem, node)? else {
                break;
            };
            served += 1;
            self.handle(mem, node, &d);
        }
        // The sweep's last writes go to the queue before anything else.
        self.flush_write_group(mem);
        self.flush(mem, node)?;
        self.counters.count_batch(served);
        Ok(served + acks)
    }

    /// Answer (now or later) one request descriptor from `node`, timing
    /// it if it is a miss (see `misstime`).
    fn handle(&mut self, mem: &(impl SharedMem + ?Sized), node: u32, d: &Desc) {
        self.counters.miss.taken();
        self.handle_one(mem, node, d);
        self.counters.miss.answered();
        self.counters.miss.handled();
    }

    /// Decode one request of `node`, count it, and route it: page
    /// requests to the page directory, runs to `runs.rs`, the rest to the
    /// file server.
    fn handle_one(&mut self, mem: &(impl SharedMem + ?Sized), node: u32, d: &Desc) {
        let (tag, req) = match Request::decode(d) {
            Ok(x) => x,
            Err(error) => {
                self.flush_write_group(mem);
                self.counters.bad(Event::BadRequest { node, error });
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
        self.counters.count_op(op);
        log::trace!("node {node} tag {tag}: {req:?}");
        match req {
            Request::Page(_) | Request::PageRun(_) if self.fs.is_none() => {
                self.respond(mem, node, Response::Err(Errno::Unavailable).encode(op, tag))
            }
            Request::Page(p) => self.page_request(mem, node, tag, op, p),
            Request::PageRun(run) => self.page_run(mem, node as u8, tag, run),
            req => self.file_request(mem, node, tag, op, req),
        }
    }

    /// A page request: replicas are served here (`replicas.rs`), the rest
    /// by the page directory, whose actions run at once; the page's owner
    /// learns a changed sharer count.
    fn page_request(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        node: u32,
        tag: u32,
        op: Op,
        p: PageReq,
    ) {
        match p {
            PageReq::Promote { key } => return self.promote(mem, node, tag, key),
            PageReq::Unprotect { key } => return self.unprotect(mem, node, tag, key),
            _ => {}
        }
        self.requests.asked(node as u8, tag, op);
        log::debug!("node {node} tag {tag}: {p:?}");
        let before = self.sharer_view(&p.key());
        let busy = self.io.disk.in_flight() > 0;
        let writing = self.io.writes.in_flight() > 0;
        let a = self.pages.handle(&self.layout, node as u8, tag, p);
        let answered = a.iter().any(|x| {
            matches!(x, Action::Reply { node: n, tag: t, .. } if u32::from(*n) == node && *t == tag)
        });
        if busy && answered {
            self.io.disk.count_answered_while_busy();
        }
        if writing && answered {
            self.io.writes.count_answered_while_busy();
        }
        self.io.batch.group_next();
        self.run(mem, a);
        self.report_sharers(mem, p.key(), before);
    }

    /// A request for the file server (or an append lock, a `daxfs` fill):
    /// answered now, or later once the disk did its part (an fsync, an
    /// asynchronous read, deferred writes).
    fn file_request(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        node: u32,
        tag: u32,
        op: Op,
        req: Request,
    ) {
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
        self.execute_ring(mem, node, tag, op, req);
    }

    /// Run a file-server request from the rings: its answer now, or, if
    /// its block writes were staged, once they landed (a write joins the
    /// sweep's write group; a namespace change or truncation is a barrier
    /// job).
    fn execute_ring(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        node: u32,
        tag: u32,
        op: Op,
        req: Request,
    ) {
        let ino = match req {
            Request::Data { ino, .. } | Request::Setattr { ino, .. } => ino,
            _ => 0,
        };
        let is_write = matches!(req, Request::Data { op: Op::Write, .. });
        let mut bulk = ShmBulk::new(mem, self.layout, node);
        let defer = self.async_writes();
        self.io.batch.begin(defer);
        self.requester = u8::try_from(node).ok();
        let resp = self
            .execute(mem, &mut bulk, req)
            .unwrap_or_else(Response::Err);
        self.requester = None;
        let staged = self.io.batch.end();
        let ok = resp.encode(op, tag);
        if staged.is_empty() {
            self.respond(mem, node, ok);
        } else if is_write {
            self.group_write(node, ino, staged, (op, tag, ok), mem);
        } else {
            // A creation's file is known by its answer.
            let inos = match resp {
                Response::Attr(a) => vec![a.ino],
                _ if ino != 0 => vec![ino],
                _ => Vec::new(),
            };
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
}
