//! The node role: join the cluster through the shared region, offer the
//! VFS, and run the shell on the serial console.
//!
//! Waiting: a call to the directory spins for a short while (answers
//! usually come in microseconds), then halts between timer ticks. It gives
//! up when the directory's heartbeat stops for [`DIR_SILENT_NS`] or the call
//! exceeds the configured RPC timeout, and reports "directory unavailable".

pub mod coherent;
pub mod vfs;

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use fabric::bulk::{Bulk, ShmBulk};
use fabric::config::BootConfig;
use fabric::config::Mode;
use fabric::layout::{DirState, Header, Layout, LayoutError, NodeState};
use fabric::proto::{Errno, Request, Response};
use fabric::shm::RawShm;
use nodepath::client::Client;
use spin::Once;
use userland::line::LineEditor;
use userland::os::{Attr, ClusterInfo, DirEntry, Fd, NodeInfo, OpenFlags, Os, RingSamples};
use userland::shell::{Outcome, Shell};

use crate::arch::{cpu, serial, time};
use crate::klog;
use vfs::{Rpc, Vfs};

/// The directory is considered gone when its heartbeat stops this long.
pub const DIR_SILENT_NS: u64 = 1_500_000_000;
/// Spin this long before halting while waiting for an answer.
const SPIN_NS: u64 = 200_000;
/// How long a booting node waits for the directory to format the region.
const BOOT_WAIT_NS: u64 = 15_000_000_000;

static SHM: Once<RawShm> = Once::new();
static HB: Once<(Layout, u32)> = Once::new();

/// The shared region (set before anything else runs on a node).
pub fn shm() -> &'static RawShm {
    SHM.get().expect("shared region initialised at node start")
}

/// Timer hook: bump this node's heartbeat every 10 ms.
fn tick() {
    let every = (crate::arch::interrupts::tick_hz() / 100).max(1) as u64;
    if !crate::arch::interrupts::ticks().is_multiple_of(every) {
        return;
    }
    if let (Some(shm), Some((layout, id))) = (SHM.get(), HB.get()) {
        Header::new(shm, *layout).beat_node(*id);
    }
}

/// The connection to the directory.
struct Conn {
    shm: &'static RawShm,
    id: u32,
    layout: Option<Layout>,
    client: Option<Client>,
    rpc_timeout_ns: u64,
    /// Set once "directory unavailable" was logged, cleared on success.
    reported: bool,
    mode: Mode,
    remote_limit: usize,
    /// Wait state of the current asynchronous exchange (reset on progress).
    wait: Option<WaitState>,
    /// Last directory heartbeat seen and when it changed.
    dir_hb: (u64, u64),
    /// `net` mode: the TCP connection file requests travel on.
    net: Option<crate::net::NetConn>,
}

/// Progress tracking for [`coherent::Transport::wait`].
struct WaitState {
    start: u64,
    last_hb: u64,
    last_change: u64,
}

/// A wait closure: spin, then halt; false on timeout or a silent directory.
/// Its clock starts at the first call, so building one costs nothing on
/// calls that are answered while the client is still polling the ring.
fn waiter(shm: &'static RawShm, layout: Layout, timeout_ns: u64) -> impl FnMut() -> bool {
    let mut start = None;
    let mut last_hb = 0;
    let mut last_change = 0;
    move || {
        coherent::service(shm);
        let now = time::now_ns();
        let h = Header::new(shm, layout);
        let t0 = *start.get_or_insert_with(|| {
            last_hb = h.dir_heartbeat();
            last_change = now;
            now
        });
        if now - t0 > timeout_ns {
            return false;
        }
        let hb = h.dir_heartbeat();
        if hb != last_hb {
            last_hb = hb;
            last_change = now;
        } else if now - last_change > DIR_SILENT_NS {
            return false;
        }
        if now - t0 < SPIN_NS {
            cpu::pause();
        } else {
            cpu::wait_for_interrupt();
        }
        true
    }
}

impl Conn {
    fn unavailable(&mut self, why: &str) -> Errno {
        if !self.reported {
            log::warn!("directory unavailable: {why}");
            self.reported = true;
        }
        self.disconnect_if_dir_silent();
        Errno::Unavailable
    }

    /// A directory whose heartbeat stopped is gone: leave the shared cache
    /// (no remote mapping survives) until a later join succeeds.
    fn disconnect_if_dir_silent(&mut self) {
        let Some(layout) = self.layout else { return };
        let hb = Header::new(self.shm, layout).dir_heartbeat();
        let now = time::now_ns();
        if hb != self.dir_hb.0 {
            self.dir_hb = (hb, now);
        } else if now - self.dir_hb.1 > DIR_SILENT_NS && self.client.is_some() {
            log::warn!("directory silent: disconnecting from the shared cache, unmapping every remote page");
            self.client = None;
            coherent::disconnect();
        }
    }

    /// Read and validate the header, waiting up to `wait_ns` for the
    /// directory to format it.
    fn layout(&mut self, wait_ns: u64) -> Result<Layout, Errno> {
        if let Some(l) = self.layout {
            return Ok(l);
        }
        let start = time::now_ns();
        loop {
            match Layout::read(self.shm) {
                Ok(l) => {
                    if !l.valid_node(self.id) {
                        return Err(self.unavailable(&format!(
                            "node id {} outside the region's 1..={}",
                            self.id, l.max_nodes
                        )));
                    }
                    self.layout = Some(l);
                    HB.call_once(|| (l, self.id));
                    return Ok(l);
                }
                Err(LayoutError::BadMagic(_)) if time::now_ns() - start < wait_ns => {
                    cpu::wait_for_interrupt();
                }
                Err(e) => return Err(self.unavailable(&format!("{e}"))),
            }
        }
    }

    /// Join (or rejoin) the cluster.
    fn join(&mut self, wait_ns: u64) -> Result<(), Errno> {
        let layout = self.layout(wait_ns)?;
        let h = Header::new(self.shm, layout);
        let nonce = crate::arch::cpu::rdtsc();
        let mut w = waiter(self.shm, layout, wait_ns.max(1_000_000_000));
        match Client::join(self.shm, layout, self.id, nonce, &mut w) {
            Ok(c) => {
                log::info!(
                    "node {} joined cluster epoch {} (mode {})",
                    self.id,
                    c.epoch(),
                    self.mode.as_str()
                );
                if self.mode.single_copy() {
                    coherent::reset(
                        layout,
                        self.id,
                        self.mode,
                        self.remote_limit,
                        self.shm.base() as u64,
                    );
                }
                if h.dir_state() == Some(DirState::NoStorage) {
                    log::warn!(
                        "directory unavailable: the directory has no storage (see its log); \
                         file operations will fail"
                    );
                }
                self.client = Some(c);
                self.reported = false;
                Ok(())
            }
            Err(_) => Err(self.unavailable("no answer to join")),
        }
    }

    /// Check membership; rejoin if the directory declared us failed.
    fn check(&mut self) {
        self.disconnect_if_dir_silent();
        let Some(layout) = self.layout else { return };
        let h = Header::new(self.shm, layout);
        if self.client.is_some() && h.node_state(self.id) == Some(NodeState::Failed) {
            log::warn!("the directory declared this node failed; rejoining with a new epoch");
            self.client = None;
            let _ = self.join(1_000_000_000);
        }
    }
}

impl Conn {
    fn ensure_joined(&mut self) -> Result<Layout, Errno> {
        if self.client.is_none() {
            // Not joined (yet): try once more, briefly.
            self.join(500_000_000)?;
        }
        let layout = self.layout.ok_or(Errno::Unavailable)?;
        if Header::new(self.shm, layout).node_state(self.id) == Some(NodeState::Failed) {
            self.check();
        }
        Ok(layout)
    }
}

impl coherent::Transport for Conn {
    fn call(&mut self, req: &Request) -> Result<Response, Errno> {
        let layout = self.ensure_joined()?;
        let mut w = waiter(self.shm, layout, self.rpc_timeout_ns);
        let shm = self.shm;
        let client = self.client.as_mut().ok_or(Errno::Unavailable)?;
        match client.call(shm, req, &mut w) {
            Err(Errno::Unavailable) => Err(self.unavailable("no answer (timeout or no heartbeat)")),
            r => {
                if r.is_ok() {
                    self.reported = false;
                }
                r
            }
        }
    }

    fn send(&mut self, req: &Request) -> Result<u32, Errno> {
        let layout = self.ensure_joined()?;
        let mut w = waiter(self.shm, layout, self.rpc_timeout_ns);
        let shm = self.shm;
        let client = self.client.as_mut().ok_or(Errno::Unavailable)?;
        client.send(shm, req, &mut w)
    }

    fn recv(&mut self) -> Result<Option<(u32, fabric::proto::Desc)>, Errno> {
        let shm = self.shm;
        let client = self.client.as_mut().ok_or(Errno::Unavailable)?;
        let r = client.recv(shm)?;
        if r.is_some() {
            self.wait = None; // progress
        }
        Ok(r)
    }

    fn wait(&mut self) -> bool {
        let Some(layout) = self.layout else {
            return false;
        };
        coherent::service(self.shm);
        let now = time::now_ns();
        let h = Header::new(self.shm, layout);
        let w = self.wait.get_or_insert_with(|| WaitState {
            start: now,
            last_hb: h.dir_heartbeat(),
            last_change: now,
        });
        let hb = h.dir_heartbeat();
        if hb != w.last_hb {
            w.last_hb = hb;
            w.last_change = now;
        }
        let ok = now - w.start <= self.rpc_timeout_ns && now - w.last_change <= DIR_SILENT_NS;
        if !ok {
            self.wait = None;
            self.unavailable("no answer (timeout or no heartbeat)");
            return false;
        }
        if now - w.start < SPIN_NS {
            cpu::pause();
        } else {
            cpu::wait_for_interrupt();
        }
        true
    }
}

impl Conn {
    /// This node's bulk slots in the shared region (joined nodes only),
    /// with the directory's own bounds checks.
    fn shm_bulk(&self) -> Result<ShmBulk<'static, RawShm>, Errno> {
        match (&self.client, self.layout) {
            (Some(_), Some(layout)) => Ok(ShmBulk::new(self.shm, layout, self.id)),
            _ => Err(Errno::Unavailable),
        }
    }
}

impl Rpc for Conn {
    fn client(&self) -> Option<&Client> {
        self.client.as_ref()
    }

    fn fs_call(&mut self, req: &Request) -> Result<Response, Errno> {
        match self.net.as_mut() {
            Some(n) => n.call(req),
            // `net` mode without its NIC: never fall back to the rings.
            None if self.mode == Mode::Net => Err(Errno::Unavailable),
            None => coherent::Transport::call(self, req),
        }
    }

    fn bulk_cap(&self, slot: u32) -> Result<usize, Errno> {
        match self.net.as_ref() {
            Some(n) => n.bulk_cap(slot),
            None => self.shm_bulk()?.cap(slot).ok_or(Errno::Invalid),
        }
    }

    fn bulk_write(&mut self, slot: u32, at: usize, data: &[u8]) -> Result<(), Errno> {
        if let Some(n) = self.net.as_mut() {
            return n.bulk_write(slot, at, data);
        }
        self.shm_bulk()?.write(slot, at, data)
    }

    fn fs_read_batch(&mut self, reqs: &[Request]) -> Result<Vec<(Response, Vec<u8>)>, Errno> {
        match self.net.as_mut() {
            Some(n) => n.call_batch(reqs),
            None if self.mode == Mode::Net => Err(Errno::Unavailable),
            // The rings: one request at a time.
            None => vfs::read_one_by_one(self, reqs),
        }
    }

    fn bulk_read(&mut self, slot: u32, buf: &mut [u8]) -> Result<(), Errno> {
        if let Some(n) = self.net.as_mut() {
            return n.bulk_read(slot, buf);
        }
        self.shm_bulk()?.read(slot, buf)
    }
}

/// Everything the shell reaches through [`Os`].
struct NodeOs {
    conn: Conn,
    vfs: Vfs,
    storage: String,
    cxl_ns: u64,
    /// The file `mmap_io` works on: path, inode, size.
    mmap_file: Option<(String, u64, u64)>,
}

impl Os for NodeOs {
    fn print(&mut self, s: &str) {
        klog::print_str(s);
    }
    fn uptime_ns(&self) -> u64 {
        time::now_ns()
    }
    fn open(&mut self, path: &str, flags: OpenFlags) -> Result<Fd, Errno> {
        self.mmap_file = None; // sizes may change: look the file up again
        self.vfs.open(&mut self.conn, path, flags)
    }
    fn read(&mut self, fd: Fd, buf: &mut [u8]) -> Result<usize, Errno> {
        self.vfs.read(&mut self.conn, fd, buf)
    }
    fn write(&mut self, fd: Fd, data: &[u8]) -> Result<usize, Errno> {
        self.vfs.write(&mut self.conn, fd, data)
    }
    fn truncate(&mut self, fd: Fd, size: u64) -> Result<(), Errno> {
        self.vfs.truncate(&mut self.conn, fd, size)
    }
    fn fsync(&mut self, fd: Fd) -> Result<(), Errno> {
        self.vfs.fsync(&mut self.conn, fd)
    }
    fn close(&mut self, fd: Fd) -> Result<(), Errno> {
        self.vfs.close(&mut self.conn, fd)
    }
    fn stat(&mut self, path: &str) -> Result<Attr, Errno> {
        self.vfs.stat(&mut self.conn, path)
    }
    fn readdir(&mut self, path: &str) -> Result<Vec<DirEntry>, Errno> {
        self.vfs.readdir(&mut self.conn, path)
    }
    fn mkdir(&mut self, path: &str) -> Result<(), Errno> {
        self.vfs.mkdir(&mut self.conn, path)
    }
    fn rmdir(&mut self, path: &str) -> Result<(), Errno> {
        self.vfs.rmdir(&mut self.conn, path)
    }
    fn unlink(&mut self, path: &str) -> Result<(), Errno> {
        self.vfs.unlink(&mut self.conn, path)
    }
    fn sync(&mut self) -> Result<(), Errno> {
        self.vfs.sync(&mut self.conn)
    }

    fn cluster(&mut self) -> ClusterInfo {
        let id = self.conn.id as u16;
        let Some(layout) = self.conn.layout else {
            return ClusterInfo {
                epoch: 0,
                self_id: id,
                nodes: Vec::new(),
            };
        };
        let h = Header::new(self.conn.shm, layout);
        let dir_state = match h.dir_state() {
            Some(DirState::Booting) => "booting",
            Some(DirState::Up) => "up",
            Some(DirState::NoStorage) => "no-storage",
            Some(DirState::Down) => "down",
            None => "garbage",
        };
        let mut nodes = Vec::new();
        nodes.push(NodeInfo {
            id: 0,
            state: dir_state.to_string(),
            heartbeat: h.dir_heartbeat(),
            epoch: 0,
        });
        for n in 1..=layout.max_nodes {
            nodes.push(NodeInfo {
                id: n as u16,
                state: h
                    .node_state(n)
                    .map(|s| s.as_str().to_string())
                    .unwrap_or_else(|| String::from("garbage")),
                heartbeat: h.node_heartbeat(n),
                epoch: h.node_epoch(n),
            });
        }
        ClusterInfo {
            epoch: h.epoch(),
            self_id: id,
            nodes,
        }
    }

    fn cache_stats(&mut self) -> Result<Vec<(String, String)>, Errno> {
        let mode = self.vfs.mode();
        let mut v: Vec<(String, String)> = Vec::new();
        let mut put = |k: &str, x: String| v.push((k.to_string(), x));
        put("mode", mode.as_str().to_string());
        put("storage profile", self.storage.clone());
        put("cxl latency (ns)", format!("{}", self.cxl_ns));
        if !mode.single_copy() {
            let (hits, fetched, cached) = self.vfs.private_stats();
            put("resident pages (private copies)", format!("{cached}"));
            put("remote mappings", "0".to_string());
            put("hits local", format!("{hits}"));
            put("hits remote", "0".to_string());
            put("misses", format!("{fetched}"));
            put("disk reads caused (pages)", format!("{fetched}"));
            if let Some(n) = self.conn.net.as_mut() {
                let (rx, tx) = n.frames();
                put("net connection", n.state().to_string());
                put("net rpcs", format!("{}", n.calls));
                put(
                    "net bytes sent/received",
                    format!("{}/{}", n.bytes_out, n.bytes_in),
                );
                put("net frames sent/received", format!("{tx}/{rx}"));
                put(
                    "net wakeup interrupts",
                    format!("{}", crate::arch::interrupts::device_irqs()),
                );
            }
            return Ok(v);
        }
        let (c, (owned, remote, private), free, pool) = coherent::with(|c| {
            (
                c.cache.stats(),
                c.cache.counts(),
                c.cache.free_frames(),
                c.cache.pool_frames(),
            )
        })
        .ok_or(Errno::Unavailable)?;
        put("resident owned pages", format!("{owned}"));
        put("remote mappings", format!("{remote}"));
        put("private copies", format!("{private}"));
        put("pool frames free/total", format!("{free}/{pool}"));
        put("hits local", format!("{}", c.hits_local));
        put("hits remote", format!("{}", c.hits_remote));
        put("hits private", format!("{}", c.hits_private));
        put("misses", format!("{}", c.misses));
        put("disk reads caused (fills)", format!("{}", c.fills));
        put("remote maps (CM-R)", format!("{}", c.remote_maps));
        put("retries", format!("{}", c.retries));
        put("invalidations sent", format!("{}", c.invs_sent));
        put("invalidations received", format!("{}", c.invs_received));
        put("remote drops", format!("{}", c.drops));
        put("write-backs", format!("{}", c.writebacks));
        put("refused mappings", format!("{}", c.refused_maps));
        let (faults, misses) = coherent::fault_counts();
        put("mmap page faults", format!("{faults}"));
        put("mmap faults on evicted pages", format!("{misses}"));
        Ok(v)
    }

    fn cache_drop(&mut self) -> Result<String, Errno> {
        if !self.vfs.mode().single_copy() {
            self.vfs.drop_cache();
            return Ok("dropped the private cache".to_string());
        }
        self.vfs.sync(&mut self.conn)?;
        let (owned, remote) = coherent::drop_all(&mut self.conn)?;
        Ok(format!(
            "invalidated {owned} owned pages, dropped {remote} remote mappings"
        ))
    }

    fn mmap_read(&mut self, path: &str) -> Result<(u32, u64), Errno> {
        if !self.vfs.mode().single_copy() {
            return Err(Errno::NotSupported);
        }
        let fd = self.vfs.open(&mut self.conn, path, OpenFlags::default())?;
        let r = self.mmap_read_fd(fd);
        let _ = self.vfs.close(&mut self.conn, fd);
        r
    }

    fn dir_stats(&mut self) -> Result<Vec<(String, String)>, Errno> {
        use coherent::Transport;
        let Response::Stats(s) = self.conn.call(&Request::Stats)? else {
            return Err(Errno::Io);
        };
        let Response::PageStats(p) = self.conn.call(&Request::PageStats)? else {
            return Err(Errno::Io);
        };
        let mut v: Vec<(String, String)> = Vec::new();
        let mut put = |k: &str, x: String| v.push((k.to_string(), x));
        put("page entries", format!("{}", p.entries));
        put(
            "bytes per entry",
            format!("{}", dirsvc::pagedir::BYTES_PER_ENTRY),
        );
        put("requests served", format!("{}", s.requests));
        put("page requests", format!("{}", p.page_requests));
        put("fills from disk", format!("{}", p.fills));
        put("remote mappings granted", format!("{}", p.remote_maps));
        put("invalidations sent (DIR_INV)", format!("{}", p.dir_invs));
        put("write-backs", format!("{}", p.writebacks));
        put("largest batch (requests/sweep)", format!("{}", p.max_batch));
        put("disk blocks read", format!("{}", s.disk_reads));
        put("disk blocks written", format!("{}", s.disk_writes));
        put(
            "inodes used/total",
            format!("{}/{}", s.inodes_used, s.inodes_total),
        );
        put(
            "blocks used/total",
            format!("{}/{}", s.blocks_used, s.blocks_total),
        );
        Ok(v)
    }

    fn bench_read(&mut self, path: &str) -> Result<RingSamples, Errno> {
        let fd = self.vfs.open(&mut self.conn, path, OpenFlags::default())?;
        let mut out = Vec::new();
        let mut page = [0u8; 4096];
        let r = loop {
            let t0 = cpu::rdtsc();
            match self.vfs.read(&mut self.conn, fd, &mut page) {
                Ok(0) => break Ok(()),
                Ok(_) => out.push(time::cycles_to_ns(cpu::rdtsc() - t0)),
                Err(e) => break Err(e),
            }
        };
        let _ = self.vfs.close(&mut self.conn, fd);
        r.map(|_| out)
    }

    fn bench_inv(&mut self, path: &str) -> Result<RingSamples, Errno> {
        let a = self.vfs.stat(&mut self.conn, path)?;
        if !self.vfs.mode().single_copy() {
            // The baseline's invalidation: drop one page of our own
            // private cache (no one else holds it), as DPC's 11 us Linux
            // figure does.
            let mut out = Vec::new();
            for idx in 0..a.size.div_ceil(4096) {
                let t0 = cpu::rdtsc();
                if self.vfs.invalidate_page(a.ino, idx) {
                    out.push(time::cycles_to_ns(cpu::rdtsc() - t0));
                }
            }
            return Ok(out);
        }
        let mut out = Vec::new();
        for idx in 0..a.size.div_ceil(4096) {
            let key = fabric::proto::PageKey { ino: a.ino, idx };
            let t0 = cpu::rdtsc();
            if coherent::invalidate_one(&mut self.conn, key)? {
                out.push(time::cycles_to_ns(cpu::rdtsc() - t0));
            }
        }
        Ok(out)
    }

    fn seek(&mut self, fd: Fd, pos: u64) -> Result<(), Errno> {
        self.vfs.seek(fd, pos)
    }

    fn io_batch(&mut self, ios: &mut [userland::os::BatchIo<'_>]) -> Result<(), Errno> {
        // Every page the batch's reads touch, as (inode, index), sorted.
        let mut pages = Vec::new();
        for io in ios.iter() {
            if io.write || io.buf.is_empty() {
                continue;
            }
            let (ino, size) = self.vfs.fd_info(io.fd)?;
            let end = (io.offset + io.buf.len() as u64).min(size);
            let mut idx = io.offset / 4096;
            while idx * 4096 < end {
                pages.push((ino, idx));
                idx += 1;
            }
        }
        pages.sort_unstable();
        pages.dedup();
        if self.vfs.mode().single_copy() {
            // Resolve them together (up to 32 page requests per directory
            // round trip), so the batch's misses are really in flight at
            // once.
            let keys: Vec<_> = pages
                .iter()
                .map(|&(ino, idx)| fabric::proto::PageKey { ino, idx })
                .collect();
            coherent::resolve(&mut self.conn, &keys, false)?;
        } else {
            // Private and net modes: fetch the missing ones with the reads
            // in flight together (pipelined over TCP in net mode).
            self.vfs.prefetch(&mut self.conn, &pages)?;
        }
        // Move the bytes (the reads are hits now).
        for io in ios.iter_mut() {
            io.done = userland::os::positioned_io(self, io.fd, io.offset, io.write, io.buf);
        }
        Ok(())
    }

    fn run_env(&mut self) -> (u16, String, u32) {
        // This node and the directory's core are the busy instances.
        (self.conn.id as u16, self.vfs.mode().as_str().to_string(), 2)
    }

    fn mmap_io(
        &mut self,
        path: &str,
        offset: u64,
        len: usize,
        write: bool,
        buf: &mut [u8],
    ) -> Result<(), Errno> {
        let mode = self.vfs.mode();
        if !mode.single_copy() {
            return Err(Errno::NotSupported);
        }
        if len == 0 {
            return Ok(()); // probe: supported in this mode
        }
        // One lookup per file, not per I/O.
        let ino = match &self.mmap_file {
            Some((p, ino, _)) if p == path => *ino,
            _ => {
                let a = self.vfs.stat(&mut self.conn, path)?;
                self.mmap_file = Some((path.to_string(), a.ino, a.size));
                a.ino
            }
        };
        let size = self.mmap_file.as_ref().map(|f| f.2).unwrap_or(0);
        let end = offset.checked_add(len as u64).ok_or(Errno::Invalid)?;
        if end > size || buf.len() < len {
            return Err(Errno::Invalid);
        }
        let mut done = 0usize;
        while done < len {
            let at = offset + done as u64;
            let key = fabric::proto::PageKey {
                ino,
                idx: at / 4096,
            };
            let in_page = (at % 4096) as usize;
            let n = (4096 - in_page).min(len - done);
            let (va, remote) = coherent::map_page(&mut self.conn, key)?;
            if write && remote && mode == fabric::config::Mode::Relaxed {
                return Err(Errno::NotSupported); // relaxed writes need a private copy
            }
            let at_va = va + in_page as u64;
            let r = if write {
                crate::mm::paging::window_write(at_va, &buf[done..done + n])
            } else {
                crate::mm::paging::window_read(at_va, &mut buf[done..done + n])
            };
            r.map_err(|_| Errno::Io)?;
            if write {
                coherent::mapped_write(&key);
            }
            done += n;
        }
        Ok(())
    }

    fn bench_dir(&mut self, path: &str, rounds: u32, batch: usize) -> Result<(u64, u64), Errno> {
        if !self.vfs.mode().single_copy() {
            return Err(Errno::NotSupported);
        }
        let a = self.vfs.stat(&mut self.conn, path)?;
        let (ops, cycles) =
            coherent::bench_dir(&mut self.conn, a.ino, a.size.div_ceil(4096), rounds, batch)?;
        Ok((ops, time::cycles_to_ns(cycles)))
    }

    fn bench_pingpong(&mut self, count: usize) -> Result<RingSamples, Errno> {
        let layout = self.conn.layout.ok_or(Errno::Unavailable)?;
        let h = Header::new(self.conn.shm, layout);
        // Values unique to this node and run, so a stale echo never matches.
        let base = (cpu::rdtsc() & !0xFFFF_FFFF) | ((self.conn.id as u64) << 24);
        let mut out = Vec::with_capacity(count);
        for i in 0..count as u64 + 16 {
            let v = base + i + 1;
            let t0 = cpu::rdtsc();
            h.set_ping(v);
            let mut spins = 0u64;
            while h.pong() != v {
                spins += 1;
                if spins > 200_000_000 {
                    return Err(Errno::Unavailable);
                }
            }
            if i >= 16 {
                out.push(time::cycles_to_ns(cpu::rdtsc() - t0));
            }
        }
        Ok(out)
    }

    fn bench_rpc(&mut self, count: usize) -> Result<(&'static str, RingSamples), Errno> {
        let transport = if self.conn.net.is_some() {
            "tcp"
        } else {
            "ring"
        };
        let out = time_round_trips(count, || self.conn.fs_call(&Request::Nop))?;
        Ok((transport, out))
    }

    fn bench_ring(&mut self, count: usize) -> Result<RingSamples, Errno> {
        use coherent::Transport;
        time_round_trips(count, || self.conn.call(&Request::Nop))
    }
}

impl NodeOs {
    /// Map the file through the mmap window (zero copy: page-table entries
    /// point at our frames or the owners' frames in BAR2) and read it
    /// through the mapping. Pages invalidated while the window was being
    /// built are mapped again.
    fn mmap_read_fd(&mut self, fd: Fd) -> Result<(u32, u64), Errno> {
        let (ino, size) = self.vfs.fd_info(fd)?;
        let pages = size.div_ceil(4096);
        for _ in 0..100 {
            let (_, misses0) = coherent::fault_counts();
            // Pages are resolved now and mapped by page faults on first
            // access, straight to our frame or the owner's frame in BAR2.
            let base = coherent::mmap_lazy(&mut self.conn, ino, pages)?;
            let mut h = crc32fast::Hasher::new();
            let mut page = [0u8; 4096];
            for idx in 0..pages {
                let n = ((size - idx * 4096) as usize).min(4096);
                crate::mm::paging::window_read_faulting(base + idx * 4096, &mut page[..n])
                    .map_err(|_| Errno::Io)?;
                h.update(&page[..n]);
            }
            coherent::munmap();
            if coherent::fault_counts().1 == misses0 {
                return Ok((h.finalize(), size));
            }
            // A page was invalidated between resolution and access: again.
        }
        Err(Errno::Io)
    }
}

/// Run the node: join, then the shell until `shutdown`.
pub fn run(cfg: &BootConfig, id: u32, shm: RawShm) -> ! {
    let shm: &'static RawShm = SHM.call_once(|| shm);
    crate::arch::interrupts::init_timer(tick, cfg.tick_hz);
    coherent::set_cxl_latency(cfg.cxl_ns);
    x86_64::instructions::interrupts::enable();
    let net = if cfg.mode == Mode::Net {
        net_link(id, cfg.rpc_timeout_ms * 1_000_000)
    } else {
        None
    };
    let mut os = NodeOs {
        conn: Conn {
            shm,
            id,
            layout: None,
            client: None,
            rpc_timeout_ns: cfg.rpc_timeout_ms * 1_000_000,
            reported: false,
            mode: cfg.mode,
            remote_limit: cfg.remote_limit as usize,
            wait: None,
            dir_hb: (0, 0),
            net,
        },
        vfs: Vfs::new(cfg.mode),
        storage: cfg.storage.clone(),
        cxl_ns: cfg.cxl_ns,
        mmap_file: None,
    };
    if os.conn.join(BOOT_WAIT_NS).is_err() {
        log::warn!("starting the shell without the directory (directory unavailable)");
    }
    let mut shell = Shell::new(id as u16);
    let mut editor = LineEditor::new();
    klog::print_str(&shell.prompt());
    let mut last_check = time::now_ns();
    loop {
        let Some(b) = serial::try_read() else {
            let now = time::now_ns();
            if now - last_check > 100_000_000 {
                last_check = now;
                os.conn.check();
            }
            coherent::service(shm);
            cpu::wait_for_interrupt();
            continue;
        };
        let mut echo = |bytes: &[u8]| klog::write_raw(bytes);
        if let Some(line) = editor.feed(b, &mut echo) {
            match shell.execute(&mut os, &line) {
                Outcome::Continue => klog::print_str(&shell.prompt()),
                Outcome::Shutdown => shutdown(&mut os),
            }
        }
    }
}

/// Warm up with 16 calls (they wake a halted directory), then time
/// `count` calls of `call`, in nanoseconds.
fn time_round_trips(
    count: usize,
    mut call: impl FnMut() -> Result<Response, Errno>,
) -> Result<RingSamples, Errno> {
    for _ in 0..16 {
        call()?;
    }
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let t0 = cpu::rdtsc();
        call()?;
        out.push(time::cycles_to_ns(cpu::rdtsc() - t0));
    }
    Ok(out)
}

/// `net` mode: bring up this node's NIC (the one `qemu-run.sh` gave the
/// MAC `52:54:00:0c:01:<id>`).
fn net_link(id: u32, timeout_ns: u64) -> Option<crate::net::NetConn> {
    let mut root = crate::drivers::pci::root();
    let nics = crate::drivers::net::probe_all(&mut root);
    let found = nics.len();
    let Some(nic) = nics.into_iter().find(|n| n.link_id() == Some((1, id))) else {
        log::error!(
            "net mode: no virtio-net NIC for node {id} ({found} NICs found); file requests will fail with 'directory unavailable' (start the cluster with ./qemu-run.sh --mode net)"
        );
        return None;
    };
    log::info!(
        "net mode: link up as {} -> file server {}:{}",
        crate::net::addr(id, 2),
        crate::net::addr(id, 1),
        fabric::netwire::PORT
    );
    Some(crate::net::NetConn::new(nic, id, timeout_ns))
}

fn shutdown(os: &mut NodeOs) -> ! {
    let _ = os.vfs.sync(&mut os.conn);
    if let Some(layout) = os.conn.layout {
        Header::new(os.conn.shm, layout).set_node_state(os.conn.id, NodeState::Left);
    }
    log::info!("node {} shut down", os.conn.id);
    crate::arch::exit(crate::arch::ExitCode::Success)
}
