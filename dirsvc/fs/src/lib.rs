//! The tiny flat file system of the directory service.
//!
//! The model is DaxFS's flat format (DaxFS §3.2): fixed-size records, no
//! pointers that can form cycles, and a whole image validated in one pass at
//! mount, so an untrusted or damaged image is refused with a clear message
//! before anything uses it.
//!
//! # On-disk format, version 3
//!
//! Little endian, 4 KiB blocks ([`BLOCK_SIZE`]).
//!
//! Block 0, the superblock:
//!
//! | bytes   | field                                                       |
//! | ------- | ----------------------------------------------------------- |
//! | 0..8    | magic `b"ONECOPFS"`                                         |
//! | 8..12   | format version `u32` = 3 (1 and 2 refused)                  |
//! | 12..16  | block size `u32` = 4096                                     |
//! | 16..24  | total blocks `u64` (the device may be larger)               |
//! | 24..32  | inode table start block `u64` = 1                           |
//! | 32..36  | inode count `u32` (a positive multiple of 16)               |
//! | 36..40  | inode table blocks `u32` = inode count / 16                 |
//! | 40..48  | data area start block `u64` = checksum table start + blocks |
//! | 48..56  | data area end block `u64` (exclusive) = total blocks        |
//! | 56..64  | sequence floor `u64` (> every creation sequence number)     |
//! | 64..72  | checksum table start block `u64` = table start + table blocks |
//! | 72..76  | checksum table blocks `u32` = ceil((total - its start) / 512) |
//! | 76..80  | crc32 of bytes 0..76                                        |
//! | 80..4096| zero                                                        |
//!
//! Blocks 1.., the inode table: 16 records of 256 bytes per block. The
//! record in slot `i` is inode `i + 1`; the root directory is inode 1
//! ([`ROOT_INO`]). A free slot is 256 zero bytes. A slot in use:
//!
//! | bytes    | field                                                      |
//! | -------- | ---------------------------------------------------------- |
//! | 0        | kind `u8`: 1 file, 2 directory (0 free)                    |
//! | 1        | name length `u8` (1..=59; root 0)                          |
//! | 2..4     | extent count `u16` (0..=11; directories 0)                 |
//! | 4..8     | reserved, zero                                             |
//! | 8..16    | inode number `u64` (= slot + 1)                            |
//! | 16..24   | parent inode `u64` (root: 1)                               |
//! | 24..32   | creation sequence number `u64` (> parent's, < the floor)   |
//! | 32..40   | size `u64` in bytes (directories: 0)                       |
//! | 40..48   | version `u64`                                              |
//! | 48..112  | name: UTF-8, no `/` or NUL, not `.`/`..`, zero padded      |
//! | 112..244 | 11 extents of 12 bytes: start block `u64`, length `u32`    |
//! | 244..252 | reserved, zero                                             |
//! | 252..256 | crc32 of bytes 0..252                                      |
//!
//! Then the data checksum table: per block 511 entries of two `u32`, the
//! crc32 of data block `data_start + 511 * i + j` and the crc32 of the
//! bytes it held before its last write, in entry `j` of table block `i`
//! (bytes `8j..8j+8`), and at bytes 4092..4096 the crc32 of bytes
//! 0..4092. Entries past the data area are zero; the entry of a free block
//! is meaningless. Every read of a data block from the device is checked
//! against its entry (either checksum matches); a mismatch is `Errno::Io`
//! (logged with the inode and the block), never the bytes. The table is
//! written before the data it covers, so an overwrite cut by a crash
//! leaves the old or the new bytes, both readable (`sums`).
//! [`Fs::check_data`] scans every block.
//!
//! The rest of the device, from the data area start, is file data. A file's
//! bytes are the concatenation of its extents' blocks. There is no free
//! bitmap: the free map is rebuilt from the extents at mount. A directory's
//! entries are the inodes whose parent it is; its size is their number.
//!
//! Creation sequence numbers never repeat on an image, even for inodes
//! since removed: a new inode's version is its sequence number in the high
//! half and 1 in the low half, so (inode, version) stays unique when an
//! inode number is reused. The superblock's sequence floor is strictly
//! greater than every sequence number ever handed out; a new file system
//! starts with floor [`SEQ_BATCH`] (root: 0). Creating an inode takes the
//! next number above the highest handed out by this mount (after a mount:
//! above the floor); when that number reaches the floor, the superblock is
//! first rewritten with floor = number + [`SEQ_BATCH`] and flushed, and only
//! then is the record written (one superblock write per [`SEQ_BATCH`]
//! creations). So numbers handed out after a remount lie above every
//! number used before it.
//!
//! Mount checks, in one pass and without writing: magic, version,
//! checksum, geometry against itself and the device, every checksum-table
//! block (its crc32, zero entries past the data area), every record
//! (checksum, kind, number, name, canonical zero padding), that every
//! sequence number is below the floor, the root, every
//! parent (in use, a directory, strictly older: so no cycle can exist),
//! unique names per directory, that extents lie in the data area and never
//! share a block, and that no file is larger than its extents.
//!
//! Updates write the checksum-table blocks first (each entry keeping the
//! checksum of the bytes before the write, `sums`), then the data
//! blocks they cover, then the inode record that points at them (one
//! read-free write of the cached table block). A crash or failed write
//! anywhere in between leaves each block with its old or its new bytes,
//! both readable; a new entry is written before its parent's version
//! bump, a removed one is zeroed before;
//! a raised sequence floor is written and flushed before the record that
//! uses the new number.
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]

extern crate alloc;

mod allocate;
mod data;
pub mod dataset;
mod deferred;
mod device;
mod disk;
mod error;
mod freemap;
#[cfg(any(test, feature = "testing"))]
mod memdisk;
mod mount;
mod namespace;
mod sums;
mod table;
#[cfg(test)]
mod tests;

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;

pub use data::BlockSource;
pub use deferred::{Staged, DATA_PHASE};
pub use device::{BlockDevice, IoError, ReadDone};
pub use disk::{MAGIC, MAX_EXTENTS, RECORDS_PER_BLOCK, RECORD_SIZE, SEQ_BATCH, VERSION};
pub use error::{MountError, ParentProblem};
#[cfg(any(test, feature = "testing"))]
pub use memdisk::MemDisk;
pub use sums::{BadBlock, SumCheck, SUMS_PER_BLOCK, ZERO_SUM};

use disk::{Inode, Superblock, TABLE_START};
use fabric::proto::{Errno, FileKind};
use freemap::FreeMap;
use mount::{Derived, DirIndex};
use sums::SumTable;

/// Size of a device block and of a file-system block.
pub const BLOCK_SIZE: usize = fabric::PAGE_SIZE;
/// Inode number of the root directory.
pub const ROOT_INO: u64 = 1;

const BS: u64 = BLOCK_SIZE as u64;

/// The cached inode table: slot `i` holds inode `i + 1`.
type Table = Vec<Option<Box<Inode>>>;

/// Usage and I/O counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FsStats {
    /// Inodes in use (the root included).
    pub inodes_used: u64,
    /// Inode slots in the table.
    pub inodes_total: u64,
    /// Data blocks allocated to files (blocks reserved in memory for
    /// files' growth count as free: they are given back when space is
    /// short).
    pub blocks_used: u64,
    /// Blocks in the data area.
    pub blocks_total: u64,
    /// Blocks read from the device by this mount.
    pub disk_reads: u64,
    /// Blocks written to the device by this mount: deferred writes count
    /// once handed out (staged), less those a later staged write of the
    /// same block replaced before they went out ([`Fs::coalesce_staged`])
    /// and those never sent ([`Fs::write_skipped`]).
    pub disk_writes: u64,
}

/// Where things are on the device (from the superblock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// Blocks in the file system.
    pub total_blocks: u64,
    /// Inode slots.
    pub inode_count: u32,
    /// First inode-table block.
    pub table_start: u64,
    /// First block of the data checksum table.
    pub sums_start: u64,
    /// First data block.
    pub data_start: u64,
    /// One past the last data block.
    pub data_end: u64,
}

/// A mounted file system over a [`BlockDevice`].
///
/// The whole inode table is cached, so metadata operations read nothing;
/// file data goes to the device block by block (no data cache).
pub struct Fs<D: BlockDevice> {
    dev: D,
    sb: Superblock,
    table: Table,
    sums: SumTable,
    dirs: BTreeMap<u64, DirIndex>,
    free: FreeMap,
    /// Highest creation sequence number handed out (or, after a mount, the
    /// floor, which is above every number handed out before). Never goes
    /// down while mounted.
    max_seq: u64,
    used: u64,
    reads: u64,
    writes: u64,
    /// Deferred-write mode ([`Fs::begin_deferred`]): block writes staged
    /// here instead of going to the device.
    staged: Option<Vec<Staged>>,
    /// Blocks with deferred writes staged and not yet reported done
    /// ([`Fs::write_landed`]): how many, and the newest bytes, which reads
    /// see instead of the device's.
    overlay: BTreeMap<u64, (u32, Box<[u8; BLOCK_SIZE]>)>,
    /// Blocks reserved in memory for files' growth, by inode: `(start,
    /// len)` right behind the file's last extent, marked used in `free`
    /// (see `allocate`).
    reserved: BTreeMap<u64, (u64, u64)>,
    /// Blocks in `reserved`.
    reserved_total: u64,
    /// Sizes held back on the device, by inode ([`Fs::hold_size`]): the
    /// record on the device says at most this many bytes while the file
    /// in memory may be larger, until its data is there.
    held: BTreeMap<u64, u64>,
}

impl<D: BlockDevice> Fs<D> {
    /// Make a new, empty file system on `dev` with room for at least
    /// `inodes` inodes (rounded up to a multiple of 16, the root included)
    /// and return it mounted. Writes the superblock, the inode table and the
    /// root directory; the data area is not touched.
    ///
    /// Errors: `Invalid` for 0 inodes, `NoSpace` if the device cannot hold
    /// the table and at least one data block, `Io` if a write fails.
    pub fn format(dev: D, inodes: u32) -> Result<Fs<D>, Errno> {
        if inodes == 0 {
            return Err(Errno::Invalid);
        }
        let sb = Superblock::layout(dev.block_count(), inodes).ok_or(Errno::NoSpace)?;
        let mut table: Table = Vec::new();
        table.resize_with(sb.inode_count as usize, || None);
        if let Some(slot) = table.get_mut(0) {
            *slot = Some(Box::new(Inode {
                kind: FileKind::Dir,
                parent: ROOT_INO,
                seq: 0,
                size: 0,
                version: 1,
                name: String::new(),
                extents: Vec::new(),
            }));
        }
        let derived = mount::validate(&sb, &table).map_err(|_| Errno::Invalid)?;
        // Only the root's 0 has been handed out on this image, so creations
        // start at 1 and the first `SEQ_BATCH - 1` need no superblock write.
        let mut fs = Fs::assemble(dev, sb, table, SumTable::new(&sb), derived);
        // Invalidate any old superblock first, so an interrupted format
        // never leaves an old superblock over a new table.
        fs.write_blk(0, &[0u8; BLOCK_SIZE])?;
        for b in 0..sb.table_blocks() {
            let buf = fs.table_block(b);
            fs.write_blk(TABLE_START + b, &buf)?;
        }
        let all: Vec<u64> = (0..sb.sums_blocks).collect();
        fs.write_sums(&all)?;
        fs.write_blk(0, &sb.encode())?;
        fs.sync()?;
        Ok(fs)
    }

    /// Validate the image on `dev` and mount it. Reads the superblock and the
    /// inode table, never writes. Any inconsistency is a [`MountError`].
    pub fn mount(dev: D) -> Result<Fs<D>, MountError> {
        Fs::try_mount(dev).map_err(|(_, e)| e)
    }

    /// Like [`Fs::mount`] but hands the device back on failure.
    pub fn try_mount(mut dev: D) -> Result<Fs<D>, (D, MountError)> {
        let mut reads = 0;
        match Fs::load(&mut dev, &mut reads) {
            Ok((sb, table, sums, derived)) => {
                let mut fs = Fs::assemble(dev, sb, table, sums, derived);
                // Removed inodes may have held numbers above every live
                // one; the floor is above all of them (validation checked
                // it is above the live ones), so continue from there.
                fs.max_seq = fs.max_seq.max(sb.seq_floor);
                fs.reads = reads;
                log::debug!(
                    "fs: mounted {} blocks, {}/{} inodes, {}/{} data blocks used",
                    sb.total_blocks,
                    fs.used,
                    sb.inode_count,
                    fs.free.used(),
                    fs.free.total()
                );
                Ok(fs)
            }
            Err(e) => Err((dev, e)),
        }
    }

    fn load(
        dev: &mut D,
        reads: &mut u64,
    ) -> Result<(Superblock, Table, SumTable, Derived), MountError> {
        let device_blocks = dev.block_count();
        if device_blocks == 0 {
            return Err(MountError::EmptyDevice);
        }
        let mut buf = [0u8; BLOCK_SIZE];
        let mut read = |dev: &mut D, lba: u64, buf: &mut [u8; BLOCK_SIZE]| {
            *reads += 1;
            dev.read_block(lba, buf).map_err(|_| MountError::Io { lba })
        };
        read(dev, 0, &mut buf)?;
        let sb = Superblock::decode(&buf, device_blocks)?;
        let mut table = Vec::new();
        for b in 0..sb.table_blocks() {
            read(dev, TABLE_START + b, &mut buf)?;
            for (i, chunk) in buf.chunks_exact(RECORD_SIZE).enumerate() {
                let ino = b * RECORDS_PER_BLOCK as u64 + i as u64 + 1;
                let mut rec = [0u8; RECORD_SIZE];
                rec.copy_from_slice(chunk);
                table.push(disk::decode_record(ino, &rec, sb.data_start, sb.data_end)?);
            }
        }
        let mut sums = SumTable::new(&sb);
        for i in 0..sums.blocks() {
            read(dev, sums.lba(i), &mut buf)?;
            sums.load_block(i, &buf)?;
        }
        let derived = mount::validate(&sb, &table)?;
        Ok((sb, table, sums, derived))
    }

    fn assemble(dev: D, sb: Superblock, table: Table, sums: SumTable, d: Derived) -> Fs<D> {
        Fs {
            dev,
            sb,
            table,
            sums,
            dirs: d.dirs,
            free: d.free,
            max_seq: d.max_seq,
            used: d.used,
            reads: 0,
            writes: 0,
            staged: None,
            overlay: BTreeMap::new(),
            reserved: BTreeMap::new(),
            reserved_total: 0,
            held: BTreeMap::new(),
        }
    }

    /// Recompute the derived state from the cached table, after a failed
    /// device write left the cache and the derived state apart.
    fn rebuild(&mut self) {
        if let Ok(d) = mount::validate(&self.sb, &self.table) {
            self.dirs = d.dirs;
            self.free = d.free;
            self.forget_reservations();
            // Numbers handed out by this mount stay used even if their
            // inodes are gone.
            self.max_seq = self.max_seq.max(d.max_seq);
            self.used = d.used;
        }
    }

    /// Give the device back.
    pub fn into_device(self) -> D {
        self.dev
    }

    /// The device.
    pub fn device(&self) -> &D {
        &self.dev
    }

    /// The device, for reads its owner issues itself (asynchronous page
    /// fills, see [`Fs::block_source`] and [`Fs::check_block`]). Never
    /// write through it: the file system's caches would not know.
    pub fn device_mut(&mut self) -> &mut D {
        &mut self.dev
    }

    /// Where the superblock puts things.
    pub fn geometry(&self) -> Geometry {
        Geometry {
            total_blocks: self.sb.total_blocks,
            inode_count: self.sb.inode_count,
            table_start: TABLE_START,
            sums_start: self.sb.sums_start,
            data_start: self.sb.data_start,
            data_end: self.sb.data_end,
        }
    }

    // ----- device access -------------------------------------------------

    fn read_blk(&mut self, lba: u64, buf: &mut [u8; BLOCK_SIZE]) -> Result<(), Errno> {
        self.reads += 1;
        if let Some((_, b)) = self.overlay.get(&lba) {
            // A write of this block is staged or in flight: its bytes are
            // the block's content.
            buf.copy_from_slice(&b[..]);
            return Ok(());
        }
        self.dev.read_block(lba, buf).map_err(|_| Errno::Io)
    }

    fn write_blk(&mut self, lba: u64, buf: &[u8; BLOCK_SIZE]) -> Result<(), Errno> {
        self.writes += 1;
        if let Some(staged) = self.staged.as_mut() {
            let b = Box::new(*buf);
            let e = self.overlay.entry(lba).or_insert((0, b.clone()));
            e.0 += 1;
            e.1.copy_from_slice(buf);
            staged.push(Staged { lba, buf: b });
            return Ok(());
        }
        if let Some((_, b)) = self.overlay.get_mut(&lba) {
            // The caller orders this write after the one in flight (see
            // `Fs::begin_deferred`); reads must see the newest bytes.
            b.copy_from_slice(buf);
        }
        self.dev.write_block(lba, buf).map_err(|_| Errno::Io)
    }

    /// Flush the device.
    pub fn sync(&mut self) -> Result<(), Errno> {
        self.dev.flush().map_err(|_| Errno::Io)
    }

    /// Usage and I/O counters.
    pub fn stats(&self) -> FsStats {
        FsStats {
            inodes_used: self.used,
            inodes_total: u64::from(self.sb.inode_count),
            blocks_used: self.free.used() - self.reserved_total,
            blocks_total: self.free.total(),
            disk_reads: self.reads,
            disk_writes: self.writes,
        }
    }
}
