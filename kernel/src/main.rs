//! onecopy: one small kernel for every instance of the cluster. The command
//! line picks the role: `role=dir` serves the directory and the disk,
//! `role=node id=K` joins the cluster and runs the shell.
#![no_std]
#![no_main]
// Unsafe code lives in arch, mm and drivers only (each allows it below).
#![deny(unsafe_code)]

extern crate alloc;

#[allow(unsafe_code)]
mod arch;
mod dir;
#[allow(unsafe_code)]
mod drivers;
mod klog;
#[allow(unsafe_code)]
mod mm;
mod net;
mod node;

use fabric::config::{BootConfig, Role};

/// Called by the PVH trampoline (`boot/`) in 64-bit mode on the boot stack.
// The trampoline calls this symbol by name: the one unsafe attribute
// outside arch, mm and drivers.
#[allow(unsafe_code)]
#[unsafe(no_mangle)]
extern "C" fn kernel_entry(start_info: u64) -> ! {
    arch::serial::init();
    klog::init();
    arch::gdt::init();
    arch::interrupts::init_idt();
    let hz = arch::time::calibrate(20);
    let bi = match arch::pvh::parse(start_info) {
        Ok(b) => b,
        Err(e) => klog::fatal(format_args!("boot: {e}")),
    };
    if let Err(e) = mm::init(&bi.regions[..bi.nregions]) {
        klog::fatal(format_args!("boot: {e}"));
    }
    let cmdline = bi.cmdline();
    let cfg = match BootConfig::parse(&cmdline) {
        Ok(c) => c,
        Err(e) => klog::fatal(format_args!("bad command line '{cmdline}': {e}")),
    };
    log::set_max_level(cfg.log);
    klog::set_who(match cfg.role {
        Role::Dir => "dir",
        Role::Node(id) => alloc::boxed::Box::leak(alloc::format!("n{id}").into_boxed_str()),
    });
    let (used, total) = mm::frames::usage();
    log::info!(
        "onecopy kernel {} booting: {cmdline} (tsc {} MHz, {} MiB RAM, entry {:#x})",
        env!("CARGO_PKG_VERSION"),
        hz / 1_000_000,
        (total * mm::frames::FRAME) >> 20,
        onecopy_boot::entry_address()
    );
    log::debug!(
        "frames used {used}/{total}, heap {} KiB",
        mm::heap_bytes() >> 10
    );
    for w in &cfg.unknown {
        log::warn!("ignoring unknown boot option '{w}'");
    }
    // The protocol timeline stamps events with the TSC, which every
    // instance reads from the same host counter (the merge measures what
    // offset each instance's reading still has).
    fabric::trace::set_clock(arch::cpu::rdtsc);
    fabric::trace::set_enabled(cfg.trace);
    let mut root = drivers::pci::root();
    let shm = match drivers::ivshmem::probe(&mut root) {
        Ok(s) => s,
        Err(e) => klog::fatal(format_args!("shared region: {e}")),
    };
    if cfg.doorbell {
        let instance = match cfg.role {
            Role::Dir => fabric::doorbell::DIRECTORY,
            Role::Node(id) => id,
        };
        match drivers::ivshmem::init_doorbell(&mut root, instance) {
            Ok(d) if cfg.doorbell_selftest > 0 && instance != 0 => {
                doorbell_selftest(d, cfg.doorbell_selftest)
            }
            Ok(_) => {}
            Err(e) => log::warn!("doorbell: off: {e}; polling on the timer tick"),
        }
    }
    match cfg.role {
        Role::Dir => {
            let disk =
                match drivers::virtio::probe_blk(&mut root, cfg.disk_latency_us(), cfg.disk_irq) {
                    Ok(d) => d,
                    Err(e) => {
                        log::error!("virtio-blk: {e}");
                        None
                    }
                };
            let nics = if cfg.mode == fabric::config::Mode::Net {
                drivers::net::probe_all(&mut root)
            } else {
                alloc::vec::Vec::new()
            };
            // Doorbells (rings only): every node rings us, so no tick:
            // the loop wakes on doorbells and on a self-armed timer for its
            // heartbeat (net mode keeps its tick for the TCP timers).
            if drivers::ivshmem::doorbell().is_some() && cfg.mode != fabric::config::Mode::Net {
                arch::interrupts::init_tickless(|| {}, dir::beat_period_ns(cfg.hb_timeout_ms));
            } else {
                arch::interrupts::init_timer(|| {}, cfg.tick_hz);
            }
            x86_64::instructions::interrupts::enable();
            dir::run(&cfg, shm, disk, nics)
        }
        Role::Node(id) => node::run(&cfg, id, shm),
    }
}

/// `doorbell_selftest=N`: time N doorbell round trips to the directory.
fn doorbell_selftest(d: &drivers::ivshmem::Doorbell, rounds: u32) {
    match d.echo_rounds(rounds) {
        Ok(mut ns) if !ns.is_empty() => {
            ns.sort_unstable();
            let pct = |p: usize| ns[(ns.len() - 1) * p / 100];
            log::info!(
                "doorbell: {} round trips to the directory (ring vector 1, echo word): median {} ns, p99 {} ns, min {} ns, max {} ns",
                ns.len(),
                pct(50),
                pct(99),
                ns[0],
                ns[ns.len() - 1]
            );
        }
        Ok(_) => {}
        Err(e) => log::warn!("doorbell: self-test failed: {e}"),
    }
}
