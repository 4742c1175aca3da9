//! Memory management: physical frames, the kernel heap, and identity
//! mappings for device memory above the boot map.

pub mod frames;
pub mod paging;

use core::sync::atomic::{AtomicUsize, Ordering};

use linked_list_allocator::LockedHeap;

#[global_allocator]
static HEAP: LockedHeap = LockedHeap::empty();

/// The smallest kernel heap (a node keeps 8 bytes per frame of its pool
/// there, see `--shm-mb` in qemu-run.sh).
pub const HEAP_BYTES: usize = 24 << 20;
/// The largest kernel heap.
pub const HEAP_MAX_BYTES: usize = 64 << 20;

/// Bytes given to the kernel heap (set once by [`init`]).
static HEAP_SIZE: AtomicUsize = AtomicUsize::new(0);

/// The heap's size for `ram` bytes of usable RAM: half of it, at least
/// [`HEAP_BYTES`] and at most [`HEAP_MAX_BYTES`], in whole frames.
fn heap_size_for(ram: usize) -> usize {
    let frame = frames::FRAME as usize;
    (ram / 2).clamp(HEAP_BYTES, HEAP_MAX_BYTES) / frame * frame
}

/// Set up frames and the heap from the boot memory map.
pub fn init(regions: &[crate::arch::pvh::Region]) -> Result<(), &'static str> {
    frames::init(regions);
    let ram = frames::usage().1 as usize * frames::FRAME as usize;
    let bytes = heap_size_for(ram);
    let pages = bytes / frames::FRAME as usize;
    let base = frames::alloc_contiguous(pages).ok_or("not enough memory for the kernel heap")?;
    // SAFETY: `base..base+bytes` is RAM that the frame allocator handed out
    // exclusively for the heap; it is identity mapped and unused.
    unsafe { HEAP.lock().init(base as *mut u8, bytes) };
    HEAP_SIZE.store(bytes, Ordering::Relaxed);
    Ok(())
}

/// Bytes of the kernel heap (0 before [`init`]).
pub fn heap_bytes() -> usize {
    HEAP_SIZE.load(Ordering::Relaxed)
}

/// Heap bytes in use and free.
pub fn heap_usage() -> (usize, usize) {
    let h = HEAP.lock();
    (h.used(), h.free())
}
