//! `net` mode, the node's end: a client of the directory's file server
//! over a byte stream, independent of the transport (the kernel feeds it
//! TCP bytes). The framing is [`fabric::netwire`]'s.

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use fabric::bulk::Bulk;
use fabric::netwire::{
    answer_len, answer_slot, encode_frame, request_payload, Frame, FrameReader, NetBulk,
};
use fabric::proto::{op_of, Errno, Op, Request, Response};

/// Check that `frame` answers `p`: its tag, and a payload of exactly the
/// length the response announces that fits what was asked for (only
/// answers with a slot carry one). Anything else is `Io`.
fn answer(p: Pending, frame: Frame) -> Result<(Response, Vec<u8>), Errno> {
    let (tag, resp) = Response::decode(&frame.desc, p.op).map_err(|_| Errno::Io)?;
    let max = p.slot.map_or(0, |(_, max)| max);
    if tag != p.tag || frame.payload.len() != answer_len(p.op, &resp) || frame.payload.len() > max {
        return Err(Errno::Io);
    }
    Ok((resp, frame.payload))
}

/// What a [`NetClient`] waits for.
#[derive(Debug, Clone, Copy)]
struct Pending {
    tag: u32,
    op: Op,
    /// Where the answer's payload goes and its largest valid length.
    slot: Option<(u32, usize)>,
}

/// The node's end of a `net` mode connection, independent of the
/// transport: [`NetClient::request`] gives the bytes to send,
/// [`NetClient::feed`] takes the bytes received. One request is
/// outstanding at a time.
///
/// Data is staged and collected through local bulk slots, exactly as
/// through the node's slots in the shared region on the ring path.
#[derive(Debug, Default)]
pub struct NetClient {
    bulk: NetBulk,
    reader: FrameReader,
    next_tag: u32,
    pending: Option<Pending>,
    /// Pipelined requests waiting for their answers, in the order sent
    /// (the server answers a connection's frames in order).
    batch: VecDeque<Pending>,
}

/// Most requests [`NetClient::request_batch`] puts in flight at once.
pub const MAX_BATCH: usize = 64;

impl NetClient {
    /// A client with empty slots.
    pub fn new() -> NetClient {
        NetClient {
            next_tag: 1,
            ..NetClient::default()
        }
    }

    /// Capacity of bulk slot `slot`, if it exists.
    pub fn bulk_cap(&self, slot: u32) -> Option<usize> {
        self.bulk.cap(slot)
    }

    /// Stage `data` at byte `at` of `slot` (a path or data to write).
    pub fn bulk_write(&mut self, slot: u32, at: usize, data: &[u8]) -> Result<(), Errno> {
        self.bulk.write(slot, at, data)
    }

    /// Copy the first `buf.len()` bytes of `slot` (read data, directory
    /// records) into `buf`.
    pub fn bulk_read(&self, slot: u32, buf: &mut [u8]) -> Result<(), Errno> {
        self.bulk.read(slot, buf)
    }

    /// The tag of the request waiting for its answer, if any.
    pub fn pending_tag(&self) -> Option<u32> {
        self.pending.map(|p| p.tag)
    }

    /// Start `req`: the bytes of its frame, to send. The payload is the
    /// first `len` bytes of the slot the request names (path, write data);
    /// a request naming a bad slot or length goes out without payload and
    /// the server answers `Invalid`. Replaces any request still waiting.
    pub fn request(&mut self, req: &Request) -> Vec<u8> {
        let tag = self.fresh_tag();
        let payload = request_payload(req)
            .and_then(|(slot, len)| self.bulk.bytes(slot, len as usize).ok())
            .unwrap_or_default();
        self.pending = Some(Pending {
            tag,
            op: op_of(req),
            slot: answer_slot(req),
        });
        let mut out = Vec::new();
        encode_frame(&req.encode(tag), &payload, &mut out);
        out
    }

    /// Take received bytes. Returns the response once the frame answering
    /// the pending request is complete, after storing its payload (read
    /// data, directory records) at the start of the slot the request named.
    /// A framing error, an answer nobody waits for, a wrong tag or opcode,
    /// or a payload that does not match the response is `Err(Io)`: the
    /// connection is unusable, [`NetClient::reset`] and reconnect.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Option<Response>, Errno> {
        self.reader.push(bytes);
        let Some(frame) = self.next_frame()? else {
            return Ok(None);
        };
        let p = self.pending.take().ok_or(Errno::Io)?;
        let (resp, payload) = answer(p, frame)?;
        if let Some((slot, _)) = p.slot.filter(|_| !payload.is_empty()) {
            self.bulk.write(slot, 0, &payload).map_err(|_| Errno::Io)?;
            self.bulk.clear_written();
        }
        Ok(Some(resp))
    }

    /// The next complete frame received, if any; a framing error is `Io`.
    fn next_frame(&mut self) -> Result<Option<Frame>, Errno> {
        self.reader.next_frame().map_err(|e| {
            log::warn!("net: {e}");
            Errno::Io
        })
    }

    fn fresh_tag(&mut self) -> u32 {
        let tag = self.next_tag;
        self.next_tag = self.next_tag.wrapping_add(1).max(1);
        tag
    }

    /// Start several requests at once (pipelining): the bytes of their
    /// frames, to send together. Only requests that carry no payload
    /// (reads, getattr, readdir, ...) can be pipelined, since the staging
    /// slots hold one payload; at most [`MAX_BATCH`], and not while a
    /// single request ([`NetClient::request`]) or another batch waits.
    pub fn request_batch(&mut self, reqs: &[Request]) -> Result<Vec<u8>, Errno> {
        if reqs.len() > MAX_BATCH || self.pending.is_some() || !self.batch.is_empty() {
            return Err(Errno::Invalid);
        }
        if reqs.iter().any(|r| request_payload(r).is_some()) {
            return Err(Errno::Invalid);
        }
        let mut out = Vec::new();
        for req in reqs {
            let tag = self.fresh_tag();
            self.batch.push_back(Pending {
                tag,
                op: op_of(req),
                slot: answer_slot(req),
            });
            encode_frame(&req.encode(tag), &[], &mut out);
        }
        Ok(out)
    }

    /// Requests of the current batch still waiting for their answers.
    pub fn batch_pending(&self) -> usize {
        self.batch.len()
    }

    /// Take received bytes for a batch: appends every answer completed by
    /// them to `done`, in request order, each with its payload (read data,
    /// directory records). Errors as in [`NetClient::feed`].
    pub fn feed_batch(
        &mut self,
        bytes: &[u8],
        done: &mut Vec<(Response, Vec<u8>)>,
    ) -> Result<(), Errno> {
        self.reader.push(bytes);
        while let Some(frame) = self.next_frame()? {
            let p = self.batch.pop_front().ok_or(Errno::Io)?;
            done.push(answer(p, frame)?);
        }
        Ok(())
    }

    /// Drop the connection state (partial frames, the pending request or
    /// batch) for a reconnect. Staged slot contents and the tag counter are
    /// kept.
    pub fn reset(&mut self) {
        self.reader.reset();
        self.pending = None;
        self.batch.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_advance_and_skip_zero() {
        let mut c = NetClient::new();
        c.next_tag = u32::MAX;
        let _ = c.request(&Request::Nop);
        assert_eq!(c.pending_tag(), Some(u32::MAX));
        let _ = c.request(&Request::Nop);
        assert_eq!(c.pending_tag(), Some(1));
        c.reset();
        assert_eq!(c.pending_tag(), None);
        assert_eq!(c.feed(&[]), Ok(None));
    }
}
