//! Host tests of relaxed mode's private copies: whole-page and remote
//! writes that ask the directory nothing, their write-back at fsync,
//! close, sync and the cache bound (staged a slot at a time, scattered
//! copies together, the directory's error reported), their local
//! extensions, and what a dropped node loses.

use fabric::config::Mode;
use fabric::proto::PageKey;
use osapi::io::OpenFlags;
use osapi::keys::cache as keys;

use crate::rig::{Rig, RigConfig};
use crate::singlecopy::BATCH;
use crate::tests::{create, disk_bytes, pattern, read_file, stat_value, write_file};

use fabric::PAGE_SIZE as PAGE;

use super::writes::scattered_pages_then_sync;

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
