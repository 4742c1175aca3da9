//! Readahead on every mode's read path (`vfs/ra.rs`, boot option
//! `readahead_kb`) and mmap fault-around (`faultaround_kb`): what a
//! sequential reader costs in directory round trips, that random readers
//! and `readahead_kb=0` fetch only their own pages, that a truncate and an
//! eviction cut windows, and that read-ahead pages are never stale.

use fabric::config::Mode;
use osapi::io::{Fd, IoSpan, OpenFlags};
use osapi::keys::cache as keys;

use crate::node::Node;
use crate::rig::{HostEnv, Rig, RigConfig};
use crate::tests::{pattern, stat_value, window_io, write_file};

const PAGE: u64 = 4096;
const MODES: [Mode; 4] = [Mode::Strong, Mode::Relaxed, Mode::Private, Mode::Net];

fn rig(nodes: u32, mode: Mode, readahead_kb: u32, faultaround_kb: u32) -> Rig {
    Rig::new(RigConfig {
        readahead_kb,
        faultaround_kb,
        ..RigConfig::new(nodes, mode)
    })
}

fn stat(n: &Node<HostEnv>, key: &str) -> u64 {
    stat_value(n, key).parse().unwrap()
}

/// Pages one directory round trip brings at most: a window's page
/// requests go in one batch in the single-copy modes; a file-server read
/// is at most one 64 KiB bulk slot in `private` and `net` (a 128 KiB
/// window is two reads, in flight together).
fn per_trip(mode: Mode) -> u64 {
    if mode.single_copy() {
        32
    } else {
        16
    }
}

/// Directory round trips of node 1's reads so far: page batches in the
/// single-copy modes, file-server requests served in `private` and `net`.
fn round_trips(rig: &Rig, mode: Mode) -> u64 {
    if mode.single_copy() {
        stat(&rig.node(1), keys::PAGE_BATCHES)
    } else {
        rig.sh.dir.borrow().stats().requests
    }
}

/// `/f` of `pages` pages written by node `k`, on the disk only (the
/// writer dropped its cache), open on node 1.
fn cold_file(rig: &Rig, k: u32, pages: u64) -> (Vec<u8>, Fd) {
    let data = pattern((pages * PAGE) as usize, 5);
    write_file(&mut rig.node(k), "/f", &data);
    rig.node(k).sync().unwrap();
    rig.node(k).cache_drop().unwrap();
    let fd = rig.node(1).open("/f", OpenFlags::default()).unwrap();
    (data, fd)
}

/// Read `len` bytes at `at` of `fd` on node 1.
fn read_at(rig: &Rig, fd: Fd, at: u64, len: usize) -> Vec<u8> {
    let mut n = rig.node(1);
    n.seek(fd, at).unwrap();
    let mut buf = vec![0u8; len];
    let k = n.read(fd, &mut buf).unwrap();
    buf.truncate(k);
    buf
}

/// Read the whole file page by page in order; the round trips it took.
fn read_sequentially(rig: &Rig, mode: Mode, fd: Fd, data: &[u8]) -> u64 {
    let before = round_trips(rig, mode);
    for (i, want) in data.chunks(PAGE as usize).enumerate() {
        let got = read_at(rig, fd, i as u64 * PAGE, PAGE as usize);
        assert!(got == want, "{mode:?}: page {i} differs");
    }
    round_trips(rig, mode) - before
}

#[test]
fn a_sequential_read_costs_about_one_round_trip_per_window() {
    const PAGES: u64 = 256;
    for mode in MODES {
        // Off: one round trip per page read, nothing read ahead.
        let r = rig(1, mode, 0, 0);
        let (data, fd) = cold_file(&r, 1, PAGES);
        let off = read_sequentially(&r, mode, fd, &data);
        assert!(
            off >= PAGES,
            "{mode:?}: {off} round trips without readahead"
        );
        assert_eq!(stat(&r.node(1), keys::READAHEAD_PAGES), 0, "{mode:?}");
        drop(r);
        // 128 KiB windows (32 pages): 4, 16, then 32 pages at a time.
        let r = rig(1, mode, 128, 0);
        let (data, fd) = cold_file(&r, 1, PAGES);
        let on = read_sequentially(&r, mode, fd, &data);
        let n = r.node(1);
        let ahead = stat(&n, keys::READAHEAD_PAGES);
        assert!(
            on <= PAGES / per_trip(mode) + 4,
            "{mode:?}: {on} round trips for {PAGES} pages with 32-page windows"
        );
        assert_eq!(ahead, PAGES - 1, "{mode:?}: every page but the first");
        assert_eq!(stat(&n, keys::READAHEAD_HITS), ahead, "{mode:?}");
        assert_eq!(stat(&n, keys::READAHEAD_WASTED), 0, "{mode:?}");
    }
}

#[test]
fn random_reads_do_not_read_ahead() {
    const PAGES: u64 = 256;
    for mode in MODES {
        let r = rig(1, mode, 128, 0);
        let (data, fd) = cold_file(&r, 1, PAGES);
        let before = round_trips(&r, mode);
        // A stride of 97 pages: no read continues the one before it.
        let reads = 64;
        for i in 1..=reads {
            let p = (i * 97) % PAGES;
            let got = read_at(&r, fd, p * PAGE, PAGE as usize);
            let at = (p * PAGE) as usize;
            assert!(got == data[at..at + PAGE as usize], "{mode:?}: page {p}");
        }
        assert_eq!(stat(&r.node(1), keys::READAHEAD_PAGES), 0, "{mode:?}");
        assert!(round_trips(&r, mode) - before >= reads, "{mode:?}");
    }
}

#[test]
fn tasks_reads_and_batches_read_ahead_too() {
    const PAGES: u64 = 128;
    for mode in MODES {
        let r = rig(1, mode, 128, 0);
        let (data, fd) = cold_file(&r, 1, PAGES);
        let before = round_trips(&r, mode);
        for i in 0..PAGES {
            let span = IoSpan {
                fd,
                offset: i * PAGE,
                len: PAGE as usize,
                write: false,
            };
            let started = r.node(1).io_start(&[span]);
            match started {
                Ok(t) => {
                    if let Some(t) = t[0] {
                        let mut n = r.node(1);
                        let mut done = None;
                        for _ in 0..100_000 {
                            n.io_progress();
                            if let Some(res) = n.io_poll(t) {
                                done = Some(res);
                                break;
                            }
                            n.io_wait();
                        }
                        done.expect("ticket finishes").unwrap();
                    }
                }
                // `net` runs a flush as one batch.
                Err(fabric::proto::Errno::NotSupported) => {
                    let mut buf = vec![0u8; PAGE as usize];
                    let ios = [osapi::io::BatchIo {
                        fd,
                        offset: i * PAGE,
                        buf: &mut buf,
                        write: false,
                        done: Ok(0),
                    }];
                    r.node(1).prepare_batch(&ios).unwrap();
                }
                Err(e) => panic!("{mode:?}: {e}"),
            }
            let at = (i * PAGE) as usize;
            let got = read_at(&r, fd, i * PAGE, PAGE as usize);
            assert!(got == data[at..at + PAGE as usize], "{mode:?}: page {i}");
        }
        let trips = round_trips(&r, mode) - before;
        let n = r.node(1);
        assert!(
            trips <= PAGES / per_trip(mode) + 4,
            "{mode:?}: {trips} round trips"
        );
        assert_eq!(stat(&n, keys::READAHEAD_PAGES), PAGES - 1, "{mode:?}");
        assert_eq!(stat(&n, keys::READAHEAD_HITS), PAGES - 1, "{mode:?}");
    }
}

#[test]
fn a_truncate_cuts_the_window() {
    for mode in MODES {
        let r = rig(1, mode, 128, 0);
        let (data, fd) = cold_file(&r, 1, 64);
        // Page 0: a window of 4 (marker 1); page 1: the next 8 (4..12).
        assert_eq!(read_at(&r, fd, 0, 4096), data[..4096]);
        assert_eq!(read_at(&r, fd, 4096, 4096), data[4096..8192]);
        assert_eq!(stat(&r.node(1), keys::READAHEAD_PAGES), 11, "{mode:?}");
        // Down to 10 pages, through another descriptor.
        let t = r.node(1).open("/f", OpenFlags::default()).unwrap();
        r.node(1).truncate(t, 10 * PAGE).unwrap();
        r.node(1).close(t).unwrap();
        for i in 2..10 {
            let at = (i * PAGE) as usize;
            let got = read_at(&r, fd, i * PAGE, PAGE as usize);
            assert!(got == data[at..at + PAGE as usize], "{mode:?}: page {i}");
        }
        assert!(read_at(&r, fd, 10 * PAGE, 4096).is_empty(), "{mode:?}: EOF");
        r.node(1).close(fd).unwrap();
        let n = r.node(1);
        // Nothing past the new end was fetched, and the two pages the
        // truncate took (10 and 11) do not count as read ahead in vain. A
        // private cache drops its copies of a file whose version moved:
        // the first page read after it (2) was read ahead and is gone
        // (the window fetched the next ones again).
        assert_eq!(stat(&n, keys::READAHEAD_PAGES), 11, "{mode:?}");
        let wasted = if mode.single_copy() { 0 } else { 1 };
        assert_eq!(stat(&n, keys::READAHEAD_WASTED), wasted, "{mode:?}");
    }
}

#[test]
fn pages_read_ahead_and_dropped_unread_are_wasted() {
    for mode in MODES {
        let r = rig(1, mode, 128, 0);
        let (data, fd) = cold_file(&r, 1, 64);
        assert_eq!(read_at(&r, fd, 0, 4096), data[..4096]);
        assert_eq!(read_at(&r, fd, 4096, 4096), data[4096..8192]);
        let ahead = stat(&r.node(1), keys::READAHEAD_PAGES);
        assert_eq!(ahead, 11, "{mode:?}");
        r.node(1).cache_drop().unwrap();
        // Pages 2 and 3 were read ahead and are gone: wasted, and the
        // stream goes on (the data is right).
        let got = read_at(&r, fd, 2 * PAGE, 2 * PAGE as usize);
        assert!(got == data[2 * 4096..4 * 4096], "{mode:?}");
        assert_eq!(stat(&r.node(1), keys::READAHEAD_WASTED), 2, "{mode:?}");
        r.node(1).close(fd).unwrap();
        let n = r.node(1);
        let wasted = stat(&n, keys::READAHEAD_WASTED);
        let hits = stat(&n, keys::READAHEAD_HITS);
        assert!(wasted >= 2 && hits + wasted <= stat(&n, keys::READAHEAD_PAGES));
    }
}

#[test]
fn a_page_read_ahead_is_never_stale_in_strong_mode() {
    // Node 2 reads ahead of itself; node 1 then writes a page inside that
    // window: node 2's next read of it sees the write (the read-ahead page
    // came through the protocol, so the write invalidated or reached it).
    let r = rig(2, Mode::Strong, 128, 0);
    let data = pattern(64 * PAGE as usize, 3);
    write_file(&mut r.node(1), "/s", &data);
    let fd2 = r.node(2).open("/s", OpenFlags::default()).unwrap();
    let mut buf = vec![0u8; 4096];
    for i in 0..2 {
        r.node(2).seek(fd2, i * PAGE).unwrap();
        r.node(2).read(fd2, &mut buf).unwrap();
    }
    // Page 1 hit the marker: pages 4..12 came in.
    assert_eq!(stat(&r.node(2), keys::READAHEAD_PAGES), 11);
    let fd1 = r.node(1).open("/s", OpenFlags::default()).unwrap();
    r.node(1).seek(fd1, 10 * PAGE).unwrap();
    r.node(1).write(fd1, &[0xAB; 4096]).unwrap();
    r.node(2).seek(fd2, 10 * PAGE).unwrap();
    r.node(2).read(fd2, &mut buf).unwrap();
    assert_eq!(buf, vec![0xAB; 4096], "node 2 sees node 1's write");
}

#[test]
fn an_mmap_fault_maps_the_cached_pages_around_it() {
    for (kb, want) in [(64, 15), (0, 0)] {
        let r = rig(2, Mode::Strong, 0, kb);
        let data = pattern(32 * PAGE as usize, 6);
        write_file(&mut r.node(1), "/m", &data);
        // Node 2 holds every page (mappings of node 1's frames).
        let fd = r.node(2).open("/m", OpenFlags::default()).unwrap();
        let mut all = vec![0u8; data.len()];
        assert_eq!(r.node(2).read(fd, &mut all).unwrap(), data.len());
        let mut n = r.node(2);
        let mut io = window_io(&r, &n);
        let mut buf = vec![0u8; 100];
        n.mmap_io("/m", 5 * PAGE + 7, 100, false, &mut buf, &mut io)
            .unwrap();
        assert_eq!(buf, data[5 * 4096 + 7..5 * 4096 + 107]);
        // The faulting page and the 15 others of its 64 KiB block.
        assert_eq!(stat(&n, keys::FAULTAROUND_PAGES), want, "{kb} KiB");
        assert_eq!(n.link.env.mapped.borrow().len() as u64, 1 + want);
        // A load of a page around it reads through that mapping.
        let mut page = vec![0u8; 4096];
        n.mmap_io("/m", 15 * PAGE, 4096, false, &mut page, &mut io)
            .unwrap();
        assert_eq!(page, data[15 * 4096..16 * 4096]);
    }
}
