//! Remount after every kind of operation.

use super::*;

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

/// A held size is what a remount (a crash) shows, whatever the file grew
/// to in memory; data written past it is kept in the file's blocks; the
/// file's other records in the same table block are not disturbed; a
/// shrink below the hold is recorded at once; a removal drops the hold.
#[test]
fn a_held_size_is_what_a_remount_shows_until_released() {
    let mut fs = fresh(128, 32);
    let f = fs.create("/f", true).unwrap().ino;
    let g = fs.create("/g", true).unwrap().ino;
    fs.write(f, 0, &pattern(1, 5000)).unwrap();
    fs.hold_size(f, Some(5000)).unwrap();
    fs.set_size(f, 20000).unwrap();
    fs.write(f, 8192, &pattern(2, 4096)).unwrap();
    fs.write(g, 0, b"neighbour").unwrap();
    assert_eq!(fs.getattr(f).unwrap().size, 20000);
    assert_eq!(fs.durable_size(f).unwrap(), 5000);
    let mut fs = remount(fs);
    assert_eq!(fs.getattr(f).unwrap().size, 5000);
    assert_eq!(read_all(&mut fs, f), pattern(1, 5000));
    assert_eq!(read_all(&mut fs, g), b"neighbour");
    assert!(fs.check_data().unwrap().is_empty());

    // Grown and held again, then released: the whole size is recorded.
    fs.hold_size(f, Some(5000)).unwrap();
    fs.write(f, 5000, &pattern(3, 7000)).unwrap();
    assert_eq!(fs.durable_size(f).unwrap(), 5000);
    fs.hold_size(f, None).unwrap();
    let mut fs = remount(fs);
    let mut want = pattern(1, 5000);
    want.extend(pattern(3, 7000));
    assert_eq!(read_all(&mut fs, f), want);

    // A shrink below the hold is recorded at once.
    fs.hold_size(f, Some(9000)).unwrap();
    fs.set_size(f, 3000).unwrap();
    assert_eq!(fs.durable_size(f).unwrap(), 3000);
    let mut fs = remount(fs);
    assert_eq!(read_all(&mut fs, f), pattern(1, 3000));

    // A removed file's hold does not reach the inode's next file.
    fs.hold_size(f, Some(0)).unwrap();
    fs.unlink("/f").unwrap();
    let h = fs.create("/h", true).unwrap().ino;
    assert_eq!(h, f, "the inode number is reused");
    fs.write(h, 0, b"new file").unwrap();
    let mut fs = remount(fs);
    assert_eq!(read_all(&mut fs, h), b"new file");
}
