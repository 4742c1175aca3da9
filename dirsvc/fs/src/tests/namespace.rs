//! Namespace operations: create, mkdir, unlink, versions, readdir.

use super::*;

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
        assert_eq!(fs.next_create_raises_floor(), i == floor, "seq {i}");
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
    assert!(fs.next_create_raises_floor());
    let a = fs.create("/x", true).unwrap();
    assert!(!fs.next_create_raises_floor());
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
