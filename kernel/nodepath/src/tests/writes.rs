//! Host tests of the buffered writes of the private-cache modes
//! (`private`, `net`): they reach the disk at fsync, close, sync and
//! under pressure, and a node that is dropped loses exactly its unsynced
//! writes. Relaxed mode's private copies are in `copies.rs`, strong
//! mode's writes in `strong_writes.rs`.

use fabric::config::{BaselineWrites, Mode};
use osapi::io::OpenFlags;
use osapi::keys::cache as keys;

use crate::rig::{Rig, RigConfig};
use crate::tests::{create, disk_bytes, pattern, read_file, stat_value, write_file};

use fabric::PAGE_SIZE as PAGE;

/// The modes whose nodes buffer writes in a private cache (`net` over the
/// rig's loopback connection).
const BUFFERED: [Mode; 2] = [Mode::Private, Mode::Net];

fn private_rig(mode: Mode, writes: BaselineWrites, cache_pages: usize) -> Rig {
    let mut cfg = RigConfig::new(2, mode);
    cfg.baseline_writes = writes;
    cfg.cache_pages = cache_pages;
    Rig::new(cfg)
}

#[test]
fn private_writes_stay_in_the_cache_until_fsync() {
    for mode in BUFFERED {
        eprintln!("mode {mode:?}");
        private_writes_stay_in_the_cache_until_fsync_in(mode);
    }
}

fn private_writes_stay_in_the_cache_until_fsync_in(mode: Mode) {
    let rig = private_rig(mode, BaselineWrites::Back, 0);
    let data = pattern(3 * PAGE + 100, 1);
    let fd = rig.node(1).open("/f", create()).unwrap();
    assert_eq!(rig.node(1).write(fd, &data).unwrap(), data.len());
    // A copy into the cache: nothing sent, nothing read (full pages, or
    // past the end).
    assert_eq!(stat_value(&rig.node(1), keys::DIRTY_PAGES), "4");
    assert_eq!(stat_value(&rig.node(1), keys::PAGES_WRITTEN_BACK), "0");
    assert_eq!(stat_value(&rig.node(1), keys::MISSES), "0");
    assert_eq!(stat_value(&rig.node(1), keys::BASELINE_WRITES), "back");
    // This node sees its writes and its local size; the directory does not.
    assert_eq!(rig.node(1).fd_info(fd).unwrap().1, data.len() as u64);
    assert_eq!(rig.node(1).stat("/f").unwrap().size, data.len() as u64);
    assert_eq!(rig.node(2).stat("/f").unwrap().size, 0);
    assert_eq!(read_file(&mut rig.node(2), "/f"), b"");
    let mut buf = vec![0u8; data.len() + 10];
    rig.node(1).seek(fd, 0).unwrap();
    assert_eq!(rig.node(1).read(fd, &mut buf).unwrap(), data.len());
    assert!(buf[..data.len()] == data[..]);
    // fsync sends them, contiguous pages together.
    rig.node(1).fsync(fd).unwrap();
    assert_eq!(stat_value(&rig.node(1), keys::DIRTY_PAGES), "0");
    assert_eq!(stat_value(&rig.node(1), keys::PAGES_WRITTEN_BACK), "4");
    assert_eq!(rig.node(2).stat("/f").unwrap().size, data.len() as u64);
    assert!(read_file(&mut rig.node(2), "/f") == data);
    // The whole pages stay cached on node 1 (our own write moved the
    // version); the last one, written in part, goes: only the bytes we
    // wrote were sent, and its others may be another node's.
    assert_eq!(stat_value(&rig.node(1), keys::RESIDENT_PRIVATE), "3");
    rig.node(1).close(fd).unwrap();
    assert!(disk_bytes(&rig, "/f") == data);
}

#[test]
fn private_close_and_sync_write_back() {
    for mode in BUFFERED {
        eprintln!("mode {mode:?}");
        private_close_and_sync_write_back_in(mode);
    }
}

fn private_close_and_sync_write_back_in(mode: Mode) {
    let rig = private_rig(mode, BaselineWrites::Back, 0);
    let a = pattern(2 * PAGE, 2);
    write_file(&mut rig.node(1), "/a", &a);
    // Close-to-open: node 2 sees node 1's closed file at its next open.
    assert_eq!(read_file(&mut rig.node(2), "/a"), a);
    // A partial write inside the file reads the page first.
    let fd = rig.node(2).open("/a", OpenFlags::default()).unwrap();
    rig.node(2).seek(fd, PAGE as u64 + 10).unwrap();
    rig.node(2).write(fd, b"patched").unwrap();
    let b = pattern(PAGE, 3);
    let fb = rig.node(2).open("/b", create()).unwrap();
    rig.node(2).write(fb, &b).unwrap();
    assert_eq!(stat_value(&rig.node(2), keys::DIRTY_PAGES), "2");
    rig.node(2).sync().unwrap();
    assert_eq!(stat_value(&rig.node(2), keys::DIRTY_PAGES), "0");
    let mut want = a.clone();
    want[PAGE + 10..PAGE + 17].copy_from_slice(b"patched");
    assert_eq!(read_file(&mut rig.node(1), "/a"), want);
    assert_eq!(read_file(&mut rig.node(1), "/b"), b);
    assert_eq!(disk_bytes(&rig, "/a"), want);
}

#[test]
fn write_through_sends_every_write() {
    for mode in BUFFERED {
        eprintln!("mode {mode:?}");
        write_through_sends_every_write_in(mode);
    }
}

fn write_through_sends_every_write_in(mode: Mode) {
    let rig = private_rig(mode, BaselineWrites::Through, 0);
    assert_eq!(stat_value(&rig.node(1), keys::BASELINE_WRITES), "through");
    let fd = rig.node(1).open("/f", create()).unwrap();
    rig.node(1).write(fd, b"through").unwrap();
    assert_eq!(stat_value(&rig.node(1), keys::DIRTY_PAGES), "0");
    // At the directory before any fsync or close.
    assert_eq!(read_file(&mut rig.node(2), "/f"), b"through");
    rig.node(1).close(fd).unwrap();
}

#[test]
fn private_dirty_pages_go_back_oldest_first_under_pressure() {
    for mode in BUFFERED {
        eprintln!("mode {mode:?}");
        private_dirty_pages_go_back_oldest_first_under_pressure_in(mode);
    }
}

fn private_dirty_pages_go_back_oldest_first_under_pressure_in(mode: Mode) {
    let rig = private_rig(mode, BaselineWrites::Back, 16);
    let data = pattern(64 * PAGE, 4);
    let fd = rig.node(1).open("/big", create()).unwrap();
    for (i, chunk) in data.chunks(PAGE).enumerate() {
        assert_eq!(rig.node(1).write(fd, chunk).unwrap(), PAGE);
        let dirty: usize = stat_value(&rig.node(1), keys::DIRTY_PAGES).parse().unwrap();
        assert!(dirty <= 16, "{dirty} dirty pages after page {i}");
    }
    let back: usize = stat_value(&rig.node(1), keys::PAGES_WRITTEN_BACK)
        .parse()
        .unwrap();
    assert!(back >= 48, "{back} pages written back");
    // The oldest went first: the directory has the head of the file.
    let size = rig.node(2).stat("/big").unwrap().size as usize;
    assert!(size >= 48 * PAGE, "directory size {size}");
    assert_eq!(read_file(&mut rig.node(2), "/big"), data[..size]);
    // Reads on node 1 see everything (the rest is still dirty).
    let mut buf = vec![0u8; data.len()];
    rig.node(1).seek(fd, 0).unwrap();
    let mut got = 0;
    while got < buf.len() {
        let n = rig.node(1).read(fd, &mut buf[got..]).unwrap();
        assert!(n > 0);
        got += n;
    }
    assert_eq!(buf, data);
    rig.node(1).close(fd).unwrap();
    assert!(disk_bytes(&rig, "/big") == data);
}

#[test]
fn a_dropped_private_node_loses_exactly_its_unsynced_writes() {
    for mode in BUFFERED {
        eprintln!("mode {mode:?}");
        a_dropped_private_node_loses_exactly_its_unsynced_writes_in(mode);
    }
}

fn a_dropped_private_node_loses_exactly_its_unsynced_writes_in(mode: Mode) {
    let rig = private_rig(mode, BaselineWrites::Back, 0);
    let old = pattern(2 * PAGE, 5);
    write_file(&mut rig.node(2), "/f", &old);
    assert_eq!(read_file(&mut rig.node(2), "/f"), old); // node 2 owns it
    let fd = rig.node(1).open("/f", OpenFlags::default()).unwrap();
    rig.node(1).write(fd, &[0xAA; PAGE]).unwrap();
    rig.node(1).fsync(fd).unwrap();
    rig.node(1).write(fd, &[0xBB; PAGE]).unwrap(); // page 1: never synced
    rig.node(1).write(fd, &[0xCC; 10]).unwrap(); // past the end: never synced
    rig.freeze(1); // node 1 dies
    rig.idle(100);
    let mut want = old.clone();
    want[..PAGE].fill(0xAA);
    assert_eq!(read_file(&mut rig.node(2), "/f"), want);
    assert_eq!(disk_bytes(&rig, "/f"), want);
}

#[test]
fn truncating_open_discards_buffered_writes_past_the_end() {
    for mode in BUFFERED {
        eprintln!("mode {mode:?}");
        truncating_open_discards_buffered_writes_past_the_end_in(mode);
    }
}

fn truncating_open_discards_buffered_writes_past_the_end_in(mode: Mode) {
    let rig = private_rig(mode, BaselineWrites::Back, 0);
    let fd = rig.node(1).open("/f", create()).unwrap();
    rig.node(1)
        .write(fd, b"buffered, never written back")
        .unwrap();
    // A second descriptor truncates while the first still holds dirty data.
    let fd2 = rig.node(1).open("/f", create()).unwrap();
    assert_eq!(rig.node(1).fd_info(fd2).unwrap().1, 0);
    assert_eq!(stat_value(&rig.node(1), keys::DIRTY_PAGES), "0");
    rig.node(1).write(fd2, b"new").unwrap();
    rig.node(1).close(fd2).unwrap();
    rig.node(1).close(fd).unwrap();
    assert_eq!(read_file(&mut rig.node(2), "/f"), b"new");
}

/// Write every other page of a 40-page file on node 1 (20 runs of one
/// page each), then `sync`: the runs go out side by side in the write
/// slot (16 pages of 64 KiB), so two groups, not 20 round trips. Returns
/// what the file should hold.
pub(super) fn scattered_pages_then_sync(rig: &Rig) -> Vec<u8> {
    let mut want = vec![0u8; 40 * PAGE];
    let fd = rig.node(1).open("/s", OpenFlags::default()).unwrap();
    for idx in (0..40).step_by(2) {
        let page = pattern(PAGE, 20 + idx as u8);
        want[idx * PAGE..(idx + 1) * PAGE].copy_from_slice(&page);
        rig.node(1).seek(fd, (idx * PAGE) as u64).unwrap();
        assert_eq!(rig.node(1).write(fd, &page).unwrap(), PAGE);
    }
    assert_eq!(stat_value(&rig.node(1), keys::RING_WRITE_GROUPS), "0/0");
    rig.node(1).sync().unwrap();
    assert_eq!(stat_value(&rig.node(1), keys::RING_WRITE_GROUPS), "2/20");
    assert_eq!(stat_value(&rig.node(1), keys::RING_WRITES_MAX), "16");
    rig.node(1).close(fd).unwrap();
    want
}

#[test]
fn private_write_back_sends_scattered_pages_together() {
    let rig = private_rig(Mode::Private, BaselineWrites::Back, 0);
    write_file(&mut rig.node(2), "/s", &vec![0u8; 40 * PAGE]);
    // Node 1 caches the whole file first: its writes are to cached pages.
    assert_eq!(read_file(&mut rig.node(1), "/s").len(), 40 * PAGE);
    let want = scattered_pages_then_sync(&rig);
    assert_eq!(stat_value(&rig.node(1), keys::DIRTY_PAGES), "0");
    assert_eq!(stat_value(&rig.node(1), keys::PAGES_WRITTEN_BACK), "20");
    // The answers' versions followed one another: node 1 kept its pages
    // (a version it could not explain would have dropped them).
    assert_eq!(stat_value(&rig.node(1), keys::RESIDENT_PRIVATE), "40");
    assert!(read_file(&mut rig.node(2), "/s") == want);
    assert!(disk_bytes(&rig, "/s") == want);
}

/// One write larger than the whole cache, extending a new file: the
/// pages its own later pages push out under pressure reach the file
/// server with their bytes. (A write-back sends a page only up to the
/// file's size, which grew only at the end of the write: the first pages
/// went out empty and were dropped clean, so their bytes were lost; the
/// random task-read test with a 6-page cache found it.)
#[test]
fn one_write_larger_than_the_cache_loses_nothing() {
    for mode in BUFFERED {
        eprintln!("mode {mode:?}");
        let rig = private_rig(mode, BaselineWrites::Back, 6);
        let data = pattern(12 * PAGE + 100, 4);
        let fd = rig.node(1).open("/big", create()).unwrap();
        assert_eq!(rig.node(1).write(fd, &data), Ok(data.len()));
        rig.node(1).close(fd).unwrap();
        assert!(read_file(&mut rig.node(2), "/big") == data, "{mode:?}");
        assert!(disk_bytes(&rig, "/big") == data, "{mode:?}");
    }
}
