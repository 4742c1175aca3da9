//! `net` mode, the node's end: a client of the directory's file server
//! over a byte stream, independent of the transport (the kernel feeds it
//! TCP bytes). The framing is [`fabric::netwire`]'s.

use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
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

/// An answer received for a request nobody was blocked on.
#[derive(Debug)]
struct Answered {
    resp: Response,
    payload: Vec<u8>,
    slot: Option<(u32, usize)>,
}

/// The node's end of a `net` mode connection, independent of the
/// transport: the request methods give the bytes to send, the feed
/// methods take the bytes received.
///
/// Requests go out in order and the server answers a connection's frames
/// in order, so every frame received answers the oldest request still
/// outstanding. Three kinds share that order: one synchronous request
/// ([`NetClient::request`], answered by [`NetClient::feed`]), one
/// pipelined batch of reads ([`NetClient::request_batch`]), and any number
/// of started requests ([`NetClient::start`], answers kept until
/// [`NetClient::take`]): a task's metadata call goes out and the task
/// yields, whatever else the node sends meanwhile.
///
/// Data is staged and collected through local bulk slots, exactly as
/// through the node's slots in the shared region on the ring path. A
/// request's payload (path, write data) is copied into its frame when it
/// is made, so the slot may be restaged at once; an answer's payload is
/// put into its slot when it is returned.
#[derive(Debug, Default)]
pub struct NetClient {
    bulk: NetBulk,
    reader: FrameReader,
    next_tag: u32,
    /// Requests sent and not answered yet, oldest first.
    outstanding: VecDeque<Pending>,
    /// The synchronous request [`NetClient::feed`] returns the answer of.
    sync: Option<u32>,
    /// The pipelined batch, in the order sent.
    batch: VecDeque<u32>,
    /// Answers not taken yet (started requests and the batch's).
    answered: BTreeMap<u32, Answered>,
    /// Requests whose caller gave up: their answers are dropped.
    forgotten: BTreeSet<u32>,
}

/// Most requests [`NetClient::request_batch`] puts in flight at once.
pub const MAX_BATCH: usize = 64;

/// May `req` be sent again on a new connection after the old one broke
/// with it unanswered? Only if serving it twice is the same as serving it
/// once: lookups, reads, attributes, flushes, counters, and append-lock
/// takes and give-backs (a node's second take of a lock it holds renews
/// it; the lease is counted from before the first send). A request that
/// may change a file (`Request::may_change_files`) may have been served
/// before the break: it is not resent, and its caller gets the error.
pub fn retry_safe(req: &Request) -> bool {
    !req.may_change_files()
}

/// Reconnection attempts after a connection to the file server broke:
/// waits that start at [`Backoff::FIRST_NS`] and double up to
/// [`Backoff::MAX_NS`], at most [`Backoff::MAX_TRIES`] attempts per
/// call; the caller also stops at its call deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    tries: u32,
    wait_ns: u64,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            tries: 0,
            wait_ns: Backoff::FIRST_NS,
        }
    }
}

impl Backoff {
    /// The wait after the first failed attempt.
    pub const FIRST_NS: u64 = 20_000_000;
    /// The longest wait between attempts.
    pub const MAX_NS: u64 = 1_000_000_000;
    /// Most attempts.
    pub const MAX_TRIES: u32 = 32;

    /// An attempt failed: how long to wait before the next one, or `None`
    /// when no attempt is left.
    pub fn failed(&mut self) -> Option<u64> {
        self.tries += 1;
        if self.tries >= Backoff::MAX_TRIES {
            return None;
        }
        let w = self.wait_ns;
        self.wait_ns = self.wait_ns.saturating_mul(2).min(Backoff::MAX_NS);
        Some(w)
    }

    /// Attempts that failed so far.
    pub fn tries(&self) -> u32 {
        self.tries
    }
}

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

    /// The tag of the synchronous request waiting for its answer, if any.
    pub fn pending_tag(&self) -> Option<u32> {
        self.sync
    }

    /// Requests sent and not answered yet (of every kind).
    pub fn outstanding(&self) -> usize {
        self.outstanding.len()
    }

    /// The frame of `req` (its payload: the first `len` bytes of the slot
    /// it names; a request naming a bad slot or length goes out without
    /// payload and the server answers `Invalid`), queued as outstanding.
    fn frame(&mut self, req: &Request, out: &mut Vec<u8>) -> u32 {
        let tag = self.fresh_tag();
        let payload = request_payload(req)
            .and_then(|(slot, len)| self.bulk.bytes(slot, len as usize).ok())
            .unwrap_or_default();
        self.outstanding.push_back(Pending {
            tag,
            op: op_of(req),
            slot: answer_slot(req),
        });
        encode_frame(&req.encode(tag), &payload, out);
        tag
    }

    /// Start `req` as the synchronous request: the bytes of its frame, to
    /// send; [`NetClient::feed`] returns its answer. A synchronous request
    /// still waiting (its caller gave up) is forgotten.
    pub fn request(&mut self, req: &Request) -> Vec<u8> {
        if let Some(old) = self.sync.take() {
            self.forget(old);
        }
        let mut out = Vec::new();
        self.sync = Some(self.frame(req, &mut out));
        out
    }

    /// Start `req` without waiting for it: its tag and the bytes of its
    /// frame, to send. Its answer is kept for [`NetClient::take`].
    pub fn start(&mut self, req: &Request) -> (u32, Vec<u8>) {
        let mut out = Vec::new();
        let tag = self.frame(req, &mut out);
        (tag, out)
    }

    /// The answer to started request `tag`: `None` while it is
    /// outstanding; the response (its payload, if any, now at the start of
    /// its slot); `Unavailable` if the request is unknown (lost in a
    /// reset, or taken already).
    pub fn take(&mut self, tag: u32) -> Option<Result<Response, Errno>> {
        if let Some(a) = self.answered.remove(&tag) {
            if let Some((slot, _)) = a.slot.filter(|_| !a.payload.is_empty()) {
                if self.bulk.write(slot, 0, &a.payload).is_err() {
                    return Some(Err(Errno::Io));
                }
                self.bulk.clear_written();
            }
            return Some(Ok(a.resp));
        }
        if self.outstanding.iter().any(|p| p.tag == tag) {
            return None;
        }
        Some(Err(Errno::Unavailable))
    }

    /// The caller of request `tag` gave up: drop its answer.
    pub fn forget(&mut self, tag: u32) {
        if self.answered.remove(&tag).is_none() && self.outstanding.iter().any(|p| p.tag == tag) {
            self.forgotten.insert(tag);
        }
    }

    /// Take received bytes. Returns the response once the frame answering
    /// the synchronous request is complete, after storing its payload (read
    /// data, directory records) at the start of the slot the request named;
    /// answers to other requests met on the way are kept. A framing error,
    /// an answer nobody waits for, a wrong tag or opcode, or a payload that
    /// does not match the response is `Err(Io)`: the connection is
    /// unusable, [`NetClient::reset`] and reconnect.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Option<Response>, Errno> {
        self.reader.push(bytes);
        self.absorb(true)
    }

    /// Take received bytes for started requests and the batch (none is
    /// synchronous): their answers are kept. Errors as in
    /// [`NetClient::feed`].
    pub fn feed_started(&mut self, bytes: &[u8]) -> Result<(), Errno> {
        self.reader.push(bytes);
        self.absorb(false).map(|_| ())
    }

    /// Match every complete frame to the oldest outstanding request; stop
    /// at the synchronous request's answer if `sync`.
    fn absorb(&mut self, sync: bool) -> Result<Option<Response>, Errno> {
        while let Some(frame) = self.next_frame()? {
            let p = self.outstanding.pop_front().ok_or(Errno::Io)?;
            let (resp, payload) = answer(p, frame)?;
            if self.forgotten.remove(&p.tag) {
                continue;
            }
            if self.sync == Some(p.tag) {
                self.sync = None;
                if let Some((slot, _)) = p.slot.filter(|_| !payload.is_empty()) {
                    self.bulk.write(slot, 0, &payload).map_err(|_| Errno::Io)?;
                    self.bulk.clear_written();
                }
                if sync {
                    return Ok(Some(resp));
                }
                continue; // nobody waits for it any more
            }
            self.answered.insert(
                p.tag,
                Answered {
                    resp,
                    payload,
                    slot: p.slot,
                },
            );
        }
        Ok(None)
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
    /// (reads, getattr, readdir, ...), at most [`MAX_BATCH`], and not
    /// while another batch or a synchronous request waits (started
    /// requests may be outstanding).
    pub fn request_batch(&mut self, reqs: &[Request]) -> Result<Vec<u8>, Errno> {
        if reqs.len() > MAX_BATCH || self.sync.is_some() || !self.batch.is_empty() {
            return Err(Errno::Invalid);
        }
        if reqs.iter().any(|r| request_payload(r).is_some()) {
            return Err(Errno::Invalid);
        }
        let mut out = Vec::new();
        for req in reqs {
            let tag = self.frame(req, &mut out);
            self.batch.push_back(tag);
        }
        Ok(out)
    }

    /// Requests of the current batch still waiting for their answers.
    pub fn batch_pending(&self) -> usize {
        self.batch.len()
    }

    /// Take received bytes for a batch: appends every answer of the batch
    /// completed by them to `done`, in request order, each with its
    /// payload (read data, directory records); answers to started requests
    /// are kept. Errors as in [`NetClient::feed`].
    pub fn feed_batch(
        &mut self,
        bytes: &[u8],
        done: &mut Vec<(Response, Vec<u8>)>,
    ) -> Result<(), Errno> {
        self.reader.push(bytes);
        self.absorb(false)?;
        while let Some(&tag) = self.batch.front() {
            let Some(a) = self.answered.remove(&tag) else {
                break;
            };
            self.batch.pop_front();
            done.push((a.resp, a.payload));
        }
        Ok(())
    }

    /// Drop the connection state (partial frames, every outstanding
    /// request: started ones are then answered `Unavailable` by
    /// [`NetClient::take`]) for a reconnect. Staged slot contents, answers
    /// already received and the tag counter are kept.
    pub fn reset(&mut self) {
        self.reader.reset();
        self.outstanding.clear();
        self.sync = None;
        for tag in self.batch.drain(..) {
            self.answered.remove(&tag);
        }
        self.forgotten.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_cap_and_gives_up() {
        let mut b = Backoff::default();
        let waits: Vec<u64> = core::iter::from_fn(|| b.failed()).collect();
        assert_eq!(waits.len() as u32, Backoff::MAX_TRIES - 1);
        assert_eq!(waits[0], Backoff::FIRST_NS);
        assert_eq!(waits[1], 2 * Backoff::FIRST_NS);
        assert!(waits.windows(2).all(|w| w[1] >= w[0]));
        assert_eq!(*waits.last().unwrap(), Backoff::MAX_NS);
        assert_eq!(b.failed(), None);
    }

    #[test]
    fn only_requests_served_twice_as_once_are_resent() {
        use fabric::proto::Op;
        assert!(retry_safe(&Request::Getattr { ino: 3 }));
        assert!(retry_safe(&Request::Fsync { ino: 0 }));
        assert!(retry_safe(&Request::AppendLock {
            ino: 3,
            hold: true,
            renew: false
        }));
        let write = Request::Data {
            gen: 0,
            op: Op::Write,
            slot: 1,
            at: 0,
            ino: 3,
            offset: 0,
            len: 10,
        };
        assert!(!retry_safe(&write));
        let create = Request::Path {
            op: Op::Create,
            slot: 0,
            at: 0,
            len: 2,
            exclusive: true,
        };
        assert!(!retry_safe(&create));
        assert!(!retry_safe(&Request::Setattr {
            gen: 0,
            ino: 3,
            size: 0,
            expect: None,
            locked: false
        }));
    }

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
