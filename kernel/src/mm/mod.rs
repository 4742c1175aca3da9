//! Memory management: physical frames, the kernel heap, and identity
//! mappings for device memory above the boot map.

pub mod frames;
pub mod paging;

use linked_list_allocator::LockedHeap;

#[global_allocator]
static HEAP: LockedHeap = LockedHeap::empty();

/// Bytes given to the kernel heap.
pub const HEAP_BYTES: usize = 24 << 20;

/// Set up frames and the heap from the boot memory map.
pub fn init(regions: &[crate::arch::pvh::Region]) -> Result<(), &'static str> {
    frames::init(regions);
    let pages = HEAP_BYTES / frames::FRAME as usize;
    let base = frames::alloc_contiguous(pages).ok_or("not enough memory for the kernel heap")?;
    // SAFETY: `base..base+HEAP_BYTES` is RAM that the frame allocator handed
    // out exclusively for the heap; it is identity mapped and unused.
    unsafe { HEAP.lock().init(base as *mut u8, HEAP_BYTES) };
    Ok(())
}

/// Heap bytes in use and free.
pub fn heap_usage() -> (usize, usize) {
    let h = HEAP.lock();
    (h.used(), h.free())
}
