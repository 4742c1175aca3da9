//! Physical frame allocator: bump allocation over the RAM regions of the
//! boot memory map (minus low memory and the kernel image), with a free
//! list of single frames threaded through the freed frames themselves.

use spin::Mutex;

use crate::arch::pvh::Region;

/// Frame size.
pub const FRAME: u64 = fabric::PAGE_SIZE as u64;

struct State {
    regions: [Region; 32],
    n: usize,
    cur: usize,
    next: u64,
    free_head: u64,
    total: u64,
    used: u64,
}

static STATE: Mutex<State> = Mutex::new(State {
    regions: [Region { start: 0, end: 0 }; 32],
    n: 0,
    cur: 0,
    next: 0,
    free_head: 0,
    total: 0,
    used: 0,
});

extern "C" {
    static __kernel_end: u8;
}

/// Take the usable regions, skipping everything below the end of the
/// kernel image and above 4 GiB (only the first 4 GiB are mapped at boot).
pub fn init(regions: &[Region]) {
    // Only the address of the linker symbol is taken, never its contents.
    let kend = core::ptr::addr_of!(__kernel_end) as u64;
    let mut s = STATE.lock();
    for r in regions {
        let start = r.start.max(kend).max(1 << 20).div_ceil(FRAME) * FRAME;
        let end = r.end.min(1 << 32) / FRAME * FRAME;
        if end > start && s.n < s.regions.len() {
            let i = s.n;
            s.regions[i] = Region { start, end };
            s.n += 1;
            s.total += (end - start) / FRAME;
        }
    }
    s.cur = 0;
    s.next = if s.n > 0 { s.regions[0].start } else { 0 };
}

fn bump(s: &mut State, pages: u64) -> Option<u64> {
    while s.cur < s.n {
        let r = s.regions[s.cur];
        let start = s.next.max(r.start);
        if start + pages * FRAME <= r.end {
            s.next = start + pages * FRAME;
            s.used += pages;
            return Some(start);
        }
        s.cur += 1;
        if s.cur < s.n {
            s.next = s.regions[s.cur].start;
        }
    }
    None
}

/// One zeroed frame.
pub fn alloc() -> Option<u64> {
    let mut s = STATE.lock();
    let pa = if s.free_head != 0 {
        let pa = s.free_head;
        // SAFETY: `pa` is a free frame (identity mapped RAM) whose first word
        // holds the next free frame; nobody else references it.
        s.free_head = unsafe { core::ptr::read(pa as *const u64) };
        s.used += 1;
        pa
    } else {
        bump(&mut s, 1)?
    };
    drop(s);
    // SAFETY: the frame was just taken from the allocator: exclusively ours,
    // identity mapped, 4 KiB.
    unsafe { core::ptr::write_bytes(pa as *mut u8, 0, FRAME as usize) };
    Some(pa)
}

/// `pages` physically contiguous zeroed frames.
pub fn alloc_contiguous(pages: usize) -> Option<u64> {
    let pa = bump(&mut STATE.lock(), pages as u64)?;
    // SAFETY: the range was just taken from the allocator: exclusively ours
    // and identity mapped.
    unsafe { core::ptr::write_bytes(pa as *mut u8, 0, pages * FRAME as usize) };
    Some(pa)
}

/// Give frames back (they join the single-frame free list).
///
/// # Safety
/// `pa..pa+pages*FRAME` must have come from this allocator and no longer be
/// used by anyone.
pub unsafe fn free(pa: u64, pages: usize) {
    let mut s = STATE.lock();
    for i in 0..pages as u64 {
        let f = pa + i * FRAME;
        // SAFETY: the caller gives up the frame; we store the list link in
        // its first word (identity mapped RAM).
        unsafe { core::ptr::write(f as *mut u64, s.free_head) };
        s.free_head = f;
        s.used -= 1;
    }
}

/// Does `[start, end)` overlap RAM that this allocator manages (or the
/// memory below it: low memory and the kernel image)?
pub fn overlaps_ram(start: u64, end: u64) -> bool {
    let s = STATE.lock();
    let top = s.regions[..s.n].iter().map(|r| r.end).max().unwrap_or(0);
    start < top && end > 0
}

/// (used, total) frames.
pub fn usage() -> (u64, u64) {
    let s = STATE.lock();
    (s.used, s.total)
}
