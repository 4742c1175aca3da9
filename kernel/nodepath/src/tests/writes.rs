//! Host tests of the write paths: buffered writes of the private-cache
//! modes and relaxed mode's private copies reach the disk at fsync, close,
//! sync and under pressure; a node that is dropped loses exactly its
//! unsynced writes.

use fabric::config::{BaselineWrites, Mode};
use fabric::proto::PageKey;
use osapi::io::OpenFlags;
use osapi::keys::cache as keys;

use crate::rig::{Rig, RigConfig};
use crate::singlecopy::BATCH;
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
fn relaxed_full_page_writes_read_nothing() {
    let rig = Rig::new(RigConfig::new(2, Mode::Relaxed));
    write_file(&mut rig.node(2), "/f", &pattern(8 * PAGE, 6));
    let fd = rig.node(1).open("/f", OpenFlags::default()).unwrap();
    let data = pattern(4 * PAGE, 7);
    rig.node(1).write(fd, &data).unwrap();
    assert_eq!(stat_value(&rig.node(1), keys::PRIVATE_COPIES), "4");
    assert_eq!(stat_value(&rig.node(1), keys::DISK_READS_FILLS), "0");
    assert_eq!(stat_value(&rig.node(1), keys::MISSES), "0");
    rig.node(1).fsync(fd).unwrap();
    rig.node(1).close(fd).unwrap();
    let mut want = pattern(8 * PAGE, 6);
    want[..4 * PAGE].copy_from_slice(&data);
    assert_eq!(read_file(&mut rig.node(2), "/f"), want);
    assert_eq!(disk_bytes(&rig, "/f"), want);
}

#[test]
fn relaxed_private_copies_go_back_in_batches_at_the_bound() {
    let mut cfg = RigConfig::new(2, Mode::Relaxed);
    cfg.cache_pages = 40;
    let rig = Rig::new(cfg);
    let data = pattern(100 * PAGE, 8);
    write_file(&mut rig.node(2), "/f", &vec![0u8; data.len()]);
    let fd = rig.node(1).open("/f", OpenFlags::default()).unwrap();
    for (i, chunk) in data.chunks(PAGE).enumerate() {
        rig.node(1).write(fd, chunk).unwrap();
        let private: usize = stat_value(&rig.node(1), keys::PRIVATE_COPIES)
            .parse()
            .unwrap();
        assert!(private < 40, "{private} private copies after page {i}");
        // Never everything at once: the newest copies stay private.
        if i >= 40 {
            assert!(private >= 40 - 32, "{private} copies after page {i}");
        }
    }
    // The oldest went back first: node 2 reads them from the disk.
    let mut head = vec![0u8; 32 * PAGE];
    let f2 = rig.node(2).open("/f", OpenFlags::default()).unwrap();
    assert_eq!(rig.node(2).read(f2, &mut head).unwrap(), head.len());
    assert_eq!(head, data[..32 * PAGE]);
    rig.node(2).close(f2).unwrap();
    rig.node(1).close(fd).unwrap();
    assert!(read_file(&mut rig.node(2), "/f") == data);
    assert!(disk_bytes(&rig, "/f") == data);
}

/// Relaxed: a close that writes back many private copies stages (copies
/// out of them for the file-server writes) a write slot's worth at a
/// time, not all of them: staged at once, a write-back of the most copies
/// a node may hold doubled the heap they take and ran a node's kernel
/// heap out.
#[test]
fn relaxed_write_back_stages_a_slot_at_a_time() {
    let mut cfg = RigConfig::new(2, Mode::Relaxed);
    cfg.cache_pages = 400;
    let rig = Rig::new(cfg);
    let data = pattern(300 * PAGE - 100, 11);
    let fd = rig.node(1).open("/f", create()).unwrap();
    for chunk in data.chunks(3000) {
        assert_eq!(rig.node(1).write(fd, chunk).unwrap(), chunk.len());
    }
    assert_eq!(stat_value(&rig.node(1), keys::PRIVATE_COPIES), "300");
    rig.node(1).close(fd).unwrap();
    assert_eq!(stat_value(&rig.node(1), keys::PRIVATE_COPIES), "0");
    let staged: usize = stat_value(&rig.node(1), keys::PRIVATE_STAGED)
        .parse()
        .unwrap();
    let slot_kib = fabric::layout::DEFAULT_BULK_SLOT_BYTES as usize >> 10;
    assert!(
        staged > 0 && staged <= slot_kib,
        "{staged} KiB staged at once (a slot holds {slot_kib} KiB)"
    );
    assert!(read_file(&mut rig.node(2), "/f") == data);
    assert!(disk_bytes(&rig, "/f") == data);
}

#[test]
fn a_dropped_relaxed_node_loses_exactly_its_unsynced_copies() {
    let rig = Rig::new(RigConfig::new(2, Mode::Relaxed));
    let old = pattern(2 * PAGE, 9);
    write_file(&mut rig.node(2), "/f", &old);
    assert_eq!(read_file(&mut rig.node(2), "/f"), old); // node 2 owns it
    let fd = rig.node(1).open("/f", OpenFlags::default()).unwrap();
    rig.node(1).write(fd, &[0xAA; PAGE]).unwrap();
    rig.node(1).fsync(fd).unwrap();
    rig.node(1).write(fd, &[0xBB; PAGE]).unwrap(); // never synced
    rig.freeze(1);
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

#[test]
fn relaxed_writes_over_remote_pages_never_wait_for_the_directory() {
    // Node 2 owns the file; node 1 maps its pages (CM-R), then writes
    // every page: each write makes a private copy, and the DROPs of the
    // replaced mappings go out together (one batch per BATCH writes),
    // without waiting for their answers.
    let rig = Rig::new(RigConfig::new(2, Mode::Relaxed));
    let pages = 2 * BATCH + 5;
    let old = pattern(pages * PAGE, 3);
    write_file(&mut rig.node(2), "/f", &old);
    assert_eq!(read_file(&mut rig.node(2), "/f"), old); // node 2 owns it
    let fd = rig.node(1).open("/f", OpenFlags::default()).unwrap();
    let mut buf = vec![0u8; old.len()];
    assert_eq!(rig.node(1).read(fd, &mut buf).unwrap(), old.len());
    assert!(buf == old);
    rig.node(1).seek(fd, 0).unwrap();
    let ino = rig.node(1).stat("/f").unwrap().ino;
    let key = |idx: usize| PageKey {
        ino,
        idx: idx as u64,
    };
    let sharers = |idx: usize| {
        rig.sh
            .dir
            .borrow()
            .pages()
            .entry(&key(idx))
            .map(|e| e.sharers)
    };
    assert_eq!(sharers(0), Some(1), "node 1 maps node 2's page");
    let new = pattern(pages * PAGE, 4);
    let before = rig.sh.dir.borrow().page_stats().page_requests;
    let passes = rig.sh.passes.get();
    for chunk in new.chunks(PAGE) {
        rig.node(1).write(fd, chunk).unwrap();
    }
    // Not one wait step (each runs a directory pass): two full batches of
    // DROPs were published without waiting for their answers.
    assert_eq!(
        rig.sh.passes.get(),
        passes,
        "a write waited for the directory"
    );
    let served = || rig.sh.dir.borrow().page_stats().page_requests - before;
    assert_eq!(served(), 0, "nothing served during {pages} writes");
    for _ in 0..8 {
        if served() >= 2 * BATCH as u64 {
            break;
        }
        rig.sh.step(0, 1_000);
    }
    // The two batches are served; the last 5 wait for the next batch.
    assert_eq!(served(), 2 * BATCH as u64, "page requests served");
    assert_eq!(sharers(0), Some(0), "the first DROPs were served");
    assert_eq!(
        sharers(pages - 1),
        Some(1),
        "the newest DROP is still deferred"
    );
    rig.node(1).fsync(fd).unwrap();
    assert_eq!(sharers(pages - 1), Some(0), "fsync sent the deferred DROPs");
    rig.node(1).close(fd).unwrap();
    assert_eq!(read_file(&mut rig.node(2), "/f"), new);
    assert_eq!(read_file(&mut rig.node(1), "/f"), new);
    assert!(disk_bytes(&rig, "/f") == new);
}

#[test]
fn a_read_miss_skips_validation_while_no_file_changed() {
    use fabric::proto::Op;
    let rig = Rig::new(RigConfig::new(2, Mode::Strong));
    let data = pattern(4 * PAGE, 5);
    write_file(&mut rig.node(2), "/f", &data);
    let getattrs = || rig.sh.dir.borrow().ops()[Op::Getattr as usize];
    let fd = rig.node(1).open("/f", OpenFlags::default()).unwrap();
    let mut page = vec![0u8; PAGE];
    // The open's lookup confirmed the version: misses are not validated
    // (no Getattr) while the metadata epoch stands still.
    let g0 = getattrs();
    assert_eq!(rig.node(1).read(fd, &mut page).unwrap(), PAGE);
    assert!(page[..] == data[..PAGE]);
    assert_eq!(getattrs() - g0, 0, "the open confirmed the version");
    assert_eq!(rig.node(1).read(fd, &mut page).unwrap(), PAGE);
    assert!(page[..] == data[PAGE..2 * PAGE]);
    assert_eq!(getattrs() - g0, 0, "no round trip while no file changed");
    // Another node shrinks the file: the next miss sees the epoch move,
    // validates, and reads at the new size.
    let f2 = rig.node(2).open("/f", OpenFlags::default()).unwrap();
    rig.node(2).truncate(f2, 3 * PAGE as u64 - 100).unwrap();
    rig.node(2).close(f2).unwrap();
    let mut rest = vec![0u8; 2 * PAGE];
    let n = rig.node(1).read(fd, &mut rest).unwrap();
    assert_eq!(n, PAGE - 100, "read clipped at the new end of file");
    assert!(rest[..n] == data[2 * PAGE..3 * PAGE - 100]);
    assert!(getattrs() - g0 >= 1, "the moved epoch was validated");
    rig.node(1).close(fd).unwrap();
}

#[test]
fn a_late_exclusive_grant_is_given_back() {
    // Node 1's full-page write times out before the directory serves its
    // LOOKUP_LOCK; the grant (E) comes later, when nobody waits for it.
    // Unreleased, every other node's request for the page would be told
    // to retry until node 1 left. Node 1's idle check gives it back.
    let mut cfg = RigConfig::new(2, Mode::Strong);
    cfg.rpc_timeout_ns = 1_000_000;
    let rig = Rig::new(cfg);
    let old = pattern(2 * PAGE, 7);
    write_file(&mut rig.node(2), "/e", &old);
    rig.node(2).cache_drop().unwrap();
    let fd = rig.node(1).open("/e", OpenFlags::default()).unwrap();
    rig.set_dir_up(false);
    assert!(rig.node(1).write(fd, &[0xEE; PAGE]).is_err(), "timed out");
    rig.set_dir_up(true);
    rig.idle(10); // the directory serves the LOOKUP_LOCK: E for node 1
    let ino = rig.node(1).stat("/e").unwrap().ino;
    let phase = || {
        rig.sh
            .dir
            .borrow()
            .pages()
            .entry(&PageKey { ino, idx: 0 })
            .map(|e| e.phase)
    };
    assert!(
        matches!(phase(), Some(dirsvc::pagedir::Phase::Exclusive { .. })),
        "{:?}",
        phase()
    );
    rig.node(1).check(); // the idle loop's membership check
    rig.idle(10);
    assert_eq!(phase(), None, "the late grant was given back");
    assert_eq!(read_file(&mut rig.node(2), "/e"), old);
    rig.node(1).close(fd).unwrap();
}

/// Strong mode: a write covering many whole pages cached nowhere asks for
/// them together (LOOKUP_LOCKs in batches of BATCH, then one batch of
/// UNLOCKs), not two round trips per page; the bytes reach every reader
/// and the disk. Pages another node owns are written into its frame.
#[test]
fn strong_full_page_writes_go_out_in_batches() {
    let rig = Rig::new(RigConfig::new(2, Mode::Strong));
    let pages = 2 * BATCH + 3;
    // Node 2 owns the first two pages; the rest are cached nowhere.
    let old = pattern(2 * PAGE, 5);
    write_file(&mut rig.node(2), "/f", &old);
    let batches =
        |n: &crate::node::Node<_>| -> u64 { stat_value(n, keys::PAGE_BATCHES).parse().unwrap() };
    let before = batches(&rig.node(1));
    // Unaligned by 100 bytes: the first and last pages are partial.
    let new = pattern(pages * PAGE, 6);
    let fd = rig.node(1).open("/f", OpenFlags::default()).unwrap();
    rig.node(1).seek(fd, 100).unwrap();
    assert_eq!(rig.node(1).write(fd, &new).unwrap(), new.len());
    let used = batches(&rig.node(1)) - before;
    // Per round of BATCH whole pages one LOOKUP_LOCK batch and one UNLOCK
    // batch (3 rounds), plus a few for the two partial pages and node 2's
    // pages; page by page it was 2 per page (134).
    assert!(used <= 12, "{used} page request batches for {pages} pages");
    rig.node(1).fsync(fd).unwrap();
    rig.node(1).close(fd).unwrap();
    let mut want = old[..100].to_vec();
    want.extend_from_slice(&new);
    assert!(read_file(&mut rig.node(2), "/f") == want);
    assert!(read_file(&mut rig.node(1), "/f") == want);
    assert!(disk_bytes(&rig, "/f") == want);
}

/// Relaxed close writes the private copies back (the next open anywhere
/// sees them, close-to-open) without asking the directory to flush the
/// disk, as `private` closes; `fsync` flushes.
#[test]
fn relaxed_close_writes_back_without_a_flush() {
    let rig = Rig::new(RigConfig::new(2, Mode::Relaxed));
    let flushes = || rig.sh.disk.borrow().flushes();
    let data = pattern(3 * PAGE, 7);
    let fd = rig.node(1).open("/f", create()).unwrap();
    rig.node(1).write(fd, &data).unwrap();
    assert_eq!(stat_value(&rig.node(1), keys::PRIVATE_COPIES), "3");
    let before = flushes();
    rig.node(1).close(fd).unwrap();
    assert_eq!(stat_value(&rig.node(1), keys::PRIVATE_COPIES), "0");
    assert_eq!(flushes(), before, "close flushed the disk");
    assert!(read_file(&mut rig.node(2), "/f") == data);
    let fd = rig.node(1).open("/f", OpenFlags::default()).unwrap();
    rig.node(1).write(fd, &pattern(PAGE, 8)).unwrap();
    rig.node(1).fsync(fd).unwrap();
    assert!(flushes() > before, "fsync flushes");
    rig.node(1).close(fd).unwrap();
    let mut want = data.clone();
    want[..PAGE].copy_from_slice(&pattern(PAGE, 8));
    assert!(disk_bytes(&rig, "/f") == want);
}

/// Relaxed: a write that lands in private copies only (whole pages, and
/// a partial page past the end of the file, which has no old bytes) asks
/// the directory nothing, not even to publish the new size: the writer
/// sees its local size, another node the old one until the close writes
/// the copies back, which publishes both the bytes and the size.
#[test]
fn relaxed_private_writes_keep_their_extension_local_until_write_back() {
    let rig = Rig::new(RigConfig::new(2, Mode::Relaxed));
    write_file(&mut rig.node(1), "/f", &pattern(PAGE, 1));
    let size_seen_by = |k: u32| rig.node(k).stat("/f").unwrap().size;
    let version_at_dir = || rig.node(2).stat("/f").unwrap().version;
    let v0 = version_at_dir();
    // One whole page and a partial one, both past the end.
    let more = pattern(PAGE + 100, 2);
    let fd = rig.node(1).open("/f", OpenFlags::default()).unwrap();
    rig.node(1).seek(fd, PAGE as u64).unwrap();
    assert_eq!(rig.node(1).write(fd, &more).unwrap(), more.len());
    assert_eq!(stat_value(&rig.node(1), keys::PRIVATE_COPIES), "2");
    assert_eq!(stat_value(&rig.node(1), keys::MISSES), "0", "no READ fill");
    assert_eq!(version_at_dir(), v0, "nothing published");
    assert_eq!(size_seen_by(1), (2 * PAGE + 100) as u64, "local size");
    assert_eq!(size_seen_by(2), PAGE as u64, "the directory's size");
    // The writer reads its own bytes at its own size.
    let mut want = pattern(PAGE, 1);
    want.extend_from_slice(&more);
    assert!(read_file(&mut rig.node(1), "/f") == want);
    rig.node(1).close(fd).unwrap();
    assert_eq!(size_seen_by(2), want.len() as u64);
    assert!(read_file(&mut rig.node(2), "/f") == want);
    assert_eq!(size_seen_by(1), want.len() as u64);
    // A truncate below the local extension wins over it.
    let fd = rig.node(1).open("/f", OpenFlags::default()).unwrap();
    rig.node(1).seek(fd, want.len() as u64).unwrap();
    rig.node(1).write(fd, &pattern(PAGE, 3)).unwrap();
    rig.node(1).truncate(fd, 10).unwrap();
    assert_eq!(size_seen_by(1), 10);
    rig.node(1).close(fd).unwrap();
    assert_eq!(size_seen_by(2), 10);
    assert!(read_file(&mut rig.node(2), "/f") == want[..10]);
    assert!(disk_bytes(&rig, "/f") == want[..10]);
}

/// Relaxed appends whose pages stay private keep a local size; the next
/// append lands after it, not at the directory's (older) end (fio's
/// layout appends in 128 KiB writes).
#[test]
fn relaxed_appends_land_after_the_local_extension() {
    let rig = Rig::new(RigConfig::new(2, Mode::Relaxed));
    let flags = OpenFlags {
        create: true,
        append: true,
        ..OpenFlags::default()
    };
    let fd = rig.node(1).open("/f", flags).unwrap();
    let data = pattern(1 << 20, 9);
    for c in data.chunks(128 << 10) {
        assert_eq!(rig.node(1).write(fd, c).unwrap(), c.len());
    }
    rig.node(1).close(fd).unwrap();
    assert!(read_file(&mut rig.node(1), "/f") == data);
    assert!(read_file(&mut rig.node(2), "/f") == data);
    assert!(disk_bytes(&rig, "/f") == data);
}

/// Relaxed: a file this node extended locally (private copies past the
/// directory's end) reads whole and right while its head comes from
/// another node's frames and the read has to validate (the metadata epoch
/// moved): the size it validates against is the one it sees, the local
/// one.
#[test]
fn relaxed_reads_with_a_local_extension_validate() {
    let rig = Rig::new(RigConfig::new(2, Mode::Relaxed));
    let head = pattern(16 * PAGE, 4);
    write_file(&mut rig.node(2), "/f", &head); // node 2 owns the head
    let flags = OpenFlags {
        append: true,
        ..OpenFlags::default()
    };
    let fd = rig.node(1).open("/f", flags).unwrap();
    let tail = pattern(32 * PAGE, 5);
    rig.node(1).write(fd, &tail).unwrap();
    let mut want = head.clone();
    want.extend_from_slice(&tail);
    // The head's pages are misses here (mapped from node 2), the tail
    // private copies past the directory's end; another file changes, so
    // the read cannot skip its validation (the metadata epoch moved).
    write_file(&mut rig.node(2), "/other", b"x");
    let fd2 = rig.node(1).open("/f", OpenFlags::default()).unwrap();
    let mut buf = vec![0u8; want.len() + 10];
    assert_eq!(rig.node(1).read(fd2, &mut buf).unwrap(), want.len());
    assert!(buf[..want.len()] == want[..]);
    rig.node(1).close(fd2).unwrap();
    rig.node(1).close(fd).unwrap();
    assert!(read_file(&mut rig.node(2), "/f") == want);
}

/// Write every other page of a 40-page file on node 1 (20 runs of one
/// page each), then `sync`: the runs go out side by side in the write
/// slot (16 pages of 64 KiB), so two groups, not 20 round trips. Returns
/// what the file should hold.
fn scattered_pages_then_sync(rig: &Rig) -> Vec<u8> {
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

#[test]
fn relaxed_write_back_sends_scattered_copies_together() {
    let rig = Rig::new(RigConfig::new(2, Mode::Relaxed));
    write_file(&mut rig.node(2), "/s", &vec![0u8; 40 * PAGE]);
    // Node 2 reads the pages into its frames, node 1 maps them: node 1's
    // writes make private copies.
    assert_eq!(read_file(&mut rig.node(2), "/s").len(), 40 * PAGE);
    assert_eq!(read_file(&mut rig.node(1), "/s").len(), 40 * PAGE);
    let want = scattered_pages_then_sync(&rig);
    assert_eq!(stat_value(&rig.node(1), keys::PRIVATE_COPIES), "0");
    assert_eq!(stat_value(&rig.node(1), keys::WRITEBACKS), "20");
    // Node 2's frames were refreshed by the directory.
    assert!(read_file(&mut rig.node(2), "/s") == want);
    assert!(disk_bytes(&rig, "/s") == want);
}

#[test]
fn a_relaxed_truncate_keeps_the_head_of_the_page_holding_the_new_end() {
    let rig = Rig::new(RigConfig::new(2, Mode::Relaxed));
    let data = pattern(4 * PAGE, 30);
    write_file(&mut rig.node(1), "/t", &data);
    assert_eq!(read_file(&mut rig.node(2), "/t"), data);
    let mut n = rig.node(1);
    let fd = n.open("/t", OpenFlags::default()).unwrap();
    // Private copies of pages 1 and 3 (node 2 owns the frames).
    n.seek(fd, PAGE as u64).unwrap();
    n.write(fd, &[0xCD; PAGE]).unwrap();
    n.seek(fd, 3 * PAGE as u64).unwrap();
    n.write(fd, &[0xEF; PAGE]).unwrap();
    assert_eq!(stat_value(&n, keys::PRIVATE_COPIES), "2");
    // Cut inside page 1: its copy's head survives, page 3's copy goes.
    n.truncate(fd, PAGE as u64 + 100).unwrap();
    assert_eq!(stat_value(&n, keys::PRIVATE_COPIES), "0");
    n.close(fd).unwrap();
    let mut want = data[..PAGE].to_vec();
    want.extend_from_slice(&[0xCD; 100]);
    assert!(read_file(&mut n, "/t") == want);
    drop(n);
    assert!(read_file(&mut rig.node(2), "/t") == want);
    assert!(disk_bytes(&rig, "/t") == want);
}

/// Relaxed mode: a write-back of private copies the directory refuses
/// for lack of space reports that error (`NoSpace`), not a generic I/O
/// error.
#[test]
fn relaxed_write_back_reports_the_directorys_error() {
    let rig = Rig::new(RigConfig::new(1, Mode::Relaxed));
    // The rig's disk holds 16 MiB; write 20 MiB of whole pages.
    let chunk = pattern(64 * PAGE, 3);
    let fd = rig.node(1).open("/big", create()).unwrap();
    let mut err = None;
    for _ in 0..80 {
        if let Err(e) = rig.node(1).write(fd, &chunk) {
            err = Some(e);
            break;
        }
    }
    let err = match err {
        Some(e) => e,
        None => rig.node(1).fsync(fd).unwrap_err(),
    };
    assert_eq!(err, fabric::proto::Errno::NoSpace);
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
