//! Why an image is refused at mount.

use alloc::format;
use alloc::string::String;
use core::fmt;

use super::disk::{MAX_EXTENTS, VERSION};
use super::BLOCK_SIZE;

/// What is wrong with an inode's parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ParentProblem {
    /// The parent number is 0 or past the inode table.
    #[error("is out of range")]
    OutOfRange,
    /// The parent slot is free.
    #[error("is not in use")]
    Free,
    /// The parent is a regular file.
    #[error("is not a directory")]
    NotDir,
    /// The parent is not older than the child (its creation sequence
    /// number is not smaller): the only way a cycle could be written.
    #[error("is not older (seq {parent_seq} >= {seq}): cycle or misordered inodes")]
    NotOlder {
        /// The parent's sequence number.
        parent_seq: u64,
        /// The child's sequence number.
        seq: u64,
    },
}

/// Why [`super::Fs::mount`] refused an image. Each variant names the
/// problem and where it is; `Display` gives one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MountError {
    /// The device could not be read.
    #[error("I/O error reading block {lba}")]
    Io {
        /// Block that failed.
        lba: u64,
    },
    /// The device has no block at all.
    #[error("device is empty: no room for a superblock")]
    EmptyDevice,
    /// Block 0 does not start with the onecopy magic.
    #[error("bad magic: not a onecopy image (found {})", Hex8(found))]
    BadMagic {
        /// The first eight bytes found.
        found: [u8; 8],
    },
    /// The superblock's checksum does not match its fields.
    #[error("superblock checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    SuperblockChecksum {
        /// Checksum stored on disk.
        stored: u32,
        /// Checksum of the fields as read.
        computed: u32,
    },
    /// A format version this code does not read.
    #[error("unsupported format version {found} (this build reads version {VERSION}): re-create the image with mkfs")]
    UnsupportedVersion {
        /// Version found on disk.
        found: u32,
    },
    /// Reserved superblock bytes are not zero.
    #[error("superblock: reserved bytes are not zero")]
    SuperblockReserved,
    /// A block size other than [`BLOCK_SIZE`].
    #[error("unsupported block size {found} (this kernel reads {BLOCK_SIZE})")]
    BadBlockSize {
        /// Block size found on disk.
        found: u32,
    },
    /// The superblock describes more blocks than the device has.
    #[error("device has {device_blocks} blocks, superblock says {superblock_blocks}")]
    DeviceTooSmall {
        /// Blocks on the device.
        device_blocks: u64,
        /// Blocks the superblock claims.
        superblock_blocks: u64,
    },
    /// The superblock's layout is inconsistent with itself.
    #[error("bad geometry: {0}")]
    Geometry(String),
    /// A block of the data checksum table does not match its own checksum.
    #[error("checksum table block {lba}: checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    SumTableChecksum {
        /// Device block of the table block.
        lba: u64,
        /// Checksum stored on disk.
        stored: u32,
        /// Checksum of the block as read.
        computed: u32,
    },
    /// Checksum-table entries past the end of the data area, or the
    /// block's unused bytes, are not zero.
    #[error("checksum table block {lba}: entries past the data area or unused bytes are not zero")]
    SumTablePadding {
        /// Device block of the table block.
        lba: u64,
    },
    /// An inode record's checksum does not match.
    #[error(
        "inode {ino}: record checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
    )]
    InodeChecksum {
        /// Inode number of the slot.
        ino: u64,
        /// Checksum stored on disk.
        stored: u32,
        /// Checksum of the record as read.
        computed: u32,
    },
    /// A free inode slot holds nonzero bytes.
    #[error("inode {ino}: free record is not zeroed")]
    FreeInodeNotZero {
        /// Inode number of the slot.
        ino: u64,
    },
    /// An inode's kind byte is neither file nor directory.
    #[error("inode {ino}: bad kind {kind}")]
    BadKind {
        /// Inode number of the slot.
        ino: u64,
        /// Kind byte found.
        kind: u8,
    },
    /// A record's inode-number field does not match its slot.
    #[error("inode {ino}: record says it is inode {found}")]
    BadInodeNumber {
        /// Inode number of the slot.
        ino: u64,
        /// Inode number the record claims.
        found: u64,
    },
    /// A record field is malformed (the text says which).
    #[error("inode {ino}: {what}")]
    BadRecord {
        /// Inode number of the slot.
        ino: u64,
        /// What is wrong.
        what: &'static str,
    },
    /// An inode's name is not a valid entry name.
    #[error("inode {ino}: bad name ({why})")]
    BadName {
        /// Inode number of the slot.
        ino: u64,
        /// Why not.
        why: &'static str,
    },
    /// A record's extent count exceeds the slots in a record.
    #[error("inode {ino}: extent count {count} exceeds the {MAX_EXTENTS} slots of a record")]
    TooManyExtents {
        /// Inode number of the slot.
        ino: u64,
        /// Extent count found.
        count: usize,
    },
    /// An extent of length 0.
    #[error("inode {ino}: extent {index} is empty")]
    EmptyExtent {
        /// Inode number.
        ino: u64,
        /// Extent index in the record.
        index: usize,
    },
    /// An extent that does not lie inside the data area.
    #[error("inode {ino}: extent {index} [{start}..{end}) {}", outside(*start, *data_start, *data_end))]
    ExtentOutOfRange {
        /// Inode number.
        ino: u64,
        /// Extent index in the record.
        index: usize,
        /// First block of the extent.
        start: u64,
        /// One past its last block (saturated).
        end: u64,
        /// First block of the data area.
        data_start: u64,
        /// One past the last block of the data area.
        data_end: u64,
    },
    /// Two extents (of the same inode or of two inodes) overlap.
    #[error("{} share block {block}", owners(*a, *b))]
    SharedBlock {
        /// One owner.
        a: u64,
        /// The other owner (may equal `a`).
        b: u64,
        /// First block they share.
        block: u64,
    },
    /// A file's size exceeds the bytes its extents hold.
    #[error("inode {ino}: size {size} exceeds its {allocated} allocated bytes")]
    SizeBeyondAllocation {
        /// Inode number.
        ino: u64,
        /// Size field.
        size: u64,
        /// Bytes allocated.
        allocated: u64,
    },
    /// An inode's creation sequence number is not below the superblock's
    /// sequence floor, so the floor does not bound the numbers handed out.
    #[error(
        "inode {ino}: sequence number {seq} is not below the superblock's sequence floor {floor}"
    )]
    SeqNotBelowFloor {
        /// Inode number.
        ino: u64,
        /// Its creation sequence number.
        seq: u64,
        /// The superblock's sequence floor.
        floor: u64,
    },
    /// The root inode (1) is missing or malformed.
    #[error("root inode 1: {what}")]
    BadRoot {
        /// What is wrong.
        what: &'static str,
    },
    /// An inode's parent is unusable.
    #[error("inode {ino}: parent {parent} {problem}")]
    BadParent {
        /// Inode number.
        ino: u64,
        /// Its parent field.
        parent: u64,
        /// What is wrong with the parent.
        problem: ParentProblem,
    },
    /// Two entries of one directory have the same name.
    #[error("directory {dir}: name {name:?} used by inodes {first} and {second}")]
    DuplicateName {
        /// The directory.
        dir: u64,
        /// The name.
        name: String,
        /// The first inode with the name.
        first: u64,
        /// The second.
        second: u64,
    },
}

/// Eight bytes in hex, as `0x0011..`.
struct Hex8<'a>(&'a [u8; 8]);

impl fmt::Display for Hex8<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("0x")?;
        self.0.iter().try_for_each(|x| write!(f, "{x:02x}"))
    }
}

/// Which end of the data area an extent lies past.
fn outside(start: u64, data_start: u64, data_end: u64) -> String {
    if start < data_start {
        format!("before data area start {data_start}")
    } else {
        format!("beyond data area end {data_end}")
    }
}

/// "inode A: two extents" or "inodes A and B".
fn owners(a: u64, b: u64) -> String {
    if a == b {
        format!("inode {a}: two extents")
    } else {
        format!("inodes {a} and {b}")
    }
}
