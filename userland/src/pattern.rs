//! The deterministic content pattern written by `fill` (and later verified
//! by benchmarks).
//!
//! The byte at file offset `o` is
//!
//! ```text
//! ((o % 251) as u8) ^ ((o >> 12) as u8)
//! ```
//!
//! 251 is prime, so the pattern does not repeat with any power-of-two
//! period, and the `o >> 12` term makes every 4 KiB page differ from its
//! neighbours: a page read from the wrong offset is caught.
//!
//! **The host integration tests replicate this formula** to check from
//! the host what the cluster wrote to disk; change both together.

/// The pattern byte at file offset `offset`.
pub fn byte_at(offset: u64) -> u8 {
    ((offset % 251) as u8) ^ ((offset >> 12) as u8)
}

/// Fill `buf` with the pattern for the file range starting at `offset`.
pub fn fill(buf: &mut [u8], offset: u64) {
    let mut o = offset;
    for b in buf.iter_mut() {
        *b = byte_at(o);
        o = o.wrapping_add(1);
    }
}

/// Check `buf` against the pattern for the range starting at `offset`.
/// Returns the index in `buf` of the first mismatching byte, or `None` if
/// it all matches.
pub fn first_mismatch(buf: &[u8], offset: u64) -> Option<usize> {
    let mut o = offset;
    for (i, b) in buf.iter().enumerate() {
        if *b != byte_at(o) {
            return Some(i);
        }
        o = o.wrapping_add(1);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        assert_eq!(byte_at(0), 0);
        assert_eq!(byte_at(1), 1);
        assert_eq!(byte_at(250), 250);
        assert_eq!(byte_at(251), 0);
        assert_eq!(byte_at(252), 1);
        // 4096 % 251 = 80, 4096 >> 12 = 1.
        assert_eq!(byte_at(4096), 80 ^ 1);
        // 1 MiB: 1048576 % 251 = 149, >> 12 = 256 -> 0 as u8.
        assert_eq!(byte_at(1 << 20), 149);
        assert_eq!(byte_at(u64::MAX), ((u64::MAX % 251) as u8) ^ 0xff);
    }

    #[test]
    fn one_mebibyte_checksum_is_pinned() {
        // The host tests compute the same value from their own copy of the
        // formula (Python: zlib.crc32 over the same bytes gives 02344842).
        let mut buf = alloc::vec![0u8; 1 << 20];
        fill(&mut buf, 0);
        assert_eq!(crc32fast::hash(&buf), 0x0234_4842);
    }

    #[test]
    fn pages_differ() {
        let mut a = [0u8; 4096];
        let mut b = [0u8; 4096];
        for page in 0..64u64 {
            fill(&mut a, page * 4096);
            fill(&mut b, (page + 1) * 4096);
            assert_ne!(a, b, "page {page}");
        }
    }

    #[test]
    fn fill_matches_byte_at_and_check() {
        let mut buf = [0u8; 10_000];
        fill(&mut buf, 12_345);
        for (i, b) in buf.iter().enumerate() {
            assert_eq!(*b, byte_at(12_345 + i as u64));
        }
        assert_eq!(first_mismatch(&buf, 12_345), None);
        assert_eq!(first_mismatch(&buf, 12_346), Some(0));
        buf[777] ^= 1;
        assert_eq!(first_mismatch(&buf, 12_345), Some(777));
    }

    #[test]
    fn fill_at_end_of_range_does_not_overflow() {
        let mut buf = [0u8; 4];
        fill(&mut buf, u64::MAX - 1);
        assert_eq!(first_mismatch(&buf[..2], u64::MAX - 1), None);
    }
}
