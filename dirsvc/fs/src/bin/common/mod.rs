//! Shared by the host tools (`mkfs`, `inspect`): a [`BlockDevice`] over an
//! image file.

// Each tool uses only part of this module.
#![allow(dead_code)]

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use flatfs::{BlockDevice, IoError, BLOCK_SIZE};

/// An image file seen as a block device. A trailing partial block is not
/// addressable. Opened read-only, every write fails.
pub struct FileDisk {
    file: File,
    blocks: u64,
    writable: bool,
}

impl FileDisk {
    /// Open an existing image for reading only.
    pub fn open_read_only(path: &Path) -> io::Result<FileDisk> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        Ok(FileDisk {
            file,
            blocks: len / BLOCK_SIZE as u64,
            writable: false,
        })
    }

    /// Create (or truncate) an image of `blocks` zero blocks, sparse where
    /// the host file system allows.
    pub fn create(path: &Path, blocks: u64) -> io::Result<FileDisk> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        let len = blocks
            .checked_mul(BLOCK_SIZE as u64)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "image too large"))?;
        file.set_len(len)?;
        Ok(FileDisk {
            file,
            blocks,
            writable: true,
        })
    }

    /// Flush the file to stable storage.
    pub fn sync_all(&self) -> io::Result<()> {
        self.file.sync_all()
    }

    fn offset(&self, lba: u64) -> Result<u64, IoError> {
        if lba >= self.blocks {
            return Err(IoError);
        }
        lba.checked_mul(BLOCK_SIZE as u64).ok_or(IoError)
    }
}

impl BlockDevice for FileDisk {
    fn block_count(&self) -> u64 {
        self.blocks
    }

    fn read_block(&mut self, lba: u64, buf: &mut [u8; BLOCK_SIZE]) -> Result<(), IoError> {
        let off = self.offset(lba)?;
        self.file.read_exact_at(buf, off).map_err(|_| IoError)
    }

    fn write_block(&mut self, lba: u64, buf: &[u8; BLOCK_SIZE]) -> Result<(), IoError> {
        if !self.writable {
            return Err(IoError);
        }
        let off = self.offset(lba)?;
        self.file.write_all_at(buf, off).map_err(|_| IoError)
    }

    fn flush(&mut self) -> Result<(), IoError> {
        if self.writable {
            self.file.sync_data().map_err(|_| IoError)?;
        }
        Ok(())
    }
}
