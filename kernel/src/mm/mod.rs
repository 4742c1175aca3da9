//! Memory management: physical frames, the kernel heap, and identity
//! mappings for device memory above the boot map.

pub mod frames;
pub mod paging;

use core::sync::atomic::{AtomicUsize, Ordering};

use talc::source::Manual;
use talc::TalcLock;

/// The kernel heap: talc (segregated free lists, O(1) allocation and
/// free). It replaced a linked-list first-fit allocator whose walk over
/// the free list grew with the heap's fragmentation: a node holding a few
/// thousand 4 KiB page buffers paid microseconds per allocation.
#[global_allocator]
static HEAP: TalcLock<spinning_top::RawSpinlock, Manual> = TalcLock::new(Manual);

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
    prefault(base as *mut u8, pages);
    // SAFETY: `base..base+bytes` is RAM that the frame allocator handed out
    // exclusively for the heap; it is identity mapped and unused, and the
    // `Manual` source never reclaims it.
    unsafe { HEAP.lock().claim(base as *mut u8, bytes) }.ok_or("kernel heap too small")?;
    HEAP_SIZE.store(bytes, Ordering::Relaxed);
    Ok(())
}

/// Write one byte of each of the heap's `pages` at `base` before the heap
/// uses them, so this QEMU process's host page tables map the guest RAM
/// under the heap at boot: the first write to a guest page is otherwise a
/// host page fault in the middle of whatever first allocates it (a page
/// cache copy in `private` mode, a miss's buffers), which no real machine
/// pays and which the shared region's pages do not pay either
/// (`drivers::ivshmem::prefault`).
fn prefault(base: *mut u8, pages: usize) {
    for i in 0..pages {
        // SAFETY: `base` is the start of `pages` frames of RAM that the
        // frame allocator just handed out exclusively for the heap; they
        // are identity mapped, and nothing else references them yet.
        unsafe { base.add(i * frames::FRAME as usize).write_volatile(0) };
    }
}

/// Bytes of the kernel heap (0 before [`init`]).
pub fn heap_bytes() -> usize {
    HEAP_SIZE.load(Ordering::Relaxed)
}

/// Bytes of the kernel heap in live allocations (talc's counters).
pub fn heap_in_use() -> usize {
    HEAP.lock().counters().allocated_bytes
}
