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
    /// Compare-and-swap a 64-bit word (`lock cmpxchg`): `Ok(old)` if it
    /// held `old` and now holds `new`, else `Err(actual)`.
    fn cas_u64(&self, off: usize, old: u64, new: u64) -> Result<u64, u64>;
    /// Atomically OR into a 64-bit word; returns the previous value.
    fn fetch_or_u64(&self, off: usize, bits: u64) -> u64;
    /// Atomically AND into a 64-bit word; returns the previous value.
    fn fetch_and_u64(&self, off: usize, bits: u64) -> u64;
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

    fn cas_u64(&self, off: usize, old: u64, new: u64) -> Result<u64, u64> {
        self.check(off, 8, 8);
        // SAFETY: as in `load_u64`.
        unsafe { AtomicU64::from_ptr(self.base.add(off).cast()) }.compare_exchange(
            old,
            new,
            Ordering::SeqCst,
            Ordering::SeqCst,
        )
    }

    fn fetch_or_u64(&self, off: usize, bits: u64) -> u64 {
        self.check(off, 8, 8);
        // SAFETY: as in `load_u64`.
        unsafe { AtomicU64::from_ptr(self.base.add(off).cast()) }.fetch_or(bits, Ordering::SeqCst)
    }

    fn fetch_and_u64(&self, off: usize, bits: u64) -> u64 {
        self.check(off, 8, 8);
        // SAFETY: as in `load_u64`.
        unsafe { AtomicU64::from_ptr(self.base.add(off).cast()) }.fetch_and(bits, Ordering::SeqCst)
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

/// An area of the shared region seen as an array of 64-bit words, for
/// DaxFS's structures ([`daxcache`]): `len` words from byte offset `base`.
/// Every index is checked against the area (an index from the region
/// outside it is [`daxcache::Error::OutOfBounds`], not a panic), and every
/// operation is sequentially consistent: a plain load or store, or a
/// locked instruction (`lock cmpxchg`, `lock or`, `lock and`), atomic
/// across instances under KVM or `--accel tcg-multi` only.
pub struct RegionWords<'a, M: SharedMem + ?Sized> {
    mem: &'a M,
    base: usize,
    len: usize,
}

impl<'a, M: SharedMem + ?Sized> RegionWords<'a, M> {
    /// The `len` words at byte offset `base` of `mem`; `None` unless the
    /// area is 8-aligned and inside the region.
    pub fn new(mem: &'a M, base: usize, len: usize) -> Option<Self> {
        let end = len.checked_mul(8).and_then(|b| base.checked_add(b))?;
        (base.is_multiple_of(8) && end <= mem.size()).then_some(RegionWords { mem, base, len })
    }

    fn off(&self, i: usize) -> Result<usize, daxcache::Error> {
        if i >= self.len {
            return Err(daxcache::Error::OutOfBounds);
        }
        // In range: `new` checked `base + len * 8` fits.
        Ok(self.base + i * 8)
    }
}

impl<M: SharedMem + ?Sized> daxcache::Words for RegionWords<'_, M> {
    fn len(&self) -> usize {
        self.len
    }
    fn load(&self, i: usize) -> Result<u64, daxcache::Error> {
        let off = self.off(i)?;
        // An acquire load; the x86 load is sequentially consistent with
        // the locked operations below.
        Ok(self.mem.load_u64(off))
    }
    fn store(&self, i: usize, v: u64) -> Result<(), daxcache::Error> {
        let off = self.off(i)?;
        // A release store is not ordered before later loads: a plain
        // store here must be, as for `AtomicU64::store(SeqCst)`, so it is
        // a swap by CAS loop (an `xchg` on x86).
        let mut cur = self.mem.load_u64(off);
        while let Err(now) = self.mem.cas_u64(off, cur, v) {
            cur = now;
        }
        Ok(())
    }
    fn cas(&self, i: usize, old: u64, new: u64) -> Result<Result<u64, u64>, daxcache::Error> {
        let off = self.off(i)?;
        Ok(self.mem.cas_u64(off, old, new))
    }
    fn fetch_or(&self, i: usize, bits: u64) -> Result<u64, daxcache::Error> {
        let off = self.off(i)?;
        Ok(self.mem.fetch_or_u64(off, bits))
    }
    fn fetch_and(&self, i: usize, bits: u64) -> Result<u64, daxcache::Error> {
        let off = self.off(i)?;
        Ok(self.mem.fetch_and_u64(off, bits))
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
    fn cas_u64(&self, off: usize, old: u64, new: u64) -> Result<u64, u64> {
        self.raw.cas_u64(off, old, new)
    }
    fn fetch_or_u64(&self, off: usize, bits: u64) -> u64 {
        self.raw.fetch_or_u64(off, bits)
    }
    fn fetch_and_u64(&self, off: usize, bits: u64) -> u64 {
        self.raw.fetch_and_u64(off, bits)
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
    fn region_words_check_every_index_and_are_atomic() {
        use daxcache::Words;
        let m = HeapShm::new(8192);
        assert!(RegionWords::new(&m, 4, 1).is_none(), "misaligned");
        assert!(RegionWords::new(&m, 8192 - 8, 2).is_none(), "past the end");
        assert!(RegionWords::new(&m, 0, usize::MAX).is_none(), "overflow");
        let w = RegionWords::new(&m, 64, 4).unwrap();
        assert_eq!(w.len(), 4);
        w.store(3, 7).unwrap();
        assert_eq!(m.load_u64(64 + 24), 7);
        assert_eq!(w.cas(3, 7, 9).unwrap(), Ok(7));
        assert_eq!(w.cas(3, 7, 1).unwrap(), Err(9));
        assert_eq!(w.fetch_or(3, 6).unwrap(), 9);
        assert_eq!(w.fetch_and(3, !1).unwrap(), 15);
        assert_eq!(w.load(3).unwrap(), 14);
        assert_eq!(w.load(4), Err(daxcache::Error::OutOfBounds));
        assert_eq!(w.store(4, 0), Err(daxcache::Error::OutOfBounds));
        assert_eq!(w.cas(usize::MAX, 0, 0), Err(daxcache::Error::OutOfBounds));
    }

    #[test]
    fn region_words_carry_the_page_cache_across_threads() {
        use daxcache::pcache::{Lookup, PageCache, Tag};
        use daxcache::SpinWaiter;
        let slots = 64;
        let n = PageCache::<RegionWords<'_, HeapShm>>::words_needed(slots).unwrap();
        let m = HeapShm::new(n * 8 + 64);
        let w = RegionWords::new(&m, 64, n).unwrap();
        PageCache::format(&w, 0, slots).unwrap();
        // Four threads race to claim the same eight pages: one claim each.
        let claims = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for owner in 0..4u8 {
                let (m, claims) = (&m, &claims);
                s.spawn(move || {
                    let w = RegionWords::new(m, 64, n).unwrap();
                    let pc = PageCache::attach(&w, 0, slots).unwrap();
                    for p in 0..8 {
                        let t = Tag::new(1, p).unwrap();
                        loop {
                            match pc.lookup(t, owner, 0, &mut SpinWaiter { left: 1 << 30 }) {
                                Ok(Lookup::Miss(slot)) => {
                                    claims.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                                    let job = pc.pending_at(slot).unwrap().unwrap();
                                    assert!(pc.publish(&job).unwrap());
                                }
                                Ok(Lookup::Hit(slot)) => {
                                    pc.unpin(owner, 0, slot).unwrap();
                                    break;
                                }
                                Err(e) => panic!("{e}"),
                            }
                        }
                    }
                });
            }
        });
        assert_eq!(claims.load(std::sync::atomic::Ordering::SeqCst), 8);
    }

    #[test]
    #[should_panic(expected = "out of bounds")]
    fn out_of_bounds_is_a_bug() {
        let m = HeapShm::new(64);
        m.load_u64(64);
    }
}
