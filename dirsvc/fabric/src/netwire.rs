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

use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

use crate::bulk::Bulk;
use crate::layout::{DEFAULT_BULK_SLOTS, DEFAULT_BULK_SLOT_BYTES};
use crate::proto::{Desc, Errno, Op, Request, Response, DESC_SIZE, DIRENT_SIZE};

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
    pub fn put(&mut self, slot: u32, data: Vec<u8>) -> Result<(), Errno> {
        if data.len() > MAX_PAYLOAD {
            return Err(Errno::Invalid);
        }
        let s = self.slots.get_mut(slot as usize).ok_or(Errno::Invalid)?;
        *s = data;
        Ok(())
    }

    /// Take the bytes of the last write (see [`NetBulk::written`]) out of
    /// their slot; empty if nothing was written.
    pub fn take_written(&mut self) -> Vec<u8> {
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
pub fn request_payload(req: &Request) -> Option<(u32, u32)> {
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
pub fn answer_slot(req: &Request) -> Option<(u32, usize)> {
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
pub fn answer_len(op: Op, resp: &Response) -> usize {
    match (op, resp) {
        (Op::Read, Response::Data { bytes, .. }) => *bytes as usize,
        (Op::Readdir, Response::Entries { count, .. }) => {
            (*count as usize).saturating_mul(DIRENT_SIZE)
        }
        _ => 0,
    }
}
