//! `--ioengine=libaio`: batches through `Os::io_batch`.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

use super::fake::{BatchEntry, Batcher, FakeOs, Op};
use super::{env, jsonck, p, run_b, run_fake};
use crate::fio::runner::{run_with, Limits, MAX_BATCH, MAX_BATCH_BYTES};
use crate::fio::{command, Engine, Latency};
use crate::mock::MockOs;
use crate::os::Errno;
use crate::pattern;

fn err_b(b: &mut Batcher<'_>, args: &[&str]) -> String {
    let spec = p(args);
    let e = match run_with(b, &spec, &env(), Limits::default()) {
        Ok(r) => panic!("{args:?} ran: {r:?}"),
        Err(e) => format!("{e}"),
    };
    assert_eq!(b.inner.open_fds(), 0, "descriptor leaked");
    e
}

/// The descriptor number of each job's file, from the fake's open order
/// (layout opens and closes first).
fn job_of(batch: &[BatchEntry], first_fd: u32) -> Vec<u32> {
    batch.iter().map(|io| io.0 - first_fd).collect()
}

/// Offsets per file of every data read or write of the run.
fn offsets_by_file(os: &FakeOs, write: bool) -> BTreeMap<String, Vec<u64>> {
    let mut m: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    // The run's I/Os come after the cache drop (layout writes before it).
    let drop_at = os.log.iter().position(|o| *o == Op::Drop).unwrap_or(0);
    for o in &os.log[drop_at..] {
        if let Op::Io {
            write: w,
            path,
            off,
            len,
            ..
        } = o
        {
            if *w == write && *len > 0 {
                m.entry(path.clone()).or_default().push(*off);
            }
        }
    }
    m
}

#[test]
fn libaio_is_accepted() {
    let s = p(&["--size=1m", "--ioengine=libaio", "--iodepth=32"]);
    assert_eq!(s.ioengine, Engine::Libaio);
    assert_eq!(s.ioengine.as_str(), "libaio");
    assert_eq!(s.iodepth, 32);
    for e in ["psync", "sync"] {
        assert_eq!(
            p(&["--size=1m", &format!("--ioengine={e}")]).ioengine,
            Engine::Psync
        );
    }
    assert_eq!(p(&["--size=1m", "--ioengine=mmap"]).ioengine, Engine::Mmap);
}

#[test]
fn default_io_batch_runs_fio_on_the_fake() {
    // No wrapper: the fake's default io_batch, one read after another,
    // each 1000 ns, so a batch of 4 takes 4000 ns.
    let mut os = FakeOs::new();
    let r = run_fake(&mut os, &["--size=64k", "--ioengine=libaio", "--iodepth=4"]);
    assert_eq!(r.read.ios, 16);
    assert_eq!(r.effective_iodepth, 4);
    assert_eq!(r.elapsed_ns, 16_000);
    let l = r.read.lat.unwrap();
    assert_eq!((l.min, l.mean, l.max, l.p50), (4000, 4000, 4000, 4000));
    let reads: Vec<u64> = os
        .ios()
        .iter()
        .filter(|i| !i.0)
        .map(|i| i.2 / 4096)
        .collect();
    assert_eq!(reads, (0..16).collect::<Vec<_>>());
}

#[test]
fn batches_hold_iodepth_of_every_job() {
    let mut os = FakeOs::new();
    let mut b = Batcher::new(&mut os);
    let r = run_b(
        &mut b,
        &[
            "--size=1m",
            "--rw=randread",
            "--ioengine=libaio",
            "--iodepth=32",
            "--numjobs=8",
        ],
    );
    assert_eq!(r.read.ios, 8 * 256);
    assert_eq!(b.sizes(), [256; 8]);
    assert_eq!(r.effective_iodepth, 256);
    // The probe came first: one empty read.
    assert_eq!(b.batches[0], [(b.batches[1][0].0, 0, false, 0)]);
    let first_fd = b.data_batches()[0].iter().map(|io| io.0).min().unwrap();
    for batch in b.data_batches() {
        // Round-robin: one I/O of every job per round, 32 rounds.
        let jobs = job_of(&batch, first_fd);
        let want: Vec<u32> = (0..32).flat_map(|_| 0..8).collect();
        assert_eq!(jobs, want);
    }
    let s = r.summary();
    assert!(
        s.contains("  depth: iodepth=32 requested, 256 in flight (batched)\n"),
        "{s}"
    );
    assert!(s.starts_with("job: (g=0): rw=randread, bs=4096B, ioengine=libaio, iodepth=32\n"));
}

#[test]
fn batches_are_capped_and_continue_round_robin() {
    let mut os = FakeOs::new();
    let mut b = Batcher::new(&mut os);
    // 3 jobs x 100 = 300 wanted: 256, then the other 44.
    let r = run_b(
        &mut b,
        &[
            "--size=400k",
            "--ioengine=libaio",
            "--iodepth=100",
            "--numjobs=3",
        ],
    );
    assert_eq!(r.read.ios, 300);
    assert_eq!(b.sizes(), [MAX_BATCH, 44]);
    assert_eq!(r.effective_iodepth, 150);
    let batches = b.data_batches();
    let first_fd = batches[0].iter().map(|io| io.0).min().unwrap();
    let count =
        |batch: &[BatchEntry], j: u32| job_of(batch, first_fd).iter().filter(|&&x| x == j).count();
    assert_eq!(
        (0..3).map(|j| count(&batches[0], j)).collect::<Vec<_>>(),
        [86, 85, 85]
    );
    assert_eq!(
        (0..3).map(|j| count(&batches[1], j)).collect::<Vec<_>>(),
        [14, 15, 15]
    );
    // The second batch starts with the job after the last one served.
    assert_eq!(job_of(&batches[1], first_fd)[..3], [1, 2, 0]);

    // 2 jobs x 256: batches of 256 (128 each).
    let mut os = FakeOs::new();
    let mut b = Batcher::new(&mut os);
    let r = run_b(
        &mut b,
        &[
            "--size=1m",
            "--ioengine=libaio",
            "--iodepth=256",
            "--numjobs=2",
        ],
    );
    assert_eq!(b.sizes(), [256, 256]);
    assert_eq!(r.effective_iodepth, 256);

    // Large blocks: the batch is bounded by its buffers.
    let per = MAX_BATCH_BYTES / (1 << 20);
    let mut os = FakeOs::new();
    let mut b = Batcher::new(&mut os);
    let r = run_b(
        &mut b,
        &[
            "--size=16m",
            "--bs=1m",
            "--rw=write",
            "--ioengine=libaio",
            "--iodepth=32",
        ],
    );
    assert_eq!(b.sizes(), vec![per; 16 / per]);
    assert_eq!(r.effective_iodepth as usize, per);
    assert_eq!(pattern::first_mismatch(&os.files["/job.0.0"], 0), None);
}

#[test]
fn effective_iodepth_is_the_rounded_mean() {
    for (args, sizes, eff) in [
        // 256 blocks at depth 100: 100, 100, 56 -> 85.3
        (
            &["--size=1m", "--iodepth=100"][..],
            &[100usize, 100, 56][..],
            85,
        ),
        // 3 blocks at depth 2: 2, 1 -> 1.5 rounds up
        (&["--size=12k", "--iodepth=2"], &[2, 1], 2),
        (&["--size=16k", "--iodepth=1"], &[1, 1, 1, 1], 1),
        (
            &["--size=16k", "--iodepth=1", "--numjobs=3"],
            &[3, 3, 3, 3],
            3,
        ),
        // 5 blocks at depth 4 for 2 jobs: 8, 2 -> 5
        (&["--size=20k", "--iodepth=4", "--numjobs=2"], &[8, 2], 5),
    ] {
        let mut os = FakeOs::new();
        let mut b = Batcher::new(&mut os);
        let mut all = args.to_vec();
        all.push("--ioengine=libaio");
        let r = run_b(&mut b, &all);
        assert_eq!(b.sizes(), sizes, "{args:?}");
        assert_eq!(r.effective_iodepth, eff, "{args:?}");
        let j = r.json();
        assert!(j.contains(&format!("\"effective_iodepth\":{eff},")), "{j}");
    }
}

#[test]
fn size_limited_runs_visit_every_offset_once() {
    for rw in ["read", "randread", "write", "randwrite", "randrw"] {
        for (depth, jobs) in [(1, 1), (7, 2), (64, 3), (256, 1)] {
            let mut os = FakeOs::new();
            let mut b = Batcher::new(&mut os);
            let args = [
                "--size=256k",
                &format!("--rw={rw}"),
                "--ioengine=libaio",
                &format!("--iodepth={depth}"),
                &format!("--numjobs={jobs}"),
            ];
            let r = run_b(&mut b, &args);
            assert_eq!(r.read.ios + r.write.ios, 64 * jobs, "{args:?}");
            let total: usize = b.sizes().iter().sum();
            assert_eq!(total as u64, 64 * jobs, "{args:?}");
            for s in b.sizes() {
                assert!(s as u64 <= (depth * jobs).min(256), "{args:?}: {s}");
            }
            // Every block of every file exactly once (reads and writes of
            // a random mix share one random map).
            let mut per_file: BTreeMap<String, Vec<u64>> = BTreeMap::new();
            for w in [false, true] {
                for (f, offs) in offsets_by_file(&os, w) {
                    per_file.entry(f).or_default().extend(offs);
                }
            }
            assert_eq!(per_file.len() as u64, jobs, "{args:?}");
            for (f, mut offs) in per_file {
                if !rw.starts_with("rand") {
                    let sorted = offs.windows(2).all(|w| w[0] < w[1]);
                    assert!(sorted, "{args:?} {f}: sequential order");
                }
                offs.sort_unstable();
                assert_eq!(
                    offs,
                    (0..64).map(|b| b * 4096).collect::<Vec<_>>(),
                    "{args:?} {f}"
                );
            }
            if rw.contains("write") {
                for j in 0..jobs {
                    let data = &os.files[&format!("/job.{j}.0")];
                    assert_eq!(pattern::first_mismatch(data, 0), None, "{args:?}");
                }
            }
        }
    }
    // Random order is the same as psync's (same seed, same random map).
    let mut os = FakeOs::new();
    run_fake(&mut os, &["--size=256k", "--rw=randread", "--randseed=5"]);
    let psync = offsets_by_file(&os, false);
    let mut os = FakeOs::new();
    run_fake(
        &mut os,
        &[
            "--size=256k",
            "--rw=randread",
            "--randseed=5",
            "--ioengine=libaio",
            "--iodepth=16",
        ],
    );
    assert_eq!(offsets_by_file(&os, false), psync);
}

fn batch_cost(call: u64, _n: usize) -> u64 {
    // Call 0 is the probe; batch k of the run takes (k + 1) * 10 us.
    call * 10_000
}

#[test]
fn latencies_are_per_batch() {
    let mut os = FakeOs::new();
    let mut b = Batcher::new(&mut os);
    b.cost = Some(batch_cost);
    let r = run_b(
        &mut b,
        &[
            "--size=32k",
            "--rw=randrw",
            "--ioengine=libaio",
            "--iodepth=4",
            "--numjobs=2",
        ],
    );
    // Two batches of 8: 10 us and 20 us.
    assert_eq!(b.sizes(), [8, 8]);
    assert_eq!(r.read.ios + r.write.ios, 16);
    assert_eq!(r.elapsed_ns, 30_000);
    let mut lats = Vec::new();
    for d in [&r.read, &r.write] {
        if let Some(l) = d.lat {
            assert!(l.min == 10_000 || l.min == 20_000, "{l:?}");
            assert!(l.max == 10_000 || l.max == 20_000, "{l:?}");
            lats.push(l);
        }
    }
    assert!(!lats.is_empty());
    // Every I/O gets its batch's time: the mean over both directions is
    // 15 us (each direction's mean is rounded down).
    let sum: u64 = [&r.read, &r.write]
        .iter()
        .filter_map(|d| d.lat.map(|l| l.mean * d.ios))
        .sum();
    assert!((16 * 15_000 - 16..=16 * 15_000).contains(&sum), "{sum}");
    // 16 I/Os in 30 us.
    assert_eq!(
        r.read.iops_milli + r.write.iops_milli,
        16 * 1_000_000_000_000 / 30_000
    );

    let mut os = FakeOs::new();
    let mut b = Batcher::new(&mut os);
    b.cost = Some(batch_cost);
    let r = run_b(&mut b, &["--size=64k", "--ioengine=libaio", "--iodepth=4"]);
    assert_eq!(b.sizes(), [4, 4, 4, 4]);
    assert_eq!(
        r.read.lat,
        Some(Latency {
            min: 10_000,
            mean: 25_000,
            p50: 20_000,
            p99: 40_000,
            p999: 40_000,
            max: 40_000
        })
    );
    assert_eq!(r.elapsed_ns, 100_000);
}

fn flat_batch(_call: u64, _n: usize) -> u64 {
    1000
}

#[test]
fn runtime_and_ramp_count_whole_batches() {
    let mut os = FakeOs::new();
    let mut b = Batcher::new(&mut os);
    b.cost = Some(flat_batch);
    let r = run_b(
        &mut b,
        &[
            "--size=64k",
            "--rw=randread",
            "--ioengine=libaio",
            "--iodepth=4",
            "--numjobs=2",
            "--time_based",
            "--runtime=10us",
            "--ramp_time=5us",
        ],
    );
    assert!(r.hit_runtime);
    // 5 ramp batches, then 10 measured ones, all of 8.
    assert_eq!(b.sizes(), [8; 15]);
    assert_eq!(r.read.ios, 80);
    assert_eq!(r.elapsed_ns, 10_000);
    assert_eq!(r.effective_iodepth, 8);
    assert_eq!(r.read.lat.unwrap().max, 1000);

    // A size-limited run cut by the runtime.
    let mut os = FakeOs::new();
    let mut b = Batcher::new(&mut os);
    b.cost = Some(flat_batch);
    let r = run_b(
        &mut b,
        &[
            "--size=1m",
            "--ioengine=libaio",
            "--iodepth=8",
            "--runtime=3us",
        ],
    );
    assert!(r.hit_runtime);
    assert_eq!(r.read.ios, 24);

    // Ramp I/Os do not count towards the size.
    let mut os = FakeOs::new();
    let mut b = Batcher::new(&mut os);
    b.cost = Some(flat_batch);
    let r = run_b(
        &mut b,
        &[
            "--size=64k",
            "--ioengine=libaio",
            "--iodepth=8",
            "--ramp_time=2us",
        ],
    );
    assert_eq!(b.sizes(), [8, 8, 8, 8]);
    assert_eq!(r.read.ios, 16);
    assert_eq!(r.elapsed_ns, 2000);
}

#[test]
fn fsync_every_n_writes_with_batches() {
    for (depth, jobs, n, batches, fsyncs) in [
        // 16 writes per job.
        (8u32, 1u32, 4u32, vec![4usize, 4, 4, 4], 4u64),
        (8, 1, 5, vec![5, 5, 5, 1], 3),
        (2, 1, 5, vec![2, 2, 1, 2, 2, 1, 2, 2, 1, 1], 3),
        (8, 2, 3, vec![6, 6, 6, 6, 6, 2], 10),
        (16, 1, 0, vec![16], 0),
    ] {
        let mut os = FakeOs::new();
        let mut b = Batcher::new(&mut os);
        let args = [
            "--size=64k",
            "--rw=write",
            "--ioengine=libaio",
            &format!("--iodepth={depth}"),
            &format!("--numjobs={jobs}"),
            &format!("--fsync={n}"),
        ];
        let r = run_b(&mut b, &args);
        assert_eq!(b.sizes(), batches, "{args:?}");
        assert_eq!(r.fsyncs, fsyncs, "{args:?}");
        // Per file: an fsync after every n writes, none in between.
        if n > 0 {
            let mut since: BTreeMap<String, u32> = BTreeMap::new();
            let drop_at = os.log.iter().position(|o| *o == Op::Drop).unwrap();
            for o in &os.log[drop_at..] {
                match o {
                    Op::Io {
                        write: true, path, ..
                    } => {
                        let c = since.entry(path.clone()).or_default();
                        *c += 1;
                        assert!(*c <= n, "{args:?}");
                    }
                    Op::Fsync(path) => {
                        assert_eq!(since.insert(path.clone(), 0), Some(n), "{args:?}");
                    }
                    _ => {}
                }
            }
        }
    }
}

#[test]
fn an_error_in_one_io_fails_the_run() {
    // The sixth read of the first batch fails, and every read after it.
    let mut os = FakeOs::new();
    os.fault = Some(("read", 5, Errno::Io));
    let mut b = Batcher::new(&mut os);
    // Layout writes; the run's reads start at the first batch.
    let e = err_b(&mut b, &["--size=64k", "--ioengine=libaio", "--iodepth=8"]);
    assert_eq!(
        e,
        "fio: /job.0.0: read at 20480: I/O error; 3 of 8 I/Os of the batch failed"
    );

    let mut os = FakeOs::new();
    os.fault = Some(("write", 9, Errno::NoSpace));
    let mut b = Batcher::new(&mut os);
    let e = err_b(
        &mut b,
        &[
            "--size=64k",
            "--rw=write",
            "--ioengine=libaio",
            "--iodepth=4",
            "--numjobs=2",
        ],
    );
    // Batches of 8 (4 per job, interleaved): the 10th write is the second
    // I/O of the second batch, job 1's fifth block.
    assert_eq!(
        e,
        format!(
            "fio: /job.1.0: write at 16384: {}; 7 of 8 I/Os of the batch failed",
            Errno::NoSpace
        )
    );

    // A seek failing inside the default io_batch.
    let mut os = FakeOs::new();
    os.fault = Some(("seek", 3, Errno::Unavailable));
    let mut b = Batcher::new(&mut os);
    let e = err_b(
        &mut b,
        &[
            "--size=64k",
            "--rw=randread",
            "--ioengine=libaio",
            "--iodepth=4",
        ],
    );
    assert!(e.starts_with("fio: /job.0.0: read at "), "{e}");
    assert!(
        e.ends_with(&format!(
            ": {}; 2 of 4 I/Os of the batch failed",
            Errno::Unavailable
        )),
        "{e}"
    );

    // End of file: a short read.
    let mut os = FakeOs::new();
    os.on_drop = Some(("/job.0.0".to_string(), 6000));
    let mut b = Batcher::new(&mut os);
    let e = err_b(&mut b, &["--size=16k", "--ioengine=libaio", "--iodepth=4"]);
    assert_eq!(
        e,
        "fio: /job.0.0: read at 4096: short (1904 of 4096 bytes); 3 of 4 I/Os of the batch failed"
    );

    // The whole call failing.
    let mut os = FakeOs::new();
    let mut b = Batcher::new(&mut os);
    b.fail = Some((2, Errno::Unavailable));
    let e = err_b(&mut b, &["--size=64k", "--ioengine=libaio", "--iodepth=4"]);
    assert_eq!(
        e,
        format!("fio: io_batch of 4 I/Os: {}", Errno::Unavailable)
    );
    assert_eq!(b.sizes(), [4, 4]);

    // fsync after a batch.
    let mut os = FakeOs::new();
    os.fault = Some(("fsync", 1, Errno::Io));
    let mut b = Batcher::new(&mut os);
    let e = err_b(
        &mut b,
        &[
            "--size=64k",
            "--rw=write",
            "--ioengine=libaio",
            "--iodepth=8",
            "--fsync=2",
        ],
    );
    assert_eq!(e, "fio: /job.0.0: fsync: I/O error");
}

#[test]
fn libaio_without_batches_or_seek_is_refused() {
    let msg = "fio: ioengine=libaio not supported in this mode (needs io_batch, or seek)";
    let mut os = FakeOs::new();
    os.can_seek = false;
    let e = super::run_err(&mut os, &["--size=16k", "--ioengine=libaio"]);
    assert_eq!(e, msg);
    // Refused before the cache drop and before any read of the run.
    assert_eq!(os.count(|o| *o == Op::Drop), 0);
    assert_eq!(os.count(|o| matches!(o, Op::Io { write: false, .. })), 0);

    let mut os = FakeOs::new();
    let mut b = Batcher::new(&mut os);
    b.fail = Some((0, Errno::NotSupported));
    assert_eq!(err_b(&mut b, &["--size=16k", "--ioengine=libaio"]), msg);
    let mut b = Batcher::new(&mut os);
    b.fail = Some((1, Errno::NotSupported));
    assert_eq!(err_b(&mut b, &["--size=16k", "--ioengine=libaio"]), msg);

    let mut os = FakeOs::new();
    let mut b = Batcher::new(&mut os);
    b.fail = Some((0, Errno::Unavailable));
    assert_eq!(
        err_b(&mut b, &["--size=16k", "--ioengine=libaio"]),
        format!("fio: /job.0.0: io_batch: {}", Errno::Unavailable)
    );

    // Through the shell (its mock cannot seek).
    let mut m = MockOs::new();
    assert_eq!(
        super::shell(&mut m, "fio --size=16k --ioengine=libaio --iodepth=32"),
        format!("error: {msg}\n")
    );
}

#[test]
fn stuck_clock_with_batches() {
    fn no_time(_: u64, _: usize) -> u64 {
        0
    }
    let mut os = FakeOs::new();
    let mut b = Batcher::new(&mut os);
    b.cost = Some(no_time);
    let spec = p(&[
        "--size=16k",
        "--ioengine=libaio",
        "--iodepth=4",
        "--time_based",
        "--runtime=1",
    ]);
    let limits = Limits {
        reservoir: 100,
        stuck_ios: 1000,
    };
    let e = run_with(&mut b, &spec, &env(), limits).unwrap_err();
    assert_eq!(
        format!("{e}"),
        "fio: the clock does not advance (uptime_ns is stuck)"
    );
    assert_eq!(b.inner.open_fds(), 0);
    // About stuck_ios I/Os, not stuck_ios batches.
    assert!(b.sizes().len() <= 1000 / 4 + 2, "{}", b.sizes().len());
}

#[test]
fn libaio_end_to_end_json() {
    let mut os = FakeOs::new();
    let out = command(
        &mut os,
        &[
            "--size=64k",
            "--rw=randrw",
            "--ioengine=libaio",
            "--iodepth=32",
            "--numjobs=2",
        ],
    )
    .unwrap();
    assert!(
        out.contains("  depth: iodepth=32 requested, 32 in flight (batched)\n"),
        "{out}"
    );
    let line = out.lines().find(|l| l.starts_with("RESULT ")).unwrap();
    let v = jsonck::parse(&line["RESULT ".len()..]).expect("valid JSON");
    assert_eq!(v.get("ioengine").str(), "libaio");
    assert_eq!(v.get("iodepth").u64(), 32);
    assert_eq!(v.get("effective_iodepth").u64(), 32);
    assert_eq!(
        v.get("read").get("ios").u64() + v.get("write").get("ios").u64(),
        32
    );
}
