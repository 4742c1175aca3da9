//! `locality PATH`'s records: where a run of a file's pages lives (the
//! owner node and how many nodes map them, or nowhere but the disk), as
//! the directory writes them into the bulk slot of an [`Op::Locality`]
//! answer.
//!
//! [`Op::Locality`]: super::Op::Locality

use super::DecodeError;

/// Bytes of one record: first page (8), page count (4), owner (1),
/// sharers (1), two zero bytes.
pub const LOCALITY_RECORD: usize = 16;

/// A run of consecutive pages with the same owner and sharer count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalityRange {
    /// First page of the run.
    pub first: u64,
    /// Pages in the run (at least 1).
    pub pages: u32,
    /// Owner node (1..=64), or 0: cached nowhere, on disk only.
    pub owner: u8,
    /// Nodes mapping the pages besides the owner (0 when on disk only).
    pub sharers: u8,
}

impl LocalityRange {
    /// The wire record.
    pub fn encode(&self) -> [u8; LOCALITY_RECORD] {
        let mut b = [0u8; LOCALITY_RECORD];
        b[..8].copy_from_slice(&self.first.to_le_bytes());
        b[8..12].copy_from_slice(&self.pages.to_le_bytes());
        b[12] = self.owner;
        b[13] = self.sharers;
        b
    }

    /// Decode one record; a short buffer, an empty run, an owner above 64,
    /// sharers on disk-only pages or non-zero padding are errors.
    pub fn decode(b: &[u8]) -> Result<LocalityRange, DecodeError> {
        let b: &[u8; LOCALITY_RECORD] = b
            .get(..LOCALITY_RECORD)
            .and_then(|s| s.try_into().ok())
            .ok_or(DecodeError::BadArgument)?;
        let mut first = [0u8; 8];
        first.copy_from_slice(&b[..8]);
        let mut pages = [0u8; 4];
        pages.copy_from_slice(&b[8..12]);
        let r = LocalityRange {
            first: u64::from_le_bytes(first),
            pages: u32::from_le_bytes(pages),
            owner: b[12],
            sharers: b[13],
        };
        let bad = r.pages == 0
            || r.owner > 64
            || r.sharers > 64
            || (r.owner == 0 && r.sharers != 0)
            || b[14] != 0
            || b[15] != 0
            || r.first.checked_add(u64::from(r.pages)).is_none();
        if bad {
            return Err(DecodeError::BadArgument);
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_bad_ones_are_refused() {
        let r = LocalityRange {
            first: 7,
            pages: 9,
            owner: 2,
            sharers: 3,
        };
        assert_eq!(LocalityRange::decode(&r.encode()), Ok(r));
        let disk = LocalityRange {
            owner: 0,
            sharers: 0,
            ..r
        };
        assert_eq!(LocalityRange::decode(&disk.encode()), Ok(disk));
        let e = Err(DecodeError::BadArgument);
        assert_eq!(LocalityRange::decode(&r.encode()[..15]), e);
        for (i, v) in [(8, 0u8), (12, 65), (13, 65), (14, 1), (15, 9)] {
            let mut b = r.encode();
            if i == 8 {
                b[8..12].fill(0);
            } else {
                b[i] = v;
            }
            assert_eq!(LocalityRange::decode(&b), e, "byte {i}");
        }
        let mut b = disk.encode();
        b[13] = 1;
        assert_eq!(LocalityRange::decode(&b), e);
        let mut b = r.encode();
        b[..8].fill(0xff);
        assert_eq!(LocalityRange::decode(&b), e);
    }
}
