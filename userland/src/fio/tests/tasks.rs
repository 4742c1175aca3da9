//! psync and mmap jobs as tasks: the I/Os of all waiting jobs in one
//! flush, on the shell's mock and on the fake.

use alloc::vec;
use alloc::vec::Vec;

use super::fake::{Batcher, FakeOs};
use super::{jsonck, p, run_b, run_fake, shell};
use crate::fio::runner::{run_with, Limits};
use crate::mock::MockOs;
use crate::os::Errno;
use crate::pattern;

fn result_json(out: &str) -> jsonck::Value {
    let line = out
        .lines()
        .find(|l| l.starts_with("RESULT "))
        .unwrap_or_else(|| panic!("no RESULT in {out}"));
    jsonck::parse(&line["RESULT ".len()..]).expect("valid JSON")
}

#[test]
fn psync_numjobs_8_has_8_ios_in_flight_on_the_mock() {
    let mut os = MockOs::new();
    os.can_seek = true;
    let out = shell(
        &mut os,
        "fio --name=r --rw=randread --bs=4k --size=64k --numjobs=8 --ioengine=psync",
    );
    assert!(out.ends_with("\nok\n"), "{out}");
    assert!(
        out.contains("  depth: iodepth=1 requested, 8 in flight (mean 8.000, max 8; 8 jobs as tasks, waiting I/Os flushed together, 8.000 per flush)\n"),
        "{out}"
    );
    let v = result_json(&out);
    assert_eq!(v.get("effective_iodepth").u64(), 8);
    assert_eq!(v.get("max_iodepth").u64(), 8);
    assert_eq!(v.get("read").get("ios").u64(), 8 * 16);
    // The probe, then 16 flushes of one read per job.
    let mut want = vec![1];
    want.extend([8; 16]);
    assert_eq!(os.batches, want);
}

#[test]
fn jobs_of_different_lengths_leave_a_shrinking_depth() {
    // Sequential jobs of one file each: 8 jobs but a runtime cut is not
    // involved; the depth is exactly the jobs still running.
    let mut os = FakeOs::new();
    let mut b = Batcher::new(&mut os);
    let spec = p(&["--size=32k", "--numjobs=3", "--rw=read"]);
    let r = run_with(&mut b, &spec, &super::env(), Limits::default()).unwrap();
    assert_eq!(b.sizes(), vec![3; 8]);
    assert_eq!(r.effective_iodepth, 3);
    assert_eq!(r.read.ios, 24);
}

#[test]
fn mmap_jobs_are_tasks_with_their_faults_batched() {
    let mut os = MockOs::new();
    os.can_mmap = true;
    let out = shell(
        &mut os,
        "fio --rw=randrw --bs=4k --size=32k --numjobs=4 --ioengine=mmap",
    );
    assert!(out.ends_with("\nok\n"), "{out}");
    let v = result_json(&out);
    assert_eq!(v.get("effective_iodepth").u64(), 4);
    assert_eq!(v.get("max_iodepth").u64(), 4);
    assert_eq!(
        v.get("read").get("ios").u64() + v.get("write").get("ios").u64(),
        32
    );
    assert_eq!(os.batches, vec![4; 8]);
    // Writes store the pattern, so every file still holds it.
    for j in 0..4 {
        let f = os.file(&alloc::format!("/job.{j}.0")).unwrap();
        assert_eq!(pattern::first_mismatch(f, 0), None, "job {j}");
    }
}

#[test]
fn one_failing_job_fails_the_run_and_stops_the_others() {
    let mut os = FakeOs::new();
    let mut b = Batcher::new(&mut os);
    // The fifth read (the second round's first job) fails.
    b.inner.fault = Some(("read", 4, Errno::Io));
    let spec = p(&["--size=64k", "--numjobs=4"]);
    let e = run_with(&mut b, &spec, &super::env(), Limits::default()).unwrap_err();
    assert_eq!(format!("{e}"), "fio: /job.0.0: read at 4096: I/O error");
    // The other jobs' reads of that round completed; nobody went on.
    assert_eq!(b.sizes(), vec![4, 4]);
    assert_eq!(b.inner.open_fds(), 0);
}

#[test]
fn a_failed_flush_fails_the_run_naming_the_first_job() {
    let mut os = FakeOs::new();
    let mut b = Batcher::new(&mut os);
    b.fail = Some((2, Errno::Unavailable)); // call 0 is the probe
    let spec = p(&["--size=64k", "--numjobs=2"]);
    let e = run_with(&mut b, &spec, &super::env(), Limits::default()).unwrap_err();
    assert_eq!(
        format!("{e}"),
        alloc::format!("fio: /job.0.0: read at 4096: {}", Errno::Unavailable)
    );
    assert_eq!(b.sizes(), vec![2, 2]);
}

#[test]
fn ramp_ios_are_not_counted_in_the_depth_or_the_figures() {
    // Each read takes 1000 ns; the ramp covers the first flushes.
    let mut os = FakeOs::new();
    let r = run_fake(
        &mut os,
        &["--size=16k", "--numjobs=2", "--ramp_time=3us", "--rw=read"],
    );
    assert!(r.tasks);
    assert_eq!(r.effective_iodepth, 2);
    let ios: Vec<_> = os.ios();
    assert!(ios.len() > 8, "ramp I/Os are extra: {}", ios.len());
    assert_eq!(r.read.ios, 8);
}

#[test]
fn psync_jobs_are_tasks_with_their_ios_in_flight_together() {
    let mut os = FakeOs::new();
    let mut b = Batcher::new(&mut os);
    let r = run_b(&mut b, &["--size=64k", "--iodepth=32", "--numjobs=2"]);
    assert!(r.tasks);
    assert_eq!((r.effective_iodepth, r.max_iodepth), (2, 2));
    assert_eq!(r.mean_iodepth_milli, 2000);
    // 16 rounds of one read per job, each round one io_batch.
    assert_eq!(b.sizes(), vec![2; 16]);
    let s = r.summary();
    assert!(
        s.contains(
            "  depth: iodepth=32 requested, 2 in flight (mean 2.000, max 2; 2 jobs as tasks, waiting I/Os flushed together, 2.000 per flush)\n"
        ),
        "{s}"
    );
    // Each read is queued, then the batch of two takes 2 x 1000 ns.
    assert_eq!(r.read.lat.unwrap().max, 2000);
    assert_eq!(r.read.ios, 32);
}

#[test]
fn psync_without_positioned_batches_takes_turns() {
    let mut os = FakeOs::new();
    os.can_seek = false;
    let r = run_fake(&mut os, &["--size=64k", "--iodepth=32", "--numjobs=2"]);
    assert!(!r.tasks);
    assert_eq!((r.effective_iodepth, r.max_iodepth), (1, 1));
    let s = r.summary();
    assert!(s.contains(
        "  depth: iodepth=32 requested, 1 in flight (synchronous calls; 2 jobs interleaved round-robin)\n"
    ));
    assert_eq!(r.read.lat.unwrap().max, 1000);
}
