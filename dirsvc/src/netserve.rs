//! `net` mode, the directory's end: the file server reached over a byte
//! stream (TCP in the kernel) instead of the rings. The framing is
//! [`fabric::netwire`]'s; the node's end is `nodepath::netclient`.

use alloc::vec::Vec;

use fabric::netwire::{answer_len, Frame};
use fabric::proto::{op_of, Errno, Raw, Request, Response};
use fabric::shm::SharedMem;
use flatfs::BlockDevice;

use crate::server::Directory;

impl<D: BlockDevice> Directory<D> {
    /// Serve one request frame from `node` received over the network.
    /// Returns its answer if it is ready now; `None`: the request waits
    /// for the disk (a read's blocks, a write's or a namespace change's
    /// block writes, an fsync's writes and flush) while the loop serves
    /// everything else, and its answer comes later from
    /// [`Directory::take_net_answers`] with `token`, exactly as on the
    /// ring path (`server/fileread.rs`, `server/writes.rs`). A synchronous
    /// device (or `fill_depth` 0) answers every request now.
    ///
    /// The request's payload is placed in the slot it names (its length
    /// must be the request's `len`; requests without data must come with
    /// an empty payload), the request runs exactly as on the ring path
    /// over a [`NetBulk`], and the answer carries the bytes the request
    /// wrote into a slot. A malformed descriptor is answered `Invalid` with
    /// its own opcode and tag, like on the rings. Page requests, page
    /// statistics and page locality are refused with `Invalid` (`net` mode
    /// has private caches only), and so is a data request with a sub-slot offset (`at`). `mem`
    /// is the shared region, used only if single-copy pages need tearing
    /// down (never in `net` mode). A `node` that is not a member (never
    /// joined, failed, left) is answered `Unavailable` without running
    /// anything: a link is served only for a node that is up (the kernel
    /// also resets such a node's connection).
    pub fn serve_net(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        node: u32,
        req: &Frame,
        token: u64,
    ) -> Option<Frame> {
        if !self.is_member(node) {
            log::warn!("node {node} is not up: network request refused");
            let raw = Raw::decode(&req.desc);
            let r = Raw {
                op: raw.op,
                status: Errno::Unavailable as u16,
                tag: raw.tag,
                args: [0; 7],
            };
            return Some(Frame {
                desc: r.encode(),
                payload: Vec::new(),
            });
        }
        let (tag, request) = match Request::decode(&req.desc) {
            Ok(x) => x,
            Err(error) => {
                log::warn!("node {node}: bad network request: {error}");
                self.count_request(None);
                return Some(Frame {
                    desc: Raw::invalid_answer(&req.desc),
                    payload: Vec::new(),
                });
            }
        };
        let op = op_of(&request);
        self.count_request(Some(op));
        let (resp, payload) =
            match self.serve_net_request(mem, node, token, tag, request, &req.payload) {
                Ok(Some(answer)) => answer,
                Ok(None) => return None,
                Err(e) => (Response::Err(e), Vec::new()),
            };
        // The answer carries exactly what the response announces.
        if payload.len() != answer_len(op, &resp) {
            log::warn!("node {node}: {op:?} answer payload mismatch");
            return Some(Frame {
                desc: Response::Err(Errno::Io).encode(op, tag),
                payload: Vec::new(),
            });
        }
        Some(Frame {
            desc: resp.encode(op, tag),
            payload,
        })
    }
}

#[cfg(test)]
mod tests;
