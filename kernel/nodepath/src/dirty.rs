//! The bytes of a cached page that this node wrote: a write-back sends
//! those and nothing else (as an NFS client does). A page copy also holds
//! bytes read earlier, which another node may have rewritten since (an
//! append of its own, closed meanwhile): sent back whole, the copy would
//! write them over the newer bytes, or zeros where the copy was made past
//! the end of file.

use alloc::vec::Vec;
use core::ops::Range;

use fabric::proto::{Attr, Errno, Response};

use crate::link::WriteReq;
use crate::pagecache::PAGE;

/// Most separate ranges kept per page; past it the two closest merge
/// (the bytes between are sent too, as the copy holds them).
pub const MAX_RANGES: usize = 8;

/// Disjoint, sorted, non-adjacent byte ranges of one page.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DirtyBytes {
    ranges: Vec<(u16, u16)>,
}

impl DirtyBytes {
    /// The whole page.
    pub fn whole() -> DirtyBytes {
        DirtyBytes {
            ranges: alloc::vec![(0, PAGE as u16 - 1)],
        }
    }

    /// Bytes `r` of the page (clipped to it) were written.
    pub fn add(&mut self, r: Range<usize>) {
        let (lo, hi) = (r.start.min(PAGE), r.end.min(PAGE));
        if lo >= hi {
            return;
        }
        // Inclusive ends: a whole page fits a u16.
        let (mut lo, mut hi) = (lo as u16, (hi - 1) as u16);
        let mut out = Vec::with_capacity(self.ranges.len() + 1);
        for &(a, b) in &self.ranges {
            if b.saturating_add(1) < lo || hi.saturating_add(1) < a {
                out.push((a, b));
            } else {
                lo = lo.min(a);
                hi = hi.max(b);
            }
        }
        out.push((lo, hi));
        out.sort_unstable();
        while out.len() > MAX_RANGES {
            // Merge the pair with the smallest gap.
            let k = (0..out.len() - 1)
                .min_by_key(|&k| out[k + 1].0 - out[k].1)
                .unwrap_or(0);
            out[k].1 = out[k + 1].1;
            out.remove(k + 1);
        }
        self.ranges = out;
    }

    /// The ranges, as byte ranges of the page.
    pub fn ranges(&self) -> impl Iterator<Item = Range<usize>> + '_ {
        self.ranges.iter().map(|&(a, b)| a as usize..b as usize + 1)
    }

    /// Nothing written.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

/// The pieces of a run of pages to send: `len` bytes from page `first`
/// on (clipped to the file's size), the written bytes of page `first + k`
/// being `dirty(k)` (`None`: the whole page). Returns byte ranges of the
/// run, in order, adjacent ones merged (a run written whole is one
/// piece).
pub fn pieces<'a>(
    len: usize,
    pages: usize,
    dirty: impl Fn(usize) -> Option<&'a DirtyBytes>,
) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::new();
    for k in 0..pages {
        let base = k * PAGE;
        if base >= len {
            break;
        }
        let ranges: Vec<Range<usize>> = match dirty(k) {
            Some(d) => d.ranges().collect(),
            None => core::iter::once(0..PAGE).collect(),
        };
        for r in ranges {
            let (a, b) = (base + r.start, (base + r.end).min(len));
            if a >= b {
                continue;
            }
            match out.last_mut() {
                Some(last) if last.end == a => last.end = b,
                _ => out.push(a..b),
            }
        }
    }
    out
}

/// A run of contiguous pages of one file to write back, the same for a
/// synchronous write-back and a task's (in flight): pages `[first,
/// first + n)`, their bytes (clipped to the file's size: empty if wholly
/// past it) and the pieces of those bytes this node wrote ([`pieces`]),
/// which are all that is sent.
#[derive(Debug)]
pub struct Run {
    pub first: u64,
    pub n: usize,
    pub data: Vec<u8>,
    pub pieces: Vec<Range<usize>>,
}

impl Run {
    /// The run of `n` pages from `first` holding `data`, the written
    /// bytes of page `first + k` being `dirty(k)` (`None`: the whole
    /// page).
    pub fn new<'a>(
        first: u64,
        n: usize,
        data: Vec<u8>,
        dirty: impl Fn(usize) -> Option<&'a DirtyBytes>,
    ) -> Run {
        let pieces = pieces(data.len(), n, dirty);
        Run {
            first,
            n,
            data,
            pieces,
        }
    }

    /// Byte offset in the file of `piece`.
    pub fn offset(&self, piece: &Range<usize>) -> u64 {
        self.first * PAGE as u64 + piece.start as u64
    }

    /// The file-server writes of the pieces, in order, to generation
    /// `gen` of `ino`.
    pub fn writes(&self, ino: u64, gen: u64) -> impl Iterator<Item = WriteReq<'_>> {
        self.pieces.iter().map(move |p| WriteReq {
            ino,
            gen,
            offset: self.offset(p),
            data: &self.data[p.clone()],
        })
    }
}

/// Does a write-back's failure `e`, reported to a close or fsync, lose
/// what it could not write? Every answer the directory gave does (a disk
/// error, no space, a stale file, a teardown outlasting the call
/// timeout); no answer (`Unavailable`: the directory may be back, or the
/// node leaves the cache and loses them then) keeps them dirty for the
/// next write-back.
pub fn drops_unwritten(e: Errno) -> bool {
    e != Errno::Unavailable
}

/// What the answer to a piece's write of `len` bytes says: the file's
/// attributes after it, or why it failed (the directory's own error,
/// such as no space, where it gave one).
pub fn written(answer: Option<&Response>, len: usize) -> Result<&Attr, Errno> {
    match answer {
        Some(Response::Data { bytes, attr }) if *bytes as usize >= len => Ok(attr),
        Some(Response::Err(e)) => Err(*e),
        _ => Err(Errno::Io),
    }
}

#[cfg(test)]
// One-range slices are what the tests mean: a page's written ranges.
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;

    fn of(rs: &[Range<usize>]) -> DirtyBytes {
        let mut d = DirtyBytes::default();
        for r in rs {
            d.add(r.clone());
        }
        d
    }

    #[test]
    fn ranges_merge_when_they_touch_or_overlap() {
        let d = of(&[10..20, 30..40, 20..25, 35..50]);
        assert_eq!(d.ranges().collect::<Vec<_>>(), [10..25, 30..50]);
        let d = of(&[0..PAGE, 5..6]);
        assert_eq!(d, DirtyBytes::whole());
        assert!(of(&[7..7]).is_empty());
        assert_eq!(of(&[4000..5000]).ranges().collect::<Vec<_>>(), [4000..PAGE]);
    }

    #[test]
    fn too_many_ranges_merge_the_closest() {
        let rs: Vec<Range<usize>> = (0..=MAX_RANGES).map(|k| k * 100..k * 100 + 10).collect();
        let mut d = of(&rs);
        d.add(2000..2001);
        assert!(d.ranges().count() <= MAX_RANGES);
        for r in rs {
            assert!(d.ranges().any(|x| x.start <= r.start && x.end >= r.end));
        }
    }

    #[test]
    fn pieces_follow_the_written_bytes_and_the_size() {
        let a = of(&[100..PAGE]);
        let b = of(&[0..50, 70..80]);
        let d = [Some(&a), Some(&b)];
        assert_eq!(
            pieces(PAGE + 75, 2, |k| d[k]),
            [100..PAGE + 50, PAGE + 70..PAGE + 75]
        );
        assert_eq!(pieces(2 * PAGE, 2, |_| None), [0..2 * PAGE]);
        assert_eq!(pieces(10, 2, |_| None), [0..10]);
    }
}
