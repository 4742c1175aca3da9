//! The in-memory map of used data blocks. It is never stored: mount
//! rebuilds it from the inodes' extents.

use alloc::vec;
use alloc::vec::Vec;

/// One bit per block of the data area `[base, base + len)`; set = used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FreeMap {
    base: u64,
    len: u64,
    used: u64,
    bits: Vec<u64>,
}

impl FreeMap {
    /// All blocks of `[base, base + len)` free.
    pub fn new(base: u64, len: u64) -> FreeMap {
        let words = usize::try_from(len.div_ceil(64)).unwrap_or(usize::MAX);
        FreeMap {
            base,
            len,
            used: 0,
            bits: vec![0; words],
        }
    }

    /// Blocks in the data area.
    pub fn total(&self) -> u64 {
        self.len
    }

    /// Blocks in use.
    pub fn used(&self) -> u64 {
        self.used
    }

    fn index(&self, block: u64) -> Option<(usize, u64)> {
        let i = block.checked_sub(self.base)?;
        if i >= self.len {
            return None;
        }
        Some(((i / 64) as usize, 1u64 << (i % 64)))
    }

    /// Is `block` in the data area and free?
    pub fn is_free(&self, block: u64) -> bool {
        match self.index(block) {
            Some((w, m)) => self.bits.get(w).is_some_and(|x| x & m == 0),
            None => false,
        }
    }

    /// Mark `[start, start + len)` used or free. Blocks outside the area
    /// are ignored; the caller has checked the range.
    pub fn set(&mut self, start: u64, len: u64, used: bool) {
        for b in start..start.saturating_add(len) {
            let Some((w, m)) = self.index(b) else {
                continue;
            };
            let Some(word) = self.bits.get_mut(w) else {
                continue;
            };
            let was = *word & m != 0;
            if used && !was {
                *word |= m;
                self.used += 1;
            } else if !used && was {
                *word &= !m;
                self.used -= 1;
            }
        }
    }

    /// Free blocks starting at `start`, at most `max`.
    pub fn free_run_at(&self, start: u64, max: u64) -> u64 {
        let mut n = 0;
        while n < max && self.is_free(start + n) {
            n += 1;
        }
        n
    }

    /// Find free space for `want` blocks: the first free run at least
    /// `want` long, or failing that the longest run. Returns
    /// `(start, len)` with `len <= want`, or `None` if no block is free.
    pub fn find(&self, want: u64) -> Option<(u64, u64)> {
        let mut best: Option<(u64, u64)> = None;
        let mut i = 0u64;
        while i < self.len {
            let w = (i / 64) as usize;
            if i.is_multiple_of(64) && self.bits.get(w) == Some(&u64::MAX) {
                i += 64;
                continue;
            }
            let b = self.base + i;
            if !self.is_free(b) {
                i += 1;
                continue;
            }
            let run = self.free_run_at(b, want);
            if run >= want {
                return Some((b, want));
            }
            if best.is_none_or(|(_, l)| run > l) {
                best = Some((b, run));
            }
            i += run;
        }
        best
    }
}
