//! A host cluster for tests: a real [`Directory`] over a [`HeapShm`] and a
//! [`MemDisk`], and nodes running the real data path ([`Node`]) in one
//! process, on a fake clock.
//!
//! Every wait step of a node ([`Clock::wait_step`]) advances the clock,
//! beats every live node's heartbeat (and the directory's, while it is
//! up), runs one directory pass, and lets every other node service its
//! notices, as their idle loops would. A node that is waiting itself is
//! borrowed and skipped (its own wait loop services it). The page tables
//! of the mmap windows are a recorded map per node ([`HostEnv::mapped`]),
//! and [`Rig::window_read`] reads through it, faulting like the kernel.

use std::cell::{Cell, RefCell, RefMut};
use std::collections::BTreeMap;
use std::rc::{Rc, Weak};
use std::vec::Vec;

use dirsvc::server::{Config, Directory};
use fabric::config::{BaselineWrites, Mode};
use fabric::layout::{Header, Layout};
use fabric::proto::Errno;
use fabric::shm::{HeapShm, SharedMem};
use flatfs::{BlockDevice, Fs, IoError, MemDisk, BLOCK_SIZE};

use crate::env::{Clock, Doorbell, Env, Mapper};
use crate::node::{Node, NodeConfig};

mod net;
pub use net::RigNet;

/// Fake physical address of the shared region (frame `gfn` at
/// `SHM_PA + gfn * 4096`).
pub const SHM_PA: u64 = 0x10_0000_0000;
/// Fake physical address of the zero page.
pub const ZERO_PA: u64 = 0x1000;
/// Clock advance of one spinning wait step.
pub const SPIN_STEP_NS: u64 = 10_000;
/// Clock advance of one halting wait step (a timer tick).
pub const HALT_STEP_NS: u64 = 1_000_000;
/// The kernel's idle loop checks membership this often.
pub const IDLE_CHECK_NS: u64 = 100_000_000;

/// A node as the directory's step sees it (it may be gone or borrowed).
type WeakNode = Weak<RefCell<Node<HostEnv>>>;

/// Something run at every wait step (after the directory pass), with the
/// id of the node stepping (0: [`Rig::idle`]). It is not run again while
/// it runs, so it may drive whole operations of other nodes.
pub type StepHook = Box<dyn FnMut(u32)>;

/// The rig's disk: a [`MemDisk`] that survives directory restarts and can
/// fail a chosen read.
pub struct FaultDisk {
    disk: Rc<RefCell<MemDisk>>,
    /// Reads until one fails (`Some(0)`: the next one), then `None`.
    pub fail_read_in: Rc<Cell<Option<u64>>>,
}

impl BlockDevice for FaultDisk {
    fn block_count(&self) -> u64 {
        self.disk.borrow().block_count()
    }
    fn read_block(&mut self, lba: u64, buf: &mut [u8; BLOCK_SIZE]) -> Result<(), IoError> {
        match self.fail_read_in.get() {
            Some(0) => {
                self.fail_read_in.set(None);
                return Err(IoError);
            }
            Some(n) => self.fail_read_in.set(Some(n - 1)),
            None => {}
        }
        self.disk.borrow_mut().read_block(lba, buf)
    }
    fn write_block(&mut self, lba: u64, buf: &[u8; BLOCK_SIZE]) -> Result<(), IoError> {
        self.disk.borrow_mut().write_block(lba, buf)
    }
    fn flush(&mut self) -> Result<(), IoError> {
        self.disk.borrow_mut().flush()
    }
}

/// What the nodes share: the region, the directory, the clock.
pub struct Shared {
    /// The shared region.
    pub mem: HeapShm,
    /// The directory's configuration (kept for its restarts).
    pub dir_cfg: Config,
    /// Its layout.
    pub layout: Layout,
    /// The directory.
    pub dir: RefCell<Directory<FaultDisk>>,
    /// The disk under the directory (kept across restarts).
    pub disk: Rc<RefCell<MemDisk>>,
    /// See [`FaultDisk::fail_read_in`].
    pub fail_read_in: Rc<Cell<Option<u64>>>,
    /// Run at every step (see [`StepHook`]).
    pub hook: RefCell<Option<StepHook>>,
    now: Cell<u64>,
    /// False: the directory neither serves nor beats (it hangs).
    dir_up: Cell<bool>,
    /// Nodes whose heartbeat and idle loop are frozen.
    frozen: RefCell<Vec<u32>>,
    nodes: RefCell<Vec<(u32, WeakNode)>>,
    /// Directory passes run.
    pub passes: Cell<u64>,
    /// Nodes sleep through [`Doorbell::sleep_until_event`] (else the
    /// default: no doorbells, halting wait steps).
    pub doorbells: Cell<bool>,
    /// Idle nodes (neither stepping nor frozen) run their membership
    /// check this often in steps, as the kernel's idle loop does (`None`,
    /// the default: only when a test calls it). Without it a node whose
    /// session broke while others wait on it rejoins only when its
    /// test's next operation checks, and the waiters retry until they
    /// give up.
    pub idle_checks: Cell<Option<u64>>,
    in_idle_check: Cell<bool>,
    last_check: RefCell<Vec<u64>>,
    /// `net` mode: answers the directory released after `serve_net`
    /// returned, (node, token, frame), until that node's [`RigNet`] takes
    /// them.
    net_mail: RefCell<Vec<(u32, u64, fabric::netwire::Frame)>>,
}

impl Shared {
    /// Advance the clock by `dt`, beat, run one directory pass, and let
    /// every node but `me` service its notices.
    pub fn step(&self, me: u32, dt: u64) {
        self.now.set(self.now.get() + dt);
        let h = Header::new(&*self.mem, self.layout);
        // A copy: the hook may freeze or thaw. Usually empty (no
        // allocation): this runs at every wait step.
        let frozen = {
            let f = self.frozen.borrow();
            if f.is_empty() {
                Vec::new()
            } else {
                f.clone()
            }
        };
        for n in 1..=self.layout.max_nodes {
            if !frozen.contains(&n) {
                h.beat_node(n);
            }
        }
        if self.dir_up.get() {
            h.beat_dir();
            self.dir.borrow_mut().poll(&*self.mem, self.now.get());
            self.passes.set(self.passes.get() + 1);
        }
        // Nodes are only ever added: the ones registered now, by index
        // (no copy of the list at every step).
        let count = self.nodes.borrow().len();
        for i in 0..count {
            let (id, w) = {
                let nodes = self.nodes.borrow();
                (nodes[i].0, nodes[i].1.clone())
            };
            if id == me || frozen.contains(&id) {
                continue;
            }
            if let Some(n) = w.upgrade() {
                if let Ok(mut n) = n.try_borrow_mut() {
                    n.service();
                    self.idle_check(id, &mut n);
                }
            }
        }
        let hook = self.hook.try_borrow_mut().ok().and_then(|mut h| h.take());
        if let Some(mut f) = hook {
            f(me);
            let mut slot = self.hook.borrow_mut();
            if slot.is_none() {
                *slot = Some(f);
            }
        }
    }

    /// With [`Shared::idle_checks`], idle node `id`'s membership check,
    /// every [`IDLE_CHECK_NS`] of the clock (not from inside another
    /// one: a check may wait, and its steps come back here).
    fn idle_check(&self, id: u32, n: &mut Node<HostEnv>) {
        let Some(every) = self.idle_checks.get() else {
            return;
        };
        if self.in_idle_check.get() {
            return;
        }
        let now = self.now.get();
        let due = {
            let mut last = self.last_check.borrow_mut();
            let i = id as usize;
            if last.len() <= i {
                last.resize(i + 1, now);
            }
            let due = now.saturating_sub(last[i]) >= every;
            if due {
                last[i] = now;
            }
            due
        };
        if due {
            self.in_idle_check.set(true);
            n.check();
            self.in_idle_check.set(false);
        }
    }

    /// The directory hangs (`false`) or resumes, from a step hook.
    pub fn set_dir_up(&self, up: bool) {
        self.dir_up.set(up);
    }

    /// The fake clock.
    pub fn now(&self) -> u64 {
        self.now.get()
    }

    /// Node `k` runs again after [`Rig::freeze`] (from a step hook).
    pub fn thaw(&self, k: u32) {
        self.frozen.borrow_mut().retain(|&n| n != k);
    }
}

/// One node's host: the shared state and its recorded window mappings.
pub struct HostEnv {
    sh: Rc<Shared>,
    id: u32,
    /// Window page tables: virtual page -> physical address (shared, so a
    /// test's load/store hook can walk it while the node is borrowed).
    pub mapped: Rc<RefCell<BTreeMap<u64, u64>>>,
    nonce: Cell<u64>,
    /// Doorbells rung for the directory.
    pub rings: Cell<u64>,
    /// Doorbell sleeps (the re-check found nothing).
    pub sleeps: Cell<u64>,
    /// Doorbell sleeps refused because the re-check found work.
    pub woke_with_work: Cell<u64>,
}

/// The fake doorbell: counts rings; with [`Shared::doorbells`] a sleep
/// announces itself in the node's sleeping word (quiet or not, as asked:
/// the directory may take DIR_INVs as acknowledged meanwhile), re-checks
/// for work, and otherwise runs one short step (the directory and the
/// other nodes get a pass, as if a doorbell came at once).
impl Doorbell for HostEnv {
    fn ring_directory(&self) {
        self.rings.set(self.rings.get() + 1);
    }
    fn sleep_until_event(
        &self,
        deadline_ns: u64,
        quiet: bool,
        has_work: &mut dyn FnMut() -> bool,
    ) -> bool {
        use fabric::doorbell::{finish_sleep, prepare_sleep, seqcst_fence, PeerMap};
        if !self.sh.doorbells.get() {
            return false;
        }
        let map = PeerMap::new(&*self.sh.mem);
        if !prepare_sleep(&map, self.id, quiet, seqcst_fence, has_work) {
            self.woke_with_work.set(self.woke_with_work.get() + 1);
            // Time goes on while a real node looks: a wait whose re-check
            // always finds something it cannot take (a corrupt notify
            // ring) must still reach its deadline.
            self.sh.step(self.id, SPIN_STEP_NS);
        } else {
            if self.sh.now() < deadline_ns {
                self.sleeps.set(self.sleeps.get() + 1);
                self.sh.step(self.id, SPIN_STEP_NS);
            }
            finish_sleep(&map, self.id, seqcst_fence);
        }
        true
    }
}

impl Clock for HostEnv {
    fn now_ns(&self) -> u64 {
        self.sh.now.get()
    }
    fn wait_step(&self, spinning: bool) {
        let dt = if spinning { SPIN_STEP_NS } else { HALT_STEP_NS };
        self.sh.step(self.id, dt);
    }
}

impl Mapper for HostEnv {
    fn map_4k(&self, va: u64, pa: u64) -> Result<(), Errno> {
        self.mapped.borrow_mut().insert(va & !0xFFF, pa);
        Ok(())
    }
    fn unmap_4k(&self, va: u64) {
        self.mapped.borrow_mut().remove(&(va & !0xFFF));
    }
    fn shm_pa(&self) -> u64 {
        SHM_PA
    }
    fn zero_pa(&self) -> u64 {
        ZERO_PA
    }
}

impl Env for HostEnv {
    type Mem = HeapShm;
    type Net = RigNet;
    fn mem(&self) -> &HeapShm {
        &self.sh.mem
    }
    fn nonce(&self) -> u64 {
        self.nonce.set(self.nonce.get() + 1);
        (u64::from(self.id) << 32) | self.nonce.get()
    }
}

/// How to build a [`Rig`].
#[derive(Debug, Clone, Copy)]
pub struct RigConfig {
    /// Nodes (1..).
    pub nodes: u32,
    /// Page-cache mode of every node.
    pub mode: Mode,
    /// Shared region size (sets the pool frames per node).
    pub region: usize,
    /// Remote mappings a node keeps.
    pub remote_limit: usize,
    /// `private` mode: reads of one batch in flight over the rings.
    pub ring_reads: usize,
    /// A node gives up a call after this long (fake clock).
    pub rpc_timeout_ns: u64,
    /// Private-cache modes: write back or through.
    pub baseline_writes: BaselineWrites,
    /// Most pages a node's own cache holds (0: the mode's default).
    pub cache_pages: usize,
    /// Eviction policy of every node at boot.
    pub policy: fabric::config::PolicyName,
    /// Inodes of the directory's file system (64).
    pub inodes: u32,
    /// Boot option `task_reads=each` (true) or `batch`.
    pub task_reads_each: bool,
    /// Boot option `readahead_kb` (0 here: the tests written before
    /// readahead count exact page requests).
    pub readahead_kb: u32,
    /// Boot option `faultaround_kb` (0 here, as `readahead_kb`).
    pub faultaround_kb: u32,
    /// Reclaim ahead of need (off unless a test turns it on).
    pub reclaim: crate::watermark::Watermarks,
    /// Strong mode: the directory grants delegations and the nodes ask
    /// for them (boot option `delegation`; off unless a test turns it on).
    pub delegation: bool,
}

impl RigConfig {
    /// `nodes` nodes in `mode`, a 4 MiB region.
    pub fn new(nodes: u32, mode: Mode) -> RigConfig {
        RigConfig {
            nodes,
            mode,
            region: 4 << 20,
            remote_limit: 8192,
            ring_reads: crate::link::MAX_RING_READS,
            rpc_timeout_ns: 10_000_000_000,
            baseline_writes: BaselineWrites::Back,
            cache_pages: 0,
            policy: fabric::config::PolicyName::Fifo,
            inodes: 64,
            task_reads_each: true,
            readahead_kb: 0,
            faultaround_kb: 0,
            reclaim: crate::watermark::Watermarks::OFF,
            delegation: false,
        }
    }
}

/// A directory and joined nodes.
pub struct Rig {
    /// What they share.
    pub sh: Rc<Shared>,
    nodes: Vec<Rc<RefCell<Node<HostEnv>>>>,
}

impl Rig {
    /// Format the region and a disk, start the directory, join every node.
    pub fn new(cfg: RigConfig) -> Rig {
        let mem = HeapShm::new(cfg.region);
        let layout = Layout::compute(cfg.region, cfg.nodes).expect("rig region fits");
        layout.format(&*mem, 0);
        let disk = Rc::new(RefCell::new(MemDisk::new(4096)));
        let fail_read_in = Rc::new(Cell::new(None));
        let fd = FaultDisk {
            disk: disk.clone(),
            fail_read_in: fail_read_in.clone(),
        };
        let fs = Fs::format(fd, cfg.inodes).expect("format the rig's disk");
        let dcfg = Config {
            daxfs: cfg.mode == Mode::Daxfs,
            delegation: cfg.delegation && cfg.mode == Mode::Strong,
            ..Config::default()
        };
        let dir = Directory::new(&*mem, layout, Some(fs), dcfg);
        let sh = Rc::new(Shared {
            mem,
            dir_cfg: dcfg,
            layout,
            dir: RefCell::new(dir),
            disk,
            fail_read_in,
            hook: RefCell::new(None),
            now: Cell::new(1),
            dir_up: Cell::new(true),
            frozen: RefCell::new(Vec::new()),
            nodes: RefCell::new(Vec::new()),
            passes: Cell::new(0),
            doorbells: Cell::new(false),
            idle_checks: Cell::new(None),
            in_idle_check: Cell::new(false),
            last_check: RefCell::new(Vec::new()),
            net_mail: RefCell::new(Vec::new()),
        });
        let mut nodes = Vec::new();
        for id in 1..=cfg.nodes {
            let env = HostEnv {
                sh: sh.clone(),
                id,
                mapped: Rc::new(RefCell::new(BTreeMap::new())),
                nonce: Cell::new(0),
                rings: Cell::new(0),
                sleeps: Cell::new(0),
                woke_with_work: Cell::new(0),
            };
            let ncfg = NodeConfig {
                id,
                mode: cfg.mode,
                rpc_timeout_ns: cfg.rpc_timeout_ns,
                remote_limit: cfg.remote_limit,
                ring_reads: cfg.ring_reads,
                cxl_ns: 0,
                baseline_writes: cfg.baseline_writes,
                cache_pages: cfg.cache_pages,
                policy: cfg.policy,
                task_reads_each: cfg.task_reads_each,
                readahead_kb: cfg.readahead_kb,
                faultaround_kb: cfg.faultaround_kb,
                reclaim: cfg.reclaim,
                delegation: cfg.delegation,
            };
            // `net` mode: file requests over a loopback connection.
            let net = (cfg.mode == Mode::Net).then(|| RigNet::new(sh.clone(), id));
            let node = Rc::new(RefCell::new(Node::new(env, ncfg, net)));
            sh.nodes.borrow_mut().push((id, Rc::downgrade(&node)));
            node.borrow_mut().join(1_000_000_000).expect("node joins");
            nodes.push(node);
        }
        Rig { sh, nodes }
    }

    /// Is the directory running (not frozen by [`Rig::set_dir_up`])?
    pub fn dir_is_up(&self) -> bool {
        self.sh.dir_up.get()
    }

    /// Node `k` (1..), borrowed (its idle loop pauses meanwhile).
    pub fn node(&self, k: u32) -> RefMut<'_, Node<HostEnv>> {
        self.nodes[k as usize - 1].borrow_mut()
    }

    /// Node `k` (1..), shared (for a [`StepHook`]).
    pub fn node_rc(&self, k: u32) -> Rc<RefCell<Node<HostEnv>>> {
        self.nodes[k as usize - 1].clone()
    }

    /// Run `f` at every step (`None`: stop).
    pub fn set_hook(&self, f: Option<StepHook>) {
        *self.sh.hook.borrow_mut() = f;
    }

    /// Write `garbage` as the producer index of node `k`'s notify ring (a
    /// scribbling peer): the node's next poll finds the ring corrupt.
    pub fn corrupt_notify_ring(&self, k: u32, garbage: u32) {
        let loc = self.sh.layout.channel(k).notify;
        self.sh.mem.store_u32(loc.off, garbage);
    }

    /// The directory crashes and a new one starts over the same disk and
    /// region (what it had not written back is lost); nodes rejoin.
    pub fn restart_dir(&self) {
        let fd = FaultDisk {
            disk: self.sh.disk.clone(),
            fail_read_in: self.sh.fail_read_in.clone(),
        };
        let epoch = Header::new(&*self.sh.mem, self.sh.layout).epoch() + 1;
        self.sh.layout.format(&*self.sh.mem, epoch);
        self.sh.fail_read_in.set(None);
        let fs = Fs::mount(fd).ok();
        *self.sh.dir.borrow_mut() =
            Directory::new(&*self.sh.mem, self.sh.layout, fs, self.sh.dir_cfg);
    }

    /// Run `steps` idle steps (directory passes, every node services).
    pub fn idle(&self, steps: usize) {
        for _ in 0..steps {
            self.sh.step(0, SPIN_STEP_NS);
        }
    }

    /// Run node `k`'s idle loop for `ns` of fake time, as the kernel's
    /// shell loop does: service notices every step (reclaim ahead of need
    /// first), check membership every 100 ms.
    pub fn idle_node(&self, k: u32, ns: u64) {
        let end = self.sh.now() + ns;
        let mut last_check = self.sh.now();
        while self.sh.now() < end {
            let mut n = self.node(k);
            if self.sh.now() - last_check > 100_000_000 {
                last_check = self.sh.now();
                n.check();
            }
            n.reclaim_ahead(true);
            n.service();
            drop(n);
            self.sh.step(k, HALT_STEP_NS);
        }
    }

    /// The directory hangs (`false`: no passes, no heartbeat) or resumes.
    pub fn set_dir_up(&self, up: bool) {
        self.sh.dir_up.set(up);
    }

    /// Freeze node `k`'s heartbeat and idle loop (it looks dead).
    pub fn freeze(&self, k: u32) {
        self.sh.frozen.borrow_mut().push(k);
    }

    /// Node `k` runs again after [`Rig::freeze`] (a paused node resumed:
    /// it finds out it was declared failed at its next membership check).
    pub fn thaw(&self, k: u32) {
        self.sh.thaw(k);
    }

    /// The shared region's bytes of frame `gfn`.
    pub fn frame(&self, gfn: u64) -> Vec<u8> {
        let mut b = vec![0u8; 4096];
        self.sh.mem.read(gfn as usize * 4096, &mut b);
        b
    }

    /// Read `buf.len()` bytes through node `k`'s window at `va`, faulting
    /// in missing pages with [`Node::window_fault`] like the kernel's
    /// page-fault handler. `Err(Io)`: a fault was refused.
    pub fn window_read(&self, k: u32, va: u64, buf: &mut [u8]) -> Result<(), Errno> {
        let mut done = 0;
        while done < buf.len() {
            let at = va + done as u64;
            let page = at & !0xFFF;
            let pa = {
                let n = self.node(k);
                let pa = n.link.env.mapped.borrow().get(&page).copied();
                pa
            };
            let pa = match pa {
                Some(pa) => pa,
                None => {
                    if !self.node(k).window_fault(at) {
                        return Err(Errno::Io);
                    }
                    continue;
                }
            };
            let n = (4096 - (at & 0xFFF) as usize).min(buf.len() - done);
            if pa == ZERO_PA {
                buf[done..done + n].fill(0);
            } else {
                let off = (pa - SHM_PA) as usize + (at & 0xFFF) as usize;
                self.sh.mem.read(off, &mut buf[done..done + n]);
            }
            done += n;
        }
        Ok(())
    }
}

/// Node `env`'s window mapping of `va` as an offset in the shared region
/// (`None`: not mapped, or the zero page): what a load at `va` reads.
pub fn window_offset(env: &HostEnv, va: u64) -> Option<usize> {
    let pa = *env.mapped.borrow().get(&(va & !0xFFF))?;
    (pa != ZERO_PA).then(|| (pa - SHM_PA) as usize + (va & 0xFFF) as usize)
}
