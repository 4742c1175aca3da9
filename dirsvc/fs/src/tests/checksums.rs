//! Data checksums.

use super::*;

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
fn older_format_versions_are_refused_with_advice() {
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
        msg.contains("version 1") && msg.contains("version 3"),
        "{msg}"
    );
    assert!(msg.contains("re-create the image with mkfs"), "{msg}");
    assert_eq!(disk.writes(), 0);
    assert_eq!(disk.blocks(), &img[..]);
    // Version 2 (one checksum per block): refused the same way.
    let mut img = reference();
    put32(&mut img, 8, 2);
    let mut disk = MemDisk::from_bytes(img.clone());
    let err = Fs::mount(&mut disk).err().unwrap();
    assert_eq!(err, MountError::UnsupportedVersion { found: 2 });
    assert!(err.to_string().contains("re-create the image with mkfs"));
    assert_eq!(disk.writes(), 0);
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
    use datasets::plan;
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
    assert_eq!(fs.check_block(a.ino, 1, lba1, &mut blk), Ok(()));
    assert_eq!(fs.stats().disk_reads, reads + 1, "counted");
    assert_eq!(&blk[..100], &data[4096..]);
    // A damaged block is an I/O error.
    blk[7] ^= 1;
    assert_eq!(fs.check_block(a.ino, 1, lba1, &mut blk), Err(Errno::Io));
    let mut blk0 = [0u8; BLOCK_SIZE];
    fs.device_mut().read_block(lba, &mut blk0).unwrap();
    assert_eq!(fs.check_block(a.ino, 0, lba, &mut blk0), Ok(()));
    assert_eq!(&blk0[..], &data[..4096]);
}

/// A reader that fetches the blocks itself ([`Fs::read_plan`], the
/// directory's asynchronous file-server reads) gets what `read` returns.
#[test]
fn read_plan_blocks_give_the_bytes_of_read() {
    let mut fs = fresh(256, 16);
    let a = fs.create("/f", false).unwrap();
    let data = pattern(5, 3 * 4096 + 700);
    fs.write(a.ino, 0, &data).unwrap();
    for (offset, len) in [
        (0u64, 4096usize),
        (100, 9000),
        (4096, 8192),
        (12000, 4096),
        (3 * 4096 + 699, 10),
    ] {
        let (n, blocks) = fs.read_plan(a.ino, offset, len).unwrap();
        let mut want = vec![0u8; len];
        assert_eq!(
            fs.read(a.ino, offset, &mut want).unwrap(),
            n,
            "at {offset}+{len}"
        );
        let mut got = Vec::new();
        for (b, src) in blocks {
            let mut blk = [0u8; BLOCK_SIZE];
            let BlockSource::Disk { lba, .. } = src else {
                panic!("block {b} inside the file reads the disk")
            };
            fs.device_mut().read_block(lba, &mut blk).unwrap();
            fs.check_block(a.ino, b, lba, &mut blk).unwrap();
            got.extend_from_slice(&blk);
        }
        let skip = (offset % 4096) as usize;
        assert_eq!(&got[skip..skip + n], &want[..n], "at {offset}+{len}");
    }
    assert_eq!(
        fs.read_plan(a.ino, 1 << 20, 10),
        Ok((0, vec![])),
        "past the end"
    );
    assert_eq!(fs.read_plan(a.ino, 0, 0), Ok((0, vec![])));
    assert_eq!(fs.read_plan(1, 0, 10), Err(Errno::IsDir));
    assert_eq!(fs.read_plan(99, 0, 10), Err(Errno::NotFound));
}

#[test]
fn zero_sum_is_the_checksum_of_a_zero_block() {
    assert_eq!(crate::ZERO_SUM, crate::sums::block_sum(&[0u8; BLOCK_SIZE]));
}

/// Growing a file past its end (set_size, or a write beyond the end)
/// writes no zero blocks: their checksum entries say "unwritten", and they
/// read as zeros whatever stale bytes the device holds there, also after
/// a remount and in `check_data`.
#[test]
fn extensions_leave_blocks_unwritten_and_they_read_as_zeros() {
    let mut fs = fresh(256, 16);
    // Stale bytes everywhere in the data area, as a deleted file leaves.
    let g = fs.geometry();
    for lba in g.data_start..g.data_end {
        fs.device_mut()
            .write_block(lba, &[0xA5; BLOCK_SIZE])
            .unwrap();
    }
    let f = fs.create("/f", true).unwrap().ino;
    fs.write(f, 0, &[1; 100]).unwrap();
    let writes = fs.device().writes();
    fs.set_size(f, 64 * BS).unwrap();
    let used = fs.device().writes() - writes;
    // The first block (its tail zeroed), one checksum-table block and the
    // inode record: not 64 blocks.
    assert!(used <= 4, "{used} device writes for a 64-block extension");
    // A write far past the end leaves the gap unwritten too.
    let writes = fs.device().writes();
    fs.write(f, 100 * BS + 5, b"tail").unwrap();
    assert!(fs.device().writes() - writes <= 4);
    let mut want = vec![0u8; 100 * BLOCK_SIZE + 9];
    want[..100].fill(1);
    want[100 * BLOCK_SIZE + 5..].copy_from_slice(b"tail");
    assert!(read_all(&mut fs, f) == want);
    // A page fill (block_source + check_block) sees zeros as well.
    let BlockSource::Disk { lba, .. } = fs.block_source(f, 50).unwrap() else {
        panic!("block 50 is on disk")
    };
    let mut blk = [0u8; BLOCK_SIZE];
    fs.device_mut().read_block(lba, &mut blk).unwrap();
    assert_eq!(
        blk, [0xA5; BLOCK_SIZE],
        "the device still holds stale bytes"
    );
    assert_eq!(fs.check_block(f, 50, lba, &mut blk), Ok(()));
    assert_eq!(blk, [0; BLOCK_SIZE]);
    // Writing into an unwritten block makes it an ordinary one: damage to
    // it is an I/O error again, at once (the entry in memory drops the
    // "before" once the write landed) and, after a remount, once its
    // checksum-table block was written again (until then a crash may
    // leave the block's stale bytes, which must read as the zeros it
    // held: see `sums`).
    fs.write(f, 50 * BS, &[7; BLOCK_SIZE]).unwrap();
    want[50 * BLOCK_SIZE..51 * BLOCK_SIZE].fill(7);
    assert!(read_all(&mut fs, f) == want);
    let lba = fs.file_blocks(f).unwrap()[50];
    let damage = |fs: &mut Fs<MemDisk>, bit: u8| {
        let mut blk = [0u8; BLOCK_SIZE];
        fs.device_mut().read_block(lba, &mut blk).unwrap();
        blk[0] ^= bit;
        fs.device_mut().write_block(lba, &blk).unwrap();
    };
    damage(&mut fs, 1);
    assert_eq!(fs.check_data().unwrap().len(), 1, "damage found");
    let mut buf = [0u8; 10];
    assert_eq!(fs.read(f, 50 * BS, &mut buf), Err(Errno::Io));
    damage(&mut fs, 1);
    fs.write(f, 0, &[8; 16]).unwrap(); // the same checksum-table block
    want[..16].fill(8);
    let mut fs = remount(fs);
    assert_eq!(fs.check_data(), Ok(vec![]));
    assert!(read_all(&mut fs, f) == want);
    damage(&mut fs, 2);
    assert_eq!(
        fs.check_data().unwrap().len(),
        1,
        "damage found after a remount"
    );
    assert_eq!(fs.read(f, 50 * BS, &mut buf), Err(Errno::Io));
}
