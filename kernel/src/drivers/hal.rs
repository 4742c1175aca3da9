//! DMA and address translation for `virtio-drivers` (its `Hal` trait),
//! shared by the virtio-blk queue ([`super::blkdev`], [`super::virtio`])
//! and virtio-net ([`super::net`]).

use core::ptr::NonNull;

use virtio_drivers::{BufferDirection, Hal, PhysAddr};

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
