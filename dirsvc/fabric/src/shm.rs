//! Access to the shared region ("the fabric").
//!
//! The region is memory that other kernels write concurrently, so it is
//! never turned into Rust references: every access goes through
//! [`SharedMem`], whose implementation ([`RawShm`]) uses atomic loads and
//! stores for control words and raw copies for payload bytes. Payload copies
//! are ordered by the acquire/release operations on the control words that
//! publish them (ring indices, header words).
//!
//! Offsets passed to [`SharedMem`] come from a validated [`crate::layout`],
//! never straight from the region; an out-of-bounds or misaligned offset is
//! a bug in this program and panics.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Word and byte access to the shared region.
pub trait SharedMem {
    /// Size of the region in bytes.
    fn size(&self) -> usize;
    /// Acquire-load a 32-bit word at a 4-aligned offset.
    fn load_u32(&self, off: usize) -> u32;
    /// Release-store a 32-bit word at a 4-aligned offset.
    fn store_u32(&self, off: usize, v: u32);
    /// Acquire-load a 64-bit word at an 8-aligned offset.
    fn load_u64(&self, off: usize) -> u64;
    /// Release-store a 64-bit word at an 8-aligned offset.
    fn store_u64(&self, off: usize, v: u64);
    /// Atomically add to a 64-bit word; returns the previous value.
    fn fetch_add_u64(&self, off: usize, v: u64) -> u64;
    /// Copy bytes out of the region.
    fn read(&self, off: usize, buf: &mut [u8]);
    /// Copy bytes into the region.
    fn write(&self, off: usize, data: &[u8]);
    /// Fill a range with zeros.
    fn zero(&self, off: usize, len: usize);
}

/// A shared region at a raw address: the one implementation used by the
/// kernel (BAR2 of the ivshmem device) and, over a heap allocation, by host
/// tests ([`HeapShm`]).
#[derive(Debug)]
pub struct RawShm {
    base: *mut u8,
    len: usize,
}

// SAFETY: all accesses through RawShm are atomic operations or raw copies on
// memory that is, by construction, shared with other agents; nothing hands
// out references, so sharing the handle between threads adds no new race.
unsafe impl Send for RawShm {}
// SAFETY: see the `Send` impl: every access is atomic or a raw copy.
unsafe impl Sync for RawShm {}

impl RawShm {
    /// Wrap `len` bytes at `base`.
    ///
    /// # Safety
    /// `base..base+len` must be mapped, readable and writable for as long as
    /// the `RawShm` lives, `base` must be 64-byte aligned, and no Rust
    /// reference may point into the range while it lives.
    pub unsafe fn new(base: *mut u8, len: usize) -> RawShm {
        RawShm { base, len }
    }

    /// Base address (for mapping peers' frames).
    pub fn base(&self) -> *mut u8 {
        self.base
    }

    fn check(&self, off: usize, len: usize, align: usize) {
        assert!(
            off.is_multiple_of(align) && off.checked_add(len).is_some_and(|e| e <= self.len),
            "shared-region access out of bounds: off={off:#x} len={len} size={:#x}",
            self.len
        );
    }
}

impl SharedMem for RawShm {
    fn size(&self) -> usize {
        self.len
    }

    fn load_u32(&self, off: usize) -> u32 {
        self.check(off, 4, 4);
        // SAFETY: in bounds and 4-aligned (checked above); the region is
        // valid for the lifetime of self (constructor contract) and only
        // accessed atomically at this offset.
        unsafe { AtomicU32::from_ptr(self.base.add(off).cast()) }.load(Ordering::Acquire)
    }

    fn store_u32(&self, off: usize, v: u32) {
        self.check(off, 4, 4);
        // SAFETY: as in `load_u32`.
        unsafe { AtomicU32::from_ptr(self.base.add(off).cast()) }.store(v, Ordering::Release)
    }

    fn load_u64(&self, off: usize) -> u64 {
        self.check(off, 8, 8);
        // SAFETY: in bounds and 8-aligned (checked above); see `load_u32`.
        unsafe { AtomicU64::from_ptr(self.base.add(off).cast()) }.load(Ordering::Acquire)
    }

    fn store_u64(&self, off: usize, v: u64) {
        self.check(off, 8, 8);
        // SAFETY: as in `load_u64`.
        unsafe { AtomicU64::from_ptr(self.base.add(off).cast()) }.store(v, Ordering::Release)
    }

    fn fetch_add_u64(&self, off: usize, v: u64) -> u64 {
        self.check(off, 8, 8);
        // SAFETY: as in `load_u64`.
        unsafe { AtomicU64::from_ptr(self.base.add(off).cast()) }.fetch_add(v, Ordering::AcqRel)
    }

    fn read(&self, off: usize, buf: &mut [u8]) {
        self.check(off, buf.len(), 1);
        // SAFETY: the source range is in bounds (checked) and valid for
        // reads; `buf` is a distinct local buffer, so they do not overlap.
        unsafe { core::ptr::copy_nonoverlapping(self.base.add(off), buf.as_mut_ptr(), buf.len()) }
    }

    fn write(&self, off: usize, data: &[u8]) {
        self.check(off, data.len(), 1);
        // SAFETY: the destination range is in bounds (checked) and valid
        // for writes; `data` is not inside the region (no references into
        // it exist), so they do not overlap.
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), self.base.add(off), data.len()) }
    }

    fn zero(&self, off: usize, len: usize) {
        self.check(off, len, 1);
        // SAFETY: in bounds (checked) and valid for writes.
        unsafe { core::ptr::write_bytes(self.base.add(off), 0, len) }
    }
}

/// A zeroed, 4 KiB-aligned heap allocation acting as a shared region, for
/// host tests and simulations.
#[derive(Debug)]
pub struct HeapShm {
    raw: RawShm,
    layout: core::alloc::Layout,
}

impl HeapShm {
    /// Allocate `len` zeroed bytes (`len` > 0).
    pub fn new(len: usize) -> HeapShm {
        let layout = core::alloc::Layout::from_size_align(len.max(64), 4096)
            .expect("valid heap region layout");
        // SAFETY: the layout has a non-zero size.
        let base = unsafe { alloc::alloc::alloc_zeroed(layout) };
        assert!(!base.is_null(), "out of memory allocating a test region");
        HeapShm {
            // SAFETY: freshly allocated, aligned, owned by this HeapShm
            // until drop, and never referenced directly.
            raw: unsafe { RawShm::new(base, len) },
            layout,
        }
    }
}

impl Drop for HeapShm {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with exactly this layout.
        unsafe { alloc::alloc::dealloc(self.raw.base, self.layout) }
    }
}

impl core::ops::Deref for HeapShm {
    type Target = RawShm;
    fn deref(&self) -> &RawShm {
        &self.raw
    }
}

impl SharedMem for HeapShm {
    fn size(&self) -> usize {
        self.raw.size()
    }
    fn load_u32(&self, off: usize) -> u32 {
        self.raw.load_u32(off)
    }
    fn store_u32(&self, off: usize, v: u32) {
        self.raw.store_u32(off, v)
    }
    fn load_u64(&self, off: usize) -> u64 {
        self.raw.load_u64(off)
    }
    fn store_u64(&self, off: usize, v: u64) {
        self.raw.store_u64(off, v)
    }
    fn fetch_add_u64(&self, off: usize, v: u64) -> u64 {
        self.raw.fetch_add_u64(off, v)
    }
    fn read(&self, off: usize, buf: &mut [u8]) {
        self.raw.read(off, buf)
    }
    fn write(&self, off: usize, data: &[u8]) {
        self.raw.write(off, data)
    }
    fn zero(&self, off: usize, len: usize) {
        self.raw.zero(off, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_and_bytes() {
        let m = HeapShm::new(8192);
        m.store_u32(4, 0xdead_beef);
        m.store_u64(8, 42);
        assert_eq!(m.load_u32(4), 0xdead_beef);
        assert_eq!(m.fetch_add_u64(8, 1), 42);
        assert_eq!(m.load_u64(8), 43);
        m.write(100, b"hello");
        let mut b = [0u8; 5];
        m.read(100, &mut b);
        assert_eq!(&b, b"hello");
        m.zero(100, 5);
        m.read(100, &mut b);
        assert_eq!(b, [0; 5]);
    }

    #[test]
    #[should_panic(expected = "out of bounds")]
    fn out_of_bounds_is_a_bug() {
        let m = HeapShm::new(64);
        m.load_u64(64);
    }
}
