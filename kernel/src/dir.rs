//! The directory role: formats the shared region, mounts the disk and runs
//! the serving loop of [`dirsvc::server::Directory`] on this instance's
//! (dedicated) core.
//!
//! Idle policy: the loop spins while requests arrive and for
//! `dir_spin_us` after the last one, then halts between timer ticks (1 ms)
//! so an idle directory does not burn a host core.

use dirsvc::config::BootConfig;
use dirsvc::fs::Fs;
use dirsvc::layout::{Header, Layout};
use dirsvc::server::{Config, Directory, Event};
use dirsvc::shm::{RawShm, SharedMem};

use crate::arch::{cpu, time};
use crate::drivers::virtio::VirtioDisk;

/// Serve forever.
pub fn run(cfg: &BootConfig, shm: RawShm, disk: Option<VirtioDisk>) -> ! {
    let layout = match Layout::compute(shm.size(), cfg.nodes) {
        Ok(l) => l,
        Err(e) => crate::klog::fatal(format_args!("cannot lay out the shared region: {e}")),
    };
    layout.format(&shm, 0);
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
            ..Config::default()
        },
    );
    log::info!(
        "directory ready: serving {} nodes ({}), heartbeat timeout {} ms",
        cfg.nodes,
        if storage { "storage up" } else { "NO STORAGE" },
        cfg.hb_timeout_ms
    );
    let h = Header::new(&shm, layout);
    // The hot loop compares raw TSC values; nanoseconds only for logs.
    let hz = time::tsc_hz();
    let spin_cycles = cfg.dir_spin_us * hz / 1_000_000;
    let member_cycles = hz / 20_000; // membership sweep every 50 us
    let beat_cycles = hz / 1000; // directory heartbeat every 1 ms
    let mut last_work = cpu::rdtsc();
    let mut last_member = 0u64;
    let mut last_beat = 0u64;
    let mut last_ping = h.ping();
    loop {
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
        }
        let p = dir.serve(&shm);
        log_events(&p.events);
        if p.served > 0 || events || !p.events.is_empty() {
            last_work = now;
        } else if now - last_work > spin_cycles {
            cpu::wait_for_interrupt();
        }
        // While spinning there is deliberately no PAUSE: under TCG it
        // leaves the translated-code loop (about a microsecond each).
    }
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
            Event::BadRequest { node, error } => {
                log::warn!("node {node}: malformed request ({error}), answered 'invalid'")
            }
        }
    }
}
