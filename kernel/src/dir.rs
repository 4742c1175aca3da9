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

use dirsvc::server::{Config, Directory, Event};
use fabric::config::BootConfig;
use fabric::layout::{Header, Layout};
use fabric::shm::{RawShm, SharedMem};
use flatfs::Fs;

use alloc::vec::Vec;

use crate::arch::{cpu, time};
use crate::drivers::net::Nic;
use crate::drivers::virtio::{VirtioDisk, WAKE_SAFETY_NS};
use crate::net::DirLink;

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
    let layout = match Layout::compute(shm.size(), cfg.nodes) {
        Ok(l) => l,
        Err(e) => crate::klog::fatal(format_args!("cannot lay out the shared region: {e}")),
    };
    layout.format(&shm, 0);
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
    let fs = match disk {
        None => {
            log::error!("directory: mount failed: no virtio-blk disk attached");
            None
        }
        Some(d) => match Fs::mount(d) {
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
                log::error!(
                    "the disk was not written; every request will get 'directory unavailable'"
                );
                None
            }
        },
    };
    let storage = fs.is_some();
    let mut dir = Directory::new(
        &shm,
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
    let mut links = net_links(cfg, nics);
    let h = Header::new(&shm, layout);
    // The hot loop compares raw TSC values; nanoseconds only for logs.
    let hz = time::tsc_hz();
    let spin_cycles = cfg.dir_spin_us * hz / 1_000_000;
    let bell_spin_cycles = cfg.dir_bell_spin_us * hz / 1_000_000;
    let member_cycles = hz / 20_000; // membership sweep every 50 us
    let beat_cycles = hz / 1000; // directory heartbeat every 1 ms
    let mut last_work = cpu::rdtsc();
    let mut last_member = 0u64;
    let mut last_beat = 0u64;
    let mut last_ping = h.ping();
    let mut bell = crate::drivers::ivshmem::doorbell().map(|d| DirBell::new(d, layout));
    let mut disk_log = DiskLog::default();
    loop {
        if let Some(b) = bell.as_mut() {
            b.echo(cfg.nodes); // doorbell round trips (`doorbell_selftest`)
        }
        // `bench pingpong`: echo the ping word (the bare cost of one
        // cache-line round trip between two guests, no protocol).
        let ping = h.ping();
        if ping != last_ping {
            h.set_pong(ping);
            last_ping = ping;
            last_work = cpu::rdtsc();
            continue;
        }
        let now = cpu::rdtsc();
        if now - last_beat >= beat_cycles {
            h.beat_dir();
            last_beat = now;
        }
        let mut events = false;
        if now - last_member >= member_cycles {
            last_member = now;
            let p = dir.membership(&shm, time::now_ns());
            events = !p.events.is_empty();
            log_events(&p.events);
            if let Some(b) = bell.as_ref() {
                b.deliver(&p);
            }
        }
        let p = dir.serve(&shm);
        log_events(&p.events);
        if let Some(b) = bell.as_mut() {
            b.deliver(&p);
            b.settle(false);
            b.note_quiet(dir.quiet_stats());
        }
        let mut net_served = 0;
        for a in dir.take_net_answers() {
            // Answers whose disk I/O completed in this pass.
            if let Some(l) = links.iter_mut().find(|l| l.node() == a.node) {
                l.answer(a.token, a.frame);
            }
        }
        for l in links.iter_mut() {
            // Serve a link only while its node is up in this epoch.
            let node = l.node();
            l.set_member(dir.is_member(node).then(|| h.node_epoch(node)));
            net_served += l.serve(|node, token, f| dir.serve_net(&shm, node, f, token));
        }
        // Fills and writes in flight count as work: their completions are
        // found by polling the disk's used ring in `serve`.
        let disk_busy = p.completed > 0 || dir.io_pending() > 0;
        if disk_busy {
            disk_log.note(&dir.disk_queue_stats(), &dir.write_stats());
            disk_log.flushed(dir.async_flushes());
            disk_log.net_later(dir.net_answered_later());
        }
        if p.served > 0 || net_served > 0 || events || !p.events.is_empty() || disk_busy {
            last_work = now;
            let idle_pass = p.served == 0 && p.completed == 0 && net_served == 0;
            if disk_busy && idle_pass && crate::arch::timer::tickless() {
                // Only disk requests in flight: halt, so QEMU's I/O
                // threads, which share our pinned host CPU, run. With the
                // disk's completion interrupt and every member ringing
                // us, until the disk or a node wakes us; else for
                // `DISK_POLL_HALT_NS`.
                let ring = links.is_empty()
                    && bell.as_ref().is_some_and(|b| b.members_ring(&h, cfg.nodes));
                let wakes = dir.device_mut().is_some_and(|d| d.wakes());
                match bell.as_mut().filter(|_| ring && wakes) {
                    Some(b) => {
                        let p = sleep_for_disk(&mut dir, &shm, b, &mut disk_log, || {
                            h.ping() != last_ping
                        });
                        if let Some(p) = p {
                            b.deliver(&p);
                        }
                    }
                    None => {
                        if let Some(b) = bell.as_ref() {
                            b.settle(true);
                        }
                        crate::arch::timer::halt_for(DISK_POLL_HALT_NS)
                    }
                }
            } else if disk_busy && idle_pass && !links.is_empty() {
                // `net` mode keeps the tick (no one-shot timer): halt
                // until the disk's completion interrupt, a frame or the
                // tick, so QEMU's threads that carry the I/O get our host
                // CPU (spinning here cost ~3 ms per disk read). Not on
                // the rings without doorbells: nothing would wake us for
                // a node's request before the tick.
                halt_for_disk_ticking(&mut dir, &mut links);
            }
        } else if let Some(b) = bell.as_mut().filter(|_| links.is_empty()) {
            // Doorbells: when every member rings us for its requests,
            // halt `dir_bell_spin_us` after the last work (acks and
            // follow-up requests that come sooner need no wakeup), else
            // after `dir_spin_us` as without doorbells; vector 0 or the
            // tick wakes us.
            let quiet = now - last_work;
            if quiet > spin_cycles || (quiet > bell_spin_cycles && b.members_ring(&h, cfg.nodes)) {
                let mut found = None;
                b.sleep(u64::MAX, || {
                    let p = dir.serve(&shm);
                    log_events(&p.events);
                    let work = p.served > 0 || !p.events.is_empty() || h.ping() != last_ping;
                    found = Some(p);
                    work
                });
                if let Some(p) = found {
                    if p.served > 0 || !p.events.is_empty() {
                        last_work = cpu::rdtsc();
                    }
                    b.deliver(&p);
                }
            }
        } else if now - last_work > spin_cycles || !links.is_empty() {
            // Idle: halt until the next tick or a NIC's interrupt. In net
            // mode at once, with every link's wakeup armed first: a network
            // server sleeps on its NICs, and spinning would keep this
            // instance's QEMU I/O thread, which carries the frames, off
            // the core.
            x86_64::instructions::interrupts::disable();
            let mut busy = false;
            for l in links.iter_mut() {
                busy |= l.arm();
            }
            if busy {
                x86_64::instructions::interrupts::enable();
            } else {
                if let Some(b) = bell.as_ref() {
                    b.settle(true);
                }
                cpu::wait_for_interrupt();
            }
        }
        // While spinning there is deliberately no PAUSE: under TCG it
        // leaves the translated-code loop (about a microsecond each).
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

/// Log lines about the asynchronous disk: each new high of reads or writes
/// in flight, and the first page request answered while reads, or writes,
/// were in flight.
#[derive(Default)]
struct DiskLog {
    max_in_flight: u64,
    max_writes: u64,
    answered: bool,
    answered_writing: bool,
    /// Barrier jobs, synchronous drains and stale fills seen so far.
    barrier_jobs: u64,
    stale: u64,
    drains: u64,
    /// Halts for the disk its completion interrupt ended.
    irq_wakes: u64,
    /// Fsyncs answered after an asynchronous device flush.
    flushes: u64,
    /// `net` mode requests answered after their disk I/O.
    net_later: u64,
}

impl DiskLog {
    /// A halt for the disk ended (`by_irq`: its completion interrupt came).
    fn slept(&mut self, by_irq: bool) {
        if by_irq {
            self.irq_wakes += 1;
            if self.irq_wakes == 1 {
                log::info!("disk: completion interrupt woke the directory (first time)");
            }
        }
    }

    /// Fsyncs answered after an asynchronous flush: the first, then at
    /// each power of two.
    fn flushed(&mut self, n: u64) {
        if new_power_of_two(&mut self.flushes, n) {
            log::info!("disk: {n} fsyncs answered after a flush that did not block the loop");
        }
    }

    /// `net` mode requests answered after their disk I/O (the loop served
    /// others meanwhile): the first, then at each power of two.
    fn net_later(&mut self, n: u64) {
        if new_power_of_two(&mut self.net_later, n) {
            log::info!("net: {n} requests answered after their disk I/O (the loop served others meanwhile)");
        }
    }

    fn note(&mut self, s: &dirsvc::diskq::QueueStats, w: &dirsvc::writeq::WriteStats) {
        if s.max_in_flight > self.max_in_flight {
            self.max_in_flight = s.max_in_flight;
            log::info!("disk: {} page fills in flight", s.max_in_flight);
        }
        if w.max_in_flight > self.max_writes {
            self.max_writes = w.max_in_flight;
            log::info!("disk: {} block writes in flight", w.max_in_flight);
        }
        if !self.answered && s.answered_while_busy > 0 {
            self.answered = true;
            log::info!("disk: page request answered while page fills were in flight");
        }
        if !self.answered_writing && w.answered_while_busy > 0 {
            self.answered_writing = true;
            log::info!("disk: page request answered while writes were in flight");
        }
        if new_power_of_two(&mut self.stale, s.stale) {
            log::info!(
                "disk: {} page fills went stale (their file changed while they flew; the readers retry)",
                s.stale
            );
        }
        if new_power_of_two(&mut self.barrier_jobs, w.barrier_jobs) {
            log::info!(
                "disk: {} namespace changes or truncations queued as barrier jobs ({} waited synchronously for writes in flight)",
                w.barrier_jobs,
                w.barriers
            );
        }
        if new_power_of_two(&mut self.drains, w.barriers) {
            log::info!(
                "disk: {} requests waited synchronously for writes in flight",
                w.barriers
            );
        }
    }
}

/// A counter's log cadence: true when `now` grew past `*seen` to a power
/// of two (the first, then ever more rarely); `*seen` becomes `now`.
fn new_power_of_two(seen: &mut u64, now: u64) -> bool {
    let log = now > *seen && now.is_power_of_two();
    *seen = now;
    log
}

/// The directory's use of the doorbell: sleeping and the first-delivery
/// log lines.
struct DirBell {
    d: &'static crate::drivers::ivshmem::Doorbell,
    layout: fabric::layout::Layout,
    first_received: bool,
    first_woken: bool,
    notify_seen: u64,
    /// Invalidations taken from quiet sleepers, last logged.
    quiet_taken: u64,
}

impl DirBell {
    fn new(d: &'static crate::drivers::ivshmem::Doorbell, layout: fabric::layout::Layout) -> Self {
        DirBell {
            d,
            layout,
            first_received: false,
            first_woken: false,
            notify_seen: 0,
            quiet_taken: 0,
        }
    }

    /// Log the invalidations taken from quietly sleeping sharers: the
    /// first, then at each power of two.
    fn note_quiet(&mut self, s: dirsvc::server::QuietStats) {
        if new_power_of_two(&mut self.quiet_taken, s.taken) {
            log::info!(
                "doorbell: {} invalidations taken from quietly sleeping sharers without waking them ({} of their late acks dropped)",
                s.taken,
                s.absorbed
            );
        }
    }

    /// After a vector-1 doorbell: answer the nodes' echo words.
    fn echo(&mut self, nodes: u32) {
        let n = self.d.received(fabric::doorbell::VEC_NOTIFY);
        if n != self.notify_seen {
            self.notify_seen = n;
            self.d.answer_echoes(nodes);
        }
    }

    /// After a pass: ring every node that got a notice (vector 1) or a
    /// response (vector 2) and sleeps, checking its word without a fence
    /// (owed checks are settled by [`DirBell::settle`] once due: most nodes
    /// take their answer first); and every node admitted (vector 2).
    fn deliver(&self, p: &dirsvc::server::Poll) {
        use fabric::doorbell::{VEC_NOTIFY, VEC_RESPONSE};
        for (node, notice) in p.deliveries() {
            if (1..fabric::doorbell::ENTRIES).contains(&node) {
                self.d
                    .ring_deferred(node, if notice { VEC_NOTIFY } else { VEC_RESPONSE });
            }
        }
        for e in &p.events {
            if let Event::Joined { node, .. } = e {
                self.d.ring_node(*node, VEC_RESPONSE);
            }
        }
    }

    /// Settle the owed checks of [`DirBell::deliver`] that are due (all if
    /// `force`): a node that has taken its responses and notices needs no
    /// ring.
    fn settle(&self, force: bool) {
        let (layout, shm) = (self.layout, self.d.region());
        self.d.settle(force, |node| {
            if !layout.valid_node(node) {
                return true;
            }
            let ch = layout.channel(node);
            ch.response.unread(shm) || ch.notify.unread(shm)
        });
    }

    /// Does every member that is up ring the directory for its requests?
    fn members_ring(&self, h: &Header<'_, RawShm>, nodes: u32) -> bool {
        (1..=nodes).all(|k| {
            h.node_state(k) != Some(fabric::layout::NodeState::Up) || self.d.rings_directory(k)
        })
    }

    /// Halt until a doorbell, another interrupt or `deadline_ns`, unless
    /// `has_work` finds work.
    fn sleep(&mut self, deadline_ns: u64, has_work: impl FnOnce() -> bool) {
        use crate::drivers::ivshmem::Wake;
        self.settle(true);
        let w = self.d.sleep_until_event(deadline_ns, false, has_work);
        if !self.first_received && self.d.received_total() > 0 {
            self.first_received = true;
            let s = self.d.stats();
            log::info!(
                "doorbell: first doorbell received (per vector {:?}){}",
                s.received,
                if w == Wake::Doorbell {
                    ", it woke the directory"
                } else {
                    ""
                }
            );
        }
        if w == Wake::Doorbell && !self.first_woken {
            self.first_woken = true;
            log::info!(
                "doorbell: directory woken by a doorbell for the first time (vector 0: {})",
                self.d.received(fabric::doorbell::VEC_REQUEST)
            );
        }
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

fn log_events(events: &[Event]) {
    for e in events {
        match e {
            Event::Joined { node, epoch } => {
                log::info!("node {node} joined cluster epoch {epoch}")
            }
            Event::Failed { node, silent_ms } => {
                log::warn!("node {node} failed: heartbeat silent for {silent_ms} ms")
            }
            Event::Left { node } => log::info!("node {node} left"),
            Event::Corrupt { node, error } => {
                log::warn!("node {node} failed: corrupt ring ({error:?})")
            }
            Event::FenceAsked { node, epoch } => log::warn!(
                "node {node}: fence asked for session {epoch}; its frames and the frames it mapped stay out of use until the fencer confirms or it rejoins"
            ),
            Event::Fenced {
                node,
                after_ms,
                by_rejoin,
            } => log::info!(
                "node {node} fenced after {after_ms} ms ({}); its frames may be reused",
                if *by_rejoin {
                    "it rejoined, having dropped its mappings"
                } else {
                    "confirmed by the host's fencer"
                }
            ),
            Event::FenceOverdue { node, waited_ms } => log::error!(
                "node {node}: no fencer confirmed its fence in {waited_ms} ms (is the ivshmem server with --fence-run-dir running?); its frames and the frames it mapped stay out of use until one does or it rejoins"
            ),
            Event::BadRequest { node, error } => {
                log::warn!("node {node}: malformed request ({error}), answered 'invalid'")
            }
        }
    }
}
