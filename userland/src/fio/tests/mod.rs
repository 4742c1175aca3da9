use alloc::collections::BTreeSet;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

use super::offsets::{Ddir, Mix, OffsetGen, Permutation, SplitMix64};
use super::options::{time_ns, DEFAULT_RANDSEED};
use super::report::{human, Samples};
use super::runner::{run_with, Limits};
use super::*;
use crate::mock::MockOs;
use crate::os::Errno;
use crate::pattern;
use crate::shell::{Outcome, Shell};

mod fake;
mod jsonck;
mod libaio;
mod tasks;
mod zipf;

use fake::{FakeOs, Op};

fn p(args: &[&str]) -> JobSpec {
    parse(args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn perr(args: &[&str]) -> String {
    match parse(args) {
        Ok(s) => panic!("{args:?} accepted: {s:?}"),
        Err(e) => format!("{e}"),
    }
}

fn env() -> RunEnv {
    RunEnv {
        node: 1,
        mode: String::from("onecopy"),
        busy_instances: 2,
        vcpus_per_instance: 1,
    }
}

fn run_fake(os: &mut FakeOs, args: &[&str]) -> Report {
    let spec = p(args);
    let r = run_with(os, &spec, &env(), Limits::default()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(os.open_fds(), 0, "descriptor leaked");
    r
}

fn run_err(os: &mut FakeOs, args: &[&str]) -> String {
    let spec = p(args);
    let e = match run_with(os, &spec, &env(), Limits::default()) {
        Ok(r) => panic!("{args:?} ran: {r:?}"),
        Err(e) => format!("{e}"),
    };
    assert_eq!(os.open_fds(), 0, "descriptor leaked");
    e
}

// --- options ---------------------------------------------------------------

#[test]
fn defaults() {
    let s = p(&["--size=1m"]);
    assert_eq!(
        s,
        JobSpec {
            name: "job".to_string(),
            rw: Rw::Read,
            rwmixread: 50,
            bs: 4096,
            size: 1 << 20,
            filename: None,
            directory: None,
            numjobs: 1,
            iodepth: 1,
            runtime_ns: 0,
            time_based: false,
            ioengine: Engine::Psync,
            invalidate: true,
            fsync: 0,
            ramp_ns: 0,
            randseed: DEFAULT_RANDSEED,
            zipf_theta: None,
            group: None,
        }
    );
    assert_eq!(s.file_for(0), "/job.0.0");
    assert_eq!(s.ios_per_job(), 256);
}

#[test]
fn every_option_is_accepted() {
    let s = p(&[
        "--name=lat",
        "--rw=randrw",
        "--rwmixread=70",
        "--bs=128k",
        "--size=1g",
        "--filename=data/f",
        "--directory=/d/",
        "--numjobs=8",
        "--iodepth=32",
        "--runtime=10",
        "--time_based",
        "--ioengine=mmap",
        "--invalidate=0",
        "--fsync=4",
        "--ramp_time=500ms",
        "--randseed=42",
        "--group_reporting",
    ]);
    assert_eq!(s.name, "lat");
    assert_eq!(s.rw, Rw::RandRw);
    assert_eq!(s.rwmixread, 70);
    assert_eq!(s.bs, 128 << 10);
    assert_eq!(s.size, 1 << 30);
    assert_eq!(s.filename.as_deref(), Some("data/f"));
    assert_eq!(s.directory.as_deref(), Some("/d"));
    assert_eq!(s.numjobs, 8);
    assert_eq!(s.iodepth, 32);
    assert_eq!(s.runtime_ns, 10_000_000_000);
    assert!(s.time_based);
    assert_eq!(s.ioengine, Engine::Mmap);
    assert!(!s.invalidate);
    assert_eq!(s.fsync, 4);
    assert_eq!(s.ramp_ns, 500_000_000);
    assert_eq!(s.randseed, 42);
    assert_eq!(s.file_for(0), "/d/data/f");
    assert_eq!(s.file_for(7), "/d/data/f");
}

#[test]
fn aliases_and_spellings() {
    assert_eq!(p(&["--size=1m", "--rw=readwrite"]).rw, Rw::ReadWrite);
    assert_eq!(p(&["--size=1m", "--readwrite=randread"]).rw, Rw::RandRead);
    assert_eq!(p(&["--size=1m", "--blocksize=8k"]).bs, 8192);
    assert_eq!(p(&["--size=1m", "--ioengine=sync"]).ioengine, Engine::Psync);
    assert_eq!(
        p(&["--size=1m", "--ioengine=psync"]).ioengine,
        Engine::Psync
    );
    assert_eq!(p(&["--size=1m", "--rwmixwrite=30"]).rwmixread, 70);
    assert_eq!(p(&["--size=1m", "--randseed=0x10"]).randseed, 16);
    assert_eq!(
        p(&["--size=1m", "--randseed=18446744073709551615"]).randseed,
        u64::MAX
    );
    assert_eq!(p(&["--size=4096", "--bs=4096"]).size, 4096);
    assert_eq!(p(&["--size=2G"]).size, 2 << 30);
    assert!(p(&["--size=1m", "--runtime=1", "--time_based=1"]).time_based);
    assert!(!p(&["--size=1m", "--time_based=0"]).time_based);
    assert!(p(&["--size=1m", "--invalidate=1"]).invalidate);
    for (rw, name) in [
        ("read", "read"),
        ("write", "write"),
        ("randread", "randread"),
        ("randwrite", "randwrite"),
        ("rw", "rw"),
        ("readwrite", "rw"),
        ("randrw", "randrw"),
    ] {
        assert_eq!(p(&["--size=1m", &format!("--rw={rw}")]).rw.as_str(), name);
    }
}

#[test]
fn later_options_override_earlier_ones() {
    let s = p(&[
        "--size=1m",
        "--bs=8k",
        "--size=2m",
        "--bs=16k",
        "--rw=write",
    ]);
    assert_eq!((s.size, s.bs, s.rw), (2 << 20, 16 << 10, Rw::Write));
}

#[test]
fn file_names_like_fio() {
    let s = p(&["--size=1m", "--name=x", "--directory=/d"]);
    assert_eq!(s.file_for(3), "/d/x.3.0");
    let s = p(&["--size=1m", "--filename=/abs/f"]);
    assert_eq!(s.file_for(5), "/abs/f");
    let s = p(&["--size=1m", "--filename=rel"]);
    assert_eq!(s.file_for(0), "/rel");
    let s = p(&["--size=1m", "--directory=d//e/"]);
    assert_eq!(s.file_for(1), "/d/e/job.1.0");
}

#[test]
fn times() {
    assert_eq!(time_ns("0"), Some(0));
    assert_eq!(time_ns("10"), Some(10_000_000_000));
    assert_eq!(time_ns("10s"), Some(10_000_000_000));
    assert_eq!(time_ns("250ms"), Some(250_000_000));
    assert_eq!(time_ns("7us"), Some(7_000));
    assert_eq!(time_ns("2m"), Some(120_000_000_000));
    assert_eq!(time_ns("1h"), Some(3_600_000_000_000));
    assert_eq!(time_ns("1d"), Some(86_400_000_000_000));
    assert_eq!(time_ns("5MS"), Some(5_000_000));
    for bad in [
        "",
        "s",
        "1.5",
        "-1",
        "1x",
        "1 s",
        "99999999999999999999",
        "999999999d",
    ] {
        assert_eq!(time_ns(bad), None, "{bad}");
    }
}

#[test]
fn rejections_are_fio_style() {
    let cases: &[(&[&str], &str)] = &[
        (&["--size=1m", "--foo=1"], "fio: unrecognized option '--foo'"),
        (&["--size=1m", "--foo"], "fio: unrecognized option '--foo'"),
        (&["--size=1m", "--direct=1"], "fio: unrecognized option '--direct'"),
        (&["--size=1m", "-b"], "fio: unrecognized option '-b' (job files are not supported; use --opt=value)"),
        (&["job.fio"], "fio: unrecognized option 'job.fio' (job files are not supported; use --opt=value)"),
        (&["--size=1m", "--"], "fio: unrecognized option '--'"),
        (&["--size=1m", "--=4k"], "fio: unrecognized option '--'"),
        (&["--size=1m", "--BS=4k"], "fio: unrecognized option '--BS'"),
        (&["--bs", "4k", "--size=1m"], "fio: option '--bs' requires a value (--bs=VALUE)"),
        (&["--size"], "fio: option '--size' requires a value (--size=VALUE)"),
        (&["--size=1m", "--bs=x"], "fio: bad value 'x' for option 'bs' (a multiple of 512 from 512 to 16m)"),
        (&["--size=1m", "--bs=1000"], "fio: bad value '1000' for option 'bs' (a multiple of 512 from 512 to 16m)"),
        (&["--size=1m", "--bs=256"], "fio: bad value '256' for option 'bs' (a multiple of 512 from 512 to 16m)"),
        (&["--size=1g", "--bs=32m"], "fio: bad value '32m' for option 'bs' (a multiple of 512 from 512 to 16m)"),
        (&["--size=1m", "--bs=0"], "fio: bad value '0' for option 'bs' (a multiple of 512 from 512 to 16m)"),
        (&["--size=1m", "--blocksize=4k,8k"], "fio: bad value '4k,8k' for option 'bs' (a multiple of 512 from 512 to 16m)"),
        (&["--size=0"], "fio: bad value '0' for option 'size' (1 to 1t, e.g. 64m)"),
        (&["--size=2t"], "fio: bad value '2t' for option 'size' (1 to 1t, e.g. 64m)"),
        (&["--size=50%"], "fio: bad value '50%' for option 'size' (1 to 1t, e.g. 64m)"),
        (&["--size="], "fio: bad value '' for option 'size' (1 to 1t, e.g. 64m)"),
        (&["--size=1m", "--rw=trim"], "fio: bad value 'trim' for option 'rw' (read, write, randread, randwrite, rw, randrw)"),
        (&["--size=1m", "--rw=randread:8"], "fio: bad value 'randread:8' for option 'rw' (read, write, randread, randwrite, rw, randrw)"),
        (&["--size=1m", "--readwrite=READ"], "fio: bad value 'READ' for option 'readwrite' (read, write, randread, randwrite, rw, randrw)"),
        (&["--size=1m", "--rwmixread=101"], "fio: bad value '101' for option 'rwmixread' (0 to 100)"),
        (&["--size=1m", "--rwmixwrite=-1"], "fio: bad value '-1' for option 'rwmixwrite' (0 to 100)"),
        (&["--size=1m", "--numjobs=0"], "fio: bad value '0' for option 'numjobs' (1 to 64)"),
        (&["--size=1m", "--numjobs=65"], "fio: bad value '65' for option 'numjobs' (1 to 64)"),
        (&["--size=1m", "--numjobs=two"], "fio: bad value 'two' for option 'numjobs' (1 to 64)"),
        (&["--size=1m", "--iodepth=0"], "fio: bad value '0' for option 'iodepth' (1 to 256)"),
        (&["--size=1m", "--iodepth=257"], "fio: bad value '257' for option 'iodepth' (1 to 256)"),
        (&["--size=1m", "--runtime=1x"], "fio: bad value '1x' for option 'runtime' (seconds, or with us/ms/s/m/h)"),
        (&["--size=1m", "--ramp_time=-5"], "fio: bad value '-5' for option 'ramp_time' (seconds, or with us/ms/s/m/h)"),
        (&["--size=1m", "--ioengine=io_uring"], "fio: bad value 'io_uring' for option 'ioengine' (psync, sync, libaio or mmap)"),
        (&["--size=1m", "--ioengine=posixaio"], "fio: bad value 'posixaio' for option 'ioengine' (psync, sync, libaio or mmap)"),
        (&["--size=1m", "--invalidate=2"], "fio: bad value '2' for option 'invalidate' (0 or 1, or no value)"),
        (&["--size=1m", "--invalidate="], "fio: bad value '' for option 'invalidate' (0 or 1, or no value)"),
        (&["--size=1m", "--time_based=yes"], "fio: bad value 'yes' for option 'time_based' (0 or 1, or no value)"),
        (&["--size=1m", "--group_reporting=2"], "fio: bad value '2' for option 'group_reporting' (0 or 1, or no value)"),
        (&["--size=1m", "--fsync=-1"], "fio: bad value '-1' for option 'fsync' (0 to 4294967295)"),
        (&["--size=1m", "--fsync=4294967296"], "fio: bad value '4294967296' for option 'fsync' (0 to 4294967295)"),
        (&["--size=1m", "--randseed=abc"], "fio: bad value 'abc' for option 'randseed' (an integer)"),
        (&["--size=1m", "--randseed=0x"], "fio: bad value '0x' for option 'randseed' (an integer)"),
        (&["--size=1m", "--randseed=18446744073709551616"], "fio: bad value '18446744073709551616' for option 'randseed' (an integer)"),
        (&["--size=1m", "--name="], "fio: bad value '' for option 'name' (1 to 48 characters, no '/', not starting with '.')"),
        (&["--size=1m", "--name=a/b"], "fio: bad value 'a/b' for option 'name' (1 to 48 characters, no '/', not starting with '.')"),
        (&["--size=1m", "--name=.."], "fio: bad value '..' for option 'name' (1 to 48 characters, no '/', not starting with '.')"),
        (&["--size=1m", "--name=a", "--name=b"], "fio: only one job section is supported (--name given twice)"),
        (&["--size=1m", "--filename="], "fio: bad value '' for option 'filename' (a file path)"),
        (&["--size=1m", "--filename=/"], "fio: bad value '/' for option 'filename' (a file path)"),
        (&["--size=1m", "--directory="], "fio: bad value '' for option 'directory' (a directory path)"),
        (
            &["--size=1m", "--directory=d/../e"],
            "fio: bad value 'd/../e' for option 'directory' (a directory path without '.' or '..')",
        ),
        (
            &["--size=1m", "--filename=/x/./f"],
            "fio: bad value '/x/./f' for option 'filename' (a file path without '.' or '..')",
        ),
        (&[], "fio: option '--size' is required (e.g. --size=64m)"),
        (&["--rw=read", "--bs=4k"], "fio: option '--size' is required (e.g. --size=64m)"),
        (&["--size=1k", "--bs=4k"], "fio: size 1024 is smaller than bs 4096"),
        (&["--size=1m", "--time_based"], "fio: time_based needs a runtime (e.g. --runtime=10)"),
        (&["--size=1m", "--time_based", "--runtime=0"], "fio: time_based needs a runtime (e.g. --runtime=10)"),
    ];
    for (args, want) in cases {
        assert_eq!(perr(args), *want, "{args:?}");
    }
}

#[test]
fn long_values_are_shortened_in_errors() {
    let long = format!("--bs={}", "9".repeat(200));
    let e = perr(&["--size=1m", &long]);
    assert!(e.len() < 140, "{e}");
    assert!(e.contains("...'"), "{e}");
    assert_eq!(
        perr(&["--size=1m", "--rw=a\nb"]),
        "fio: bad value 'a?b' for option 'rw' (read, write, randread, randwrite, rw, randrw)"
    );
    let name = format!("--name={}", "n".repeat(49));
    assert!(perr(&["--size=1m", &name]).starts_with("fio: bad value 'nnn"));
    let name = format!("--name={}", "n".repeat(48));
    assert_eq!(p(&["--size=1m", &name]).name.len(), 48);
}

#[test]
fn first_error_wins_and_nothing_else_matters() {
    // The unknown option comes first; the missing size is not reported.
    assert_eq!(
        perr(&["--nope", "--bs=x"]),
        "fio: unrecognized option '--nope'"
    );
    assert_eq!(
        perr(&["--bs=x", "--nope"]),
        "fio: bad value 'x' for option 'bs' (a multiple of 512 from 512 to 16m)"
    );
}

// --- offsets ---------------------------------------------------------------

fn offsets(args: &[&str], job: u32, n: usize, dir: Ddir) -> Vec<u64> {
    let s = p(args);
    let mut g = OffsetGen::new(&s, job);
    (0..n).map(|_| g.next_offset(dir)).collect()
}

#[test]
fn splitmix_below_is_in_range_and_known() {
    let mut r = SplitMix64::new(0);
    // The reference SplitMix64 sequence from seed 0.
    assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
    assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    for n in [1u64, 2, 3, 7, 100, 1 << 40, u64::MAX] {
        for _ in 0..200 {
            assert!(r.below(n) < n);
        }
    }
    assert_eq!(r.below(0), 0);
}

#[test]
fn permutation_is_a_bijection() {
    for n in (1..=300u64).chain([1023, 1024, 1025, 4096, 65_537]) {
        for seed in [0u64, 1, 0x89, u64::MAX] {
            let perm = Permutation::new(n, seed);
            let mut seen = vec![false; n as usize];
            for i in 0..n {
                let v = perm.apply(i);
                assert!(v < n, "n={n} i={i} v={v}");
                assert!(!seen[v as usize], "n={n} dup {v}");
                seen[v as usize] = true;
            }
        }
    }
    let perm = Permutation::new(10, 1);
    assert_eq!(perm.apply(10), 10);
    assert_eq!(perm.apply(u64::MAX), u64::MAX);
    // Large domains work without a table.
    let perm = Permutation::new(1 << 31, 7);
    for i in [0u64, 1, 12_345, (1 << 31) - 1] {
        assert!(perm.apply(i) < 1 << 31);
    }
}

#[test]
fn offsets_are_aligned_and_in_range() {
    for args in [
        &["--size=1m", "--rw=randread"][..],
        &["--size=1000000", "--bs=4k", "--rw=randwrite"],
        &["--size=10k", "--bs=4k", "--rw=read"],
        &["--size=13k", "--bs=512", "--rw=randrw"],
        &["--size=16m", "--bs=16m", "--rw=randread"],
    ] {
        let s = p(args);
        for job in [0, 1, 63] {
            let mut g = OffsetGen::new(&s, job);
            for i in 0..5000 {
                let dir = if i % 3 == 0 { Ddir::Write } else { Ddir::Read };
                let o = g.next_offset(dir);
                assert_eq!(o % s.bs, 0, "{args:?}");
                assert!(o + s.bs <= s.size, "{args:?}: {o}");
            }
        }
    }
}

#[test]
fn offsets_are_deterministic_per_seed_and_job() {
    let a = offsets(&["--size=1m", "--rw=randread"], 0, 256, Ddir::Read);
    let b = offsets(&["--size=1m", "--rw=randread"], 0, 256, Ddir::Read);
    assert_eq!(a, b);
    let c = offsets(&["--size=1m", "--rw=randread"], 1, 256, Ddir::Read);
    assert_ne!(a, c);
    let d = offsets(
        &["--size=1m", "--rw=randread", "--randseed=1"],
        0,
        256,
        Ddir::Read,
    );
    assert_ne!(a, d);
    // Job j with seed s is job 0 with seed s + j.
    let e = offsets(
        &["--size=1m", "--rw=randread", "--randseed=138"],
        0,
        256,
        Ddir::Read,
    );
    assert_eq!(c, e);
}

#[test]
fn sequential_covers_the_file_once_then_wraps() {
    let o = offsets(&["--size=40k", "--bs=4k", "--rw=read"], 0, 25, Ddir::Read);
    let want: Vec<u64> = (0..10).chain(0..10).chain(0..5).map(|b| b * 4096).collect();
    assert_eq!(o, want);
    // A size that is not a multiple of bs: the tail is never touched.
    let o = offsets(&["--size=10k", "--bs=4k", "--rw=write"], 0, 4, Ddir::Write);
    assert_eq!(o, [0, 4096, 0, 4096]);
}

#[test]
fn sequential_mixed_keeps_a_stream_per_direction() {
    let s = p(&["--size=40k", "--rw=rw"]);
    let mut g = OffsetGen::new(&s, 0);
    assert_eq!(g.next_offset(Ddir::Read), 0);
    assert_eq!(g.next_offset(Ddir::Read), 4096);
    assert_eq!(g.next_offset(Ddir::Write), 0);
    assert_eq!(g.next_offset(Ddir::Read), 8192);
    assert_eq!(g.next_offset(Ddir::Write), 4096);
}

#[test]
fn random_visits_every_block_once_per_pass() {
    let s = p(&["--size=1m", "--rw=randread"]);
    let mut g = OffsetGen::new(&s, 0);
    assert_eq!(g.blocks(), 256);
    let pass1: Vec<u64> = (0..256).map(|_| g.next_offset(Ddir::Read)).collect();
    let pass2: Vec<u64> = (0..256).map(|_| g.next_offset(Ddir::Read)).collect();
    let all: BTreeSet<u64> = (0..256).map(|b| b * 4096).collect();
    assert_eq!(pass1.iter().copied().collect::<BTreeSet<_>>(), all);
    assert_eq!(pass2.iter().copied().collect::<BTreeSet<_>>(), all);
    assert_ne!(pass1, pass2);
    // Not sequential: few neighbours follow each other.
    let adjacent = pass1.windows(2).filter(|w| w[1] == w[0] + 4096).count();
    assert!(adjacent < 20, "{adjacent}");
}

#[test]
fn random_offsets_are_uniform() {
    // The first offset over many seeds: every one of 16 blocks about equally.
    let mut counts = [0u32; 16];
    for seed in 0..3200u64 {
        let s = p(&["--size=64k", "--rw=randread", &format!("--randseed={seed}")]);
        let mut g = OffsetGen::new(&s, 0);
        counts[(g.next_offset(Ddir::Read) / 4096) as usize] += 1;
    }
    for c in counts {
        assert!((130..=270).contains(&c), "{counts:?}");
    }
}

#[test]
fn mix_ratio_is_honoured() {
    for (pct, lo, hi) in [(50u32, 4800, 5200), (70, 6800, 7200), (10, 850, 1150)] {
        let s = p(&["--size=1m", "--rw=randrw", &format!("--rwmixread={pct}")]);
        let mut m = Mix::new(&s, 0);
        let reads = (0..10_000).filter(|_| m.pick() == Ddir::Read).count();
        assert!((lo..=hi).contains(&reads), "{pct}: {reads}");
    }
    let s = p(&["--size=1m", "--rw=rw", "--rwmixread=0"]);
    let mut m = Mix::new(&s, 0);
    assert!((0..1000).all(|_| m.pick() == Ddir::Write));
    let s = p(&["--size=1m", "--rw=randrw", "--rwmixread=100"]);
    let mut m = Mix::new(&s, 0);
    assert!((0..1000).all(|_| m.pick() == Ddir::Read));
    for (rw, d) in [
        ("read", Ddir::Read),
        ("randread", Ddir::Read),
        ("write", Ddir::Write),
        ("randwrite", Ddir::Write),
    ] {
        let s = p(&["--size=1m", &format!("--rw={rw}"), "--rwmixread=0"]);
        let mut m = Mix::new(&s, 3);
        assert!((0..100).all(|_| m.pick() == d), "{rw}");
    }
}

// --- runner ----------------------------------------------------------------

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

// --- rendering -------------------------------------------------------------

fn sample_report() -> Report {
    let spec = p(&[
        "--name=lat\"x",
        "--rw=randrw",
        "--bs=4k",
        "--size=1m",
        "--iodepth=32",
        "--numjobs=2",
        "--runtime=10",
        "--fsync=8",
    ]);
    Report {
        spec,
        env: env(),
        read: DirStats::new(
            123_456,
            4096,
            10_000_000_000,
            Some(Latency {
                min: 1200,
                mean: 1500,
                p50: 1400,
                p99: 3000,
                p999: 9000,
                max: 98_000,
            }),
        ),
        write: DirStats::new(
            1000,
            4096,
            10_000_000_000,
            Some(Latency {
                min: 2000,
                mean: 2500,
                p50: 2400,
                p99: 5000,
                p999: 7000,
                max: 8000,
            }),
        ),
        elapsed_ns: 10_000_000_000,
        effective_iodepth: 1,
        max_iodepth: 1,
        mean_iodepth_milli: 1000,
        tasks: false,
        fsyncs: 125,
        files: vec!["/lat\"x.0.0".to_string(), "/lat\"x.1.0".to_string()],
        laid_out_files: 2,
        laid_out_bytes: 2 << 20,
        invalidated: Invalidated::Dropped("invalidated 12 owned pages".to_string()),
        hit_runtime: true,
    }
}

#[test]
fn summary_text() {
    let want = "\
lat\"x: (g=0): rw=randrw, bs=4096B, ioengine=psync, iodepth=32
lat\"x: Laying out IO files (2 files / 2048KiB)
Starting 2 processes
lat\"x: (groupid=0, jobs=2): err= 0: node=1, mode=onecopy
  read: IOPS=12.3k, BW=48.2MiB/s (50.5MB/s)(482MiB/10000msec)
    clat (nsec): min=1200, max=98000, avg=1500, p50=1400, p99=3000, p99.9=9000
  write: IOPS=100, BW=400KiB/s (409kB/s)(4000KiB/10000msec)
    clat (nsec): min=2000, max=8000, avg=2500, p50=2400, p99=5000, p99.9=7000
  fsync: 125 calls
  depth: iodepth=32 requested, 1 in flight (synchronous calls; 2 jobs interleaved round-robin)
  busy: 2 instances, 1 vCPU each (node 1 + directory)
  cache: dropped before the run (invalidated 12 owned pages)

Run status group 0 (all jobs):
   READ: bw=48.2MiB/s (50.5MB/s), io=482MiB (505MB), run=10000-10000msec
  WRITE: bw=400KiB/s (409kB/s), io=4000KiB (4096kB), run=10000-10000msec
";
    assert_eq!(sample_report().summary(), want);
}

#[test]
fn summary_variants() {
    let mut r = sample_report();
    r.write = DirStats::default();
    r.read = DirStats::default();
    r.fsyncs = 0;
    r.laid_out_files = 0;
    r.env.busy_instances = 1;
    r.env.vcpus_per_instance = 2;
    r.invalidated = Invalidated::NotSupported;
    let s = r.summary();
    assert!(s.contains("  no I/O completed while measuring\n"), "{s}");
    assert!(
        s.contains("  busy: 1 instance, 2 vCPUs each (node 1)\n"),
        "{s}"
    );
    assert!(s.contains("  cache: not dropped (not supported in this mode)\n"));
    assert!(!s.contains("Laying out") && !s.contains("fsync") && !s.contains("READ"));
    r.env.busy_instances = 5;
    r.invalidated = Invalidated::No;
    let s = r.summary();
    assert!(s.contains("(node 1 + directory + 3 more)"), "{s}");
    assert!(s.contains("  cache: kept (--invalidate=0)\n"));
    r.invalidated = Invalidated::Failed("busy".to_string());
    assert!(r
        .summary()
        .contains("  cache: drop failed (busy); ran anyway\n"));
    r.spec.numjobs = 1;
    assert!(r.summary().contains("Starting 1 process\n"));
    r.spec.numjobs = 8;
    r.tasks = true;
    r.effective_iodepth = 8;
    r.mean_iodepth_milli = 7875;
    r.max_iodepth = 8;
    let s = r.summary();
    assert!(
        s.contains("  depth: iodepth=32 requested, 8 in flight (mean 7.875, max 8; 8 jobs as tasks, waiting I/Os flushed together)\n"),
        "{s}"
    );
}

#[test]
fn result_json_exact_and_valid() {
    let r = sample_report();
    let j = r.json();
    let want = concat!(
        r#"{"name":"lat\"x","rw":"randrw","bs":4096,"size":1048576,"iodepth":32,"#,
        r#""effective_iodepth":1,"mean_iodepth":1.000,"max_iodepth":1,"#,
        r#""numjobs":2,"ioengine":"psync","rwmixread":50,"#,
        r#""runtime_ns":10000000000,"time_based":false,"ramp_ns":0,"fsync":8,"#,
        r#""invalidate":true,"invalidated":"dropped","randseed":137,"#,
        r#""random_distribution":"random","#,
        r#""files":["/lat\"x.0.0","/lat\"x.1.0"],"mode":"onecopy","node":1,"#,
        r#""busy_instances":2,"vcpus_per_instance":1,"#,
        r#""read":{"iops":12345.600,"bw_kib":49382,"bw_bytes":50567577,"ios":123456,"#,
        r#""bytes":505675776,"lat_ns":{"min":1200,"mean":1500,"p50":1400,"p99":3000,"#,
        r#""p999":9000,"max":98000}},"#,
        r#""write":{"iops":100.000,"bw_kib":400,"bw_bytes":409600,"ios":1000,"#,
        r#""bytes":4096000,"lat_ns":{"min":2000,"mean":2500,"p50":2400,"p99":5000,"#,
        r#""p999":7000,"max":8000}},"#,
        r#""elapsed_ns":10000000000,"fsyncs":125,"hit_runtime":true,"#,
        r#""laid_out_bytes":2097152}"#
    );
    assert_eq!(j, want);
    let v = jsonck::parse(&j).expect("valid JSON");
    assert_eq!(v.get("name").str(), "lat\"x");
    assert_eq!(v.get("read").get("lat_ns").get("p999").u64(), 9000);
    let rendered = r.render();
    let last = rendered.lines().last().unwrap();
    assert_eq!(last, format!("RESULT {want}"));
    assert_eq!(
        rendered
            .lines()
            .filter(|l| l.starts_with("RESULT "))
            .count(),
        1
    );
}

#[test]
fn json_strings_are_escaped() {
    let mut out = String::new();
    json::push_str_lit(&mut out, "a\"b\\c\nd\te\r\u{1}\u{7f}é/");
    assert_eq!(out, r#""a\"b\\c\nd\te\r\u0001\u007fé/""#);
    let v = jsonck::parse(&out).unwrap();
    assert_eq!(v.str(), "a\"b\\c\nd\te\r\u{1}\u{7f}é/");
    let mut r = sample_report();
    r.env.mode = "we\"ird\u{0}mode\\".to_string();
    let v = jsonck::parse(&r.json()).expect("valid");
    assert_eq!(v.get("mode").str(), "we\"ird\u{0}mode\\");
    assert_eq!(json::milli(0), "0.000");
    assert_eq!(json::milli(1_234_567), "1234.567");
}

#[test]
fn json_checker_rejects_garbage() {
    for bad in [
        "",
        "{",
        "{\"a\"}",
        "{\"a\":}",
        "{\"a\":1,}",
        "[1,]",
        "01",
        "1.",
        "-",
        "\"\u{1}\"",
        "{\"a\":1}x",
        "tru",
        "\"\\x\"",
        "{'a':1}",
    ] {
        assert!(jsonck::parse(bad).is_err(), "{bad:?}");
    }
    for good in [
        "{}",
        "[]",
        "0",
        "-1.5e3",
        "\"\\u00e9\"",
        "{\"a\":[true,false,null]}",
    ] {
        assert!(jsonck::parse(good).is_ok(), "{good:?}");
    }
}

#[test]
fn end_to_end_json_matches_the_report() {
    let mut os = FakeOs::new();
    os.mode = Some("private".to_string());
    let out = command(&mut os, &["--size=64k", "--rw=randrw", "--rwmixread=75"]).unwrap();
    let line = out.lines().find(|l| l.starts_with("RESULT ")).unwrap();
    let v = jsonck::parse(&line["RESULT ".len()..]).expect("valid JSON");
    assert_eq!(v.get("mode").str(), "private");
    assert_eq!(v.get("node").u64(), 3);
    assert_eq!(v.get("busy_instances").u64(), 2);
    let ios = v.get("read").get("ios").u64() + v.get("write").get("ios").u64();
    assert_eq!(ios, 16);
    assert_eq!(v.get("elapsed_ns").u64(), 16_000);
    assert_eq!(v.get("rwmixread").u64(), 75);
    assert!(out.contains("err= 0: node=3, mode=private"), "{out}");
}

// --- shell -----------------------------------------------------------------

fn shell(os: &mut MockOs, line: &str) -> String {
    let mut sh = Shell::new(1);
    assert_eq!(sh.execute(os, line), Outcome::Continue);
    assert_eq!(os.open_fds(), 0, "descriptor leaked by {line:?}");
    os.take_out()
}

#[test]
fn shell_runs_fio() {
    let mut os = MockOs::new();
    let out = shell(&mut os, "fio --name=s --size=64k --bs=16k --rw=read");
    assert!(out.ends_with("\nok\n"), "{out}");
    assert!(out.starts_with("s: (g=0): rw=read, bs=16384B, ioengine=psync, iodepth=1\n"));
    // The mock knows no cache mode; its directory is up.
    assert!(out.contains("err= 0: node=1, mode=unknown\n"), "{out}");
    assert!(out.contains("  busy: 2 instances, 1 vCPU each (node 1 + directory)\n"));
    assert!(out.contains("  cache: not dropped (not supported in this mode)\n"));
    let line = out.lines().find(|l| l.starts_with("RESULT ")).unwrap();
    let v = jsonck::parse(&line[7..]).expect("valid");
    assert_eq!(v.get("read").get("ios").u64(), 4);
    assert_eq!(os.file("/s.0.0").map(<[u8]>::len), Some(65_536));
    // Writes through the shell too, into a directory.
    shell(&mut os, "mkdir /d");
    let out = shell(
        &mut os,
        "fio --rw=write --size=32k --numjobs=2 --directory=/d --fsync=2",
    );
    assert!(out.ends_with("\nok\n"), "{out}");
    assert!(os.file("/d/job.1.0").is_some());
}

#[test]
fn shell_reports_fio_errors() {
    let mut os = MockOs::new();
    assert_eq!(
        shell(&mut os, "fio --size=1m --foo"),
        "error: fio: unrecognized option '--foo'\n"
    );
    assert_eq!(
        shell(&mut os, "fio --size=1m --bs=x"),
        "error: fio: bad value 'x' for option 'bs' (a multiple of 512 from 512 to 16m)\n"
    );
    assert_eq!(shell(&mut os, "fio"), "error: usage: fio --OPT=VALUE ...\n");
    // The shell mock cannot seek: random I/O is refused after layout.
    assert_eq!(
        shell(&mut os, "fio --size=16k --rw=randread"),
        "error: fio: rw=randread needs positioned I/O (seek), not supported in this mode\n"
    );
    assert_eq!(
        shell(&mut os, "fio --size=16k --ioengine=mmap"),
        "error: fio: ioengine=mmap not supported in this mode\n"
    );
    // Nothing was created by the rejected option lines.
    assert!(os.paths.iter().all(|p| p == "/job.0.0"));
    // Quoted words reach fio without their quotes.
    let out = shell(&mut os, "fio \"--name=a b\" --size=4k");
    assert!(out.starts_with("a b: (g=0)"), "{out}");
    assert!(os.file("/a b.0.0").is_some());
}

#[test]
fn default_run_env() {
    let mut os = MockOs::new();
    let (node, mode, busy) = crate::os::Os::run_env(&mut os);
    assert_eq!((node, mode.as_str(), busy), (1, "unknown", 2));
    os.cluster.nodes[0].state = "down".to_string();
    assert_eq!(RunEnv::from_os(&mut os).busy_instances, 1);
    let mut f = FakeOs::new();
    f.mode = Some("onecopy".to_string());
    assert_eq!(
        RunEnv::from_os(&mut f),
        RunEnv {
            node: 3,
            mode: "onecopy".to_string(),
            busy_instances: 2,
            vcpus_per_instance: 1
        }
    );
}

// --- robustness ------------------------------------------------------------

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn random_arg(rng: &mut Rng) -> String {
    const KEYS: &[&str] = &[
        "name",
        "rw",
        "readwrite",
        "rwmixread",
        "rwmixwrite",
        "bs",
        "blocksize",
        "size",
        "filename",
        "directory",
        "numjobs",
        "iodepth",
        "runtime",
        "time_based",
        "ioengine",
        "invalidate",
        "fsync",
        "ramp_time",
        "randseed",
        "random_distribution",
        "group_reporting",
        "foo",
        "",
        "BS",
    ];
    const VALUES: &[&str] = &[
        "",
        "zipf:0.99",
        "0",
        "1",
        "2",
        "4k",
        "8k",
        "16k",
        "64k",
        "1m",
        "16m",
        "17m",
        "1g",
        "2t",
        "512",
        "513",
        "read",
        "write",
        "randread",
        "randwrite",
        "rw",
        "randrw",
        "psync",
        "sync",
        "mmap",
        "libaio",
        "10",
        "1ms",
        "50us",
        "1x",
        "-1",
        "0x10",
        "0x",
        "/f",
        "/d",
        "a/b",
        "..",
        "é",
        "\u{0}",
        "99999999999999999999",
        "64",
        "65",
        "256",
        "257",
        "100",
        "101",
    ];
    let mut a = String::new();
    match rng.below(10) {
        0 => {
            for _ in 0..rng.below(8) {
                a.push(char::from(rng.below(0x80) as u8));
            }
        }
        1 => a.push_str(&format!("-{}", KEYS[rng.below(KEYS.len())])),
        _ => {
            a.push_str("--");
            a.push_str(KEYS[rng.below(KEYS.len())]);
            if rng.below(5) != 0 {
                a.push('=');
                a.push_str(VALUES[rng.below(VALUES.len())]);
            }
        }
    }
    a
}

#[test]
fn random_argument_vectors_never_panic() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let mut ran = 0;
    for i in 0..4000 {
        let n = rng.below(8);
        let mut owned: Vec<String> = (0..n).map(|_| random_arg(&mut rng)).collect();
        if i % 2 == 0 {
            owned.push(String::from("--size=16k"));
        }
        let args: Vec<&str> = owned.iter().map(String::as_str).collect();
        let Ok(spec) = parse(&args) else {
            let e = parse(&args).unwrap_err();
            assert!(e.message().len() < 200, "{e}");
            assert!(!e.message().contains('\n'));
            continue;
        };
        // Run the small ones on the fake, with a bounded clock budget.
        let small = spec.size.saturating_mul(u64::from(spec.numjobs)) <= 1 << 20
            && spec.runtime_ns <= 100_000
            && spec.ramp_ns <= 100_000;
        if !small {
            continue;
        }
        let mut os = FakeOs::new();
        os.dirs.insert("/d".to_string());
        os.can_mmap = i % 3 != 0;
        os.can_seek = i % 5 != 0;
        os.uptime_tick = 1;
        if i % 7 == 0 {
            os.fault = Some(
                [
                    ("read", 3, Errno::Io),
                    ("write", 20, Errno::NoSpace),
                    ("open", 1, Errno::TooManyFiles),
                ][rng.below(3)],
            );
        }
        let limits = Limits {
            reservoir: 64,
            stuck_ios: 10_000,
        };
        match run_with(&mut os, &spec, &env(), limits) {
            Ok(r) => {
                ran += 1;
                assert!(jsonck::parse(&r.json()).is_ok(), "{}", r.json());
                let s = r.summary();
                assert!(s.ends_with('\n'));
                if !spec.time_based && r.elapsed_ns > 0 && !r.hit_runtime {
                    assert_eq!(
                        r.read.ios + r.write.ios,
                        spec.ios_per_job() * u64::from(spec.numjobs),
                        "{args:?}"
                    );
                }
            }
            Err(e) => assert!(!format!("{e}").contains('\n')),
        }
        assert_eq!(os.open_fds(), 0, "{args:?}");
    }
    assert!(ran > 50, "only {ran} runs");
}
