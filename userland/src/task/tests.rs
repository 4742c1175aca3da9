//! The executor on the host, over the mock [`Os`] (which logs the size of
//! every `io_batch` / `mmap_batch` call).

use alloc::rc::Rc;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::RefCell;
use core::future::Future;

use super::{FlushStats, Stalled, Tasks};
use crate::mock::MockOs;
use crate::os::traits::*;
use crate::os::{Errno, Fd, OpenFlags};

/// A mock with `/f` of `pages` 4 KiB pages, page `i` filled with byte `i`.
fn mock_with_file(pages: u8) -> (MockOs, Fd) {
    let mut os = MockOs::new();
    os.can_seek = true;
    os.can_mmap = true;
    let data: Vec<u8> = (0..pages).flat_map(|i| vec![i; 4096]).collect();
    os.put("/f", &data);
    let fd = os.open("/f", OpenFlags::default()).unwrap();
    (os, fd)
}

#[test]
fn ready_tasks_take_turns_in_order() {
    let mut os = MockOs::new();
    let log = RefCell::new(Vec::new());
    let ex = Tasks::new(&mut os);
    let out = ex
        .run_n(3, |id| {
            let (ex, log) = (&ex, &log);
            async move {
                for round in 0..3 {
                    log.borrow_mut().push((round, id));
                    ex.yield_now().await;
                }
                id * 10
            }
        })
        .unwrap();
    assert_eq!(out, vec![0, 10, 20]);
    let want: Vec<(i32, usize)> = (0..3).flat_map(|r| (0..3).map(move |t| (r, t))).collect();
    assert_eq!(*log.borrow(), want);
    assert_eq!(ex.stats(), FlushStats::default(), "yielding is not I/O");
    drop(ex);
    assert!(os.batches.is_empty());
}

/// Every turn of another task shows on the protocol timeline as a task
/// switch naming it (the ring is global: tests alongside may add their
/// own, so the check is that these come in order among them).
#[test]
fn task_switches_are_recorded_on_the_timeline() {
    use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
    use fabric::trace::{self, Kind};
    fn clock() -> u64 {
        static T: AtomicU64 = AtomicU64::new(1);
        T.fetch_add(1, Relaxed)
    }
    let mut os = MockOs::new();
    let ex = Tasks::new(&mut os);
    trace::set_clock(clock);
    trace::clear();
    trace::set_enabled(true);
    ex.run_n(5, |_| {
        let ex = &ex;
        async move {
            for _ in 0..3 {
                ex.yield_now().await;
            }
        }
    })
    .unwrap();
    trace::set_enabled(false);
    let switches: Vec<u64> = (trace::snapshot().0.into_iter())
        .filter(|e| e.kind == Kind::TaskSwitch)
        .map(|e| e.arg)
        .collect();
    // Four polls of each task, round robin.
    let mut want = (0..4).flat_map(|_| 0..5u64).peekable();
    for s in &switches {
        if want.peek() == Some(s) {
            want.next();
        }
    }
    assert_eq!(want.next(), None, "task switches recorded: {switches:?}");
}

#[test]
fn the_ios_of_all_waiting_tasks_go_out_in_one_flush() {
    let (mut os, fd) = mock_with_file(32);
    let ex = Tasks::new(&mut os);
    let out = ex
        .run_n(8, |id| {
            let ex = &ex;
            async move {
                let mut seen = Vec::new();
                let mut buf = vec![0u8; 4096];
                for k in 0..4u64 {
                    let page = k * 8 + id as u64;
                    let done = ex.pread(fd, page * 4096, buf).await;
                    assert_eq!(done.result, Ok(4096));
                    seen.push(done.buf[0]);
                    buf = done.buf;
                }
                seen
            }
        })
        .unwrap();
    for (id, seen) in out.iter().enumerate() {
        let want: Vec<u8> = (0..4u8).map(|k| k * 8 + id as u8).collect();
        assert_eq!(*seen, want, "task {id}");
    }
    let s = ex.stats();
    assert_eq!((s.flushes, s.ios, s.max, s.mean_rounded()), (4, 32, 8, 8));
    drop(ex);
    assert_eq!(os.batches, vec![8, 8, 8, 8]);
}

#[test]
fn tasks_with_fewer_ios_leave_smaller_flushes() {
    let (mut os, fd) = mock_with_file(8);
    let ex = Tasks::new(&mut os);
    ex.run_n(3, |id| {
        let ex = &ex;
        async move {
            let mut buf = vec![0u8; 512];
            for _ in 0..=id {
                buf = ex.pread(fd, 0, buf).await.buf;
            }
        }
    })
    .unwrap();
    let s = ex.stats();
    assert_eq!((s.flushes, s.ios, s.max), (3, 6, 3));
    assert_eq!(s.mean_milli(), 2000);
    drop(ex);
    assert_eq!(os.batches, vec![3, 2, 1]);
}

#[test]
fn writes_and_mapped_ios_share_the_flush() {
    let (mut os, fd) = mock_with_file(4);
    let ex = Tasks::new(&mut os);
    let out = ex
        .run_n(4, |id| {
            let ex = &ex;
            async move {
                let off = id as u64 * 4096;
                match id {
                    0 => ex.pwrite(fd, off, vec![0xAB; 4096]).await.result,
                    1 => ex.pread(fd, off, vec![0; 4096]).await.result,
                    2 => ex.mmap_write("/f", off, vec![0xCD; 100]).await.result,
                    _ => {
                        let d = ex.mmap_read("/f", off, vec![0; 4096]).await;
                        assert!(d.buf.iter().all(|&b| b == 3));
                        d.result
                    }
                }
            }
        })
        .unwrap();
    assert_eq!(out, vec![Ok(4096), Ok(4096), Ok(100), Ok(4096)]);
    assert_eq!(ex.stats().flushes, 1);
    drop(ex);
    assert_eq!(os.batches, vec![2, 2], "one io_batch and one mmap_batch");
    let f = os.file("/f").unwrap();
    assert!(f[..4096].iter().all(|&b| b == 0xAB));
    assert!(f[8192..8292].iter().all(|&b| b == 0xCD));
    assert_eq!(f[8292], 2);
}

#[test]
fn a_task_that_fails_does_not_wedge_the_others() {
    let (mut os, fd) = mock_with_file(4);
    let ex = Tasks::new(&mut os);
    let out = ex
        .run_n(3, |id| {
            let ex = &ex;
            async move {
                if id == 1 {
                    return Err(Errno::Invalid);
                }
                let mut buf = vec![0u8; 4096];
                for page in 0..4u64 {
                    let d = ex.pread(fd, page * 4096, buf).await;
                    d.result?;
                    buf = d.buf;
                }
                Ok(id)
            }
        })
        .unwrap();
    assert_eq!(out, vec![Ok(0), Err(Errno::Invalid), Ok(2)]);
    drop(ex);
    assert_eq!(os.batches, vec![2, 2, 2, 2]);
}

#[test]
fn a_failed_flush_fails_every_waiting_io() {
    let (mut os, fd) = mock_with_file(4);
    os.fail("io_batch", 1, Errno::Unavailable);
    let ex = Tasks::new(&mut os);
    let out = ex
        .run_n(4, |id| {
            let ex = &ex;
            async move {
                let first = ex.pread(fd, id as u64 * 4096, vec![0; 4096]).await;
                let second = ex.pread(fd, 0, first.buf).await;
                (first.result, second.result, second.buf.len())
            }
        })
        .unwrap();
    for r in out {
        assert_eq!(r, (Ok(4096), Err(Errno::Unavailable), 4096));
    }
    drop(ex);
    assert_eq!(os.batches, vec![4, 4]);
}

#[test]
fn per_io_errors_reach_their_own_task_only() {
    let (mut os, fd) = mock_with_file(1);
    let ex = Tasks::new(&mut os);
    let out = ex
        .run_n(2, |id| {
            let ex = &ex;
            async move {
                let target = if id == 0 { fd } else { Fd(999) };
                ex.pread(target, 0, vec![0; 16]).await.result
            }
        })
        .unwrap();
    assert_eq!(out, vec![Ok(16), Err(Errno::BadFd)]);
}

#[test]
fn waiting_with_nothing_queued_stops_instead_of_spinning() {
    let (mut os, fd) = mock_with_file(1);
    let finished = Rc::new(RefCell::new(Vec::new()));
    let ex = Tasks::new(&mut os);
    let r = ex.run_n(3, |id| {
        let (ex, finished) = (&ex, finished.clone());
        async move {
            // Task 1 queues one I/O, then waits for something nobody
            // will ever complete; the others do two I/Os and finish.
            let d = ex.pread(fd, 0, vec![0; 8]).await;
            if id == 1 {
                core::future::pending::<()>().await;
            }
            let _ = ex.pread(fd, 0, d.buf).await;
            finished.borrow_mut().push(id);
        }
    });
    assert_eq!(r, Err(Stalled { waiting: 1 }));
    assert_eq!(*finished.borrow(), vec![0, 2]);
    assert_eq!(ex.stats().flushes, 2, "no flush without queued I/O");
    drop(ex);
    assert_eq!(os.batches, vec![3, 2]);
}

#[test]
fn dropped_tasks_withdraw_their_queued_ios() {
    let (mut os, fd) = mock_with_file(1);
    let ex = Tasks::new(&mut os);
    {
        let mut fut = core::pin::pin!(ex.pread(fd, 0, vec![0; 8]));
        let waker = core::task::Waker::noop();
        let mut cx = core::task::Context::from_waker(waker);
        assert!(fut.as_mut().poll(&mut cx).is_pending());
    }
    // The dropped I/O is gone: a later run flushes only its own.
    let out = ex
        .run_n(1, |_| {
            let ex = &ex;
            async move { ex.pread(fd, 0, vec![0; 8]).await.result }
        })
        .unwrap();
    assert_eq!(out, vec![Ok(8)]);
    drop(ex);
    assert_eq!(os.batches, vec![1]);
}

#[test]
fn latency_runs_from_queueing_to_the_flush() {
    let (mut os, fd) = mock_with_file(1);
    os.now_ns = 5_000;
    let ex = Tasks::new(&mut os);
    let out = ex
        .run_n(1, |_| {
            let ex = &ex;
            async move {
                let d = ex.pread(fd, 0, vec![0; 8]).await;
                (d.submitted_ns, d.completed_ns, d.latency_ns())
            }
        })
        .unwrap();
    assert_eq!(out, vec![(5_000, 5_000, 0)]);
    let f = FlushStats {
        flushes: 4,
        ios: 10,
        max: 4,
        sent: 6,
    };
    assert_eq!(f.mean_rounded(), 3);
    assert_eq!(f.mean_milli(), 2500);
    let g = FlushStats {
        flushes: 6,
        ios: 12,
        max: 4,
        sent: 9,
    };
    assert_eq!(f.per_flush_milli(), 1500);
    assert_eq!(
        g.since(&f),
        FlushStats {
            flushes: 2,
            ios: 2,
            max: 4,
            sent: 3
        }
    );
    assert_eq!(FlushStats::default().mean_rounded(), 0);
}
mod meta;
mod reads;
