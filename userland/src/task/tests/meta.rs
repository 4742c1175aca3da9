//! Metadata calls of tasks on the host: the mock answers the call kinds
//! given a delay only after that many wait steps, and takes them into
//! effect when it answers.

use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::RefCell;

use super::super::Tasks;
use crate::mock::MockOs;
use crate::os::traits::*;
use crate::os::{Errno, OpenFlags};

fn mock() -> MockOs {
    let mut os = MockOs::new();
    os.can_seek = true;
    let data: Vec<u8> = (0..8u8).flat_map(|i| vec![i; 4096]).collect();
    os.put("/f", &data);
    os
}

#[test]
fn a_task_in_a_slow_fsync_does_not_hold_up_another_tasks_reads() {
    let mut os = mock();
    os.meta.delay.insert("fsync", 5);
    let fd = os.open("/f", OpenFlags::default()).unwrap();
    let log: RefCell<Vec<String>> = RefCell::new(Vec::new());
    let ex = Tasks::new(&mut os);
    let out = ex
        .run_n(2, |id| {
            let (ex, log) = (&ex, &log);
            async move {
                if id == 0 {
                    let r = ex.fsync(fd).await;
                    log.borrow_mut().push(String::from("fsync"));
                    return r.map(|()| 0);
                }
                let mut sum = 0u64;
                for k in 0..4u64 {
                    let done = ex.pread(fd, k * 4096, vec![0u8; 4096]).await;
                    assert_eq!(done.result, Ok(4096));
                    assert!(done.buf.iter().all(|&b| u64::from(b) == k));
                    log.borrow_mut().push(alloc::format!("read {k}"));
                    sum += k;
                }
                Ok(sum)
            }
        })
        .unwrap();
    assert_eq!(out, vec![Ok(0), Ok(6)]);
    // Every read completed while the fsync was out; it answered last.
    assert_eq!(
        *log.borrow(),
        ["read 0", "read 1", "read 2", "read 3", "fsync"]
    );
    let m = ex.meta_stats();
    assert_eq!((m.yielded, m.max_in_flight), (1, 1));
    drop(ex);
    assert_eq!(
        os.meta.events,
        [
            "start fsync",
            "io_batch 1",
            "io_batch 1",
            "io_batch 1",
            "io_batch 1",
            "done fsync"
        ]
    );
    assert_eq!(os.syncs, 1);
}

#[test]
fn several_tasks_calls_are_in_flight_together() {
    let mut os = mock();
    for k in 0..8 {
        os.put(&alloc::format!("/s{k}"), &vec![1u8; 100 * (k + 1)]);
    }
    os.meta.delay.insert("stat", 3);
    let ex = Tasks::new(&mut os);
    let sizes = ex
        .run_n(8, |id| {
            let ex = &ex;
            async move { ex.stat(&alloc::format!("/s{id}")).await.map(|a| a.size) }
        })
        .unwrap();
    let want: Vec<Result<u64, Errno>> = (1..=8).map(|k| Ok(100 * k)).collect();
    assert_eq!(sizes, want);
    assert_eq!(ex.meta_stats().max_in_flight, 8);
    drop(ex);
    // All eight waited out the same three steps, not one after another.
    assert_eq!(os.meta.waits, 3);
    assert_eq!(os.meta.max_in_flight, 8);
}

#[test]
fn a_tasks_own_calls_stay_in_program_order() {
    let mut os = mock();
    for (k, d) in [
        ("open", 2),
        ("fsync", 3),
        ("stat", 1),
        ("unlink", 2),
        ("close", 1),
    ] {
        os.meta.delay.insert(k, d);
    }
    let ex = Tasks::new(&mut os);
    let out = ex
        .run_n(2, |id| {
            let ex = &ex;
            async move {
                let path = alloc::format!("/w{id}");
                let flags = OpenFlags {
                    create: true,
                    exclusive: true,
                    ..OpenFlags::default()
                };
                let fd = ex.open(&path, flags).await?;
                let data = vec![id as u8 + 1; 5000 + id];
                let done = ex.pwrite(fd, 0, data).await;
                done.result?;
                ex.fsync(fd).await?;
                ex.close(fd).await?;
                let size = ex.stat(&path).await?.size;
                ex.unlink(&path).await?;
                let gone = ex.stat(&path).await;
                // A second create of the same name now works again.
                let fd = ex.open(&path, flags).await?;
                ex.close(fd).await?;
                Ok::<_, Errno>((size, gone))
            }
        })
        .unwrap();
    assert_eq!(
        out,
        vec![
            Ok((5000, Err(Errno::NotFound))),
            Ok((5001, Err(Errno::NotFound)))
        ]
    );
    let m = ex.meta_stats();
    assert!(m.max_in_flight >= 2, "{m:?}");
    drop(ex);
    assert_eq!(os.open_fds(), 0, "every descriptor was closed");
}

#[test]
fn an_error_answer_comes_back_to_its_task() {
    let mut os = mock();
    os.meta.delay.insert("open", 2);
    os.meta.delay.insert("mkdir", 1);
    let ex = Tasks::new(&mut os);
    let out = ex
        .run_n(2, |id| {
            let ex = &ex;
            async move {
                if id == 0 {
                    ex.open("/missing", OpenFlags::default()).await.map(|_| ())
                } else {
                    ex.mkdir("/d").await?;
                    ex.mkdir("/d").await
                }
            }
        })
        .unwrap();
    assert_eq!(out, vec![Err(Errno::NotFound), Err(Errno::Exists)]);
}

#[test]
fn without_split_calls_a_call_finishes_at_once() {
    let mut os = mock();
    let ex = Tasks::new(&mut os);
    let out = ex
        .run_n(1, |_| {
            let ex = &ex;
            async move { ex.stat("/f").await.map(|a| a.size) }
        })
        .unwrap();
    assert_eq!(out, vec![Ok(8 * 4096)]);
    let m = ex.meta_stats();
    assert_eq!((m.yielded, m.immediate), (0, 1));
}
