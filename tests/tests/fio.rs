//! Integration tests of the shell's fio with fio's formats: a job file
//! from the default disk image (`tools/sample/jobs`, copied by `mkfs
//! --from tools/sample`) runs on a node, and `--output-format=json+`
//! prints fio's JSON document, which parses and carries fio's names; a
//! host job file placed on the disk with `qemu-run.sh --put` runs too.
//!
//! ```text
//! cargo test -p onecopy-tests --test fio -- --test-threads=1
//! ```

use std::time::Duration;

use onecopy_tests::{with_cluster, ClusterOpts, Error};
use serde_json::Value;

const CTL: &str = env!("CARGO_BIN_EXE_onecopy-ctl");

fn opts(name: &str) -> ClusterOpts {
    ClusterOpts::new(name)
        .ctl(CTL)
        .nodes(1)
        .cmd_timeout(Duration::from_secs(120))
        .boot_timeout(Duration::from_secs(60))
}

fn fail(msg: String) -> Error {
    Error::Usage(msg)
}

#[test]
fn sample_job_files_run_with_fios_json() {
    with_cluster(opts("fio-jobs"), |c| {
        // Two job sections, one after the other: two summaries, two
        // RESULT lines, in groups 0 and 1.
        let out = c.exec_ok(1, "fio /jobs/seq-read.fio")?.text();
        let results: Vec<&str> = out
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("RESULT "))
            .collect();
        if results.len() != 2
            || !out.contains("one-reader: (g=0): rw=read")
            || !out.contains("four-readers: (g=1): rw=read")
        {
            return Err(fail(format!("fio /jobs/seq-read.fio: {out}")));
        }
        let four: Value = serde_json::from_str(results[1])
            .map_err(|e| fail(format!("RESULT json: {e}: {}", results[1])))?;
        assert_eq!(four["numjobs"], 4, "{four}");
        assert_eq!(four["read"]["ios"], 4 * 64, "{four}");

        // fio's JSON, with the histogram: the document alone.
        let out = c
            .exec_ok(1, "fio --output-format=json+ /jobs/rand-mixed.fio")?
            .text();
        let start = out
            .find('{')
            .ok_or_else(|| fail(format!("no JSON document: {out}")))?;
        let end = out.rfind('}').map_or(out.len(), |e| e + 1);
        let doc: Value = serde_json::from_str(&out[start..end])
            .map_err(|e| fail(format!("fio's JSON: {e}: {out}")))?;
        assert!(
            doc["fio version"]
                .as_str()
                .is_some_and(|v| v.starts_with("fio-3")),
            "{doc}"
        );
        let jobs = doc["jobs"].as_array().expect("jobs[]");
        assert_eq!(jobs.len(), 2, "{doc}");
        assert_eq!(jobs[0]["jobname"], "randread");
        assert_eq!(jobs[1]["jobname"], "randrw");
        let r = &jobs[0]["read"];
        // 2 jobs x 2 MiB of 4 KiB reads.
        assert_eq!(r["total_ios"], 1024, "{r}");
        assert_eq!(r["io_bytes"], 4 << 20, "{r}");
        assert_eq!(r["clat_ns"]["N"], 1024, "{r}");
        assert!(r["iops"].as_f64().is_some_and(|x| x > 0.0), "{r}");
        assert!(
            r["clat_ns"]["percentile"]["99.000000"].as_u64().is_some(),
            "{r}"
        );
        let bins: u64 = r["clat_ns"]["bins"]
            .as_object()
            .expect("json+ bins")
            .values()
            .filter_map(Value::as_u64)
            .sum();
        assert_eq!(bins, 1024, "{r}");
        let mixed = &jobs[1];
        let n = mixed["read"]["total_ios"].as_u64().unwrap_or(0)
            + mixed["write"]["total_ios"].as_u64().unwrap_or(0);
        assert_eq!(n, 512, "{mixed}");
        assert_eq!(mixed["onecopy"]["fsync"], 16, "{mixed}");
        // An option the runner does not have is refused by name and line.
        let out = c.exec(1, "fio /README.txt")?;
        let msg = out.error_message().unwrap_or("").to_string();
        assert!(
            msg.starts_with("fio: /README.txt:1: option '"),
            "a text file as a job file: {msg:?} {}",
            out.raw
        );
        Ok(())
    });
}

/// `--put HOST:GUEST` places a host job file on the disk before boot:
/// `fio GUEST` in the shell reads it and runs its job.
#[test]
fn a_job_file_put_from_the_host_runs() {
    let host = std::env::temp_dir().join(format!("onecopy-put-{}.fio", std::process::id()));
    let job = "\
; written by the test on the host, placed with qemu-run.sh --put
[put-job]
rw=randread
bs=4k
size=256k
filename=put-job.dat
ioengine=psync
";
    std::fs::write(&host, job).expect("write the host job file");
    let guest = "/put/from-host.fio";
    with_cluster(opts("fio-put").put(&host, guest), |c| {
        let out = c.exec_ok(1, &format!("fio {guest}"))?.text();
        let result = out
            .lines()
            .find_map(|l| l.trim_start().strip_prefix("RESULT "))
            .ok_or_else(|| fail(format!("fio {guest}: no RESULT line: {out}")))?;
        let v: Value = serde_json::from_str(result)
            .map_err(|e| fail(format!("RESULT json: {e}: {result}")))?;
        if !out.contains("put-job: (g=0): rw=randread") || v["read"]["ios"] != 64 {
            return Err(fail(format!("fio {guest}: {out}")));
        }
        Ok(())
    });
    let _ = std::fs::remove_file(&host);
}
