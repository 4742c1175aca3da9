//! Where a pool frame lives in the region and where its export and
//! replica bits are. This is the one place that knows: the directory sets
//! and clears both bits ([`Header::set_exported`],
//! [`Header::set_replicated`]), nodes test them ([`Header::exported`],
//! [`Header::replicated`]), and both find a frame's bytes with
//! [`Layout::frame_off`] (or [`Layout::gfn_offset`]).

use super::{Header, Layout};
use crate::shm::SharedMem;
use crate::PAGE_SIZE;

impl Layout {
    /// Byte offset of global frame number `gfn` in the region (frame `gfn`
    /// starts at `gfn * PAGE_SIZE`), whether or not it is a pool frame; `None`
    /// if that does not fit in a `usize`.
    pub fn gfn_offset(gfn: u64) -> Option<usize> {
        usize::try_from(gfn).ok()?.checked_mul(PAGE_SIZE)
    }

    /// Byte offset of pool frame `gfn` in the region; `None` if `gfn` is in
    /// no node's pool.
    pub fn frame_off(&self, gfn: u64) -> Option<usize> {
        self.gfn_owner(gfn)?;
        Layout::gfn_offset(gfn)
    }

    /// Where pool frame `gfn`'s export bit is: the offset of its 64-bit
    /// bitmap word (its owner's bitmap) and the bit's mask in that word;
    /// `None` if `gfn` is in no node's pool.
    pub fn export_bit(&self, gfn: u64) -> Option<(usize, u64)> {
        let node = self.gfn_owner(gfn)?;
        let (first, _) = self.pool_gfns(node);
        let idx = usize::try_from(gfn - first).ok()?;
        let off = self.bitmap_off + (node as usize - 1) * self.bitmap_bytes + (idx / 64) * 8;
        Some((off, 1u64 << (idx % 64)))
    }

    /// Where pool frame `gfn`'s replica bit is (set while nodes other than
    /// the owner may hold read-only replicas of the page in it, strong
    /// mode): the same word as its export bit, in the second half of its
    /// owner's bitmap.
    pub fn replica_bit(&self, gfn: u64) -> Option<(usize, u64)> {
        let (off, bit) = self.export_bit(gfn)?;
        Some((off + self.bitmap_bytes / 2, bit))
    }
}

impl<M: SharedMem + ?Sized> Header<'_, M> {
    /// Is pool frame `gfn` exported (mappable by nodes other than its
    /// owner)? `false` for a frame in no pool.
    pub fn exported(&self, gfn: u64) -> bool {
        self.layout
            .export_bit(gfn)
            .is_some_and(|(off, bit)| self.mem.load_u64(off) & bit != 0)
    }

    /// Is pool frame `gfn` replicated (a store into it must first have the
    /// directory revoke the replicas)? `false` for a frame in no pool.
    pub fn replicated(&self, gfn: u64) -> bool {
        self.layout
            .replica_bit(gfn)
            .is_some_and(|(off, bit)| self.mem.load_u64(off) & bit != 0)
    }

    /// Set or clear pool frame `gfn`'s replica bit (the directory only).
    /// Returns `false`, changing nothing, for a frame in no pool.
    pub fn set_replicated(&self, gfn: u64, on: bool) -> bool {
        let Some((off, bit)) = self.layout.replica_bit(gfn) else {
            return false;
        };
        let w = self.mem.load_u64(off);
        self.mem.store_u64(off, if on { w | bit } else { w & !bit });
        true
    }

    /// Set or clear pool frame `gfn`'s export bit (the directory, the only
    /// writer of the bitmaps). Returns `false`, changing nothing, for a
    /// frame in no pool.
    pub fn set_exported(&self, gfn: u64, on: bool) -> bool {
        let Some((off, bit)) = self.layout.export_bit(gfn) else {
            return false;
        };
        let w = self.mem.load_u64(off);
        self.mem.store_u64(off, if on { w | bit } else { w & !bit });
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shm::HeapShm;

    #[test]
    fn frame_offsets_are_pool_frames_only() {
        let size = 4 << 20;
        let l = Layout::compute(size, 3).unwrap();
        for node in 1..=3 {
            let (first, end) = l.pool_gfns(node);
            assert_eq!(l.frame_off(first), Some(first as usize * PAGE_SIZE));
            let last = l.frame_off(end - 1).unwrap();
            assert!(last + PAGE_SIZE <= size);
            assert!(l.frame_off(first).unwrap() >= l.pool_off);
        }
        let (first, _) = l.pool_gfns(1);
        let (_, end) = l.pool_gfns(3);
        assert_eq!(l.frame_off(first - 1), None, "below the pools");
        assert_eq!(l.frame_off(end), None, "past the last pool");
        assert_eq!(l.frame_off(u64::MAX), None);
        assert_eq!(Layout::gfn_offset(0), Some(0));
        assert_eq!(Layout::gfn_offset(3), Some(3 * PAGE_SIZE));
        assert_eq!(Layout::gfn_offset(u64::MAX), None);
    }

    #[test]
    fn replica_bits_are_distinct_from_every_export_bit_and_independent() {
        let size = 4 << 20;
        let l = Layout::compute(size, 3).unwrap();
        let mem = HeapShm::new(size);
        l.format(&*mem, 1);
        let h = Header::new(&*mem, l);
        let mut exports = alloc::collections::BTreeSet::new();
        let mut replicas = alloc::collections::BTreeSet::new();
        for node in 1..=3u32 {
            let (first, end) = l.pool_gfns(node);
            let lo = l.bitmap_off + (node as usize - 1) * l.bitmap_bytes;
            for gfn in first..end {
                exports.insert(l.export_bit(gfn).unwrap());
                let (off, bit) = l.replica_bit(gfn).unwrap();
                assert!(off >= lo + l.bitmap_bytes / 2 && off + 8 <= lo + l.bitmap_bytes);
                assert!(
                    replicas.insert((off, bit)),
                    "gfn {gfn} shares a replica bit"
                );
            }
        }
        assert!(exports.is_disjoint(&replicas));
        let (first, end) = l.pool_gfns(2);
        let g = first + 5;
        assert!(h.set_replicated(g, true));
        assert!(h.replicated(g) && !h.exported(g));
        assert!((first..end).filter(|&x| h.replicated(x)).eq([g]));
        assert!(h.set_exported(g, true));
        assert!(h.set_replicated(g, false));
        assert!(!h.replicated(g) && h.exported(g));
        let below = l.pool_gfns(1).0 - 1;
        assert_eq!(l.replica_bit(below), None);
        assert!(!h.set_replicated(below, true), "not a pool frame");
    }

    #[test]
    fn export_bits_are_distinct_and_inside_their_owners_bitmap() {
        let size = 4 << 20;
        let l = Layout::compute(size, 3).unwrap();
        let mem = HeapShm::new(size);
        l.format(&*mem, 1);
        let h = Header::new(&*mem, l);
        let mut seen = alloc::collections::BTreeSet::new();
        for node in 1..=3u32 {
            let (first, end) = l.pool_gfns(node);
            let lo = l.bitmap_off + (node as usize - 1) * l.bitmap_bytes;
            for gfn in first..end {
                let (off, bit) = l.export_bit(gfn).unwrap();
                assert!(off >= lo && off + 8 <= lo + l.bitmap_bytes, "gfn {gfn}");
                assert_eq!(bit.count_ones(), 1);
                assert!(seen.insert((off, bit)), "gfn {gfn} shares a bit");
                assert!(!h.exported(gfn));
            }
        }
        let (first, _) = l.pool_gfns(1);
        assert_eq!(l.export_bit(first - 1), None);
        assert!(!h.exported(first - 1));
        assert!(!h.set_exported(first - 1, true), "not a pool frame");
    }

    #[test]
    fn set_exported_touches_one_frame() {
        let size = 4 << 20;
        let l = Layout::compute(size, 2).unwrap();
        let mem = HeapShm::new(size);
        l.format(&*mem, 1);
        let h = Header::new(&*mem, l);
        let (a0, a_end) = l.pool_gfns(1);
        let (b0, _) = l.pool_gfns(2);
        let g = a0 + 65; // second word of node 1's bitmap
        assert!(h.set_exported(g, true));
        assert!(h.set_exported(b0, true));
        for gfn in a0..a_end {
            assert_eq!(h.exported(gfn), gfn == g, "gfn {gfn}");
        }
        assert!(h.exported(b0));
        assert!(h.set_exported(g, false));
        assert!(!h.exported(g));
        assert!(h.exported(b0), "clearing one frame leaves the others");
    }
}
