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

// ----- format, mount, paths ---------------------------------------------

#[test]
fn format_then_mount_empty() {
    let fs = fresh(64, 20);
    let st = fs.stats();
    assert_eq!(st.inodes_total, 32, "rounded up to whole table blocks");
    assert_eq!(st.inodes_used, 1);
    assert_eq!(
        st.blocks_total,
        64 - 1 - 2 - 1,
        "superblock, table, checksums"
    );
    assert_eq!(st.blocks_used, 0);
    let g = fs.geometry();
    assert_eq!(
        (g.table_start, g.sums_start, g.data_start, g.data_end),
        (1, 3, 4, 64)
    );
    let mut fs = remount(fs);
    let root = fs.lookup("/").unwrap();
    assert_eq!(
        root,
        Attr {
            ino: ROOT_INO,
            kind: FileKind::Dir,
            size: 0,
            version: 1
        }
    );
    assert_eq!(fs.readdir(ROOT_INO, 0, 10).unwrap(), (vec![], 0));
}

#[test]
fn format_errors() {
    assert_eq!(Fs::format(MemDisk::new(64), 0).err(), Some(Errno::Invalid));
    // Superblock + 2 table blocks (+ 1 checksum block) leave no data block.
    assert_eq!(Fs::format(MemDisk::new(3), 32).err(), Some(Errno::NoSpace));
    assert_eq!(Fs::format(MemDisk::new(4), 32).err(), Some(Errno::NoSpace));
    assert_eq!(Fs::format(MemDisk::new(0), 1).err(), Some(Errno::NoSpace));
    assert!(Fs::format(MemDisk::new(5), 32).is_ok());
    assert_eq!(
        Fs::format(MemDisk::new(64), u32::MAX).err(),
        Some(Errno::NoSpace)
    );
    let mut d = MemDisk::new(64);
    d.fail_writes_after(Some(1));
    assert_eq!(Fs::format(d, 16).err(), Some(Errno::Io));
}

#[test]
fn format_overwrites_an_old_image() {
    let mut fs = fresh(64, 16);
    fs.create("/old", true).unwrap();
    let mut fs = Fs::format(fs.into_device(), 32).unwrap();
    assert_eq!(fs.lookup("/old"), Err(Errno::NotFound));
    let fs = remount(fs);
    assert_eq!(fs.stats().inodes_total, 32);
}

#[test]
fn path_syntax() {
    let mut fs = fresh(64, 16);
    fs.mkdir("/d").unwrap();
    fs.create("/d/f", true).unwrap();
    let f = fs.lookup("/d/f").unwrap();
    for p in ["//d//f", "/d/f/", "/d///f//"] {
        assert_eq!(fs.lookup(p), Ok(f), "{p}");
    }
    assert_eq!(fs.lookup("//").unwrap().ino, ROOT_INO);
    for p in ["", "d/f", "/d/./f", "/d/../d", "/.", "/..", "/d/f\0"] {
        assert_eq!(fs.lookup(p), Err(Errno::Invalid), "{p:?}");
        assert_eq!(fs.create(p, false), Err(Errno::Invalid), "{p:?}");
    }
    let long = "x".repeat(MAX_NAME + 1);
    let ok = "y".repeat(MAX_NAME);
    assert_eq!(
        fs.create(&format!("/{long}"), true),
        Err(Errno::NameTooLong)
    );
    assert_eq!(fs.mkdir(&format!("/d/{long}/z")), Err(Errno::NameTooLong));
    assert!(fs.create(&format!("/{ok}"), true).is_ok());
    let huge = "/a".repeat(MAX_PATH / 2 + 1);
    assert_eq!(fs.lookup(&huge), Err(Errno::NameTooLong));
    // Intermediate file, missing intermediate.
    assert_eq!(fs.lookup("/d/f/x"), Err(Errno::NotDir));
    assert_eq!(fs.create("/d/f/x", true), Err(Errno::NotDir));
    assert_eq!(fs.lookup("/nope/x"), Err(Errno::NotFound));
    assert_eq!(fs.mkdir("/nope/x"), Err(Errno::NotFound));
    // Unicode names are fine.
    fs.create("/grüße.txt", true).unwrap();
    let mut fs = assert_survives_remount(fs);
    assert!(fs.lookup("/grüße.txt").is_ok());
}

// ----- namespace operations -------------------------------------------

#[test]
fn create_and_lookup() {
    let mut fs = fresh(64, 16);
    let a = fs.create("/a", true).unwrap();
    let v0 = first_version(&fs, a.ino);
    assert_eq!((a.kind, a.size, a.version), (FileKind::File, 0, v0));
    assert_ne!(a.ino, ROOT_INO);
    assert_eq!(fs.create("/a", true), Err(Errno::Exists));
    assert_eq!(fs.create("/a", false), Ok(a));
    assert_eq!(fs.lookup("/a"), Ok(a));
    assert_eq!(fs.getattr(a.ino), Ok(a));
    fs.mkdir("/d").unwrap();
    assert_eq!(fs.create("/d", false), Err(Errno::IsDir));
    assert_eq!(fs.create("/d", true), Err(Errno::Exists));
    assert_eq!(fs.create("/", false), Err(Errno::IsDir));
    assert_eq!(fs.create("/", true), Err(Errno::Exists));
    assert_eq!(fs.lookup("/b"), Err(Errno::NotFound));
    let root = fs.getattr(ROOT_INO).unwrap();
    assert_eq!(root.size, 2);
    assert_eq!(root.version, 3);
    assert_survives_remount(fs);
}

#[test]
fn mkdir_nested() {
    let mut fs = fresh(64, 16);
    let d = fs.mkdir("/d").unwrap();
    let v0 = first_version(&fs, d.ino);
    assert_eq!((d.kind, d.size, d.version), (FileKind::Dir, 0, v0));
    fs.mkdir("/d/e").unwrap();
    fs.mkdir("/d/e/f").unwrap();
    fs.create("/d/e/f/g", true).unwrap();
    assert_eq!(fs.mkdir("/d"), Err(Errno::Exists));
    assert_eq!(fs.mkdir("/d/e/f/g"), Err(Errno::Exists));
    assert_eq!(fs.mkdir("/"), Err(Errno::Exists));
    assert_eq!(fs.mkdir("/d/e/f/g/h"), Err(Errno::NotDir));
    assert_eq!(fs.lookup("/d").unwrap().size, 1);
    assert_eq!(fs.lookup("/d").unwrap().version, v0 + 1);
    assert_survives_remount(fs);
}

#[test]
fn unlink_and_rmdir() {
    let mut fs = fresh(64, 16);
    fs.mkdir("/d").unwrap();
    fs.create("/d/f", true).unwrap();
    let f = fs.lookup("/d/f").unwrap().ino;
    fs.write(f, 0, &[7; 9000]).unwrap();
    assert_eq!(fs.stats().blocks_used, 3);
    assert_eq!(fs.unlink("/d"), Err(Errno::IsDir));
    assert_eq!(fs.unlink("/"), Err(Errno::IsDir));
    assert_eq!(fs.unlink("/x"), Err(Errno::NotFound));
    assert_eq!(fs.unlink("/d/f/x"), Err(Errno::NotDir));
    assert_eq!(fs.rmdir("/d"), Err(Errno::NotEmpty));
    assert_eq!(fs.rmdir("/d/f"), Err(Errno::NotDir));
    assert_eq!(fs.rmdir("/"), Err(Errno::Invalid));
    assert_eq!(fs.rmdir("//"), Err(Errno::Invalid));
    assert_eq!(fs.rmdir("/x"), Err(Errno::NotFound));
    let dv = fs.lookup("/d").unwrap().version;
    let f = fs.lookup("/d/f").unwrap().ino;
    fs.unlink("/d/f").unwrap();
    assert_eq!(fs.getattr(f), Err(Errno::NotFound));
    assert_eq!(fs.read(f, 0, &mut [0; 4]), Err(Errno::NotFound));
    assert_eq!(fs.lookup("/d").unwrap().version, dv + 1);
    assert_eq!(fs.stats().blocks_used, 0);
    assert_eq!(fs.stats().inodes_used, 2);
    let mut fs = assert_survives_remount(fs);
    fs.rmdir("/d/").unwrap();
    assert_eq!(fs.lookup("/d"), Err(Errno::NotFound));
    assert_eq!(fs.stats().inodes_used, 1);
    assert_eq!(fs.getattr(ROOT_INO).unwrap().size, 0);
    // The slot is reused.
    let g = fs.create("/g", true).unwrap();
    assert!(g.ino <= 3);
    assert_survives_remount(fs);
}

#[test]
fn reused_inode_gets_a_new_version() {
    // Node page caches key on (ino, version): a re-created file that reuses
    // an inode number must never show a version the old file ever had, even
    // across remounts.
    let mut fs = fresh(64, 16);
    let old = fs.create("/x", true).unwrap();
    let mut seen = vec![old.version];
    seen.push(fs.write(old.ino, 0, b"hello").unwrap().1.version);
    seen.push(fs.write(old.ino, 5, b" world").unwrap().1.version);
    seen.push(fs.set_size(old.ino, 3).unwrap().version);
    assert_eq!(seen, [0, 1, 2, 3].map(|i| old.version + i));
    fs.unlink("/x").unwrap();

    // Re-created while mounted.
    let new = fs.create("/x", true).unwrap();
    assert_eq!(new.ino, old.ino, "the slot is reused");
    assert!(
        !seen.contains(&new.version),
        "{:#x} in {seen:#x?}",
        new.version
    );
    let (_, w) = fs.write(new.ino, 0, b"new").unwrap();
    assert_eq!(w.version, new.version + 1);
    assert!(!seen.contains(&w.version), "{:#x} in {seen:#x?}", w.version);
    // The new version survives a remount and still differs.
    let mut fs = remount(fs);
    assert_eq!(fs.lookup("/x"), Ok(w));
    assert!(!seen.contains(&w.version));
    seen.extend([new.version, w.version]);

    // Unlinked, remounted, then re-created: the mount must not hand out a
    // version any earlier inode in this slot had.
    fs.unlink("/x").unwrap();
    let mut fs = remount(fs);
    let third = fs.create("/x", true).unwrap();
    assert_eq!(third.ino, old.ino, "the slot is reused");
    assert!(
        !seen.contains(&third.version),
        "{:#x} in {seen:#x?}",
        third.version
    );
    let mut fs = remount(fs);
    assert_eq!(fs.lookup("/x"), Ok(third));
}

/// Records the order of a device's writes (by block) and flushes.
struct Recording(MemDisk, Vec<Option<u64>>);

impl BlockDevice for Recording {
    fn block_count(&self) -> u64 {
        self.0.block_count()
    }
    fn read_block(&mut self, lba: u64, buf: &mut [u8; BLOCK_SIZE]) -> Result<(), IoError> {
        self.0.read_block(lba, buf)
    }
    fn write_block(&mut self, lba: u64, buf: &[u8; BLOCK_SIZE]) -> Result<(), IoError> {
        self.1.push(Some(lba));
        self.0.write_block(lba, buf)
    }
    fn flush(&mut self) -> Result<(), IoError> {
        self.1.push(None);
        self.0.flush()
    }
}

fn seq_floor(disk: &MemDisk) -> u64 {
    get64(disk.blocks(), SB_SEQ_FLOOR_OFF)
}

#[test]
fn seq_floor_is_raised_in_batches() {
    let mut fs = fresh(64, 16);
    assert_eq!(seq_floor(fs.device()), SEQ_BATCH);
    // A new file system hands out 1, 2, ...; the superblock is rewritten
    // only when a number reaches the floor, to that number + SEQ_BATCH.
    let mut floor = SEQ_BATCH;
    let mut raised = 0;
    for i in 1..=2 * SEQ_BATCH + 10 {
        let writes = fs.device().writes();
        let a = fs.create("/x", true).unwrap();
        let seq = fs.node(a.ino).unwrap().seq;
        assert_eq!(seq, i);
        let now = seq_floor(fs.device());
        if seq == floor {
            raised += 1;
            assert_eq!(now, seq + SEQ_BATCH);
            assert_eq!(fs.device().writes(), writes + 2, "superblock + record");
        } else {
            assert_eq!(now, floor);
            assert_eq!(fs.device().writes(), writes + 1, "record only");
        }
        assert!(seq < now);
        floor = now;
        fs.unlink("/x").unwrap();
    }
    assert_eq!(raised, 2);
    let before = fs.device().blocks().to_vec();

    // After a mount, the next number is above the floor: the first creation
    // raises it (superblock written and flushed before the record), the
    // next ones do not.
    let fs = remount(fs);
    let mut fs = Fs::mount(Recording(fs.into_device(), Vec::new())).unwrap();
    let a = fs.create("/x", true).unwrap();
    assert_eq!(fs.node(a.ino).unwrap().seq, floor + 1);
    assert_eq!(fs.device().1, [Some(0), None, Some(1)]);
    assert_eq!(seq_floor(&fs.device().0), floor + 1 + SEQ_BATCH);
    fs.create("/y", true).unwrap();
    fs.unlink("/x").unwrap();
    assert_eq!(fs.device().1[3..], [Some(1), Some(1)]);
    let Recording(disk, _) = fs.into_device();
    assert_ne!(disk.blocks(), &before[..]);
    assert_survives_remount(Fs::mount(disk).unwrap());
}

#[test]
fn failed_seq_floor_raise_creates_nothing() {
    let mut fs = fresh(64, 16);
    let old = fs.create("/x", true).unwrap();
    fs.unlink("/x").unwrap();
    let mut disk = fs.into_device();
    let floor = seq_floor(&disk);
    for budget in [0, 1] {
        // 0: the superblock write fails; 1: it lands, the record's fails.
        disk.fail_writes_after(Some(budget));
        let mut fs = Fs::mount(disk).unwrap();
        assert_eq!(fs.create("/x", true), Err(Errno::Io));
        assert_eq!(fs.lookup("/x"), Err(Errno::NotFound));
        disk = fs.into_device();
        disk.fail_writes_after(None);
        let want = if budget == 0 {
            floor
        } else {
            floor + 1 + SEQ_BATCH
        };
        assert_eq!(seq_floor(&disk), want);
    }
    let mut fs = Fs::mount(disk).unwrap();
    assert_eq!(fs.lookup("/x"), Err(Errno::NotFound));
    let new = fs.create("/x", true).unwrap();
    assert_eq!(new.ino, old.ino);
    assert!(fs.node(new.ino).unwrap().seq > floor + 1 + SEQ_BATCH);
    assert_ne!(new.version, old.version);
    assert_survives_remount(fs);
}

#[test]
fn inode_exhaustion_is_nospace() {
    let mut fs = fresh(64, 16);
    for i in 0..15 {
        fs.create(&format!("/f{i}"), true).unwrap();
    }
    let writes = fs.device().writes();
    assert_eq!(fs.create("/one-more", true), Err(Errno::NoSpace));
    assert_eq!(fs.mkdir("/dir"), Err(Errno::NoSpace));
    assert_eq!(fs.device().writes(), writes);
    // Existing names are still answered.
    assert!(fs.create("/f3", false).is_ok());
    let mut fs = assert_survives_remount(fs);
    fs.unlink("/f0").unwrap();
    fs.mkdir("/dir").unwrap();
}

#[test]
fn readdir_pages_and_cookies() {
    let mut fs = fresh(64, 64);
    let mut names: Vec<String> = (0..20).map(|i| format!("n{i:02}")).collect();
    for n in &names {
        fs.create(&format!("/{n}"), true).unwrap();
    }
    fs.mkdir("/sub").unwrap();
    names.push("sub".into());
    let mut seen = Vec::new();
    let mut cookie = 0;
    let mut pages = 0;
    loop {
        let (es, next) = fs.readdir(ROOT_INO, cookie, 6).unwrap();
        assert!(es.len() <= 6);
        pages += 1;
        for e in &es {
            assert_eq!(fs.lookup(&format!("/{}", e.name)).unwrap(), e.attr);
        }
        seen.extend(es);
        if next == 0 {
            break;
        }
        cookie = next;
    }
    assert_eq!(pages, 4);
    let inos: Vec<u64> = seen.iter().map(|e| e.attr.ino).collect();
    let mut sorted = inos.clone();
    sorted.sort();
    assert_eq!(inos, sorted, "ascending inode order");
    let mut got: Vec<String> = seen.iter().map(|e| e.name.clone()).collect();
    got.sort();
    assert_eq!(got, names);
    assert_eq!(fs.getattr(ROOT_INO).unwrap().size, 21);

    // Changes between pages: nothing repeats, survivors are not skipped.
    let (first, cookie) = fs.readdir(ROOT_INO, 0, 5).unwrap();
    fs.unlink(&format!("/{}", first[0].name)).unwrap();
    let victim = seen[10].name.clone();
    fs.unlink(&format!("/{victim}")).unwrap();
    let (rest, end) = fs.readdir(ROOT_INO, cookie, 100).unwrap();
    assert_eq!(end, 0);
    assert_eq!(first.len() + rest.len(), 20);
    assert!(rest.iter().all(|e| e.name != victim));
    assert!(rest.iter().all(|e| !first.contains(e)));
    // A cookie past the end, an empty directory, errors.
    assert_eq!(fs.readdir(ROOT_INO, 1 << 40, 5).unwrap(), (vec![], 0));
    let sub = fs.lookup("/sub").unwrap().ino;
    assert_eq!(fs.readdir(sub, 0, 5).unwrap(), (vec![], 0));
    let f = fs.lookup("/n05").unwrap().ino;
    assert_eq!(fs.readdir(f, 0, 5), Err(Errno::NotDir));
    assert_eq!(fs.readdir(0, 0, 5), Err(Errno::NotFound));
    assert_eq!(fs.readdir(9999, 0, 5), Err(Errno::NotFound));
    assert_eq!(fs.readdir(ROOT_INO, 0, 0), Err(Errno::Invalid));
    assert_survives_remount(fs);
}

#[test]
fn getattr_errors() {
    let mut fs = fresh(64, 16);
    for ino in [0, 2, 16, 17, u64::MAX] {
        assert_eq!(fs.getattr(ino), Err(Errno::NotFound), "{ino}");
        assert_eq!(fs.set_size(ino, 1), Err(Errno::NotFound));
        assert_eq!(fs.write(ino, 0, b"x").err(), Some(Errno::NotFound));
    }
    assert_eq!(fs.read(ROOT_INO, 0, &mut [0; 4]), Err(Errno::IsDir));
    assert_eq!(fs.write(ROOT_INO, 0, b"x").err(), Some(Errno::IsDir));
    assert_eq!(fs.set_size(ROOT_INO, 0), Err(Errno::IsDir));
}

// ----- data ------------------------------------------------------------

#[test]
fn read_write_many_blocks() {
    let mut fs = fresh(256, 16);
    let f = fs.create("/big", true).unwrap();
    let (f, v0) = (f.ino, f.version);
    assert_eq!(v0, first_version(&fs, f));
    let data = pattern(1, 10 * BLOCK_SIZE + 123);
    let (n, a) = fs.write(f, 0, &data).unwrap();
    assert_eq!(n, data.len());
    assert_eq!((a.size, a.version), (data.len() as u64, v0 + 1));
    assert_eq!(read_all(&mut fs, f), data);
    assert_eq!(fs.stats().blocks_used, 11);
    // Unaligned reads across block boundaries.
    for (off, len) in [(0, 1), (4095, 2), (4000, 9000), (40000, 5000), (100, 0)] {
        let mut buf = vec![0u8; len];
        let got = fs.read(f, off as u64, &mut buf).unwrap();
        let want = &data[off.min(data.len())..(off + len).min(data.len())];
        assert_eq!(&buf[..got], want, "{off}+{len}");
    }
    // Short at EOF, zero past it.
    let mut buf = [0u8; 500];
    assert_eq!(fs.read(f, data.len() as u64 - 10, &mut buf), Ok(10));
    assert_eq!(fs.read(f, data.len() as u64, &mut buf), Ok(0));
    assert_eq!(fs.read(f, u64::MAX, &mut buf), Ok(0));
    // Overwrite in the middle keeps the rest.
    let patch = pattern(2, 6000);
    let (_, a2) = fs.write(f, 5000, &patch).unwrap();
    assert_eq!(a2.size, a.size);
    assert_eq!(a2.version, v0 + 2);
    let mut want = data.clone();
    want[5000..11000].copy_from_slice(&patch);
    assert_eq!(read_all(&mut fs, f), want);
    let mut fs = assert_survives_remount(fs);
    assert_eq!(read_all(&mut fs, f), want);
}

#[test]
fn partial_block_io_counts() {
    let mut fs = fresh(64, 16);
    let f = fs.create("/f", true).unwrap().ino;
    let s = fs.stats();
    // Metadata reads do no I/O.
    fs.lookup("/f").unwrap();
    fs.getattr(f).unwrap();
    fs.readdir(ROOT_INO, 0, 10).unwrap();
    assert_eq!(fs.stats().disk_reads, s.disk_reads);
    // Appending a new full block: one data write + one checksum-table
    // write + one inode write, no read.
    fs.write(f, 0, &[1; BLOCK_SIZE]).unwrap();
    let s2 = fs.stats();
    assert_eq!(
        (s2.disk_reads, s2.disk_writes),
        (s.disk_reads, s.disk_writes + 3)
    );
    // A partial overwrite of an existing block: read-modify-write.
    fs.write(f, 10, &[2; 10]).unwrap();
    let s3 = fs.stats();
    assert_eq!(
        (s3.disk_reads, s3.disk_writes),
        (s2.disk_reads + 1, s2.disk_writes + 3)
    );
    // Reading two blocks reads two blocks.
    fs.write(f, BLOCK_SIZE as u64, &[3; 10]).unwrap();
    let s4 = fs.stats();
    let mut buf = [0u8; 5000];
    assert_eq!(fs.read(f, 0, &mut buf), Ok(BLOCK_SIZE + 10));
    assert_eq!(fs.stats().disk_reads, s4.disk_reads + 2);
    assert_eq!(fs.device().writes(), fs.stats().disk_writes);
    // An empty write changes nothing.
    let before = fs.getattr(f).unwrap();
    assert_eq!(fs.write(f, 1 << 30, &[]), Ok((0, before)));
    assert_eq!(fs.getattr(f).unwrap(), before);
    assert_eq!(fs.stats().disk_writes, s4.disk_writes);
}

#[test]
fn holes_read_as_zeros() {
    let mut fs = fresh(128, 16);
    let f = fs.create("/h", true).unwrap().ino;
    fs.write(f, 0, b"head").unwrap();
    // Dirty the disk blocks the hole will reuse, then free them.
    let g = fs.create("/g", true).unwrap().ino;
    fs.write(g, 0, &[0xAA; 5 * BLOCK_SIZE]).unwrap();
    fs.unlink("/g").unwrap();
    let off = 3 * BLOCK_SIZE as u64 + 7;
    let (_, a) = fs.write(f, off, b"tail").unwrap();
    assert_eq!(a.size, off + 4);
    let mut want = vec![0u8; (off + 4) as usize];
    want[..4].copy_from_slice(b"head");
    want[off as usize..].copy_from_slice(b"tail");
    assert_eq!(read_all(&mut fs, f), want);
    // Garbage left past EOF in the last block by a truncate must not come
    // back on extension.
    fs.write(f, 0, &[0xBB; 100]).unwrap();
    fs.set_size(f, 10).unwrap();
    fs.write(f, 50, b"x").unwrap();
    let got = read_all(&mut fs, f);
    assert_eq!(got.len(), 51);
    assert_eq!(&got[..10], &[0xBB; 10]);
    assert!(got[10..50].iter().all(|&b| b == 0));
    let mut fs = assert_survives_remount(fs);
    assert_eq!(read_all(&mut fs, f), got);
}

#[test]
fn truncate_and_extend() {
    let mut fs = fresh(128, 16);
    let f = fs.create("/t", true).unwrap();
    let (f, v0) = (f.ino, f.version);
    assert_eq!(v0, first_version(&fs, f));
    let data = pattern(3, 5 * BLOCK_SIZE);
    fs.write(f, 0, &data).unwrap();
    assert_eq!(fs.stats().blocks_used, 5);
    let a = fs.set_size(f, 6000).unwrap();
    assert_eq!((a.size, a.version), (6000, v0 + 2));
    assert_eq!(fs.stats().blocks_used, 2);
    assert_eq!(read_all(&mut fs, f), &data[..6000]);
    // Same size: no change.
    assert_eq!(fs.set_size(f, 6000).unwrap().version, v0 + 2);
    let a = fs.set_size(f, 20000).unwrap();
    assert_eq!((a.size, a.version), (20000, v0 + 3));
    assert_eq!(fs.stats().blocks_used, 5);
    let got = read_all(&mut fs, f);
    assert_eq!(&got[..6000], &data[..6000]);
    assert!(got[6000..].iter().all(|&b| b == 0));
    let mut fs = assert_survives_remount(fs);
    fs.set_size(f, 0).unwrap();
    assert_eq!(fs.stats().blocks_used, 0);
    assert_eq!(read_all(&mut fs, f), b"");
    fs.set_size(f, 3).unwrap();
    assert_eq!(read_all(&mut fs, f), [0, 0, 0]);
    assert_eq!(fs.set_size(f, u64::MAX), Err(Errno::NoSpace));
    assert_eq!(fs.write(f, u64::MAX, b"x").err(), Some(Errno::Invalid));
    assert_eq!(fs.write(f, u64::MAX - 10, b"x").err(), Some(Errno::NoSpace));
    assert_survives_remount(fs);
}

// ----- allocation ------------------------------------------------------

fn extents_of(fs: &Fs<MemDisk>, ino: u64) -> Vec<(u64, u32)> {
    fs.node(ino)
        .unwrap()
        .extents
        .iter()
        .map(|e| (e.start, e.len))
        .collect()
}

#[test]
fn appends_grow_the_last_extent_in_place() {
    let mut fs = fresh(128, 16);
    let f = fs.create("/f", true).unwrap().ino;
    for i in 0..10u64 {
        fs.write(f, i * 3000, &[i as u8; 3000]).unwrap();
    }
    assert_eq!(extents_of(&fs, f).len(), 1);
    // Interleaved appends fragment, but each file still extends in place
    // when it can.
    let g = fs.create("/g", true).unwrap().ino;
    let h = fs.create("/h", true).unwrap().ino;
    for i in 0..4u64 {
        fs.write(g, i * 4096, &[1; 4096]).unwrap();
        fs.write(h, i * 4096, &[2; 4096]).unwrap();
    }
    assert_eq!(extents_of(&fs, g).len(), 4);
    assert_eq!(extents_of(&fs, h).len(), 4);
    // Freeing h's blocks lets g grow in place into the gaps only at its end.
    fs.unlink("/h").unwrap();
    fs.write(g, 4 * 4096, &[1; 4096]).unwrap();
    assert_eq!(extents_of(&fs, g).len(), 4, "merged into the last extent");
    let mut fs = assert_survives_remount(fs);
    let got = read_all(&mut fs, g);
    assert!(got.iter().all(|&b| b == 1));
}

#[test]
fn first_fit_prefers_a_run_that_fits() {
    let mut fs = fresh(64, 16);
    let ds = fs.geometry().data_start;
    let a = fs.create("/a", true).unwrap().ino;
    let b = fs.create("/b", true).unwrap().ino;
    let c = fs.create("/c", true).unwrap().ino;
    fs.write(a, 0, &[1; BLOCK_SIZE]).unwrap(); // ds
    fs.write(b, 0, &[2; 3 * BLOCK_SIZE]).unwrap(); // ds+1..ds+4
    fs.write(c, 0, &[3; BLOCK_SIZE]).unwrap(); // ds+4
    fs.unlink("/a").unwrap(); // hole of 1 at ds
    let d = fs.create("/d", true).unwrap().ino;
    fs.write(d, 0, &[4; 2 * BLOCK_SIZE]).unwrap();
    assert_eq!(extents_of(&fs, d), vec![(ds + 5, 2)]);
    fs.unlink("/b").unwrap(); // hole of 3 at ds+1, plus 1 at ds
    let e = fs.create("/e", true).unwrap().ino;
    fs.write(e, 0, &[5; 4 * BLOCK_SIZE]).unwrap();
    assert_eq!(extents_of(&fs, e), vec![(ds, 4)]);
}

#[test]
fn nospace_changes_nothing_and_remounts() {
    let mut fs = fresh(40, 16);
    let total = fs.stats().blocks_total;
    let a = fs.create("/a", true).unwrap().ino;
    let b = fs.create("/b", true).unwrap().ino;
    let da = pattern(10, 10 * BLOCK_SIZE + 5);
    fs.write(a, 0, &da).unwrap();
    let before_bytes = fs.device().blocks().to_vec();
    let before = snapshot(&mut fs);
    let writes = fs.device().writes();
    // Too big for what is left: refused before any write.
    let big = pattern(11, (total as usize - 10) * BLOCK_SIZE);
    assert_eq!(fs.write(b, 0, &big).err(), Some(Errno::NoSpace));
    assert_eq!(fs.set_size(b, total * BS), Err(Errno::NoSpace));
    let bigger = pattern(12, total as usize * BLOCK_SIZE - 2);
    assert_eq!(fs.write(a, 3, &bigger).err(), Some(Errno::NoSpace));
    assert_eq!(fs.device().writes(), writes);
    assert_eq!(fs.device().blocks(), &before_bytes[..]);
    assert_eq!(snapshot(&mut fs), before);
    // Fill up exactly, then one more byte fails.
    let left = (total - fs.stats().blocks_used) as usize;
    fs.write(b, 0, &vec![9; left * BLOCK_SIZE]).unwrap();
    assert_eq!(fs.stats().blocks_used, total);
    let c = fs.create("/c", true).unwrap().ino;
    assert_eq!(fs.write(c, 0, b"x").err(), Some(Errno::NoSpace));
    assert_eq!(fs.getattr(c).unwrap().size, 0);
    // Remount: valid, old data intact.
    let mut fs = assert_survives_remount(fs);
    assert_eq!(read_all(&mut fs, a), da);
    // Freeing space makes it usable again.
    fs.set_size(b, 0).unwrap();
    fs.write(c, 0, b"x").unwrap();
    assert_survives_remount(fs);
}

#[test]
fn out_of_extents_is_nospace() {
    let mut fs = fresh(128, 32);
    // Make a checkerboard: a keeps every other block after freeing b.
    let a = fs.create("/a", true).unwrap().ino;
    let others: Vec<u64> = (0..MAX_EXTENTS as u64 + 2)
        .map(|i| fs.create(&format!("/b{i}"), true).unwrap().ino)
        .collect();
    for &o in &others {
        fs.write(o, 0, &[1; BLOCK_SIZE]).unwrap();
        let x = fs.create(&format!("/x{o}"), true).unwrap().ino;
        fs.write(x, 0, &[2; BLOCK_SIZE]).unwrap();
    }
    for &o in &others {
        fs.set_size(o, 0).unwrap();
    }
    // Leave the tail busy too so a cannot just take one big run.
    let z = fs.create("/z", true).unwrap().ino;
    let free = fs.stats().blocks_total - fs.stats().blocks_used;
    fs.write(z, 0, &vec![3; (free as usize - others.len()) * BLOCK_SIZE])
        .unwrap();
    assert_eq!(
        fs.stats().blocks_total - fs.stats().blocks_used,
        others.len() as u64
    );
    // Each single free block is a separate extent for a.
    let mut written = 0u64;
    loop {
        match fs.write(a, written * BS, &[5; BLOCK_SIZE]) {
            Ok(_) => written += 1,
            Err(e) => {
                assert_eq!(e, Errno::NoSpace);
                break;
            }
        }
    }
    assert_eq!(written, MAX_EXTENTS as u64);
    assert_eq!(extents_of(&fs, a).len(), MAX_EXTENTS);
    assert_eq!(fs.getattr(a).unwrap().size, written * BS);
    let used = fs.stats().blocks_used;
    let mut fs = assert_survives_remount(fs);
    assert_eq!(fs.stats().blocks_used, used);
    assert!(read_all(&mut fs, a).iter().all(|&b| b == 5));
}

#[test]
fn io_errors_leave_memory_matching_disk() {
    // For every prefix of an operation's writes, fail the rest: the file
    // system afterwards must agree with a fresh mount of the disk.
    let script = |fs: &mut Fs<MemDisk>| -> Result<(), Errno> {
        fs.mkdir("/d")?;
        let f = fs.create("/d/f", true)?.ino;
        fs.write(f, 100, &[1; 3 * BLOCK_SIZE])?;
        fs.set_size(f, 5000)?;
        fs.set_size(f, 9 * BS)?;
        fs.write(f, 0, b"abc")?;
        fs.unlink("/d/f")?;
        fs.rmdir("/d")?;
        Ok(())
    };
    for budget in 0..40 {
        // A new file system over a disk that fails after `budget` writes.
        let mut disk = fresh(64, 16).into_device();
        disk.fail_writes_after(Some(budget));
        let mut fs = Fs::mount(disk).unwrap();
        let r = script(&mut fs);
        let mut mem = snapshot_no_io(&mut fs);
        let used = fs.stats().blocks_used;
        let mut disk = fs.into_device();
        disk.fail_writes_after(None);
        let mut again = Fs::mount(disk).unwrap_or_else(|e| panic!("budget {budget}: {e}"));
        let mut ondisk = snapshot_no_io(&mut again);
        // Versions of a directory may lag only if the entry itself is on
        // disk; compare names, kinds and sizes.
        for s in [&mut mem, &mut ondisk] {
            for e in s.iter_mut() {
                e.1.version = 0;
            }
        }
        assert_eq!(mem, ondisk, "budget {budget}");
        assert_eq!(again.stats().blocks_used, used, "budget {budget}");
        if r.is_ok() {
            assert!(budget >= 10);
            break;
        }
    }
}

/// Like [`snapshot`] but only metadata: data after a failed write is not
/// defined (a block overwritten in place whose checksum-table write failed
/// reads as an I/O error after a remount, never as wrong bytes).
fn snapshot_no_io(fs: &mut Fs<MemDisk>) -> Snapshot {
    snapshot_with(fs, false)
}

// ----- corruption --------------------------------------------------------

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

#[test]
fn layout_matches_the_documentation() {
    let img = reference();
    // Superblock.
    assert_eq!(&img[0..8], b"ONECOPFS");
    assert_eq!(&img[0..8], &MAGIC);
    assert_eq!(u32::from_le_bytes(img[8..12].try_into().unwrap()), 2);
    assert_eq!(VERSION, 2);
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
    // entry = block - data start), and the table block its own crc32.
    let t = 3 * BLOCK_SIZE;
    for b in [start, start + 1] {
        let e = t + (b as usize - 4) * 4;
        let sum = u32::from_le_bytes(img[e..e + 4].try_into().unwrap());
        let at = b as usize * BLOCK_SIZE;
        assert_eq!(sum, crc32fast::hash(&img[at..at + BLOCK_SIZE]), "block {b}");
    }
    assert_eq!(SUMS_PER_BLOCK, 1023);
    let crc = u32::from_le_bytes(img[t + 4092..t + 4096].try_into().unwrap());
    assert_eq!(crc, crc32fast::hash(&img[t..t + 4092]));
    // Entries past the data area (60 data blocks) are zero.
    assert!(img[t + 60 * 4..t + 4092].iter().all(|&b| b == 0));
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
            |i| put32(i, 8, 3),
            |e| *e == MountError::UnsupportedVersion { found: 3 },
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
                put32(i, 3 * BLOCK_SIZE + 60 * 4, 1);
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
            "unsupported format version 1 (this build reads version 2): re-create the image with mkfs",
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

/// A richer image for the random-damage tests.
fn busy_image() -> Vec<u8> {
    let mut fs = fresh(96, 48);
    let mut r = Rng::new(9);
    fs.mkdir("/d").unwrap();
    fs.mkdir("/d/e").unwrap();
    for i in 0..12 {
        let dir = ["/", "/d/", "/d/e/"][i % 3];
        let f = fs.create(&format!("{dir}f{i}"), true).unwrap().ino;
        let len = r.below(3 * BLOCK_SIZE as u64) as usize;
        fs.write(f, r.below(5000), &r.bytes(len)).unwrap();
    }
    fs.into_device().into_bytes()
}

/// Use a mounted image the way a server would, checking it stays sane.
fn exercise<D: BlockDevice>(fs: &mut Fs<D>) {
    let snap = snapshot_with(fs, false);
    let st = fs.stats();
    assert!(st.blocks_used <= st.blocks_total);
    let _ = fs.create("/new", false);
    let _ = fs.mkdir("/d/new");
    for (path, a, _) in &snap {
        if a.kind == FileKind::File {
            let _ = fs.write(a.ino, a.size / 2, b"more");
            let _ = fs.set_size(a.ino, a.size / 3);
        } else if path != "/" {
            let _ = fs.rmdir(path);
        }
    }
}

#[test]
fn single_byte_damage_to_metadata_is_always_refused() {
    let img = busy_image();
    let meta = {
        let fs = Fs::mount(MemDisk::from_bytes(img.clone())).unwrap();
        fs.geometry().data_start as usize * BLOCK_SIZE
    };
    let mut disk = MemDisk::from_bytes(img.clone());
    let mut r = Rng::new(1234);
    for _ in 0..3000 {
        let pos = r.below(meta as u64) as usize;
        let x = (r.below(255) + 1) as u8;
        disk.blocks_mut()[pos] ^= x;
        if let Ok(fs) = Fs::mount(&mut disk) {
            panic!("byte {pos} ^ {x:#x} not detected ({:?})", fs.stats());
        }
        disk.blocks_mut()[pos] ^= x;
    }
    assert_eq!(disk.writes(), 0);
    assert_eq!(disk.blocks(), &img[..]);
    // Damage in the data area is invisible to mount.
    for _ in 0..50 {
        let pos = meta + r.below((img.len() - meta) as u64) as usize;
        disk.blocks_mut()[pos] ^= 0x5A;
        assert!(Fs::mount(&mut disk).is_ok());
        disk.blocks_mut()[pos] ^= 0x5A;
    }
}

#[test]
fn mount_never_panics_on_damaged_images() {
    let img = busy_image();
    let meta = 5 * BLOCK_SIZE; // superblock + 3 table blocks + 1 checksum block
    let mut r = Rng::new(99);
    let mut mounted = 0;
    for round in 0..3000 {
        let mut bad = img.clone();
        if round % 2 == 0 {
            // Blind damage: a few random bytes anywhere in the metadata.
            for _ in 0..=r.below(8) {
                let pos = r.below(meta as u64) as usize;
                bad[pos] = r.next_u64() as u8;
            }
        } else {
            // Structured damage: a plausible value in one field of one
            // record (or the superblock), checksum fixed, so the deeper
            // checks run.
            let vals = [
                0,
                1,
                2,
                3,
                4,
                5,
                16,
                47,
                48,
                95,
                96,
                97,
                u64::MAX,
                u32::MAX as u64,
            ];
            let v = if r.below(3) == 0 {
                r.next_u64()
            } else {
                *r.pick(&vals)
            };
            if r.below(6) == 0 {
                let field = *r.pick(&[8usize, 12, 16, 24, 32, 36, 40, 48, 56, 64, 72]);
                if field == 12 || field == 32 || field == 36 || field == 8 || field == 72 {
                    put32(&mut bad, field, v as u32);
                } else {
                    put64(&mut bad, field, v);
                }
                fix_sb(&mut bad);
            } else {
                let ino = 1 + r.below(20);
                let field =
                    *r.pick(&[0usize, 1, 2, 8, 16, 24, 32, 40, 48, 112, 120, 124, 132, 136]);
                let o = rec(ino) + field;
                match field {
                    0 | 1 => bad[o] = v as u8,
                    2 => bad[o..o + 2].copy_from_slice(&(v as u16).to_le_bytes()),
                    120 | 132 => put32(&mut bad, o, v as u32),
                    _ => put64(&mut bad, o, v),
                }
                fix_rec(&mut bad, ino);
            }
        }
        let mut disk = MemDisk::from_bytes(bad);
        if let Ok(mut fs) = Fs::mount(&mut disk) {
            mounted += 1;
            assert_eq!(fs.stats().disk_writes, 0);
            exercise(&mut fs);
            drop(fs);
            // Whatever it did, the result is still a valid image. Its data
            // need not be: an extent moved onto other blocks reads as a
            // checksum mismatch (`Io`), never as those blocks' bytes.
            let mut fs = Fs::mount(&mut disk).unwrap();
            for (_, a, _) in snapshot_with(&mut fs, false) {
                let mut buf = vec![0u8; a.size as usize];
                if a.kind == FileKind::File {
                    let r = fs.read(a.ino, 0, &mut buf);
                    assert!(matches!(r, Ok(_) | Err(Errno::Io)), "{r:?}");
                }
            }
        } else {
            assert_eq!(disk.writes(), 0);
        }
    }
    // Some structured edits keep the image valid (e.g. a version change).
    assert!(mounted > 50, "{mounted}");
}

// ----- remount after every kind of operation ------------------------------

#[test]
fn remount_after_each_operation() {
    let mut fs = fresh(128, 32);
    let steps: Vec<fn(&mut Fs<MemDisk>)> = vec![
        |fs| {
            fs.mkdir("/d").unwrap();
        },
        |fs| {
            fs.create("/d/f", true).unwrap();
        },
        |fs| {
            let f = fs.lookup("/d/f").unwrap().ino;
            fs.write(f, 0, &pattern(1, 20000)).unwrap();
        },
        |fs| {
            let f = fs.lookup("/d/f").unwrap().ino;
            fs.write(f, 30000, b"after a hole").unwrap();
        },
        |fs| {
            let f = fs.lookup("/d/f").unwrap().ino;
            fs.set_size(f, 7777).unwrap();
        },
        |fs| {
            let f = fs.lookup("/d/f").unwrap().ino;
            fs.set_size(f, 12345).unwrap();
        },
        |fs| {
            fs.create("/g", true).unwrap();
            fs.mkdir("/d/e").unwrap();
        },
        |fs| {
            fs.unlink("/g").unwrap();
        },
        |fs| {
            fs.rmdir("/d/e").unwrap();
        },
        |fs| {
            fs.sync().unwrap();
        },
        |fs| {
            fs.unlink("/d/f").unwrap();
            fs.rmdir("/d").unwrap();
        },
    ];
    for step in steps {
        step(&mut fs);
        fs = assert_survives_remount(fs);
    }
    assert_eq!(fs.stats().inodes_used, 1);
    assert_eq!(fs.stats().blocks_used, 0);
}

// ----- randomized model check ---------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
enum MNode {
    Dir { version: u64 },
    File { data: Vec<u8>, version: u64 },
}

/// The reference model: a map from path to node.
struct Model {
    nodes: BTreeMap<String, MNode>,
}

fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) => "/",
        Some(i) => &path[..i],
        None => "/",
    }
}

impl Model {
    fn new() -> Model {
        let mut nodes = BTreeMap::new();
        nodes.insert("/".into(), MNode::Dir { version: 1 });
        Model { nodes }
    }

    /// Resolve like the file system: errors for missing or file ancestors.
    fn check_parent(&self, path: &str) -> Result<(), Errno> {
        let mut cur = String::new();
        let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
        for c in &comps[..comps.len().saturating_sub(1)] {
            cur.push('/');
            cur.push_str(c);
            match self.nodes.get(&cur) {
                None => return Err(Errno::NotFound),
                Some(MNode::File { .. }) => return Err(Errno::NotDir),
                Some(MNode::Dir { .. }) => {}
            }
        }
        Ok(())
    }

    fn bump_parent(&mut self, path: &str) {
        if let Some(MNode::Dir { version }) = self.nodes.get_mut(parent_of(path)) {
            *version += 1;
        }
    }

    fn children(&self, dir: &str) -> Vec<String> {
        self.nodes
            .keys()
            .filter(|p| p.as_str() != "/" && parent_of(p) == dir)
            .cloned()
            .collect()
    }

    fn attr(&self, path: &str) -> (FileKind, u64, u64) {
        match &self.nodes[path] {
            MNode::Dir { version } => (FileKind::Dir, self.children(path).len() as u64, *version),
            MNode::File { data, version } => (FileKind::File, data.len() as u64, *version),
        }
    }

    fn used_blocks(&self) -> u64 {
        self.nodes
            .values()
            .map(|n| match n {
                MNode::File { data, .. } => (data.len() as u64).div_ceil(BS),
                MNode::Dir { .. } => 0,
            })
            .sum()
    }
}

fn kind_size_version(a: Attr) -> (FileKind, u64, u64) {
    (a.kind, a.size, a.version)
}

fn run_model(seed: u64, steps: usize, blocks: u64, inodes: u32) -> usize {
    let mut r = Rng::new(seed);
    let mut fs = fresh(blocks, inodes);
    let mut m = Model::new();
    let names = ["a", "b", "c", "d"];
    let mut nospace = 0;
    for step in 0..steps {
        let depth = 1 + r.below(3) as usize;
        let path: String = (0..depth).map(|_| format!("/{}", r.pick(&names))).collect();
        let ctx = format!("seed {seed} step {step} path {path}");
        let op = r.below(100);
        match op {
            0..=14 => {
                let excl = r.below(2) == 0;
                let got = fs.create(&path, excl);
                let want = m
                    .check_parent(&path)
                    .and_then(|()| match m.nodes.get(&path) {
                        Some(MNode::Dir { .. }) if excl => Err(Errno::Exists),
                        Some(MNode::Dir { .. }) => Err(Errno::IsDir),
                        Some(MNode::File { .. }) if excl => Err(Errno::Exists),
                        _ => Ok(()),
                    });
                match (got, want) {
                    (Err(Errno::NoSpace), Ok(())) if !m.nodes.contains_key(&path) => nospace += 1,
                    (Ok(a), Ok(())) => {
                        if !m.nodes.contains_key(&path) {
                            // A new inode: its first version is derived
                            // from its creation sequence number.
                            assert_eq!(a.version, first_version(&fs, a.ino), "{ctx}");
                            m.nodes.insert(
                                path.clone(),
                                MNode::File {
                                    data: Vec::new(),
                                    version: a.version,
                                },
                            );
                            m.bump_parent(&path);
                        }
                        assert_eq!(kind_size_version(a), m.attr(&path), "{ctx}");
                    }
                    (g, w) => assert_eq!(g.map(|_| ()), w, "{ctx}"),
                }
            }
            15..=22 => {
                let got = fs.mkdir(&path);
                let want = m.check_parent(&path).and_then(|()| {
                    if m.nodes.contains_key(&path) {
                        Err(Errno::Exists)
                    } else {
                        Ok(())
                    }
                });
                match (got, want) {
                    (Err(Errno::NoSpace), Ok(())) => nospace += 1,
                    (Ok(a), Ok(())) => {
                        assert_eq!(a.version, first_version(&fs, a.ino), "{ctx}");
                        m.nodes
                            .insert(path.clone(), MNode::Dir { version: a.version });
                        m.bump_parent(&path);
                        assert_eq!(kind_size_version(a), m.attr(&path), "{ctx}");
                    }
                    (g, w) => assert_eq!(g.map(|_| ()), w, "{ctx}"),
                }
            }
            23..=30 => {
                let got = fs.unlink(&path);
                let want = m
                    .check_parent(&path)
                    .and_then(|()| match m.nodes.get(&path) {
                        None => Err(Errno::NotFound),
                        Some(MNode::Dir { .. }) => Err(Errno::IsDir),
                        Some(MNode::File { .. }) => Ok(()),
                    });
                assert_eq!(got, want, "{ctx}");
                if got.is_ok() {
                    m.nodes.remove(&path);
                    m.bump_parent(&path);
                }
            }
            31..=36 => {
                let got = fs.rmdir(&path);
                let want = m
                    .check_parent(&path)
                    .and_then(|()| match m.nodes.get(&path) {
                        None => Err(Errno::NotFound),
                        Some(MNode::File { .. }) => Err(Errno::NotDir),
                        Some(MNode::Dir { .. }) if !m.children(&path).is_empty() => {
                            Err(Errno::NotEmpty)
                        }
                        Some(MNode::Dir { .. }) => Ok(()),
                    });
                assert_eq!(got, want, "{ctx}");
                if got.is_ok() {
                    m.nodes.remove(&path);
                    m.bump_parent(&path);
                }
            }
            37..=64 => {
                // Write to an existing file, if any.
                let files: Vec<String> = m
                    .nodes
                    .iter()
                    .filter(|(_, n)| matches!(n, MNode::File { .. }))
                    .map(|(p, _)| p.clone())
                    .collect();
                if files.is_empty() {
                    continue;
                }
                let p = r.pick(&files).clone();
                let ino = fs.lookup(&p).unwrap().ino;
                let size = m.attr(&p).1;
                let off = r.below(size + 2 * BS);
                let len = r.below(2 * BS + 1) as usize;
                let data = r.bytes(len);
                match fs.write(ino, off, &data) {
                    Err(Errno::NoSpace) => nospace += 1,
                    Err(e) => panic!("{ctx}: write {e:?}"),
                    Ok((n, a)) => {
                        assert_eq!(n, len);
                        if let Some(MNode::File { data: d, version }) = m.nodes.get_mut(&p) {
                            if len > 0 {
                                let end = off as usize + len;
                                if d.len() < end {
                                    d.resize(end, 0);
                                }
                                d[off as usize..end].copy_from_slice(&data);
                                *version += 1;
                            }
                        }
                        assert_eq!(kind_size_version(a), m.attr(&p), "{ctx}");
                    }
                }
            }
            65..=74 => {
                let files: Vec<String> = m
                    .nodes
                    .iter()
                    .filter(|(_, n)| matches!(n, MNode::File { .. }))
                    .map(|(p, _)| p.clone())
                    .collect();
                if files.is_empty() {
                    continue;
                }
                let p = r.pick(&files).clone();
                let ino = fs.lookup(&p).unwrap().ino;
                let size = m.attr(&p).1;
                let new = r.below(size + 3 * BS);
                match fs.set_size(ino, new) {
                    Err(Errno::NoSpace) => nospace += 1,
                    Err(e) => panic!("{ctx}: set_size {e:?}"),
                    Ok(a) => {
                        if let Some(MNode::File { data: d, version }) = m.nodes.get_mut(&p) {
                            if d.len() as u64 != new {
                                d.resize(new as usize, 0);
                                *version += 1;
                            }
                        }
                        assert_eq!(kind_size_version(a), m.attr(&p), "{ctx}");
                    }
                }
            }
            75..=84 => {
                let got = fs.lookup(&path);
                let want = m.check_parent(&path).and_then(|()| {
                    if m.nodes.contains_key(&path) {
                        Ok(m.attr(&path))
                    } else {
                        Err(Errno::NotFound)
                    }
                });
                assert_eq!(got.map(kind_size_version), want, "{ctx}");
            }
            85..=96 => {
                // Compare a directory listing and file contents.
                let dirs: Vec<String> = m
                    .nodes
                    .iter()
                    .filter(|(_, n)| matches!(n, MNode::Dir { .. }))
                    .map(|(p, _)| p.clone())
                    .collect();
                let d = r.pick(&dirs).clone();
                let ino = fs.lookup(&d).unwrap().ino;
                let (es, next) = fs.readdir(ino, 0, 100).unwrap();
                assert_eq!(next, 0);
                let mut got: Vec<(String, (FileKind, u64, u64))> = es
                    .iter()
                    .map(|e| (e.name.clone(), kind_size_version(e.attr)))
                    .collect();
                got.sort_by(|x, y| x.0.cmp(&y.0));
                let want: Vec<(String, (FileKind, u64, u64))> = m
                    .children(&d)
                    .iter()
                    .map(|c| (c.rsplit('/').next().unwrap().to_string(), m.attr(c)))
                    .collect();
                assert_eq!(got, want, "{ctx}");
                for e in es {
                    if e.attr.kind == FileKind::File {
                        let p = if d == "/" {
                            format!("/{}", e.name)
                        } else {
                            format!("{d}/{}", e.name)
                        };
                        let MNode::File { data, .. } = &m.nodes[&p] else {
                            panic!("{ctx}: kind")
                        };
                        assert_eq!(&read_all(&mut fs, e.attr.ino), data, "{ctx}: {p}");
                    }
                }
            }
            _ => {
                fs = remount(fs);
            }
        }
        assert_eq!(fs.stats().blocks_used, m.used_blocks(), "{ctx}: leak");
        assert_eq!(fs.stats().inodes_used, m.nodes.len() as u64, "{ctx}");
    }
    // Final full comparison after a remount.
    let mut fs = remount(fs);
    assert_eq!(fs.check_data(), Ok(vec![]), "seed {seed}");
    let snap = snapshot(&mut fs);
    assert_eq!(snap.len(), m.nodes.len());
    for (p, a, data) in snap {
        assert_eq!(kind_size_version(a), m.attr(&p), "seed {seed}: {p}");
        if let (Some(d), MNode::File { data: want, .. }) = (data, &m.nodes[&p]) {
            assert_eq!(&d, want);
        }
    }
    nospace
}

#[test]
fn random_ops_match_the_model() {
    for seed in 0..12 {
        run_model(seed, 1000, 256, 64);
    }
}

#[test]
fn random_ops_match_the_model_when_tight() {
    // A small disk and few inodes: NoSpace happens often and must never
    // leave anything half done.
    let nospace: usize = (100..112).map(|seed| run_model(seed, 1000, 24, 16)).sum();
    assert!(nospace > 50, "{nospace}");
}

// ----- data checksums ------------------------------------------------------

/// Device block `n` of file `ino`.
fn data_lba(fs: &Fs<MemDisk>, ino: u64, n: usize) -> u64 {
    fs.file_blocks(ino).unwrap()[n]
}

#[test]
fn corrupt_data_reads_as_io_and_is_found() {
    // /a/f (inode 3) is 5000 bytes in two blocks; damage one byte of its
    // second block, as a bad disk would.
    let img = reference();
    let lba = {
        let fs = Fs::mount(MemDisk::from_bytes(img.clone())).unwrap();
        data_lba(&fs, 3, 1)
    };
    let mut bad = img.clone();
    bad[lba as usize * BLOCK_SIZE + 17] ^= 0x40;
    // Mount does not read data: the image mounts.
    let mut fs = Fs::mount(MemDisk::from_bytes(bad)).unwrap();
    let mut buf = vec![0u8; 5000];
    // The first block is fine; anything touching the second is an I/O
    // error, never the wrong bytes.
    assert_eq!(fs.read(3, 0, &mut buf[..4096]), Ok(4096));
    assert_eq!(&buf[..4096], &pattern(5, 5000)[..4096]);
    assert_eq!(fs.read(3, 0, &mut buf), Err(Errno::Io));
    assert_eq!(fs.read(3, 4100, &mut buf[..10]), Err(Errno::Io));
    // Other files are unaffected.
    assert_eq!(read_all(&mut fs, 4), b"gee");
    // The scan names the inode and the block.
    assert_eq!(
        fs.check_data(),
        Ok(vec![BadBlock {
            ino: 3,
            block: 1,
            lba
        }])
    );
    // A partial write into the bad block needs its old bytes: refused, and
    // nothing changes (the checksum is not recomputed over bad data).
    let v = fs.getattr(3).unwrap();
    let writes = fs.stats().disk_writes;
    assert_eq!(fs.write(3, 4200, b"x").err(), Some(Errno::Io));
    assert_eq!(fs.getattr(3).unwrap(), v);
    assert_eq!(fs.stats().disk_writes, writes);
    assert_eq!(fs.check_data().unwrap().len(), 1);
    // Rewriting the whole block replaces the damage and its checksum.
    let fresh_bytes = pattern(6, 904);
    fs.write(3, 4096, &fresh_bytes).unwrap();
    assert_eq!(fs.check_data(), Ok(vec![]));
    let mut fs = assert_survives_remount(fs);
    let got = read_all(&mut fs, 3);
    assert_eq!(&got[4096..], &fresh_bytes[..]);
}

#[test]
fn every_byte_of_a_data_block_is_covered() {
    let img = reference();
    let (lba, g) = {
        let fs = Fs::mount(MemDisk::from_bytes(img.clone())).unwrap();
        (data_lba(&fs, 4, 0), fs.geometry())
    };
    assert!(lba >= g.data_start);
    let mut disk = MemDisk::from_bytes(img);
    let mut r = Rng::new(5);
    for _ in 0..200 {
        // Past the file's 3 bytes too: the whole block is checksummed.
        let pos = lba as usize * BLOCK_SIZE + r.below(BLOCK_SIZE as u64) as usize;
        let x = (r.below(255) + 1) as u8;
        disk.blocks_mut()[pos] ^= x;
        let mut fs = Fs::mount(&mut disk).unwrap();
        let mut buf = [0u8; 3];
        assert_eq!(fs.read(4, 0, &mut buf), Err(Errno::Io), "byte {pos}");
        assert_eq!(fs.check_data().unwrap().len(), 1);
        drop(fs);
        disk.blocks_mut()[pos] ^= x;
    }
    assert_eq!(disk.writes(), 0);
}

#[test]
fn version_1_images_are_refused_with_advice() {
    // A version 1 superblock (no checksum table; its crc at 64..68).
    let mut img = reference();
    img[..BLOCK_SIZE].fill(0);
    img[..8].copy_from_slice(b"ONECOPFS");
    put32(&mut img, 8, 1);
    put32(&mut img, 12, 4096);
    put64(&mut img, 16, 64);
    put64(&mut img, 24, 1);
    put32(&mut img, 32, 32);
    put32(&mut img, 36, 2);
    put64(&mut img, 40, 3);
    put64(&mut img, 48, 64);
    put64(&mut img, 56, SEQ_BATCH);
    let crc = crc32fast::hash(&img[..64]);
    img[64..68].copy_from_slice(&crc.to_le_bytes());
    let mut disk = MemDisk::from_bytes(img.clone());
    let err = Fs::mount(&mut disk).err().unwrap();
    assert_eq!(err, MountError::UnsupportedVersion { found: 1 });
    let msg = err.to_string();
    assert!(
        msg.contains("version 1") && msg.contains("version 2"),
        "{msg}"
    );
    assert!(msg.contains("re-create the image with mkfs"), "{msg}");
    assert_eq!(disk.writes(), 0);
    assert_eq!(disk.blocks(), &img[..]);
}

#[test]
fn file_blocks_follow_the_extents() {
    let mut fs = fresh(64, 16);
    let a = fs.create("/a", true).unwrap().ino;
    let b = fs.create("/b", true).unwrap().ino;
    fs.write(a, 0, &[1; BLOCK_SIZE]).unwrap();
    fs.write(b, 0, &[2; BLOCK_SIZE]).unwrap();
    fs.write(a, BS, &[3; BLOCK_SIZE]).unwrap();
    let ds = fs.geometry().data_start;
    assert_eq!(fs.file_blocks(a), Ok(vec![ds, ds + 2]));
    assert_eq!(fs.file_blocks(b), Ok(vec![ds + 1]));
    assert_eq!(fs.file_blocks(ROOT_INO), Err(Errno::IsDir));
    assert_eq!(fs.file_blocks(99), Err(Errno::NotFound));
}

#[test]
fn datasets_are_written_byte_for_byte() {
    use userland::app::dataset::plan;
    let mut fs = Fs::format(MemDisk::new(4096), 256).unwrap();
    for app in ["kv", "webserver", "ann"] {
        let root = format!("/apps/{app}");
        let ds = plan(app, 256 << 10, 5, &root).unwrap();
        let (blocks, inodes) = crate::dataset::needs(&ds);
        assert!(blocks > 0 && inodes >= 2);
        crate::dataset::write(&mut fs, &ds).unwrap();
        for f in &ds.files {
            let attr = fs.lookup(&f.path).unwrap();
            assert_eq!(attr.size, f.size, "{}", f.path);
            let mut want = vec![0u8; f.size as usize];
            f.gen.fill(0, &mut want);
            let mut got = vec![0u8; f.size as usize];
            assert_eq!(fs.read(attr.ino, 0, &mut got).unwrap(), got.len());
            assert_eq!(got, want, "{}", f.path);
        }
    }
    // Too small a disk is an error naming the file, not a panic.
    let mut tiny = Fs::format(MemDisk::new(64), 16).unwrap();
    let ds = plan("kv", 1 << 20, 5, "/apps/kv").unwrap();
    let (path, e) = crate::dataset::write(&mut tiny, &ds).unwrap_err();
    assert_eq!(e, Errno::NoSpace);
    assert!(path.starts_with("/apps/kv/"), "{path}");
}

#[test]
fn block_source_and_check_block_match_read() {
    let mut fs = fresh(256, 16);
    let a = fs.create("/f", false).unwrap();
    let data = pattern(3, 4096 + 100);
    fs.write(a.ino, 0, &data).unwrap();
    // Block 0: full; block 1: 100 bytes of data; block 2: past the end.
    let BlockSource::Disk { lba, len } = fs.block_source(a.ino, 0).unwrap() else {
        panic!("block 0 is on disk")
    };
    assert_eq!(len, 4096);
    assert_eq!(fs.file_blocks(a.ino).unwrap()[0], lba);
    let BlockSource::Disk { lba: lba1, len } = fs.block_source(a.ino, 1).unwrap() else {
        panic!("block 1 is on disk")
    };
    assert_eq!(len, 100);
    assert_eq!(fs.block_source(a.ino, 2), Ok(BlockSource::Zeros));
    assert_eq!(fs.block_source(a.ino, u64::MAX), Err(Errno::Invalid));
    assert_eq!(fs.block_source(1, 0), Err(Errno::IsDir));
    assert_eq!(fs.block_source(99, 0), Err(Errno::NotFound));
    // Reading it ourselves and checking it: the same bytes as `read`.
    let mut blk = [0u8; BLOCK_SIZE];
    let reads = fs.stats().disk_reads;
    fs.device_mut().read_block(lba1, &mut blk).unwrap();
    assert_eq!(fs.check_block(a.ino, 1, lba1, &blk), Ok(()));
    assert_eq!(fs.stats().disk_reads, reads + 1, "counted");
    assert_eq!(&blk[..100], &data[4096..]);
    // A damaged block is an I/O error.
    blk[7] ^= 1;
    assert_eq!(fs.check_block(a.ino, 1, lba1, &blk), Err(Errno::Io));
    let mut blk0 = [0u8; BLOCK_SIZE];
    fs.device_mut().read_block(lba, &mut blk0).unwrap();
    assert_eq!(fs.check_block(a.ino, 0, lba, &blk0), Ok(()));
    assert_eq!(&blk0[..], &data[..4096]);
}
