//! Corrupted images: the documented layout, a table of damaged images, error messages.

use super::*;

#[test]
fn layout_matches_the_documentation() {
    let img = reference();
    // Superblock.
    assert_eq!(&img[0..8], b"ONECOPFS");
    assert_eq!(&img[0..8], &MAGIC);
    assert_eq!(u32::from_le_bytes(img[8..12].try_into().unwrap()), 3);
    assert_eq!(VERSION, 3);
    assert_eq!(u32::from_le_bytes(img[12..16].try_into().unwrap()), 4096);
    assert_eq!(get64(&img, 16), 64);
    assert_eq!(get64(&img, 24), 1);
    assert_eq!(u32::from_le_bytes(img[32..36].try_into().unwrap()), 32);
    assert_eq!(u32::from_le_bytes(img[36..40].try_into().unwrap()), 2);
    assert_eq!(get64(&img, 40), 4);
    assert_eq!(get64(&img, 48), 64);
    // Sequence floor: still the initial one (5 inodes need no raise), and
    // above every live inode's sequence number.
    assert_eq!(SB_SEQ_FLOOR_OFF, 56);
    assert_eq!(get64(&img, 56), SEQ_BATCH);
    for ino in 1..=5 {
        assert!(get64(&img, rec(ino) + 24) < get64(&img, 56), "inode {ino}");
    }
    // Checksum table: starts after the inode table, one block.
    assert_eq!(get64(&img, 64), 3);
    assert_eq!(u32::from_le_bytes(img[72..76].try_into().unwrap()), 1);
    let crc = u32::from_le_bytes(img[76..80].try_into().unwrap());
    assert_eq!(crc, crc32fast::hash(&img[..76]));
    assert!(img[80..BLOCK_SIZE].iter().all(|&b| b == 0));
    // Root record in slot 0 of block 1.
    let r = rec(1);
    assert_eq!(r, 4096);
    assert_eq!((img[r], img[r + 1]), (2, 0));
    assert_eq!(get64(&img, r + 8), 1);
    assert_eq!(get64(&img, r + 16), 1);
    // /a/f: inode 3, a file of 5000 bytes in /a (inode 2), named "f".
    let r = rec(3);
    assert_eq!(img[r], 1);
    assert_eq!(img[r + 1], 1);
    assert_eq!(u16::from_le_bytes([img[r + 2], img[r + 3]]), 1);
    assert_eq!(&img[r + 4..r + 8], &[0; 4]);
    assert_eq!(get64(&img, r + 8), 3);
    assert_eq!(get64(&img, r + 16), 2);
    assert!(get64(&img, r + 24) > get64(&img, rec(2) + 24));
    assert_eq!(get64(&img, r + 32), 5000);
    // Created (version: seq in the high half, 1 in the low), then one write.
    let seq = get64(&img, r + 24);
    assert_eq!(get64(&img, r + 40), ((seq << 32) | 1) + 1);
    assert_eq!(img[r + REC_NAME_OFF], b'f');
    let start = get64(&img, r + REC_EXT_OFF);
    let len = u32::from_le_bytes(img[r + 120..r + 124].try_into().unwrap());
    assert!(start >= 4 && len == 2);
    let crc = u32::from_le_bytes(img[r + 252..r + 256].try_into().unwrap());
    assert_eq!(crc, crc32fast::hash(&img[r..r + 252]));
    // The file's bytes are its extent's blocks.
    let at = start as usize * BLOCK_SIZE;
    assert_eq!(&img[at..at + 5000], &pattern(5, 5000)[..]);
    // Each of its blocks has its crc32 in the checksum table (block 3,
    // entry = block - data start, 8 bytes: now, before; a block new to
    // its file has no other), and the table block its own crc32.
    let t = 3 * BLOCK_SIZE;
    for b in [start, start + 1] {
        let e = t + (b as usize - 4) * 8;
        let now = u32::from_le_bytes(img[e..e + 4].try_into().unwrap());
        let before = u32::from_le_bytes(img[e + 4..e + 8].try_into().unwrap());
        let at = b as usize * BLOCK_SIZE;
        assert_eq!(now, crc32fast::hash(&img[at..at + BLOCK_SIZE]), "block {b}");
        assert_eq!(before, now, "block {b}");
    }
    assert_eq!(SUMS_PER_BLOCK, 511);
    let crc = u32::from_le_bytes(img[t + 4092..t + 4096].try_into().unwrap());
    assert_eq!(crc, crc32fast::hash(&img[t..t + 4092]));
    // Entries past the data area (60 data blocks) are zero.
    assert!(img[t + 60 * 8..t + 4092].iter().all(|&b| b == 0));
    // Free slots are zero.
    assert!(img[rec(6)..rec(33)].iter().all(|&b| b == 0));
}

#[test]
fn reference_image_mounts() {
    let img = reference();
    let mut d = MemDisk::from_bytes(img.clone());
    let mut fs = Fs::mount(&mut d).unwrap();
    assert_eq!(fs.stats().inodes_used, 5);
    assert_eq!(fs.stats().blocks_used, 3);
    assert_eq!(fs.stats().disk_reads, 4);
    assert_eq!(fs.lookup("/a/b").unwrap().ino, 5);
    drop(fs);
    assert_eq!(d.writes(), 0);
    assert_eq!(d.blocks(), &img[..]);
}

#[test]
fn corrupt_images_are_refused() {
    type Edit = fn(&mut Vec<u8>);
    type Check = fn(&MountError) -> bool;
    let cases: Vec<(&str, Edit, Check)> = vec![
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
        (
            "superblock tail",
            |i| i[4000] = 1,
            |e| *e == MountError::SuperblockReserved,
        ),
        (
            "record crc",
            |i| i[rec(3) + 40] ^= 4,
            |e| matches!(e, MountError::InodeChecksum { ino: 3, .. }),
        ),
        (
            "free record garbage",
            |i| i[rec(20) + 100] = 1,
            |e| *e == MountError::FreeInodeNotZero { ino: 20 },
        ),
        (
            "kind",
            |i| {
                i[rec(4)] = 7;
                fix_rec(i, 4)
            },
            |e| *e == MountError::BadKind { ino: 4, kind: 7 },
        ),
        (
            "inode number",
            |i| set_rec64(i, 4, 8, 9),
            |e| *e == MountError::BadInodeNumber { ino: 4, found: 9 },
        ),
        (
            "reserved",
            |i| {
                i[rec(4) + 5] = 1;
                fix_rec(i, 4)
            },
            |e| matches!(e, MountError::BadRecord { ino: 4, .. }),
        ),
        (
            "reserved tail",
            |i| {
                i[rec(4) + 246] = 1;
                fix_rec(i, 4)
            },
            |e| matches!(e, MountError::BadRecord { ino: 4, .. }),
        ),
        (
            "name padding",
            |i| {
                i[rec(4) + REC_NAME_OFF + 30] = b'z';
                fix_rec(i, 4)
            },
            |e| matches!(e, MountError::BadRecord { ino: 4, .. }),
        ),
        (
            "name with slash",
            |i| {
                i[rec(4) + REC_NAME_OFF] = b'/';
                fix_rec(i, 4)
            },
            |e| matches!(e, MountError::BadName { ino: 4, .. }),
        ),
        (
            "empty name",
            |i| {
                i[rec(4) + 1] = 0;
                i[rec(4) + REC_NAME_OFF] = 0;
                fix_rec(i, 4)
            },
            |e| matches!(e, MountError::BadName { ino: 4, .. }),
        ),
        (
            "dot name",
            |i| {
                i[rec(4) + REC_NAME_OFF] = b'.';
                fix_rec(i, 4)
            },
            |e| {
                // "g" -> "."
                matches!(e, MountError::BadName { ino: 4, .. })
            },
        ),
        (
            "name too long",
            |i| {
                i[rec(4) + 1] = 60;
                i[rec(4) + REC_NAME_OFF..rec(4) + REC_NAME_OFF + 60].fill(b'q');
                fix_rec(i, 4)
            },
            |e| matches!(e, MountError::BadName { ino: 4, .. }),
        ),
        (
            "name not utf-8",
            |i| {
                i[rec(4) + REC_NAME_OFF] = 0xFF;
                fix_rec(i, 4)
            },
            |e| matches!(e, MountError::BadName { ino: 4, .. }),
        ),
        (
            "extent count",
            |i| {
                i[rec(3) + 2] = 12;
                fix_rec(i, 3)
            },
            |e| *e == MountError::TooManyExtents { ino: 3, count: 12 },
        ),
        (
            "directory with extents",
            |i| {
                i[rec(2) + 2] = 1;
                put64(i, rec(2) + REC_EXT_OFF, 60);
                put32(i, rec(2) + REC_EXT_OFF + 8, 1);
                fix_rec(i, 2)
            },
            |e| matches!(e, MountError::BadRecord { ino: 2, .. }),
        ),
        (
            "directory with size",
            |i| set_rec64(i, 2, 32, 3),
            |e| matches!(e, MountError::BadRecord { ino: 2, .. }),
        ),
        (
            "empty extent",
            |i| {
                put32(i, rec(3) + REC_EXT_OFF + 8, 0);
                fix_rec(i, 3)
            },
            |e| *e == MountError::EmptyExtent { ino: 3, index: 0 },
        ),
        (
            "extent beyond the end",
            |i| {
                put64(i, rec(3) + REC_EXT_OFF, 63);
                fix_rec(i, 3)
            },
            |e| {
                matches!(
                    e,
                    MountError::ExtentOutOfRange {
                        ino: 3,
                        index: 0,
                        start: 63,
                        end: 65,
                        data_end: 64,
                        ..
                    }
                )
            },
        ),
        (
            "extent in the inode table",
            |i| {
                put64(i, rec(3) + REC_EXT_OFF, 1);
                fix_rec(i, 3)
            },
            |e| {
                matches!(
                    e,
                    MountError::ExtentOutOfRange {
                        ino: 3,
                        start: 1,
                        data_start: 4,
                        ..
                    }
                )
            },
        ),
        (
            "extent wraps around",
            |i| {
                put64(i, rec(3) + REC_EXT_OFF, u64::MAX - 1);
                fix_rec(i, 3)
            },
            |e| matches!(e, MountError::ExtentOutOfRange { ino: 3, .. }),
        ),
        (
            "unused extent slot",
            |i| {
                put64(i, rec(3) + REC_EXT_OFF + 3 * EXT_SIZE, 9);
                fix_rec(i, 3)
            },
            |e| matches!(e, MountError::BadRecord { ino: 3, .. }),
        ),
        (
            "two inodes share a block",
            |i| {
                // /g's block -> /a/f's second block.
                let fstart = get64(i, rec(3) + REC_EXT_OFF);
                put64(i, rec(4) + REC_EXT_OFF, fstart + 1);
                fix_rec(i, 4)
            },
            |e| matches!(e, MountError::SharedBlock { a: 3, b: 4, .. }),
        ),
        (
            "one inode overlaps itself",
            |i| {
                let o = rec(3) + REC_EXT_OFF;
                let start = get64(i, o);
                i[rec(3) + 2] = 2;
                put32(i, o + 8, 1);
                put64(i, o + EXT_SIZE, start);
                put32(i, o + EXT_SIZE + 8, 1);
                fix_rec(i, 3)
            },
            |e| matches!(e, MountError::SharedBlock { a: 3, b: 3, .. }),
        ),
        (
            "size beyond allocation",
            |i| set_rec64(i, 3, 32, 8193),
            |e| {
                *e == MountError::SizeBeyondAllocation {
                    ino: 3,
                    size: 8193,
                    allocated: 8192,
                }
            },
        ),
        (
            "root free",
            |i| i[rec(1)..rec(2)].fill(0),
            |e| matches!(e, MountError::BadRoot { .. }),
        ),
        (
            "root is a file",
            |i| {
                i[rec(1)] = 1;
                fix_rec(i, 1)
            },
            |e| matches!(e, MountError::BadRoot { .. }),
        ),
        (
            "root parent",
            |i| set_rec64(i, 1, 16, 2),
            |e| matches!(e, MountError::BadRoot { .. }),
        ),
        (
            "root named",
            |i| {
                i[rec(1) + 1] = 1;
                i[rec(1) + REC_NAME_OFF] = b'r';
                fix_rec(i, 1)
            },
            |e| matches!(e, MountError::BadRoot { .. }),
        ),
        (
            "parent zero",
            |i| set_rec64(i, 4, 16, 0),
            |e| {
                *e == MountError::BadParent {
                    ino: 4,
                    parent: 0,
                    problem: ParentProblem::OutOfRange,
                }
            },
        ),
        (
            "parent out of range",
            |i| set_rec64(i, 4, 16, 77),
            |e| {
                *e == MountError::BadParent {
                    ino: 4,
                    parent: 77,
                    problem: ParentProblem::OutOfRange,
                }
            },
        ),
        (
            "parent free",
            |i| set_rec64(i, 4, 16, 9),
            |e| {
                *e == MountError::BadParent {
                    ino: 4,
                    parent: 9,
                    problem: ParentProblem::Free,
                }
            },
        ),
        (
            "parent is a file",
            |i| set_rec64(i, 5, 16, 4),
            |e| {
                *e == MountError::BadParent {
                    ino: 5,
                    parent: 4,
                    problem: ParentProblem::NotDir,
                }
            },
        ),
        (
            "parent cycle",
            |i| set_rec64(i, 2, 16, 5),
            |e| {
                // /a's parent := /a/b, which is younger than /a.
                matches!(
                    e,
                    MountError::BadParent {
                        ino: 2,
                        parent: 5,
                        problem: ParentProblem::NotOlder { .. }
                    }
                )
            },
        ),
        (
            "own parent",
            |i| set_rec64(i, 5, 16, 5),
            |e| {
                matches!(
                    e,
                    MountError::BadParent {
                        ino: 5,
                        parent: 5,
                        problem: ParentProblem::NotOlder { .. }
                    }
                )
            },
        ),
        (
            "seq order",
            |i| {
                let s = get64(i, rec(3) + 24);
                set_rec64(i, 2, 24, s)
            },
            |e| {
                matches!(
                    e,
                    MountError::BadParent {
                        ino: 3,
                        parent: 2,
                        problem: ParentProblem::NotOlder { .. }
                    }
                )
            },
        ),
        (
            "duplicate names",
            |i| {
                i[rec(5) + REC_NAME_OFF] = b'f';
                fix_rec(i, 5)
            },
            |e| {
                *e == MountError::DuplicateName {
                    dir: 2,
                    name: "f".to_string(),
                    first: 3,
                    second: 5,
                }
            },
        ),
    ];
    let img = reference();
    let mut names = BTreeMap::new();
    for (name, edit, check) in cases {
        assert!(names.insert(name, ()).is_none(), "duplicate case {name}");
        let mut bad = img.clone();
        edit(&mut bad);
        let mut disk = MemDisk::from_bytes(bad.clone());
        let err = match Fs::mount(&mut disk) {
            Ok(_) => panic!("{name}: mounted"),
            Err(e) => e,
        };
        assert!(check(&err), "{name}: unexpected error {err:?}");
        let msg = err.to_string();
        assert!(!msg.is_empty() && !msg.contains('\n'), "{name}: {msg}");
        assert_eq!(disk.writes(), 0, "{name}: wrote");
        assert_eq!(disk.blocks(), &bad[..], "{name}: bytes changed");
    }
}

#[test]
fn read_errors_are_named() {
    for lba in [0u64, 1, 2, 3] {
        let dev = Failing(MemDisk::from_bytes(reference()), lba);
        assert_eq!(Fs::mount(dev).err(), Some(MountError::Io { lba }));
    }
    // Data blocks are not read at mount.
    assert!(Fs::mount(Failing(MemDisk::from_bytes(reference()), 4)).is_ok());
    let (dev, e) = Fs::try_mount(Failing(MemDisk::from_bytes(reference()), 0))
        .err()
        .unwrap();
    assert_eq!(e.to_string(), "I/O error reading block 0");
    assert_eq!(dev.0.writes(), 0);
}

#[test]
fn messages_read_well() {
    let cases = [
        (
            MountError::BadMagic { found: [0; 8] },
            "bad magic: not a onecopy image (found 0x0000000000000000)",
        ),
        (
            MountError::UnsupportedVersion { found: 1 },
            "unsupported format version 1 (this build reads version 3): re-create the image with mkfs",
        ),
        (
            MountError::ExtentOutOfRange {
                ino: 12,
                index: 3,
                start: 900,
                end: 1000,
                data_start: 65,
                data_end: 800,
            },
            "inode 12: extent 3 [900..1000) beyond data area end 800",
        ),
        (
            MountError::SharedBlock {
                a: 4,
                b: 9,
                block: 123,
            },
            "inodes 4 and 9 share block 123",
        ),
        (
            MountError::BadParent {
                ino: 5,
                parent: 77,
                problem: ParentProblem::NotDir,
            },
            "inode 5: parent 77 is not a directory",
        ),
        (
            MountError::DeviceTooSmall {
                device_blocks: 10,
                superblock_blocks: 16384,
            },
            "device has 10 blocks, superblock says 16384",
        ),
        (
            MountError::SeqNotBelowFloor {
                ino: 4,
                seq: 1024,
                floor: 1024,
            },
            "inode 4: sequence number 1024 is not below the superblock's sequence floor 1024",
        ),
    ];
    for (e, want) in cases {
        assert_eq!(e.to_string(), want);
    }
}
