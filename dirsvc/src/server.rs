//! The directory's serving loop: membership (join, heartbeats, failure),
//! the request rings of every node, and the metadata/storage server over
//! the file system.
//!
//! [`Directory::poll`] does one pass over every node and returns what it
//! did; the kernel calls it in its loop on the directory's dedicated core
//! and logs the [`Event`]s. Everything here is pure logic over
//! [`SharedMem`] and [`BlockDevice`], so the host tests drive it with a heap
//! region and an in-memory disk.

use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec;
use alloc::vec::Vec;

use crate::pagedir::{Action, PageDir};
use fabric::bulk::{Bulk, ShmBulk};
use fabric::layout::{DirState, Header, Layout, NodeState};
use fabric::proto::PageKey;
use fabric::proto::{
    op_of, DecodeError, Desc, DirStats, Errno, Notice, Op, Raw, Request, Response, DIRENT_SIZE,
};
use fabric::ring::{Consumer, Producer, RingError};
use fabric::shm::SharedMem;
use flatfs::{BlockDevice, Fs};

/// Something worth a log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A node joined (or rejoined) with a new session epoch.
    Joined {
        /// Node id.
        node: u32,
        /// Its session epoch.
        epoch: u64,
    },
    /// A node's heartbeat stopped for longer than the timeout.
    Failed {
        /// Node id.
        node: u32,
        /// Milliseconds since its heartbeat last changed.
        silent_ms: u64,
    },
    /// A node said goodbye.
    Left {
        /// Node id.
        node: u32,
    },
    /// A node's rings hold impossible indices; the node is failed.
    Corrupt {
        /// Node id.
        node: u32,
        /// What was wrong.
        error: RingError,
    },
    /// A request could not be decoded; it was answered with `Invalid`.
    BadRequest {
        /// Node id.
        node: u32,
        /// Why.
        error: DecodeError,
    },
}

/// Directory configuration.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// A member whose heartbeat does not change for this long is failed.
    pub heartbeat_timeout_ns: u64,
    /// Most requests taken from one node per poll (fairness).
    pub batch: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            heartbeat_timeout_ns: 3_000_000_000,
            batch: 32,
        }
    }
}

/// Per-node state kept privately by the directory.
struct Peer {
    req: Consumer,
    resp: Producer,
    notify: Producer,
    ack: Consumer,
    /// Responses that did not fit in the response ring yet.
    backlog: VecDeque<Desc>,
    /// Invalidations that did not fit in the notify ring yet.
    notify_backlog: VecDeque<Desc>,
    member: bool,
    last_hb: u64,
    last_hb_change_ns: u64,
}

/// The directory service.
pub struct Directory<D: BlockDevice> {
    layout: Layout,
    fs: Option<Fs<D>>,
    peers: Vec<Peer>,
    cfg: Config,
    requests: u64,
    ops: [u64; 32],
    /// The last malformed request seen, reported once per poll.
    last_bad: Option<Event>,
    /// The single-copy page directory.
    pages: PageDir,
    /// Opcode of every page request not answered yet, by (node, tag).
    page_ops: BTreeMap<(u8, u32), Op>,
    /// Requests served per sweep (index = batch size, capped at 64).
    batches: [u64; 65],
}

/// Result of one [`Directory::poll`].
#[derive(Debug, Default)]
pub struct Poll {
    /// Requests served in this pass.
    pub served: usize,
    /// Membership and error events.
    pub events: Vec<Event>,
}

impl<D: BlockDevice> Directory<D> {
    /// Start serving a region that `layout.format` just wrote. Without a
    /// file system (`None`: no disk, or the mount was refused) every request
    /// is answered with `Unavailable` and the header says `NoStorage`.
    pub fn new(
        mem: &(impl SharedMem + ?Sized),
        layout: Layout,
        fs: Option<Fs<D>>,
        cfg: Config,
    ) -> Directory<D> {
        let h = Header::new(mem, layout);
        h.set_dir_state(if fs.is_some() {
            DirState::Up
        } else {
            DirState::NoStorage
        });
        let peers = (1..=layout.max_nodes)
            .map(|n| {
                let ch = layout.channel(n);
                Peer {
                    req: Consumer::new(ch.request),
                    resp: Producer::new(ch.response),
                    notify: Producer::new(ch.notify),
                    ack: Consumer::new(ch.ack),
                    backlog: VecDeque::new(),
                    notify_backlog: VecDeque::new(),
                    member: false,
                    last_hb: 0,
                    last_hb_change_ns: 0,
                }
            })
            .collect();
        Directory {
            layout,
            fs,
            peers,
            cfg,
            requests: 0,
            ops: [0; 32],
            last_bad: None,
            pages: PageDir::for_nodes(layout.max_nodes),
            page_ops: BTreeMap::new(),
            batches: [0; 65],
        }
    }

    /// The layout being served.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Does the directory have storage?
    pub fn has_storage(&self) -> bool {
        self.fs.is_some()
    }

    /// The file system, if mounted.
    pub fn fs(&self) -> Option<&Fs<D>> {
        self.fs.as_ref()
    }

    /// Flush and give the file system back (shutdown).
    pub fn shutdown(&mut self, mem: &(impl SharedMem + ?Sized)) -> Option<Fs<D>> {
        Header::new(mem, self.layout).set_dir_state(DirState::Down);
        let mut fs = self.fs.take();
        if let Some(f) = fs.as_mut() {
            let _ = f.sync();
        }
        fs
    }

    /// Counters for `dir stats` and [`Op::Stats`].
    pub fn stats(&self) -> DirStats {
        let mut s = DirStats {
            requests: self.requests,
            ..DirStats::default()
        };
        if let Some(fs) = &self.fs {
            let f = fs.stats();
            s.disk_reads = f.disk_reads;
            s.disk_writes = f.disk_writes;
            s.inodes_used = f.inodes_used;
            s.inodes_total = f.inodes_total;
            s.blocks_used = f.blocks_used;
            s.blocks_total = f.blocks_total;
        }
        s
    }

    /// Requests served per opcode number (index = opcode, capped at 31).
    pub fn ops(&self) -> &[u64; 32] {
        &self.ops
    }

    /// One full pass: [`Directory::membership`] then [`Directory::serve`].
    pub fn poll(&mut self, mem: &(impl SharedMem + ?Sized), now_ns: u64) -> Poll {
        let mut p = self.membership(mem, now_ns);
        let s = self.serve(mem);
        p.served = s.served;
        p.events.extend(s.events);
        p
    }

    /// Joins, leaves and heartbeat checks. `now_ns` is a monotonic clock.
    /// Cheap, but not needed on every spin: the kernel runs it every few
    /// tens of microseconds and [`Directory::serve`] in between.
    pub fn membership(&mut self, mem: &(impl SharedMem + ?Sized), now_ns: u64) -> Poll {
        let h = Header::new(mem, self.layout);
        let mut out = Poll::default();
        for node in 1..=self.layout.max_nodes {
            let i = (node - 1) as usize;
            match h.node_state(node) {
                Some(NodeState::Joining) => {
                    // A node that restarted before its heartbeat timed out:
                    // tear its previous life down first.
                    if self.peers[i].member {
                        self.peers[i].member = false;
                        self.lose(mem, node);
                    }
                    // Its frames may still be mapped by others until their
                    // acks arrive: admit it only when nothing uses them.
                    if self.pages.holds_frames_of(node as u8) {
                        continue;
                    }
                    // Drop whatever the previous session left behind.
                    h.reset_channel(node);
                    let ch = self.layout.channel(node);
                    let p = &mut self.peers[i];
                    p.req = Consumer::new(ch.request);
                    p.resp = Producer::new(ch.response);
                    p.notify = Producer::new(ch.notify);
                    p.ack = Consumer::new(ch.ack);
                    p.backlog.clear();
                    p.notify_backlog.clear();
                    p.member = true;
                    p.last_hb = h.node_heartbeat(node);
                    p.last_hb_change_ns = now_ns;
                    let epoch = h.next_epoch();
                    h.set_node_epoch(node, epoch);
                    h.set_node_state(node, NodeState::Up);
                    out.events.push(Event::Joined { node, epoch });
                }
                Some(NodeState::Up) if self.peers[i].member => {
                    let hb = h.node_heartbeat(node);
                    let p = &mut self.peers[i];
                    if hb != p.last_hb {
                        p.last_hb = hb;
                        p.last_hb_change_ns = now_ns;
                    } else if now_ns.saturating_sub(p.last_hb_change_ns)
                        > self.cfg.heartbeat_timeout_ns
                    {
                        let silent_ms = (now_ns - p.last_hb_change_ns) / 1_000_000;
                        p.member = false;
                        h.set_node_state(node, NodeState::Failed);
                        out.events.push(Event::Failed { node, silent_ms });
                        self.lose(mem, node);
                    }
                }
                Some(NodeState::Left) if self.peers[i].member => {
                    self.peers[i].member = false;
                    out.events.push(Event::Left { node });
                    self.lose(mem, node);
                }
                _ => {}
            }
        }
        out
    }

    /// Serve up to `cfg.batch` requests of every member.
    pub fn serve(&mut self, mem: &(impl SharedMem + ?Sized)) -> Poll {
        let mut out = Poll::default();
        for node in 1..=self.layout.max_nodes {
            if !self.peers[(node - 1) as usize].member {
                continue;
            }
            match self.serve_node(mem, node) {
                Ok(n) => out.served += n,
                Err(error) => {
                    self.peers[(node - 1) as usize].member = false;
                    Header::new(mem, self.layout).set_node_state(node, NodeState::Failed);
                    out.events.push(Event::Corrupt { node, error });
                    self.lose(mem, node);
                }
            }
            if let Some(e) = self.last_bad.take() {
                out.events.push(e);
            }
        }
        self.requests += out.served as u64;
        out
    }

    fn serve_node(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        node: u32,
    ) -> Result<usize, RingError> {
        let i = (node - 1) as usize;
        // Acks first: they complete invalidations others wait for.
        let mut acks = 0;
        while acks < 4 * self.cfg.batch {
            let Some(d) = self.peers[i].ack.pop(mem)? else {
                break;
            };
            acks += 1;
            match Notice::decode(&d) {
                Ok(Notice::InvAck { key, dirty }) => {
                    log::debug!("node {node}: ack {key:?} dirty={dirty}");
                    let a = self.pages.ack(node as u8, key, dirty);
                    self.run(mem, a);
                }
                Ok(Notice::DirInv(_)) => {
                    self.last_bad = Some(Event::BadRequest {
                        node,
                        error: DecodeError::BadOpcode(Op::DirInv as u16),
                    })
                }
                Err(error) => self.last_bad = Some(Event::BadRequest { node, error }),
            }
        }
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
        self.flush(mem, node)?;
        if served > 0 {
            self.batches[served.min(64)] += 1;
        }
        Ok(served + acks)
    }

    /// Push backlogged responses and notifications of `node`.
    fn flush(&mut self, mem: &(impl SharedMem + ?Sized), node: u32) -> Result<(), RingError> {
        let p = &mut self.peers[(node - 1) as usize];
        while let Some(d) = p.backlog.front() {
            match p.resp.push(mem, d) {
                Ok(()) => {
                    p.backlog.pop_front();
                }
                Err(RingError::Full) => break,
                Err(e) => return Err(e),
            }
        }
        while let Some(d) = p.notify_backlog.front() {
            match p.notify.push(mem, d) {
                Ok(()) => {
                    p.notify_backlog.pop_front();
                }
                Err(RingError::Full) => break,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Queue (or, when nothing is queued before it, publish at once) a
    /// response to `node`.
    fn respond(&mut self, mem: &(impl SharedMem + ?Sized), node: u32, d: Desc) {
        if let Some(p) = self.peers.get_mut((node as usize).wrapping_sub(1)) {
            if p.member && !(p.backlog.is_empty() && p.resp.push(mem, &d).is_ok()) {
                p.backlog.push_back(d);
            }
        }
    }

    /// `node` is gone (failed, left, restarted): drop it from the page
    /// directory and forget its unanswered page requests.
    fn lose(&mut self, mem: &(impl SharedMem + ?Sized), node: u32) {
        let a = self.pages.node_failed(node as u8);
        self.run(mem, a);
        self.page_ops.retain(|(n, _), _| *n as u32 != node);
    }

    /// Offset of global frame `gfn` in the region, if it is a pool frame.
    fn frame_off(&self, gfn: u64) -> Option<usize> {
        self.layout.gfn_owner(gfn)?;
        usize::try_from(gfn)
            .ok()?
            .checked_mul(fabric::layout::FRAME)
    }

    /// Word offset and bit of `gfn`'s export bit.
    fn export_bit(&self, gfn: u64) -> Option<(usize, u64)> {
        let node = self.layout.gfn_owner(gfn)?;
        let (first, _) = self.layout.pool_gfns(node);
        let idx = (gfn - first) as usize;
        let off = self.layout.bitmap_off
            + (node as usize - 1) * self.layout.bitmap_bytes
            + (idx / 64) * 8;
        Some((off, 1u64 << (idx % 64)))
    }

    /// Execute page-directory actions (which may produce more).
    fn run(&mut self, mem: &(impl SharedMem + ?Sized), actions: Vec<Action>) {
        let mut queue: VecDeque<Action> = actions.into();
        let mut page = vec![0u8; fabric::layout::FRAME];
        while let Some(a) = queue.pop_front() {
            log::debug!("page action {a:?}");
            match a {
                Action::Reply { node, tag, reply } => {
                    let op = self.page_ops.remove(&(node, tag)).unwrap_or(Op::PageRead);
                    let d = Response::Page(reply).encode(op, tag);
                    self.respond(mem, node as u32, d);
                }
                Action::Fill { key, gfn } => {
                    let foff = self.frame_off(gfn);
                    let ok = match (self.fs.as_mut(), foff) {
                        (Some(fs), Some(off)) => {
                            page.fill(0);
                            let r =
                                fs.read(key.ino, key.idx * fabric::layout::FRAME as u64, &mut page);
                            if r.is_ok() {
                                mem.write(off, &page);
                            }
                            r.is_ok()
                        }
                        _ => false,
                    };
                    queue.extend(self.pages.filled(key, ok));
                }
                Action::WriteBack { key, gfn } => {
                    let foff = self.frame_off(gfn);
                    if let (Some(fs), Some(off)) = (self.fs.as_mut(), foff) {
                        let start = key.idx * fabric::layout::FRAME as u64;
                        if let Ok(attr) = fs.getattr(key.ino) {
                            if start < attr.size {
                                let n = ((attr.size - start) as usize).min(fabric::layout::FRAME);
                                mem.read(off, &mut page[..n]);
                                let _ = fs.write(key.ino, start, &page[..n]);
                            }
                        }
                    }
                }
                Action::Invalidate { node, key } => {
                    if let Some(p) = self.peers.get_mut(node as usize - 1) {
                        p.notify_backlog.push_back(Notice::DirInv(key).encode());
                    }
                }
                Action::Export { gfn, on } => {
                    if let Some((off, bit)) = self.export_bit(gfn) {
                        let w = mem.load_u64(off);
                        mem.store_u64(off, if on { w | bit } else { w & !bit });
                    }
                }
            }
        }
        // Deliver what was queued for every node right away.
        for n in 1..=self.layout.max_nodes {
            if self.peers[n as usize - 1].member {
                let _ = self.flush(mem, n);
            }
        }
    }

    /// Page-directory counters, for `dir stats`: entries, page requests,
    /// fills from disk, remote mappings granted, DIR_INVs sent,
    /// write-backs, largest batch served in one sweep.
    pub fn page_stats(&self) -> [u64; 7] {
        let s = self.pages.stats();
        let max_batch = (1..=64).rev().find(|&b| self.batches[b] > 0).unwrap_or(0);
        [
            self.pages.len() as u64,
            s.reads + s.lookup_locks + s.unlocks + s.invs + s.drops,
            s.fills,
            s.remote_maps,
            s.dir_invs,
            s.writebacks,
            max_batch as u64,
        ]
    }

    /// The page directory (for tests and `dir stats`).
    pub fn pages(&self) -> &PageDir {
        &self.pages
    }

    /// Requests served per sweep, by batch size.
    pub fn batches(&self) -> &[u64; 65] {
        &self.batches
    }

    /// Answer (now or later) one request descriptor from `node`.
    fn handle(&mut self, mem: &(impl SharedMem + ?Sized), node: u32, d: &Desc) {
        let (tag, req) = match Request::decode(d) {
            Ok(x) => x,
            Err(error) => {
                self.last_bad = Some(Event::BadRequest { node, error });
                let raw = Raw::decode(d);
                let r = Raw {
                    op: raw.op,
                    status: Errno::Invalid as u16,
                    tag: raw.tag,
                    args: [0; 7],
                };
                self.respond(mem, node, r.encode());
                return;
            }
        };
        let op = op_of(&req);
        self.ops[(op as usize).min(31)] += 1;
        if let Request::Page(p) = req {
            if self.fs.is_none() {
                self.respond(mem, node, Response::Err(Errno::Unavailable).encode(op, tag));
                return;
            }
            self.page_ops.insert((node as u8, tag), op);
            log::debug!("node {node} tag {tag}: {p:?}");
            let a = self.pages.handle(&self.layout, node as u8, tag, p);
            self.run(mem, a);
            return;
        }
        let mut bulk = ShmBulk::new(mem, self.layout, node);
        let resp = self
            .execute(mem, &mut bulk, req)
            .unwrap_or_else(Response::Err);
        self.respond(mem, node, resp.encode(op, tag));
    }

    /// Count one request with opcode `op` (`None`: undecodable) in the
    /// per-opcode counters and the total of [`Op::Stats`]. The ring path
    /// counts the total per sweep instead (see [`Directory::serve`]).
    pub(crate) fn count_request(&mut self, op: Option<Op>) {
        self.requests += 1;
        if let Some(op) = op {
            self.ops[(op as usize).min(31)] += 1;
        }
    }

    /// Execute a non-page request whose variable-length data lives in
    /// `bulk`. `mem` is only used for page-directory actions (evicting or
    /// refreshing single-copy frames the request touched).
    pub(crate) fn execute(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        bulk: &mut dyn Bulk,
        req: Request,
    ) -> Result<Response, Errno> {
        if let Request::Nop = req {
            return Ok(Response::Ok);
        }
        if let Request::Stats = req {
            return Ok(Response::Stats(self.stats()));
        }
        if let Request::PageStats = req {
            return Ok(Response::PageStats(self.page_stats()));
        }
        let fs = self.fs.as_mut().ok_or(Errno::Unavailable)?;
        match req {
            Request::Nop | Request::Stats | Request::PageStats | Request::Page(_) => {
                Ok(Response::Ok)
            }
            Request::Path {
                op,
                slot,
                len,
                exclusive,
            } => {
                let cap = bulk.cap(slot).ok_or(Errno::Invalid)?;
                let len = len as usize;
                if len > cap {
                    return Err(Errno::Invalid);
                }
                let mut buf = vec![0u8; len];
                bulk.read(slot, &mut buf)?;
                let path = core::str::from_utf8(&buf).map_err(|_| Errno::Invalid)?;
                match op {
                    Op::Lookup => fs.lookup(path).map(Response::Attr),
                    Op::Create => fs.create(path, exclusive).map(Response::Attr),
                    Op::Mkdir => fs.mkdir(path).map(Response::Attr),
                    Op::Unlink => {
                        let a = fs.lookup(path)?;
                        fs.unlink(path)?;
                        let acts = self.pages.evict_file(a.ino, 0);
                        self.run(mem, acts);
                        Ok(Response::Ok)
                    }
                    Op::Rmdir => fs.rmdir(path).map(|_| Response::Ok),
                    _ => Err(Errno::Invalid),
                }
            }
            Request::Readdir { slot, ino, cookie } => {
                let cap = bulk.cap(slot).ok_or(Errno::Invalid)?;
                let max = cap / DIRENT_SIZE;
                let (entries, next) = fs.readdir(ino, cookie, max)?;
                let mut rec = [0u8; DIRENT_SIZE];
                for (k, e) in entries.iter().take(max).enumerate() {
                    e.encode(&mut rec);
                    bulk.write(slot, k * DIRENT_SIZE, &rec)?;
                }
                Ok(Response::Entries {
                    count: entries.len().min(max) as u32,
                    next_cookie: next,
                })
            }
            Request::Getattr { ino } => fs.getattr(ino).map(Response::Attr),
            Request::Setattr { ino, size } => {
                let old = fs.getattr(ino)?;
                let f = fabric::layout::FRAME as u64;
                if size < old.size && !size.is_multiple_of(f) {
                    // The page holding the new end of file survives in
                    // part: its head may be dirty in the owner's frame
                    // (strong mode), so write it back before cutting.
                    let key = PageKey { ino, idx: size / f };
                    if let Some(e) = self.pages.entry(&key) {
                        if e.phase == crate::pagedir::Phase::Owned {
                            let gfn = e.gfn;
                            self.run(mem, vec![Action::WriteBack { key, gfn }]);
                        }
                    }
                }
                let fs = self.fs.as_mut().ok_or(Errno::Unavailable)?;
                let a = fs.set_size(ino, size)?;
                if size < old.size {
                    // Cached pages from the one holding the new end of file
                    // on are stale: tear them down cluster-wide.
                    let acts = self
                        .pages
                        .evict_file(ino, size / fabric::layout::FRAME as u64);
                    self.run(mem, acts);
                }
                Ok(Response::Attr(a))
            }
            Request::Data {
                op,
                slot,
                ino,
                offset,
                len,
            } => {
                let cap = bulk.cap(slot).ok_or(Errno::Invalid)?;
                let len = len as usize;
                if len > cap {
                    return Err(Errno::Invalid);
                }
                let mut buf = vec![0u8; len];
                if op == Op::Write {
                    bulk.read(slot, &mut buf)?;
                    let (n, attr) = fs.write(ino, offset, &buf)?;
                    // Reconcile the single copy: refresh the owner's frame
                    // of every cached page this write touched.
                    let f = fabric::layout::FRAME as u64;
                    if n > 0 {
                        for idx in offset / f..=(offset + n as u64 - 1) / f {
                            let key = PageKey { ino, idx };
                            let gfn = match self.pages.entry(&key) {
                                Some(e) if e.phase == crate::pagedir::Phase::Owned => e.gfn,
                                _ => continue,
                            };
                            if let Some(foff) = self.frame_off(gfn) {
                                let mut page = vec![0u8; fabric::layout::FRAME];
                                let fs = self.fs.as_mut().ok_or(Errno::Unavailable)?;
                                fs.read(ino, idx * f, &mut page)?;
                                mem.write(foff, &page);
                            }
                        }
                    }
                    Ok(Response::Data {
                        bytes: n as u32,
                        attr,
                    })
                } else {
                    let n = fs.read(ino, offset, &mut buf)?;
                    bulk.write(slot, 0, &buf[..n])?;
                    let attr = fs.getattr(ino)?;
                    Ok(Response::Data {
                        bytes: n as u32,
                        attr,
                    })
                }
            }
            Request::Fsync { .. } => fs.sync().map(|_| Response::Ok),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::cell::{Cell, RefCell};
    use fabric::proto::{DirEntry, FileKind};
    use fabric::shm::HeapShm;
    use flatfs::MemDisk;
    use nodepath::client::Client;

    const REGION: usize = 4 << 20;

    struct Rig {
        mem: HeapShm,
        layout: Layout,
        dir: RefCell<Directory<MemDisk>>,
        now: Cell<u64>,
    }

    impl Rig {
        fn new(nodes: u32, storage: bool) -> Rig {
            let mem = HeapShm::new(REGION);
            let layout = Layout::compute(REGION, nodes).unwrap();
            layout.format(&*mem, 0);
            let fs = storage.then(|| Fs::format(MemDisk::new(2048), 64).unwrap());
            let dir = Directory::new(
                &*mem,
                layout,
                fs,
                Config {
                    heartbeat_timeout_ns: 1_000_000,
                    batch: 32,
                },
            );
            Rig {
                mem,
                layout,
                dir: RefCell::new(dir),
                now: Cell::new(0),
            }
        }

        /// One directory pass, as the wait closure of a client.
        fn step(&self) -> Poll {
            self.now.set(self.now.get() + 1000);
            self.dir.borrow_mut().poll(&*self.mem, self.now.get())
        }

        fn join(&self, node: u32) -> Client {
            let mut w = || {
                self.step();
                true
            };
            Client::join(&*self.mem, self.layout, node, 1, &mut w).unwrap()
        }

        fn call(&self, c: &mut Client, req: &Request) -> Result<Response, Errno> {
            let mut budget = 100;
            let mut w = || {
                self.step();
                budget -= 1;
                budget > 0
            };
            c.call(&*self.mem, req, &mut w)
        }

        /// Step the directory (beating the hearts of `alive`) until it
        /// reports `node` failed; false if it did not within `steps`.
        fn step_until_failed(&self, node: u32, alive: &[u32], steps: usize) -> bool {
            let h = Header::new(&*self.mem, self.layout);
            (0..steps).any(|_| {
                for n in alive {
                    h.beat_node(*n);
                }
                self.step()
                    .events
                    .iter()
                    .any(|e| matches!(e, Event::Failed { node: x, .. } if *x == node))
            })
        }

        fn path(&self, c: &mut Client, op: Op, p: &str) -> Result<Response, Errno> {
            let (off, _) = c.bulk(0).unwrap();
            self.mem.write(off, p.as_bytes());
            self.call(
                c,
                &Request::Path {
                    op,
                    slot: 0,
                    len: p.len() as u32,
                    exclusive: false,
                },
            )
        }
    }

    #[test]
    fn join_assigns_increasing_epochs() {
        let rig = Rig::new(2, true);
        let a = rig.join(1);
        let b = rig.join(2);
        assert!(b.epoch() > a.epoch());
        let h = Header::new(&*rig.mem, rig.layout);
        assert_eq!(h.node_state(1), Some(NodeState::Up));
        assert_eq!(h.dir_state(), Some(DirState::Up));
    }

    #[test]
    fn metadata_and_data_round_trip_between_two_nodes() {
        let rig = Rig::new(2, true);
        let mut a = rig.join(1);
        let mut b = rig.join(2);
        assert_eq!(rig.call(&mut a, &Request::Nop), Ok(Response::Ok));
        rig.path(&mut a, Op::Mkdir, "/d").unwrap();
        let Response::Attr(f) = rig.path(&mut a, Op::Create, "/d/f").unwrap() else {
            panic!("create must return attributes")
        };
        // Node 1 writes 10 000 bytes through its bulk slot.
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let (off, _) = a.bulk(2).unwrap();
        rig.mem.write(off, &data);
        let w = Request::Data {
            op: Op::Write,
            slot: 2,
            ino: f.ino,
            offset: 0,
            len: data.len() as u32,
        };
        let Ok(Response::Data { bytes, attr }) = rig.call(&mut a, &w) else {
            panic!("write failed")
        };
        assert_eq!((bytes as usize, attr.size), (data.len(), data.len() as u64));
        // Node 2 reads it back through its own slot.
        let r = Request::Data {
            op: Op::Read,
            slot: 1,
            ino: f.ino,
            offset: 0,
            len: 16384,
        };
        let Ok(Response::Data { bytes, .. }) = rig.call(&mut b, &r) else {
            panic!("read failed")
        };
        let mut got = vec![0u8; bytes as usize];
        rig.mem.read(b.bulk(1).unwrap().0, &mut got);
        assert_eq!(got, data);
        // Readdir of /d from node 2.
        let Ok(Response::Attr(d)) = rig.path(&mut b, Op::Lookup, "/d") else {
            panic!("lookup failed")
        };
        let rd = Request::Readdir {
            slot: 3,
            ino: d.ino,
            cookie: 0,
        };
        let Ok(Response::Entries { count, .. }) = rig.call(&mut b, &rd) else {
            panic!("readdir failed")
        };
        assert_eq!(count, 1);
        let mut rec = [0u8; DIRENT_SIZE];
        rig.mem.read(b.bulk(3).unwrap().0, &mut rec);
        let e = DirEntry::decode(&rec).unwrap();
        assert_eq!((e.name.as_str(), e.attr.kind), ("f", FileKind::File));
        // Errors come back typed.
        assert_eq!(rig.path(&mut b, Op::Lookup, "/nope"), Err(Errno::NotFound));
        assert_eq!(rig.path(&mut b, Op::Rmdir, "/d"), Err(Errno::NotEmpty));
        assert!(rig.dir.borrow().stats().requests >= 8);
    }

    #[test]
    fn bad_slots_lengths_and_opcodes_are_refused() {
        let rig = Rig::new(1, true);
        let mut a = rig.join(1);
        let bad_slot = Request::Path {
            op: Op::Lookup,
            slot: 99,
            len: 1,
            exclusive: false,
        };
        assert_eq!(rig.call(&mut a, &bad_slot), Err(Errno::Invalid));
        let too_long = Request::Data {
            op: Op::Read,
            slot: 1,
            ino: 1,
            offset: 0,
            len: u32::MAX,
        };
        assert_eq!(rig.call(&mut a, &too_long), Err(Errno::Invalid));
        // Invalid UTF-8 path.
        let (off, _) = a.bulk(0).unwrap();
        rig.mem.write(off, &[0xff, 0xfe]);
        let p = Request::Path {
            op: Op::Lookup,
            slot: 0,
            len: 2,
            exclusive: false,
        };
        assert_eq!(rig.call(&mut a, &p), Err(Errno::Invalid));
        // A raw descriptor with an unknown opcode gets an Invalid answer and
        // an event; the node stays a member.
        let ch = rig.layout.channel(1);
        // The client used request indices 0..3: publish a zeroed
        // descriptor (opcode 0) at index 3 by hand.
        let slot3 = ch.request.off + fabric::ring::RING_HEADER + 3 * 64;
        rig.mem.write(slot3, &[0u8; 64]);
        rig.mem.store_u32(ch.request.off, 4);
        let polls: Vec<Poll> = (0..3).map(|_| rig.step()).collect();
        assert!(polls.iter().any(|p| p
            .events
            .iter()
            .any(|e| matches!(e, Event::BadRequest { .. }))));
    }

    #[test]
    fn corrupt_ring_fails_the_node_not_the_directory() {
        let rig = Rig::new(2, true);
        let _a = rig.join(1);
        let mut b = rig.join(2);
        let ch = rig.layout.channel(1);
        // Node 1's request head jumps far ahead of the tail.
        rig.mem.store_u32(ch.request.off, 5000);
        let p = rig.step();
        assert!(p
            .events
            .iter()
            .any(|e| matches!(e, Event::Corrupt { node: 1, .. })));
        let h = Header::new(&*rig.mem, rig.layout);
        assert_eq!(h.node_state(1), Some(NodeState::Failed));
        // Node 2 is unaffected.
        assert_eq!(rig.call(&mut b, &Request::Nop), Ok(Response::Ok));
    }

    #[test]
    fn silent_node_is_failed_and_can_rejoin_with_a_new_epoch() {
        let rig = Rig::new(1, true);
        let a = rig.join(1);
        let h = Header::new(&*rig.mem, rig.layout);
        // No heartbeat for more than the 1 ms timeout.
        assert!(rig.step_until_failed(1, &[], 2000));
        assert_eq!(h.node_state(1), Some(NodeState::Failed));
        let mut a2 = rig.join(1);
        assert!(a2.epoch() > a.epoch());
        assert_eq!(rig.call(&mut a2, &Request::Nop), Ok(Response::Ok));
        // A heartbeating node is not failed.
        for _ in 0..3000 {
            h.beat_node(1);
            assert!(rig.step().events.is_empty());
        }
    }

    #[test]
    fn without_storage_every_request_is_unavailable() {
        let rig = Rig::new(1, false);
        let mut a = rig.join(1);
        let h = Header::new(&*rig.mem, rig.layout);
        assert_eq!(h.dir_state(), Some(DirState::NoStorage));
        assert_eq!(rig.call(&mut a, &Request::Nop), Ok(Response::Ok));
        assert_eq!(rig.path(&mut a, Op::Lookup, "/"), Err(Errno::Unavailable));
        assert_eq!(
            rig.call(&mut a, &Request::Getattr { ino: 1 }),
            Err(Errno::Unavailable)
        );
    }

    #[test]
    fn client_gives_up_when_nobody_answers() {
        let rig = Rig::new(1, true);
        let mut a = rig.join(1);
        let mut n = 0;
        let mut w = || {
            n += 1;
            n < 50
        };
        assert_eq!(
            a.call(&*rig.mem, &Request::Nop, &mut w),
            Err(Errno::Unavailable)
        );
        // The late answer is discarded; the next call matches its own tag.
        assert_eq!(rig.call(&mut a, &Request::Nop), Ok(Response::Ok));
        assert_eq!(
            rig.call(&mut a, &Request::Getattr { ino: 1 })
                .map(|r| matches!(r, Response::Attr(_))),
            Ok(true)
        );
    }

    #[test]
    fn single_copy_read_invalidate_with_a_sharer() {
        use fabric::proto::{PageKey, PageReply, PageReq};
        use nodepath::client::Notifier;
        let rig = Rig::new(2, true);
        let mut a = rig.join(1);
        let mut b = rig.join(2);
        let mut nb = Notifier::new(&rig.layout, 2);
        // A file with one page of data.
        let Response::Attr(f) = rig.path(&mut a, Op::Create, "/f").unwrap() else {
            panic!()
        };
        let (off, _) = a.bulk(2).unwrap();
        rig.mem.write(off, &[7u8; 4096]);
        let w = Request::Data {
            op: Op::Write,
            slot: 2,
            ino: f.ino,
            offset: 0,
            len: 4096,
        };
        rig.call(&mut a, &w).unwrap();
        let key = PageKey { ino: f.ino, idx: 0 };
        let (a0, _) = rig.layout.pool_gfns(1);
        let (b0, _) = rig.layout.pool_gfns(2);
        // Node 1 misses: the directory fills node 1's frame from disk.
        let reads0 = rig.dir.borrow().stats().disk_reads;
        let r = rig.call(&mut a, &Request::Page(PageReq::Read { key, frame: a0 }));
        assert_eq!(r, Ok(Response::Page(PageReply::Owner { gfn: a0 })));
        let mut page = [0u8; 4096];
        rig.mem.read(a0 as usize * 4096, &mut page);
        assert_eq!(page, [7u8; 4096]);
        let reads1 = rig.dir.borrow().stats().disk_reads;
        assert!(reads1 > reads0);
        // Node 2 misses: it gets node 1's frame, no disk read, exported.
        let r = rig.call(&mut b, &Request::Page(PageReq::Read { key, frame: b0 }));
        assert_eq!(
            r,
            Ok(Response::Page(PageReply::Shared { owner: 1, gfn: a0 }))
        );
        assert_eq!(rig.dir.borrow().stats().disk_reads, reads1);
        let bit = rig.layout.bitmap_off;
        assert_eq!(rig.mem.load_u64(bit) & 1, 1, "frame exported while shared");
        // Node 2 offering node 1's frame as its own is refused.
        let r = rig.call(&mut b, &Request::Page(PageReq::Read { key, frame: a0 + 1 }));
        assert_eq!(r, Ok(Response::Page(PageReply::Refused)));
        // Node 1 reclaims: node 2 gets DIR_INV; the answer waits for the ack.
        let tag = a
            .send(
                &*rig.mem,
                &Request::Page(PageReq::Inv { key, dirty: false }),
                &mut || true,
            )
            .unwrap();
        for _ in 0..5 {
            rig.step();
        }
        assert_eq!(a.recv(&*rig.mem), Ok(None), "no answer before the ack");
        assert_eq!(nb.poll(&*rig.mem), Ok(Some(key)));
        nb.ack(&*rig.mem, key, false, &mut || true).unwrap();
        rig.step();
        let (t, d) = a.recv(&*rig.mem).unwrap().expect("answer after the ack");
        assert_eq!(t, tag);
        assert_eq!(
            Response::decode(&d, Op::PageInv),
            Ok((tag, Response::Page(PageReply::Done { written: false })))
        );
        assert_eq!(
            rig.mem.load_u64(bit) & 1,
            0,
            "unexported after invalidation"
        );
        assert!(rig.dir.borrow().pages().is_empty());
    }

    #[test]
    fn failed_owner_tears_down_its_pages() {
        use fabric::proto::{PageKey, PageReq};
        use nodepath::client::Notifier;
        let rig = Rig::new(2, true);
        let mut a = rig.join(1);
        let mut b = rig.join(2);
        let mut nb = Notifier::new(&rig.layout, 2);
        let Response::Attr(f) = rig.path(&mut a, Op::Create, "/g").unwrap() else {
            panic!()
        };
        let key = PageKey { ino: f.ino, idx: 0 };
        let (a0, _) = rig.layout.pool_gfns(1);
        let (b0, _) = rig.layout.pool_gfns(2);
        rig.call(&mut a, &Request::Page(PageReq::Read { key, frame: a0 }))
            .unwrap();
        rig.call(&mut b, &Request::Page(PageReq::Read { key, frame: b0 }))
            .unwrap();
        // Node 1 goes silent; node 2 keeps beating.
        let h = Header::new(&*rig.mem, rig.layout);
        assert!(rig.step_until_failed(1, &[2], 5000));
        assert_eq!(nb.poll(&*rig.mem), Ok(Some(key)), "sharer told to unmap");
        // Node 1 cannot rejoin while node 2 still maps its frame.
        h.set_node_state(1, NodeState::Joining);
        h.beat_node(2);
        rig.step();
        assert_eq!(h.node_state(1), Some(NodeState::Joining));
        nb.ack(&*rig.mem, key, false, &mut || true).unwrap();
        h.beat_node(2);
        rig.step();
        h.beat_node(2);
        rig.step();
        assert_eq!(h.node_state(1), Some(NodeState::Up));
        assert!(rig.dir.borrow().pages().is_empty());
    }
}
