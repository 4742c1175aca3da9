//! Page tables through the `x86_64` crate. The boot trampoline identity
//! maps the first 4 GiB with 2 MiB pages; device memory above that (a
//! 64-bit BAR such as the shared region) is identity mapped here on demand.
//!
//! Every mapping this module makes is checked, so its functions are safe to
//! call: [`identity_map`] maps only device memory (never RAM that the frame
//! allocator manages, which Rust references may point into), and
//! [`map_4k`] maps only a page of the mmap window ([`WINDOW`], which no
//! Rust reference points into) to a frame of a device range mapped by
//! [`identity_map`] or to the window's zero page.

use spin::{Mutex, Once};

use super::frames::FRAME;
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

/// Device ranges mapped by [`identity_map`] (start, end), the targets
/// [`map_4k`] accepts.
static DEVICE: Mutex<[(u64, u64); 32]> = Mutex::new([(0, 0); 32]);
/// The zeroed frame window faults on non-resident pages map (0: none yet).
static ZERO_PAGE: Once<u64> = Once::new();

/// A view of the active page tables, to be dropped before anything else
/// can edit them.
///
/// The tables are edited from two contexts: the kernel's own thread and the
/// mmap window's page-fault handler (interrupt context, see
/// `arch::interrupts`), which calls [`map_4k`]. Each caller builds its own
/// short-lived mapper and drops it before returning, and the fault handler
/// runs only on a fault in the window, which the thread's page-table code
/// never touches; so two `&mut PageTable` to the PML4 are never used at the
/// same time.
fn mapper() -> OffsetPageTable<'static> {
    let (frame, _) = Cr3::read();
    let pml4 = frame.start_address().as_u64() as *mut PageTable;
    // SAFETY: the PML4 is RAM, identity mapped (offset 0), owned by the
    // paging code only; no other reference to it is live while the returned
    // mapper is used (see above: mappers are short-lived and never
    // interleaved between the thread and the window fault handler).
    unsafe { OffsetPageTable::new(&mut *pml4, VirtAddr::new(0)) }
}

/// The zeroed frame [`map_4k`] accepts as a stand-in for a page that is no
/// longer resident (taken once from the frame allocator, never written).
pub fn zero_page() -> Option<u64> {
    if let Some(pa) = ZERO_PAGE.get() {
        return Some(*pa);
    }
    let pa = super::frames::alloc()?;
    Some(*ZERO_PAGE.call_once(|| pa))
}

/// Is `[pa, pa+FRAME)` inside a device range mapped by [`identity_map`] or
/// the zero page?
fn window_target(pa: u64) -> bool {
    if !pa.is_multiple_of(FRAME) {
        return false;
    }
    if ZERO_PAGE.get() == Some(&pa) {
        return true;
    }
    DEVICE
        .lock()
        .iter()
        .any(|&(s, e)| s < e && pa >= s && pa + FRAME <= e)
}

/// Make sure the device memory `[pa, pa+len)` is identity mapped (2 MiB
/// pages, writable, uncached when `uncached`). Returns the virtual address
/// (= `pa`). Refuses ranges that touch RAM (which the trampoline mapped
/// and Rust code uses): only device memory gets new mappings here.
pub fn identity_map(pa: u64, len: u64, uncached: bool) -> Result<*mut u8, &'static str> {
    let start = pa & !((2 << 20) - 1);
    let end = pa.checked_add(len).ok_or("mapping overflows")?;
    if len == 0 || super::frames::overlaps_ram(start, end.next_multiple_of(2 << 20)) {
        return Err("refusing to map RAM as device memory");
    }
    {
        let mut d = DEVICE.lock();
        if !d.iter().any(|&(s, e)| s <= pa && end <= e) {
            let free = d
                .iter_mut()
                .find(|r| r.0 == r.1)
                .ok_or("too many device ranges")?;
            *free = (pa, end);
        }
    }
    let mut m = mapper();
    let mut flags = PageTableFlags::PRESENT | PageTableFlags::WRITABLE | PageTableFlags::NO_EXECUTE;
    if uncached {
        flags |= PageTableFlags::NO_CACHE | PageTableFlags::WRITE_THROUGH;
    }
    let mut a = start;
    while a < end {
        if m.translate_addr(VirtAddr::new(a)).is_none() {
            let page = Page::<Size2MiB>::containing_address(VirtAddr::new(a));
            let frame = PhysFrame::<Size2MiB>::containing_address(PhysAddr::new(a));
            // SAFETY: identity mapping of device memory (checked above not
            // to touch RAM) at a virtual address nothing maps yet
            // (`translate_addr` is None); no Rust reference can point there.
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
/// an existing mapping. `va` must be a page of [`WINDOW`], and `pa` a page
/// of device memory mapped by [`identity_map`] (a frame of the shared
/// region) or the [`zero_page`].
pub fn map_4k(va: u64, pa: u64) -> Result<(), &'static str> {
    if !va.is_multiple_of(FRAME) || !WINDOW.contains(&va) {
        return Err("map_4k outside the mmap window");
    }
    if !window_target(pa) {
        return Err("map_4k target is not shared-region memory");
    }
    let mut m = mapper();
    let page = Page::<Size4KiB>::containing_address(VirtAddr::new(va));
    if let Ok((_, flush)) = m.unmap(page) {
        flush.flush();
    }
    let frame = PhysFrame::<Size4KiB>::containing_address(PhysAddr::new(pa));
    let flags = PageTableFlags::PRESENT | PageTableFlags::WRITABLE | PageTableFlags::NO_EXECUTE;
    // SAFETY: `va` was checked to lie in the mmap window, which no Rust
    // reference points into (it is only accessed with volatile loads and
    // stores through `window_*`); `pa` was checked to be device memory of
    // the shared region (mapped for the kernel's lifetime) or the zero
    // page, never RAM that Rust code uses.
    unsafe { m.map_to(page, frame, flags, &mut Frames) }
        .map_err(|_| "cannot map page")?
        .flush();
    Ok(())
}

/// Remove the mapping at `va` (if any) and flush it from the TLB. Only
/// pages of [`WINDOW`] are ever unmapped; other addresses are ignored.
pub fn unmap_4k(va: u64) {
    if !WINDOW.contains(&va) {
        return;
    }
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
        p += FRAME;
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
