//! Memory management: physical frames, the kernel heap, and identity
//! mappings for device memory above the boot map.

pub mod frames;
pub mod paging;

use core::alloc::{GlobalAlloc, Layout};
use core::sync::atomic::{AtomicUsize, Ordering};

use talc::source::Manual;
use talc::TalcLock;

/// The kernel heap: talc (segregated free lists, O(1) allocation and
/// free). It replaced a linked-list first-fit allocator whose walk over
/// the free list grew with the heap's fragmentation: a node holding a few
/// thousand 4 KiB page buffers paid microseconds per allocation.
static HEAP: TalcLock<spinning_top::RawSpinlock, Manual> = TalcLock::new(Manual);

/// The global allocator: talc, plus the heap's high mark, which talc does
/// not keep and which tells what a workload needed at its worst (`cache
/// stats`, the panic report).
struct Counted;

/// Bytes in live allocations (the same sum as talc's `allocated_bytes`,
/// kept here so the high mark costs no second lock).
static IN_USE: AtomicUsize = AtomicUsize::new(0);
/// The most bytes ever in live allocations.
static HIGH: AtomicUsize = AtomicUsize::new(0);

impl Counted {
    fn grew(by: usize) {
        let now = IN_USE.fetch_add(by, Ordering::Relaxed) + by;
        HIGH.fetch_max(now, Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded unchanged to talc's `GlobalAlloc`, which
// upholds the contract; the counters only observe the sizes.
unsafe impl GlobalAlloc for Counted {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        let p = unsafe { HEAP.alloc(layout) };
        if !p.is_null() {
            Self::grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc_zeroed` is passed on.
        let p = unsafe { HEAP.alloc_zeroed(layout) };
        if !p.is_null() {
            Self::grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract for `dealloc` is passed on as is.
        unsafe { HEAP.dealloc(ptr, layout) };
        IN_USE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract for `realloc` is passed on as is.
        let p = unsafe { HEAP.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            IN_USE.fetch_sub(layout.size(), Ordering::Relaxed);
            Self::grew(new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counted = Counted;

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

/// Bytes of the kernel heap in live allocations.
pub fn heap_in_use() -> usize {
    IN_USE.load(Ordering::Relaxed)
}

/// The most bytes of the kernel heap ever in live allocations.
pub fn heap_high() -> usize {
    HIGH.load(Ordering::Relaxed)
}

/// The heap in one line for a failure report: in use, high mark, size,
/// and talc's free bytes and holes (fragmentation) unless its lock is held
/// (the failure may have happened inside the allocator). Formatting it
/// allocates nothing: it is printed after an allocation failed.
pub struct HeapReport;

impl core::fmt::Display for HeapReport {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "heap {} KiB in use, high {} KiB, of {} KiB",
            heap_in_use() >> 10,
            heap_high() >> 10,
            heap_bytes() >> 10
        )?;
        if let Some(t) = HEAP.try_lock() {
            let c = t.counters();
            write!(
                f,
                "; free {} KiB in {} holes",
                c.available_bytes >> 10,
                c.fragment_count
            )?;
        }
        Ok(())
    }
}
