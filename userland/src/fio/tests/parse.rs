//! Option parsing: defaults, spellings, overrides and fio-style rejections.

use super::*;

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
        (&["--size=1m", "--direct=1"], "fio: bad value '1' for option 'direct' (only direct=0: every I/O goes through the page cache, which is what is measured)"),
        (&["--size=1m", "--norandommap"], "fio: unrecognized option '--norandommap'"),
        (&["--size=1m", "-b"], "fio: unrecognized option '-b' (options are --opt=value; a job file is given alone: fio FILE)"),
        (&["job.fio"], "fio: unrecognized option 'job.fio' (options are --opt=value; a job file is given alone: fio FILE)"),
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
