//! The node role: join the cluster through the shared region, offer the
//! VFS, and run the shell on the serial console.
//!
//! Waiting: a call to the directory spins for a short while (answers
//! usually come in microseconds), then halts between timer ticks. It gives
//! up when the directory's heartbeat stops for [`DIR_SILENT_NS`] or the call
//! exceeds the configured RPC timeout, and reports "directory unavailable".

pub mod vfs;

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use dirsvc::client::Client;
use dirsvc::config::BootConfig;
use dirsvc::layout::{DirState, Header, Layout, LayoutError, NodeState};
use dirsvc::proto::{Errno, Request, Response};
use dirsvc::shm::RawShm;
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

/// Timer hook: bump this node's heartbeat every 10 ms.
fn tick() {
    if !crate::arch::interrupts::ticks().is_multiple_of(10) {
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
}

/// A wait closure: spin, then halt; false on timeout or a silent directory.
/// Its clock starts at the first call, so building one costs nothing on
/// calls that are answered while the client is still polling the ring.
fn waiter(shm: &'static RawShm, layout: Layout, timeout_ns: u64) -> impl FnMut() -> bool {
    let mut start = None;
    let mut last_hb = 0;
    let mut last_change = 0;
    move || {
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
        Errno::Unavailable
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
                log::info!("node {} joined cluster epoch {}", self.id, c.epoch());
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
        let Some(layout) = self.layout else { return };
        let h = Header::new(self.shm, layout);
        if self.client.is_some() && h.node_state(self.id) == Some(NodeState::Failed) {
            log::warn!("the directory declared this node failed; rejoining with a new epoch");
            self.client = None;
            let _ = self.join(1_000_000_000);
        }
    }
}

impl Rpc for Conn {
    fn call(&mut self, req: &Request) -> Result<Response, Errno> {
        if self.client.is_none() {
            // Not joined (yet): try once more, briefly.
            self.join(500_000_000)?;
        }
        let layout = self.layout.ok_or(Errno::Unavailable)?;
        let h = Header::new(self.shm, layout);
        if h.node_state(self.id) == Some(NodeState::Failed) {
            self.check();
        }
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

    fn client(&self) -> Option<&Client> {
        self.client.as_ref()
    }
}

/// Everything the shell reaches through [`Os`].
struct NodeOs {
    conn: Conn,
    vfs: Vfs,
}

impl Os for NodeOs {
    fn print(&mut self, s: &str) {
        klog::print_str(s);
    }
    fn uptime_ns(&self) -> u64 {
        time::now_ns()
    }
    fn open(&mut self, path: &str, flags: OpenFlags) -> Result<Fd, Errno> {
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
        self.vfs.close(fd)
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

    fn bench_ring(&mut self, count: usize) -> Result<RingSamples, Errno> {
        // Warm up (wakes a halted directory), then time each round trip.
        for _ in 0..16 {
            self.conn.call(&Request::Nop)?;
        }
        let mut out = Vec::with_capacity(count);
        for _ in 0..count {
            let t0 = cpu::rdtsc();
            self.conn.call(&Request::Nop)?;
            out.push(time::cycles_to_ns(cpu::rdtsc() - t0));
        }
        Ok(out)
    }
}

/// Run the node: join, then the shell until `shutdown`.
pub fn run(cfg: &BootConfig, id: u32, shm: RawShm) -> ! {
    let shm: &'static RawShm = SHM.call_once(|| shm);
    crate::arch::interrupts::init_timer(tick);
    x86_64::instructions::interrupts::enable();
    let mut os = NodeOs {
        conn: Conn {
            shm,
            id,
            layout: None,
            client: None,
            rpc_timeout_ns: cfg.rpc_timeout_ms * 1_000_000,
            reported: false,
        },
        vfs: Vfs::new(shm),
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

fn shutdown(os: &mut NodeOs) -> ! {
    let _ = os.vfs.sync(&mut os.conn);
    if let Some(layout) = os.conn.layout {
        Header::new(os.conn.shm, layout).set_node_state(os.conn.id, NodeState::Left);
    }
    log::info!("node {} shut down", os.conn.id);
    crate::arch::exit(crate::arch::ExitCode::Success)
}
