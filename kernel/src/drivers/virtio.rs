//! virtio-blk through `virtio-drivers`: the directory's backing disk, as a
//! [`flatfs::BlockDevice`].

use core::ptr::NonNull;

use flatfs::{BlockDevice, IoError, BLOCK_SIZE};
use virtio_drivers::device::blk::VirtIOBlk;
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

/// The directory's disk.
pub struct VirtioDisk {
    blk: VirtIOBlk<KernelHal, PciTransport>,
    blocks: u64,
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
    }))
}

impl BlockDevice for VirtioDisk {
    fn block_count(&self) -> u64 {
        self.blocks
    }

    fn read_block(&mut self, lba: u64, buf: &mut [u8; BLOCK_SIZE]) -> Result<(), IoError> {
        if lba >= self.blocks {
            return Err(IoError);
        }
        self.blk
            .read_blocks(lba as usize * (BLOCK_SIZE / 512), buf)
            .map_err(|_| IoError)
    }

    fn write_block(&mut self, lba: u64, buf: &[u8; BLOCK_SIZE]) -> Result<(), IoError> {
        if lba >= self.blocks {
            return Err(IoError);
        }
        self.blk
            .write_blocks(lba as usize * (BLOCK_SIZE / 512), buf)
            .map_err(|_| IoError)
    }

    fn flush(&mut self) -> Result<(), IoError> {
        self.blk.flush().map_err(|_| IoError)
    }
}
