//! `net` mode: nodes reach the directory's file server over a byte stream
//! (TCP in the kernel) instead of the shared region, an NFS-like baseline
//! with private caches only.
//!
//! The messages are the ring protocol's ([`crate::proto`]): one 64-byte
//! [`Desc`] per request and per response. What travelled through a bulk
//! slot in the shared region travels in the frame instead, right behind
//! the descriptor. A frame on the stream is:
//!
//! | bytes        | field                                               |
//! | ------------ | --------------------------------------------------- |
//! | 0..4         | magic [`MAGIC`] (`"OCNF"`), little-endian `u32`       |
//! | 4..8         | payload length `n`, little-endian `u32`, at most [`MAX_PAYLOAD`] |
//! | 8..72        | the descriptor                                      |
//! | 72..72+n     | the payload                                         |
//!
//! Payloads:
//!
//! * request `Lookup`/`Create`/`Mkdir`/`Unlink`/`Rmdir`: the path, exactly
//!   `len` bytes; `Write`: the data, exactly `len` bytes; every other
//!   request: empty.
//! * response to `Read`: the `bytes` read; to `Readdir`: `count` records of
//!   [`DIRENT_SIZE`] bytes; every other response (and every error): empty.
//!
//! Both ends keep four local slot buffers ([`NetBulk`]) so that the server
//! ([`Directory::serve_net`]) runs the same request code as the ring path
//! and the node ([`NetClient`]) stages and collects data the same way it
//! does with its slots in the shared region. Everything received is
//! untrusted: a bad frame or descriptor is an error, never a panic, and no
//! length read from the stream makes anything allocate more than
//! [`MAX_PAYLOAD`] bytes.

use alloc::collections::VecDeque;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

use crate::fs::BlockDevice;
use crate::layout::{DEFAULT_BULK_SLOTS, DEFAULT_BULK_SLOT_BYTES};
use crate::proto::{op_of, Desc, Errno, Op, Raw, Request, Response, DESC_SIZE, DIRENT_SIZE};
use crate::server::{Bulk, Directory};
use crate::shm::SharedMem;

/// TCP port of the directory's file server.
pub const PORT: u16 = 2049;
/// Largest payload of one frame: the size of a bulk slot.
pub const MAX_PAYLOAD: usize = DEFAULT_BULK_SLOT_BYTES as usize;
/// Number of slots of a [`NetBulk`] (as many as a node has in the region).
pub const SLOTS: u32 = DEFAULT_BULK_SLOTS;
/// First word of every frame: `"OCNF"` read as a little-endian `u32`.
pub const MAGIC: u32 = u32::from_le_bytes(*b"OCNF");
/// Bytes of the frame header (magic and payload length).
pub const HEADER_SIZE: usize = 8;
/// Bytes of a frame before its payload.
pub const FRAME_OVERHEAD: usize = HEADER_SIZE + DESC_SIZE;

/// One complete frame: a descriptor and its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The request or response descriptor.
    pub desc: Desc,
    /// Variable-length data (at most [`MAX_PAYLOAD`] bytes).
    pub payload: Vec<u8>,
}

impl Frame {
    /// The frame's bytes on the stream.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(FRAME_OVERHEAD + self.payload.len());
        encode_frame(&self.desc, &self.payload, &mut out);
        out
    }
}

/// Append one frame to `out`.
///
/// `payload` must not be longer than [`MAX_PAYLOAD`] (every caller in this
/// crate guarantees it; a longer one would be refused by the receiver).
pub fn encode_frame(desc: &Desc, payload: &[u8], out: &mut Vec<u8>) {
    debug_assert!(payload.len() <= MAX_PAYLOAD, "frame payload too long");
    out.reserve(FRAME_OVERHEAD + payload.len());
    out.extend_from_slice(&MAGIC.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(desc);
    out.extend_from_slice(payload);
}

/// Why a byte stream is not a sequence of frames. The stream cannot be
/// resynchronised after one: the connection has to be dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    /// The header does not start with [`MAGIC`].
    BadMagic(u32),
    /// The header announces more than [`MAX_PAYLOAD`] bytes.
    TooLong(u32),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::BadMagic(m) => write!(f, "bad frame magic {m:#010x}"),
            FrameError::TooLong(n) => write!(f, "frame payload of {n} bytes is too long"),
        }
    }
}

/// Cuts a byte stream, received in chunks of any size, into [`Frame`]s.
///
/// The header is checked as soon as its 8 bytes are in, before any payload
/// is awaited, so memory stays bounded by one frame plus whatever was
/// pushed between two calls of [`FrameReader::next_frame`]. After an error
/// the reader stays failed (input is dropped, the error repeats) until
/// [`FrameReader::reset`].
#[derive(Debug, Default)]
pub struct FrameReader {
    buf: Vec<u8>,
    /// Bytes of `buf` already handed out as frames.
    start: usize,
    failed: Option<FrameError>,
}

impl FrameReader {
    /// An empty reader.
    pub fn new() -> FrameReader {
        FrameReader::default()
    }

    /// Append received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.failed.is_some() {
            return;
        }
        if self.start > 0 && self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes received but not handed out as frames yet.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }

    /// Forget everything (for a new connection).
    pub fn reset(&mut self) {
        self.buf = Vec::new();
        self.start = 0;
        self.failed = None;
    }

    /// The next complete frame, `None` while it is incomplete, or the
    /// framing error that broke the stream.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, FrameError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let rest = &self.buf[self.start..];
        if rest.len() < HEADER_SIZE {
            return Ok(None);
        }
        let magic = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
        let len = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
        let err = if magic != MAGIC {
            Some(FrameError::BadMagic(magic))
        } else if len as usize > MAX_PAYLOAD {
            Some(FrameError::TooLong(len))
        } else {
            None
        };
        if let Some(e) = err {
            self.failed = Some(e);
            self.buf = Vec::new();
            self.start = 0;
            return Err(e);
        }
        let total = FRAME_OVERHEAD + len as usize;
        if rest.len() < total {
            return Ok(None);
        }
        let mut desc = [0u8; DESC_SIZE];
        desc.copy_from_slice(&rest[HEADER_SIZE..FRAME_OVERHEAD]);
        let payload = rest[FRAME_OVERHEAD..total].to_vec();
        self.start += total;
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        } else if self.start >= MAX_PAYLOAD {
            // Keep the buffer from growing with consumed bytes.
            self.buf.drain(..self.start);
            self.start = 0;
        }
        Ok(Some(Frame { desc, payload }))
    }
}

/// Four local bulk slots of [`MAX_PAYLOAD`] bytes each.
///
/// Storage grows on demand (a slot holds what was written to it; bytes never
/// written read as zeros), so a fresh `NetBulk` costs no allocation. It
/// remembers the last slot written and how far, so that the server ships
/// exactly the bytes a request produced.
#[derive(Debug, Default, Clone)]
pub struct NetBulk {
    slots: [Vec<u8>; SLOTS as usize],
    written: Option<(u32, usize)>,
}

impl NetBulk {
    /// Empty slots.
    pub fn new() -> NetBulk {
        NetBulk::default()
    }

    /// The last slot written since [`NetBulk::clear_written`] and the end
    /// of the furthest write into it.
    pub fn written(&self) -> Option<(u32, usize)> {
        self.written
    }

    /// Forget which slot was written (the data stays).
    pub fn clear_written(&mut self) {
        self.written = None;
    }

    /// The first `len` bytes of `slot` (zeros where never written), or
    /// `Invalid` if there is no such slot or `len` exceeds its capacity.
    pub fn bytes(&self, slot: u32, len: usize) -> Result<Vec<u8>, Errno> {
        if self.cap(slot).is_none_or(|cap| len > cap) {
            return Err(Errno::Invalid);
        }
        let mut out = vec![0u8; len];
        self.read(slot, &mut out)?;
        Ok(out)
    }

    /// Replace the contents of `slot` by `data` without copying it.
    fn put(&mut self, slot: u32, data: Vec<u8>) -> Result<(), Errno> {
        if data.len() > MAX_PAYLOAD {
            return Err(Errno::Invalid);
        }
        let s = self.slots.get_mut(slot as usize).ok_or(Errno::Invalid)?;
        *s = data;
        Ok(())
    }

    /// Take the bytes of the last write (see [`NetBulk::written`]) out of
    /// their slot; empty if nothing was written.
    fn take_written(&mut self) -> Vec<u8> {
        let Some((slot, end)) = self.written.take() else {
            return Vec::new();
        };
        match self.slots.get_mut(slot as usize) {
            Some(s) => {
                let mut v = core::mem::take(s);
                v.resize(end, 0);
                v
            }
            None => Vec::new(),
        }
    }
}

impl Bulk for NetBulk {
    fn cap(&self, slot: u32) -> Option<usize> {
        (slot < SLOTS).then_some(MAX_PAYLOAD)
    }

    fn read(&self, slot: u32, buf: &mut [u8]) -> Result<(), Errno> {
        let s = self.slots.get(slot as usize).ok_or(Errno::Invalid)?;
        if buf.len() > MAX_PAYLOAD {
            return Err(Errno::Invalid);
        }
        let n = s.len().min(buf.len());
        buf[..n].copy_from_slice(&s[..n]);
        buf[n..].fill(0);
        Ok(())
    }

    fn write(&mut self, slot: u32, at: usize, data: &[u8]) -> Result<(), Errno> {
        let s = self.slots.get_mut(slot as usize).ok_or(Errno::Invalid)?;
        let end = match at.checked_add(data.len()) {
            Some(end) if end <= MAX_PAYLOAD => end,
            _ => return Err(Errno::Invalid),
        };
        if s.len() < end {
            s.resize(end, 0);
        }
        s[at..end].copy_from_slice(data);
        self.written = Some(match self.written {
            Some((w, e)) if w == slot => (slot, e.max(end)),
            _ => (slot, end),
        });
        Ok(())
    }
}

/// The payload a request carries: the slot and length it names, if any.
fn request_payload(req: &Request) -> Option<(u32, u32)> {
    match *req {
        Request::Path { slot, len, .. } => Some((slot, len)),
        Request::Data {
            op: Op::Write,
            slot,
            len,
            ..
        } => Some((slot, len)),
        _ => None,
    }
}

/// The slot a request's answer payload goes to and the most bytes that
/// answer may carry, if it has one.
fn answer_slot(req: &Request) -> Option<(u32, usize)> {
    match *req {
        Request::Data {
            op: Op::Read,
            slot,
            len,
            ..
        } => Some((slot, (len as usize).min(MAX_PAYLOAD))),
        Request::Readdir { slot, .. } => Some((slot, MAX_PAYLOAD)),
        _ => None,
    }
}

/// Length of the payload that must come with `resp` to a request of `op`.
fn answer_len(op: Op, resp: &Response) -> usize {
    match (op, resp) {
        (Op::Read, Response::Data { bytes, .. }) => *bytes as usize,
        (Op::Readdir, Response::Entries { count, .. }) => {
            (*count as usize).saturating_mul(DIRENT_SIZE)
        }
        _ => 0,
    }
}

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
    /// only). `mem` is the shared region, used only if single-copy pages
    /// need tearing down (never in `net` mode).
    pub fn serve_net(&mut self, mem: &(impl SharedMem + ?Sized), node: u32, req: &Frame) -> Frame {
        let (tag, request) = match Request::decode(&req.desc) {
            Ok(x) => x,
            Err(error) => {
                log::warn!("node {node}: bad network request: {error}");
                self.count_request(None);
                let raw = Raw::decode(&req.desc);
                let r = Raw {
                    op: raw.op,
                    status: Errno::Invalid as u16,
                    tag: raw.tag,
                    args: [0; 7],
                };
                return Frame {
                    desc: r.encode(),
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
    use crate::fs::{Fs, MemDisk};
    use crate::layout::Layout;
    use crate::pagedir::{PageKey, PageReq};
    use crate::proto::{DirEntry, FileKind};
    use crate::rng::SplitMix64;
    use crate::server::Config;
    use crate::shm::HeapShm;

    const REGION: usize = 4 << 20;

    /// Every opcode, notifications included, and a few unknown ones.
    const FUZZ_OPS: [u16; 26] = [
        0, 1, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 30, 31, 32, 33, 34, 35, 40, 41, 42,
        2, 99, 0xFFFF,
    ];

    /// A directory with storage, one node's client, and the two ends of a
    /// stream that delivers bytes in random chunks.
    struct Rig {
        mem: HeapShm,
        dir: Directory<MemDisk>,
        client: NetClient,
        server_rx: FrameReader,
        rng: SplitMix64,
    }

    impl Rig {
        fn new(seed: u64) -> Rig {
            let mem = HeapShm::new(REGION);
            let layout = Layout::compute(REGION, 2).unwrap();
            layout.format(&*mem, 0);
            let fs = Fs::format(MemDisk::new(2048), 64).unwrap();
            let dir = Directory::new(&*mem, layout, Some(fs), Config::default());
            Rig {
                mem,
                dir,
                client: NetClient::new(),
                server_rx: FrameReader::new(),
                rng: SplitMix64::new(seed),
            }
        }

        /// Split `bytes` into random chunks (sometimes empty, sometimes
        /// single bytes, sometimes large).
        fn chunks(&mut self, bytes: &[u8]) -> Vec<Vec<u8>> {
            let mut out = Vec::new();
            let mut i = 0;
            while i < bytes.len() {
                let n = match self.rng.below(4) {
                    0 => 0,
                    1 => 1,
                    2 => self.rng.range(1, 100),
                    _ => self.rng.range(1, 20_000),
                } as usize;
                let n = n.min(bytes.len() - i);
                out.push(bytes[i..i + n].to_vec());
                i += n;
            }
            out.push(Vec::new());
            out
        }

        /// Deliver `bytes` to the server's reader; the frames it yields.
        fn deliver_to_server(&mut self, bytes: &[u8]) -> Result<Vec<Frame>, FrameError> {
            let mut frames = Vec::new();
            for c in self.chunks(bytes) {
                self.server_rx.push(&c);
                while let Some(f) = self.server_rx.next_frame()? {
                    frames.push(f);
                }
            }
            Ok(frames)
        }

        /// Deliver `bytes` to the client; the response it completes.
        fn deliver_to_client(&mut self, bytes: &[u8]) -> Result<Option<Response>, Errno> {
            let mut got = None;
            for c in self.chunks(bytes) {
                if let Some(r) = self.client.feed(&c)? {
                    assert!(got.is_none(), "one response per request");
                    got = Some(r);
                }
            }
            Ok(got)
        }

        /// Serve a request frame the way the kernel's server loop does.
        fn serve(&mut self, f: &Frame) -> Vec<u8> {
            self.dir.serve_net(&*self.mem, 1, f).to_bytes()
        }

        /// One round trip; transport errors are test failures, errors of
        /// the file server come back as `Err`.
        fn call(&mut self, req: &Request) -> Result<Response, Errno> {
            let bytes = self.client.request(req);
            let frames = self.deliver_to_server(&bytes).unwrap();
            assert_eq!(frames.len(), 1);
            let answer = self.serve(&frames[0]);
            match self.deliver_to_client(&answer).unwrap() {
                Some(Response::Err(e)) => Err(e),
                Some(r) => Ok(r),
                None => panic!("no response"),
            }
        }

        fn path(&mut self, op: Op, p: &str) -> Result<Response, Errno> {
            self.client.bulk_write(0, 0, p.as_bytes()).unwrap();
            self.call(&Request::Path {
                op,
                slot: 0,
                len: p.len() as u32,
                exclusive: false,
            })
        }

        fn create(&mut self, p: &str) -> u64 {
            match self.path(Op::Create, p) {
                Ok(Response::Attr(a)) => a.ino,
                r => panic!("create {p}: {r:?}"),
            }
        }

        fn write(&mut self, ino: u64, offset: u64, data: &[u8]) -> Result<Response, Errno> {
            self.client.bulk_write(2, 0, data).unwrap();
            self.call(&Request::Data {
                op: Op::Write,
                slot: 2,
                ino,
                offset,
                len: data.len() as u32,
            })
        }

        fn read(&mut self, ino: u64, offset: u64, len: u32) -> Result<Vec<u8>, Errno> {
            let r = self.call(&Request::Data {
                op: Op::Read,
                slot: 1,
                ino,
                offset,
                len,
            })?;
            let Response::Data { bytes, .. } = r else {
                panic!("read answered {r:?}")
            };
            let mut buf = vec![0u8; bytes as usize];
            self.client.bulk_read(1, &mut buf).unwrap();
            Ok(buf)
        }

        /// Send a hand-made frame to the server and decode the answer for
        /// `op` without a client.
        fn raw(&mut self, desc: Desc, payload: &[u8], op: Op) -> (u32, Response, Vec<u8>) {
            let answer = self.dir.serve_net(
                &*self.mem,
                1,
                &Frame {
                    desc,
                    payload: payload.to_vec(),
                },
            );
            let (tag, r) = Response::decode(&answer.desc, op).unwrap();
            (tag, r, answer.payload)
        }
    }

    fn pattern(n: usize, seed: u8) -> Vec<u8> {
        (0..n).map(|i| (i % 251) as u8 ^ seed).collect()
    }

    #[test]
    fn pipelined_reads_come_back_in_order_with_their_data() {
        let mut rig = Rig::new(41);
        let ino = rig.create("/p");
        let data = pattern(10 * 4096, 9);
        rig.write(ino, 0, &data).unwrap();
        let reqs: Vec<Request> = (0..12u64)
            .map(|i| Request::Data {
                op: Op::Read,
                slot: 1,
                ino,
                offset: i * 4096,
                len: 4096,
            })
            .chain([Request::Getattr { ino }])
            .collect();
        let bytes = rig.client.request_batch(&reqs).unwrap();
        assert_eq!(rig.client.batch_pending(), reqs.len());
        // While a batch waits, nothing else can start one.
        assert_eq!(rig.client.request_batch(&reqs[..1]), Err(Errno::Invalid));
        let frames = rig.deliver_to_server(&bytes).unwrap();
        assert_eq!(frames.len(), reqs.len());
        let answers: Vec<u8> = frames.iter().flat_map(|f| rig.serve(f)).collect();
        let mut done = Vec::new();
        for c in rig.chunks(&answers) {
            rig.client.feed_batch(&c, &mut done).unwrap();
        }
        assert_eq!(rig.client.batch_pending(), 0);
        assert_eq!(done.len(), reqs.len());
        for (i, (resp, payload)) in done.iter().take(12).enumerate() {
            let want = data.get(i * 4096..(i + 1) * 4096).unwrap_or(&[]);
            assert!(matches!(resp, Response::Data { bytes, .. } if *bytes as usize == want.len()));
            assert_eq!(payload.as_slice(), want, "page {i}");
        }
        assert!(
            matches!(&done[12], (Response::Attr(a), p) if a.size == data.len() as u64 && p.is_empty())
        );
        // Requests with a payload cannot be pipelined; neither can too many.
        let w = Request::Data {
            op: Op::Write,
            slot: 2,
            ino,
            offset: 0,
            len: 1,
        };
        assert_eq!(rig.client.request_batch(&[w]), Err(Errno::Invalid));
        let many = vec![Request::Getattr { ino }; MAX_BATCH + 1];
        assert_eq!(rig.client.request_batch(&many), Err(Errno::Invalid));
        // An answer out of order (wrong tag) is a broken connection.
        let bytes = rig.client.request_batch(&reqs[..2]).unwrap();
        let frames = rig.deliver_to_server(&bytes).unwrap();
        let second = rig.serve(&frames[1]);
        assert_eq!(rig.client.feed_batch(&second, &mut done), Err(Errno::Io));
        rig.client.reset();
        assert_eq!(rig.client.batch_pending(), 0);
        // The single-request path still works after a reset.
        assert_eq!(rig.read(ino, 0, 4).unwrap(), data[..4].to_vec());
    }

    #[test]
    fn frames_round_trip_through_any_chunking() {
        let mut rng = SplitMix64::new(7);
        let frames: Vec<Frame> = (0..50u32)
            .map(|i| Frame {
                desc: Request::Getattr { ino: i as u64 }.encode(i),
                payload: pattern(
                    match i % 4 {
                        0 => 0,
                        1 => 1,
                        2 => MAX_PAYLOAD,
                        _ => rng.below(5000) as usize,
                    },
                    i as u8,
                ),
            })
            .collect();
        let mut stream = Vec::new();
        for f in &frames {
            encode_frame(&f.desc, &f.payload, &mut stream);
        }
        assert_eq!(
            stream.len(),
            frames
                .iter()
                .map(|f| FRAME_OVERHEAD + f.payload.len())
                .sum::<usize>()
        );
        assert_eq!(&stream[..4], b"OCNF");
        for seed in 0..5 {
            let mut rng = SplitMix64::new(seed);
            let mut rd = FrameReader::new();
            let mut got = Vec::new();
            let mut i = 0;
            while i < stream.len() {
                let n = (rng.range(1, 3 * MAX_PAYLOAD as u64 / 2) as usize).min(stream.len() - i);
                let n = if rng.chance(300) { n.min(3) } else { n };
                rd.push(&stream[i..i + n]);
                i += n;
                while let Some(f) = rd.next_frame().unwrap() {
                    got.push(f);
                }
                assert!(rd.buffered() < n + FRAME_OVERHEAD + MAX_PAYLOAD);
            }
            assert_eq!(got, frames);
            assert_eq!(rd.buffered(), 0);
            assert_eq!(rd.next_frame(), Ok(None));
        }
    }

    #[test]
    fn framing_errors_are_reported_and_sticky() {
        // Bad magic, found as soon as the header is in.
        let mut rd = FrameReader::new();
        rd.push(b"GET / HT");
        let m = u32::from_le_bytes(*b"GET ");
        assert_eq!(rd.next_frame(), Err(FrameError::BadMagic(m)));
        rd.push(
            &Frame {
                desc: [0; DESC_SIZE],
                payload: Vec::new(),
            }
            .to_bytes(),
        );
        assert_eq!(rd.next_frame(), Err(FrameError::BadMagic(m)), "sticky");
        assert_eq!(rd.buffered(), 0, "input dropped after an error");
        rd.reset();
        rd.push(
            &Frame {
                desc: [1; DESC_SIZE],
                payload: vec![9; 3],
            }
            .to_bytes(),
        );
        assert_eq!(rd.next_frame().unwrap().unwrap().payload, vec![9; 3]);
        // Oversize: reported from the header alone, nothing allocated.
        for len in [MAX_PAYLOAD as u32 + 1, u32::MAX] {
            let mut rd = FrameReader::new();
            let mut h = MAGIC.to_le_bytes().to_vec();
            h.extend_from_slice(&len.to_le_bytes());
            rd.push(&h);
            assert_eq!(rd.next_frame(), Err(FrameError::TooLong(len)));
        }
        // Exactly MAX_PAYLOAD is fine; an incomplete frame is just pending.
        let mut rd = FrameReader::new();
        let big = Frame {
            desc: [3; DESC_SIZE],
            payload: vec![5; MAX_PAYLOAD],
        }
        .to_bytes();
        rd.push(&big[..big.len() - 1]);
        assert_eq!(rd.next_frame(), Ok(None));
        rd.push(&big[big.len() - 1..]);
        assert_eq!(rd.next_frame().unwrap().unwrap().payload.len(), MAX_PAYLOAD);
        // Errors read well.
        assert!(FrameError::TooLong(70000).to_string().contains("70000"));
        assert!(FrameError::BadMagic(1).to_string().contains("magic"));
    }

    #[test]
    fn net_bulk_checks_bounds_and_tracks_writes() {
        let mut b = NetBulk::new();
        assert_eq!(b.cap(0), Some(MAX_PAYLOAD));
        assert_eq!(b.cap(SLOTS - 1), Some(MAX_PAYLOAD));
        assert_eq!(b.cap(SLOTS), None);
        assert_eq!(b.written(), None);
        b.write(3, 10, b"abc").unwrap();
        b.write(3, 0, b"xy").unwrap();
        assert_eq!(b.written(), Some((3, 13)));
        let mut buf = [0xffu8; 16];
        b.read(3, &mut buf).unwrap();
        assert_eq!(&buf, b"xy\0\0\0\0\0\0\0\0abc\0\0\0");
        assert_eq!(b.bytes(3, 13).unwrap(), buf[..13].to_vec());
        b.write(1, 0, b"q").unwrap();
        assert_eq!(b.written(), Some((1, 1)));
        b.clear_written();
        assert_eq!(b.written(), None);
        // Out of range: errors, no panic, nothing recorded.
        assert_eq!(b.write(4, 0, b"a"), Err(Errno::Invalid));
        assert_eq!(b.write(u32::MAX, 0, b"a"), Err(Errno::Invalid));
        assert_eq!(b.write(0, MAX_PAYLOAD, b"a"), Err(Errno::Invalid));
        assert_eq!(b.write(0, usize::MAX, b"a"), Err(Errno::Invalid));
        assert_eq!(b.read(9, &mut buf), Err(Errno::Invalid));
        assert_eq!(
            b.read(0, &mut vec![0; MAX_PAYLOAD + 1]),
            Err(Errno::Invalid)
        );
        assert_eq!(b.bytes(0, MAX_PAYLOAD + 1), Err(Errno::Invalid));
        assert_eq!(b.written(), None);
        b.write(0, MAX_PAYLOAD - 1, b"z").unwrap();
        assert_eq!(b.written(), Some((0, MAX_PAYLOAD)));
        assert_eq!(b.take_written().len(), MAX_PAYLOAD);
    }

    #[test]
    fn round_trip_create_write_read_getattr_readdir_unlink() {
        let mut rig = Rig::new(1);
        assert_eq!(rig.call(&Request::Nop), Ok(Response::Ok));
        let Ok(Response::Attr(d)) = rig.path(Op::Mkdir, "/d") else {
            panic!("mkdir")
        };
        let ino = rig.create("/d/f");
        let data = pattern(10_000, 0x5a);
        let Ok(Response::Data { bytes, attr }) = rig.write(ino, 0, &data) else {
            panic!("write")
        };
        assert_eq!((bytes, attr.size), (10_000, 10_000));
        // Read back in full, in a short read past the end and at an offset.
        assert_eq!(rig.read(ino, 0, 16384).unwrap(), data);
        assert_eq!(rig.read(ino, 9_000, 4096).unwrap(), data[9_000..]);
        assert_eq!(rig.read(ino, 20_000, 100).unwrap(), Vec::<u8>::new());
        let Ok(Response::Attr(a)) = rig.call(&Request::Getattr { ino }) else {
            panic!("getattr")
        };
        assert_eq!((a.ino, a.kind, a.size), (ino, FileKind::File, 10_000));
        // Readdir of /d: records land in the slot the request named.
        rig.create("/d/g");
        let Ok(Response::Entries { count, next_cookie }) = rig.call(&Request::Readdir {
            slot: 3,
            ino: d.ino,
            cookie: 0,
        }) else {
            panic!("readdir")
        };
        assert_eq!((count, next_cookie), (2, 0));
        let mut names = Vec::new();
        for k in 0..count as usize {
            let mut rec = [0u8; DIRENT_SIZE];
            let mut all = vec![0u8; (k + 1) * DIRENT_SIZE];
            rig.client.bulk_read(3, &mut all).unwrap();
            rec.copy_from_slice(&all[k * DIRENT_SIZE..]);
            names.push(DirEntry::decode(&rec).unwrap().name);
        }
        names.sort();
        assert_eq!(names, ["f", "g"]);
        // Unlink, then the file is gone; errors come back typed.
        assert_eq!(rig.path(Op::Unlink, "/d/f"), Ok(Response::Ok));
        assert_eq!(rig.path(Op::Lookup, "/d/f"), Err(Errno::NotFound));
        assert_eq!(rig.path(Op::Rmdir, "/d"), Err(Errno::NotEmpty));
        assert_eq!(rig.call(&Request::Getattr { ino }), Err(Errno::NotFound));
        let Ok(Response::Stats(s)) = rig.call(&Request::Stats) else {
            panic!("stats")
        };
        assert_eq!(s.requests, 15, "every frame counted");
        assert_eq!(rig.dir.ops()[Op::Read as usize], 3);
        assert_eq!(rig.call(&Request::Fsync { ino: 0 }), Ok(Response::Ok));
    }

    #[test]
    fn a_full_slot_is_written_and_read_in_one_frame() {
        let mut rig = Rig::new(2);
        let ino = rig.create("/big");
        let data = pattern(MAX_PAYLOAD, 3);
        let bytes = {
            rig.client.bulk_write(2, 0, &data).unwrap();
            rig.client.request(&Request::Data {
                op: Op::Write,
                slot: 2,
                ino,
                offset: 4096,
                len: MAX_PAYLOAD as u32,
            })
        };
        assert_eq!(bytes.len(), FRAME_OVERHEAD + MAX_PAYLOAD);
        let f = rig.deliver_to_server(&bytes).unwrap();
        let answer = rig.serve(&f[0]);
        assert_eq!(
            answer.len(),
            FRAME_OVERHEAD,
            "a write answer has no payload"
        );
        assert!(matches!(
            rig.deliver_to_client(&answer),
            Ok(Some(Response::Data { bytes: 65536, .. }))
        ));
        let got = rig.read(ino, 4096, MAX_PAYLOAD as u32).unwrap();
        assert_eq!(got, data);
        // One byte more than a slot is refused on both sides of the wire.
        assert_eq!(
            rig.call(&Request::Data {
                op: Op::Read,
                slot: 1,
                ino,
                offset: 0,
                len: MAX_PAYLOAD as u32 + 1,
            }),
            Err(Errno::Invalid)
        );
        assert_eq!(
            rig.call(&Request::Data {
                op: Op::Write,
                slot: 2,
                ino,
                offset: 0,
                len: MAX_PAYLOAD as u32 + 1,
            }),
            Err(Errno::Invalid)
        );
        assert_eq!(rig.read(ino, 0, 4096).unwrap(), vec![0; 4096], "unchanged");
    }

    #[test]
    fn bad_requests_get_clear_errors() {
        let mut rig = Rig::new(3);
        let ino = rig.create("/f");
        // Bad slots.
        for slot in [SLOTS, 99, u32::MAX] {
            let bad = [
                Request::Path {
                    op: Op::Lookup,
                    slot,
                    len: 2,
                    exclusive: false,
                },
                Request::Data {
                    op: Op::Write,
                    slot,
                    ino,
                    offset: 0,
                    len: 10,
                },
                Request::Data {
                    op: Op::Read,
                    slot,
                    ino,
                    offset: 0,
                    len: 10,
                },
                Request::Readdir {
                    slot,
                    ino: 1,
                    cookie: 0,
                },
            ];
            for r in bad {
                assert_eq!(rig.call(&r), Err(Errno::Invalid), "{r:?}");
            }
        }
        // Payload lengths that disagree with the request.
        let lookup = |len| Request::Path {
            op: Op::Lookup,
            slot: 0,
            len,
            exclusive: false,
        };
        let write = |len| Request::Data {
            op: Op::Write,
            slot: 2,
            ino,
            offset: 0,
            len,
        };
        let cases: [(Request, usize); 6] = [
            (lookup(2), 1),
            (lookup(2), 3),
            (write(100), 0),
            (write(100), 101),
            (Request::Getattr { ino }, 1),
            (
                Request::Data {
                    op: Op::Read,
                    slot: 1,
                    ino,
                    offset: 0,
                    len: 10,
                },
                10,
            ),
        ];
        for (i, (r, n)) in cases.into_iter().enumerate() {
            let tag = 1000 + i as u32;
            let (t, resp, payload) = rig.raw(r.encode(tag), &vec![b'/'; n], op_of(&r));
            assert_eq!((t, resp), (tag, Response::Err(Errno::Invalid)), "{r:?}");
            assert!(payload.is_empty());
        }
        // Invalid UTF-8 path.
        rig.client.bulk_write(0, 0, &[0xff, 0xfe]).unwrap();
        assert_eq!(rig.call(&lookup(2)), Err(Errno::Invalid));
        // Garbage descriptors: Invalid with their own opcode and tag.
        let mut garbage = Raw {
            op: 0xEEEE,
            status: 0,
            tag: 77,
            args: [u64::MAX; 7],
        };
        let answer = rig.dir.serve_net(
            &*rig.mem,
            1,
            &Frame {
                desc: garbage.encode(),
                payload: vec![1, 2, 3],
            },
        );
        let raw = Raw::decode(&answer.desc);
        assert_eq!(
            (raw.op, raw.status, raw.tag),
            (0xEEEE, Errno::Invalid as u16, 77)
        );
        assert!(answer.payload.is_empty());
        garbage.op = Op::Lookup as u16; // path length out of range
        let (t, resp, _) = rig.raw(garbage.encode(), &[], Op::Lookup);
        assert_eq!((t, resp), (77, Response::Err(Errno::Invalid)));
        // The file is untouched by all this.
        assert_eq!(rig.read(ino, 0, 10).unwrap(), Vec::<u8>::new());
        // A request naming a bad slot or length goes out without payload.
        let f = rig.client.request(&write(MAX_PAYLOAD as u32 + 1));
        assert_eq!(f.len(), FRAME_OVERHEAD);
        rig.client.reset();
    }

    #[test]
    fn page_requests_are_refused_over_the_network() {
        let mut rig = Rig::new(4);
        let ino = rig.create("/p");
        let key = PageKey { ino, idx: 0 };
        let (gfn, _) = rig.dir.layout().pool_gfns(1);
        for p in [
            PageReq::Read { key, frame: gfn },
            PageReq::LookupLock { key, frame: gfn },
            PageReq::Unlock { key },
            PageReq::Inv { key, dirty: true },
            PageReq::Drop { key, dirty: false },
            PageReq::Writeback { key, dirty: true },
        ] {
            assert_eq!(rig.call(&Request::Page(p)), Err(Errno::Invalid));
        }
        assert_eq!(rig.call(&Request::PageStats), Err(Errno::Invalid));
        assert!(rig.dir.pages().is_empty());
        assert!(matches!(rig.call(&Request::Stats), Ok(Response::Stats(_))));
        assert_eq!(rig.call(&Request::Nop), Ok(Response::Ok));
    }

    #[test]
    fn client_rejects_bad_answers() {
        let mut rig = Rig::new(5);
        let ino = rig.create("/c");
        rig.write(ino, 0, &pattern(500, 1)).unwrap();
        let read = Request::Data {
            op: Op::Read,
            slot: 1,
            ino,
            offset: 0,
            len: 100,
        };
        let ok = Response::Data {
            bytes: 100,
            attr: crate::proto::Attr {
                ino,
                kind: FileKind::File,
                size: 500,
                version: 1,
            },
        };
        let tag = |c: &NetClient| c.pending_tag().unwrap();
        // Unsolicited answer.
        let mut c = NetClient::new();
        let f = Frame {
            desc: Response::Ok.encode(Op::Nop, 1),
            payload: Vec::new(),
        };
        assert_eq!(c.feed(&f.to_bytes()), Err(Errno::Io));
        // Wrong tag, wrong opcode, payload not matching the response,
        // more bytes than were asked for, bad magic.
        let cases: [(u32, Desc, usize); 5] = [
            (1, ok.encode(Op::Read, 0), 100),
            (0, ok.encode(Op::Write, 0), 100),
            (0, ok.encode(Op::Read, 0), 99),
            (0, Response::Ok.encode(Op::Read, 0), 0),
            (0, ok.encode(Op::Read, 0), 100),
        ];
        for (k, (dtag, desc, n)) in cases.into_iter().enumerate() {
            c.reset();
            let _ = c.request(&read);
            let mut raw = Raw::decode(&desc);
            raw.tag = tag(&c).wrapping_add(dtag);
            let mut bytes = Frame {
                desc: raw.encode(),
                payload: vec![7; n],
            }
            .to_bytes();
            if k == 4 {
                bytes[0] ^= 1;
            }
            assert_eq!(c.feed(&bytes), Err(Errno::Io), "case {k}");
        }
        // More data than the read asked for.
        c.reset();
        let _ = c.request(&read);
        let mut raw = Raw::decode(&ok.encode(Op::Read, 0));
        raw.tag = tag(&c);
        raw.args[4] = 101;
        let f = Frame {
            desc: raw.encode(),
            payload: vec![7; 101],
        };
        assert_eq!(c.feed(&f.to_bytes()), Err(Errno::Io));
        // After a reset the client works again, and errors travel as
        // responses, not transport failures.
        rig.client.reset();
        assert_eq!(rig.read(ino, 0, 500).unwrap(), pattern(500, 1));
        assert_eq!(rig.read(9999, 0, 5), Err(Errno::NotFound));
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

    #[test]
    fn fuzz_reader_server_and_client() {
        let mut rig = Rig::new(6);
        let ino = rig.create("/z");
        rig.write(ino, 0, &pattern(3000, 9)).unwrap();
        let mut rng = SplitMix64::new(0xF00D);
        // Random bytes into a reader, sometimes behind a valid magic.
        for _ in 0..2000 {
            let mut rd = FrameReader::new();
            let mut bytes: Vec<u8> = (0..rng.below(300)).map(|_| rng.next_u64() as u8).collect();
            if rng.chance(500) {
                let mut h = MAGIC.to_le_bytes().to_vec();
                h.extend_from_slice(&(rng.below(200) as u32).to_le_bytes());
                h.extend_from_slice(&bytes);
                bytes = h;
            }
            let mut i = 0;
            while i < bytes.len() {
                let n = (rng.range(1, 64) as usize).min(bytes.len() - i);
                rd.push(&bytes[i..i + n]);
                i += n;
                while let Ok(Some(_)) = rd.next_frame() {}
            }
            assert!(rd.buffered() <= bytes.len());
        }
        // Random frames into the server: every one is answered with its
        // tag, a payload matching the response, and the op it came with.
        let (mut served_ok, mut with_payload) = (0, 0);
        for _ in 0..5000 {
            let mut raw = Raw {
                op: FUZZ_OPS[rng.below(FUZZ_OPS.len() as u64) as usize],
                status: rng.below(3) as u16,
                tag: rng.next_u64() as u32,
                args: [0; 7],
            };
            for a in raw.args.iter_mut() {
                *a = match rng.below(5) {
                    0 => 0,
                    1 => rng.below(5),
                    2 => ino,
                    3 => rng.below(70_000),
                    _ => rng.next_u64(),
                };
            }
            if rng.chance(500) {
                // Plausible: [slot, ino, offset or cookie, len].
                raw.args[0] = rng.below(5);
                raw.args[1] = if rng.chance(800) { ino } else { 1 };
                raw.args[2] = rng.below(5000);
                raw.args[3] = rng.below(70_000);
            }
            let n = match rng.below(3) {
                0 => 0,
                1 => raw.args[if raw.op == Op::Write as u16 { 3 } else { 1 }] as usize,
                _ => rng.below(100) as usize,
            }
            .min(MAX_PAYLOAD);
            let payload: Vec<u8> = (0..n).map(|_| b"/abz\xff"[rng.below(5) as usize]).collect();
            let req = Frame {
                desc: raw.encode(),
                payload,
            };
            let answer = rig.dir.serve_net(&*rig.mem, 1, &req);
            let a = Raw::decode(&answer.desc);
            assert_eq!((a.op, a.tag), (raw.op, raw.tag));
            if let Some(op) = Op::from_u16(raw.op) {
                if let Ok((_, resp)) = Response::decode(&answer.desc, op) {
                    assert_eq!(answer.payload.len(), answer_len(op, &resp));
                    if !matches!(resp, Response::Err(_)) {
                        served_ok += 1;
                    }
                }
            }
            with_payload += usize::from(!answer.payload.is_empty());
            assert!(answer.payload.len() <= MAX_PAYLOAD);
            // And the answer, mangled or not, into a client waiting for
            // something: an answer or an error, never a panic.
            let mut c = NetClient::new();
            if let Ok((_, r)) = Request::decode(&raw.encode()) {
                let _ = c.request(&r);
            }
            let mut bytes = answer.to_bytes();
            if rng.chance(300) && !bytes.is_empty() {
                let i = rng.below(bytes.len() as u64) as usize;
                bytes[i] ^= 1 << rng.below(8);
            }
            let _ = c.feed(&bytes);
        }
        assert!(served_ok > 200, "fuzz reaches the file system: {served_ok}");
        assert!(with_payload >= 5, "and reads data back: {with_payload}");
        // The server survived all of it.
        assert_eq!(rig.call(&Request::Nop), Ok(Response::Ok));
        assert!(matches!(rig.path(Op::Lookup, "/"), Ok(Response::Attr(_))));
    }
}
