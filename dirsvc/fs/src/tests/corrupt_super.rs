//! Damaged superblocks and checksum tables are refused at mount, each
//! with its own error, nothing written.

use super::corruption::assert_refused;
use super::*;

/// Magic, checksum, version, block size, device size, reserved bytes.
#[test]
fn damaged_superblock_fields_are_refused() {
    assert_refused(vec![
        (
            "all zeros",
            |i| i.fill(0),
            |e| matches!(e, MountError::BadMagic { found } if *found == [0; 8]),
        ),
        (
            "random bytes",
            |i| {
                let mut r = Rng::new(77);
                for b in i.iter_mut() {
                    *b = r.next_u64() as u8;
                }
            },
            |e| matches!(e, MountError::BadMagic { .. }),
        ),
        (
            "magic",
            |i| i[3] ^= 0x20,
            |e| matches!(e, MountError::BadMagic { .. }),
        ),
        (
            "superblock crc",
            |i| i[20] ^= 1,
            |e| matches!(e, MountError::SuperblockChecksum { .. }),
        ),
        (
            "crc field",
            |i| i[77] ^= 1,
            |e| matches!(e, MountError::SuperblockChecksum { .. }),
        ),
        (
            "version",
            |i| {
                put32(i, 8, 7);
                fix_sb(i)
            },
            |e| *e == MountError::UnsupportedVersion { found: 7 },
        ),
        (
            "version without crc",
            |i| put32(i, 8, 4),
            |e| *e == MountError::UnsupportedVersion { found: 4 },
        ),
        (
            "block size",
            |i| {
                put32(i, 12, 512);
                fix_sb(i)
            },
            |e| *e == MountError::BadBlockSize { found: 512 },
        ),
        (
            "total blocks beyond device",
            |i| {
                put64(i, 16, 16384);
                put64(i, 48, 16384);
                fix_sb(i)
            },
            |e| {
                *e == MountError::DeviceTooSmall {
                    device_blocks: 64,
                    superblock_blocks: 16384,
                }
            },
        ),
        (
            "device truncated",
            |i| i.truncate(10 * BLOCK_SIZE + 100),
            |e| {
                *e == MountError::DeviceTooSmall {
                    device_blocks: 10,
                    superblock_blocks: 64,
                }
            },
        ),
        (
            "empty device",
            |i| i.truncate(100),
            |e| *e == MountError::EmptyDevice,
        ),
        (
            "superblock tail",
            |i| i[4000] = 1,
            |e| *e == MountError::SuperblockReserved,
        ),
    ]);
}

/// Where the tables and the data area lie, and the sequence floor.
#[test]
fn damaged_geometries_are_refused() {
    assert_refused(vec![
        (
            "table start",
            |i| {
                put64(i, 24, 2);
                fix_sb(i)
            },
            |e| matches!(e, MountError::Geometry(_)),
        ),
        (
            "inode count not a multiple",
            |i| {
                put32(i, 32, 17);
                fix_sb(i)
            },
            |e| matches!(e, MountError::Geometry(_)),
        ),
        (
            "inode count zero",
            |i| {
                put32(i, 32, 0);
                put32(i, 36, 0);
                fix_sb(i)
            },
            |e| matches!(e, MountError::Geometry(_)),
        ),
        (
            "table blocks",
            |i| {
                put32(i, 36, 3);
                fix_sb(i)
            },
            |e| matches!(e, MountError::Geometry(_)),
        ),
        (
            "data start",
            |i| {
                put64(i, 40, 2);
                fix_sb(i)
            },
            |e| matches!(e, MountError::Geometry(_)),
        ),
        (
            "data end",
            |i| {
                put64(i, 48, 63);
                fix_sb(i)
            },
            |e| matches!(e, MountError::Geometry(_)),
        ),
        (
            "table fills the device",
            |i| {
                put32(i, 32, 63 * 16);
                put32(i, 36, 63);
                put64(i, 40, 64);
                fix_sb(i)
            },
            |e| matches!(e, MountError::Geometry(_)),
        ),
        (
            "seq floor too small",
            |i| {
                // /a/b (inode 5) has the highest sequence number, 4.
                assert_eq!(get64(i, rec(5) + 24), 4);
                put64(i, 56, 4);
                fix_sb(i)
            },
            |e| {
                *e == MountError::SeqNotBelowFloor {
                    ino: 5,
                    seq: 4,
                    floor: 4,
                }
            },
        ),
        (
            "seq floor zero",
            |i| {
                put64(i, 56, 0);
                fix_sb(i)
            },
            |e| {
                *e == MountError::SeqNotBelowFloor {
                    ino: 1,
                    seq: 0,
                    floor: 0,
                }
            },
        ),
        (
            "seq at the floor",
            |i| set_rec64(i, 4, 24, SEQ_BATCH),
            |e| {
                *e == MountError::SeqNotBelowFloor {
                    ino: 4,
                    seq: SEQ_BATCH,
                    floor: SEQ_BATCH,
                }
            },
        ),
        (
            "seq above the floor",
            |i| set_rec64(i, 4, 24, u64::MAX),
            |e| {
                *e == MountError::SeqNotBelowFloor {
                    ino: 4,
                    seq: u64::MAX,
                    floor: SEQ_BATCH,
                }
            },
        ),
    ]);
}

/// The data checksum table: its blocks' checksums, entries and place.
#[test]
fn damaged_checksum_tables_are_refused() {
    assert_refused(vec![
        (
            "checksum table block crc",
            |i| i[3 * BLOCK_SIZE + 5] ^= 1,
            |e| matches!(e, MountError::SumTableChecksum { lba: 3, .. }),
        ),
        (
            "checksum table block crc field",
            |i| i[4 * BLOCK_SIZE - 1] ^= 1,
            |e| matches!(e, MountError::SumTableChecksum { lba: 3, .. }),
        ),
        (
            "checksum entry past the data area",
            |i| {
                put32(i, 3 * BLOCK_SIZE + 60 * 8 + 4, 1);
                fix_sums(i, 3)
            },
            |e| *e == MountError::SumTablePadding { lba: 3 },
        ),
        (
            "checksum table's unused bytes",
            |i| {
                put32(i, 3 * BLOCK_SIZE + SUMS_PER_BLOCK * 8, 1);
                fix_sums(i, 3)
            },
            |e| *e == MountError::SumTablePadding { lba: 3 },
        ),
        (
            "checksum table start",
            |i| {
                put64(i, 64, 4);
                fix_sb(i)
            },
            |e| matches!(e, MountError::Geometry(m) if m.contains("checksum table starts")),
        ),
        (
            "checksum table blocks",
            |i| {
                put32(i, 72, 2);
                put64(i, 40, 5);
                fix_sb(i)
            },
            |e| matches!(e, MountError::Geometry(m) if m.contains("checksum table of 2 blocks")),
        ),
        (
            "data area overlaps the checksum table",
            |i| {
                put64(i, 40, 3);
                fix_sb(i)
            },
            |e| matches!(e, MountError::Geometry(m) if m.contains("checksum table ends at 4")),
        ),
    ]);
}
