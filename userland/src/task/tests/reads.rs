//! Started I/Os ([`crate::os::Os::io_start`]): each task's read runs as
//! soon as its own pages are in, not when the slowest of its flush is.

use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::RefCell;
use core::future::{poll_fn, Future};
use core::pin::Pin;
use core::task::Poll;

use super::super::Tasks;
use crate::mock::MockOs;
use crate::os::traits::*;
use crate::os::{Errno, Fd, OpenFlags};

const PAGE: u64 = 4096;

/// A mock with `/f` of 32 pages (page `i` filled with byte `i`) whose
/// reads at `delays` (page, rounds) wait for their pages.
fn mock(delays: &[(u64, u32)]) -> (MockOs, Fd) {
    let mut os = MockOs::new();
    os.can_seek = true;
    let data: Vec<u8> = (0..32u8).flat_map(|i| vec![i; 4096]).collect();
    os.put("/f", &data);
    let fd = os.open("/f", OpenFlags::default()).unwrap();
    os.io_start.on = true;
    for &(page, rounds) in delays {
        os.io_start.delay.insert(page * PAGE, rounds);
    }
    (os, fd)
}

#[test]
fn a_task_runs_as_soon_as_its_own_pages_are_in() {
    // Task 0's one read waits 50 rounds; task 1 reads four pages that
    // each come in after one round.
    let (mut os, fd) = mock(&[(20, 50), (0, 1), (1, 1), (2, 1), (3, 1)]);
    let order: RefCell<Vec<(usize, u64)>> = RefCell::new(Vec::new());
    let ex = Tasks::new(&mut os);
    let out = ex
        .run_n(2, |id| {
            let (ex, order) = (&ex, &order);
            async move {
                let pages: Vec<u64> = if id == 0 { vec![20] } else { vec![0, 1, 2, 3] };
                let mut got = Vec::new();
                for p in pages {
                    let done = ex.pread(fd, p * PAGE, vec![0u8; 4096]).await;
                    assert_eq!(done.result, Ok(4096));
                    order.borrow_mut().push((id, p));
                    got.push(done.buf[0]);
                }
                got
            }
        })
        .unwrap();
    assert_eq!(
        out,
        vec![vec![20], vec![0, 1, 2, 3]],
        "the bytes of each page"
    );
    assert_eq!(
        *order.borrow(),
        vec![(1, 0), (1, 1), (1, 2), (1, 3), (0, 20)],
        "task 1 did not wait for task 0's slow page"
    );
    // Depth: the slow read stayed in flight under task 1's flushes.
    let s = ex.stats();
    assert_eq!(s.max, 2, "{s:?}");
    assert_eq!(s.flushes, 4, "{s:?}");
    drop(ex);
    assert_eq!(os.io_start.open_tickets(), 0);
}

#[test]
fn ios_that_wait_for_nothing_run_in_the_flush() {
    // Page 5 is here (no delay): its read runs in the flush that starts
    // page 6's, in one io_batch of its own.
    let (mut os, fd) = mock(&[(6, 3)]);
    let ex = Tasks::new(&mut os);
    let out = ex
        .run_n(2, |id| {
            let ex = &ex;
            async move {
                let done = ex.pread(fd, (5 + id as u64) * PAGE, vec![0u8; 4096]).await;
                (done.result, done.buf[0])
            }
        })
        .unwrap();
    assert_eq!(out, vec![(Ok(4096), 5), (Ok(4096), 6)]);
    drop(ex);
    assert_eq!(os.batches, vec![1, 1], "one io_batch each, when ready");
}

#[test]
fn a_failed_fetch_fails_only_its_own_io() {
    let (mut os, fd) = mock(&[(1, 2), (2, 2)]);
    os.io_start.fail.insert(PAGE, Errno::Io);
    let ex = Tasks::new(&mut os);
    let out = ex
        .run_n(2, |id| {
            let ex = &ex;
            async move {
                let done = ex.pread(fd, (1 + id as u64) * PAGE, vec![0u8; 4096]).await;
                done.result
            }
        })
        .unwrap();
    assert_eq!(out, vec![Err(Errno::Io), Ok(4096)]);
    drop(ex);
    assert_eq!(os.batches, vec![1], "the failed I/O never ran");
}

#[test]
fn writes_and_unsupported_oses_run_in_the_flush() {
    // Writes never wait in io_start; an OS without io_start gets every
    // flush as one io_batch, as before.
    for on in [true, false] {
        let (mut os, fd) = mock(&[(0, 4)]);
        os.io_start.on = on;
        let ex = Tasks::new(&mut os);
        let out = ex
            .run_n(2, |id| {
                let ex = &ex;
                async move {
                    let done = ex.pwrite(fd, id as u64 * PAGE, vec![0xAB; 100]).await;
                    done.result
                }
            })
            .unwrap();
        assert_eq!(out, vec![Ok(100), Ok(100)], "on={on}");
        drop(ex);
        assert_eq!(os.batches, vec![2], "on={on}");
        assert!(os.io_start.events.is_empty(), "on={on}");
    }
}

#[test]
fn a_dropped_started_io_is_cancelled() {
    // The task polls a slow read once (it is queued, then started by the
    // flush that also starts its second read), then drops it once the
    // second read is in: the OS forgets the first one's ticket.
    let (mut os, fd) = mock(&[(9, 1000), (4, 2)]);
    let ex = Tasks::new(&mut os);
    let out = ex
        .run_n(1, |_| {
            let ex = &ex;
            async move {
                let mut slow = ex.pread(fd, 9 * PAGE, vec![0u8; 4096]);
                poll_fn(|cx| {
                    let _ = Pin::new(&mut slow).poll(cx);
                    Poll::Ready(())
                })
                .await;
                let done = ex.pread(fd, 4 * PAGE, vec![0u8; 4096]).await;
                drop(slow);
                done.buf[0]
            }
        })
        .unwrap();
    assert_eq!(out, vec![4]);
    drop(ex);
    let ev: Vec<String> = os.io_start.events.clone();
    assert_eq!(
        ev,
        vec![
            "start 36864 -> 1",
            "start 16384 -> 2",
            "ready 2",
            "cancel 1"
        ]
    );
    assert_eq!(os.io_start.open_tickets(), 0);
}

#[test]
fn a_mapped_load_runs_as_soon_as_its_own_pages_are_in() {
    // As the first test, through the mapping: task 0's load waits 50
    // rounds, task 1's four loads one round each; a task mixing a
    // positioned read and a load gets both.
    let (mut os, fd) = mock(&[(20, 50), (0, 1), (1, 1), (2, 1), (3, 1), (7, 2)]);
    os.can_mmap = true;
    os.io_start.maps = true;
    let order: RefCell<Vec<(usize, u64)>> = RefCell::new(Vec::new());
    let ex = Tasks::new(&mut os);
    let out = ex
        .run_n(3, |id| {
            let (ex, order) = (&ex, &order);
            async move {
                if id == 2 {
                    let a = ex.pread(fd, 7 * PAGE, vec![0u8; 4096]).await;
                    let b = ex.mmap_read("/f", 8 * PAGE, vec![0u8; 4096]).await;
                    return vec![a.buf[0], b.buf[0]];
                }
                let pages: Vec<u64> = if id == 0 { vec![20] } else { vec![0, 1, 2, 3] };
                let mut got = Vec::new();
                for p in pages {
                    let done = ex.mmap_read("/f", p * PAGE, vec![0u8; 4096]).await;
                    assert_eq!(done.result, Ok(4096));
                    order.borrow_mut().push((id, p));
                    got.push(done.buf[0]);
                }
                got
            }
        })
        .unwrap();
    assert_eq!(out, vec![vec![20], vec![0, 1, 2, 3], vec![7, 8]]);
    assert_eq!(
        *order.borrow(),
        vec![(1, 0), (1, 1), (1, 2), (1, 3), (0, 20)],
        "task 1 did not wait for task 0's slow page"
    );
    drop(ex);
    assert_eq!(os.io_start.open_tickets(), 0);
    assert!(
        os.io_start
            .events
            .iter()
            .any(|e| e.starts_with("start 81920 -> ")),
        "the slow load was started: {:?}",
        os.io_start.events
    );
}

#[test]
fn mapped_ios_without_mmap_start_run_in_one_batch() {
    // An OS without mmap_start (but with io_start): every flush of
    // mapped I/Os is one mmap_batch, which waits for all of them.
    let (mut os, _fd) = mock(&[(20, 50), (0, 1)]);
    os.can_mmap = true;
    let ex = Tasks::new(&mut os);
    let out = ex
        .run_n(2, |id| {
            let ex = &ex;
            async move {
                let p = if id == 0 { 20 } else { 0 };
                ex.mmap_read("/f", p * PAGE, vec![0u8; 4096]).await.buf[0]
            }
        })
        .unwrap();
    assert_eq!(out, vec![20, 0]);
    drop(ex);
    assert_eq!(os.batches, vec![2], "one mmap_batch of both");
    assert!(os.io_start.events.is_empty(), "{:?}", os.io_start.events);
}
