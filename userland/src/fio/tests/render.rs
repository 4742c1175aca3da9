//! Rendering: the summary text and the RESULT json line.

use super::*;

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
        per_flush_milli: 2500,
        tasks: false,
        fsyncs: 125,
        files: vec!["/lat\"x.0.0".to_string(), "/lat\"x.1.0".to_string()],
        laid_out_files: 2,
        laid_out_bytes: 2 << 20,
        invalidated: Invalidated::Dropped("invalidated 12 owned pages".to_string()),
        hit_runtime: true,
        dists: Default::default(),
        groupid: 0,
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
        s.contains("  depth: iodepth=32 requested, 8 in flight (mean 7.875, max 8; 8 jobs as tasks, waiting I/Os flushed together, 2.500 per flush)\n"),
        "{s}"
    );
}

#[test]
fn result_json_exact_and_valid() {
    let r = sample_report();
    let j = r.json();
    let want = concat!(
        r#"{"name":"lat\"x","rw":"randrw","bs":4096,"size":1048576,"iodepth":32,"#,
        r#""effective_iodepth":1,"mean_iodepth":1.0,"ios_per_flush":2.5,"max_iodepth":1,"#,
        r#""numjobs":2,"ioengine":"psync","rwmixread":50,"#,
        r#""runtime_ns":10000000000,"time_based":false,"ramp_ns":0,"fsync":8,"#,
        r#""invalidate":true,"invalidated":"dropped","randseed":137,"#,
        r#""random_distribution":"random","#,
        r#""files":["/lat\"x.0.0","/lat\"x.1.0"],"mode":"onecopy","node":1,"#,
        r#""busy_instances":2,"vcpus_per_instance":1,"#,
        r#""read":{"iops":12345.6,"bw_kib":49382,"bw_bytes":50567577,"ios":123456,"#,
        r#""bytes":505675776,"lat_ns":{"min":1200,"mean":1500,"p50":1400,"p99":3000,"#,
        r#""p999":9000,"max":98000}},"#,
        r#""write":{"iops":100.0,"bw_kib":400,"bw_bytes":409600,"ios":1000,"#,
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
