//! The tiny flat file system of the directory service.
//!
//! The model is DaxFS's flat format (DaxFS §3.2): fixed-size records, no
//! pointers that can form cycles, and a whole image validated in one pass at
//! mount, so an untrusted or damaged image is refused with a clear message
//! before anything uses it.
//!
//! # On-disk format, version 2
//!
//! Little endian, 4 KiB blocks ([`BLOCK_SIZE`]).
//!
//! Block 0, the superblock:
//!
//! | bytes   | field                                                       |
//! | ------- | ----------------------------------------------------------- |
//! | 0..8    | magic `b"ONECOPFS"`                                         |
//! | 8..12   | format version `u32` = 2 (1: no data checksums, refused)    |
//! | 12..16  | block size `u32` = 4096                                     |
//! | 16..24  | total blocks `u64` (the device may be larger)               |
//! | 24..32  | inode table start block `u64` = 1                           |
//! | 32..36  | inode count `u32` (a positive multiple of 16)               |
//! | 36..40  | inode table blocks `u32` = inode count / 16                 |
//! | 40..48  | data area start block `u64` = checksum table start + blocks |
//! | 48..56  | data area end block `u64` (exclusive) = total blocks        |
//! | 56..64  | sequence floor `u64` (> every creation sequence number)     |
//! | 64..72  | checksum table start block `u64` = table start + table blocks |
//! | 72..76  | checksum table blocks `u32` = ceil((total - its start) / 1024) |
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
//! Then the data checksum table: per block 1023 `u32` entries,
//! the crc32 of data block `data_start + 1023 * i + j` in entry `j` of
//! table block `i`, and at bytes 4092..4096 the crc32 of bytes 0..4092.
//! Entries past the data area are zero; the entry of a free block is
//! meaningless. Every read of a data block from the device is checked
//! against its entry; a mismatch is `Errno::Io` (logged with the inode and
//! the block), never the bytes. [`Fs::check_data`] scans every block.
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
//! Updates write data blocks first, then the checksum-table blocks that
//! cover them, then the inode record that points at them (one read-free
//! write of the cached table block). A crash or failed write between a
//! block overwritten in place and its checksum leaves that block reading
//! as an I/O error (never as wrong bytes) until it is rewritten whole; a
//! new entry is
//! written before its parent's version bump, a removed one is zeroed before;
//! a raised sequence floor is written and flushed before the record that
//! uses the new number.
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]

extern crate alloc;

mod disk;
mod error;
mod freemap;
mod memdisk;
mod mount;
mod sums;
#[cfg(test)]
mod tests;

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

pub use disk::{MAGIC, MAX_EXTENTS, RECORDS_PER_BLOCK, RECORD_SIZE, SEQ_BATCH, VERSION};
pub use error::{MountError, ParentProblem};
pub use memdisk::MemDisk;
pub use sums::{BadBlock, SUMS_PER_BLOCK};

use disk::{Extent, Inode, Superblock, TABLE_START};
use fabric::proto::{Attr, DirEntry, Errno, FileKind, MAX_NAME, MAX_PATH};
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

/// Usage and I/O counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FsStats {
    /// Inodes in use (the root included).
    pub inodes_used: u64,
    /// Inode slots in the table.
    pub inodes_total: u64,
    /// Data blocks allocated to files.
    pub blocks_used: u64,
    /// Blocks in the data area.
    pub blocks_total: u64,
    /// Blocks read from the device by this mount.
    pub disk_reads: u64,
    /// Blocks written to the device by this mount.
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
}

/// Split an absolute path into checked components.
fn parse_path(path: &str) -> Result<Vec<&str>, Errno> {
    if path.len() > MAX_PATH {
        return Err(Errno::NameTooLong);
    }
    if !path.starts_with('/') {
        return Err(Errno::Invalid);
    }
    let mut out = Vec::new();
    for c in path.split('/').filter(|c| !c.is_empty()) {
        if c == "." || c == ".." || c.contains('\0') {
            return Err(Errno::Invalid);
        }
        if c.len() > MAX_NAME {
            return Err(Errno::NameTooLong);
        }
        out.push(c);
    }
    Ok(out)
}

/// Blocks needed to hold `size` bytes.
fn blocks_for(size: u64) -> u64 {
    size.div_ceil(BS)
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
        }
    }

    /// Recompute the derived state from the cached table, after a failed
    /// device write left the cache and the derived state apart.
    fn rebuild(&mut self) {
        if let Ok(d) = mount::validate(&self.sb, &self.table) {
            self.dirs = d.dirs;
            self.free = d.free;
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
        self.dev.read_block(lba, buf).map_err(|_| Errno::Io)
    }

    fn write_blk(&mut self, lba: u64, buf: &[u8; BLOCK_SIZE]) -> Result<(), Errno> {
        self.writes += 1;
        self.dev.write_block(lba, buf).map_err(|_| Errno::Io)
    }

    /// Encode table block `b` (0-based within the table) from the cache.
    fn table_block(&self, b: u64) -> [u8; BLOCK_SIZE] {
        let mut buf = [0u8; BLOCK_SIZE];
        let first = b as usize * RECORDS_PER_BLOCK;
        for (i, chunk) in buf.chunks_exact_mut(RECORD_SIZE).enumerate() {
            let idx = first + i;
            let node = self.table.get(idx).and_then(|s| s.as_deref());
            disk::encode_record(idx as u64 + 1, node, chunk);
        }
        buf
    }

    /// Install new records into the cache and write their table blocks, in
    /// the order of their first change (one write per distinct block). On a
    /// write failure the cache keeps only what reached the disk and the
    /// derived state is rebuilt from it.
    fn commit(&mut self, changes: Vec<(u64, Option<Box<Inode>>)>) -> Result<(), Errno> {
        let per = RECORDS_PER_BLOCK as u64;
        let mut blocks: Vec<u64> = Vec::new();
        for (ino, _) in &changes {
            let b = (ino - 1) / per;
            if !blocks.contains(&b) {
                blocks.push(b);
            }
        }
        for blk in blocks {
            let mut old = Vec::new();
            for (ino, node) in changes.iter().filter(|(ino, _)| (ino - 1) / per == blk) {
                let slot = &mut self.table[(ino - 1) as usize];
                old.push((*ino, core::mem::replace(slot, node.clone())));
            }
            let buf = self.table_block(blk);
            if let Err(e) = self.write_blk(TABLE_START + blk, &buf) {
                for (ino, node) in old.into_iter().rev() {
                    self.table[(ino - 1) as usize] = node;
                }
                self.rebuild();
                return Err(e);
            }
        }
        Ok(())
    }

    // ----- inodes and paths ----------------------------------------------

    fn node(&self, ino: u64) -> Result<&Inode, Errno> {
        let i = usize::try_from(ino.checked_sub(1).ok_or(Errno::NotFound)?)
            .map_err(|_| Errno::NotFound)?;
        self.table
            .get(i)
            .and_then(|s| s.as_deref())
            .ok_or(Errno::NotFound)
    }

    fn attr_of(&self, ino: u64, n: &Inode) -> Attr {
        let size = match n.kind {
            FileKind::File => n.size,
            FileKind::Dir => self.dirs.get(&ino).map_or(0, |d| d.by_ino.len() as u64),
        };
        Attr {
            ino,
            kind: n.kind,
            size,
            version: n.version,
        }
    }

    fn attr(&self, ino: u64) -> Result<Attr, Errno> {
        let n = self.node(ino)?;
        Ok(self.attr_of(ino, n))
    }

    fn child(&self, dir: u64, name: &str) -> Result<u64, Errno> {
        let n = self.node(dir)?;
        if n.kind != FileKind::Dir {
            return Err(Errno::NotDir);
        }
        self.dirs
            .get(&dir)
            .and_then(|d| d.by_name.get(name).copied())
            .ok_or(Errno::NotFound)
    }

    /// Resolve all but the last component: `(parent, Some(last))`, or
    /// `(ROOT_INO, None)` for the root itself.
    fn resolve_parent<'p>(&self, path: &'p str) -> Result<(u64, Option<&'p str>), Errno> {
        let comps = parse_path(path)?;
        let Some((last, dirs)) = comps.split_last() else {
            return Ok((ROOT_INO, None));
        };
        let mut cur = ROOT_INO;
        for c in dirs {
            cur = self.child(cur, c)?;
        }
        if self.node(cur)?.kind != FileKind::Dir {
            return Err(Errno::NotDir);
        }
        Ok((cur, Some(last)))
    }

    fn resolve(&self, path: &str) -> Result<u64, Errno> {
        match self.resolve_parent(path)? {
            (_, None) => Ok(ROOT_INO),
            (dir, Some(name)) => self.child(dir, name),
        }
    }

    fn free_slot(&self) -> Option<usize> {
        self.table.iter().position(|s| s.is_none())
    }

    // ----- metadata operations -------------------------------------------

    /// Attributes of the inode at `path`.
    pub fn lookup(&mut self, path: &str) -> Result<Attr, Errno> {
        let ino = self.resolve(path)?;
        self.attr(ino)
    }

    /// Attributes of inode `ino` (`NotFound` if the slot is free).
    pub fn getattr(&mut self, ino: u64) -> Result<Attr, Errno> {
        self.attr(ino)
    }

    /// Create a regular file. If the name exists: `Exists` when
    /// `exclusive`, otherwise its attributes (or `IsDir` for a directory).
    pub fn create(&mut self, path: &str, exclusive: bool) -> Result<Attr, Errno> {
        self.make(path, FileKind::File, exclusive)
    }

    /// Create a directory (`Exists` if the name is taken).
    pub fn mkdir(&mut self, path: &str) -> Result<Attr, Errno> {
        self.make(path, FileKind::Dir, true)
    }

    fn make(&mut self, path: &str, kind: FileKind, exclusive: bool) -> Result<Attr, Errno> {
        let (parent, name) = self.resolve_parent(path)?;
        let existing = match name {
            None => Some(ROOT_INO),
            Some(name) => match self.child(parent, name) {
                Ok(ino) => Some(ino),
                Err(Errno::NotFound) => None,
                Err(e) => return Err(e),
            },
        };
        if let Some(ino) = existing {
            let a = self.attr(ino)?;
            return match (exclusive, a.kind) {
                (true, _) => Err(Errno::Exists),
                (false, FileKind::Dir) => Err(Errno::IsDir),
                (false, FileKind::File) => Ok(a),
            };
        }
        let name = name.unwrap_or_default();
        let idx = self.free_slot().ok_or(Errno::NoSpace)?;
        let seq = self.max_seq.checked_add(1).ok_or(Errno::NoSpace)?;
        if seq >= self.sb.seq_floor {
            self.raise_seq_floor(seq)?;
        }
        let ino = idx as u64 + 1;
        let child = Inode {
            kind,
            parent,
            seq,
            size: 0,
            // Versions are unique across inode reuse: the creation sequence
            // number sits in the high half, so (ino, version) never repeats
            // after a delete and re-create and node caches cannot confuse
            // the new file with the old one.
            version: (seq << 32) | 1,
            name: String::from(name),
            extents: Vec::new(),
        };
        let mut p = self.node(parent)?.clone();
        p.version = p.version.wrapping_add(1);
        self.commit(vec![
            (ino, Some(Box::new(child))),
            (parent, Some(Box::new(p))),
        ])?;
        self.max_seq = seq;
        self.used += 1;
        if kind == FileKind::Dir {
            self.dirs.insert(ino, DirIndex::default());
        }
        let d = self.dirs.entry(parent).or_default();
        d.by_name.insert(String::from(name), ino);
        d.by_ino.insert(ino);
        self.attr(ino)
    }

    /// Make the on-disk sequence floor exceed `seq` before any record uses
    /// it: write the superblock with the floor `SEQ_BATCH` above `seq` and
    /// flush it. The cached superblock changes only once that is durable;
    /// after a failure the next creation tries again (a floor that reached
    /// the disk anyway is only higher, which is harmless).
    fn raise_seq_floor(&mut self, seq: u64) -> Result<(), Errno> {
        let floor = seq.saturating_add(SEQ_BATCH);
        if floor <= seq {
            return Err(Errno::NoSpace);
        }
        let mut sb = self.sb;
        sb.seq_floor = floor;
        self.write_blk(0, &sb.encode())?;
        self.sync()?;
        self.sb = sb;
        Ok(())
    }

    /// Remove a regular file (`IsDir` for a directory).
    pub fn unlink(&mut self, path: &str) -> Result<(), Errno> {
        let ino = self.resolve(path)?;
        if self.node(ino)?.kind == FileKind::Dir {
            return Err(Errno::IsDir);
        }
        self.remove(ino)
    }

    /// Remove an empty directory (`NotDir` for a file, `NotEmpty`, and
    /// `Invalid` for the root).
    pub fn rmdir(&mut self, path: &str) -> Result<(), Errno> {
        let ino = self.resolve(path)?;
        if ino == ROOT_INO {
            return Err(Errno::Invalid);
        }
        if self.node(ino)?.kind != FileKind::Dir {
            return Err(Errno::NotDir);
        }
        if self.dirs.get(&ino).is_some_and(|d| !d.by_ino.is_empty()) {
            return Err(Errno::NotEmpty);
        }
        self.remove(ino)
    }

    fn remove(&mut self, ino: u64) -> Result<(), Errno> {
        let n = self.node(ino)?.clone();
        let mut p = self.node(n.parent)?.clone();
        p.version = p.version.wrapping_add(1);
        let parent = n.parent;
        self.commit(vec![(ino, None), (parent, Some(Box::new(p)))])?;
        for e in &n.extents {
            self.free.set(e.start, u64::from(e.len), false);
        }
        self.used -= 1;
        self.dirs.remove(&ino);
        if let Some(d) = self.dirs.get_mut(&parent) {
            d.by_name.remove(n.name.as_str());
            d.by_ino.remove(&ino);
        }
        Ok(())
    }

    /// List directory `ino` from `cookie` (0: the start), at most `max`
    /// entries, in ascending inode order. Returns the entries and the cookie
    /// to continue from, 0 at the end. Entries added or removed between
    /// calls never make others repeat or vanish.
    pub fn readdir(
        &mut self,
        ino: u64,
        cookie: u64,
        max: usize,
    ) -> Result<(Vec<DirEntry>, u64), Errno> {
        if self.node(ino)?.kind != FileKind::Dir {
            return Err(Errno::NotDir);
        }
        if max == 0 {
            return Err(Errno::Invalid);
        }
        let Some(d) = self.dirs.get(&ino) else {
            return Ok((Vec::new(), 0));
        };
        let mut out = Vec::new();
        let mut next = 0;
        for &child in d.by_ino.range(cookie.max(1)..) {
            if out.len() == max {
                next = child;
                break;
            }
            let n = self.node(child)?;
            out.push(DirEntry {
                name: n.name.clone(),
                attr: self.attr_of(child, n),
            });
        }
        Ok((out, next))
    }

    // ----- data ----------------------------------------------------------

    fn file(&self, ino: u64) -> Result<&Inode, Errno> {
        let n = self.node(ino)?;
        if n.kind != FileKind::File {
            return Err(Errno::IsDir);
        }
        Ok(n)
    }

    /// Read from `offset` into `buf`; short at the end of the file, 0 past
    /// it.
    pub fn read(&mut self, ino: u64, offset: u64, buf: &mut [u8]) -> Result<usize, Errno> {
        let n = self.file(ino)?;
        if offset >= n.size || buf.is_empty() {
            return Ok(0);
        }
        let len = (n.size - offset).min(buf.len() as u64) as usize;
        let extents = n.extents.clone();
        let mut done = 0usize;
        let mut blk = [0u8; BLOCK_SIZE];
        while done < len {
            let pos = offset + done as u64;
            let lba = disk::map_block(&extents, pos / BS).ok_or(Errno::Io)?;
            self.read_data(ino, pos / BS, lba, &mut blk)?;
            let within = (pos % BS) as usize;
            let take = (BLOCK_SIZE - within).min(len - done);
            buf[done..done + take].copy_from_slice(&blk[within..within + take]);
            done += take;
        }
        Ok(len)
    }

    /// Write `data` at `offset`, extending the file; a gap past the old end
    /// reads as zeros. All or nothing: on `NoSpace` nothing has changed.
    pub fn write(&mut self, ino: u64, offset: u64, data: &[u8]) -> Result<(usize, Attr), Errno> {
        let old = self.file(ino)?.clone();
        if data.is_empty() {
            return Ok((0, self.attr_of(ino, &old)));
        }
        let end = offset
            .checked_add(data.len() as u64)
            .ok_or(Errno::Invalid)?;
        let new_size = old.size.max(end);
        let mut new = old.clone();
        self.grow(&mut new, blocks_for(new_size))?;
        if let Err(e) = self.fill(ino, &new, old.size, offset, data, end) {
            self.rebuild();
            return Err(e);
        }
        new.size = new_size;
        new.version = new.version.wrapping_add(1);
        self.commit(vec![(ino, Some(Box::new(new)))])?;
        let a = self.attr(ino)?;
        Ok((data.len(), a))
    }

    /// Truncate or extend to `size` bytes; an extension reads as zeros.
    pub fn set_size(&mut self, ino: u64, size: u64) -> Result<Attr, Errno> {
        let old = self.file(ino)?.clone();
        if size == old.size {
            return Ok(self.attr_of(ino, &old));
        }
        let mut new = old.clone();
        new.size = size;
        new.version = new.version.wrapping_add(1);
        if size > old.size {
            self.grow(&mut new, blocks_for(size))?;
            if let Err(e) = self.fill(ino, &new, old.size, old.size, &[], size) {
                self.rebuild();
                return Err(e);
            }
            self.commit(vec![(ino, Some(Box::new(new)))])?;
        } else {
            let freed = shrink(&mut new, blocks_for(size));
            self.commit(vec![(ino, Some(Box::new(new)))])?;
            for e in freed {
                self.free.set(e.start, u64::from(e.len), false);
            }
        }
        self.attr(ino)
    }

    /// Allocate blocks so that `n` holds `blocks` blocks: extend the last
    /// extent in place while the next blocks are free, else add extents
    /// (first fit, or the longest free run). `NoSpace` leaves the free map
    /// as it was.
    fn grow(&mut self, n: &mut Inode, blocks: u64) -> Result<(), Errno> {
        let have = n.allocated_blocks();
        let Some(mut want) = blocks.checked_sub(have).filter(|w| *w > 0) else {
            return Ok(());
        };
        if want > self.free.total() - self.free.used() {
            return Err(Errno::NoSpace);
        }
        let mut taken: Vec<Extent> = Vec::new();
        if let Some(last) = n.extents.last_mut() {
            let room = u64::from(u32::MAX - last.len).min(want);
            let end = last.end().unwrap_or(u64::MAX);
            let run = self.free.free_run_at(end, room);
            if run > 0 {
                self.free.set(end, run, true);
                taken.push(Extent {
                    start: end,
                    len: run as u32,
                });
                last.len += run as u32;
                want -= run;
            }
        }
        while want > 0 {
            let found = if n.extents.len() < MAX_EXTENTS {
                self.free.find(want.min(u64::from(u32::MAX)))
            } else {
                None
            };
            let Some((start, len)) = found else {
                for e in taken {
                    self.free.set(e.start, u64::from(e.len), false);
                }
                return Err(Errno::NoSpace);
            };
            self.free.set(start, len, true);
            let e = Extent {
                start,
                len: len as u32,
            };
            taken.push(e);
            n.extents.push(e);
            want -= len;
        }
        Ok(())
    }

    /// Write the file range `[min(offset, old_size), end)` of `n` to disk:
    /// bytes of `data` (placed at `offset`), old bytes below `old_size`,
    /// zeros elsewhere. Blocks that keep no old byte are written without
    /// being read. The checksum-table blocks of the written blocks are
    /// written after them (also when a data write failed).
    fn fill(
        &mut self,
        ino: u64,
        n: &Inode,
        old_size: u64,
        offset: u64,
        data: &[u8],
        end: u64,
    ) -> Result<(), Errno> {
        let mut dirty = Vec::new();
        let r = self.fill_data(ino, n, old_size, offset, data, end, &mut dirty);
        let s = self.write_sums(&dirty);
        r.and(s)
    }

    #[allow(clippy::too_many_arguments)]
    fn fill_data(
        &mut self,
        ino: u64,
        n: &Inode,
        old_size: u64,
        offset: u64,
        data: &[u8],
        end: u64,
        dirty: &mut Vec<u64>,
    ) -> Result<(), Errno> {
        let start = offset.min(old_size);
        let data_end = offset + data.len() as u64;
        let mut blk = [0u8; BLOCK_SIZE];
        for b in start / BS..blocks_for(end) {
            let bs = b * BS;
            let be = bs + BS;
            let lba = disk::map_block(&n.extents, b).ok_or(Errno::Io)?;
            let keep_hi = be.min(old_size);
            let keeps_old = bs < keep_hi && !(offset <= bs && data_end >= keep_hi);
            if keeps_old {
                self.read_data(ino, b, lba, &mut blk)?;
                if old_size < be {
                    blk[(old_size - bs) as usize..].fill(0);
                }
            } else {
                blk.fill(0);
            }
            let lo = offset.max(bs);
            let hi = data_end.min(be);
            if lo < hi {
                let src = &data[(lo - offset) as usize..(hi - offset) as usize];
                blk[(lo - bs) as usize..(hi - bs) as usize].copy_from_slice(src);
            }
            self.write_blk(lba, &blk)?;
            if let Some(i) = self.sums.set(lba, &blk) {
                if !dirty.contains(&i) {
                    dirty.push(i);
                }
            }
        }
        Ok(())
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
            blocks_used: self.free.used(),
            blocks_total: self.free.total(),
            disk_reads: self.reads,
            disk_writes: self.writes,
        }
    }
}

/// Keep the first `blocks` blocks of `n`; return the extents cut off.
fn shrink(n: &mut Inode, blocks: u64) -> Vec<Extent> {
    let mut freed = Vec::new();
    let mut kept = 0u64;
    let mut out = Vec::new();
    for e in n.extents.drain(..) {
        let len = u64::from(e.len);
        if kept >= blocks {
            freed.push(e);
        } else if kept + len <= blocks {
            kept += len;
            out.push(e);
        } else {
            let keep = blocks - kept;
            kept = blocks;
            out.push(Extent {
                start: e.start,
                len: keep as u32,
            });
            freed.push(Extent {
                start: e.start + keep,
                len: (len - keep) as u32,
            });
        }
    }
    n.extents = out;
    freed
}
