//! Where `daxfs` mode's shared structures live: DaxFS's page cache
//! ([`daxcache::pcache`]) in the area the other single-copy modes give to
//! the node pools, which `daxfs` mode (like `private`) does not use.
//!
//! | area        | size                                                  |
//! | ----------- | ----------------------------------------------------- |
//! | slot array  | [`PageCache::words_needed`] words (header, 16 bytes   |
//! |             | per slot, the pin records), rounded up to a page      |
//! | slot frames | one 4 KiB frame per slot: slot `i`'s page at          |
//! |             | `data_off + i * 4096` (DaxFS's `slot_data`)           |
//!
//! The slot count is the largest power of two for which both fit in the
//! pools' area (at most [`MAX_SLOTS`]). The geometry is computed, never
//! read from the region: every instance derives it from the validated
//! [`Layout`], and the directory formats the slot array (every slot FREE)
//! before it comes up, so nodes attach (checking the array's header) only
//! after they joined.

use daxcache::pcache::PageCache;

use super::Layout;
use crate::shm::{RegionWords, SharedMem};
use crate::PAGE_SIZE;

/// Most slots (a bigger region keeps the rest of its pool area unused).
pub const MAX_SLOTS: usize = 1 << 16;

/// The geometry of `daxfs` mode's page cache in a region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DaxLayout {
    /// Byte offset of the slot array (the page cache's words).
    pub meta_off: usize,
    /// Words of the slot array.
    pub meta_words: usize,
    /// Slots (a power of two).
    pub slots: usize,
    /// Byte offset of slot 0's frame.
    pub data_off: usize,
}

fn meta_bytes(slots: usize) -> Option<usize> {
    let words = PageCache::<RegionWords<'_, crate::shm::RawShm>>::words_needed(slots)?;
    words.checked_mul(8)?.checked_next_multiple_of(PAGE_SIZE)
}

impl Layout {
    /// `daxfs` mode's page cache in this region; `None` if the pools'
    /// area cannot hold the smallest one (8 slots).
    pub fn dax(&self) -> Option<DaxLayout> {
        let frames = usize::try_from(self.pool_frames).ok()?;
        let area = frames
            .checked_mul(self.max_nodes as usize)?
            .checked_mul(PAGE_SIZE)?;
        let mut slots = MAX_SLOTS;
        while slots >= daxcache::pcache::PROBE_LEN {
            let need = slots
                .checked_mul(PAGE_SIZE)
                .and_then(|d| d.checked_add(meta_bytes(slots)?));
            if need.is_some_and(|n| n <= area) {
                let meta_off = self.pool_off;
                let meta = meta_bytes(slots)?;
                return Some(DaxLayout {
                    meta_off,
                    meta_words: meta / 8,
                    slots,
                    data_off: meta_off.checked_add(meta)?,
                });
            }
            slots /= 2;
        }
        None
    }
}

impl DaxLayout {
    /// The slot array as shared words.
    pub fn words<'a, M: SharedMem + ?Sized>(&self, mem: &'a M) -> Option<RegionWords<'a, M>> {
        RegionWords::new(mem, self.meta_off, self.meta_words)
    }

    /// Byte offset of slot `slot`'s frame; `None` for a slot out of range.
    pub fn frame_off(&self, slot: usize) -> Option<usize> {
        if slot >= self.slots {
            return None;
        }
        slot.checked_mul(PAGE_SIZE)?.checked_add(self.data_off)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shm::HeapShm;

    #[test]
    fn the_slot_array_and_frames_fit_in_the_pools_area() {
        for (mb, nodes) in [(8usize, 1u32), (64, 2), (64, 4), (256, 3)] {
            let l = Layout::compute(mb << 20, nodes).unwrap();
            let d = l.dax().unwrap();
            assert!(d.slots.is_power_of_two() && d.slots <= MAX_SLOTS);
            assert_eq!(d.meta_off, l.pool_off);
            assert!(d.meta_words * 8 >= meta_bytes(d.slots).unwrap() - PAGE_SIZE);
            assert!(d.data_off.is_multiple_of(PAGE_SIZE));
            let end = d.frame_off(d.slots - 1).unwrap() + PAGE_SIZE;
            assert!(end <= l.region_size, "{mb} MiB, {nodes} nodes");
            assert_eq!(d.frame_off(d.slots), None);
            // Twice the slots would not fit (or hit the cap).
            let more = 2 * d.slots * PAGE_SIZE + meta_bytes(2 * d.slots).unwrap();
            let area = l.pool_frames as usize * nodes as usize * PAGE_SIZE;
            assert!(d.slots == MAX_SLOTS || more > area);
        }
    }

    #[test]
    fn the_directory_formats_and_nodes_attach() {
        let l = Layout::compute(8 << 20, 2).unwrap();
        let m = HeapShm::new(8 << 20);
        let d = l.dax().unwrap();
        let w = d.words(&m).unwrap();
        assert!(PageCache::attach(&w, 0, d.slots).is_err(), "not formatted");
        PageCache::format(&w, 0, d.slots).unwrap();
        let w2 = d.words(&m).unwrap();
        assert!(PageCache::attach(&w2, 0, d.slots).is_ok());
    }
}
