//! fio's own JSON output (`--output-format=json` and `json+`), for what
//! this fio measures, so that fio's post-processing tools and plotting
//! scripts read it.
//!
//! The field names and units are fio's (3.33): top-level `fio version`
//! and `jobs[]`; each job has `jobname`, `groupid`, `error`, `elapsed`
//! (s), `job options`, `read` / `write` / `trim` and `job_runtime` (ms).
//! A direction has `io_bytes`, `io_kbytes`, `bw_bytes`, `bw` (KiB/s),
//! `iops`, `runtime` (ms), `total_ios`, `short_ios`, `drop_ios`, and
//! `clat_ns` / `lat_ns` with `min`, `max`, `mean`, `stddev`, `N`;
//! `clat_ns` adds `percentile` (fio's keys, `"50.000000"`) and with
//! `json+` `bins` (fio's histogram: bin value in ns -> count). What is not
//! measured here is left out rather than made up (`slat_ns`, per-second
//! bandwidth and IOPS samples, CPU, disk utilisation, timestamps).
//!
//! Each job section is one entry of `jobs[]` with its `numjobs` clones
//! together (fio's `group_reporting`). The latency measured, from an
//! I/O's queueing to the end of the call that completed it, is both
//! `clat_ns` and `lat_ns` (no separate submission latency exists). The
//! `RESULT` document of the run ([`Report::result_doc`]) is the job's
//! `onecopy` member.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use super::report::{DirStats, Dist, Milli, Report, ResultDoc};

/// The `fio version` written: the fio whose JSON format this follows, and
/// that it is not that fio.
pub const FIO_VERSION: &str = "fio-3.33 (onecopy)";

/// What `--output-format` asked for (fio allows several, comma-separated).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Format {
    /// The text summary and the `RESULT` line.
    pub normal: bool,
    /// fio's JSON document.
    pub json: bool,
    /// With the latency histogram (`json+`).
    pub json_plus: bool,
}

impl Default for Format {
    fn default() -> Format {
        Format {
            normal: true,
            json: false,
            json_plus: false,
        }
    }
}

impl Format {
    /// Parse `normal`, `json`, `json+`, or several of them joined by `,`.
    pub fn parse(v: &str) -> Option<Format> {
        let mut f = Format {
            normal: false,
            json: false,
            json_plus: false,
        };
        for w in v.split(',') {
            match w {
                "normal" => f.normal = true,
                "json" => f.json = true,
                "json+" => f.json_plus = true,
                _ => return None,
            }
        }
        Some(f)
    }
}

/// fio's JSON document for `reports` (one job each), pretty-printed like
/// fio's (`json_plus`: with the histogram bins).
pub fn document(reports: &[Report], json_plus: bool) -> String {
    let doc = Doc {
        version: FIO_VERSION,
        jobs: reports.iter().map(|r| Job::new(r, json_plus)).collect(),
    };
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}

#[derive(Serialize)]
struct Doc<'a> {
    #[serde(rename = "fio version")]
    version: &'static str,
    jobs: Vec<Job<'a>>,
}

#[derive(Serialize)]
struct Job<'a> {
    jobname: &'a str,
    groupid: u32,
    error: u32,
    elapsed: u64,
    #[serde(rename = "job options")]
    job_options: Pairs<String>,
    read: Dir,
    write: Dir,
    trim: Dir,
    job_runtime: u64,
    onecopy: ResultDoc<'a>,
}

impl<'a> Job<'a> {
    fn new(r: &'a Report, json_plus: bool) -> Job<'a> {
        let [rd, wd] = &r.dists;
        Job {
            jobname: &r.spec.name,
            groupid: r.groupid,
            error: 0,
            elapsed: r.elapsed_ns.div_ceil(1_000_000_000),
            job_options: job_options(r),
            read: Dir::new(&r.read, rd, r.elapsed_ns, json_plus),
            write: Dir::new(&r.write, wd, r.elapsed_ns, json_plus),
            trim: Dir::new(&DirStats::default(), &Dist::default(), 0, json_plus),
            job_runtime: r.elapsed_ns / 1_000_000,
            onecopy: r.result_doc(),
        }
    }
}

/// The options of the job as fio lists them (`job options`): strings.
fn job_options(r: &Report) -> Pairs<String> {
    let s = &r.spec;
    let mut v: Vec<(&'static str, String)> = Vec::new();
    v.push(("name", s.name.clone()));
    v.push(("rw", String::from(s.rw.as_str())));
    if s.rw.is_mixed() {
        v.push(("rwmixread", format!("{}", s.rwmixread)));
    }
    v.push(("bs", format!("{}", s.bs)));
    v.push(("size", format!("{}", s.size)));
    if let Some(f) = &s.filename {
        v.push(("filename", f.clone()));
    }
    if let Some(d) = &s.directory {
        v.push(("directory", d.clone()));
    }
    v.push(("numjobs", format!("{}", s.numjobs)));
    v.push(("iodepth", format!("{}", s.iodepth)));
    v.push(("ioengine", String::from(s.ioengine.as_str())));
    if s.runtime_ns > 0 {
        v.push(("runtime", format!("{}us", s.runtime_ns / 1000)));
    }
    if s.time_based {
        v.push(("time_based", String::from("1")));
    }
    if s.ramp_ns > 0 {
        v.push(("ramp_time", format!("{}us", s.ramp_ns / 1000)));
    }
    v.push(("invalidate", format!("{}", u8::from(s.invalidate))));
    if s.fsync > 0 {
        v.push(("fsync", format!("{}", s.fsync)));
    }
    v.push(("randseed", format!("{}", s.randseed)));
    if s.zipf_theta.is_some() {
        v.push(("random_distribution", s.random_distribution()));
    }
    Pairs(v.into_iter().map(|(k, x)| (String::from(k), x)).collect())
}

#[derive(Serialize)]
struct Dir {
    io_bytes: u64,
    io_kbytes: u64,
    bw_bytes: u64,
    bw: u64,
    iops: Milli,
    runtime: u64,
    total_ios: u64,
    short_ios: u64,
    drop_ios: u64,
    clat_ns: Lat,
    lat_ns: Lat,
}

impl Dir {
    fn new(d: &DirStats, dist: &Dist, elapsed_ns: u64, json_plus: bool) -> Dir {
        let lat = d.lat.unwrap_or_default();
        let used = d.ios > 0 && dist.count > 0;
        let stat = |full: bool| Lat {
            min: if used { lat.min } else { 0 },
            max: if used { lat.max } else { 0 },
            mean: Mean {
                sum: dist.sum,
                count: dist.count,
            },
            stddev: Milli(dist.stddev_milli),
            n: dist.count,
            percentile: (full && used).then(|| {
                Pairs(
                    dist.percentiles
                        .iter()
                        .map(|&(ppm, v)| {
                            (format!("{}.{:06}", ppm / 10_000, (ppm % 10_000) * 100), v)
                        })
                        .collect(),
                )
            }),
            bins: (full && used && json_plus).then(|| {
                Pairs(
                    dist.bins
                        .iter()
                        .map(|&(k, c)| (format!("{k}"), c))
                        .collect(),
                )
            }),
        };
        Dir {
            io_bytes: d.bytes,
            io_kbytes: d.bytes / 1024,
            bw_bytes: d.bw_bytes,
            bw: d.bw_kib(),
            iops: Milli(d.iops_milli),
            runtime: if d.ios > 0 { elapsed_ns / 1_000_000 } else { 0 },
            total_ios: d.ios,
            short_ios: 0,
            drop_ios: 0,
            clat_ns: stat(true),
            lat_ns: stat(false),
        }
    }
}

#[derive(Serialize)]
struct Lat {
    min: u64,
    max: u64,
    mean: Mean,
    stddev: Milli,
    #[serde(rename = "N")]
    n: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    percentile: Option<Pairs<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bins: Option<Pairs<u64>>,
}

/// A mean kept as sum and count, serialized as a number.
struct Mean {
    sum: u128,
    count: u64,
}

impl Serialize for Mean {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.count == 0 {
            return s.serialize_f64(0.0);
        }
        // Thousandths, then one division in floating point for the text.
        let milli = self.sum.saturating_mul(1000) / u128::from(self.count);
        s.serialize_f64(milli as f64 / 1000.0)
    }
}

/// A JSON object whose members keep their order (fio's percentiles and
/// bins are in ascending order, which a sorted map of strings is not).
struct Pairs<V>(Vec<(K, V)>);

type K = String;

impl<V: Serialize> Serialize for Pairs<V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}
