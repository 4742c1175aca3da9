//! Property-based fuzzing of mount: a disk image is untrusted input.
//!
//! Arbitrary mutations of a valid image (bytes overwritten, blocks zeroed,
//! duplicated or swapped, the image cut short) either fail to mount with a
//! `MountError`, writing nothing, or mount; then every operation returns a
//! value or an error without panicking, and the image it leaves behind
//! mounts again. `src/tests.rs` holds the seeded, field-aware variant.
//!
//! Budget: `cases` below (override with `PROPTEST_CASES=N`); failures are
//! persisted in `proptest-regressions/fuzz.txt` (committed) and replayed
//! first on every run.

use fabric::proto::{Errno, FileKind};
use flatfs::{Fs, MemDisk, BLOCK_SIZE};
use proptest::prelude::*;
use proptest::test_runner::Config;

fn cases(default: u32) -> Config {
    onecopy_fuzzcfg::config(default, "proptest-regressions/fuzz.txt")
}

const BLOCKS: u64 = 64;

/// A valid image with directories, files with data, a hole and a removed
/// file (so freed inodes and blocks exist too).
fn image() -> Vec<u8> {
    let mut fs = Fs::format(MemDisk::new(BLOCKS), 24).expect("format");
    fs.mkdir("/d").unwrap();
    fs.mkdir("/d/e").unwrap();
    let a = fs.create("/a", true).unwrap().ino;
    fs.write(a, 0, &[0x11; 9000]).unwrap();
    let b = fs.create("/d/b", true).unwrap().ino;
    fs.write(b, 20000, b"past a hole").unwrap();
    let g = fs.create("/d/e/gone", true).unwrap().ino;
    fs.write(g, 0, &[7; 5000]).unwrap();
    fs.unlink("/d/e/gone").unwrap();
    fs.create("/empty", true).unwrap();
    fs.sync().unwrap();
    fs.into_device().into_bytes()
}

#[derive(Debug, Clone)]
enum Damage {
    /// Overwrite one byte (positions biased to the metadata blocks).
    Byte(usize, u8),
    /// Overwrite 8 bytes with a little-endian word.
    Word(usize, u64),
    /// Zero a block.
    Zero(usize),
    /// Copy block `a` over block `b`.
    Copy(usize, usize),
    /// Cut the image to this many bytes.
    Cut(usize),
}

fn damage() -> impl Strategy<Value = Damage> {
    let blocks = BLOCKS as usize;
    let meta = 6 * BLOCK_SIZE;
    let all = blocks * BLOCK_SIZE;
    let word = prop_oneof![
        Just(0u64),
        Just(1),
        0..128u64,
        Just(u32::MAX as u64),
        Just(u64::MAX),
        any::<u64>()
    ];
    prop_oneof![
        6 => (prop_oneof![3 => 0..meta, 1 => 0..all], any::<u8>()).prop_map(|(p, v)| Damage::Byte(p, v)),
        3 => (prop_oneof![3 => 0..meta, 1 => 0..all], word).prop_map(|(p, v)| Damage::Word(p & !7, v)),
        1 => (0..blocks).prop_map(Damage::Zero),
        1 => (0..blocks, 0..blocks).prop_map(|(a, b)| Damage::Copy(a, b)),
        1 => (0..all).prop_map(Damage::Cut),
    ]
}

fn apply(img: &mut Vec<u8>, d: &Damage) {
    match *d {
        Damage::Byte(p, v) => {
            if p < img.len() {
                img[p] = v;
            }
        }
        Damage::Word(p, v) => {
            if p + 8 <= img.len() {
                img[p..p + 8].copy_from_slice(&v.to_le_bytes());
            }
        }
        Damage::Zero(b) => {
            let r = b * BLOCK_SIZE..((b + 1) * BLOCK_SIZE).min(img.len());
            if r.start < r.end {
                img[r].fill(0);
            }
        }
        Damage::Copy(a, b) => {
            if (a.max(b) + 1) * BLOCK_SIZE <= img.len() {
                let src = img[a * BLOCK_SIZE..(a + 1) * BLOCK_SIZE].to_vec();
                img[b * BLOCK_SIZE..(b + 1) * BLOCK_SIZE].copy_from_slice(&src);
            }
        }
        Damage::Cut(n) => img.truncate(n),
    }
}

/// Every operation on a mounted (possibly damaged) file system: each
/// returns a value or an error.
fn exercise(fs: &mut Fs<&mut MemDisk>) {
    let mut stack = vec![(1u64, String::new())];
    let mut files = Vec::new();
    let mut seen = 0;
    while let Some((dir, path)) = stack.pop() {
        let mut cookie = 0;
        while let Ok((ents, next)) = fs.readdir(dir, cookie, 7) {
            for e in ents {
                seen += 1;
                let p = format!("{path}/{}", e.name);
                match e.attr.kind {
                    FileKind::Dir => stack.push((e.attr.ino, p)),
                    _ => files.push((e.attr.ino, p)),
                }
            }
            if next == 0 || next == cookie || seen > 200 {
                break;
            }
            cookie = next;
        }
    }
    for (ino, path) in &files {
        let _ = fs.lookup(path);
        if let Ok(a) = fs.getattr(*ino) {
            let mut buf = vec![0u8; (a.size as usize).min(64 * 1024)];
            let r = fs.read(*ino, 0, &mut buf);
            assert!(matches!(r, Ok(_) | Err(Errno::Io)), "read {path}: {r:?}");
        }
        let _ = fs.write(*ino, 100, b"fuzz");
        let _ = fs.set_size(*ino, 3);
    }
    let _ = fs.check_data();
    let _ = fs
        .create("/new", true)
        .map(|a| fs.write(a.ino, 0, &[1; 6000]));
    let _ = fs.mkdir("/d/newdir");
    let _ = fs.unlink("/a");
    let _ = fs.rmdir("/d/e");
    let _ = fs.lookup("/d/b");
    let _ = fs.getattr(u64::MAX);
    let _ = fs.read(0, u64::MAX, &mut [0u8; 10]);
    let _ = fs.sync();
}

proptest! {
    #![proptest_config(cases(1500))]

    #[test]
    fn damaged_images_mount_or_fail_cleanly(
        damages in proptest::collection::vec(damage(), 1..5),
    ) {
        let mut img = image();
        for d in &damages {
            apply(&mut img, d);
        }
        let mut disk = MemDisk::from_bytes(img);
        match Fs::mount(&mut disk) {
            Err(_mount_error) => prop_assert_eq!(disk.writes(), 0),
            Ok(mut fs) => {
                prop_assert_eq!(fs.stats().disk_writes, 0);
                exercise(&mut fs);
                drop(fs);
                // What it wrote is a valid image again.
                let r = Fs::mount(&mut disk).map(|_| ());
                prop_assert!(r.is_ok(), "remount after operations: {:?}", r);
            }
        }
    }
}
