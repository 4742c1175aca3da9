//! Data checksums (format version 3): two crc32 per data block, kept in a
//! table between the inode table and the data area, cached whole in memory
//! and verified on every read of a data block from the device.
//!
//! A table block holds [`SUMS_PER_BLOCK`] entries of two little-endian
//! `u32` (entry `j` of table block `i`, bytes `8j..8j + 8`, belongs to
//! data block `data_start + i * SUMS_PER_BLOCK + j`) and, in its last four
//! bytes, the crc32 of the bytes before it: the table is metadata, so
//! mount checks every table block like an inode record and refuses a
//! damaged one. Entries past the end of the data area are zero. The entry
//! of a free block means nothing (it is not cleared when the block is
//! freed); every allocated block has been written, with its entry, before
//! the inode that owns it points at it.
//!
//! **Two checksums: an overwrite survives a crash.** A data block is
//! rewritten in place, so a crash between the data write and its
//! checksum's would leave a block that matches neither: an fsync'd file
//! whose tail block was being appended to would read as an I/O error. So
//! an entry holds the block's new checksum and the one of the bytes it
//! held before this write (`(now, before)`), the table is written
//! **before** the data it covers (write phases: checksum table, data,
//! records), and a read accepts either. Whatever a crash cuts, the device
//! holds the old bytes or the new ones, and both match.
//!
//! "Before" is the bytes the device holds when this table write lands.
//! Within one write job (the directory's [`crate::Fs::coalesce_staged`]
//! batch, or one synchronous write) a block written several times keeps
//! the checksum it had when the job began ([`SumTable::seal`] ends a job).
//! Across jobs the writer keeps one order: a job's table writes go out
//! only once every earlier write of its data blocks has completed (the
//! directory's write queue does this), so the block holds the previous
//! job's bytes by then. A block newly allocated to a file holds nothing
//! the file showed before (its record does not point at it yet): its
//! entry is `(now, now)`. Once every write of a block landed, its entry
//! drops the old checksum (in memory at once, on the device with the next
//! write of its table block).
//!
//! **Failed writes.** A job whose device write fails sends none of its
//! later phases, so the device keeps the old bytes, which the entry still
//! accepts. A failed data write that later jobs of the same table block
//! build on (their entries assume its bytes) can leave the block reading
//! as an I/O error after a crash, as any failed write did before: never
//! as other bytes.
//!
//! **Unwritten blocks.** A block of zeros that a write or an extension
//! allocates past the old end of a file (a gap, `set_size` growing the
//! file) is not written: its entry is set to [`ZERO_SUM`], the checksum of
//! a zero block, and the block keeps whatever the device held. A read of a
//! block one of whose checksums is [`ZERO_SUM`] and whose bytes match
//! neither returns zeros ([`SumCheck::Unwritten`]); bytes that match are
//! returned as they are (a zero block, or data whose crc happens to be
//! [`ZERO_SUM`]). So an extension costs the checksum-table block and the
//! inode record instead of one device write per block, and a crash can
//! never show a new block's stale bytes: the entry is written before the
//! record that makes the block part of the file. The cost: damage to a
//! zero block, to a block whose write ended its unwritten state and that
//! has not been rewritten since, or to one of the 1 in 2^32 data blocks
//! whose crc is [`ZERO_SUM`], reads as zeros instead of an I/O error.
//!
//! The checksum is crc32 (IEEE, `crc32fast`, as for the metadata): the
//! `crc32c` crate needs `std`, and for detecting damage to a 4 KiB block
//! the two polynomials are equally good.

use alloc::collections::BTreeSet;
use alloc::vec;
use alloc::vec::Vec;

// The table's geometry is part of the on-disk layout (the superblock
// checks it), so it is defined there.
pub use super::disk::SUMS_PER_BLOCK;

use super::disk::Superblock;
use super::{BlockDevice, Errno, Fs, MountError, BLOCK_SIZE};

/// Offset of a table block's own checksum (covers bytes `0..SUM_CRC_OFF`).
pub const SUM_CRC_OFF: usize = BLOCK_SIZE - 4;

/// The checksum of one data block.
pub fn block_sum(buf: &[u8; BLOCK_SIZE]) -> u32 {
    crc32fast::hash(buf)
}

/// The checksum of a block of zeros: the entry of an unwritten block.
pub const ZERO_SUM: u32 = 0xc71c_0011;

/// What a data block read from the device is, by its checksum entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SumCheck {
    /// The bytes match the entry.
    Match,
    /// The entry says "unwritten" ([`ZERO_SUM`]) and the bytes do not
    /// match: the block reads as zeros.
    Unwritten,
    /// The bytes do not match: damage (or no entry: outside the data area).
    Mismatch,
}

/// A data block whose bytes do not match their checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadBlock {
    /// The file.
    pub ino: u64,
    /// Block index within the file (byte offset / 4096).
    pub block: u64,
    /// Device block.
    pub lba: u64,
}

/// One data block's entry: its checksum now and before its last write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Entry {
    /// The checksum of the block's newest bytes.
    pub now: u32,
    /// The checksum of the bytes the device held before they were written.
    pub before: u32,
}

impl Entry {
    fn accepts(&self, sum: u32) -> bool {
        sum == self.now || sum == self.before
    }
}

/// The cached checksum table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SumTable {
    start: u64,
    data_start: u64,
    data_blocks: u64,
    sums: Vec<Entry>,
    /// Entries written since the current job began ([`SumTable::seal`]):
    /// they keep their `before`.
    open: BTreeSet<usize>,
}

impl SumTable {
    /// An all-zero table for the geometry of `sb`.
    pub fn new(sb: &Superblock) -> SumTable {
        let n = usize::try_from(sb.sums_blocks)
            .unwrap_or(0)
            .saturating_mul(SUMS_PER_BLOCK);
        SumTable {
            start: sb.sums_start,
            data_start: sb.data_start,
            data_blocks: sb.data_end - sb.data_start,
            sums: vec![Entry::default(); n],
            open: BTreeSet::new(),
        }
    }

    /// Blocks of the table.
    pub fn blocks(&self) -> u64 {
        (self.sums.len() / SUMS_PER_BLOCK) as u64
    }

    /// Device block of table block `i`.
    pub fn lba(&self, i: u64) -> u64 {
        self.start + i
    }

    fn index(&self, lba: u64) -> Option<usize> {
        let i = lba.checked_sub(self.data_start)?;
        if i >= self.data_blocks {
            return None;
        }
        usize::try_from(i).ok()
    }

    /// Check table block `i` as read from the device and load it.
    pub fn load_block(&mut self, i: u64, buf: &[u8; BLOCK_SIZE]) -> Result<(), MountError> {
        let lba = self.lba(i);
        let mut crc = [0u8; 4];
        crc.copy_from_slice(&buf[SUM_CRC_OFF..]);
        let stored = u32::from_le_bytes(crc);
        let computed = crc32fast::hash(&buf[..SUM_CRC_OFF]);
        if stored != computed {
            return Err(MountError::SumTableChecksum {
                lba,
                stored,
                computed,
            });
        }
        let first = usize::try_from(i).unwrap_or(usize::MAX) * SUMS_PER_BLOCK;
        let used = SUMS_PER_BLOCK * 8;
        if !buf[used..SUM_CRC_OFF].iter().all(|&x| x == 0) {
            return Err(MountError::SumTablePadding { lba });
        }
        for (j, b) in buf[..used].chunks_exact(8).enumerate() {
            let e = Entry {
                now: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
                before: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            };
            let k = first + j;
            if k as u64 >= self.data_blocks {
                if e != Entry::default() {
                    return Err(MountError::SumTablePadding { lba });
                }
            } else if let Some(slot) = self.sums.get_mut(k) {
                *slot = e;
            }
        }
        Ok(())
    }

    /// Encode table block `i` from the cache.
    pub fn encode_block(&self, i: u64) -> [u8; BLOCK_SIZE] {
        let mut b = [0u8; BLOCK_SIZE];
        let first = usize::try_from(i).unwrap_or(usize::MAX) * SUMS_PER_BLOCK;
        let entries = self.sums.iter().skip(first).take(SUMS_PER_BLOCK);
        for (out, e) in b[..SUMS_PER_BLOCK * 8].chunks_exact_mut(8).zip(entries) {
            out[..4].copy_from_slice(&e.now.to_le_bytes());
            out[4..].copy_from_slice(&e.before.to_le_bytes());
        }
        let crc = crc32fast::hash(&b[..SUM_CRC_OFF]);
        b[SUM_CRC_OFF..].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// The entry of data block `lba` (`None` outside the data area).
    pub fn entry(&self, lba: u64) -> Option<Entry> {
        self.index(lba).and_then(|i| self.sums.get(i)).copied()
    }

    /// Check `buf`, read from data block `lba`, against its entry.
    pub fn check(&self, lba: u64, buf: &[u8; BLOCK_SIZE]) -> SumCheck {
        let Some(e) = self.entry(lba) else {
            return SumCheck::Mismatch;
        };
        if e.accepts(block_sum(buf)) {
            SumCheck::Match
        } else if e.accepts(ZERO_SUM) {
            SumCheck::Unwritten
        } else {
            SumCheck::Mismatch
        }
    }

    /// Does `buf` read from data block `lba` give good bytes (matching, or
    /// an unwritten block, which reads as zeros)?
    pub fn matches(&self, lba: u64, buf: &[u8; BLOCK_SIZE]) -> bool {
        self.check(lba, buf) != SumCheck::Mismatch
    }

    /// Mark data block `lba`, newly allocated, unwritten (it reads as
    /// zeros); returns the table block that changed (`None` outside the
    /// data area).
    pub fn set_unwritten(&mut self, lba: u64) -> Option<u64> {
        self.record(lba, ZERO_SUM, true)
    }

    /// Record the checksum of the bytes `buf` written to data block `lba`
    /// (`fresh`: newly allocated to its file, see the module doc); returns
    /// the table block that changed (`None` outside the data area).
    pub fn set(&mut self, lba: u64, buf: &[u8; BLOCK_SIZE], fresh: bool) -> Option<u64> {
        self.record(lba, block_sum(buf), fresh)
    }

    fn record(&mut self, lba: u64, sum: u32, fresh: bool) -> Option<u64> {
        let i = self.index(lba)?;
        let first_in_job = self.open.insert(i);
        let e = self.sums.get_mut(i)?;
        if fresh {
            e.before = sum;
        } else if first_in_job {
            e.before = e.now;
        }
        e.now = sum;
        Some((i / SUMS_PER_BLOCK) as u64)
    }

    /// End the current write job for data blocks `lbas`: their next write
    /// records the checksum they have now as their `before`.
    pub fn seal(&mut self, lbas: impl IntoIterator<Item = u64>) {
        for lba in lbas {
            if let Some(i) = self.index(lba) {
                self.open.remove(&i);
            }
        }
    }

    /// Every write of data block `lba` landed: the device holds the bytes
    /// of its checksum now, so the one before is dropped from the entry
    /// (in memory at once, on the device with the next write of its table
    /// block), unless a write of the block is open in the current job.
    pub fn landed(&mut self, lba: u64) {
        let Some(i) = self.index(lba) else {
            return;
        };
        if self.open.contains(&i) {
            return;
        }
        if let Some(e) = self.sums.get_mut(i) {
            e.before = e.now;
        }
    }
}

impl<D: BlockDevice> Fs<D> {
    /// Read data block `block` of file `ino` (device block `lba`) and check
    /// it against its checksum. A mismatch is logged with the inode and the
    /// block and is an `Io` error: wrong bytes are never returned.
    pub(crate) fn read_data(
        &mut self,
        ino: u64,
        block: u64,
        lba: u64,
        buf: &mut [u8; BLOCK_SIZE],
    ) -> Result<(), Errno> {
        self.read_blk(lba, buf)?;
        self.check_sum(ino, block, lba, buf)
    }

    /// Check `buf`, read from data block `block` of `ino` (device block
    /// `lba`), against its checksum: an unwritten block becomes zeros; a
    /// mismatch is logged and is `Io`.
    pub(crate) fn check_sum(
        &self,
        ino: u64,
        block: u64,
        lba: u64,
        buf: &mut [u8; BLOCK_SIZE],
    ) -> Result<(), Errno> {
        match self.sums.check(lba, buf) {
            SumCheck::Match => return Ok(()),
            SumCheck::Unwritten => {
                buf.fill(0);
                return Ok(());
            }
            SumCheck::Mismatch => {}
        }
        log::warn!(
            "fs: inode {ino} block {block} (device block {lba}): data checksum mismatch, I/O error"
        );
        Err(Errno::Io)
    }

    /// Write the table blocks in `dirty` from the cache.
    pub(crate) fn write_sums(&mut self, dirty: &[u64]) -> Result<(), Errno> {
        for &i in dirty {
            let buf = self.sums.encode_block(i);
            self.write_blk(self.sums.lba(i), &buf)?;
        }
        Ok(())
    }

    /// Device blocks of file `ino`, in file order (`IsDir` for a
    /// directory).
    pub fn file_blocks(&self, ino: u64) -> Result<Vec<u64>, Errno> {
        let n = self.file(ino)?;
        let mut out = Vec::new();
        for e in &n.extents {
            out.extend(e.start..e.start.saturating_add(u64::from(e.len)));
        }
        Ok(out)
    }

    /// Read every allocated block of every file and return the ones whose
    /// checksum does not match, in inode and block order. `Err` only for a
    /// device read error.
    pub fn check_data(&mut self) -> Result<Vec<BadBlock>, Errno> {
        let mut bad = Vec::new();
        let mut buf = [0u8; BLOCK_SIZE];
        for ino in 1..=self.table.len() as u64 {
            let Ok(blocks) = self.file_blocks(ino) else {
                continue;
            };
            for (block, lba) in blocks.into_iter().enumerate() {
                self.read_blk(lba, &mut buf)?;
                if !self.sums.matches(lba, &buf) {
                    bad.push(BadBlock {
                        ino,
                        block: block as u64,
                        lba,
                    });
                }
            }
        }
        Ok(bad)
    }
}
