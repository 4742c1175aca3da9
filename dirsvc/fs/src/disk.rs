//! Byte layout of the on-disk format, version 3: the superblock and the
//! fixed-size inode records (the data checksum table is in
//! [`super::sums`]). Pure encoding and decoding; the cross-record
//! checks live in [`super::mount`].
//!
//! Decoding never panics: every field is read from a fixed-size array at a
//! constant offset, and every value taken from the disk is range-checked
//! before it is used for anything.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;

use super::{MountError, BLOCK_SIZE};
use fabric::proto::{FileKind, MAX_NAME};

/// Checksum entries in one table block (each two `u32`: the block's
/// checksum and the one before it, see [`super::sums`]).
pub const SUMS_PER_BLOCK: usize = (BLOCK_SIZE - 4) / 8;

const _: () = assert!(SUMS_PER_BLOCK == 511);

/// Checksum-table blocks for a device whose blocks from the table start to
/// the end number `rest`: the fewest `c` with `c * SUMS_PER_BLOCK >= rest -
/// c` (every block after the table has an entry).
pub fn sum_table_blocks(rest: u64) -> u64 {
    rest.div_ceil(SUMS_PER_BLOCK as u64 + 1)
}

/// Magic at byte 0 of block 0.
pub const MAGIC: [u8; 8] = *b"ONECOPFS";
/// The only format version this code reads and writes.
/// Version 1 had no data checksums, version 2 one checksum per data block
/// (an overwrite cut between the data and its checksum left the block
/// unreadable); both are refused with a message that says to re-create
/// the image.
pub const VERSION: u32 = 3;
/// Size of one inode record.
pub const RECORD_SIZE: usize = 256;
/// Inode records per table block.
pub const RECORDS_PER_BLOCK: usize = BLOCK_SIZE / RECORD_SIZE;
/// Extent slots in one inode record.
pub const MAX_EXTENTS: usize = 11;
/// Block number of the first inode-table block.
pub const TABLE_START: u64 = 1;

/// Offset of the checksum table's first block in the superblock.
pub const SB_SUMS_START_OFF: usize = 64;
/// Offset of the checksum table's block count in the superblock.
pub const SB_SUMS_BLOCKS_OFF: usize = 72;
/// Bytes of the superblock covered by its checksum.
pub const SB_CRC_OFF: usize = 76;
/// End of the superblock fields; everything after must be zero.
pub const SB_END: usize = 80;
/// Offset of the sequence floor in the superblock.
pub const SB_SEQ_FLOOR_OFF: usize = 56;

/// Creation sequence numbers reserved by one superblock write: when a new
/// sequence number reaches the floor, the floor is raised to that number
/// plus this many. Also the floor a new file system starts with.
pub const SEQ_BATCH: u64 = 1024;

/// Offset of the name area in a record.
pub const REC_NAME_OFF: usize = 48;
/// Size of the name area in a record (longest name is [`MAX_NAME`]).
pub const REC_NAME_AREA: usize = 64;
/// Offset of the first extent slot.
pub const REC_EXT_OFF: usize = 112;
/// Size of one extent slot.
pub const EXT_SIZE: usize = 12;
/// Offset of the reserved tail (8 bytes, zero).
pub const REC_TAIL_OFF: usize = REC_EXT_OFF + MAX_EXTENTS * EXT_SIZE;
/// Offset of the record checksum (covers bytes `0..REC_CRC_OFF`).
pub const REC_CRC_OFF: usize = 252;

const _: () = assert!(REC_TAIL_OFF == 244);
const _: () = assert!(REC_NAME_OFF + REC_NAME_AREA == REC_EXT_OFF);
const _: () = assert!(MAX_NAME < REC_NAME_AREA);
const _: () = assert!(RECORDS_PER_BLOCK * RECORD_SIZE == BLOCK_SIZE);

fn u16_at(b: &[u8], o: usize) -> u16 {
    let mut a = [0u8; 2];
    if let Some(s) = b.get(o..o + 2) {
        a.copy_from_slice(s);
    }
    u16::from_le_bytes(a)
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    let mut a = [0u8; 4];
    if let Some(s) = b.get(o..o + 4) {
        a.copy_from_slice(s);
    }
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    if let Some(s) = b.get(o..o + 8) {
        a.copy_from_slice(s);
    }
    u64::from_le_bytes(a)
}

fn put(b: &mut [u8], o: usize, v: &[u8]) {
    if let Some(s) = b.get_mut(o..o + v.len()) {
        s.copy_from_slice(v);
    }
}

fn all_zero(b: &[u8]) -> bool {
    b.iter().all(|&x| x == 0)
}

/// The decoded superblock (block 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Superblock {
    /// Size of the file system in blocks (the device may be larger).
    pub total_blocks: u64,
    /// Number of inode records (a multiple of [`RECORDS_PER_BLOCK`]).
    pub inode_count: u32,
    /// First block of the data checksum table (just after the inode
    /// table).
    pub sums_start: u64,
    /// Blocks of the data checksum table (see [`super::sums`]).
    pub sums_blocks: u64,
    /// First block of the data area (just after the checksum table).
    pub data_start: u64,
    /// One past the last block of the data area (= `total_blocks`).
    pub data_end: u64,
    /// Strictly greater than every creation sequence number ever allocated
    /// on this image, live or since removed: a mount hands out sequence
    /// numbers from here on, so versions never repeat across remounts.
    pub seq_floor: u64,
}

impl Superblock {
    /// Blocks occupied by the inode table.
    pub fn table_blocks(&self) -> u64 {
        u64::from(self.inode_count) / RECORDS_PER_BLOCK as u64
    }

    /// Lay out a file system of `total_blocks` blocks with at least
    /// `inodes` inodes (rounded up to a whole table block). `None` if the
    /// table leaves no data block or the numbers overflow.
    pub fn layout(total_blocks: u64, inodes: u32) -> Option<Superblock> {
        if inodes == 0 {
            return None;
        }
        let per = RECORDS_PER_BLOCK as u32;
        let inode_count = inodes.checked_next_multiple_of(per)?;
        let table_blocks = u64::from(inode_count / per);
        let sums_start = TABLE_START.checked_add(table_blocks)?;
        let sums_blocks = sum_table_blocks(total_blocks.checked_sub(sums_start)?);
        if sums_blocks > u64::from(u32::MAX) {
            return None;
        }
        let data_start = sums_start.checked_add(sums_blocks)?;
        if data_start >= total_blocks {
            return None;
        }
        Some(Superblock {
            total_blocks,
            inode_count,
            sums_start,
            sums_blocks,
            data_start,
            data_end: total_blocks,
            seq_floor: SEQ_BATCH,
        })
    }

    /// Encode into a whole block 0.
    pub fn encode(&self) -> [u8; BLOCK_SIZE] {
        let mut b = [0u8; BLOCK_SIZE];
        put(&mut b, 0, &MAGIC);
        put(&mut b, 8, &VERSION.to_le_bytes());
        put(&mut b, 12, &(BLOCK_SIZE as u32).to_le_bytes());
        put(&mut b, 16, &self.total_blocks.to_le_bytes());
        put(&mut b, 24, &TABLE_START.to_le_bytes());
        put(&mut b, 32, &self.inode_count.to_le_bytes());
        put(&mut b, 36, &(self.table_blocks() as u32).to_le_bytes());
        put(&mut b, 40, &self.data_start.to_le_bytes());
        put(&mut b, 48, &self.data_end.to_le_bytes());
        put(&mut b, SB_SEQ_FLOOR_OFF, &self.seq_floor.to_le_bytes());
        put(&mut b, SB_SUMS_START_OFF, &self.sums_start.to_le_bytes());
        put(
            &mut b,
            SB_SUMS_BLOCKS_OFF,
            &(self.sums_blocks as u32).to_le_bytes(),
        );
        let crc = crc32fast::hash(&b[..SB_CRC_OFF]);
        put(&mut b, SB_CRC_OFF, &crc.to_le_bytes());
        b
    }

    /// Decode and check block 0 against itself and against a device of
    /// `device_blocks` blocks.
    pub fn decode(b: &[u8; BLOCK_SIZE], device_blocks: u64) -> Result<Superblock, MountError> {
        let mut magic = [0u8; 8];
        magic.copy_from_slice(&b[..8]);
        if magic != MAGIC {
            return Err(MountError::BadMagic { found: magic });
        }
        let version = u32_at(b, 8);
        if version != VERSION {
            return Err(MountError::UnsupportedVersion { found: version });
        }
        let stored = u32_at(b, SB_CRC_OFF);
        let computed = crc32fast::hash(&b[..SB_CRC_OFF]);
        if stored != computed {
            return Err(MountError::SuperblockChecksum { stored, computed });
        }
        if !all_zero(&b[SB_END..]) {
            return Err(MountError::SuperblockReserved);
        }
        let block_size = u32_at(b, 12);
        if block_size as usize != BLOCK_SIZE {
            return Err(MountError::BadBlockSize { found: block_size });
        }
        let total_blocks = u64_at(b, 16);
        if total_blocks > device_blocks {
            return Err(MountError::DeviceTooSmall {
                device_blocks,
                superblock_blocks: total_blocks,
            });
        }
        let geo = |what: String| Err(MountError::Geometry(what));
        let table_start = u64_at(b, 24);
        if table_start != TABLE_START {
            return geo(alloc::format!(
                "inode table starts at block {table_start}, expected {TABLE_START}"
            ));
        }
        let inode_count = u32_at(b, 32);
        if inode_count == 0 || !(inode_count as usize).is_multiple_of(RECORDS_PER_BLOCK) {
            return geo(alloc::format!(
                "inode count {inode_count} is not a positive multiple of {RECORDS_PER_BLOCK}"
            ));
        }
        let table_blocks = u32_at(b, 36);
        if table_blocks as usize != inode_count as usize / RECORDS_PER_BLOCK {
            return geo(alloc::format!(
                "inode table of {table_blocks} blocks does not hold {inode_count} inodes"
            ));
        }
        let table_end = TABLE_START + u64::from(table_blocks);
        let sums_start = u64_at(b, SB_SUMS_START_OFF);
        if sums_start != table_end {
            return geo(alloc::format!(
                "checksum table starts at block {sums_start}, inode table ends at {table_end}"
            ));
        }
        let sums_blocks = u64::from(u32_at(b, SB_SUMS_BLOCKS_OFF));
        let want = sum_table_blocks(total_blocks.saturating_sub(sums_start));
        if sums_blocks != want {
            return geo(alloc::format!(
                "checksum table of {sums_blocks} blocks, {total_blocks} blocks need {want}"
            ));
        }
        let data_start = u64_at(b, 40);
        let sums_end = sums_start + sums_blocks;
        if data_start != sums_end {
            return geo(alloc::format!(
                "data area starts at block {data_start}, checksum table ends at {sums_end}"
            ));
        }
        let data_end = u64_at(b, 48);
        if data_end != total_blocks {
            return geo(alloc::format!(
                "data area ends at block {data_end}, file system has {total_blocks} blocks"
            ));
        }
        if data_start >= data_end {
            return geo(alloc::format!(
                "inode table ({table_blocks} blocks) leaves no data area in {total_blocks} blocks"
            ));
        }
        // Any floor decodes; that it lies above every live inode's sequence
        // number is checked with the inode table ([`super::mount`]).
        let seq_floor = u64_at(b, SB_SEQ_FLOOR_OFF);
        Ok(Superblock {
            total_blocks,
            inode_count,
            sums_start,
            sums_blocks,
            data_start,
            data_end,
            seq_floor,
        })
    }
}

/// A run of `len` consecutive blocks starting at absolute block `start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// First block (absolute block number on the device).
    pub start: u64,
    /// Number of blocks (never 0 on disk).
    pub len: u32,
}

impl Extent {
    /// One past the last block, if it does not overflow.
    pub fn end(&self) -> Option<u64> {
        self.start.checked_add(u64::from(self.len))
    }
}

/// An inode in use, as cached in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inode {
    /// File or directory.
    pub kind: FileKind,
    /// Parent directory (root: itself).
    pub parent: u64,
    /// Creation sequence number: strictly greater than the parent's and
    /// strictly less than the superblock's sequence floor.
    pub seq: u64,
    /// Files: size in bytes. Directories: 0 on disk; the entry count is
    /// kept in the directory index instead.
    pub size: u64,
    /// Change counter.
    pub version: u64,
    /// Name in the parent (root: empty).
    pub name: String,
    /// Data extents in file order (directories have none).
    pub extents: Vec<Extent>,
}

impl Inode {
    /// Blocks allocated to the inode.
    pub fn allocated_blocks(&self) -> u64 {
        self.extents.iter().map(|e| u64::from(e.len)).sum()
    }
}

/// Map logical block `logical` of a file made of `extents` to its device
/// block.
pub fn map_block(extents: &[Extent], mut logical: u64) -> Option<u64> {
    for e in extents {
        let len = u64::from(e.len);
        if logical < len {
            return e.start.checked_add(logical);
        }
        logical -= len;
    }
    None
}

/// Encode one record slot (`None`: a free slot, all zeros).
pub fn encode_record(ino: u64, inode: Option<&Inode>, out: &mut [u8]) {
    out.fill(0);
    let Some(n) = inode else { return };
    let mut r = [0u8; RECORD_SIZE];
    r[0] = n.kind as u8;
    let name = n.name.as_bytes();
    let name_len = name.len().min(MAX_NAME);
    r[1] = name_len as u8;
    let count = n.extents.len().min(MAX_EXTENTS);
    put(&mut r, 2, &(count as u16).to_le_bytes());
    put(&mut r, 8, &ino.to_le_bytes());
    put(&mut r, 16, &n.parent.to_le_bytes());
    put(&mut r, 24, &n.seq.to_le_bytes());
    let size = if n.kind == FileKind::Dir { 0 } else { n.size };
    put(&mut r, 32, &size.to_le_bytes());
    put(&mut r, 40, &n.version.to_le_bytes());
    put(&mut r, REC_NAME_OFF, name.get(..name_len).unwrap_or(&[]));
    for (i, e) in n.extents.iter().take(MAX_EXTENTS).enumerate() {
        let o = REC_EXT_OFF + i * EXT_SIZE;
        put(&mut r, o, &e.start.to_le_bytes());
        put(&mut r, o + 8, &e.len.to_le_bytes());
    }
    let crc = crc32fast::hash(&r[..REC_CRC_OFF]);
    put(&mut r, REC_CRC_OFF, &crc.to_le_bytes());
    if let Some(o) = out.get_mut(..RECORD_SIZE) {
        o.copy_from_slice(&r);
    }
}

/// Decode and check one record in isolation: checksum, kind, inode number,
/// name, canonical padding, extent count and that each extent is non-empty
/// and lies inside the data area `[data_start, data_end)`.
pub fn decode_record(
    ino: u64,
    r: &[u8; RECORD_SIZE],
    data_start: u64,
    data_end: u64,
) -> Result<Option<Box<Inode>>, MountError> {
    if r[0] == 0 {
        return if all_zero(r) {
            Ok(None)
        } else {
            Err(MountError::FreeInodeNotZero { ino })
        };
    }
    let kind = check_record_header(ino, r)?;
    let name = decode_name(ino, r)?;
    let count = usize::from(u16_at(r, 2));
    if count > MAX_EXTENTS {
        return Err(MountError::TooManyExtents { ino, count });
    }
    let size = u64_at(r, 32);
    if kind == FileKind::Dir && count != 0 {
        return Err(MountError::BadRecord {
            ino,
            what: "directory has data extents",
        });
    }
    if kind == FileKind::Dir && size != 0 {
        return Err(MountError::BadRecord {
            ino,
            what: "directory has a nonzero size field",
        });
    }
    let inode = Inode {
        kind,
        parent: u64_at(r, 16),
        seq: u64_at(r, 24),
        size,
        version: u64_at(r, 40),
        name: String::from(name),
        extents: decode_extents(ino, r, count, data_start, data_end)?,
    };
    let allocated = inode.allocated_blocks().saturating_mul(BLOCK_SIZE as u64);
    if kind == FileKind::File && size > allocated {
        return Err(MountError::SizeBeyondAllocation {
            ino,
            size,
            allocated,
        });
    }
    Ok(Some(Box::new(inode)))
}

/// A used record's checksum, kind, inode number and reserved bytes; its
/// kind if they are right.
fn check_record_header(ino: u64, r: &[u8; RECORD_SIZE]) -> Result<FileKind, MountError> {
    let stored = u32_at(r, REC_CRC_OFF);
    let computed = crc32fast::hash(&r[..REC_CRC_OFF]);
    if stored != computed {
        return Err(MountError::InodeChecksum {
            ino,
            stored,
            computed,
        });
    }
    let kind = FileKind::from_u8(r[0]).ok_or(MountError::BadKind { ino, kind: r[0] })?;
    let found = u64_at(r, 8);
    if found != ino {
        return Err(MountError::BadInodeNumber { ino, found });
    }
    if u32_at(r, 4) != 0 || !all_zero(&r[REC_TAIL_OFF..REC_CRC_OFF]) {
        return Err(MountError::BadRecord {
            ino,
            what: "reserved bytes are not zero",
        });
    }
    Ok(kind)
}

/// A record's entry name: at most [`MAX_NAME`] bytes of UTF-8, zero
/// padded, a valid name (the root's is not checked).
fn decode_name(ino: u64, r: &[u8; RECORD_SIZE]) -> Result<&str, MountError> {
    let name_len = usize::from(r[1]);
    if name_len > MAX_NAME {
        return Err(MountError::BadName {
            ino,
            why: "longer than 59 bytes",
        });
    }
    let area = &r[REC_NAME_OFF..REC_EXT_OFF];
    let (name_bytes, pad) = area.split_at(name_len);
    if !all_zero(pad) {
        return Err(MountError::BadRecord {
            ino,
            what: "name padding is not zero",
        });
    }
    let name = core::str::from_utf8(name_bytes).map_err(|_| MountError::BadName {
        ino,
        why: "not valid UTF-8",
    })?;
    if ino != super::ROOT_INO {
        check_name(name).map_err(|why| MountError::BadName { ino, why })?;
    }
    Ok(name)
}

/// A record's `count` extents, each nonempty and inside the data area
/// `data_start..data_end`; the unused slots must be zero.
fn decode_extents(
    ino: u64,
    r: &[u8; RECORD_SIZE],
    count: usize,
    data_start: u64,
    data_end: u64,
) -> Result<Vec<Extent>, MountError> {
    let mut extents = Vec::with_capacity(count);
    for i in 0..MAX_EXTENTS {
        let o = REC_EXT_OFF + i * EXT_SIZE;
        let start = u64_at(r, o);
        let len = u32_at(r, o + 8);
        if i >= count {
            if start != 0 || len != 0 {
                return Err(MountError::BadRecord {
                    ino,
                    what: "unused extent slot is not zero",
                });
            }
            continue;
        }
        if len == 0 {
            return Err(MountError::EmptyExtent { ino, index: i });
        }
        let end = start.saturating_add(u64::from(len));
        if start < data_start || end > data_end {
            return Err(MountError::ExtentOutOfRange {
                ino,
                index: i,
                start,
                end,
                data_start,
                data_end,
            });
        }
        extents.push(Extent { start, len });
    }
    Ok(extents)
}

/// Is `name` a valid entry name? `Err` says why not.
pub fn check_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("empty");
    }
    if name.len() > MAX_NAME {
        return Err("longer than 59 bytes");
    }
    if name == "." || name == ".." {
        return Err("\".\" or \"..\"");
    }
    if name.bytes().any(|c| c == b'/' || c == 0) {
        return Err("contains '/' or NUL");
    }
    Ok(())
}
