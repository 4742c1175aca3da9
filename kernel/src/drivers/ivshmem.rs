//! The ivshmem device (1af4:1110): BAR2 is the shared region, in both
//! flavours. `ivshmem-doorbell` also has BAR0 registers (IntrMask 0,
//! IntrStatus 4, IVPosition 8, Doorbell 12: `(peer << 16) | vector`, 4-byte
//! accesses) and an MSI-X capability (table in BAR1); it signals only
//! through MSI-X. `ivshmem-plain` has no MSI-X capability: that is how the
//! two are told apart.
//!
//! Doorbell mode ([`init_doorbell`]): the local APIC is enabled, MSI-X entry
//! `v` delivers vector `MSI_BASE + v`, and every delivery is counted and
//! wakes a `hlt`. The instance's peer id (IVPosition) is published in the
//! region's doorbell table ([`fabric::doorbell`]) from the timer tick,
//! again whenever it is missing (the directory formats the region after
//! boot, and again when it restarts).

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use fabric::doorbell::deferred::{Deferred, Publish};
use fabric::doorbell::{self as db, PeerMap, Ring};
use fabric::shm::RawShm;
use spin::{Mutex, Once};
use virtio_drivers::transport::pci::bus::{DeviceFunction, PciRoot};

use super::pci::{self, Msix, PortCam};
use crate::arch::{apic, cpu, interrupts, time};

const VENDOR: u16 = 0x1af4;
const DEVICE: u16 = 0x1110;

const REG_IVPOSITION: usize = 8;
const REG_DOORBELL: usize = 12;

/// A deferred suppression check fences once this old (see
/// [`Doorbell::ring_deferred`]): longer than an awake peer takes to pick
/// work up (a `bench ring` round trip is about 2 us), shorter than a
/// node's spin before it sleeps (`bell_spin_us`, 20 us).
const DEFER_US: u64 = 4;

/// The device found by [`probe`]: its address and whether it has MSI-X
/// (the doorbell flavour).
static FOUND: Once<(DeviceFunction, bool, u64, usize)> = Once::new();

/// Find the device, enable it, map BAR2 and wrap it.
pub fn probe(root: &mut PciRoot<PortCam>) -> Result<RawShm, &'static str> {
    let (df, _) = pci::devices(root)
        .into_iter()
        .find(|(_, i)| i.vendor_id == VENDOR && i.device_id == DEVICE)
        .ok_or("no ivshmem device (1af4:1110) on PCI bus 0")?;
    pci::enable(root, df);
    let bar = root
        .bar_info(df, 2)
        .map_err(|_| "ivshmem BAR2 unreadable")?
        .ok_or("ivshmem BAR2 missing")?;
    let (pa, size) = bar
        .memory_address_size()
        .ok_or("ivshmem BAR2 is not a memory BAR")?;
    if pa == 0 || size == 0 {
        return Err("ivshmem BAR2 not assigned by the firmware");
    }
    let msix = pci::find_capability(df, pci::CAP_MSIX).is_some();
    log::info!(
        "ivshmem{} at {df}: BAR2 {pa:#x}, {} MiB",
        if msix { "-doorbell" } else { "-plain" },
        size >> 20
    );
    let va = crate::mm::paging::identity_map(pa, size, false)?;
    FOUND.call_once(|| (df, msix, va as u64, size as usize));
    // SAFETY: BAR2 of the ivshmem device is `size` bytes of shared memory,
    // identity mapped just above and never referenced by Rust references;
    // it stays mapped for the kernel's lifetime. The BAR is 4 KiB aligned.
    let shm = unsafe { RawShm::new(va, size as usize) };
    prefault(&shm);
    Ok(shm)
}

/// Largest region [`prefault`] touches: beyond it the boot would pay
/// seconds (an 8 GiB region took 27 s per instance here) and the host
/// would back the whole region with memory at once.
const PREFAULT_MAX: usize = 1 << 30;

/// Touch every 4 KiB page of the region once (a read), so this QEMU
/// process's host page tables map all of it before the first miss: QEMU
/// maps the server's shared-memory fd lazily, and the first access to a
/// page in each process is a host page fault (about 7 us here, measured
/// on a page fill's copy into a fresh frame: 9.5 us against 2.0 us for
/// the same copy again). Regions above [`PREFAULT_MAX`] are left lazy.
fn prefault(shm: &RawShm) {
    use fabric::shm::SharedMem;
    if shm.size() > PREFAULT_MAX {
        log::info!(
            "shared region not prefaulted ({} MiB > {} MiB): the first touch of each page is a host page fault",
            shm.size() >> 20,
            PREFAULT_MAX >> 20
        );
        return;
    }
    let t0 = crate::arch::time::now_ns();
    let mut sum = 0u64;
    for off in (0..shm.size()).step_by(4096) {
        sum = sum.wrapping_add(shm.load_u64(off));
    }
    core::hint::black_box(sum);
    log::info!(
        "shared region prefaulted: {} pages in {} ms",
        shm.size() / 4096,
        (crate::arch::time::now_ns() - t0) / 1_000_000
    );
}

/// Why a sleep ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// The re-check found work: the CPU did not halt.
    Work,
    /// A doorbell interrupt arrived.
    Doorbell,
    /// Another interrupt (the tick, a NIC) ended the halt.
    Other,
    /// The deadline had passed.
    Deadline,
}

/// Doorbell counters (`cache stats`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Stats {
    /// Interrupts received per vector (0 request, 1 notify/ack, 2 response, 3 spare).
    pub received: [u64; 4],
    /// Doorbells this instance rang.
    pub rung: u64,
    /// Publications that rang nothing at once because the target was
    /// awake (with [`Doorbell::ring_deferred`]: looked awake, the fenced
    /// check owed).
    pub suppressed: u64,
    /// Owed checks that came due and fenced (the rest were dropped, their
    /// work taken first, with no fence).
    pub fenced_checks: u64,
    /// Doorbells rung by a check that came due: the target had gone to
    /// sleep meanwhile (also in `rung`).
    pub late_rings: u64,
    /// Rings impossible: the target has no peer id published.
    pub no_peer: u64,
    /// Halts in `sleep_until_event`.
    pub sleeps: u64,
}

/// The doorbell of this instance.
pub struct Doorbell {
    regs: u64,
    shm: RawShm,
    me: u32,
    peer: u16,
    vectors: u16,
    received: [AtomicU64; 4],
    rung: AtomicU64,
    suppressed: AtomicU64,
    fenced_checks: AtomicU64,
    late_rings: AtomicU64,
    no_peer: AtomicU64,
    sleeps: AtomicU64,
    /// Suppression checks owed ([`Doorbell::ring_deferred`]); TSC clock.
    deferred: Mutex<Deferred>,
    /// `deferred`'s next due time (TSC), read without the lock by spinning
    /// callers of [`Doorbell::settle`].
    next_due: AtomicU64,
    /// A node rang the directory after its (re)publication.
    announced: AtomicBool,
    /// This node rings the directory for every request (the flag is
    /// published again whenever the directory formatted the region).
    rings: AtomicBool,
}

static DOORBELL: Once<Doorbell> = Once::new();

/// The doorbell, once [`init_doorbell`] succeeded (`None`: doorbells off,
/// everything falls back to polling on the tick).
pub fn doorbell() -> Option<&'static Doorbell> {
    DOORBELL.get()
}

/// Turn doorbell mode on: needs the ivshmem-doorbell device found by
/// [`probe`]. `instance` is this instance's index in the doorbell table
/// (0 = directory, K = node K). Logs `doorbell: peer id P, vectors N, msix on`.
pub fn init_doorbell(
    root: &mut PciRoot<PortCam>,
    instance: u32,
) -> Result<&'static Doorbell, &'static str> {
    if let Some(d) = DOORBELL.get() {
        return Ok(d);
    }
    let &(df, has_msix, shm_va, shm_len) = FOUND.get().ok_or("no ivshmem device probed")?;
    if !has_msix {
        return Err("the ivshmem device is ivshmem-plain (no MSI-X): start the cluster with the ivshmem server and -device ivshmem-doorbell");
    }
    if instance >= db::ENTRIES {
        return Err("instance index out of range");
    }
    let bar0 = root
        .bar_info(df, 0)
        .map_err(|_| "ivshmem BAR0 unreadable")?
        .ok_or("ivshmem BAR0 missing")?;
    let (pa, size) = bar0
        .memory_address_size()
        .ok_or("ivshmem BAR0 is not a memory BAR")?;
    if pa == 0 || size < 16 {
        return Err("ivshmem BAR0 not assigned by the firmware");
    }
    let regs = crate::mm::paging::identity_map(pa, size, true)? as u64;
    let lapic = apic::init()?;
    let mut msix = Msix::probe(root, df)?;
    let vectors = msix.entries.min(interrupts::MSI_COUNT as u16);
    if vectors < db::VECTORS_USED {
        return Err("ivshmem-doorbell has fewer than 3 vectors (use vectors=4)");
    }
    let addr = apic::msi_address();
    for v in 0..vectors {
        msix.set(v, addr, interrupts::MSI_BASE + v as u8)?;
    }
    interrupts::set_msi_handler(on_msi);
    msix.enable();
    if !msix.enabled() {
        return Err("MSI-X did not turn on");
    }
    let pos = read_reg(regs, REG_IVPOSITION);
    if pos > db::MAX_PEER {
        return Err("IVPosition out of range (no ivshmem server?)");
    }
    // SAFETY: the same BAR2 mapping `probe` wrapped (identity mapped for
    // the kernel's lifetime, never referenced by Rust references); this
    // second handle only makes atomic accesses to the header's doorbell
    // table, like every other handle.
    let shm = unsafe { RawShm::new(shm_va as *mut u8, shm_len) };
    let d = DOORBELL.call_once(|| Doorbell {
        regs,
        shm,
        me: instance,
        peer: pos as u16,
        vectors,
        received: Default::default(),
        rung: AtomicU64::new(0),
        suppressed: AtomicU64::new(0),
        fenced_checks: AtomicU64::new(0),
        late_rings: AtomicU64::new(0),
        no_peer: AtomicU64::new(0),
        sleeps: AtomicU64::new(0),
        deferred: Mutex::new(Deferred::new(time::tsc_hz() * DEFER_US / 1_000_000)),
        next_due: AtomicU64::new(u64::MAX),
        announced: AtomicBool::new(false),
        rings: AtomicBool::new(false),
    });
    interrupts::set_driver_tick_hook(on_tick);
    log::info!(
        "doorbell: peer id {}, vectors {}, msix on (local APIC {lapic:#x} id {}, vectors {}..{})",
        d.peer,
        d.vectors,
        apic::id(),
        interrupts::MSI_BASE,
        interrupts::MSI_BASE + vectors as u8 - 1
    );
    d.publish();
    Ok(d)
}

fn read_reg(regs: u64, off: usize) -> u32 {
    // SAFETY: `regs` is BAR0 of the ivshmem-doorbell device (at least 16
    // bytes, checked), identity mapped uncached; its registers take 4-byte
    // accesses at 4-byte aligned offsets.
    unsafe { core::ptr::read_volatile((regs as usize + off) as *const u32) }
}

fn on_msi(index: u8) {
    fabric::trace::record(fabric::trace::Kind::BellTaken, 0, 0, index, 0);
    if let Some(d) = DOORBELL.get() {
        if let Some(c) = d.received.get(index as usize) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn on_tick() {
    if let Some(d) = DOORBELL.get() {
        // Tickless: every housekeeping beat (a few per second).
        if crate::arch::timer::tickless() || interrupts::ticks().is_multiple_of(8) {
            d.publish();
        }
    }
}

impl Doorbell {
    fn map(&self) -> PeerMap<'_, RawShm> {
        PeerMap::new(&self.shm)
    }

    /// Publish our peer id if the region is formatted and does not carry it
    /// (first time, or after the directory formatted the region again). A
    /// node then rings the directory once (vector 0) so it notices at once.
    pub fn publish(&self) {
        let m = self.map();
        if !m.formatted() {
            return;
        }
        if m.peer_of(self.me) != Some(self.peer) {
            if m.publish(self.me, self.peer as u32).is_err() {
                return;
            }
            self.announced.store(false, Ordering::Relaxed);
        }
        let rings = self.rings.load(Ordering::Relaxed);
        if rings && m.flags(self.me) & db::FLAG_RINGS_DIRECTORY == 0 {
            m.set_flags(self.me, db::FLAG_RINGS_DIRECTORY);
        }
        if self.me != db::DIRECTORY && !self.announced.load(Ordering::Relaxed) {
            if let Some(p) = m.peer_of(db::DIRECTORY) {
                if self.ring(p, db::VEC_REQUEST).is_ok() {
                    self.announced.store(true, Ordering::Relaxed);
                }
            }
        }
    }
}

// The node side of the doorbells (wired into the node data path) and
// `cache stats` use the rest; the directory uses only part of it.
#[allow(dead_code)]
impl Doorbell {
    /// The shared region (the handle this driver reads the table with).
    pub fn region(&self) -> &RawShm {
        &self.shm
    }

    /// Our peer id (IVPosition).
    pub fn peer(&self) -> u16 {
        self.peer
    }

    /// MSI-X vectors in use.
    pub fn vectors(&self) -> u16 {
        self.vectors
    }

    /// Our index in the doorbell table (0 = directory, K = node K).
    pub fn instance(&self) -> u32 {
        self.me
    }

    /// Ring `peer` on `vector` (no suppression, no look-up).
    pub fn ring(&self, peer: u16, vector: u16) -> Result<(), &'static str> {
        if vector >= self.vectors {
            return Err("doorbell vector out of range");
        }
        let v = (peer as u32) << 16 | vector as u32;
        // SAFETY: see `read_reg`: Doorbell is the 4-byte register at 12.
        unsafe { core::ptr::write_volatile((self.regs as usize + REG_DOORBELL) as *mut u32, v) };
        self.rung.fetch_add(1, Ordering::Relaxed);
        fabric::trace::record(
            fabric::trace::Kind::BellRung,
            0,
            0,
            vector as u8,
            peer.into(),
        );
        Ok(())
    }

    /// After publishing work for `instance`: ring it on `vector` if it
    /// sleeps (its sleeping word is set), with its current peer id from the
    /// region (bounds-checked). Returns what was done.
    pub fn ring_instance(&self, instance: u32, vector: u16) -> Ring {
        let r = db::ring_decision(&self.map(), instance, cpu::full_fence);
        match r {
            Ring::Peer(p) => {
                if self.ring(p, vector).is_err() {
                    self.no_peer.fetch_add(1, Ordering::Relaxed);
                    return Ring::NoPeer;
                }
            }
            Ring::Suppressed => {
                self.suppressed.fetch_add(1, Ordering::Relaxed);
            }
            Ring::NoPeer => {
                self.no_peer.fetch_add(1, Ordering::Relaxed);
            }
        }
        r
    }

    /// After publishing work for `instance` on `vector`, without a fence:
    /// ring now if its sleeping word is set, else owe the fenced check
    /// until [`Doorbell::settle`] finds the work taken (no fence at all) or
    /// the check due (`fabric::doorbell::deferred`). Whoever calls this
    /// must settle while it waits and before it halts
    /// ([`Doorbell::sleep_until_event`] settles everything first).
    pub fn ring_deferred(&self, instance: u32, vector: u16) {
        let p = {
            let mut d = self.deferred.lock();
            let p = d.publish(&self.map(), instance, vector, cpu::rdtsc());
            self.next_due.store(d.next_due(), Ordering::Relaxed);
            p
        };
        match p {
            Publish::Ring(peer) => {
                if self.ring(peer, vector).is_err() {
                    self.no_peer.fetch_add(1, Ordering::Relaxed);
                }
            }
            Publish::Owed => {
                self.suppressed.fetch_add(1, Ordering::Relaxed);
            }
            Publish::NoPeer => {
                self.no_peer.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Settle the owed checks ([`Doorbell::ring_deferred`]) that are due
    /// (all of them if `force`): `pending(instance)` says whether the
    /// instance still has work of ours it has not taken (when unsure:
    /// true).
    pub fn settle(&self, force: bool, pending: impl FnMut(u32) -> bool) {
        let due = self.next_due.load(Ordering::Relaxed);
        if due == u64::MAX || (!force && cpu::rdtsc() < due) {
            return; // nothing owed, or nothing due yet
        }
        let mut d = self.deferred.lock();
        let s = d.settle(
            &self.map(),
            cpu::rdtsc(),
            force,
            pending,
            cpu::full_fence,
            |peer, vector| {
                if self.ring(peer, vector).is_err() {
                    self.no_peer.fetch_add(1, Ordering::Relaxed);
                }
            },
        );
        self.next_due.store(d.next_due(), Ordering::Relaxed);
        drop(d);
        if s.fenced {
            self.fenced_checks.fetch_add(1, Ordering::Relaxed);
        }
        if s.rung > 0 {
            self.late_rings.fetch_add(s.rung as u64, Ordering::Relaxed);
        }
        if s.no_peer > 0 {
            self.no_peer.fetch_add(s.no_peer as u64, Ordering::Relaxed);
        }
    }

    /// Wake node `id` on `vector` (1 notify/ack, 2 response) if it sleeps.
    pub fn ring_node(&self, id: u32, vector: u16) -> Ring {
        if id == db::DIRECTORY || id >= db::ENTRIES {
            self.no_peer.fetch_add(1, Ordering::Relaxed);
            return Ring::NoPeer;
        }
        self.ring_instance(id, vector)
    }

    /// Tell the directory whether this node rings it for every request
    /// (then an idle directory may halt at once instead of spinning).
    pub fn set_rings_directory(&self, on: bool) {
        self.rings.store(on, Ordering::Relaxed);
        let f = if on { db::FLAG_RINGS_DIRECTORY } else { 0 };
        self.map().set_flags(self.me, f);
    }

    /// Does `instance` ring the directory for every request?
    pub fn rings_directory(&self, instance: u32) -> bool {
        self.map().flags(instance) & db::FLAG_RINGS_DIRECTORY != 0
    }

    /// Sleep until a doorbell or any other interrupt (tickless: the APIC
    /// timer armed for `deadline_ns` or the next housekeeping beat),
    /// unless `has_work` (checked after the sleeping word is set, with
    /// interrupts off) finds work, or `deadline_ns` (`time::now_ns`) passed.
    /// Halts at most once; callers loop. `quiet`: sleep with
    /// `SLEEP_QUIET` (the directory may take DIR_INVs published meanwhile
    /// as acknowledged); the caller must then service its notices before
    /// it touches a shared page again (the word is cleared and fenced
    /// here before returning).
    pub fn sleep_until_event(
        &self,
        deadline_ns: u64,
        quiet: bool,
        has_work: impl FnOnce() -> bool,
    ) -> Wake {
        // Never halt owing a check: the peer may be asleep on our work.
        self.settle(true, |_| true);
        x86_64::instructions::interrupts::disable();
        let m = self.map();
        if !db::prepare_sleep(&m, self.me, quiet, cpu::full_fence, has_work) {
            x86_64::instructions::interrupts::enable();
            return Wake::Work;
        }
        if time::now_ns() >= deadline_ns {
            db::finish_sleep(&m, self.me, cpu::full_fence);
            x86_64::instructions::interrupts::enable();
            return Wake::Deadline;
        }
        let before = self.received_total();
        self.sleeps.fetch_add(1, Ordering::Relaxed);
        // sti; hlt with the timer armed for the deadline (tickless):
        // returns after the handler of whatever interrupt came.
        fabric::trace::record(fabric::trace::Kind::Sleep, 0, 0, 0, 0);
        crate::arch::timer::halt_until(deadline_ns);
        fabric::trace::record(fabric::trace::Kind::Wake, 0, 0, 0, 0);
        db::finish_sleep(&m, self.me, cpu::full_fence);
        if self.received_total() != before {
            Wake::Doorbell
        } else {
            Wake::Other
        }
    }

    /// Node, boot self-test: `rounds` doorbell round trips to the directory
    /// (set our echo word, ring its vector 1, spin until it echoes; the
    /// directory halts between rounds when idle). Returns the round trips in
    /// ns, or why it could not run (every wait has a deadline).
    pub fn echo_rounds(&self, rounds: u32) -> Result<alloc::vec::Vec<u64>, &'static str> {
        if self.me == db::DIRECTORY {
            return Err("the directory does not ping itself");
        }
        let m = self.map();
        let start = time::now_ns();
        let dir = loop {
            if let Some(p) = m.peer_of(db::DIRECTORY).filter(|_| m.formatted()) {
                break p;
            }
            if time::now_ns() - start > 10_000_000_000 {
                return Err("no directory peer id in the region within 10 s");
            }
            cpu::pause();
        };
        let mut seq = m.echo_answer(self.me);
        let mut out = alloc::vec::Vec::with_capacity(rounds as usize);
        for _ in 0..rounds {
            seq = seq.wrapping_add(1);
            // Let the directory go idle (and halt) between rounds.
            let idle = time::now_ns() + 200_000;
            while time::now_ns() < idle {
                cpu::pause();
            }
            m.set_echo_request(self.me, seq);
            let t0 = cpu::rdtsc();
            self.ring(dir, db::VEC_NOTIFY)?;
            let deadline = time::now_ns() + 1_000_000_000;
            while m.echo_answer(self.me) != seq {
                if time::now_ns() > deadline {
                    return Err("the directory did not echo within 1 s");
                }
            }
            out.push(time::cycles_to_ns(cpu::rdtsc() - t0));
        }
        Ok(out)
    }

    /// Directory: answer every node's pending echo (after a vector-1
    /// doorbell). Returns how many were answered.
    pub fn answer_echoes(&self, nodes: u32) -> u32 {
        let m = self.map();
        let mut n = 0;
        for k in 1..=nodes.min(db::ENTRIES - 1) {
            let r = m.echo_request(k);
            if r != m.echo_answer(k) {
                m.set_echo_answer(k, r);
                n += 1;
            }
        }
        n
    }

    /// Interrupts received on all vectors.
    pub fn received_total(&self) -> u64 {
        self.received
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }

    /// Interrupts received on `vector`.
    pub fn received(&self, vector: u16) -> u64 {
        self.received
            .get(vector as usize)
            .map(|c| c.load(Ordering::Relaxed))
            .unwrap_or(0)
    }

    /// All counters.
    pub fn stats(&self) -> Stats {
        let mut s = Stats::default();
        for (o, c) in s.received.iter_mut().zip(&self.received) {
            *o = c.load(Ordering::Relaxed);
        }
        s.rung = self.rung.load(Ordering::Relaxed);
        s.suppressed = self.suppressed.load(Ordering::Relaxed);
        s.fenced_checks = self.fenced_checks.load(Ordering::Relaxed);
        s.late_rings = self.late_rings.load(Ordering::Relaxed);
        s.no_peer = self.no_peer.load(Ordering::Relaxed);
        s.sleeps = self.sleeps.load(Ordering::Relaxed);
        s
    }
}
