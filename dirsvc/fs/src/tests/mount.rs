//! Format, mount and path syntax.

use super::*;

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
