//! virtio-blk through `virtio-drivers`: the directory's backing disk, as a
//! [`flatfs::BlockDevice`].

use core::ptr::NonNull;

use alloc::boxed::Box;
use flatfs::{BlockDevice, IoError, BLOCK_SIZE};

use virtio_drivers::device::blk::{BlkReq, BlkResp, RespStatus, VirtIOBlk};
use virtio_drivers::transport::pci::bus::PciRoot;
use virtio_drivers::transport::pci::{virtio_device_type, PciTransport};
use virtio_drivers::transport::DeviceType;
use virtio_drivers::{BufferDirection, Hal, PhysAddr};

use super::pci::{self, PortCam};
use crate::mm::{frames, paging};

/// DMA and address translation for `virtio-drivers`: all RAM and device
/// memory is identity mapped, so physical and virtual addresses coincide.
pub struct KernelHal;

// SAFETY: `dma_alloc` returns zeroed, page-aligned, physically contiguous
// memory that stays allocated until `dma_dealloc`; all addresses are
// identity mapped, so the translations below are exact.
unsafe impl Hal for KernelHal {
    fn dma_alloc(pages: usize, _dir: BufferDirection) -> (PhysAddr, NonNull<u8>) {
        let pa = frames::alloc_contiguous(pages).expect("out of memory for virtio DMA");
        (
            pa,
            NonNull::new(pa as *mut u8).expect("frame 0 is never allocated"),
        )
    }

    unsafe fn dma_dealloc(pa: PhysAddr, _va: NonNull<u8>, pages: usize) -> i32 {
        // SAFETY: the driver gives back what `dma_alloc` handed out.
        unsafe { frames::free(pa, pages) };
        0
    }

    unsafe fn mmio_phys_to_virt(pa: PhysAddr, size: usize) -> NonNull<u8> {
        let va = paging::identity_map(pa, size as u64, true).expect("cannot map virtio MMIO");
        NonNull::new(va).expect("MMIO at address 0")
    }

    unsafe fn share(buffer: NonNull<[u8]>, _dir: BufferDirection) -> PhysAddr {
        buffer.as_ptr() as *mut u8 as u64
    }

    unsafe fn unshare(_pa: PhysAddr, _buffer: NonNull<[u8]>, _dir: BufferDirection) {}
}

/// How long one block request may take before the disk is given up.
const IO_TIMEOUT_NS: u64 = 30_000_000_000;
/// Tickless: halt this long between polls of the used ring.
const POLL_HALT_NS: u64 = 20_000;

/// The directory's disk.
pub struct VirtioDisk {
    blk: VirtIOBlk<KernelHal, PciTransport>,
    blocks: u64,
    /// The request in flight's buffers (owned here, so a request that
    /// timed out can never write into a caller's memory).
    io: Box<Io>,
    /// A request timed out: its buffers still belong to the device, so
    /// every later request fails.
    dead: bool,
}

#[derive(Default)]
struct Io {
    req: BlkReq,
    resp: BlkResp,
    buf: Block,
}

#[repr(align(512))]
struct Block([u8; BLOCK_SIZE]);

impl Default for Block {
    fn default() -> Self {
        Block([0; BLOCK_SIZE])
    }
}

impl VirtioDisk {
    /// Wait for the one request in flight (`token`). The disk's interrupts
    /// are off, so this polls the used ring; tickless (doorbells), it
    /// halts `POLL_HALT_NS` between polls: the QEMU threads that carry the
    /// I/O (its main loop and AIO workers) share the directory's pinned
    /// host CPU, and a vCPU spinning without any interrupt kept them off it
    /// for milliseconds. With the tick it spins, as before.
    fn wait(&mut self, token: u16) -> Result<(), IoError> {
        let start = crate::arch::time::now_ns();
        let were_on = x86_64::instructions::interrupts::are_enabled();
        loop {
            if self.blk.peek_used() == Some(token) {
                return Ok(());
            }
            if crate::arch::time::now_ns() - start > IO_TIMEOUT_NS {
                self.dead = true;
                log::error!(
                    "virtio-blk: a request did not complete within {} s: the disk is given up",
                    IO_TIMEOUT_NS / 1_000_000_000
                );
                return Err(IoError);
            }
            if crate::arch::timer::tickless() {
                crate::arch::timer::halt_for(POLL_HALT_NS);
                if !were_on {
                    x86_64::instructions::interrupts::disable();
                }
            } else {
                core::hint::spin_loop();
            }
        }
    }
}

/// Find and initialise the first virtio-blk device, if any.
pub fn probe_blk(root: &mut PciRoot<PortCam>) -> Result<Option<VirtioDisk>, &'static str> {
    let Some((df, _)) = pci::devices(root)
        .into_iter()
        .find(|(_, i)| virtio_device_type(i) == Some(DeviceType::Block))
    else {
        return Ok(None);
    };
    pci::enable(root, df);
    let t = PciTransport::new::<KernelHal, _>(root, df).map_err(|_| "virtio-blk transport")?;
    let mut blk = VirtIOBlk::<KernelHal, _>::new(t).map_err(|_| "virtio-blk init")?;
    // The driver polls for completions. Without this, every completion
    // would leave the (level-triggered, possibly shared) INTx line
    // asserted, and a NIC on the same line could no longer wake us.
    blk.disable_interrupts();
    blk.ack_interrupt();
    let sectors = blk.capacity();
    log::info!(
        "virtio-blk at {df} (irq {}): {} MiB",
        pci::interrupt_line(df),
        sectors / 2048
    );
    Ok(Some(VirtioDisk {
        blk,
        blocks: sectors / (BLOCK_SIZE as u64 / 512),
        io: Box::default(),
        dead: false,
    }))
}

impl BlockDevice for VirtioDisk {
    fn block_count(&self) -> u64 {
        self.blocks
    }

    fn read_block(&mut self, lba: u64, buf: &mut [u8; BLOCK_SIZE]) -> Result<(), IoError> {
        if lba >= self.blocks || self.dead {
            return Err(IoError);
        }
        let sector = lba as usize * (BLOCK_SIZE / 512);
        let io = &mut *self.io;
        // SAFETY: `io`'s buffers are owned by this disk and touched by
        // nothing else until the request completed: `wait` returns Ok only
        // once the device used it, and after a timeout the disk is dead
        // (the buffers are never used again).
        let token = unsafe {
            self.blk
                .read_blocks_nb(sector, &mut io.req, &mut io.buf.0, &mut io.resp)
        }
        .map_err(|_| IoError)?;
        self.wait(token)?;
        let io = &mut *self.io;
        // SAFETY: the same buffers as `read_blocks_nb` got, and the request
        // completed (its token is the used ring's head).
        unsafe {
            self.blk
                .complete_read_blocks(token, &io.req, &mut io.buf.0, &mut io.resp)
        }
        .map_err(|_| IoError)?;
        if io.resp.status() != RespStatus::OK {
            return Err(IoError);
        }
        buf.copy_from_slice(&io.buf.0);
        Ok(())
    }

    fn write_block(&mut self, lba: u64, buf: &[u8; BLOCK_SIZE]) -> Result<(), IoError> {
        if lba >= self.blocks || self.dead {
            return Err(IoError);
        }
        let sector = lba as usize * (BLOCK_SIZE / 512);
        let io = &mut *self.io;
        io.buf.0.copy_from_slice(buf);
        // SAFETY: see `read_block`.
        let token = unsafe {
            self.blk
                .write_blocks_nb(sector, &mut io.req, &io.buf.0, &mut io.resp)
        }
        .map_err(|_| IoError)?;
        self.wait(token)?;
        let io = &mut *self.io;
        // SAFETY: see `read_block`.
        unsafe {
            self.blk
                .complete_write_blocks(token, &io.req, &io.buf.0, &mut io.resp)
        }
        .map_err(|_| IoError)?;
        if io.resp.status() != RespStatus::OK {
            return Err(IoError);
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), IoError> {
        if self.dead {
            return Err(IoError);
        }
        // virtio-drivers 0.13 has no non-blocking flush: it polls.
        self.blk.flush().map_err(|_| IoError)
    }
}
