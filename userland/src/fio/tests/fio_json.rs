//! fio's JSON output: its shape, its histogram, and (when Debian's `fio`
//! is installed) the same keys as a real fio run and fio's own
//! post-processing script reading it.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use super::fake::CostFn;
use super::*;
use crate::fio::fiojson::{self, Format};
use crate::fio::report::{hist_index, hist_value, HIST_BINS};

/// A latency that varies with the call, so the histogram has several
/// bins.
fn varied_cost(call: u64, write: bool, _off: u64) -> u64 {
    1000 + (call * 7919) % 50_000 + if write { 20_000 } else { 0 }
}

/// `fio ARGS` through [`command`] on the fake OS, parsed as JSON.
fn run_json(args: &[&str], cost: CostFn) -> (Value, String) {
    let mut os = FakeOs::new();
    os.cost = cost;
    let out = command(&mut os, args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    (v, out)
}

#[test]
fn output_formats_parse_as_fio_spells_them() {
    let f = |v| Format::parse(v);
    assert_eq!(
        f("normal"),
        Some(Format {
            normal: true,
            json: false,
            json_plus: false
        })
    );
    assert_eq!(
        f("json+").map(|x| (x.normal, x.json_plus)),
        Some((false, true))
    );
    assert_eq!(
        f("normal,json").map(|x| (x.normal, x.json)),
        Some((true, true))
    );
    for bad in ["", "terse", "JSON", "json,", "json++"] {
        assert_eq!(f(bad), None, "{bad}");
    }
    let mut os = FakeOs::new();
    assert_eq!(
        command(&mut os, &["--size=4k", "--output-format=xml"]).unwrap_err().to_string(),
        "fio: bad value 'xml' for option 'output-format' (normal, json, json+, or several joined by ',')"
    );
    assert_eq!(
        command(&mut os, &["--size=4k", "--output-format"])
            .unwrap_err()
            .to_string(),
        "fio: option '--output-format' requires a value (--output-format=json)"
    );
}

#[test]
fn json_has_fio_names_and_units() {
    let (v, text) = run_json(
        &[
            "--name=j",
            "--rw=randrw",
            "--bs=4k",
            "--size=256k",
            "--output-format=json",
        ],
        varied_cost,
    );
    // Only the document: no summary, no RESULT line.
    assert!(text.starts_with("{\n"), "{text}");
    assert!(!text.contains("RESULT"), "{text}");
    assert_eq!(v["fio version"], fiojson::FIO_VERSION);
    let jobs = v["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1);
    let j = &jobs[0];
    assert_eq!(j["jobname"], "j");
    assert_eq!(j["groupid"], 0);
    assert_eq!(j["job options"]["rw"], "randrw");
    assert_eq!(j["job options"]["bs"], "4096");
    let (r, w) = (&j["read"], &j["write"]);
    let ios = r["total_ios"].as_u64().unwrap() + w["total_ios"].as_u64().unwrap();
    assert_eq!(ios, 64);
    for d in [r, w] {
        let n = d["total_ios"].as_u64().unwrap();
        assert!(n > 0);
        assert_eq!(d["io_bytes"].as_u64().unwrap(), n * 4096);
        assert_eq!(d["io_kbytes"].as_u64().unwrap(), n * 4);
        let bw_bytes = d["bw_bytes"].as_u64().unwrap();
        assert_eq!(d["bw"].as_u64().unwrap(), bw_bytes / 1024, "bw is KiB/s");
        let runtime_ms = d["runtime"].as_u64().unwrap();
        assert_eq!(runtime_ms, j["job_runtime"].as_u64().unwrap());
        let iops = d["iops"].as_f64().unwrap();
        assert!(iops > 0.0);
        assert_eq!(d["clat_ns"]["N"].as_u64().unwrap(), n);
        assert_eq!(d["lat_ns"]["N"].as_u64().unwrap(), n);
        let c = &d["clat_ns"];
        let (min, max) = (c["min"].as_u64().unwrap(), c["max"].as_u64().unwrap());
        let mean = c["mean"].as_f64().unwrap();
        assert!(min as f64 <= mean && mean <= max as f64, "{c}");
        assert!(c["stddev"].as_f64().unwrap() > 0.0, "{c}");
        let pct = c["percentile"].as_object().unwrap();
        let keys: Vec<&str> = pct.keys().map(String::as_str).collect();
        // serde_json's map without preserve_order sorts the keys; the
        // text keeps fio's order (checked below).
        assert_eq!(keys.len(), 17);
        for k in [
            "1.000000",
            "5.000000",
            "10.000000",
            "50.000000",
            "99.000000",
            "99.500000",
            "99.900000",
            "99.950000",
            "99.990000",
        ] {
            let p = pct[k].as_u64().unwrap_or_else(|| panic!("{k} in {c}"));
            assert!((min..=max).contains(&p));
        }
        // Not json+: no bins.
        assert!(c.get("bins").is_none());
        // lat_ns has no percentiles (fio's default).
        assert!(d["lat_ns"].get("percentile").is_none());
    }
    // No trim measured: fio's zeros.
    assert_eq!(j["trim"]["total_ios"], 0);
    assert_eq!(j["trim"]["clat_ns"]["N"], 0);
    assert!(j["trim"]["clat_ns"].get("percentile").is_none());
    // Ours, under one key: the RESULT document.
    assert_eq!(j["onecopy"]["name"], "j");
    assert_eq!(j["onecopy"]["read"]["ios"], r["total_ios"]);
    // fio's percentile order in the text.
    let at = |k: &str| text.find(&format!("\"{k}\"")).unwrap();
    assert!(at("1.000000") < at("5.000000") && at("5.000000") < at("10.000000"));
    assert!(at("99.950000") < at("99.990000"));
}

#[test]
fn json_plus_bins_are_fios_histogram() {
    let mut os = FakeOs::new();
    os.cost = varied_cost;
    let args = [
        "--name=h",
        "--rw=randread",
        "--size=512k",
        "--output-format=normal,json+",
    ];
    let text = command(&mut os, &args).unwrap();
    // normal,json+: the summary and RESULT line, then the document.
    let start = text.find("\n{\n").expect("document after the summary") + 1;
    assert!(text[..start].contains("RESULT {"), "{text}");
    let v: Value = serde_json::from_str(&text[start..]).unwrap();
    let c = &v["jobs"][0]["read"]["clat_ns"];
    let bins = c["bins"].as_object().unwrap();
    let total: u64 = bins.values().map(|x| x.as_u64().unwrap()).sum();
    assert_eq!(total, c["N"].as_u64().unwrap());
    assert!(bins.len() > 5, "{c}");
    for k in bins.keys() {
        let val: u64 = k.parse().unwrap();
        assert_eq!(
            hist_value(hist_index(val)),
            val,
            "bin key {k} is a bin value"
        );
    }
}

#[test]
fn histogram_matches_fios_bins() {
    // Values below 128 have a bin each.
    for v in 0..128 {
        assert_eq!(hist_index(v), v as usize);
        assert_eq!(hist_value(v as usize), v);
    }
    // A 54294 ns I/O lands in fio's bin shown as 54528 (fio 3.33's json+
    // for such a sample).
    assert_eq!(hist_value(hist_index(54_294)), 54_528);
    // From 128 on a bin shows the middle of its range (fio's too).
    assert_eq!(hist_index(128), 128);
    assert_eq!(hist_value(128), 129);
    // Each power of two splits into 64 bins; a bin's value lies in it.
    for v in [129u64, 255, 256, 1000, 4095, 65_536, 1 << 30, (1 << 34) - 1] {
        let i = hist_index(v);
        let mid = hist_value(i);
        assert_eq!(hist_index(mid), i, "{v}");
        assert!(mid.abs_diff(v) <= v / 64, "{v} -> {mid}");
    }
    // Monotonic, and everything slower than the last bin lands in it.
    let mut last = 0;
    for v in (0..40).map(|s| 1u64 << s) {
        let i = hist_index(v);
        assert!(i >= last);
        last = i;
    }
    assert_eq!(hist_index(u64::MAX), HIST_BINS - 1);
}

#[test]
fn jobs_of_a_file_are_jobs_of_the_document() {
    let mut os = FakeOs::new();
    os.files.insert(
        "/j.fio".to_string(),
        b"[global]\nsize=64k\n[a]\nrw=read\n[b]\nstonewall\nrw=write\n".to_vec(),
    );
    let out = command(&mut os, &["--output-format=json", "/j.fio"]).unwrap();
    let v: Value = serde_json::from_str(&out).unwrap();
    let jobs = v["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2);
    assert_eq!(
        (jobs[0]["jobname"].as_str(), jobs[0]["groupid"].as_u64()),
        (Some("a"), Some(0))
    );
    assert_eq!(
        (jobs[1]["jobname"].as_str(), jobs[1]["groupid"].as_u64()),
        (Some("b"), Some(1))
    );
    assert_eq!(jobs[0]["read"]["total_ios"], 16);
    assert_eq!(jobs[1]["write"]["total_ios"], 16);
    // With a job file, options belong in it.
    assert_eq!(
        command(&mut os, &["/j.fio", "--bs=8k"]).unwrap_err().to_string(),
        "fio: with a job file only --output-format and --group go on the command line; put '--bs=8k' in the file"
    );
    assert_eq!(
        command(&mut os, &["/nope.fio"]).unwrap_err().to_string(),
        "fio: cannot read job file '/nope.fio': not found"
    );
    assert_eq!(os.open_fds(), 0);
}

/// Key paths of a JSON value: `a.b`, arrays as `[]`, the members of
/// `bins` as `bins.*`.
fn paths(v: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = if prefix.ends_with(".bins") {
                    format!("{prefix}.*")
                } else if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                out.insert(p.clone());
                paths(x, &p, out);
            }
        }
        Value::Array(a) => {
            for x in a {
                paths(x, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

fn fio_bin(name: &str) -> Option<PathBuf> {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {name}"))
        .output()
        .ok()?;
    let p = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !p.is_empty()).then(|| PathBuf::from(p))
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("onecopy-fio-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Our `json+` for a job and real fio's for the same job on the host:
/// every key we write (outside `onecopy`) is one fio writes, with fio's
/// percentile keys; then fio's `fio_jsonplus_clat2csv` converts ours and
/// validates its CSV against it.
#[test]
fn same_keys_as_real_fio_and_fios_script_reads_ours() {
    let (Some(fio), Some(clat2csv)) = (fio_bin("fio"), fio_bin("fio_jsonplus_clat2csv")) else {
        std::eprintln!(
            "SKIP same_keys_as_real_fio_and_fios_script_reads_ours: fio or fio_jsonplus_clat2csv not installed (tools/setup.sh installs Debian's fio, or apt-get install fio)"
        );
        return;
    };
    let dir = scratch("compat");
    let job = [
        "--name=t",
        "--rw=randrw",
        "--bs=4k",
        "--size=256k",
        "--ioengine=psync",
    ];
    let mut ours_args: Vec<&str> = job.to_vec();
    ours_args.push("--output-format=json+");
    let (ours, ours_text) = run_json(&ours_args, varied_cost);
    let ours_file = dir.join("ours.json");
    std::fs::write(&ours_file, &ours_text).unwrap();

    let real = Command::new(&fio)
        .args(job)
        .arg(format!("--filename={}", dir.join("t.dat").display()))
        .args(["--group_reporting", "--output-format=json+"])
        .output()
        .expect("run fio");
    assert!(
        real.status.success(),
        "fio failed: {}",
        String::from_utf8_lossy(&real.stderr)
    );
    let real: Value = serde_json::from_slice(&real.stdout).expect("fio's JSON");
    let (mut ko, mut kf) = (BTreeSet::new(), BTreeSet::new());
    paths(&ours, "", &mut ko);
    paths(&real, "", &mut kf);
    let ours_fio: BTreeSet<&String> = ko
        .iter()
        // Ours, and the job's options (a job's own, which differ by job).
        .filter(|k| !k.starts_with("jobs[].onecopy") && !k.starts_with("jobs[].job options."))
        .collect();
    let not_fios: Vec<&&String> = ours_fio.iter().filter(|k| !kf.contains(**k)).collect();
    assert!(not_fios.is_empty(), "keys fio does not write: {not_fios:?}");
    for k in [
        "fio version",
        "jobs[].jobname",
        "jobs[].groupid",
        "jobs[].job options",
        "jobs[].job_runtime",
    ]
    .into_iter()
    .map(String::from)
    .chain(["read", "write", "trim"].iter().flat_map(|d| {
        [
            "io_bytes",
            "bw_bytes",
            "bw",
            "iops",
            "runtime",
            "total_ios",
            "lat_ns.min",
            "lat_ns.max",
            "lat_ns.mean",
            "lat_ns.stddev",
            "clat_ns.min",
            "clat_ns.max",
            "clat_ns.mean",
            "clat_ns.stddev",
            "clat_ns.N",
        ]
        .map(|f| format!("jobs[].{d}.{f}"))
    }))
    .chain(["read", "write"].iter().flat_map(|d| {
        ["clat_ns.percentile", "clat_ns.bins", "clat_ns.bins.*"].map(|f| format!("jobs[].{d}.{f}"))
    })) {
        assert!(ko.contains(&k), "we do not write {k}");
        assert!(kf.contains(&k), "fio does not write {k}");
    }
    // fio's percentile keys, exactly.
    for d in ["read", "write"] {
        let keys = |v: &Value| -> Vec<String> {
            v["jobs"][0][d]["clat_ns"]["percentile"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect()
        };
        assert_eq!(keys(&ours), keys(&real), "{d} percentile keys");
    }
    let fio_only: Vec<&String> = kf.iter().filter(|k| !ko.contains(*k)).collect();
    std::eprintln!("fio writes, we do not (not measured here): {fio_only:?}");

    // fio's own post-processing of json+ reads ours.
    let csv = dir.join("ours.csv");
    for validate in [false, true] {
        let mut cmd = Command::new(&clat2csv);
        cmd.arg(&ours_file).arg(&csv);
        if validate {
            cmd.arg("--validate");
        }
        let out = cmd.output().expect("run fio_jsonplus_clat2csv");
        assert!(
            out.status.success(),
            "fio_jsonplus_clat2csv{}: {}{}",
            if validate { " --validate" } else { "" },
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let csv0 = std::fs::read_to_string(dir.join("ours_job0.csv")).expect("the job's CSV");
    let rows = csv0.lines().count();
    let bins = ours["jobs"][0]["read"]["clat_ns"]["bins"]
        .as_object()
        .unwrap()
        .len();
    assert!(rows > bins, "{rows} CSV rows for {bins} read bins");
    let _ = std::fs::remove_dir_all(&dir);
}
