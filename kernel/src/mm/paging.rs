//! Page tables through the `x86_64` crate. The boot trampoline identity
//! maps the first 4 GiB with 2 MiB pages; device memory above that (a
//! 64-bit BAR such as the shared region) is identity mapped here on demand.

use x86_64::registers::control::Cr3;
use x86_64::structures::paging::{
    FrameAllocator, Mapper, OffsetPageTable, Page, PageTable, PageTableFlags, PhysFrame, Size2MiB,
    Size4KiB, Translate,
};
use x86_64::{PhysAddr, VirtAddr};

struct Frames;

// SAFETY: `frames::alloc` returns unused, zeroed, identity-mapped frames.
unsafe impl FrameAllocator<Size4KiB> for Frames {
    fn allocate_frame(&mut self) -> Option<PhysFrame<Size4KiB>> {
        super::frames::alloc().map(|pa| PhysFrame::containing_address(PhysAddr::new(pa)))
    }
}

fn mapper() -> OffsetPageTable<'static> {
    let (frame, _) = Cr3::read();
    let pml4 = frame.start_address().as_u64() as *mut PageTable;
    // SAFETY: physical memory holding the page tables is identity mapped
    // (offset 0); the kernel is single-threaded per instance and only this
    // module edits the tables, with interrupts never touching them.
    unsafe { OffsetPageTable::new(&mut *pml4, VirtAddr::new(0)) }
}

/// Make sure `[pa, pa+len)` is identity mapped (2 MiB pages, writable,
/// uncached when `uncached`). Returns the virtual address (= `pa`).
pub fn identity_map(pa: u64, len: u64, uncached: bool) -> Result<*mut u8, &'static str> {
    let mut m = mapper();
    let start = pa & !((2 << 20) - 1);
    let end = pa.checked_add(len).ok_or("mapping overflows")?;
    let mut flags = PageTableFlags::PRESENT | PageTableFlags::WRITABLE | PageTableFlags::NO_EXECUTE;
    if uncached {
        flags |= PageTableFlags::NO_CACHE | PageTableFlags::WRITE_THROUGH;
    }
    let mut a = start;
    while a < end {
        if m.translate_addr(VirtAddr::new(a)).is_none() {
            let page = Page::<Size2MiB>::containing_address(VirtAddr::new(a));
            let frame = PhysFrame::<Size2MiB>::containing_address(PhysAddr::new(a));
            // SAFETY: identity mapping of device memory that nothing else
            // maps; the frame is the device's, not RAM handed to anyone.
            unsafe { m.map_to(page, frame, flags, &mut Frames) }
                .map_err(|_| "cannot map device memory")?
                .flush();
        }
        a += 2 << 20;
    }
    Ok(pa as *mut u8)
}

/// Map the 4 KiB page at virtual `va` to physical `pa` (writable; the
/// protocol, not the page table, decides who may write a frame). Replaces
/// an existing mapping.
pub fn map_4k(va: u64, pa: u64) -> Result<(), &'static str> {
    let mut m = mapper();
    let page = Page::<Size4KiB>::containing_address(VirtAddr::new(va));
    if let Ok((_, flush)) = m.unmap(page) {
        flush.flush();
    }
    let frame = PhysFrame::<Size4KiB>::containing_address(PhysAddr::new(pa));
    let flags = PageTableFlags::PRESENT | PageTableFlags::WRITABLE | PageTableFlags::NO_EXECUTE;
    // SAFETY: `va` lies in the kernel's private mmap window, which no Rust
    // reference points into; `pa` is a frame of the shared region, which
    // stays mapped (BAR2) for the kernel's lifetime.
    unsafe { m.map_to(page, frame, flags, &mut Frames) }
        .map_err(|_| "cannot map page")?
        .flush();
    Ok(())
}

/// Remove the mapping at `va` (if any) and flush it from the TLB.
pub fn unmap_4k(va: u64) {
    let mut m = mapper();
    let page = Page::<Size4KiB>::containing_address(VirtAddr::new(va));
    if let Ok((_, flush)) = m.unmap(page) {
        flush.flush();
    }
}

/// The virtual range reserved for mmap windows (see `node::coherent`).
pub const WINDOW: core::ops::Range<u64> = 0x0000_1000_0000_0000..0x0000_2000_0000_0000;

/// Check that `[va, va+len)` lies in the window and every page of it is
/// mapped right now.
fn window_mapped(va: u64, len: usize) -> Result<(), &'static str> {
    let end = va.checked_add(len as u64).ok_or("window range overflows")?;
    if va < WINDOW.start || end > WINDOW.end {
        return Err("address outside the mmap window");
    }
    let m = mapper();
    let mut p = va & !0xFFF;
    while p < end {
        if m.translate_addr(VirtAddr::new(p)).is_none() {
            return Err("window page not mapped");
        }
        p += 4096;
    }
    Ok(())
}

/// Load `buf.len()` bytes through the mmap window at `va` (volatile loads).
pub fn window_read(va: u64, buf: &mut [u8]) -> Result<(), &'static str> {
    window_mapped(va, buf.len())?;
    let p = va as *const u8;
    for (i, b) in buf.iter_mut().enumerate() {
        // SAFETY: every page of the range was just checked to be mapped in
        // the window (to frames of the shared region, which stay mapped);
        // the kernel is single-threaded and nothing unmaps between the
        // check and these loads; volatile loads create no references.
        *b = unsafe { core::ptr::read_volatile(p.add(i)) };
    }
    Ok(())
}

/// Load `buf.len()` bytes through the mmap window at `va`, letting missing
/// pages fault in: the window's page-fault handler maps every page it is
/// asked for (the frame, or a zero page it reports as a miss).
pub fn window_read_faulting(va: u64, buf: &mut [u8]) -> Result<(), &'static str> {
    let end = va
        .checked_add(buf.len() as u64)
        .ok_or("window range overflows")?;
    if va < WINDOW.start || end > WINDOW.end {
        return Err("address outside the mmap window");
    }
    let p = va as *const u8;
    for (i, b) in buf.iter_mut().enumerate() {
        // SAFETY: the range lies in the mmap window; every window page is
        // either mapped (to a frame of the shared region or the zero page)
        // or gets mapped by the window page-fault handler, which never
        // refuses a window address; no Rust reference points into the
        // window and volatile loads create none.
        *b = unsafe { core::ptr::read_volatile(p.add(i)) };
    }
    Ok(())
}

/// Store `data` through the mmap window at `va` (volatile stores).
pub fn window_write(va: u64, data: &[u8]) -> Result<(), &'static str> {
    window_mapped(va, data.len())?;
    let p = va as *mut u8;
    for (i, b) in data.iter().enumerate() {
        // SAFETY: as in `window_read`; the window mappings are writable.
        unsafe { core::ptr::write_volatile(p.add(i), *b) };
    }
    Ok(())
}
