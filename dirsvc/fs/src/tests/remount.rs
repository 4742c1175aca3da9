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
