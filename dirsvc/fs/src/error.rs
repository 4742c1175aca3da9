//! Why an image is refused at mount.

use alloc::string::String;
use core::fmt;

use super::disk::{MAX_EXTENTS, VERSION};
use super::BLOCK_SIZE;

/// What is wrong with an inode's parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParentProblem {
    /// The parent number is 0 or past the inode table.
    OutOfRange,
    /// The parent slot is free.
    Free,
    /// The parent is a regular file.
    NotDir,
    /// The parent is not older than the child (its creation sequence
    /// number is not smaller): the only way a cycle could be written.
    NotOlder {
        /// The parent's sequence number.
        parent_seq: u64,
        /// The child's sequence number.
        seq: u64,
    },
}

/// Why [`super::Fs::mount`] refused an image. Each variant names the
/// problem and where it is; `Display` gives one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MountError {
    /// The device could not be read.
    Io {
        /// Block that failed.
        lba: u64,
    },
    /// The device has no block at all.
    EmptyDevice,
    /// Block 0 does not start with the onecopy magic.
    BadMagic {
        /// The first eight bytes found.
        found: [u8; 8],
    },
    /// The superblock's checksum does not match its fields.
    SuperblockChecksum {
        /// Checksum stored on disk.
        stored: u32,
        /// Checksum of the fields as read.
        computed: u32,
    },
    /// A format version this code does not read.
    UnsupportedVersion {
        /// Version found on disk.
        found: u32,
    },
    /// Reserved superblock bytes are not zero.
    SuperblockReserved,
    /// A block size other than [`BLOCK_SIZE`].
    BadBlockSize {
        /// Block size found on disk.
        found: u32,
    },
    /// The superblock describes more blocks than the device has.
    DeviceTooSmall {
        /// Blocks on the device.
        device_blocks: u64,
        /// Blocks the superblock claims.
        superblock_blocks: u64,
    },
    /// The superblock's layout is inconsistent with itself.
    Geometry(String),
    /// A block of the data checksum table does not match its own checksum.
    SumTableChecksum {
        /// Device block of the table block.
        lba: u64,
        /// Checksum stored on disk.
        stored: u32,
        /// Checksum of the block as read.
        computed: u32,
    },
    /// Checksum-table entries past the end of the data area are not zero.
    SumTablePadding {
        /// Device block of the table block.
        lba: u64,
    },
    /// An inode record's checksum does not match.
    InodeChecksum {
        /// Inode number of the slot.
        ino: u64,
        /// Checksum stored on disk.
        stored: u32,
        /// Checksum of the record as read.
        computed: u32,
    },
    /// A free inode slot holds nonzero bytes.
    FreeInodeNotZero {
        /// Inode number of the slot.
        ino: u64,
    },
    /// An inode's kind byte is neither file nor directory.
    BadKind {
        /// Inode number of the slot.
        ino: u64,
        /// Kind byte found.
        kind: u8,
    },
    /// A record's inode-number field does not match its slot.
    BadInodeNumber {
        /// Inode number of the slot.
        ino: u64,
        /// Inode number the record claims.
        found: u64,
    },
    /// A record field is malformed (the text says which).
    BadRecord {
        /// Inode number of the slot.
        ino: u64,
        /// What is wrong.
        what: &'static str,
    },
    /// An inode's name is not a valid entry name.
    BadName {
        /// Inode number of the slot.
        ino: u64,
        /// Why not.
        why: &'static str,
    },
    /// A record's extent count exceeds the slots in a record.
    TooManyExtents {
        /// Inode number of the slot.
        ino: u64,
        /// Extent count found.
        count: usize,
    },
    /// An extent of length 0.
    EmptyExtent {
        /// Inode number.
        ino: u64,
        /// Extent index in the record.
        index: usize,
    },
    /// An extent that does not lie inside the data area.
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
    SharedBlock {
        /// One owner.
        a: u64,
        /// The other owner (may equal `a`).
        b: u64,
        /// First block they share.
        block: u64,
    },
    /// A file's size exceeds the bytes its extents hold.
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
    SeqNotBelowFloor {
        /// Inode number.
        ino: u64,
        /// Its creation sequence number.
        seq: u64,
        /// The superblock's sequence floor.
        floor: u64,
    },
    /// The root inode (1) is missing or malformed.
    BadRoot {
        /// What is wrong.
        what: &'static str,
    },
    /// An inode's parent is unusable.
    BadParent {
        /// Inode number.
        ino: u64,
        /// Its parent field.
        parent: u64,
        /// What is wrong with the parent.
        problem: ParentProblem,
    },
    /// Two entries of one directory have the same name.
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

fn hex8(f: &mut fmt::Formatter<'_>, b: &[u8; 8]) -> fmt::Result {
    f.write_str("0x")?;
    for x in b {
        write!(f, "{x:02x}")?;
    }
    Ok(())
}

impl fmt::Display for MountError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use MountError as E;
        match self {
            E::Io { lba } => write!(f, "I/O error reading block {lba}"),
            E::EmptyDevice => f.write_str("device is empty: no room for a superblock"),
            E::BadMagic { found } => {
                f.write_str("bad magic: not a onecopy image (found ")?;
                hex8(f, found)?;
                f.write_str(")")
            }
            E::SuperblockChecksum { stored, computed } => write!(
                f,
                "superblock checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ),
            E::UnsupportedVersion { found } => write!(
                f,
                "unsupported format version {found} (this build reads version {VERSION}): re-create the image with mkfs"
            ),
            E::SuperblockReserved => f.write_str("superblock: reserved bytes are not zero"),
            E::BadBlockSize { found } => write!(
                f,
                "unsupported block size {found} (this kernel reads {BLOCK_SIZE})"
            ),
            E::DeviceTooSmall {
                device_blocks,
                superblock_blocks,
            } => write!(
                f,
                "device has {device_blocks} blocks, superblock says {superblock_blocks}"
            ),
            E::Geometry(what) => write!(f, "bad geometry: {what}"),
            E::InodeChecksum {
                ino,
                stored,
                computed,
            } => write!(
                f,
                "inode {ino}: record checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ),
            E::SumTableChecksum {
                lba,
                stored,
                computed,
            } => write!(
                f,
                "checksum table block {lba}: checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ),
            E::SumTablePadding { lba } => write!(
                f,
                "checksum table block {lba}: entries past the data area are not zero"
            ),
            E::FreeInodeNotZero { ino } => write!(f, "inode {ino}: free record is not zeroed"),
            E::BadKind { ino, kind } => write!(f, "inode {ino}: bad kind {kind}"),
            E::BadInodeNumber { ino, found } => {
                write!(f, "inode {ino}: record says it is inode {found}")
            }
            E::BadRecord { ino, what } => write!(f, "inode {ino}: {what}"),
            E::BadName { ino, why } => write!(f, "inode {ino}: bad name ({why})"),
            E::TooManyExtents { ino, count } => write!(
                f,
                "inode {ino}: extent count {count} exceeds the {MAX_EXTENTS} slots of a record"
            ),
            E::EmptyExtent { ino, index } => write!(f, "inode {ino}: extent {index} is empty"),
            E::ExtentOutOfRange {
                ino,
                index,
                start,
                end,
                data_start,
                data_end,
            } => {
                if start < data_start {
                    write!(
                        f,
                        "inode {ino}: extent {index} [{start}..{end}) before data area start {data_start}"
                    )
                } else {
                    write!(
                        f,
                        "inode {ino}: extent {index} [{start}..{end}) beyond data area end {data_end}"
                    )
                }
            }
            E::SharedBlock { a, b, block } => {
                if a == b {
                    write!(f, "inode {a}: two extents share block {block}")
                } else {
                    write!(f, "inodes {a} and {b} share block {block}")
                }
            }
            E::SizeBeyondAllocation {
                ino,
                size,
                allocated,
            } => write!(
                f,
                "inode {ino}: size {size} exceeds its {allocated} allocated bytes"
            ),
            E::SeqNotBelowFloor { ino, seq, floor } => write!(
                f,
                "inode {ino}: sequence number {seq} is not below the superblock's sequence floor {floor}"
            ),
            E::BadRoot { what } => write!(f, "root inode 1: {what}"),
            E::BadParent {
                ino,
                parent,
                problem,
            } => match problem {
                ParentProblem::OutOfRange => {
                    write!(f, "inode {ino}: parent {parent} is out of range")
                }
                ParentProblem::Free => write!(f, "inode {ino}: parent {parent} is not in use"),
                ParentProblem::NotDir => {
                    write!(f, "inode {ino}: parent {parent} is not a directory")
                }
                ParentProblem::NotOlder { parent_seq, seq } => write!(
                    f,
                    "inode {ino}: parent {parent} is not older (seq {parent_seq} >= {seq}): cycle or misordered inodes"
                ),
            },
            E::DuplicateName {
                dir,
                name,
                first,
                second,
            } => write!(
                f,
                "directory {dir}: name {name:?} used by inodes {first} and {second}"
            ),
        }
    }
}
