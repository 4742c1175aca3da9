//! Reading what the nodes and the host tools print.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use regex::Regex;
use serde_json::Value;

/// The `RESULT {json}` line of a fio run.
pub fn fio_result(lines: &[String]) -> Result<Value, String> {
    let line = lines
        .iter()
        .map(|l| l.trim())
        .find_map(|l| l.strip_prefix("RESULT "))
        .ok_or_else(|| "no RESULT line in fio's output".to_string())?;
    let v: Value =
        serde_json::from_str(line).map_err(|e| format!("RESULT line is not JSON ({e})"))?;
    if !v.is_object() {
        return Err("RESULT is not a JSON object".into());
    }
    Ok(v)
}

/// A number at a JSON pointer (`/read/lat_ns/mean`).
pub fn json_num(v: &Value, pointer: &str) -> Result<f64, String> {
    v.pointer(pointer)
        .and_then(Value::as_f64)
        .filter(|x| x.is_finite())
        .ok_or_else(|| format!("RESULT has no number at {pointer}"))
}

/// The summary line of `bench read|inv|ring` and `onecopy-pingpong`:
/// `LABEL: n=.. median=.. ns p99=.. ns min=.. ns max=.. ns [mean=.. ns]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Samples.
    pub n: u64,
    /// Median (ns).
    pub median: f64,
    /// 99th percentile (ns), if printed.
    pub p99: Option<f64>,
    /// Mean (ns), if printed.
    pub mean: Option<f64>,
}

fn field_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"(n|median|p99|min|max|mean)=([0-9]+(?:\.[0-9]+)?)").unwrap())
}

/// Finds the first line containing `label` and reads its fields.
pub fn summary(lines: &[String], label: &str) -> Result<Summary, String> {
    let line = lines
        .iter()
        .find(|l| l.contains(label))
        .ok_or_else(|| format!("no '{label}' line in the output"))?;
    let mut f = BTreeMap::new();
    for c in field_re().captures_iter(line) {
        if let Ok(v) = c[2].parse::<f64>() {
            f.entry(c[1].to_string()).or_insert(v);
        }
    }
    let median = *f
        .get("median")
        .ok_or_else(|| format!("no median in '{}'", line.trim()))?;
    Ok(Summary {
        n: f.get("n").copied().unwrap_or(0.0) as u64,
        median,
        p99: f.get("p99").copied(),
        mean: f.get("mean").copied(),
    })
}

/// `bench rpc`'s line, `rpc round trip over TRANSPORT: n=.. median=.. ns
/// p99=.. ns min=.. ns max=.. ns`: the transport (`ring` or `tcp`) and the
/// summary.
pub fn rpc_summary(lines: &[String]) -> Result<(String, Summary), String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| Regex::new(r"rpc round trip over ([A-Za-z0-9_-]+):").unwrap());
    let (line, transport) = lines
        .iter()
        .find_map(|l| re.captures(l).map(|c| (l, c[1].to_string())))
        .ok_or_else(|| "no 'rpc round trip over ...:' line in the output".to_string())?;
    let s = summary(std::slice::from_ref(line), "rpc round trip over")?;
    if s.n == 0 {
        return Err(format!("no samples in '{}'", line.trim()));
    }
    Ok((transport, s))
}

/// The file transport `bench rpc` must report in a mode: TCP in net mode,
/// the shared-memory rings in the others.
pub fn rpc_transport(mode: &str) -> &'static str {
    if mode == "net" {
        "tcp"
    } else {
        "ring"
    }
}

/// `directory page ops: n=N in U us = R ops/s`: (ops, us, ops/s).
pub fn dir_ops(lines: &[String]) -> Result<(u64, u64, f64), String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"directory page ops: n=([0-9]+) in ([0-9]+) us = ([0-9]+(?:\.[0-9]+)?) ops/s")
            .unwrap()
    });
    lines
        .iter()
        .find_map(|l| re.captures(l))
        .and_then(|c| Some((c[1].parse().ok()?, c[2].parse().ok()?, c[3].parse().ok()?)))
        .ok_or_else(|| "no 'directory page ops: ...' line in the output".to_string())
}

/// The accelerator qemu-run.sh chose: `tcg (no vmx/svm in /proc/cpuinfo)`.
pub fn accel(launch_output: &str) -> Option<String> {
    launch_output
        .lines()
        .find_map(|l| l.trim().strip_prefix("accel: "))
        .map(|s| s.trim().to_string())
}

/// The dilation of qemu-run.sh's `cluster up` line (`off` or a factor
/// such as `4.50`).
pub fn dilation(launch_output: &str) -> Option<String> {
    launch_output
        .lines()
        .filter(|l| l.trim_start().starts_with("cluster up:"))
        .find_map(|l| l.rsplit_once(", dilation "))
        .map(|(_, d)| d.trim().to_string())
}

/// A line of qemu-run.sh's launch output starting with `prefix`.
pub fn launch_line(launch_output: &str, prefix: &str) -> Option<String> {
    launch_output
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with(prefix))
        .map(str::to_string)
}

/// The median of some values (None if empty; mean of the middle two for
/// an even count).
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let m = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    })
}

/// True if a node's error message says the operation does not exist in
/// this mode (`not supported`).
pub fn is_unsupported(msg: &str) -> bool {
    msg.contains("not supported")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn results() {
        let v = fio_result(&l(&[
            "w: (g=0): rw=randread",
            r#"RESULT {"read":{"iops":3341.892,"lat_ns":{"mean":295539}},"busy_instances":2}"#,
        ]))
        .unwrap();
        assert_eq!(json_num(&v, "/read/lat_ns/mean"), Ok(295539.0));
        assert_eq!(json_num(&v, "/read/iops"), Ok(3341.892));
        assert!(json_num(&v, "/write/iops").is_err());
        assert!(fio_result(&l(&["nothing"])).is_err());
        assert!(fio_result(&l(&["RESULT {oops"])).is_err());
        assert!(fio_result(&l(&["RESULT [1]"])).is_err());
    }

    #[test]
    fn summaries() {
        let s = summary(
            &l(&["read 4k: n=256 median=70997 ns p99=6409446 ns min=41748 ns max=9425970 ns mean=311201 ns"]),
            "read 4k:",
        )
        .unwrap();
        assert_eq!(s.n, 256);
        assert_eq!(s.median, 70997.0);
        assert_eq!(s.p99, Some(6409446.0));
        assert_eq!(s.mean, Some(311201.0));
        let r = summary(
            &l(&["ring round trip: n=20000 median=1890 ns p99=3000 ns min=1 ns max=9 ns"]),
            "ring round trip:",
        )
        .unwrap();
        assert_eq!((r.median, r.mean), (1890.0, None));
        let h = summary(
            &l(&["host ping-pong round trip: n=200000 median=95 ns p99=180 ns"]),
            "host ping-pong",
        )
        .unwrap();
        assert_eq!(h.median, 95.0);
        assert!(summary(&l(&["read 4k: n=0"]), "read 4k:").is_err());
        assert!(summary(&l(&[]), "read 4k:").is_err());
    }

    #[test]
    fn rpc_lines() {
        let (t, s) = rpc_summary(&l(&[
            "n1> bench rpc 1000",
            "rpc round trip over tcp: n=1000 median=740395 ns p99=8809094 ns min=218328 ns max=12271112 ns",
        ]))
        .unwrap();
        assert_eq!(t, "tcp");
        assert_eq!((s.n, s.median, s.p99), (1000, 740395.0, Some(8809094.0)));
        let (t, s) = rpc_summary(&l(&[
            "rpc round trip over ring: n=20 median=2150 ns p99=2800 ns min=1980 ns max=5085 ns",
        ]))
        .unwrap();
        assert_eq!((t.as_str(), s.median, s.mean), ("ring", 2150.0, None));
        // bench ring's line is not bench rpc's.
        assert!(rpc_summary(&l(&[
            "ring round trip: n=2000 median=2150 ns p99=28026 ns min=1980 ns max=5085674 ns"
        ]))
        .is_err());
        assert!(rpc_summary(&l(&["rpc round trip over tcp: n=0"])).is_err());
        assert!(rpc_summary(&l(&["rpc round trip over tcp: n=0 median=5 ns"])).is_err());
        assert!(rpc_summary(&l(&[])).is_err());
        assert_eq!(rpc_transport("net"), "tcp");
        for m in ["strong", "relaxed", "private"] {
            assert_eq!(rpc_transport(m), "ring");
        }
    }

    #[test]
    fn directory_ops() {
        assert_eq!(
            dir_ops(&l(&[
                "directory page ops: n=1536 in 2000 us = 768000 ops/s"
            ])),
            Ok((1536, 2000, 768000.0))
        );
        assert!(dir_ops(&l(&["x"])).is_err());
    }

    #[test]
    fn launch() {
        let out =
            "disk: created\naccel: tcg (no vmx/svm in /proc/cpuinfo)\ncpus: directory pinned\n";
        assert_eq!(
            accel(out).as_deref(),
            Some("tcg (no vmx/svm in /proc/cpuinfo)")
        );
        assert_eq!(
            launch_line(out, "cpus:").as_deref(),
            Some("cpus: directory pinned")
        );
        assert_eq!(accel("nothing"), None);
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[f64::NAN, 5.0]), Some(5.0));
        assert!(is_unsupported(
            "fio: ioengine=mmap not supported in this mode"
        ));
        assert!(!is_unsupported("I/O error"));
    }

    #[test]
    fn the_dilation_of_the_cluster_up_line() {
        let out = "dilation: 4.50 (auto: ...)\ncluster up: 1 directory + 2 nodes joined in 900 ms (mode strong, policy fifo), dilation 4.50\n";
        assert_eq!(dilation(out).as_deref(), Some("4.50"));
        let off =
            "cluster up: 1 directory + 1 node joined in 9 ms (mode net, policy fifo), dilation off";
        assert_eq!(dilation(off).as_deref(), Some("off"));
        assert_eq!(dilation("cluster up: 1 directory + 2 nodes (strong)"), None);
    }
}
