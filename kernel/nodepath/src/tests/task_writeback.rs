//! Tasks' write-backs in flight (`private` mode on the rings, `net` mode
//! over the rig's loopback connection): a task's fsync or close sends its
//! file's dirty pages and yields; several are in flight together; a page
//! written meanwhile stays dirty; a synchronous write-back waits for the
//! ones in flight (`private/inflight.rs`). Each test runs in both modes.

use fabric::config::Mode;
use fabric::proto::Errno;
use osapi::io::Fd;
use osapi::keys::cache as keys;
use osapi::meta::{MetaCall, MetaDone, MetaStart, MetaTicket};

use crate::node::Node;
use crate::rig::{HostEnv, Rig, RigConfig};
use crate::tests::meta::{finish, pending};
use crate::tests::{create, pattern, read_file, stat_value};

/// The modes with these write-backs.
const MODES: [Mode; 2] = [Mode::Private, Mode::Net];

/// `path` created on `n`, open, with `data` written (dirty, not written
/// back).
pub(crate) fn dirty_file(n: &mut Node<HostEnv>, path: &str, data: &[u8]) -> Fd {
    let fd = n.open(path, create()).unwrap();
    assert_eq!(n.write(fd, data), Ok(data.len()));
    fd
}

#[test]
fn fsyncs_of_several_files_are_in_flight_together() {
    for mode in MODES {
        eprintln!("mode {mode:?}");
        fsyncs_of_several_files_are_in_flight_together_in(mode);
    }
}

fn fsyncs_of_several_files_are_in_flight_together_in(mode: Mode) {
    let rig = Rig::new(RigConfig::new(2, mode));
    let mut n = rig.node(1);
    let files: Vec<(String, Vec<u8>)> = (0..3u8)
        .map(|k| (format!("/w{k}"), pattern(2 * 4096 + 100, k + 1)))
        .collect();
    let fds: Vec<Fd> = files
        .iter()
        .map(|(p, d)| dirty_file(&mut n, p, d))
        .collect();
    assert_eq!(stat_value(&n, keys::DIRTY_PAGES), "9");
    // Every fsync goes out before any is answered.
    let tickets: Vec<MetaTicket> = fds
        .iter()
        .map(|&fd| pending(&mut n, MetaCall::Fsync { fd }))
        .collect();
    assert_eq!(stat_value(&n, keys::TASK_WRITE_BACKS), "3/3");
    for t in tickets {
        assert_eq!(finish(&mut n, t), Ok(MetaDone::Ok));
    }
    assert_eq!(stat_value(&n, keys::DIRTY_PAGES), "0");
    for fd in fds {
        n.close(fd).unwrap();
    }
    drop(n);
    let mut n2 = rig.node(2);
    for (p, d) in &files {
        assert_eq!(&read_file(&mut n2, p), d, "{p}");
    }
}

#[test]
fn a_close_writes_back_in_flight_and_its_descriptor_is_gone_at_once() {
    for mode in MODES {
        eprintln!("mode {mode:?}");
        a_close_writes_back_in_flight_and_its_descriptor_is_gone_at_once_in(mode);
    }
}

fn a_close_writes_back_in_flight_and_its_descriptor_is_gone_at_once_in(mode: Mode) {
    let rig = Rig::new(RigConfig::new(2, mode));
    let mut n = rig.node(1);
    let data = pattern(3 * 4096, 7);
    let fd = dirty_file(&mut n, "/c", &data);
    let t = pending(&mut n, MetaCall::Close { fd });
    assert_eq!(n.fd_info(fd), Err(Errno::BadFd));
    assert_eq!(finish(&mut n, t), Ok(MetaDone::Ok));
    assert_eq!(stat_value(&n, keys::DIRTY_PAGES), "0");
    drop(n);
    assert_eq!(read_file(&mut rig.node(2), "/c"), data);
}

/// A page written after its write-back took its bytes stays dirty when
/// that write-back is answered: the next fsync sends the new bytes.
#[test]
fn a_page_written_while_its_write_back_is_in_flight_stays_dirty() {
    for mode in MODES {
        eprintln!("mode {mode:?}");
        a_page_written_while_its_write_back_is_in_flight_stays_dirty_in(mode);
    }
}

fn a_page_written_while_its_write_back_is_in_flight_stays_dirty_in(mode: Mode) {
    let rig = Rig::new(RigConfig::new(2, mode));
    let mut n = rig.node(1);
    let old = pattern(2 * 4096, 3);
    let fd = dirty_file(&mut n, "/p", &old);
    let t = pending(&mut n, MetaCall::Fsync { fd });
    let new = pattern(4096, 4);
    n.seek(fd, 4096).unwrap();
    assert_eq!(n.write(fd, &new), Ok(4096));
    assert_eq!(finish(&mut n, t), Ok(MetaDone::Ok));
    // Page 0 went clean, page 1 (written again) did not.
    assert_eq!(stat_value(&n, keys::DIRTY_PAGES), "1");
    assert_eq!(read_file(&mut rig.node(2), "/p"), old, "the fsync'd bytes");
    let t = pending(&mut n, MetaCall::Fsync { fd });
    assert_eq!(finish(&mut n, t), Ok(MetaDone::Ok));
    assert_eq!(stat_value(&n, keys::DIRTY_PAGES), "0");
    let mut want = old[..4096].to_vec();
    want.extend_from_slice(&new);
    assert_eq!(read_file(&mut rig.node(2), "/p"), want, "the new bytes");
}

/// A synchronous write-back (here an fsync outside the tasks) first waits
/// for the ones in flight, which hold the write slot and must land first;
/// their task then finds its write-back done.
#[test]
fn a_synchronous_write_back_waits_for_the_ones_in_flight() {
    for mode in MODES {
        eprintln!("mode {mode:?}");
        a_synchronous_write_back_waits_for_the_ones_in_flight_in(mode);
    }
}

fn a_synchronous_write_back_waits_for_the_ones_in_flight_in(mode: Mode) {
    let rig = Rig::new(RigConfig::new(2, mode));
    let mut n = rig.node(1);
    let a = pattern(4 * 4096, 5);
    let b = pattern(2 * 4096 + 10, 6);
    let fa = dirty_file(&mut n, "/a", &a);
    let fb = dirty_file(&mut n, "/b", &b);
    let t = pending(&mut n, MetaCall::Fsync { fd: fa });
    n.fsync(fb).unwrap();
    assert_eq!(stat_value(&n, keys::DIRTY_PAGES), "0", "both written back");
    assert_eq!(finish(&mut n, t), Ok(MetaDone::Ok));
    drop(n);
    let mut n2 = rig.node(2);
    assert_eq!(read_file(&mut n2, "/a"), a);
    assert_eq!(read_file(&mut n2, "/b"), b);
}

/// More dirty data than the write slot holds (40 pages, 64 KiB slot) is
/// in flight too, a slot at a time; nothing dirty needs no job.
#[test]
fn a_write_back_larger_than_the_slot_goes_out_a_slot_at_a_time() {
    for mode in MODES {
        eprintln!("mode {mode:?}");
        a_write_back_larger_than_the_slot_goes_out_a_slot_at_a_time_in(mode);
    }
}

fn a_write_back_larger_than_the_slot_goes_out_a_slot_at_a_time_in(mode: Mode) {
    let rig = Rig::new(RigConfig::new(2, mode));
    let mut n = rig.node(1);
    let big = pattern(40 * 4096, 8);
    let fd = dirty_file(&mut n, "/big", &big);
    let small = pattern(4096, 1);
    let fs = dirty_file(&mut n, "/small", &small);
    let t = pending(&mut n, MetaCall::Fsync { fd });
    // Started behind the big one: its write waits for room in the slot.
    let t2 = pending(&mut n, MetaCall::Fsync { fd: fs });
    assert_eq!(stat_value(&n, keys::TASK_WRITE_BACKS), "2/2");
    assert_eq!(
        stat_value(&n, keys::DIRTY_PAGES),
        "41",
        "dirty until answered"
    );
    assert_eq!(finish(&mut n, t2), Ok(MetaDone::Ok));
    assert_eq!(finish(&mut n, t), Ok(MetaDone::Ok));
    assert_eq!(stat_value(&n, keys::DIRTY_PAGES), "0");
    // Nothing dirty: done at once, no job.
    assert!(matches!(
        n.meta_start(MetaCall::Close { fd }),
        MetaStart::Done(Ok(MetaDone::Ok))
    ));
    assert_eq!(stat_value(&n, keys::TASK_WRITE_BACKS), "2/2");
    n.close(fs).unwrap();
    drop(n);
    let mut n2 = rig.node(2);
    assert_eq!(read_file(&mut n2, "/big"), big);
    assert_eq!(read_file(&mut n2, "/small"), small);
}

/// A truncate of a file with dirty pages writes them back in flight, then
/// takes its own steps: the other node sees the bytes below the new end
/// and the new size.
#[test]
fn a_truncate_writes_back_in_flight_then_cuts_the_file() {
    for mode in MODES {
        eprintln!("mode {mode:?}");
        a_truncate_writes_back_in_flight_then_cuts_the_file_in(mode);
    }
}

fn a_truncate_writes_back_in_flight_then_cuts_the_file_in(mode: Mode) {
    let rig = Rig::new(RigConfig::new(2, mode));
    let mut n = rig.node(1);
    let data = pattern(3 * 4096, 2);
    let fd = dirty_file(&mut n, "/t", &data);
    let t = pending(&mut n, MetaCall::Truncate { fd, size: 5000 });
    assert_eq!(stat_value(&n, keys::TASK_WRITE_BACKS), "1/1");
    assert_eq!(finish(&mut n, t), Ok(MetaDone::Ok));
    assert_eq!(stat_value(&n, keys::DIRTY_PAGES), "0");
    assert_eq!(n.fd_info(fd).map(|i| i.1), Ok(5000), "size seen here");
    n.close(fd).unwrap();
    drop(n);
    assert_eq!(read_file(&mut rig.node(2), "/t"), data[..5000]);
}

/// A write-back in flight that gets no answer (the directory hangs) fails
/// its fsync with `Unavailable` and leaves the pages dirty; once the
/// directory is back, the next fsync writes them.
#[test]
fn an_unanswered_write_back_leaves_its_pages_dirty() {
    for mode in MODES {
        eprintln!("mode {mode:?}");
        an_unanswered_write_back_leaves_its_pages_dirty_in(mode);
    }
}

fn an_unanswered_write_back_leaves_its_pages_dirty_in(mode: Mode) {
    let mut cfg = RigConfig::new(2, mode);
    cfg.rpc_timeout_ns = 1_000_000;
    let rig = Rig::new(cfg);
    let mut n = rig.node(1);
    let data = pattern(2 * 4096, 9);
    let fd = dirty_file(&mut n, "/u", &data);
    rig.set_dir_up(false);
    let t = pending(&mut n, MetaCall::Fsync { fd });
    assert_eq!(finish(&mut n, t), Err(Errno::Unavailable));
    assert_eq!(stat_value(&n, keys::DIRTY_PAGES), "2", "still dirty");
    rig.set_dir_up(true);
    let t = pending(&mut n, MetaCall::Fsync { fd });
    assert_eq!(finish(&mut n, t), Ok(MetaDone::Ok));
    assert_eq!(stat_value(&n, keys::DIRTY_PAGES), "0");
    drop(n);
    assert_eq!(read_file(&mut rig.node(2), "/u"), data);
}

/// Random interleavings (seeded, replayable): buffered writes at any
/// offset, tasks' fsyncs, closes (then a reopen) and truncates started
/// and polled in any order, synchronous fsyncs meanwhile. Every call
/// succeeds, and at the end nothing is dirty and the file server holds
/// exactly what node 1 wrote.
#[test]
fn random_interleavings_of_writes_and_fsyncs_in_flight_lose_nothing() {
    for mode in MODES {
        eprintln!("mode {mode:?}");
        random_interleavings_of_writes_and_fsyncs_in_flight_lose_nothing_in(mode);
    }
}

fn random_interleavings_of_writes_and_fsyncs_in_flight_lose_nothing_in(mode: Mode) {
    use fabric::rng::SplitMix64;
    const FILES: usize = 3;
    for seed in 1..=40u64 {
        let rig = Rig::new(RigConfig::new(2, mode));
        let mut n = rig.node(1);
        let mut rng = SplitMix64::new(seed);
        let mut want: Vec<Vec<u8>> = vec![Vec::new(); FILES];
        let mut fds: Vec<Fd> = (0..FILES)
            .map(|k| n.open(&format!("/r{k}"), create()).unwrap())
            .collect();
        let mut tickets: Vec<MetaTicket> = Vec::new();
        for step in 0..80 {
            let f = rng.below(FILES as u64) as usize;
            match rng.below(12) {
                0..=4 => {
                    let at = rng.below(24 * 4096) as usize;
                    let len = 1 + rng.below(6 * 4096) as usize;
                    let data = pattern(len, (seed as u8) ^ (step as u8));
                    n.seek(fds[f], at as u64).unwrap();
                    assert_eq!(n.write(fds[f], &data), Ok(len), "seed {seed} step {step}");
                    let w = &mut want[f];
                    if w.len() < at + len {
                        w.resize(at + len, 0);
                    }
                    w[at..at + len].copy_from_slice(&data);
                }
                5 | 6 => tickets.push(pending(&mut n, MetaCall::Fsync { fd: fds[f] })),
                7 if !tickets.is_empty() => {
                    let t = tickets.remove(rng.below(tickets.len() as u64) as usize);
                    assert_eq!(
                        finish(&mut n, t),
                        Ok(MetaDone::Ok),
                        "seed {seed} step {step}"
                    );
                }
                8 => n.meta_wait(),
                9 => assert_eq!(n.fsync(fds[f]), Ok(()), "seed {seed} step {step}"),
                10 => {
                    // A task's close (in flight if the file has dirty
                    // pages), then the file is open again.
                    match n.meta_start(MetaCall::Close { fd: fds[f] }) {
                        MetaStart::Pending(t) => tickets.push(t),
                        MetaStart::Done(r) => assert_eq!(r, Ok(MetaDone::Ok), "seed {seed}"),
                    }
                    let flags = osapi::io::OpenFlags::default();
                    fds[f] = n.open(&format!("/r{f}"), flags).unwrap();
                }
                _ => {
                    let size = rng.below(30 * 4096);
                    let r = pending_or_done(&mut n, MetaCall::Truncate { fd: fds[f], size });
                    assert_eq!(r, Ok(MetaDone::Ok), "seed {seed} step {step}");
                    want[f].resize(size as usize, 0);
                }
            }
        }
        for t in tickets {
            assert_eq!(finish(&mut n, t), Ok(MetaDone::Ok), "seed {seed}");
        }
        for &fd in &fds {
            let t = pending_or_done(&mut n, MetaCall::Fsync { fd });
            assert_eq!(t, Ok(MetaDone::Ok), "seed {seed}");
        }
        assert_eq!(stat_value(&n, keys::DIRTY_PAGES), "0", "seed {seed}");
        for fd in fds {
            n.close(fd).unwrap();
        }
        drop(n);
        let mut n2 = rig.node(2);
        for (k, w) in want.iter().enumerate() {
            assert!(
                read_file(&mut n2, &format!("/r{k}")) == *w,
                "seed {seed}: /r{k} differs"
            );
        }
    }
}

/// Run `call` to its end, whether it goes in flight or not.
fn pending_or_done(n: &mut Node<HostEnv>, call: MetaCall) -> Result<MetaDone, Errno> {
    match n.meta_start(call) {
        MetaStart::Pending(t) => finish(n, t),
        MetaStart::Done(r) => r,
    }
}

/// A task's write to pages not cached here, with the cache full of dirty
/// pages, waits for room made in flight (`private/room.rs`): its flush
/// starts the write-back of the oldest dirty pages and gives the write a
/// ticket; a second such write waits for the same job; once it is in,
/// the pages are clean and the write itself writes nothing back (it drops
/// clean pages). The bytes all reach the file server.
#[test]
fn a_write_that_needs_room_waits_for_a_write_back_in_flight() {
    for mode in MODES {
        eprintln!("mode {mode:?}");
        a_write_that_needs_room_waits_for_a_write_back_in_flight_in(mode);
    }
}

fn a_write_that_needs_room_waits_for_a_write_back_in_flight_in(mode: Mode) {
    use osapi::io::IoSpan;
    let mut cfg = RigConfig::new(2, mode);
    cfg.cache_pages = 16;
    let rig = Rig::new(cfg);
    let mut n = rig.node(1);
    let mut want = pattern(18 * 4096, 5);
    let fd = dirty_file(&mut n, "/r", &want[..16 * 4096]);
    assert_eq!(stat_value(&n, keys::DIRTY_PAGES), "16", "the cache is full");
    let span = |page: u64| IoSpan {
        fd,
        offset: page * 4096,
        len: 4096,
        write: true,
    };
    // A write to a cached page needs no room.
    assert_eq!(n.io_start(&[span(3)]).unwrap(), vec![None]);
    let t = n.io_start(&[span(16)]).unwrap()[0].expect("waits for room");
    let t2 = n.io_start(&[span(17)]).unwrap()[0].expect("waits for the same room");
    assert_eq!(stat_value(&n, keys::TASK_ROOM_WAITS), "2");
    assert_eq!(stat_value(&n, keys::TASK_WRITE_BACKS), "1/1", "one job");
    for t in [t, t2] {
        let mut done = None;
        for _ in 0..100_000 {
            n.io_progress();
            done = n.io_poll(t);
            if done.is_some() {
                break;
            }
            n.io_wait();
        }
        assert_eq!(done, Some(Ok(())));
    }
    assert_eq!(stat_value(&n, keys::DIRTY_PAGES), "0");
    assert_eq!(stat_value(&n, keys::PAGES_WRITTEN_BACK), "16");
    for page in [16usize, 17] {
        n.seek(fd, page as u64 * 4096).unwrap();
        let bytes = &want[page * 4096..(page + 1) * 4096];
        assert_eq!(n.write(fd, bytes), Ok(4096));
    }
    assert_eq!(
        stat_value(&n, keys::PAGES_WRITTEN_BACK),
        "16",
        "the writes made room by dropping clean pages"
    );
    n.seek(fd, 3 * 4096).unwrap();
    let page3 = pattern(4096, 77);
    assert_eq!(n.write(fd, &page3), Ok(4096));
    want[3 * 4096..4 * 4096].copy_from_slice(&page3);
    n.close(fd).unwrap();
    drop(n);
    assert_eq!(read_file(&mut rig.node(2), "/r"), want);
}
