//! virtio-blk: the directory's backing disk, as a [`flatfs::BlockDevice`]
//! with asynchronous reads and writes, over our own request queue
//! ([`super::blkdev`], 64 entries on `virtio-drivers`' transport and
//! queue types).
//!
//! Every request goes out without waiting and is matched to its buffers by
//! the token when the used ring hands it back, whatever the order:
//! asynchronous reads and writes (the directory's page fills and
//! write-backs, up to the queue's requests less one) and the synchronous
//! requests of the file system, which wait for their own token and set
//! aside the completions they meet. The
//! completion is found by polling the used ring (the directory's loop does,
//! on its dedicated core). With doorbells, the device's completion
//! interrupt (MSI-X, [`super::virtio_irq`]) is bound, and turned on only
//! while the CPU halts for the disk ([`VirtioDisk::arm_wakeup`]): a busy
//! directory polls and takes no interrupts, an idle one waiting for a fill
//! sleeps until the device answers. Without it, a waiting directory polls
//! every 20 us.
//!
//! Device model (`--storage`): QEMU's throttling caps the rate; this
//! driver adds the profile's access latency to every request (a request
//! is not reported done before `latency` after it was submitted), so a
//! device serving one request at a time is slow and one with many in
//! flight overlaps them, as a real SSD with internal parallelism does.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use flatfs::{BlockDevice, IoError, ReadDone, BLOCK_SIZE};
use virtio_drivers::transport::pci::bus::PciRoot;
use virtio_drivers::transport::pci::{virtio_device_type, PciTransport};
use virtio_drivers::transport::DeviceType;

use super::blkdev::{self, BlkDev, Kind, Request};
use super::hal::KernelHal;
use super::pci::{self, PortCam};
use crate::arch::{cpu, time};

/// What the driver remembers of a request the device holds.
struct InFlight {
    /// `Some`: an asynchronous request with this id; `None`: a
    /// synchronous request somebody waits for.
    id: Option<u64>,
    /// Given up (timed out): the completion is dropped when it comes.
    abandoned: bool,
    submitted: u64,
}

/// A request the device finished, kept until its modelled latency passed.
struct Finished {
    due: u64,
    result: Result<Box<[u8; BLOCK_SIZE]>, IoError>,
}

/// A request gets this long (seconds) before it is reported failed.
const TIMEOUT_S: u64 = 5;

/// The directory's disk.
pub struct VirtioDisk {
    dev: BlkDev,
    blocks: u64,
    /// By virtio token.
    in_flight: BTreeMap<u16, InFlight>,
    /// Finished asynchronous requests by id; synchronous requests by token
    /// (`u64::MAX - token`).
    finished: BTreeMap<u64, Finished>,
    lat_cycles: u64,
    timeout_cycles: u64,
    /// Requests the queue holds at once.
    queue: usize,
    /// The completion interrupt is bound ([`super::virtio_irq`]).
    irq: bool,
    /// TSC ticks per second.
    hz: u64,
}

/// Find and initialise the first virtio-blk device, if any; every request
/// is reported done no earlier than `latency_us` after its submission.
/// `irq`: bind its completion interrupt (needs the local APIC).
pub fn probe_blk(
    root: &mut PciRoot<PortCam>,
    latency_us: u64,
    irq: bool,
) -> Result<Option<VirtioDisk>, &'static str> {
    let Some((df, _)) = pci::devices(root)
        .into_iter()
        .find(|(_, i)| virtio_device_type(i) == Some(DeviceType::Block))
    else {
        return Ok(None);
    };
    pci::enable(root, df);
    let t = PciTransport::new::<KernelHal, _>(root, df).map_err(|_| "virtio-blk transport")?;
    let mut dev = BlkDev::new(t)?;
    // The driver polls for completions. Without this, every completion
    // would leave the (level-triggered, possibly shared) INTx line
    // asserted, and a NIC on the same line could no longer wake us.
    dev.quiet();
    let sectors = dev.sectors();
    let queue = dev.max_requests();
    let irq = irq
        && match super::virtio_irq::bind(root, df) {
            Ok(()) => true,
            Err(e) => {
                log::warn!("virtio-blk: completion interrupt off ({e}); polling the used ring");
                false
            }
        };
    log::info!(
        "virtio-blk at {df}: {} MiB, queue of {} ({queue} requests), access latency {latency_us} us, completions by {}",
        sectors / 2048,
        blkdev::QUEUE_SIZE,
        if irq {
            alloc::format!(
                "interrupt (MSI-X vector {})",
                crate::arch::interrupts::DISK_VECTOR
            )
        } else {
            alloc::string::String::from("polling")
        }
    );
    let hz = time::tsc_hz();
    Ok(Some(VirtioDisk {
        dev,
        blocks: sectors / (BLOCK_SIZE as u64 / 512),
        in_flight: BTreeMap::new(),
        finished: BTreeMap::new(),
        lat_cycles: latency_us * hz / 1_000_000,
        timeout_cycles: TIMEOUT_S * hz,
        queue,
        irq,
        hz,
    }))
}

fn sync_key(token: u16) -> u64 {
    u64::MAX - u64::from(token)
}

/// Is `k` a key of `finished` that belongs to an asynchronous request?
fn is_async_key(k: u64) -> bool {
    k < u64::MAX - u64::from(u16::MAX)
}

impl VirtioDisk {
    /// Can a CPU halt until the disk finishes a request (the completion
    /// interrupt is bound)?
    pub fn wakes(&self) -> bool {
        self.irq
    }

    /// Before halting for the disk, with interrupts off: turn completion
    /// interrupts on. `None`: do not halt (a completion already waits in
    /// the used ring, or a finished request's modelled latency passed);
    /// else the halt's deadline on [`time::now_ns`] (when the next
    /// finished request's modelled latency ends; `u64::MAX`: none). Call
    /// [`VirtioDisk::disarm_wakeup`] after the halt.
    pub fn arm_wakeup(&mut self) -> Option<u64> {
        self.dev.set_notify(true);
        // The device reads the flag after writing the used index; we read
        // the index after writing the flag: one of us sees the other.
        cpu::full_fence();
        if self.dev.has_used() {
            return None;
        }
        let Some(due) = self.finished.values().map(|f| f.due).min() else {
            return Some(u64::MAX);
        };
        let now = cpu::rdtsc();
        if due <= now {
            return None;
        }
        let wait_ns = ((due - now) as u128 * 1_000_000_000 / self.hz.max(1) as u128) as u64;
        Some(time::now_ns().saturating_add(wait_ns))
    }

    /// After the halt: completion interrupts off again (a busy CPU polls).
    pub fn disarm_wakeup(&mut self) {
        self.dev.set_notify(false);
    }

    /// Wait a little for the device: until its completion interrupt (or
    /// [`WAKE_SAFETY_NS`]) when bound, else [`io_pause`]. The interrupt
    /// flag is left as it was.
    fn pause(&mut self) {
        if !self.irq {
            io_pause();
            return;
        }
        let were_on = x86_64::instructions::interrupts::are_enabled();
        x86_64::instructions::interrupts::disable();
        match self.arm_wakeup() {
            // With the tick (no one-shot timer) a halt for a request the
            // device finished but whose modelled latency runs on would
            // last until the next tick (1 ms): poll for it instead.
            Some(deadline) if deadline != u64::MAX && !crate::arch::timer::tickless() => {}
            Some(deadline) => crate::arch::timer::halt_until(
                deadline.min(time::now_ns().saturating_add(WAKE_SAFETY_NS)),
            ),
            None => {}
        }
        self.disarm_wakeup();
        if were_on {
            x86_64::instructions::interrupts::enable();
        } else {
            x86_64::instructions::interrupts::disable();
        }
    }

    /// Submit one request; its token.
    fn submit(&mut self, id: Option<u64>, r: Request) -> Result<u16, IoError> {
        let token = self.dev.submit(r).map_err(|_| IoError)?;
        self.in_flight.insert(
            token,
            InFlight {
                id,
                abandoned: false,
                submitted: cpu::rdtsc(),
            },
        );
        Ok(token)
    }

    /// A read or write of block `lba`.
    fn block_request(
        &mut self,
        id: Option<u64>,
        lba: u64,
        write: Option<Box<[u8; BLOCK_SIZE]>>,
    ) -> Result<u16, IoError> {
        if lba >= self.blocks {
            return Err(IoError);
        }
        let r = match write {
            Some(b) => Request::new(Kind::Write, lba, b),
            None => Request::new(Kind::Read, lba, Box::new([0u8; BLOCK_SIZE])),
        };
        self.submit(id, r)
    }

    /// Take every request the device finished off the used ring; requests
    /// in flight past the timeout are reported failed and abandoned.
    fn reap(&mut self) {
        while let Some((token, r)) = self.dev.pop() {
            let Some(f) = self.in_flight.remove(&token) else {
                continue;
            };
            if f.abandoned {
                continue;
            }
            let key = f.id.unwrap_or(sync_key(token));
            let ok = r.ok();
            self.finished.insert(
                key,
                Finished {
                    due: f.submitted + self.lat_cycles,
                    result: if ok { Ok(r.buf) } else { Err(IoError) },
                },
            );
        }
        let now = cpu::rdtsc();
        for (&token, f) in self.in_flight.iter_mut() {
            if !f.abandoned && now.wrapping_sub(f.submitted) > self.timeout_cycles {
                log::error!("virtio-blk: request (token {token}) timed out after {TIMEOUT_S} s");
                f.abandoned = true;
                let key = f.id.unwrap_or(sync_key(token));
                self.finished.insert(
                    key,
                    Finished {
                        due: 0,
                        result: Err(IoError),
                    },
                );
            }
        }
    }

    /// One synchronous request: submit and wait for exactly its answer
    /// (and its modelled latency), setting others' completions aside.
    fn sync(&mut self, make: impl Fn() -> Request) -> Result<Box<[u8; BLOCK_SIZE]>, IoError> {
        let start = cpu::rdtsc();
        while self.dev.held() >= self.queue {
            self.reap();
            if cpu::rdtsc().wrapping_sub(start) > self.timeout_cycles {
                return Err(IoError);
            }
            self.pause();
        }
        let token = self.submit(None, make())?;
        loop {
            self.reap();
            if let Some(f) = self.finished.get(&sync_key(token)) {
                if cpu::rdtsc() >= f.due {
                    return self
                        .finished
                        .remove(&sync_key(token))
                        .ok_or(IoError)?
                        .result;
                }
            }
            self.pause();
        }
    }
}

/// Tickless (doorbells): halt this long between polls of the used ring.
const IO_POLL_HALT_NS: u64 = 20_000;

/// Longest halt for the disk with its interrupt bound: a safety net that
/// also lets `reap` time requests out; a completion ends the halt sooner.
pub const WAKE_SAFETY_NS: u64 = 1_000_000;

/// Between two polls of the used ring (the disk's interrupt not bound).
/// Tickless, halt `IO_POLL_HALT_NS`: QEMU's threads that carry the I/O
/// (its main loop and AIO workers) share the directory's pinned host CPU,
/// and a vCPU spinning without any interrupt kept them off it for
/// milliseconds. With the tick, spin as before. The interrupt flag is
/// left as it was.
fn io_pause() {
    if crate::arch::timer::tickless() {
        let were_on = x86_64::instructions::interrupts::are_enabled();
        crate::arch::timer::halt_for(IO_POLL_HALT_NS);
        if !were_on {
            x86_64::instructions::interrupts::disable();
        }
    } else {
        core::hint::spin_loop();
    }
}

impl BlockDevice for VirtioDisk {
    fn block_count(&self) -> u64 {
        self.blocks
    }

    fn read_block(&mut self, lba: u64, buf: &mut [u8; BLOCK_SIZE]) -> Result<(), IoError> {
        if lba >= self.blocks {
            return Err(IoError);
        }
        let b = self.sync(|| Request::new(Kind::Read, lba, Box::new([0u8; BLOCK_SIZE])))?;
        buf.copy_from_slice(&b[..]);
        Ok(())
    }

    fn write_block(&mut self, lba: u64, buf: &[u8; BLOCK_SIZE]) -> Result<(), IoError> {
        if lba >= self.blocks {
            return Err(IoError);
        }
        self.sync(|| Request::new(Kind::Write, lba, Box::new(*buf)))
            .map(|_| ())
    }

    fn flush(&mut self) -> Result<(), IoError> {
        // Requests complete in any order: the flush covers the writes that
        // completed before it, which is what the caller waited for.
        self.sync(|| Request::new(Kind::Flush, 0, Box::new([0u8; BLOCK_SIZE])))
            .map(|_| ())
    }

    fn queue_depth(&self) -> usize {
        // One slot stays free for the file system's synchronous requests.
        self.queue.saturating_sub(1)
    }

    fn submit_flush(&mut self, id: u64) -> Result<(), IoError> {
        // Outside the reads' and writes' accounting: keep the slot of the
        // file system's synchronous requests free.
        if self.dev.held() + 1 >= self.queue {
            return Err(IoError);
        }
        // As `flush`: it covers the writes that completed before it.
        self.submit(
            Some(id),
            Request::new(Kind::Flush, 0, Box::new([0u8; BLOCK_SIZE])),
        )
        .map(|_| ())
    }

    fn submit_read(&mut self, id: u64, lba: u64) -> Result<(), IoError> {
        if self.dev.held() >= self.queue {
            return Err(IoError);
        }
        self.block_request(Some(id), lba, None).map(|_| ())
    }

    fn submit_write(
        &mut self,
        id: u64,
        lba: u64,
        buf: Box<[u8; BLOCK_SIZE]>,
    ) -> Result<(), IoError> {
        if self.dev.held() >= self.queue {
            return Err(IoError);
        }
        self.block_request(Some(id), lba, Some(buf)).map(|_| ())
    }

    fn max_write_run(&self) -> usize {
        self.dev.max_write_run()
    }

    fn submit_write_run(
        &mut self,
        id: u64,
        lba: u64,
        bufs: Vec<Box<[u8; BLOCK_SIZE]>>,
    ) -> Result<(), IoError> {
        let end = lba.checked_add(bufs.len() as u64).ok_or(IoError)?;
        if self.dev.held() >= self.queue || end > self.blocks || bufs.len() > self.max_write_run() {
            return Err(IoError);
        }
        let r = Request::write_run(lba, bufs).ok_or(IoError)?;
        self.submit(Some(id), r).map(|_| ())
    }

    fn poll_reads(&mut self, out: &mut Vec<ReadDone>) {
        self.reap();
        let now = cpu::rdtsc();
        let due: Vec<u64> = self
            .finished
            .iter()
            .filter(|(&k, f)| is_async_key(k) && f.due <= now)
            .map(|(&k, _)| k)
            .collect();
        for id in due {
            if let Some(f) = self.finished.remove(&id) {
                out.push(ReadDone {
                    id,
                    result: f.result,
                });
            }
        }
    }

    fn wait_reads(&mut self, out: &mut Vec<ReadDone>) {
        loop {
            self.poll_reads(out);
            let pending = self
                .in_flight
                .values()
                .any(|f| f.id.is_some() && !f.abandoned)
                || self.finished.keys().any(|&k| is_async_key(k));
            // `reap` fails requests past the timeout, so this ends.
            if !out.is_empty() || !pending {
                return;
            }
            self.pause();
        }
    }
}
