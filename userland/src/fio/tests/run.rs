//! The runner on a fake OS: layout, engines, runtime, ramp, latencies, fsync.

use super::*;
use crate::os::traits::*;

#[test]
fn sequential_read_lays_out_then_reads_every_block_once() {
    let mut os = FakeOs::new();
    let r = run_fake(&mut os, &["--name=seq", "--size=1m", "--rw=read"]);
    // Layout: the pattern, 1 MiB, in 64 KiB writes.
    let data = os.files.get("/seq.0.0").expect("laid out");
    assert_eq!(data.len(), 1 << 20);
    assert_eq!(pattern::first_mismatch(data, 0), None);
    assert_eq!((r.laid_out_files, r.laid_out_bytes), (1, 1 << 20));
    let reads: Vec<u64> = os
        .ios()
        .into_iter()
        .filter(|io| !io.0)
        .map(|io| {
            assert_eq!(io.3, 4096);
            io.2
        })
        .collect();
    assert_eq!(reads, (0..256).map(|b| b * 4096).collect::<Vec<_>>());
    // Each read costs 1000 ns on the fake clock.
    assert_eq!(r.read.ios, 256);
    assert_eq!(r.read.bytes, 1 << 20);
    assert_eq!(r.elapsed_ns, 256_000);
    assert_eq!(r.read.iops_milli, 1_000_000_000);
    assert_eq!(r.read.bw_bytes, 4_096_000_000);
    assert_eq!(
        r.read.lat,
        Some(Latency {
            min: 1000,
            mean: 1000,
            p50: 1000,
            p99: 1000,
            p999: 1000,
            max: 1000
        })
    );
    assert_eq!(r.write, DirStats::default());
    assert_eq!(r.effective_iodepth, 1);
    assert_eq!(r.files, ["/seq.0.0"]);
    assert!(!r.hit_runtime);
    // psync jobs run as tasks: every read is a positioned I/O of a
    // batch (the fake's default io_batch seeks first), and the probe.
    assert!(r.tasks);
    assert_eq!(os.count(|o| matches!(o, Op::Seek(..))), 257);
}

#[test]
fn existing_file_is_not_laid_out_again() {
    let mut os = FakeOs::new();
    os.files.insert("/f".to_string(), vec![7u8; 2 << 20]);
    let r = run_fake(&mut os, &["--size=1m", "--filename=/f"]);
    assert_eq!((r.laid_out_files, r.laid_out_bytes), (0, 0));
    assert_eq!(os.files["/f"], vec![7u8; 2 << 20]);
    assert_eq!(r.read.ios, 256);
}

#[test]
fn short_file_is_extended_with_the_pattern() {
    let mut os = FakeOs::new();
    let mut head = vec![0u8; 10_000];
    pattern::fill(&mut head, 0);
    os.files.insert("/f".to_string(), head);
    let r = run_fake(&mut os, &["--size=64k", "--filename=/f", "--rw=randread"]);
    assert_eq!(r.laid_out_bytes, 65_536 - 10_000);
    assert_eq!(pattern::first_mismatch(&os.files["/f"], 0), None);
    assert_eq!(os.files["/f"].len(), 65_536);
}

#[test]
fn write_only_jobs_extend_without_writing_then_write_the_pattern() {
    let mut os = FakeOs::new();
    let r = run_fake(&mut os, &["--size=64k", "--rw=write", "--bs=8k"]);
    assert_eq!((r.laid_out_files, r.laid_out_bytes), (1, 0));
    assert!(os
        .log
        .contains(&Op::Truncate("/job.0.0".to_string(), 65_536)));
    assert_eq!(r.write.ios, 8);
    assert_eq!(r.read.ios, 0);
    assert_eq!(pattern::first_mismatch(&os.files["/job.0.0"], 0), None);
}

#[test]
fn random_read_uses_seek_and_touches_each_block_once() {
    let mut os = FakeOs::new();
    let r = run_fake(&mut os, &["--size=256k", "--rw=randread", "--randseed=5"]);
    assert_eq!(r.read.ios, 64);
    let offs: Vec<u64> = os.ios().iter().filter(|i| !i.0).map(|i| i.2).collect();
    assert_eq!(offs.len(), 64);
    let set: BTreeSet<u64> = offs.iter().copied().collect();
    assert_eq!(set.len(), 64);
    // The same seed gives the same order.
    let mut os2 = FakeOs::new();
    run_fake(&mut os2, &["--size=256k", "--rw=randread", "--randseed=5"]);
    let offs2: Vec<u64> = os2.ios().iter().filter(|i| !i.0).map(|i| i.2).collect();
    assert_eq!(offs, offs2);
    assert!(os.count(|o| matches!(o, Op::Seek(..))) > 30);
}

#[test]
fn random_without_seek_fails_before_running() {
    let mut os = FakeOs::new();
    os.can_seek = false;
    for rw in ["randread", "randwrite", "randrw", "rw"] {
        let e = run_err(&mut os, &["--size=64k", &format!("--rw={rw}")]);
        assert_eq!(
            e,
            format!("fio: rw={rw} needs positioned I/O (seek), not supported in this mode")
        );
    }
    assert!(os
        .log
        .iter()
        .all(|o| !matches!(o, Op::Io { write: false, .. })));
}

#[test]
fn sequential_wrap_without_seek_reopens() {
    let mut os = FakeOs::new();
    os.can_seek = false;
    let r = run_fake(
        &mut os,
        &["--size=16k", "--rw=read", "--time_based", "--runtime=20us"],
    );
    assert_eq!(r.read.ios, 20);
    let offs: Vec<u64> = os
        .ios()
        .iter()
        .filter(|i| !i.0)
        .map(|i| i.2 / 4096)
        .collect();
    assert_eq!(offs, [0, 1, 2, 3].repeat(5));
    // One open for the job plus one per wrap.
    let opens = os.count(|o| matches!(o, Op::Open(p) if p == "/job.0.0"));
    assert_eq!(opens, 2 + 4, "layout + job + 4 reopens");
}

#[test]
fn mmap_engine() {
    let mut os = FakeOs::new();
    let e = run_err(&mut os, &["--size=64k", "--ioengine=mmap"]);
    assert_eq!(e, "fio: ioengine=mmap not supported in this mode");
    assert!(os.files.is_empty(), "nothing laid out");
    let mut os = FakeOs::new();
    os.can_mmap = true;
    os.can_seek = false;
    let r = run_fake(&mut os, &["--size=64k", "--ioengine=mmap", "--rw=randrw"]);
    assert_eq!(r.read.ios + r.write.ios, 16);
    let ios: Vec<Op> = os
        .log
        .iter()
        .filter(|o| matches!(o, Op::Io { mmap: true, .. }))
        .cloned()
        .collect();
    assert_eq!(ios.len(), 16);
    assert_eq!(pattern::first_mismatch(&os.files["/job.0.0"], 0), None);
    // Failing mid-run with "not supported" gives the same message.
    let mut os = FakeOs::new();
    os.can_mmap = true;
    os.fault = Some(("mmap_io", 3, Errno::NotSupported));
    let e = run_err(&mut os, &["--size=64k", "--ioengine=mmap"]);
    assert_eq!(e, "fio: ioengine=mmap not supported in this mode");
    let mut os = FakeOs::new();
    os.can_mmap = true;
    os.fault = Some(("mmap_io", 1, Errno::Io));
    let e = run_err(&mut os, &["--size=64k", "--ioengine=mmap"]);
    assert_eq!(e, "fio: /job.0.0: mmap read at 4096: I/O error");
}

#[test]
fn jobs_interleave_round_robin() {
    let mut os = FakeOs::new();
    os.mkdir("/d").unwrap();
    let r = run_fake(
        &mut os,
        &["--size=16k", "--numjobs=3", "--directory=/d", "--name=w"],
    );
    assert_eq!(r.files, ["/d/w.0.0", "/d/w.1.0", "/d/w.2.0"]);
    assert_eq!(r.laid_out_files, 3);
    assert_eq!(r.read.ios, 12);
    let reads: Vec<(String, u64)> = os
        .ios()
        .into_iter()
        .skip_while(|i| i.0)
        .map(|i| (i.1, i.2 / 4096))
        .collect();
    let want: Vec<(String, u64)> = (0..4)
        .flat_map(|b| (0..3).map(move |j| (format!("/d/w.{j}.0"), b)))
        .collect();
    assert_eq!(reads, want);
}

#[test]
fn shared_filename_is_laid_out_once() {
    let mut os = FakeOs::new();
    let r = run_fake(
        &mut os,
        &["--size=16k", "--numjobs=4", "--filename=/shared"],
    );
    assert_eq!(r.files, ["/shared"]);
    assert_eq!(r.laid_out_files, 1);
    assert_eq!(r.read.ios, 16);
    assert_eq!(os.files.len(), 1);
}

#[test]
fn missing_directory_is_an_error() {
    let mut os = FakeOs::new();
    let e = run_err(&mut os, &["--size=16k", "--directory=/nope"]);
    assert_eq!(e, "fio: /nope: directory: not found");
    os.files.insert("/file".to_string(), Vec::new());
    let e = run_err(&mut os, &["--size=16k", "--directory=/file"]);
    assert_eq!(e, "fio: /file: directory: not a directory");
    os.dirs.insert("/dd".to_string());
    let e = run_err(&mut os, &["--size=16k", "--filename=/dd"]);
    assert_eq!(e, "fio: /dd: layout: is a directory");
}

#[test]
fn runtime_stops_a_time_based_run() {
    let mut os = FakeOs::new();
    let r = run_fake(
        &mut os,
        &[
            "--size=16k",
            "--rw=randread",
            "--time_based",
            "--runtime=1ms",
        ],
    );
    assert!(r.hit_runtime);
    assert_eq!(r.read.ios, 1000);
    assert_eq!(r.elapsed_ns, 1_000_000);
    // It wrapped around a 4-block file many times, each pass a permutation.
    let offs: Vec<u64> = os.ios().iter().filter(|i| !i.0).map(|i| i.2).collect();
    for pass in offs.chunks(4) {
        assert_eq!(pass.iter().collect::<BTreeSet<_>>().len(), 4);
    }
}

#[test]
fn runtime_also_cuts_a_size_limited_run() {
    let mut os = FakeOs::new();
    let r = run_fake(&mut os, &["--size=1m", "--runtime=100us"]);
    assert!(r.hit_runtime);
    assert_eq!(r.read.ios, 100);
    let mut os = FakeOs::new();
    let r = run_fake(&mut os, &["--size=64k", "--runtime=1s"]);
    assert!(!r.hit_runtime);
    assert_eq!(r.read.ios, 16);
}

fn ramp_cost(call: u64, _write: bool, _off: u64) -> u64 {
    // Layout of 64 KiB is one 64 KiB write (call 0); the first 10 reads
    // after it are slow.
    if (1..=10).contains(&call) {
        5000
    } else {
        1000
    }
}

#[test]
fn ramp_samples_are_discarded() {
    let mut os = FakeOs::new();
    os.cost = ramp_cost;
    let r = run_fake(&mut os, &["--size=64k", "--ramp_time=50us"]);
    // 10 slow reads fill the 50 us ramp; then 16 measured reads.
    assert_eq!(r.read.ios, 16);
    let l = r.read.lat.unwrap();
    assert_eq!((l.min, l.max), (1000, 1000));
    assert_eq!(r.elapsed_ns, 16_000);
    let reads = os.ios().iter().filter(|i| !i.0).count();
    assert_eq!(reads, 26);
    // Measured reads continue the sequence: 10 ramp reads, then 16 more.
    let last = os.ios().last().unwrap().2;
    assert_eq!(last, ((10 + 15) % 16) * 4096);
}

#[test]
fn ramp_then_runtime() {
    let mut os = FakeOs::new();
    let r = run_fake(
        &mut os,
        &[
            "--size=64k",
            "--time_based",
            "--runtime=20us",
            "--ramp_time=10us",
        ],
    );
    assert_eq!(r.read.ios, 20);
    assert_eq!(r.elapsed_ns, 20_000);
    assert_eq!(os.ios().iter().filter(|i| !i.0).count(), 30);
}

fn spread_cost(call: u64, _write: bool, _off: u64) -> u64 {
    // After the layout write: 1..=1000 ns in a scrambled order.
    (call * 7919) % 1000 + 1
}

#[test]
fn latency_percentiles_and_mean() {
    let mut os = FakeOs::new();
    os.files.insert("/f".to_string(), vec![0u8; 4 << 20]);
    os.cost = spread_cost;
    // 1000 reads of 4 KiB: call numbers 0..1000 give every cost 1..=1000.
    let r = run_fake(&mut os, &["--size=4000k", "--filename=/f"]);
    let l = r.read.lat.unwrap();
    assert_eq!(r.read.ios, 1000);
    assert_eq!(
        l,
        Latency {
            min: 1,
            mean: 500,
            p50: 500,
            p99: 990,
            p999: 999,
            max: 1000
        }
    );
    assert_eq!(r.elapsed_ns, 500_500);
}

#[test]
fn report_math() {
    let d = DirStats::new(1000, 4096, 1_000_000_000, None);
    assert_eq!(d.iops_milli, 1_000_000);
    assert_eq!(d.iops(), 1000);
    assert_eq!(d.bw_bytes, 4_096_000);
    assert_eq!(d.bw_kib(), 4000);
    let d = DirStats::new(3, 512, 7, None);
    assert_eq!(d.iops_milli, 428_571_428_571);
    assert_eq!(d.bw_bytes, 219_428_571_428);
    let d = DirStats::new(5, 4096, 0, None);
    assert_eq!((d.iops_milli, d.bw_bytes, d.bytes), (0, 0, 20_480));
    let d = DirStats::new(u64::MAX, 16 << 20, 1, None);
    assert_eq!((d.iops_milli, d.bw_bytes), (u64::MAX, u64::MAX));
}

#[test]
fn human_numbers_like_fio() {
    const BIN: &[&str] = &["B", "KiB", "MiB", "GiB", "TiB"];
    const K: &[&str] = &["", "k", "M", "G"];
    assert_eq!(human(0, 1024, BIN), "0B");
    assert_eq!(human(9999, 1024, BIN), "9999B");
    assert_eq!(human(10_000, 1024, BIN), "9.76KiB");
    assert_eq!(human(4000 * 1024, 1024, BIN), "4000KiB");
    assert_eq!(human(50_400_000, 1024, BIN), "48.0MiB");
    assert_eq!(human(481 << 20, 1024, BIN), "481MiB");
    assert_eq!(human(1 << 30, 1024, BIN), "1024MiB");
    assert_eq!(human(u64::MAX, 1024, BIN), "16777215TiB");
    assert_eq!(human(523, 1000, K), "523");
    assert_eq!(human(9999, 1000, K), "9999");
    assert_eq!(human(12_345, 1000, K), "12.3k");
    assert_eq!(human(123_456, 1000, K), "123k");
    assert_eq!(human(1_234_567, 1000, K), "1234k");
    assert_eq!(human(12_345_678, 1000, K), "12.3M");
}

#[test]
fn reservoir_keeps_exact_extremes_and_a_bounded_sample() {
    let mut s = Samples::new(100, 10_000);
    for i in 0..10_000u64 {
        s.push((i * 7919) % 10_000 + 1);
    }
    assert_eq!(s.count(), 10_000);
    assert_eq!(s.kept(), 100);
    let l = s.latency().unwrap();
    assert_eq!((l.min, l.max, l.mean), (1, 10_000, 5000));
    assert!((3000..=7000).contains(&l.p50), "{l:?}");
    assert!(l.p99 >= 8500, "{l:?}");
    let mut empty = Samples::new(0, 0);
    assert_eq!(empty.latency(), None);
    empty.push(5);
    assert_eq!(empty.latency().unwrap().p999, 5);
}

#[test]
fn run_with_a_small_reservoir() {
    let mut os = FakeOs::new();
    let spec = p(&["--size=1m"]);
    let limits = Limits {
        reservoir: 10,
        stuck_ios: 100,
    };
    let r = run_with(&mut os, &spec, &env(), limits).unwrap();
    assert_eq!(r.read.ios, 256);
    assert_eq!(r.read.lat.unwrap().mean, 1000);
}

#[test]
fn fsync_every_n_writes() {
    let mut os = FakeOs::new();
    let r = run_fake(&mut os, &["--size=64k", "--rw=write", "--fsync=4"]);
    assert_eq!(r.fsyncs, 4);
    assert_eq!(os.count(|o| matches!(o, Op::Fsync(_))), 4);
    let mut os = FakeOs::new();
    let r = run_fake(&mut os, &["--size=64k", "--rw=write", "--fsync=5"]);
    assert_eq!(r.fsyncs, 3);
    let mut os = FakeOs::new();
    let r = run_fake(&mut os, &["--size=64k", "--rw=read", "--fsync=1"]);
    assert_eq!(r.fsyncs, 0);
    let mut os = FakeOs::new();
    os.fault = Some(("fsync", 1, Errno::Io));
    let e = run_err(&mut os, &["--size=64k", "--rw=write", "--fsync=2"]);
    assert_eq!(e, "fio: /job.0.0: fsync: I/O error");
}

#[test]
fn invalidate_drops_after_layout_and_before_the_run() {
    let mut os = FakeOs::new();
    let r = run_fake(&mut os, &["--size=16k"]);
    assert_eq!(
        r.invalidated,
        Invalidated::Dropped("dropped 3 pages".to_string())
    );
    let drop_at = os.log.iter().position(|o| *o == Op::Drop).unwrap();
    let first_read = os
        .log
        .iter()
        .position(|o| matches!(o, Op::Io { write: false, .. }))
        .unwrap();
    let last_layout = os
        .log
        .iter()
        .rposition(|o| matches!(o, Op::Io { write: true, .. }))
        .unwrap();
    assert!(last_layout < drop_at && drop_at < first_read);

    let mut os = FakeOs::new();
    let r = run_fake(&mut os, &["--size=16k", "--invalidate=0"]);
    assert_eq!(r.invalidated, Invalidated::No);
    assert_eq!(os.count(|o| *o == Op::Drop), 0);

    let mut os = FakeOs::new();
    os.can_drop = Err(Errno::NotSupported);
    let r = run_fake(&mut os, &["--size=16k"]);
    assert_eq!(r.invalidated, Invalidated::NotSupported);

    let mut os = FakeOs::new();
    os.can_drop = Err(Errno::Unavailable);
    let r = run_fake(&mut os, &["--size=16k"]);
    assert_eq!(
        r.invalidated,
        Invalidated::Failed(format!("{}", Errno::Unavailable))
    );
    assert_eq!(r.read.ios, 4);
}

#[test]
fn short_transfers_are_continued() {
    let mut os = FakeOs::new();
    os.max_io = 1000;
    let r = run_fake(&mut os, &["--size=64k", "--rw=randrw", "--bs=8k"]);
    assert_eq!(r.read.ios + r.write.ios, 8);
    assert_eq!(pattern::first_mismatch(&os.files["/job.0.0"], 0), None);
}

#[test]
fn io_errors_name_the_file_and_offset_and_close_everything() {
    let mut os = FakeOs::new();
    os.fault = Some(("read", 2, Errno::Io));
    let e = run_err(&mut os, &["--size=64k", "--numjobs=2"]);
    assert_eq!(e, "fio: /job.0.0: read at 4096: I/O error");

    let mut os = FakeOs::new();
    os.fault = Some(("open", 1, Errno::TooManyFiles));
    let e = run_err(&mut os, &["--size=16k", "--numjobs=4", "--filename=/s"]);
    assert_eq!(e, "fio: /s: open: too many open files");

    let mut os = FakeOs::new();
    os.fault = Some(("stat", 0, Errno::Unavailable));
    let e = run_err(&mut os, &["--size=16k"]);
    assert_eq!(e, format!("fio: /job.0.0: layout: {}", Errno::Unavailable));

    let mut os = FakeOs::new();
    os.fault = Some(("close", 0, Errno::Io));
    let e = run_err(&mut os, &["--size=16k", "--numjobs=2"]);
    assert_eq!(e, "fio: /job.0.0: layout: I/O error");

    // Layout closes two files; the third close ends the run.
    let mut os = FakeOs::new();
    os.fault = Some(("close", 2, Errno::Io));
    let e = run_err(&mut os, &["--size=16k", "--numjobs=2"]);
    assert_eq!(e, "fio: /job.0.0: close: I/O error");
}

#[test]
fn end_of_file_during_a_read_is_an_error() {
    let mut os = FakeOs::new();
    // The file shrinks between layout and the run.
    os.on_drop = Some(("/job.0.0".to_string(), 6000));
    let e = run_err(&mut os, &["--size=16k"]);
    assert_eq!(e, "fio: /job.0.0: read at 4096: short (1904 of 4096 bytes)");
}

#[test]
fn stuck_clock_is_detected() {
    let mut os = MockOs::new();
    let spec = p(&["--size=16k", "--time_based", "--runtime=1"]);
    let limits = Limits {
        reservoir: 100,
        stuck_ios: 1000,
    };
    let e = run_with(&mut os, &spec, &env(), limits).unwrap_err();
    assert_eq!(
        format!("{e}"),
        "fio: the clock does not advance (uptime_ns is stuck)"
    );
    assert_eq!(os.open_fds(), 0);
    let spec = p(&["--size=16k", "--ramp_time=1"]);
    assert!(run_with(&mut os, &spec, &env(), limits).is_err());
    // A size-limited run on a stuck clock still ends (elapsed 0).
    let spec = p(&["--size=16k"]);
    let r = run_with(&mut os, &spec, &env(), limits).unwrap();
    assert_eq!((r.read.ios, r.elapsed_ns, r.read.iops_milli), (4, 0, 0));
}
