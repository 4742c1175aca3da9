//! Delegated ownership (strong mode, boot option `delegation`): a node
//! that alone holds a range of a file gets the whole range in one
//! request and then allocates, writes, extends and frees its pages in its
//! own frames without a directory call per page.
//!
//! A delegation covers one [`DelegRange`]: [`DELEG_PAGES`] pages of one
//! file, aligned. The holder keeps the list of the pages it holds under
//! it in one frame of its own pool, the *list frame* named in its
//! request ([`DelegList`]): the directory reads that frame when the
//! delegation ends, so it learns every page (frame, dirty) with one
//! message, and it can still read it when the holder failed (the region
//! survives a node).
//!
//! Messages:
//!
//! | message | ring | wire |
//! | --- | --- | --- |
//! | DELEGATE ([`super::PageReq::Delegate`]) | request | `[ino, base, list frame]` -> [`super::PageReply::Delegated`] |
//! | RECALL ([`super::Notice::Recall`]) | notify | `[ino, base]`, no ack of its own |
//! | DELEG_RETURN ([`super::PageReq::DelegReturn`]) | request | `[ino, base]` -> `Done` |
//!
//! A recall is answered by the holder's DELEG_RETURN (the recall's ack):
//! the holder first lets its stores into the range's pages finish, writes
//! the final list, and from its sending on treats the listed pages as
//! ordinary owned pages. The directory reads the list, installs the pages
//! as owned (the dirty ones dirty) and only then serves the requests that
//! waited for the recall; its `Done` tells the holder the list frame is
//! free again. A holder returns a delegation on its own the same way.
//!
//! A list is untrusted: decoding checks every record ([`DelegList::decode`]),
//! and the directory installs only pages in frames of the holder's pool.

use super::{DecodeError, PageKey, PageSpan};
use crate::PAGE_SIZE;

/// Pages one delegation covers (one 8-byte record each in a 4 KiB list
/// frame): 2 MiB of a file.
pub const DELEG_PAGES: u64 = (PAGE_SIZE / DELEG_RECORD) as u64;

/// Bytes of one record of a [`DelegList`].
pub const DELEG_RECORD: usize = 8;

/// A delegated range: pages `base..base + DELEG_PAGES` of file `ino`
/// (`base` a multiple of [`DELEG_PAGES`]; decoding checks it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DelegRange {
    /// Inode.
    pub ino: u64,
    /// First page index (a multiple of [`DELEG_PAGES`]).
    pub base: u64,
}

impl DelegRange {
    /// The range holding `key`.
    pub fn of(key: PageKey) -> DelegRange {
        DelegRange {
            ino: key.ino,
            base: key.idx - key.idx % DELEG_PAGES,
        }
    }

    /// The range of `ino` from `base`, if `base` is aligned.
    pub fn new(ino: u64, base: u64) -> Option<DelegRange> {
        base.is_multiple_of(DELEG_PAGES)
            .then_some(DelegRange { ino, base })
    }

    /// Last page index (inclusive). The highest page index is in no
    /// range, so a range's [`PageSpan`] never reaches past the index space.
    pub fn last(&self) -> u64 {
        self.base.saturating_add(DELEG_PAGES - 1).min(u64::MAX - 1)
    }

    /// Is `key` one of its pages?
    pub fn contains(&self, key: &PageKey) -> bool {
        key.ino == self.ino && key.idx >= self.base && key.idx <= self.last()
    }

    /// Its pages as a span.
    pub fn span(&self) -> PageSpan {
        PageSpan {
            ino: self.ino,
            first: self.base,
            count: self.last() - self.base + 1,
        }
    }

    /// Page `i` of the range.
    pub fn key(&self, i: u64) -> PageKey {
        PageKey {
            ino: self.ino,
            idx: self.base + i,
        }
    }
}

/// The directory's delegation counters, the answer to
/// [`super::Op::DelegStats`] (`dir stats`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DelegStats {
    /// Delegations granted.
    pub granted: u64,
    /// DELEGATEs not granted.
    pub denied: u64,
    /// RECALLs sent.
    pub recalled: u64,
    /// Delegations given back (on a recall or on the holder's own).
    pub returned: u64,
    /// Pages learnt from the holders' lists.
    pub pages: u64,
    /// Requests that waited for a recall.
    pub parked: u64,
}

impl DelegStats {
    /// The descriptor arguments, in wire order.
    pub fn to_args(&self) -> [u64; 7] {
        [
            self.granted,
            self.denied,
            self.recalled,
            self.returned,
            self.pages,
            self.parked,
            0,
        ]
    }

    /// From the descriptor arguments (every value is valid).
    pub fn from_args(a: [u64; 7]) -> DelegStats {
        let [granted, denied, recalled, returned, pages, parked, _] = a;
        DelegStats {
            granted,
            denied,
            recalled,
            returned,
            pages,
            parked,
        }
    }
}

/// One page held under a delegation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DelegPage {
    /// Page.
    pub key: PageKey,
    /// The holder's frame holding it.
    pub gfn: u64,
    /// Written since it was last on the disk.
    pub dirty: bool,
}

/// The list frame's format: record `i` (bytes `8*i..8*i+8`, little
/// endian) describes page `base + i` of the range:
///
/// | bits | field |
/// | --- | --- |
/// | 0 | present: the holder holds the page |
/// | 1 | dirty |
/// | 2..32 | zero |
/// | 32..64 | the frame, a `u32` global frame number |
///
/// A zero record is an absent page; any other bit pattern with bit 0
/// clear, or with a bit of 2..32 set, is malformed.
pub struct DelegList;

impl DelegList {
    /// The record of a page held in frame `gfn` (`None` if the frame
    /// number does not fit 32 bits: such a page cannot be delegated).
    pub fn record(gfn: u64, dirty: bool) -> Option<u64> {
        let gfn = u32::try_from(gfn).ok()?;
        Some((u64::from(gfn) << 32) | (u64::from(dirty) << 1) | 1)
    }

    /// Decode one record: `Ok(None)` for an absent page.
    pub fn decode_record(r: u64) -> Result<Option<(u64, bool)>, DecodeError> {
        if r == 0 {
            return Ok(None);
        }
        if r & 1 == 0 || r & 0xffff_fffc != 0 {
            return Err(DecodeError::BadArgument);
        }
        Ok(Some((r >> 32, r & 2 != 0)))
    }

    /// Decode a whole list frame of `range` (`bytes` one frame, at least
    /// [`DELEG_PAGES`] records): the pages held, in order. A malformed
    /// record is an error: the directory then installs nothing it read
    /// from this list (it treats the holder as having lost its pages).
    pub fn decode(
        range: DelegRange,
        bytes: &[u8],
    ) -> Result<alloc::vec::Vec<DelegPage>, DecodeError> {
        let mut out = alloc::vec::Vec::new();
        let n = range.last() - range.base + 1;
        for i in 0..n {
            let at = i as usize * DELEG_RECORD;
            let rec = bytes
                .get(at..at + DELEG_RECORD)
                .ok_or(DecodeError::BadArgument)?;
            let mut w = [0u8; DELEG_RECORD];
            w.copy_from_slice(rec);
            if let Some((gfn, dirty)) = Self::decode_record(u64::from_le_bytes(w))? {
                out.push(DelegPage {
                    key: range.key(i),
                    gfn,
                    dirty,
                });
            }
        }
        Ok(out)
    }

    /// Encode `pages` (all of `range`) into a list frame image.
    pub fn encode(range: DelegRange, pages: &[DelegPage]) -> Option<alloc::vec::Vec<u8>> {
        let mut out = alloc::vec![0u8; PAGE_SIZE];
        for p in pages {
            if !range.contains(&p.key) {
                return None;
            }
            let at = (p.key.idx - range.base) as usize * DELEG_RECORD;
            let r = Self::record(p.gfn, p.dirty)?;
            out[at..at + DELEG_RECORD].copy_from_slice(&r.to_le_bytes());
        }
        Some(out)
    }
}
