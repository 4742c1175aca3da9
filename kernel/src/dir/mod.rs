//! The directory role: formats the shared region, mounts the disk and runs
//! the serving loop of [`dirsvc::server::Directory`] on this instance's
//! (dedicated) core.
//!
//! Idle policy: the loop spins while requests arrive or disk requests
//! (page fills, writes) are in flight (their completions are polled from
//! the used ring in every pass) and for `dir_spin_us` after that, then halts between timer
//! ticks (1 ms) so an idle directory does not burn a host core. With
//! doorbells (when every member rings it) it halts `dir_bell_spin_us`
//! after its last work, tickless: it wakes on vector 0 and on its own
//! timer (the heartbeat beat, [`BEAT_PERIOD_NS`]), and rings the sleeping
//! nodes it published responses or notices for. Tickless, a pass that
//! found nothing to do while disk requests are in flight halts instead of
//! spinning (QEMU's threads that carry the disk I/O share this instance's
//! pinned host CPU): until the disk's completion interrupt or a doorbell
//! when both are on ([`sleep_for_disk`]), else for [`DISK_POLL_HALT_NS`].

use dirsvc::server::{Config, Directory};
use fabric::config::BootConfig;
use fabric::layout::{Header, Layout};
use fabric::shm::{RawShm, SharedMem};
use flatfs::Fs;

use alloc::vec::Vec;

use crate::arch::{cpu, time};
use crate::drivers::net::Nic;
use crate::drivers::virtio::{VirtioDisk, WAKE_SAFETY_NS};
use crate::net::DirLink;

mod bell;
mod console;
mod disklog;
mod events;

use bell::DirBell;
use console::DirConsole;
use disklog::DiskLog;
use events::log_events;

/// Tickless (doorbells): the directory wakes at least this often to beat
/// its heartbeat and sweep membership while idle (nodes presume it failed
/// after `nodepath::wait::DIR_SILENT_NS`, 1.5 s, of silence, or after
/// `hb_timeout_ms` if shorter: see [`beat_period_ns`]).
pub const BEAT_PERIOD_NS: u64 = nodepath::wait::DIR_SILENT_NS / 6;

/// The tickless beat period for a heartbeat timeout of `hb_timeout_ms`:
/// six beats per silence a node tolerates.
pub fn beat_period_ns(hb_timeout_ms: u64) -> u64 {
    BEAT_PERIOD_NS.min(hb_timeout_ms.saturating_mul(1_000_000) / 6)
}

/// Tickless, without the disk's completion interrupt (`disk_irq=0`, or a
/// member that does not ring us): how long a pass that found only disk
/// requests in flight halts.
pub const DISK_POLL_HALT_NS: u64 = 20_000;

/// Serve forever (`nics`: the `net` mode's links, one per node).
pub fn run(cfg: &BootConfig, shm: RawShm, disk: Option<VirtioDisk>, nics: Vec<Nic>) -> ! {
    // The disk first: nodes wait for the formatted region (up to their
    // boot wait), but once it is there they wait for the directory's
    // heartbeat, which a long mount (a large disk under `--dilation`)
    // would hold back past their timeout.
    let fs = mount(disk);
    let layout = format_region(cfg, &shm);
    let dir = start_directory(cfg, &shm, layout, fs);
    let links = net_links(cfg, nics);
    let mut l = ServeLoop::new(cfg, &shm, layout, dir, links);
    loop {
        l.pass();
        // While spinning there is deliberately no PAUSE: under TCG it
        // leaves the translated-code loop (about a microsecond each).
    }
}

/// Lay out and format the shared region (zeroing the doorbell table, which
/// is published again).
fn format_region(cfg: &BootConfig, shm: &RawShm) -> Layout {
    let layout = match Layout::compute(shm.size(), cfg.nodes) {
        Ok(l) => l,
        Err(e) => crate::klog::fatal(format_args!("cannot lay out the shared region: {e}")),
    };
    layout.format(shm, 0);
    if let Some(d) = crate::drivers::ivshmem::doorbell() {
        d.publish(); // formatting zeroed the doorbell table
    }
    log::info!(
        "shared region formatted: {} MiB, {} nodes, {} frames per node pool, rings of {} slots",
        shm.size() >> 20,
        layout.max_nodes,
        layout.pool_frames,
        layout.ring_slots
    );
    layout
}

/// Mount the disk; without one, or with one that does not mount, the
/// directory serves every request 'directory unavailable'.
fn mount(disk: Option<VirtioDisk>) -> Option<Fs<VirtioDisk>> {
    let Some(d) = disk else {
        log::error!("directory: mount failed: no virtio-blk disk attached");
        return None;
    };
    match Fs::mount(d) {
        Ok(fs) => {
            let s = fs.stats();
            log::info!(
                "mounted disk: {}/{} inodes, {}/{} blocks used",
                s.inodes_used,
                s.inodes_total,
                s.blocks_used,
                s.blocks_total
            );
            Some(fs)
        }
        Err(e) => {
            log::error!("directory: mount failed: {e}");
            log::error!("the disk was not written; every request will get 'directory unavailable'");
            None
        }
    }
}

/// The directory over the mounted disk, configured from the boot options.
fn start_directory(
    cfg: &BootConfig,
    shm: &RawShm,
    layout: Layout,
    fs: Option<Fs<VirtioDisk>>,
) -> Directory<VirtioDisk> {
    let storage = fs.is_some();
    let dir = Directory::new(
        shm,
        layout,
        fs,
        Config {
            heartbeat_timeout_ns: cfg.hb_timeout_ms * 1_000_000,
            fill_depth: cfg.fill_depth as usize,
            clock: time::now_ns,
            fence: cpu::full_fence,
            lazy_inv: cfg.lazy_inv,
            fencing: cfg.fence,
            append_lease_ns: dirsvc::server::append_lease_ns(cfg.hb_timeout_ms * 1_000_000),
            daxfs: cfg.mode == fabric::config::Mode::Daxfs,
            // Strong mode's writers are the only ones that ask.
            delegation: cfg.delegation && cfg.mode == fabric::config::Mode::Strong,
            ..Config::default()
        },
    );
    log::info!(
        "directory ready: serving {} nodes ({}), heartbeat timeout {} ms, fencing {}, page fills in flight {}",
        cfg.nodes,
        if storage { "storage up" } else { "NO STORAGE" },
        cfg.hb_timeout_ms,
        if cfg.fence {
            "on (a failed node's frames are reused only once it is fenced)"
        } else {
            "OFF (fence=0: a failed node's frames are reused at once)"
        },
        match dir.fill_depth() {
            0 => alloc::string::String::from("1 (synchronous)"),
            n => alloc::format!("up to {n}"),
        }
    );
    dir
}

/// What one pass of the serving loop found.
struct Found {
    poll: dirsvc::server::Poll,
    net_served: usize,
    /// Membership events in this pass.
    events: bool,
    disk_busy: bool,
}

/// The serving loop's state: the directory, its links and doorbell, and
/// the TSC deadlines of its periodic chores (the hot loop compares raw TSC
/// values; nanoseconds only for logs).
struct ServeLoop<'a> {
    nodes: u32,
    shm: &'a RawShm,
    h: Header<'a, RawShm>,
    dir: Directory<VirtioDisk>,
    links: Vec<DirLink>,
    bell: Option<DirBell>,
    disk_log: DiskLog,
    console: DirConsole,
    spin_cycles: u64,
    bell_spin_cycles: u64,
    member_cycles: u64,
    beat_cycles: u64,
    last_work: u64,
    last_member: u64,
    last_beat: u64,
    last_ping: u64,
}

impl<'a> ServeLoop<'a> {
    fn new(
        cfg: &BootConfig,
        shm: &'a RawShm,
        layout: Layout,
        dir: Directory<VirtioDisk>,
        links: Vec<DirLink>,
    ) -> Self {
        let h = Header::new(shm, layout);
        let hz = time::tsc_hz();
        ServeLoop {
            nodes: cfg.nodes,
            shm,
            last_ping: h.ping(),
            h,
            dir,
            links,
            bell: crate::drivers::ivshmem::doorbell().map(|d| DirBell::new(d, layout)),
            disk_log: DiskLog::default(),
            console: DirConsole::new(crate::arch::timer::tickless()),
            spin_cycles: cfg.dir_spin_us * hz / 1_000_000,
            bell_spin_cycles: cfg.dir_bell_spin_us * hz / 1_000_000,
            member_cycles: hz / 20_000, // membership sweep every 50 us
            beat_cycles: hz / 1000,     // directory heartbeat every 1 ms
            last_work: cpu::rdtsc(),
            last_member: 0,
            last_beat: 0,
        }
    }

    /// One pass: the ping word, the heartbeat, the membership sweep, the
    /// rings and links; then halt if the pass found only disk requests in
    /// flight, or nothing for long enough.
    fn pass(&mut self) {
        if let Some(b) = self.bell.as_mut() {
            b.echo(self.nodes); // doorbell round trips (`doorbell_selftest`)
        }
        if self.echo_ping() {
            return;
        }
        let now = cpu::rdtsc();
        let found = self.serve(now);
        let idle_pass =
            found.poll.served == 0 && found.poll.completed == 0 && found.net_served == 0;
        let worked = found.poll.served > 0
            || found.net_served > 0
            || found.events
            || !found.poll.events.is_empty()
            || found.disk_busy;
        if worked {
            self.last_work = now;
            if found.disk_busy && idle_pass {
                self.halt_for_disk();
            }
        } else {
            self.idle(now);
        }
    }

    /// `bench pingpong`: echo the ping word (the bare cost of one
    /// cache-line round trip between two guests, no protocol). True if it
    /// moved.
    fn echo_ping(&mut self) -> bool {
        let ping = self.h.ping();
        if ping == self.last_ping {
            return false;
        }
        self.h.set_pong(ping);
        self.last_ping = ping;
        self.last_work = cpu::rdtsc();
        true
    }

    /// The periodic chores, the rings and the links.
    fn serve(&mut self, now: u64) -> Found {
        if now - self.last_beat >= self.beat_cycles {
            self.h.beat_dir();
            self.last_beat = now;
            // The heap's high marks: once per beat, off the 50 us sweep.
            self.disk_log.heap(&self.dir);
        }
        let mut events = false;
        if now - self.last_member >= self.member_cycles {
            self.last_member = now;
            self.console.poll();
            let p = self.dir.membership(self.shm, time::now_ns());
            events = !p.events.is_empty();
            log_events(&p.events);
            if let Some(b) = self.bell.as_ref() {
                b.deliver(&p);
            }
        }
        let poll = self.dir.serve(self.shm);
        log_events(&poll.events);
        if let Some(b) = self.bell.as_mut() {
            b.deliver(&poll);
            b.settle(false);
            b.note_quiet(self.dir.quiet_stats());
        }
        let net_served = self.serve_links();
        // Fills and writes in flight count as work: their completions are
        // found by polling the disk's used ring in `serve`.
        let disk_busy = poll.completed > 0 || self.dir.io_pending() > 0;
        if disk_busy {
            self.disk_log
                .note(&self.dir.disk_queue_stats(), &self.dir.write_stats());
            self.disk_log.flushed(self.dir.async_flushes());
            self.disk_log.net_later(self.dir.net_answered_later());
        }
        Found {
            poll,
            net_served,
            events,
            disk_busy,
        }
    }

    /// `net` mode: hand over the answers whose disk I/O completed in this
    /// pass, then serve each link while its node is up in this epoch.
    fn serve_links(&mut self) -> usize {
        let (dir, shm, h) = (&mut self.dir, self.shm, &self.h);
        for a in dir.take_net_answers() {
            if let Some(l) = self.links.iter_mut().find(|l| l.node() == a.node) {
                l.answer(a.token, a.frame);
            }
        }
        let mut served = 0;
        for l in self.links.iter_mut() {
            let node = l.node();
            l.set_member(dir.is_member(node).then(|| h.node_epoch(node)));
            let accept = !dir.write_backlogged();
            served += l.serve(accept, |node, token, f| dir.serve_net(shm, node, f, token));
        }
        served
    }

    /// Only disk requests in flight: halt, so QEMU's I/O threads, which
    /// share our pinned host CPU, run.
    fn halt_for_disk(&mut self) {
        if crate::arch::timer::tickless() {
            // With the disk's completion interrupt and every member
            // ringing us, until the disk or a node wakes us; else for
            // `DISK_POLL_HALT_NS`.
            let ring = self.links.is_empty()
                && self
                    .bell
                    .as_ref()
                    .is_some_and(|b| b.members_ring(&self.h, self.nodes));
            let wakes = self.dir.device_mut().is_some_and(|d| d.wakes());
            match self.bell.as_mut().filter(|_| ring && wakes) {
                Some(b) => {
                    let (h, last_ping) = (&self.h, self.last_ping);
                    let p = sleep_for_disk(&mut self.dir, self.shm, b, &mut self.disk_log, || {
                        h.ping() != last_ping
                    });
                    if let Some(p) = p {
                        b.deliver(&p);
                    }
                }
                None => {
                    if let Some(b) = self.bell.as_ref() {
                        b.settle(true);
                    }
                    crate::arch::timer::halt_for(DISK_POLL_HALT_NS)
                }
            }
        } else if !self.links.is_empty() {
            // `net` mode keeps the tick (no one-shot timer): halt until the
            // disk's completion interrupt, a frame or the tick, so QEMU's
            // threads that carry the I/O get our host CPU (spinning here
            // cost ~3 ms per disk read). Not on the rings without
            // doorbells: nothing would wake us for a node's request before
            // the tick.
            halt_for_disk_ticking(&mut self.dir, &mut self.links);
        }
    }

    /// A pass that found nothing: sleep on the doorbell, or halt until the
    /// next tick or a NIC's interrupt, once idle long enough.
    fn idle(&mut self, now: u64) {
        let quiet = now - self.last_work;
        if self.bell.is_some() && self.links.is_empty() {
            // Doorbells: when every member rings us for its requests, halt
            // `dir_bell_spin_us` after the last work (acks and follow-up
            // requests that come sooner need no wakeup), else after
            // `dir_spin_us` as without doorbells; vector 0 or the tick
            // wakes us.
            let ring = self
                .bell
                .as_ref()
                .is_some_and(|b| b.members_ring(&self.h, self.nodes));
            if quiet > self.spin_cycles || (quiet > self.bell_spin_cycles && ring) {
                self.sleep_on_bell();
            }
        } else if quiet > self.spin_cycles || !self.links.is_empty() {
            self.halt_idle();
        }
    }

    /// Sleep until a doorbell or another interrupt, unless a pass run with
    /// interrupts off finds work first.
    fn sleep_on_bell(&mut self) {
        let Some(b) = self.bell.as_mut() else {
            return;
        };
        let (dir, shm, h, last_ping) = (&mut self.dir, self.shm, &self.h, self.last_ping);
        let mut found = None;
        b.sleep(u64::MAX, || {
            let p = dir.serve(shm);
            log_events(&p.events);
            let work = p.served > 0 || !p.events.is_empty() || h.ping() != last_ping;
            found = Some(p);
            work
        });
        if let Some(p) = found {
            if p.served > 0 || !p.events.is_empty() {
                self.last_work = cpu::rdtsc();
            }
            b.deliver(&p);
        }
    }

    /// Idle: halt until the next tick or a NIC's interrupt. In net mode at
    /// once, with every link's wakeup armed first: a network server sleeps
    /// on its NICs, and spinning would keep this instance's QEMU I/O
    /// thread, which carries the frames, off the core.
    fn halt_idle(&mut self) {
        x86_64::instructions::interrupts::disable();
        let mut busy = false;
        for l in self.links.iter_mut() {
            busy |= l.arm();
        }
        if busy {
            x86_64::instructions::interrupts::enable();
        } else {
            if let Some(b) = self.bell.as_ref() {
                b.settle(true);
            }
            cpu::wait_for_interrupt();
        }
    }
}

/// Only disk requests in flight and every member rings us: sleep until
/// the disk's completion interrupt, a doorbell, the end of a finished
/// request's modelled latency, or `WAKE_SAFETY_NS`, unless a pass finds
/// work first (`ping`: the ping word moved). The pass's result, if one ran.
fn sleep_for_disk(
    dir: &mut Directory<VirtioDisk>,
    shm: &RawShm,
    b: &mut DirBell,
    log: &mut DiskLog,
    ping: impl Fn() -> bool,
) -> Option<dirsvc::server::Poll> {
    x86_64::instructions::interrupts::disable();
    let mut found = None;
    if let Some(deadline) = dir.device_mut().and_then(|d| d.arm_wakeup()) {
        let deadline = deadline.min(time::now_ns().saturating_add(WAKE_SAFETY_NS));
        let irqs = crate::arch::interrupts::disk_irqs();
        b.sleep(deadline, || {
            let p = dir.serve(shm);
            log_events(&p.events);
            let work = p.served > 0 || p.completed > 0 || !p.events.is_empty() || ping();
            found = Some(p);
            work
        });
        log.slept(crate::arch::interrupts::disk_irqs() != irqs);
    }
    if let Some(d) = dir.device_mut() {
        d.disarm_wakeup();
    }
    x86_64::instructions::interrupts::enable();
    found
}

/// With the tick (`net` mode) and only disk requests in flight: halt
/// until the disk's completion interrupt, a link's frame or the next tick,
/// while the device has finished nothing. A request it finished that waits
/// out its modelled latency is polled for instead (the tick is too coarse
/// for it); without the disk's interrupt, spin as before.
fn halt_for_disk_ticking(dir: &mut Directory<VirtioDisk>, links: &mut [DirLink]) {
    let Some(d) = dir.device_mut().filter(|d| d.wakes()) else {
        return;
    };
    x86_64::instructions::interrupts::disable();
    let idle = d.arm_wakeup() == Some(u64::MAX);
    let mut busy = false;
    for l in links.iter_mut() {
        busy |= l.arm();
    }
    if idle && !busy {
        cpu::wait_for_interrupt();
    } else {
        x86_64::instructions::interrupts::enable();
    }
    if let Some(d) = dir.device_mut() {
        d.disarm_wakeup();
    }
}

/// `net` mode: one link per node, told apart by the MAC `qemu-run.sh`
/// assigned (`52:54:00:0c:00:<node>`).
fn net_links(cfg: &BootConfig, nics: Vec<Nic>) -> Vec<DirLink> {
    if cfg.mode != fabric::config::Mode::Net {
        return Vec::new();
    }
    let mut links = Vec::new();
    for nic in nics {
        match nic.link_id() {
            Some((0, node)) if (1..=cfg.nodes).contains(&node) => {
                links.push(DirLink::new(nic, node));
            }
            _ => {
                let m = nic.mac();
                log::warn!(
                    "net mode: ignoring a NIC with unexpected MAC {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
                    m[0], m[1], m[2], m[3], m[4], m[5]
                );
            }
        }
    }
    log::info!(
        "net mode: file server listening on port {} on {} of {} node links",
        fabric::netwire::PORT,
        links.len(),
        cfg.nodes
    );
    links
}
