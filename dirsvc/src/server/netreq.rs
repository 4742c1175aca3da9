//! `net` mode's requests on the directory's side of the link: routed as
//! on the rings ([`super::dispatch`]), so a read, a write, a namespace
//! change or an fsync waits for the disk in the same queues while the
//! loop serves everything else, and its answer goes out by [`Via::Net`]
//! (`server/reply.rs`). The framing is `crate::netserve`'s.

use alloc::vec;
use alloc::vec::Vec;

use fabric::netwire::{request_payload, NetBulk};
use fabric::proto::{op_of, Errno, Op, Request, Response};
use fabric::shm::SharedMem;
use flatfs::BlockDevice;

use super::fileread::ReadReq;
use super::reply::Via;
use super::writes::Then;
use super::Directory;

impl<D: BlockDevice> Directory<D> {
    /// Run `req` (tag `tag`, data `payload`) from `node`'s link: its
    /// answer and payload now, or `None` if it is answered later, as
    /// [`Via::Net`]`(token)`.
    pub(crate) fn serve_net_request(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        node: u32,
        token: u64,
        tag: u32,
        req: Request,
        payload: &[u8],
    ) -> Result<Option<(Response, Vec<u8>)>, Errno> {
        refuse_on_net(&req)?;
        // A ring sweep's last writes are queued before this request runs
        // (a sweep queues them itself; this keeps it whoever calls).
        self.flush_write_group(mem);
        let bulk = bulk_of(&req, payload)?;
        if let Request::AppendLock { ino, hold, renew } = req {
            return self
                .append_lock(node, ino, hold, renew)
                .map(|r| Some((r, Vec::new())));
        }
        self.check_generation(&req)?;
        self.check_locked_publication(node, &req)?;
        let op = op_of(&req);
        let via = Via::Net(token);
        if let Request::Fsync { ino } = req {
            self.settle_sizes(mem, ino);
        }
        if self.defer_fsync(node, via, op, tag, &req) {
            return Ok(None); // answered once its file's writes landed
        }
        if let Some(r) = ReadReq::of(node, tag, via, &req).filter(|_| self.fill_depth() > 0) {
            return Ok(self.read_file(mem, r));
        }
        self.execute_net(mem, node, (token, tag, op), req, bulk)
    }

    /// Run a file-server request from `node`'s link over `bulk`: its
    /// answer and payload now, or `None` if its block writes were staged
    /// (answered once they landed, by [`Via::Net`]`(token)`).
    fn execute_net(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        node: u32,
        (token, tag, op): (u64, u32, Op),
        req: Request,
        mut bulk: NetBulk,
    ) -> Result<Option<(Response, Vec<u8>)>, Errno> {
        let via = Via::Net(token);
        let ino = match req {
            Request::Data { ino, .. } | Request::Setattr { ino, .. } => ino,
            _ => 0,
        };
        let is_write = matches!(req, Request::Data { op: Op::Write, .. });
        bulk.clear_written();
        let defer = self.async_writes();
        self.io.batch.begin(defer);
        let resp = self.execute(mem, &mut bulk, req);
        let staged = self.io.batch.end();
        if staged.is_empty() {
            let resp = resp?;
            return Ok(Some((resp, bulk.take_written())));
        }
        // Its block writes go to the write queue; the answer (no payload:
        // writes and namespace changes carry none) once they landed.
        let resp = resp.unwrap_or_else(Response::Err);
        let inos = match resp {
            _ if ino != 0 => vec![ino],
            Response::Attr(a) => vec![a.ino],
            _ => Vec::new(),
        };
        let then = Then::Respond {
            node,
            via,
            op,
            tag,
            ok: resp.encode(op, tag),
        };
        if is_write {
            self.queue_writes(mem, inos, staged, then);
        } else {
            // A namespace change or truncation: a barrier job.
            self.queue_barrier(mem, inos, staged, then);
        }
        Ok(None)
    }
}

/// Requests `net` mode refuses (`Invalid`): it has private caches only,
/// so no single-copy pages, page requests or page locality (whose
/// records would travel in a payload the answer does not announce); and
/// each request's data travels in its own frame, at the head of a
/// staging slot, so no sub-slots.
fn refuse_on_net(req: &Request) -> Result<(), Errno> {
    let refused = matches!(
        req,
        Request::Page(_)
            | Request::PageRun(_)
            | Request::PageStats
            | Request::InvStats
            | Request::DelegStats
            | Request::Locality { .. }
    ) || matches!(req, Request::Data { at, .. } if *at != 0);
    if refused {
        Err(Errno::Invalid)
    } else {
        Ok(())
    }
}

/// The staging slots of `req` with its frame's `payload` in the slot it
/// names (its length must be the request's; a request without data must
/// come without payload).
fn bulk_of(req: &Request, payload: &[u8]) -> Result<NetBulk, Errno> {
    let mut bulk = NetBulk::new();
    match request_payload(req) {
        Some((slot, len)) => {
            if payload.len() != len as usize {
                return Err(Errno::Invalid);
            }
            bulk.put(slot, payload.to_vec())?;
        }
        None if !payload.is_empty() => return Err(Errno::Invalid),
        None => {}
    }
    Ok(bulk)
}
