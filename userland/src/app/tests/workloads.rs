//! Each workload on the mock.

use alloc::format;
use alloc::string::{String, ToString};

use super::{app, num, os_with, result_line};
use crate::app::NAMES;

/// The same run twice on identical mocks gives the same output.
fn deterministic(name: &str, size: u64, args: &str) -> String {
    let mut a = os_with(name, size, 9);
    let mut b = os_with(name, size, 9);
    let out_a = app(&mut a, args).unwrap();
    let out_b = app(&mut b, args).unwrap();
    assert_eq!(out_a, out_b, "{args}");
    assert_eq!(a.open_fds(), 0, "{args}: descriptors leaked");
    out_a
}

#[test]
fn webserver_reads_ten_files_per_loop_and_appends_a_log() {
    let out = deterministic(
        "webserver",
        1 << 20,
        "webserver --ops 7 --threads 3 --seed 2",
    );
    let j = result_line(&out);
    assert!(j.contains("\"app\":\"webserver\""), "{j}");
    assert_eq!(num(&j, "operations"), 7);
    assert_eq!(num(&j, "threads"), 3);
    let ops = &j[j.find("\"ops\":").unwrap()..];
    assert_eq!(num(ops, "count"), 70, "openfile: 10 per loop");
    let read_at = ops.find("\"readwholefile\"").unwrap();
    assert_eq!(num(&ops[read_at..], "count"), 70);
    let log_at = ops.find("\"appendlog\"").unwrap();
    assert_eq!(num(&ops[log_at..], "count"), 7);
    // It read whole files: at least 70 of the smallest files' bytes.
    assert!(num(&j, "bytes_read") > 70 * 1024, "{j}");
    let w = num(&j, "bytes_written");
    assert!((7..=7 * 16384).contains(&w), "{w}");
    // The log is this node's own and holds exactly what was appended.
    let mut os = os_with("webserver", 1 << 20, 9);
    let out = app(&mut os, "webserver --ops 7 --threads 3 --seed 2").unwrap();
    let w = num(&result_line(&out), "bytes_written");
    assert_eq!(os.file("/apps/webserver/n1/log").unwrap().len() as u64, w);
    // Its reads went out together: more than one I/O per flush.
    assert!(os.batches.iter().any(|&n| n > 1), "{:?}", os.batches);
}

#[test]
fn fileserver_runs_every_flowop_and_leaves_no_files() {
    let out = deterministic("fileserver", 1 << 20, "fileserver --ops 12 --threads 4");
    let j = result_line(&out);
    for name in [
        "createfile",
        "writewholefile",
        "openfile",
        "appendfilerand",
        "readwholefile",
        "statfile",
    ] {
        let at = j.find(&format!("\"{name}\":{{")).unwrap();
        assert!(num(&j[at..], "count") >= 12, "{name}: {j}");
    }
    assert!(j.contains("\"metric\":\"geomean_flowop_ops_per_s\""));
    let mut os = os_with("fileserver", 1 << 20, 9);
    app(&mut os, "fileserver --ops 12 --threads 4").unwrap();
    use crate::os::traits::*;
    let left = os.readdir("/apps/fileserver/n1").unwrap();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn varmail_fsyncs_twice_per_loop() {
    let out = deterministic("varmail", 512 << 10, "varmail --ops 10 --threads 2");
    let j = result_line(&out);
    let at = j.find("\"fsync\":{").unwrap();
    assert_eq!(num(&j[at..], "count"), 20);
    let at = j.find("\"deletefile\":{").unwrap();
    assert_eq!(
        num(&j[at..], "count"),
        8,
        "the first loop of each thread has nothing to delete"
    );
    let mut os = os_with("varmail", 512 << 10, 9);
    let before = os.syncs;
    app(&mut os, "varmail --ops 10 --threads 2").unwrap();
    assert_eq!(os.syncs - before, 20);
}

#[test]
fn kv_finds_every_key_uniform_and_zipf() {
    let out = deterministic("kv", 1 << 20, "kv --ops 300 --threads 8");
    let j = result_line(&out);
    assert_eq!(num(&j, "operations"), 300);
    assert_eq!(num(&j, "bytes_read"), 300 * 4096);
    assert!(j.contains("\"dist\":\"uniform\""));
    let z = deterministic("kv", 1 << 20, "kv --ops 300 --threads 8 --dist zipf:0.99");
    let jz = result_line(&z);
    assert!(jz.contains("\"dist\":\"zipf:0.99\""), "{jz}");
    assert_ne!(num(&j, "value_checksum"), num(&jz, "value_checksum"));
    // A different seed picks other keys.
    let mut os = os_with("kv", 1 << 20, 9);
    let o2 = app(&mut os, "kv --ops 300 --threads 8 --seed 77").unwrap();
    assert_ne!(
        num(&j, "value_checksum"),
        num(&result_line(&o2), "value_checksum")
    );
}

#[test]
fn a_warm_up_runs_first_and_is_not_counted() {
    use crate::os::{MissCounters, MissStats};
    let per = MissCounters {
        round_trip_ns: 1000,
        fill_ns: 10,
        page_fills: MissStats {
            count: 1,
            lookup_ns: 20,
            disk_ns: 300,
            fill_ns: 40,
            reply_ns: 50,
        },
        file_reads: MissStats::default(),
    };
    // Every read moves the mock's clock by 100 us and its miss counters
    // by `per`: 1 ms of warm-up is about 10 reads.
    let mut os = os_with("kv", 1 << 20, 9);
    os.miss_per_read = Some(per);
    let reads0 = os.reads;
    let out = app(&mut os, "kv --warmup 1ms --ops 5 --threads 2").unwrap();
    let j = result_line(&out);
    assert_eq!(num(&j, "warmup_ns"), 1_000_000);
    assert_eq!(num(&j, "operations"), 5, "--ops counts the measured phase");
    let gets = num(&j[j.find("\"ops\":").unwrap()..], "count");
    // The measured lookups, and at most one per thread begun in the
    // warm-up and finished after it.
    assert!((5..=7).contains(&gets), "{gets}: {j}");
    let reads = os.reads - reads0;
    assert!(reads >= 10 + 5, "{reads} reads: the warm-up ran");
    // The miss timers cover the measured phase only.
    let rt = num(&j, "round_trips");
    assert!(
        rt > 0 && rt <= 1000 * (reads - 10),
        "{rt} of {reads} reads: {j}"
    );
    assert_eq!(num(&j, "dir_disk"), rt / 1000 * 300);
    assert!(out.contains(", after a warm-up of 1 ms"), "{out}");
    // Without a warm-up, every read is counted.
    let mut os = os_with("kv", 1 << 20, 9);
    os.miss_per_read = Some(per);
    let reads0 = os.reads;
    let j = result_line(&app(&mut os, "kv --ops 5 --threads 2").unwrap());
    assert_eq!(num(&j, "warmup_ns"), 0);
    let rt = num(&j, "round_trips");
    // Every lookup's read (the table's index was read before the start).
    assert!(rt >= 1000 * 5 && rt <= 1000 * (os.reads - reads0), "{rt}");
    // A run that ends within its warm-up measured nothing: an error.
    let mut os = os_with("search", 512 << 10, 9);
    os.miss_per_read = Some(per);
    let e = app(&mut os, "search --passes 1 --warmup 1h --threads 2").unwrap_err();
    assert!(e.message().contains("within its warm-up"), "{e}");
}

#[test]
fn kv_reports_a_corrupt_table() {
    let mut os = os_with("kv", 256 << 10, 9);
    let mut t = os.file("/apps/kv/table.sst").unwrap().to_vec();
    for b in &mut t[..40 * 4096] {
        *b = 0;
    }
    os.put("/apps/kv/table.sst", &t);
    let e = app(&mut os, "kv --ops 50").unwrap_err();
    assert!(e.message().contains("not found in block"), "{e}");
    assert_eq!(os.open_fds(), 0);
}

#[test]
fn infer_checksum_is_the_same_for_any_thread_count() {
    let one = result_line(&deterministic(
        "infer",
        512 << 10,
        "infer --ops 6 --threads 1 --seq-len 3",
    ));
    let four = result_line(&deterministic(
        "infer",
        512 << 10,
        "infer --ops 6 --threads 4 --seq-len 3",
    ));
    let sum = |j: &str| {
        let at = j.find("\"checksum\":\"").unwrap() + 12;
        j[at..at + 16].to_string()
    };
    assert_eq!(sum(&one), sum(&four));
    assert_eq!(num(&one, "sequences"), 6);
    assert_eq!(num(&four, "count"), 18, "tokens");
    // More compute, same tokens; other weights, other tokens.
    let c = result_line(&deterministic(
        "infer",
        512 << 10,
        "infer --ops 6 --threads 2 --seq-len 3 --compute 2",
    ));
    assert_eq!(num(&c, "sequences"), 6);
    let mut other = os_with("infer", 512 << 10, 10);
    let o = result_line(&app(&mut other, "infer --ops 6 --threads 4 --seq-len 3").unwrap());
    assert_ne!(sum(&one), sum(&o));
    // Each token read the shared layers and 6 experts.
    let per_token = num(&one, "bytes_read") / 18;
    let shared = (512u64 << 10) / 16;
    let expert = ((512u64 << 10) - shared) / 64 / 4096 * 4096;
    assert_eq!(per_token, shared + 6 * expert);
}

#[test]
fn infer_reads_with_pread_where_the_mode_has_no_mmap() {
    let args = "infer --ops 4 --threads 2 --seq-len 3";
    let mut mapped = os_with("infer", 256 << 10, 9);
    let m = result_line(&app(&mut mapped, args).unwrap());
    let mut os = os_with("infer", 256 << 10, 9);
    os.can_mmap = false;
    let r = result_line(&app(&mut os, args).unwrap());
    assert_eq!(os.open_fds(), 0, "descriptor leaked");
    assert!(m.contains("\"access\":\"mmap\""), "{m}");
    assert!(r.contains("\"access\":\"pread\""), "{r}");
    // The same weights read either way: the same tokens.
    let sum = |j: &str| {
        let at = j.find("\"checksum\":\"").unwrap() + 12;
        j[at..at + 16].to_string()
    };
    assert_eq!(sum(&m), sum(&r));
    assert_eq!(num(&m, "bytes_read"), num(&r, "bytes_read"));
}

#[test]
fn ann_search_recalls_the_true_neighbours() {
    let out = deterministic("ann", 4 << 20, "ann --ops 40 --threads 4");
    let j = result_line(&out);
    let at = j.find("\"recall_at_10\":").unwrap() + 15;
    let recall: f64 = j[at..at + 5].parse().unwrap();
    assert!(recall >= 0.9, "recall {recall}: {j}");
    // A real search: it reads far fewer blocks than there are points.
    let blocks = num(&j, "blocks_read");
    let points = num(&j, "points");
    assert!(blocks < 40 * points / 4, "{blocks} of {points}");
    assert!(num(&j, "max_iodepth") > 1);
}

#[test]
fn every_workload_prints_a_summary_and_one_result() {
    for name in NAMES {
        let out = deterministic(name, 512 << 10, &format!("{name} --ops 4 --threads 2"));
        assert_eq!(out.matches("RESULT ").count(), 1, "{out}");
        assert!(out.starts_with(&format!("app {name} on node 1")), "{out}");
        let j = result_line(&out);
        assert!(j.starts_with('{') && j.ends_with('}'));
        assert_eq!(num(&j, "operations"), 4);
    }
}

#[test]
fn webserver_default_threads_fit_the_nodes_descriptors() {
    // 100 threads (Filebench's default), 64 descriptors: opens wait for
    // one of 48 slots instead of failing.
    let mut os = os_with("webserver", 1 << 20, 9);
    let out = app(&mut os, "webserver --ops 100").unwrap();
    let j = result_line(&out);
    assert_eq!(num(&j, "threads"), 100);
    assert_eq!(num(&j, "operations"), 100);
    assert_eq!(num(&j, "count"), 1000, "openfile");
    assert!(num(&j, "max_iodepth") > 8, "{j}");
    assert_eq!(os.open_fds(), 0);
}

#[test]
fn varmail_threads_yield_in_their_metadata_calls() {
    // fsync, open and unlink answer only after a few wait steps: the
    // threads' calls are in flight together, and the run still does
    // every flowop and leaves the files as a synchronous run does.
    let mut os = os_with("varmail", 512 << 10, 9);
    for (k, d) in [("fsync", 3), ("open", 1), ("unlink", 2)] {
        os.meta.delay.insert(k, d);
    }
    let before = os.syncs;
    let out = app(&mut os, "varmail --ops 10 --threads 4").unwrap();
    let j = result_line(&out);
    assert_eq!(os.syncs - before, 20);
    assert!(num(&j, "meta_yielded") >= 20, "{j}");
    assert!(num(&j, "meta_max_in_flight") >= 2, "{j}");
    assert!(os.meta.max_in_flight >= 2);
    assert_eq!(os.open_fds(), 0);
}
