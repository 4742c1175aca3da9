//! `net` mode, the directory's end: the file server reached over a byte
//! stream (TCP in the kernel) instead of the rings. The framing is
//! [`fabric::netwire`]'s; the node's end is `nodepath::netclient`.

use alloc::vec::Vec;

use fabric::netwire::{answer_len, request_payload, Frame, NetBulk};
use fabric::proto::{op_of, Errno, Raw, Request, Response};
use fabric::shm::SharedMem;
use flatfs::BlockDevice;

use crate::server::Directory;

impl<D: BlockDevice> Directory<D> {
    /// Answer one request frame from `node` received over the network.
    ///
    /// The request's payload is placed in the slot it names (its length
    /// must be the request's `len`; requests without data must come with
    /// an empty payload), the request runs exactly as on the ring path
    /// over a [`NetBulk`], and the answer carries the bytes the request
    /// wrote into a slot. A malformed descriptor is answered `Invalid` with
    /// its own opcode and tag, like on the rings. Page requests and page
    /// statistics are refused with `Invalid` (`net` mode has private caches
    /// only), and so is a data request with a sub-slot offset (`at`). `mem` is the shared region, used only if single-copy pages
    /// need tearing down (never in `net` mode). A `node` that is not a
    /// member (never joined, failed, left) is answered `Unavailable`
    /// without running anything: a link is served only for a node that is
    /// up (the kernel also resets such a node's connection).
    pub fn serve_net(&mut self, mem: &(impl SharedMem + ?Sized), node: u32, req: &Frame) -> Frame {
        if !self.is_member(node) {
            log::warn!("node {node} is not up: network request refused");
            let raw = Raw::decode(&req.desc);
            let r = Raw {
                op: raw.op,
                status: Errno::Unavailable as u16,
                tag: raw.tag,
                args: [0; 7],
            };
            return Frame {
                desc: r.encode(),
                payload: Vec::new(),
            };
        }
        let (tag, request) = match Request::decode(&req.desc) {
            Ok(x) => x,
            Err(error) => {
                log::warn!("node {node}: bad network request: {error}");
                self.count_request(None);
                return Frame {
                    desc: Raw::invalid_answer(&req.desc),
                    payload: Vec::new(),
                };
            }
        };
        let op = op_of(&request);
        self.count_request(Some(op));
        let mut bulk = NetBulk::new();
        let resp = self.serve_net_request(mem, &mut bulk, request, &req.payload);
        let payload = match resp {
            Ok(_) => bulk.take_written(),
            Err(_) => Vec::new(),
        };
        let resp = resp.unwrap_or_else(Response::Err);
        // The answer carries exactly what the response announces.
        let payload = if payload.len() == answer_len(op, &resp) {
            payload
        } else {
            log::warn!("node {node}: {op:?} answer payload mismatch");
            return Frame {
                desc: Response::Err(Errno::Io).encode(op, tag),
                payload: Vec::new(),
            };
        };
        Frame {
            desc: resp.encode(op, tag),
            payload,
        }
    }

    fn serve_net_request(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        bulk: &mut NetBulk,
        req: Request,
        payload: &[u8],
    ) -> Result<Response, Errno> {
        if matches!(req, Request::Page(_) | Request::PageStats) {
            return Err(Errno::Invalid);
        }
        // Each request's data travels in its own frame, at the head of a
        // staging slot: no sub-slots here.
        if matches!(req, Request::Data { at, .. } if at != 0) {
            return Err(Errno::Invalid);
        }
        match request_payload(&req) {
            Some((slot, len)) => {
                if payload.len() != len as usize {
                    return Err(Errno::Invalid);
                }
                bulk.put(slot, payload.to_vec())?;
            }
            None if !payload.is_empty() => return Err(Errno::Invalid),
            None => {}
        }
        bulk.clear_written();
        self.execute(mem, bulk, req)
    }
}

#[cfg(test)]
mod tests;
