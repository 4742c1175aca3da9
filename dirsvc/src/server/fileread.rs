//! File-server reads over the rings without blocking the loop (`private`
//! mode's misses): a read's blocks go to the disk queue
//! as fills with [`Dest::Read`], in the same queue as the single-copy page
//! fills, and the loop serves everything else while they fly. When the
//! last block arrived (each checked against its checksum) the bytes go
//! into the requester's bulk slot and the answer onto its ring, so a miss
//! waits for the disk exactly as a single-copy miss does.
//!
//! A block with a write pending is taken from the write's bytes, as a
//! page fill does. A write, truncate or unlink of the file waits for its
//! reads in flight ([`Directory::order_before`]: they are fills of that
//! file). A requester that fails meanwhile has its reads dropped and their
//! completions discarded (its slot may belong to a new session). `net`
//! mode's reads take the same path ([`Via::Net`]): the bytes travel in
//! the answer frame instead of a slot. With a synchronous device (or
//! `fill_depth` 0) the file server reads as before ([`Directory::execute`]).

use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;

use super::reply::Via;
use crate::diskq::{Dest, Fill};
use fabric::bulk::{Bulk, ShmBulk};
use fabric::netwire::NetBulk;
use fabric::proto::{Errno, MissKind, Op, PageKey, Request, Response};
use fabric::shm::SharedMem;
use fabric::PAGE_SIZE;
use flatfs::{BlockDevice, BlockSource, BLOCK_SIZE};

use super::Directory;

/// File-server reads waiting for their blocks, by id. Owned here: only
/// this file starts, completes and cancels them.
#[derive(Debug, Default)]
pub(super) struct FileReads {
    pending: BTreeMap<u64, PendingRead>,
    /// The next read's id.
    next: u64,
}

/// A file-server read whose blocks are on the disk.
#[derive(Debug)]
pub(super) struct PendingRead {
    node: u32,
    op: Op,
    tag: u32,
    slot: u32,
    at: u32,
    /// Where the answer goes (on the ring path the bytes go to `slot`).
    via: Via,
    ino: u64,
    offset: u64,
    /// The bytes the read returns (clipped to the file's size).
    buf: Vec<u8>,
    /// Blocks not arrived yet.
    left: usize,
    /// A block failed (device error or checksum mismatch).
    failed: bool,
    /// `daxfs` mode: the bytes go into this PENDING slot's frame, not a
    /// bulk slot (`server/daxfill.rs`).
    dax: Option<daxcache::pcache::FillJob>,
}

/// What the ring path asked to read (a `Request::Data` with `Op::Read`).
#[derive(Debug, Clone, Copy)]
pub(super) struct ReadReq {
    pub node: u32,
    pub op: Op,
    pub tag: u32,
    pub slot: u32,
    pub at: u32,
    pub via: Via,
    pub ino: u64,
    pub offset: u64,
    pub len: u32,
    pub dax: Option<daxcache::pcache::FillJob>,
}

impl ReadReq {
    /// `req` from `node` (tag `tag`, answered by `via`) if it is a
    /// file-server read.
    pub fn of(node: u32, tag: u32, via: Via, req: &Request) -> Option<ReadReq> {
        match *req {
            Request::Data {
                op: op @ Op::Read,
                slot,
                at,
                ino,
                offset,
                len,
                ..
            } => Some(ReadReq {
                node,
                op,
                tag,
                slot,
                at,
                via,
                ino,
                offset,
                len,
                dax: None,
            }),
            _ => None,
        }
    }
}

impl PendingRead {
    /// Copy the part of block `block` (file offset `block * 4096`) that
    /// the read covers from `blk`.
    fn take(&mut self, block: u64, blk: &[u8]) {
        let start = block * PAGE_SIZE as u64;
        let end = self.offset + self.buf.len() as u64;
        let from = start.max(self.offset);
        let to = (start + PAGE_SIZE as u64).min(end);
        if from >= to {
            return;
        }
        let dst = (from - self.offset) as usize..(to - self.offset) as usize;
        let src = (from - start) as usize..(to - start) as usize;
        if let (Some(d), Some(s)) = (self.buf.get_mut(dst), blk.get(src)) {
            d.copy_from_slice(s);
        }
    }
}

impl<D: BlockDevice> Directory<D> {
    /// Serve a file-server read asynchronously (the caller checked that
    /// fills are: `fill_depth` above 0). Returns the answer if it is ready
    /// now (an error, or nothing to read from the device), with the bytes
    /// for a [`Via::Net`] answer (empty on the ring path: they are in the
    /// slot); else it goes out by `r.via` once the read's blocks arrived.
    pub(super) fn read_file(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        r: ReadReq,
    ) -> Option<(Response, Vec<u8>)> {
        match self.start_read(mem, r) {
            Ok(answer) => answer,
            Err(e) => Some((Response::Err(e), Vec::new())),
        }
    }

    /// Plan the read and queue its blocks; `Some` when answered already
    /// (nothing to read from the device).
    fn start_read(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        r: ReadReq,
    ) -> Result<Option<(Response, Vec<u8>)>, Errno> {
        let cap = match r.via {
            // A fill goes into the slot's frame: one page.
            _ if r.dax.is_some() => Some(PAGE_SIZE),
            Via::Ring => ShmBulk::new(mem, self.layout, r.node).cap(r.slot),
            Via::Net(_) => NetBulk::new().cap(r.slot),
        };
        let cap = cap.ok_or(Errno::Invalid)?;
        match (r.at as usize).checked_add(r.len as usize) {
            Some(end) if end <= cap => {}
            _ => return Err(Errno::Invalid),
        }
        let fs = self.fs.as_ref().ok_or(Errno::Unavailable)?;
        let (n, blocks) = fs.read_plan(r.ino, r.offset, r.len as usize)?;
        let mut read = PendingRead {
            node: r.node,
            op: r.op,
            tag: r.tag,
            slot: r.slot,
            at: r.at,
            via: r.via,
            ino: r.ino,
            offset: r.offset,
            buf: vec![0u8; n],
            left: 0,
            failed: false,
            dax: r.dax,
        };
        let id = self.io.reads.next;
        let mut fills = Vec::new();
        for (block, src) in blocks {
            match src {
                BlockSource::Zeros => read.take(block, &[0u8; BLOCK_SIZE]),
                // A block with a write pending is read from its bytes.
                BlockSource::Disk { lba, len } => match self.pending_page(lba, len) {
                    Some(page) => read.take(block, &page),
                    None => fills.push(Fill {
                        key: PageKey {
                            ino: r.ino,
                            idx: block,
                        },
                        dest: Dest::Read(id),
                        node: r.node as u8,
                        tag: r.tag,
                        lba,
                        len,
                    }),
                },
            }
        }
        if fills.is_empty() {
            return self.read_answer(mem, read).map(Some);
        }
        self.io.reads.next += 1;
        read.left = fills.len();
        self.counters
            .miss
            .fill_queued(MissKind::FileRead, r.node as u8, r.tag);
        for f in fills {
            self.io.disk.push(f);
        }
        self.io.reads.pending.insert(id, read);
        let mut acts = Vec::new();
        self.pump(mem, &mut acts);
        if !acts.is_empty() {
            self.run(mem, acts);
        }
        Ok(None)
    }

    /// Block `f` of a file read arrived (`blk`: its bytes, or the
    /// device's error); `seen` is when its completion was seen. Answers
    /// the read once its last block is in.
    pub(super) fn read_block_done(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        f: &Fill,
        blk: Result<alloc::boxed::Box<[u8; BLOCK_SIZE]>, flatfs::IoError>,
        seen: u64,
    ) {
        let Dest::Read(id) = f.dest else { return };
        if !self.io.reads.pending.contains_key(&id) {
            return; // its requester failed meanwhile
        }
        let blk = self.checked_block(f, blk);
        let Some(read) = self.io.reads.pending.get_mut(&id) else {
            return;
        };
        match &blk {
            Some(blk) => read.take(f.key.idx, &blk[..]),
            None => read.failed = true,
        }
        read.left = read.left.saturating_sub(1);
        if read.left > 0 {
            return;
        }
        let Some(read) = self.io.reads.pending.remove(&id) else {
            return;
        };
        let (node, via, op, tag) = (read.node, read.via, read.op, read.tag);
        let answer = if read.dax.is_some() {
            // `daxfs`: publish (or give back) the slot either way.
            let ok = !read.failed;
            let answer = self.read_answer(mem, read);
            self.counters.miss.fill_done(node as u8, tag, seen, ok);
            let (answer, payload) = answer.unwrap_or_else(|e| (Response::Err(e), Vec::new()));
            self.answer_via(mem, node, via, answer.encode(op, tag), payload);
            return;
        } else if read.failed {
            Err(Errno::Io)
        } else {
            self.read_answer(mem, read)
        };
        let ok = answer.is_ok();
        let (answer, payload) = answer.unwrap_or_else(|e| (Response::Err(e), Vec::new()));
        self.counters.miss.fill_done(node as u8, tag, seen, ok);
        self.answer_via(mem, node, via, answer.encode(op, tag), payload);
    }

    /// A read's answer, and its bytes: put into its slot on the ring path
    /// (no bytes returned), returned for a [`Via::Net`] answer's frame.
    fn read_answer(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        read: PendingRead,
    ) -> Result<(Response, Vec<u8>), Errno> {
        let attr = self
            .fs
            .as_mut()
            .ok_or(Errno::Unavailable)
            .and_then(|fs| fs.getattr(read.ino));
        if let Some(job) = read.dax {
            let data = if read.failed {
                Err(Errno::Io)
            } else {
                Ok(&read.buf[..])
            };
            return Ok((self.dax_publish(mem, &job, data, attr), Vec::new()));
        }
        let attr = attr?;
        let answer = Response::Data {
            bytes: read.buf.len() as u32,
            attr,
        };
        match read.via {
            Via::Ring => {
                let mut bulk = ShmBulk::new(mem, self.layout, read.node);
                bulk.write(read.slot, read.at as usize, &read.buf)?;
                Ok((answer, Vec::new()))
            }
            Via::Net(_) => Ok((answer, read.buf)),
        }
    }

    /// `node` failed or left: its file reads will not be answered (their
    /// blocks in the disk queue are cancelled with its page fills).
    pub(super) fn cancel_reads(&mut self, node: u32) {
        self.io.reads.pending.retain(|_, r| r.node != node);
    }

    /// File-server reads waiting for their blocks.
    pub fn reads_pending(&self) -> usize {
        self.io.reads.pending.len()
    }
}
