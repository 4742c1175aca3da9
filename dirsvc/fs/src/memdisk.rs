//! A `Vec`-backed [`BlockDevice`] for tests (only with `cfg(test)` or
//! the `testing` feature, never in the product build).

use alloc::vec;
use alloc::vec::Vec;

use super::{BlockDevice, IoError, BLOCK_SIZE};

/// A disk in memory, with counters and optional write-failure injection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemDisk {
    data: Vec<u8>,
    reads: u64,
    writes: u64,
    flushes: u64,
    writes_left: Option<u64>,
}

impl MemDisk {
    /// A zeroed disk of `blocks` 4 KiB blocks.
    pub fn new(blocks: u64) -> MemDisk {
        let len = usize::try_from(blocks)
            .ok()
            .and_then(|b| b.checked_mul(BLOCK_SIZE))
            .unwrap_or(0);
        MemDisk::from_bytes(vec![0; len])
    }

    /// A disk holding `bytes` (a trailing partial block is not addressable).
    pub fn from_bytes(bytes: Vec<u8>) -> MemDisk {
        MemDisk {
            data: bytes,
            ..MemDisk::default()
        }
    }

    /// The whole disk.
    pub fn blocks(&self) -> &[u8] {
        &self.data
    }

    /// The whole disk, writable (to damage an image in tests). Not counted
    /// as device writes.
    pub fn blocks_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }

    /// Take the bytes back.
    pub fn into_bytes(self) -> Vec<u8> {
        self.data
    }

    /// Successful and failed `read_block` calls so far.
    pub fn reads(&self) -> u64 {
        self.reads
    }

    /// Successful and failed `write_block` calls so far.
    pub fn writes(&self) -> u64 {
        self.writes
    }

    /// `flush` calls so far.
    pub fn flushes(&self) -> u64 {
        self.flushes
    }

    /// Let `n` more writes succeed, then fail every write (`None`: never
    /// fail).
    pub fn fail_writes_after(&mut self, n: Option<u64>) {
        self.writes_left = n;
    }

    fn range(&self, lba: u64) -> Option<core::ops::Range<usize>> {
        let start = usize::try_from(lba).ok()?.checked_mul(BLOCK_SIZE)?;
        let end = start.checked_add(BLOCK_SIZE)?;
        (end <= self.data.len()).then_some(start..end)
    }
}

impl BlockDevice for MemDisk {
    fn block_count(&self) -> u64 {
        (self.data.len() / BLOCK_SIZE) as u64
    }

    fn read_block(&mut self, lba: u64, buf: &mut [u8; BLOCK_SIZE]) -> Result<(), IoError> {
        self.reads += 1;
        let r = self.range(lba).ok_or(IoError)?;
        buf.copy_from_slice(&self.data[r]);
        Ok(())
    }

    fn write_block(&mut self, lba: u64, buf: &[u8; BLOCK_SIZE]) -> Result<(), IoError> {
        self.writes += 1;
        if let Some(left) = self.writes_left.as_mut() {
            if *left == 0 {
                return Err(IoError);
            }
            *left -= 1;
        }
        let r = self.range(lba).ok_or(IoError)?;
        self.data[r].copy_from_slice(buf);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), IoError> {
        self.flushes += 1;
        Ok(())
    }
}
