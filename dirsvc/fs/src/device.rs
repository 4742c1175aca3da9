//! The device under the file system: 4 KiB blocks, read, written and flushed.

use super::BLOCK_SIZE;

/// A device-level I/O failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoError;

/// A device of 4 KiB blocks.
pub trait BlockDevice {
    /// Size in 4 KiB blocks.
    fn block_count(&self) -> u64;
    /// Read block `lba` into `buf`.
    fn read_block(&mut self, lba: u64, buf: &mut [u8; BLOCK_SIZE]) -> Result<(), IoError>;
    /// Write `buf` to block `lba`.
    fn write_block(&mut self, lba: u64, buf: &[u8; BLOCK_SIZE]) -> Result<(), IoError>;
    /// Make every completed write durable.
    fn flush(&mut self) -> Result<(), IoError>;
}

impl<T: BlockDevice + ?Sized> BlockDevice for &mut T {
    fn block_count(&self) -> u64 {
        (**self).block_count()
    }
    fn read_block(&mut self, lba: u64, buf: &mut [u8; BLOCK_SIZE]) -> Result<(), IoError> {
        (**self).read_block(lba, buf)
    }
    fn write_block(&mut self, lba: u64, buf: &[u8; BLOCK_SIZE]) -> Result<(), IoError> {
        (**self).write_block(lba, buf)
    }
    fn flush(&mut self) -> Result<(), IoError> {
        (**self).flush()
    }
}
