//! File data: reads, writes, holes, truncate.

use super::*;

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
