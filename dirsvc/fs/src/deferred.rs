//! Deferred writes: the file system's block writes handed to the caller
//! instead of the device, so a caller with an asynchronous device (the
//! directory) can keep serving while they are in flight.
//!
//! Between [`Fs::begin_deferred`] and [`Fs::end_deferred`] every block
//! write of an operation ([`Fs::write`], [`Fs::set_size`], ...) updates
//! the caches as usual but goes to a list of [`Staged`] writes, and to an
//! overlay that every later read of the file system consults first: a read
//! of a block whose write is staged or in flight sees the new bytes, never
//! the device's older ones. The caller groups staged writes in jobs
//! ([`Fs::coalesce_staged`], which also ends the job for the checksum
//! table) and writes each job to the device in [`Fs::write_phase`] order
//! (the checksum-table blocks, then the data blocks they cover, then
//! inode-table blocks and the superblock: the order the synchronous path
//! writes them in, so a crash never leaves a data block matching no
//! checksum nor a record that points at blocks whose checksums were never
//! written), at most one write of a block in flight at a time and in the
//! order they were staged, a job's first phase only once every earlier
//! write of its data blocks completed (see `sums`), and reports each
//! landed write with [`Fs::write_landed`] or failed with
//! [`Fs::write_failed`].
//!
//! While deferred writes are in flight the caller must not use the
//! synchronous path for writes (it would race them on the device).

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use super::{BlockDevice, Fs, BLOCK_SIZE};

/// The write phase of data blocks ([`Fs::write_phase`]): a job's earlier
/// phase (its checksum-table blocks) goes out only once every earlier
/// write of its data blocks completed (see the module doc).
pub const DATA_PHASE: u8 = 1;

/// One block write the caller owes the device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Staged {
    /// Device block.
    pub lba: u64,
    /// Its bytes.
    pub buf: Box<[u8; BLOCK_SIZE]>,
}

impl<D: BlockDevice> Fs<D> {
    /// Start staging block writes instead of writing them (see the module
    /// doc). Nested calls keep the writes staged so far.
    pub fn begin_deferred(&mut self) {
        if self.staged.is_none() {
            self.staged = Some(Vec::new());
        }
    }

    /// Stop staging; the writes staged since [`Fs::begin_deferred`], in
    /// the order the file system made them.
    pub fn end_deferred(&mut self) -> Vec<Staged> {
        self.staged.take().unwrap_or_default()
    }

    /// The write phase of device block `lba`: 0 checksum table,
    /// [`DATA_PHASE`] data, 2 inode table or superblock. A phase's writes
    /// may land in any order among themselves; a later phase only after
    /// the earlier ones.
    pub fn write_phase(&self, lba: u64) -> u8 {
        if lba >= self.sb.data_start {
            DATA_PHASE
        } else if lba >= self.sb.sums_start {
            0
        } else {
            2
        }
    }

    /// The staged or in-flight bytes of device block `lba`, if a deferred
    /// write of it has not landed yet (a page fill must use them: the
    /// device may still hold the block's older bytes).
    pub fn pending_block(&self, lba: u64) -> Option<&[u8; BLOCK_SIZE]> {
        self.overlay.get(&lba).map(|(_, b)| &**b)
    }

    /// Blocks with deferred writes staged or in flight.
    pub fn pending_blocks(&self) -> usize {
        self.overlay.len()
    }

    /// Keep only the last staged write of each block in `staged` (one
    /// batch the caller writes as one job, in phase order), and end the
    /// job for the checksum table (a later write of its data blocks
    /// records their checksum now as the one before: see `sums`): consecutive
    /// writes of one file stage its checksum-table and inode-table blocks
    /// once per write, and only the last bytes matter (each is encoded
    /// from the caches, so it holds every earlier change). Data blocks
    /// keep their order; every dropped write counts as landed for the
    /// overlay, whose newest bytes are the kept write's. A page
    /// write-back batch of 32 pages of one file goes from 96 device
    /// writes to 34.
    pub fn coalesce_staged(&mut self, staged: Vec<Staged>) -> Vec<Staged> {
        let out = self.dedup_staged(staged);
        self.sums.seal(out.iter().map(|s| s.lba));
        out
    }

    /// Keep only the last staged write of each block in `staged`, as
    /// [`Fs::coalesce_staged`], without ending the job: for a caller that
    /// stages a long job in parts (a write-back of many pages) and keeps
    /// what it holds small.
    pub fn dedup_staged(&mut self, staged: Vec<Staged>) -> Vec<Staged> {
        let mut last: BTreeMap<u64, usize> = BTreeMap::new();
        for (i, s) in staged.iter().enumerate() {
            last.insert(s.lba, i);
        }
        let mut out = Vec::with_capacity(last.len());
        for (i, s) in staged.into_iter().enumerate() {
            if last.get(&s.lba) == Some(&i) {
                out.push(s);
            } else {
                // Never written: the kept write holds its bytes.
                self.write_done(s.lba);
                self.writes = self.writes.saturating_sub(1);
            }
        }
        out
    }

    /// One deferred write of `lba` reached the device (the caller lands
    /// a block's writes in staging order). Once the last one has, reads go
    /// to the device again.
    pub fn write_landed(&mut self, lba: u64) {
        if self.write_done(lba) {
            // The device holds the block's newest bytes.
            self.sums.landed(lba);
        }
    }

    /// A deferred write of `lba` was never sent (its job failed before
    /// it): the device keeps the block's older bytes, which its checksum
    /// entry still accepts.
    pub fn write_skipped(&mut self, lba: u64) {
        self.write_done(lba);
        self.writes = self.writes.saturating_sub(1);
    }

    /// Count one write of `lba` done; true once none is pending.
    fn write_done(&mut self, lba: u64) -> bool {
        let Some(e) = self.overlay.get_mut(&lba) else {
            return false;
        };
        e.0 = e.0.saturating_sub(1);
        if e.0 == 0 {
            self.overlay.remove(&lba);
            return true;
        }
        false
    }

    /// One deferred write of `lba` failed: the device's block is unknown.
    /// Once no newer write of it is pending, reads go to the device again
    /// (a data block whose bytes do not match its checksum reads as an I/O
    /// error, as after a failed synchronous write).
    pub fn write_failed(&mut self, lba: u64) {
        log::warn!("fs: deferred write of device block {lba} failed");
        self.write_done(lba);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemDisk;

    #[test]
    fn coalesced_batches_write_each_block_once_and_read_back_the_newest() {
        let mut fs = Fs::format(MemDisk::new(256), 16).unwrap();
        let ino = fs.create("/f", false).unwrap().ino;
        fs.write(ino, 0, &[1u8; 4 * BLOCK_SIZE]).unwrap();
        let before = fs.stats().disk_writes;
        fs.begin_deferred();
        for b in 0..4u64 {
            fs.write(ino, b * BLOCK_SIZE as u64, &[b as u8 + 5; BLOCK_SIZE])
                .unwrap();
        }
        let staged = fs.end_deferred();
        assert_eq!(staged.len(), 12, "data, checksums, record per write");
        let out = fs.coalesce_staged(staged);
        let mut phases: Vec<u8> = out.iter().map(|s| fs.write_phase(s.lba)).collect();
        phases.sort();
        assert_eq!(phases, vec![0, 1, 1, 1, 1, 2], "1 + 4 data blocks + 1");
        assert_eq!(
            fs.stats().disk_writes - before,
            6,
            "only the writes that go to the device count"
        );
        // Before they land reads see the new bytes; after, the device has them.
        let mut buf = vec![0u8; 4 * BLOCK_SIZE];
        fs.read(ino, 0, &mut buf).unwrap();
        for s in &out {
            fs.device_mut().write_block(s.lba, &s.buf).unwrap();
            fs.write_landed(s.lba);
        }
        assert_eq!(fs.pending_blocks(), 0, "nothing left in the overlay");
        let mut fs = Fs::mount(fs.into_device()).unwrap();
        let mut after = vec![0u8; 4 * BLOCK_SIZE];
        fs.read(ino, 0, &mut after).unwrap();
        assert_eq!(buf, after);
        for b in 0..4 {
            assert!(after[b * BLOCK_SIZE..(b + 1) * BLOCK_SIZE]
                .iter()
                .all(|&x| x == b as u8 + 5));
        }
        assert_eq!(fs.check_data(), Ok(vec![]));
    }

    #[test]
    fn deferred_writes_are_staged_in_phase_order_and_read_back_before_they_land() {
        let mut fs = Fs::format(MemDisk::new(256), 16).unwrap();
        let ino = fs.create("/f", false).unwrap().ino;
        fs.write(ino, 0, &[1u8; BLOCK_SIZE]).unwrap();
        let before = fs.stats().disk_writes;
        fs.begin_deferred();
        fs.write(ino, 0, &[2u8; BLOCK_SIZE]).unwrap();
        let staged = fs.end_deferred();
        let staged = fs.coalesce_staged(staged);
        let phases: Vec<u8> = staged.iter().map(|s| fs.write_phase(s.lba)).collect();
        assert_eq!(phases, vec![0, 1, 2], "checksums, data, record");
        assert_eq!(fs.stats().disk_writes, before + 3);
        let data = staged[1].lba;
        // The device still has the old bytes; the file system reads the new.
        let mut raw = [0u8; BLOCK_SIZE];
        fs.device_mut().read_block(data, &mut raw).unwrap();
        assert_eq!(raw, [1u8; BLOCK_SIZE]);
        let mut buf = [0u8; BLOCK_SIZE];
        fs.read(ino, 0, &mut buf).unwrap();
        assert_eq!(buf, [2u8; BLOCK_SIZE]);
        assert_eq!(fs.pending_block(data), Some(&[2u8; BLOCK_SIZE]));
        assert_eq!(fs.pending_blocks(), 3);
        // A second write of the block before the first landed: reads keep
        // the newest bytes until both landed.
        fs.begin_deferred();
        fs.write(ino, 0, &[3u8; BLOCK_SIZE]).unwrap();
        let again = fs.end_deferred();
        let again = fs.coalesce_staged(again);
        for s in &staged {
            fs.device_mut().write_block(s.lba, &s.buf).unwrap();
            fs.write_landed(s.lba);
        }
        assert!(
            fs.pending_block(data).is_some(),
            "the newer write is pending"
        );
        for s in &again {
            fs.device_mut().write_block(s.lba, &s.buf).unwrap();
            fs.write_landed(s.lba);
        }
        assert_eq!(fs.pending_blocks(), 0);
        fs.read(ino, 0, &mut buf).unwrap();
        assert_eq!(buf, [3u8; BLOCK_SIZE], "from the device, checksum ok");
        // A failed write: the device holds the old bytes (they match the
        // checksum kept from before the write) or damaged ones (an I/O
        // error), never bytes that pass for the new ones.
        fs.begin_deferred();
        fs.write(ino, 0, &[4u8; BLOCK_SIZE]).unwrap();
        let st = fs.end_deferred();
        let st = fs.coalesce_staged(st);
        assert_eq!(st[1].lba, data);
        fs.write_failed(data);
        fs.read(ino, 0, &mut buf).unwrap();
        assert_eq!(buf, [3u8; BLOCK_SIZE], "the old bytes");
        fs.device_mut()
            .write_block(data, &[9u8; BLOCK_SIZE])
            .unwrap();
        assert_eq!(fs.read(ino, 0, &mut buf), Err(fabric::proto::Errno::Io));
    }
}
