//! The device under the file system: 4 KiB blocks, read, written and flushed.
//!
//! A device may also take reads and writes without waiting for them
//! ([`BlockDevice::submit_read`], [`BlockDevice::submit_write`],
//! [`BlockDevice::poll_reads`]): the directory's page fills and write-backs
//! use that to keep several requests in flight while it goes on serving.
//! The default is a synchronous device (queue depth 0).

use alloc::boxed::Box;
use alloc::vec::Vec;

use super::BLOCK_SIZE;

/// A finished asynchronous request: a read ([`BlockDevice::submit_read`])
/// or a write ([`BlockDevice::submit_write`]).
#[derive(Debug)]
pub struct ReadDone {
    /// The id it was submitted with.
    pub id: u64,
    /// A read: the block's bytes; a write: the bytes written, given back.
    /// Or the device's error.
    pub result: Result<Box<[u8; BLOCK_SIZE]>, IoError>,
}

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

    /// Most reads [`BlockDevice::submit_read`] keeps in flight at once;
    /// 0 (the default): the device is synchronous only.
    fn queue_depth(&self) -> usize {
        0
    }

    /// Start reading block `lba` without waiting; the completion carries
    /// `id`. The caller keeps at most [`BlockDevice::queue_depth`] reads in
    /// flight. `Err`: the read could not be started (it will not complete).
    /// Synchronous reads and writes may be issued while reads are in
    /// flight; a read in flight and a write of the same block are not
    /// ordered (the caller orders them).
    fn submit_read(&mut self, id: u64, lba: u64) -> Result<(), IoError> {
        let _ = (id, lba);
        Err(IoError)
    }

    /// Start writing `buf` to block `lba` without waiting; the completion
    /// ([`BlockDevice::poll_reads`]) carries `id`. Reads and writes in
    /// flight share [`BlockDevice::queue_depth`] and are not ordered among
    /// themselves (the caller orders writes of one block). `Err`: the write
    /// could not be started (it will not complete).
    fn submit_write(
        &mut self,
        id: u64,
        lba: u64,
        buf: Box<[u8; BLOCK_SIZE]>,
    ) -> Result<(), IoError> {
        let _ = (id, lba, buf);
        Err(IoError)
    }

    /// Most blocks one [`BlockDevice::submit_write_run`] takes; 1 (the
    /// default): every write is one block.
    fn max_write_run(&self) -> usize {
        1
    }

    /// Start writing `bufs` to the consecutive blocks from `lba` as one
    /// device request (at most [`BlockDevice::max_write_run`] blocks),
    /// without waiting; one completion carries `id` (its data: the first
    /// block's bytes) and stands for every block of the run: landed or
    /// failed together. Takes one slot of [`BlockDevice::queue_depth`].
    /// The default takes one block through [`BlockDevice::submit_write`].
    fn submit_write_run(
        &mut self,
        id: u64,
        lba: u64,
        bufs: Vec<Box<[u8; BLOCK_SIZE]>>,
    ) -> Result<(), IoError> {
        let mut bufs = bufs;
        match (bufs.pop(), bufs.is_empty()) {
            (Some(b), true) => self.submit_write(id, lba, b),
            _ => Err(IoError),
        }
    }

    /// Start a flush without waiting: it makes durable the writes that
    /// completed before it was submitted; its completion
    /// ([`BlockDevice::poll_reads`]) carries `id` (and no data). Shares
    /// [`BlockDevice::queue_depth`]. `Err`: not started (the caller flushes
    /// synchronously).
    fn submit_flush(&mut self, id: u64) -> Result<(), IoError> {
        let _ = id;
        Err(IoError)
    }

    /// Move the requests (reads and writes) that completed since the last
    /// call to `out`, in the order the device finished them (any order
    /// relative to submission).
    fn poll_reads(&mut self, out: &mut Vec<ReadDone>) {
        let _ = out;
    }

    /// Like [`BlockDevice::poll_reads`], but wait until at least one
    /// request completes if any is in flight. Bounded: a device that does not
    /// answer within its own timeout reports the read failed.
    fn wait_reads(&mut self, out: &mut Vec<ReadDone>) {
        self.poll_reads(out);
    }
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
    fn queue_depth(&self) -> usize {
        (**self).queue_depth()
    }
    fn submit_read(&mut self, id: u64, lba: u64) -> Result<(), IoError> {
        (**self).submit_read(id, lba)
    }
    fn submit_write(
        &mut self,
        id: u64,
        lba: u64,
        buf: Box<[u8; BLOCK_SIZE]>,
    ) -> Result<(), IoError> {
        (**self).submit_write(id, lba, buf)
    }
    fn max_write_run(&self) -> usize {
        (**self).max_write_run()
    }
    fn submit_write_run(
        &mut self,
        id: u64,
        lba: u64,
        bufs: Vec<Box<[u8; BLOCK_SIZE]>>,
    ) -> Result<(), IoError> {
        (**self).submit_write_run(id, lba, bufs)
    }
    fn submit_flush(&mut self, id: u64) -> Result<(), IoError> {
        (**self).submit_flush(id)
    }
    fn poll_reads(&mut self, out: &mut Vec<ReadDone>) {
        (**self).poll_reads(out)
    }
    fn wait_reads(&mut self, out: &mut Vec<ReadDone>) {
        (**self).wait_reads(out)
    }
}
