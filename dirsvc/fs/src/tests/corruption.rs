//! Corrupted images: the documented layout, damaged images refused at
//! mount (the cases by part of the image in `corrupt_super.rs` and
//! `corrupt_inodes.rs`), read errors and error messages.

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

/// A damaged image: its name, the damage done to the reference image,
/// and whether mount's error is the expected one.
pub(super) type Case = (&'static str, fn(&mut Vec<u8>), fn(&MountError) -> bool);

/// Every case's image is refused at mount with its error, in one line,
/// and neither written nor changed.
pub(super) fn assert_refused(cases: Vec<Case>) {
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
