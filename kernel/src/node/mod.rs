//! The node role: the kernel's side of the node data path, which lives in
//! the host-tested `nodepath` crate. This module implements its traits
//! over the devices ([`KEnv`]: the TSC clock, `pause`/`hlt` waits, the
//! page tables of the mmap windows, BAR2; `net` mode's TCP connection as
//! its file-server transport), keeps the node in one lock that the window
//! page-fault handler only `try_lock`s, beats the heartbeat from the timer
//! tick, and runs the shell on the serial console ([`os::NodeOs`]).

mod os;

use alloc::vec::Vec;

use fabric::config::{BootConfig, Mode};
use fabric::layout::{Header, Layout};
use fabric::proto::{Errno, Request, Response};
use fabric::shm::RawShm;
use nodepath::env::{Clock, Doorbell, Env, FileServer, Mapper};
use nodepath::node::{Node, NodeConfig};
use spin::{Mutex, Once};
use userland::line::LineEditor;
use userland::shell::{Outcome, Shell};

use crate::arch::{cpu, serial, time};
use crate::klog;
use crate::mm::paging;

/// How often an idle node checks its membership (directory silent, failed).
const IDLE_CHECK_NS: u64 = 100_000_000;
/// The same, tickless (doorbells): every timer wakeup costs the host CPU.
const IDLE_CHECK_BELL_NS: u64 = 250_000_000;

/// How long a booting node waits for the directory to format the region.
const BOOT_WAIT_NS: u64 = 15_000_000_000;

static SHM: Once<RawShm> = Once::new();
static HB: Once<(Layout, u32)> = Once::new();
/// The node (set before the shell starts).
static NODE: Mutex<Option<Node<KEnv>>> = Mutex::new(None);

// The library's window addresses are the range the kernel reserves.
const _: () = assert!(nodepath::singlecopy::MMAP_BASE == paging::WINDOW.start);

/// Timer hook: bump this node's heartbeat every 10 ms (tickless: every
/// housekeeping beat).
fn tick() {
    let every = (crate::arch::interrupts::tick_hz() / 100).max(1) as u64;
    if !crate::arch::interrupts::ticks().is_multiple_of(every) {
        return;
    }
    if let (Some(shm), Some((layout, id))) = (SHM.get(), HB.get()) {
        Header::new(shm, *layout).beat_node(*id);
    }
}

/// The node's host: devices, clock, shared region.
pub struct KEnv {
    shm: &'static RawShm,
    /// A zeroed frame for window faults on pages no longer resident.
    zero_pa: u64,
    /// The doorbell (`None`: off, or `net` mode): waits sleep on it.
    bell: Option<&'static crate::drivers::ivshmem::Doorbell>,
    /// With doorbells: how long a wait spins before it sleeps (ns).
    bell_spin_ns: u64,
    /// Announce quiet sleeps (`lazy_inv`).
    lazy_invs: bool,
}

impl KEnv {
    /// Settle a deferred check of the directory's sleeping word (see
    /// `Doorbell::ring_deferred`): due after a few microseconds, or now
    /// (`force`) before this node halts.
    fn settle(&self, force: bool) {
        if let Some(b) = self.bell {
            b.settle(force, |_| self.directory_pending());
        }
    }

    /// Has the directory not yet taken everything this node published for
    /// it: requests, acks, or a join? (True when unsure.)
    fn directory_pending(&self) -> bool {
        let Some(&(layout, id)) = HB.get() else {
            return true;
        };
        let ch = layout.channel(id);
        ch.request.unread(self.shm)
            || ch.ack.unread(self.shm)
            || Header::new(self.shm, layout).node_state(id)
                == Some(fabric::layout::NodeState::Joining)
    }
}

impl Doorbell for KEnv {
    fn ring_directory(&self) {
        if let Some(b) = self.bell {
            // The fence and the look at the directory's word wait until
            // the answer is late (most requests are taken by an awake
            // directory long before).
            b.ring_deferred(fabric::doorbell::DIRECTORY, fabric::doorbell::VEC_REQUEST);
        }
    }
    fn sleep_until_event(
        &self,
        deadline_ns: u64,
        quiet: bool,
        has_work: &mut dyn FnMut() -> bool,
    ) -> bool {
        let Some(b) = self.bell else {
            return false;
        };
        self.settle(true);
        b.sleep_until_event(deadline_ns, quiet && self.lazy_invs, has_work);
        true
    }
    fn spin_ns(&self) -> u64 {
        match self.bell {
            Some(_) => self.bell_spin_ns,
            None => nodepath::wait::SPIN_NS,
        }
    }
}

impl Clock for KEnv {
    fn now_ns(&self) -> u64 {
        time::now_ns()
    }
    fn wait_step(&self, spinning: bool) {
        self.settle(!spinning);
        if spinning {
            cpu::pause();
        } else {
            // Tickless: a polling wait's step is a 1 ms timer (else the
            // next tick).
            crate::arch::timer::halt_for(1_000_000);
        }
    }
}

impl Mapper for KEnv {
    fn map_4k(&self, va: u64, pa: u64) -> Result<(), Errno> {
        paging::map_4k(va, pa).map_err(|_| Errno::NoSpace)
    }
    fn unmap_4k(&self, va: u64) {
        paging::unmap_4k(va);
    }
    fn shm_pa(&self) -> u64 {
        self.shm.base() as u64
    }
    fn zero_pa(&self) -> u64 {
        self.zero_pa
    }
}

impl Env for KEnv {
    type Mem = RawShm;
    type Net = crate::net::NetConn;
    fn mem(&self) -> &RawShm {
        self.shm
    }
    fn nonce(&self) -> u64 {
        cpu::rdtsc()
    }
    fn layout_known(&self, layout: &Layout, node: u32) {
        HB.call_once(|| (*layout, node));
    }
    fn fence(&self) {
        cpu::full_fence();
    }
}

impl FileServer for crate::net::NetConn {
    fn call(&mut self, req: &Request) -> Result<Response, Errno> {
        crate::net::NetConn::call(self, req)
    }
    fn call_batch(&mut self, reqs: &[Request]) -> Result<Vec<(Response, Vec<u8>)>, Errno> {
        crate::net::NetConn::call_batch(self, reqs)
    }
    fn bulk_cap(&self, slot: u32) -> Result<usize, Errno> {
        crate::net::NetConn::bulk_cap(self, slot)
    }
    fn bulk_write(&mut self, slot: u32, at: usize, data: &[u8]) -> Result<(), Errno> {
        crate::net::NetConn::bulk_write(self, slot, at, data)
    }
    fn bulk_read(&mut self, slot: u32, buf: &mut [u8]) -> Result<(), Errno> {
        crate::net::NetConn::bulk_read(self, slot, buf)
    }
    fn start(&mut self, req: &Request) -> Result<u32, Errno> {
        crate::net::NetConn::start(self, req)
    }
    fn start_later(&mut self, req: &Request) -> Result<u32, Errno> {
        crate::net::NetConn::start_later(self, req)
    }
    fn send_started(&mut self) {
        crate::net::NetConn::send_started(self)
    }
    fn pump(&mut self) {
        crate::net::NetConn::pump_started(self)
    }
    fn take_kept(&mut self, tag: u32) -> Option<Result<Response, Errno>> {
        crate::net::NetConn::take_kept(self, tag)
    }
    fn take(&mut self, tag: u32) -> Option<Result<Response, Errno>> {
        crate::net::NetConn::take(self, tag)
    }
    fn forget(&mut self, tag: u32) {
        crate::net::NetConn::forget(self, tag)
    }
    fn wait(&mut self) {
        crate::net::NetConn::wait(self)
    }
}

/// Run `f` on the node (`Unavailable` before it exists).
fn with<R>(f: impl FnOnce(&mut Node<KEnv>) -> Result<R, Errno>) -> Result<R, Errno> {
    NODE.lock().as_mut().map_or(Err(Errno::Unavailable), f)
}

/// The page-fault handler of the mmap windows (runs in the fault, with
/// interrupts off): never waits for the node's lock; the library says
/// which frame to map and maps it.
fn window_fault(va: u64) -> bool {
    let Some(mut g) = NODE.try_lock() else {
        return false;
    };
    g.as_mut().is_some_and(|n| n.window_fault(va))
}

/// Run the node: join, then the shell until `shutdown`.
pub fn run(cfg: &BootConfig, id: u32, shm: RawShm) -> ! {
    let shm: &'static RawShm = SHM.call_once(|| shm);
    let bell = start_timers(cfg);
    let check_ns = if bell.is_some() {
        IDLE_CHECK_BELL_NS
    } else {
        IDLE_CHECK_NS
    };
    x86_64::instructions::interrupts::enable();
    let net = if cfg.mode == Mode::Net {
        net_link(id, cfg.rpc_timeout_ms * 1_000_000)
    } else {
        None
    };
    let env = KEnv {
        shm,
        zero_pa: paging::zero_page().unwrap_or(0),
        bell,
        bell_spin_ns: cfg.bell_spin_us * 1000,
        lazy_invs: cfg.lazy_inv,
    };
    let ncfg = node_config(cfg, id);
    let mut node = Node::new(env, ncfg, net);
    // A dead directory is noticed at the next I/O within hb_timeout_ms.
    node.link.set_dir_timeout(cfg.hb_timeout_ms * 1_000_000);
    *NODE.lock() = Some(node);
    crate::arch::interrupts::set_window_fault_handler(window_fault);
    if with(|n| n.join(BOOT_WAIT_NS)).is_err() {
        log::warn!("starting the shell without the directory (directory unavailable)");
    }
    console_loop(cfg, id, bell, check_ns)
}

/// Doorbells (the rings' modes) make the node tickless: it rings the
/// directory for every request and sleeps until a doorbell or console
/// input, its deadlines and the heartbeat on a self-armed timer (four
/// beats per directory timeout, `hb_timeout_ms`, at most every 250 ms).
/// Without a doorbell (`net` mode, or no MSI-X) a periodic tick.
fn start_timers(cfg: &BootConfig) -> Option<&'static crate::drivers::ivshmem::Doorbell> {
    let bell = crate::drivers::ivshmem::doorbell().filter(|_| cfg.mode != Mode::Net);
    let beat_ns = (cfg.hb_timeout_ms * 1_000_000 / 4).min(IDLE_CHECK_BELL_NS);
    match bell {
        Some(_) => crate::arch::interrupts::init_tickless(tick, beat_ns),
        None => crate::arch::interrupts::init_timer(tick, cfg.tick_hz),
    }
    if let Some(b) = bell {
        serial::enable_rx_irq();
        crate::arch::interrupts::claim_irq(serial::IRQ);
        b.set_rings_directory(true);
        log::info!(
            "doorbell: node sleeps on doorbells, tickless (heartbeat every {} ms)",
            beat_ns / 1_000_000
        );
    }
    bell
}

/// The data path's configuration from the boot options.
fn node_config(cfg: &BootConfig, id: u32) -> NodeConfig {
    let ncfg = NodeConfig {
        id,
        mode: cfg.mode,
        rpc_timeout_ns: cfg.rpc_timeout_ms * 1_000_000,
        remote_limit: cfg.remote_limit as usize,
        ring_reads: cfg.ring_reads as usize,
        cxl_ns: cfg.cxl_ns,
        baseline_writes: cfg.baseline_writes,
        cache_pages: {
            let heap = nodepath::node::cache_pages_for_heap(crate::mm::heap_bytes());
            cfg.cache_pages.map_or(heap, |n| (n as usize).min(heap))
        },
        policy: cfg.policy,
        task_reads_each: cfg.task_reads_each,
        readahead_kb: cfg.readahead_kb,
        faultaround_kb: cfg.faultaround_kb,
        reclaim: nodepath::watermark::Watermarks::new(cfg.reclaim_low, cfg.reclaim_high),
        delegation: cfg.delegation,
    };
    log::info!(
        "node cache: {} pages (at most a third of the {} MiB kernel heap; boot option cache_pages)",
        ncfg.cache_pages,
        crate::mm::heap_bytes() >> 20
    );
    ncfg
}

/// The shell on the console; between input lines the node serves notices,
/// checks membership every `check_ns`, reclaims ahead of need and sleeps.
fn console_loop(
    cfg: &BootConfig,
    id: u32,
    bell: Option<&'static crate::drivers::ivshmem::Doorbell>,
    check_ns: u64,
) -> ! {
    let mut os = os::NodeOs::new(id, cfg.storage.clone(), cfg.cxl_ns);
    let mut shell = Shell::new(id as u16);
    let mut editor = LineEditor::new();
    klog::print_str(&shell.prompt());
    let mut last_check = time::now_ns();
    loop {
        let Some(b) = serial::try_read() else {
            idle(bell, check_ns, &mut last_check);
            continue;
        };
        let mut echo = |bytes: &[u8]| klog::write_raw(bytes);
        if let Some(line) = editor.feed(b, &mut echo) {
            match shell.execute(&mut os, &line) {
                Outcome::Continue => klog::print_str(&shell.prompt()),
                Outcome::Shutdown => shutdown(id),
            }
        }
    }
}

/// No console input: serve notices, check membership when `check_ns` has
/// passed since `last_check`, free frames ahead of need, then sleep.
fn idle(
    bell: Option<&'static crate::drivers::ivshmem::Doorbell>,
    check_ns: u64,
    last_check: &mut u64,
) {
    let now = time::now_ns();
    let check = now - *last_check > check_ns;
    if check {
        *last_check = now;
    }
    let _ = with(|n| {
        if check {
            n.check();
            // Pages idle past `cache config ttl=` go now.
            n.expire();
            heap_high_log();
        }
        // Idle: free frames ahead of need (under the low mark), done
        // before sleeping.
        n.reclaim_ahead(true);
        Ok(n.service())
    });
    if bell.is_some() {
        // Sleep until a doorbell (a notice), console input, or the next
        // membership check; the node's lock is held, which only the window
        // fault handler tries (never while idle).
        crate::arch::interrupts::rearm_irq(serial::IRQ);
        let deadline = *last_check + check_ns + 1;
        // Console input, or a serial interrupt taken since the re-arm (the
        // line is masked again: loop and re-arm).
        let mut console = || serial::rx_ready() || crate::arch::interrupts::irq_fired(serial::IRQ);
        let _ = with(|n| Ok(n.idle_sleep(deadline, &mut console)));
    } else {
        cpu::wait_for_interrupt();
    }
}

/// The heap's high mark reached a new step of 2 MiB past 4 MiB (since the
/// last check): log it, so a workload that nearly exhausted the heap shows
/// in the node's log even when it did not fail.
fn heap_high_log() {
    static LOGGED_MIB: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
    let mib = crate::mm::heap_high() >> 20;
    let logged = LOGGED_MIB.load(core::sync::atomic::Ordering::Relaxed);
    if mib < 4 || mib < logged + 2 {
        return;
    }
    LOGGED_MIB.store(mib, core::sync::atomic::Ordering::Relaxed);
    log::info!(
        "memory: heap high mark {mib} MiB of {} MiB (now {} KiB in use)",
        crate::mm::heap_bytes() >> 20,
        crate::mm::heap_in_use() >> 10
    );
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

fn shutdown(id: u32) -> ! {
    let _ = with(|n| {
        n.shutdown();
        Ok(())
    });
    log::info!("node {id} shut down");
    crate::arch::exit(crate::arch::ExitCode::Success)
}
