//! Unit tests of the flat file system: every operation and error, the
//! on-disk invariants across remounts, a table of corrupted images, and
//! seeded randomized tests against a simple model.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

use super::disk::{EXT_SIZE, REC_CRC_OFF, REC_EXT_OFF, REC_NAME_OFF, SB_SEQ_FLOOR_OFF};
use super::*;
use fabric::proto::{Attr, Errno, FileKind, MAX_NAME, MAX_PATH};

// ----- helpers -------------------------------------------------------------

use fabric::rng::SplitMix64 as Rng;

/// Test helpers on top of the shared generator.
trait RngExt {
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T;
    fn bytes(&mut self, n: usize) -> Vec<u8>;
}

impl RngExt for Rng {
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
}

fn fresh(blocks: u64, inodes: u32) -> Fs<MemDisk> {
    Fs::format(MemDisk::new(blocks), inodes).expect("format")
}

fn remount(fs: Fs<MemDisk>) -> Fs<MemDisk> {
    let disk = fs.into_device();
    let writes = disk.writes();
    let fs = Fs::mount(disk).unwrap_or_else(|e| panic!("remount: {e}"));
    assert_eq!(fs.device().writes(), writes, "mount wrote");
    fs
}

fn pattern(seed: u64, n: usize) -> Vec<u8> {
    Rng::new(seed).bytes(n)
}

fn read_all<D: BlockDevice>(fs: &mut Fs<D>, ino: u64) -> Vec<u8> {
    let size = fs.getattr(ino).unwrap().size as usize;
    let mut buf = vec![0u8; size + 100];
    let n = fs.read(ino, 0, &mut buf).unwrap();
    assert_eq!(n, size);
    buf.truncate(n);
    buf
}

/// Every path with its attributes and, for files, contents.
type Snapshot = Vec<(String, Attr, Option<Vec<u8>>)>;

fn snapshot<D: BlockDevice>(fs: &mut Fs<D>) -> Snapshot {
    snapshot_with(fs, true)
}

/// [`snapshot`], reading file contents only if `data`.
fn snapshot_with<D: BlockDevice>(fs: &mut Fs<D>, data: bool) -> Snapshot {
    let mut out = Vec::new();
    let root = fs.getattr(ROOT_INO).unwrap();
    out.push((String::from("/"), root, None));
    walk(fs, ROOT_INO, "", data, &mut out);
    out
}

fn walk<D: BlockDevice>(fs: &mut Fs<D>, dir: u64, prefix: &str, data: bool, out: &mut Snapshot) {
    let mut cookie = 0;
    loop {
        let (entries, next) = fs.readdir(dir, cookie, 3).unwrap();
        for e in entries {
            let path = format!("{prefix}/{}", e.name);
            assert_eq!(fs.lookup(&path).unwrap(), e.attr);
            match e.attr.kind {
                FileKind::Dir => {
                    out.push((path.clone(), e.attr, None));
                    walk(fs, e.attr.ino, &path, data, out);
                }
                FileKind::File => {
                    let bytes = data.then(|| read_all(fs, e.attr.ino));
                    out.push((path, e.attr, bytes));
                }
            }
        }
        if next == 0 {
            break;
        }
        cookie = next;
    }
}

/// The version a new inode starts at: its creation sequence number in the
/// high half, 1 in the low half, so (ino, version) never repeats when the
/// inode number is reused.
fn first_version<D: BlockDevice>(fs: &Fs<D>, ino: u64) -> u64 {
    (fs.node(ino).unwrap().seq << 32) | 1
}

fn assert_survives_remount(fs: Fs<MemDisk>) -> Fs<MemDisk> {
    let mut fs = fs;
    let before = snapshot(&mut fs);
    let stats = fs.stats();
    let mut fs = remount(fs);
    assert_eq!(snapshot(&mut fs), before);
    assert_eq!(
        fs.check_data(),
        Ok(vec![]),
        "every data block matches its checksum"
    );
    let after = fs.stats();
    assert_eq!(
        (after.inodes_used, after.blocks_used),
        (stats.inodes_used, stats.blocks_used)
    );
    fs
}

// ----- image surgery (corruption tests) -----------------------------------

const RB: usize = RECORD_SIZE;

fn rec(ino: u64) -> usize {
    BLOCK_SIZE + (ino as usize - 1) * RB
}

fn fix_rec(img: &mut [u8], ino: u64) {
    let o = rec(ino);
    let crc = crc32fast::hash(&img[o..o + REC_CRC_OFF]);
    img[o + REC_CRC_OFF..o + RB].copy_from_slice(&crc.to_le_bytes());
}

fn fix_sb(img: &mut [u8]) {
    let crc = crc32fast::hash(&img[..76]);
    img[76..80].copy_from_slice(&crc.to_le_bytes());
}

/// Fix the own checksum of the checksum-table block at device block `lba`.
fn fix_sums(img: &mut [u8], lba: usize) {
    let o = lba * BLOCK_SIZE;
    let crc = crc32fast::hash(&img[o..o + BLOCK_SIZE - 4]);
    img[o + BLOCK_SIZE - 4..o + BLOCK_SIZE].copy_from_slice(&crc.to_le_bytes());
}

fn put64(img: &mut [u8], o: usize, v: u64) {
    img[o..o + 8].copy_from_slice(&v.to_le_bytes());
}

fn put32(img: &mut [u8], o: usize, v: u32) {
    img[o..o + 4].copy_from_slice(&v.to_le_bytes());
}

fn get64(img: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(img[o..o + 8].try_into().unwrap())
}

/// Reference image, 64 blocks, 32 inodes (2 table blocks, checksum table
/// block 3, data 4..64):
/// ino 2 `/a` dir, ino 3 `/a/f` file (5000 bytes), ino 4 `/g` file
/// (1 block), ino 5 `/a/b` dir.
fn reference() -> Vec<u8> {
    let mut fs = fresh(64, 32);
    assert_eq!(fs.mkdir("/a").unwrap().ino, 2);
    let f = fs.create("/a/f", true).unwrap().ino;
    assert_eq!(f, 3);
    fs.write(f, 0, &pattern(5, 5000)).unwrap();
    let g = fs.create("/g", true).unwrap().ino;
    fs.write(g, 0, b"gee").unwrap();
    assert_eq!(fs.mkdir("/a/b").unwrap().ino, 5);
    fs.into_device().into_bytes()
}

/// Set a record field and fix the record's checksum.
fn set_rec64(img: &mut [u8], ino: u64, field: usize, v: u64) {
    put64(img, rec(ino) + field, v);
    fix_rec(img, ino);
}

struct Failing(MemDisk, u64);

impl BlockDevice for Failing {
    fn block_count(&self) -> u64 {
        self.0.block_count()
    }
    fn read_block(&mut self, lba: u64, buf: &mut [u8; BLOCK_SIZE]) -> Result<(), IoError> {
        if lba == self.1 {
            return Err(IoError);
        }
        self.0.read_block(lba, buf)
    }
    fn write_block(&mut self, lba: u64, buf: &[u8; BLOCK_SIZE]) -> Result<(), IoError> {
        self.0.write_block(lba, buf)
    }
    fn flush(&mut self) -> Result<(), IoError> {
        self.0.flush()
    }
}

mod allocation;
mod checksums;
mod corrupt_inodes;
mod corrupt_super;
mod corruption;
mod damage;
mod data;
mod model;
mod mount;
mod namespace;
mod remount;
