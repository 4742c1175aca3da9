//! Bulk slots: where a request's variable-length data travels.

use crate::layout::Layout;
use crate::proto::Errno;
use crate::shm::SharedMem;

/// The bulk slots a request's variable-length data travels through, as
/// [`Directory`] sees them while it executes one request.
///
/// On the ring path this is the requesting node's slots in the shared region
/// ([`ShmBulk`]); in `net` mode it is a set of local buffers that the
/// request's payload was copied into and the answer's payload is taken from
/// ([`crate::netwire::NetBulk`]). Slot numbers and byte ranges come from
/// untrusted requests: implementations check them and answer
/// [`Errno::Invalid`], never panic.
pub trait Bulk {
    /// Capacity of `slot`, or `None` if no such slot.
    fn cap(&self, slot: u32) -> Option<usize>;
    /// Copy the first `buf.len()` bytes of `slot` into `buf`.
    fn read(&self, slot: u32, buf: &mut [u8]) -> Result<(), Errno>;
    /// Write `data` at byte `at` of `slot`.
    fn write(&mut self, slot: u32, at: usize, data: &[u8]) -> Result<(), Errno>;
}

/// The bulk slots of one node in the shared region (the ring path).
pub struct ShmBulk<'a, M: SharedMem + ?Sized> {
    mem: &'a M,
    layout: Layout,
    node: u32,
}

impl<'a, M: SharedMem + ?Sized> ShmBulk<'a, M> {
    /// `node`'s slots in the region described by `layout`.
    pub fn new(mem: &'a M, layout: Layout, node: u32) -> ShmBulk<'a, M> {
        ShmBulk { mem, layout, node }
    }

    /// Region offset of `len` bytes at `at` in `slot`, if they fit.
    fn range(&self, slot: u32, at: usize, len: usize) -> Result<usize, Errno> {
        let (off, cap) = self
            .layout
            .bulk_slot(self.node, slot)
            .ok_or(Errno::Invalid)?;
        match at.checked_add(len) {
            Some(end) if end <= cap => Ok(off + at),
            _ => Err(Errno::Invalid),
        }
    }
}

impl<M: SharedMem + ?Sized> ShmBulk<'_, M> {
    /// Copy `buf.len()` bytes at byte `at` of `slot` into `buf` (a
    /// sub-slot: several requests' data side by side in one slot).
    pub fn read_at(&self, slot: u32, at: usize, buf: &mut [u8]) -> Result<(), Errno> {
        let off = self.range(slot, at, buf.len())?;
        self.mem.read(off, buf);
        Ok(())
    }
}

impl<M: SharedMem + ?Sized> Bulk for ShmBulk<'_, M> {
    fn cap(&self, slot: u32) -> Option<usize> {
        self.layout.bulk_slot(self.node, slot).map(|(_, cap)| cap)
    }

    fn read(&self, slot: u32, buf: &mut [u8]) -> Result<(), Errno> {
        let off = self.range(slot, 0, buf.len())?;
        self.mem.read(off, buf);
        Ok(())
    }

    fn write(&mut self, slot: u32, at: usize, data: &[u8]) -> Result<(), Errno> {
        let off = self.range(slot, at, data.len())?;
        self.mem.write(off, data);
        Ok(())
    }
}
