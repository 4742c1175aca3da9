//! Results of a run: latency samples, per-direction figures, and the
//! fio-like text summary plus the `RESULT {json}` line.
//!
//! All arithmetic is integer (the kernel has no FPU state to spare):
//! IOPS are kept in thousandths, bandwidth in bytes per second.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::json::{self, JsonWriter};
use super::options::{Engine, JobSpec};
use super::RunEnv;
use crate::stats;

/// Default number of latency samples kept per direction; beyond it a
/// uniform random subset (reservoir sampling) is kept, so percentiles are
/// estimates while count, min, mean and max stay exact.
pub const RESERVOIR: usize = 1 << 17;

/// Latency samples of one direction (nanoseconds).
#[derive(Debug, Clone)]
pub(crate) struct Samples {
    kept: Vec<u64>,
    cap: usize,
    seen: u64,
    sum: u128,
    min: u64,
    max: u64,
    rng: u64,
}

impl Samples {
    /// At most `cap` samples kept (at least 1); `expect` samples are
    /// reserved up front when memory allows.
    pub(crate) fn new(cap: usize, expect: u64) -> Samples {
        let cap = cap.max(1);
        let mut kept = Vec::new();
        let want = usize::try_from(expect).map_or(cap, |e| e.min(cap));
        // Best effort: on failure the reservoir simply stays smaller.
        let _ = kept.try_reserve_exact(want);
        Samples {
            kept,
            cap,
            seen: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
            rng: 0x853c_49e6_748f_ea9b,
        }
    }

    fn next_rand(&mut self) -> u64 {
        // xorshift64*
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Record one sample.
    pub(crate) fn push(&mut self, v: u64) {
        self.seen = self.seen.saturating_add(1);
        self.sum = self.sum.saturating_add(u128::from(v));
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        let len = self.kept.len();
        if len < self.cap && (len < self.kept.capacity() || self.kept.try_reserve(1).is_ok()) {
            self.kept.push(v);
            return;
        }
        // Reservoir: sample number `seen` replaces a kept one with
        // probability len / seen.
        if len == 0 {
            return;
        }
        let j = self.next_rand() % self.seen;
        if let Some(slot) = usize::try_from(j).ok().and_then(|j| self.kept.get_mut(j)) {
            *slot = v;
        }
    }

    /// Number of samples recorded (not only kept).
    pub(crate) fn count(&self) -> u64 {
        self.seen
    }

    /// Number of samples kept for percentiles.
    #[cfg(test)]
    pub(crate) fn kept(&self) -> usize {
        self.kept.len()
    }

    /// The latency summary (sorts the kept samples).
    pub(crate) fn latency(&mut self) -> Option<Latency> {
        if self.seen == 0 || self.kept.is_empty() {
            return None;
        }
        self.kept.sort_unstable();
        let mean = u64::try_from(self.sum / u128::from(self.seen)).unwrap_or(u64::MAX);
        Some(Latency {
            min: self.min,
            mean,
            p50: stats::percentile(&self.kept, 500)?,
            p99: stats::percentile(&self.kept, 990)?,
            p999: stats::percentile(&self.kept, 999)?,
            max: self.max,
        })
    }
}

/// Completion latency of one direction, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Latency {
    /// Fastest I/O.
    pub min: u64,
    /// Arithmetic mean, rounded down.
    pub mean: u64,
    /// Median (nearest rank).
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Slowest I/O.
    pub max: u64,
}

/// The figures of one direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DirStats {
    /// I/Os completed while measuring.
    pub ios: u64,
    /// Bytes moved while measuring.
    pub bytes: u64,
    /// I/Os per second, in thousandths.
    pub iops_milli: u64,
    /// Bandwidth in bytes per second.
    pub bw_bytes: u64,
    /// Latency summary; `None` without I/Os.
    pub lat: Option<Latency>,
}

impl DirStats {
    /// Figures for `ios` I/Os of `bs` bytes over `elapsed_ns`.
    pub fn new(ios: u64, bs: u64, elapsed_ns: u64, lat: Option<Latency>) -> DirStats {
        let bytes = ios.saturating_mul(bs);
        let per_sec = |v: u64, scale: u128| -> u64 {
            if elapsed_ns == 0 {
                return 0;
            }
            let r = u128::from(v) * scale / u128::from(elapsed_ns);
            u64::try_from(r).unwrap_or(u64::MAX)
        };
        DirStats {
            ios,
            bytes,
            iops_milli: per_sec(ios, 1_000_000_000_000),
            bw_bytes: per_sec(bytes, 1_000_000_000),
            lat,
        }
    }

    /// Bandwidth in KiB/s (rounded down), fio's `bw` unit.
    pub fn bw_kib(&self) -> u64 {
        self.bw_bytes / 1024
    }

    /// Whole I/Os per second.
    pub fn iops(&self) -> u64 {
        self.iops_milli / 1000
    }
}

/// What happened to this node's cache before the run (`--invalidate`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invalidated {
    /// `--invalidate=0`.
    No,
    /// Dropped; the OS's one-line summary.
    Dropped(String),
    /// This mode cannot drop its cache.
    NotSupported,
    /// The OS refused; the error text (the run went on, like fio).
    Failed(String),
}

impl Invalidated {
    fn short(&self) -> &'static str {
        match self {
            Invalidated::No => "no",
            Invalidated::Dropped(_) => "dropped",
            Invalidated::NotSupported => "not supported",
            Invalidated::Failed(_) => "failed",
        }
    }
}

/// The result of one `fio` run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The job as parsed.
    pub spec: JobSpec,
    /// Where it ran.
    pub env: RunEnv,
    /// Reads.
    pub read: DirStats,
    /// Writes.
    pub write: DirStats,
    /// Measured time: from the end of the ramp (or the start) to the last
    /// measured completion, in nanoseconds.
    pub elapsed_ns: u64,
    /// Requests really in flight per node: the mean number of I/Os per
    /// flush while measuring (all jobs together, rounded; over all flushes
    /// if none was measured, 0 if none ran). A flush is one
    /// [`crate::os::Os::io_batch`] call for libaio, and for psync and mmap
    /// jobs run as tasks the I/Os of every waiting job sent out together
    /// (up to `numjobs`). psync without positioned batches (jobs taking
    /// turns with synchronous calls): 1.
    pub effective_iodepth: u32,
    /// Most I/Os in one flush over the whole run.
    pub max_iodepth: u32,
    /// The mean behind `effective_iodepth`, in thousandths.
    pub mean_iodepth_milli: u64,
    /// I/Os sent per flush, in thousandths (how many waiting I/Os went
    /// out together).
    pub per_flush_milli: u64,
    /// psync / mmap jobs ran as tasks ([`crate::task`]).
    pub tasks: bool,
    /// fsync calls made while measuring (`--fsync`).
    pub fsyncs: u64,
    /// Every file used, in job order without duplicates.
    pub files: Vec<String>,
    /// Files created or extended by the layout phase.
    pub laid_out_files: u32,
    /// Bytes written by the layout phase (not timed).
    pub laid_out_bytes: u64,
    /// The cache drop before the run.
    pub invalidated: Invalidated,
    /// The run ended because `--runtime` passed.
    pub hit_runtime: bool,
}

/// fio-style number with a unit: divide by `base` while 5 digits or
/// more, then 3 significant digits (`48.1MiB`, `3906KiB`, `12.3k`).
pub fn human(v: u64, base: u64, units: &[&str]) -> String {
    let mut div: u128 = 1;
    let mut i = 0;
    let v = u128::from(v);
    while i + 1 < units.len() && v / div >= 10_000 {
        div *= u128::from(base);
        i += 1;
    }
    let unit = units.get(i).copied().unwrap_or("");
    if i == 0 {
        return format!("{v}{unit}");
    }
    let x100 = v * 100 / div;
    if x100 < 1000 {
        format!("{}.{:02}{unit}", x100 / 100, x100 % 100)
    } else if x100 < 10_000 {
        format!("{}.{}{unit}", x100 / 100, (x100 % 100) / 10)
    } else {
        format!("{}{unit}", x100 / 100)
    }
}

const BIN: &[&str] = &["B", "KiB", "MiB", "GiB", "TiB"];
const SI: &[&str] = &["B", "kB", "MB", "GB", "TB"];

impl Report {
    /// The fio-like text summary (several lines, each ending in `\n`),
    /// without the `RESULT` line.
    pub fn summary(&self) -> String {
        let s = &self.spec;
        let mut out = format!(
            "{}: (g=0): rw={}, bs={}B, ioengine={}, iodepth={}\n",
            s.name,
            s.rw.as_str(),
            s.bs,
            s.ioengine.as_str(),
            s.iodepth
        );
        if self.laid_out_files > 0 {
            out.push_str(&format!(
                "{}: Laying out IO file{} ({} file{} / {})\n",
                s.name,
                plural(self.laid_out_files),
                self.laid_out_files,
                plural(self.laid_out_files),
                human(self.laid_out_bytes, 1024, BIN)
            ));
        }
        out.push_str(&format!(
            "Starting {} process{}\n",
            s.numjobs,
            if s.numjobs == 1 { "" } else { "es" }
        ));
        out.push_str(&format!(
            "{}: (groupid=0, jobs={}): err= 0: node={}, mode={}\n",
            s.name, s.numjobs, self.env.node, self.env.mode
        ));
        let msec = self.elapsed_ns / 1_000_000;
        for (label, d) in [("read", &self.read), ("write", &self.write)] {
            if d.ios == 0 {
                continue;
            }
            out.push_str(&format!(
                "  {label}: IOPS={}, BW={}/s ({}/s)({}/{}msec)\n",
                human(d.iops(), 1000, &["", "k", "M", "G"]),
                human(d.bw_bytes, 1024, BIN),
                human(d.bw_bytes, 1000, SI),
                human(d.bytes, 1024, BIN),
                msec
            ));
            if let Some(l) = d.lat {
                out.push_str(&format!(
                    "    clat (nsec): min={}, max={}, avg={}, p50={}, p99={}, p99.9={}\n",
                    l.min, l.max, l.mean, l.p50, l.p99, l.p999
                ));
            }
        }
        if self.read.ios == 0 && self.write.ios == 0 {
            out.push_str("  no I/O completed while measuring\n");
        }
        if self.fsyncs > 0 {
            out.push_str(&format!("  fsync: {} calls\n", self.fsyncs));
        }
        if s.ioengine == Engine::Libaio {
            out.push_str(&format!(
                "  depth: iodepth={} requested, {} in flight (batched)\n",
                s.iodepth, self.effective_iodepth
            ));
        } else if self.tasks {
            out.push_str(&format!(
                "  depth: iodepth={} requested, {} in flight (mean {}, max {}; {} job{} as tasks, waiting I/Os flushed together, {} per flush)\n",
                s.iodepth,
                self.effective_iodepth,
                json::milli(self.mean_iodepth_milli),
                self.max_iodepth,
                s.numjobs,
                plural(s.numjobs),
                json::milli(self.per_flush_milli),
            ));
        } else {
            out.push_str(&format!(
                "  depth: iodepth={} requested, {} in flight (synchronous calls; {} job{} interleaved round-robin)\n",
                s.iodepth,
                self.effective_iodepth,
                s.numjobs,
                plural(s.numjobs)
            ));
        }
        let who = match self.env.busy_instances {
            0 | 1 => format!("node {}", self.env.node),
            2 => format!("node {} + directory", self.env.node),
            n => format!("node {} + directory + {} more", self.env.node, n - 2),
        };
        out.push_str(&format!(
            "  busy: {} instance{}, {} vCPU{} each ({})\n",
            self.env.busy_instances,
            plural(self.env.busy_instances),
            self.env.vcpus_per_instance,
            plural(self.env.vcpus_per_instance),
            who
        ));
        let cache = match &self.invalidated {
            Invalidated::No => String::from("kept (--invalidate=0)"),
            Invalidated::Dropped(line) => format!("dropped before the run ({line})"),
            Invalidated::NotSupported => String::from("not dropped (not supported in this mode)"),
            Invalidated::Failed(e) => format!("drop failed ({e}); ran anyway"),
        };
        out.push_str(&format!("  cache: {cache}\n"));
        out.push_str("\nRun status group 0 (all jobs):\n");
        for (label, d) in [("READ", &self.read), ("WRITE", &self.write)] {
            if d.ios == 0 {
                continue;
            }
            out.push_str(&format!(
                "  {:>5}: bw={}/s ({}/s), io={} ({}), run={}-{}msec\n",
                label,
                human(d.bw_bytes, 1024, BIN),
                human(d.bw_bytes, 1000, SI),
                human(d.bytes, 1024, BIN),
                human(d.bytes, 1000, SI),
                msec,
                msec
            ));
        }
        out
    }

    /// The JSON document of the `RESULT` line: the parameters and the
    /// figures.
    pub fn json(&self) -> String {
        let s = &self.spec;
        let mut w = JsonWriter::new();
        w.begin(None)
            .string(Some("name"), &s.name)
            .string(Some("rw"), s.rw.as_str())
            .uint("bs", s.bs)
            .uint("size", s.size)
            .uint("iodepth", u64::from(s.iodepth))
            .uint("effective_iodepth", u64::from(self.effective_iodepth))
            .number("mean_iodepth", &json::milli(self.mean_iodepth_milli))
            .number("ios_per_flush", &json::milli(self.per_flush_milli))
            .uint("max_iodepth", u64::from(self.max_iodepth))
            .uint("numjobs", u64::from(s.numjobs))
            .string(Some("ioengine"), s.ioengine.as_str())
            .uint("rwmixread", u64::from(s.rwmixread))
            .uint("runtime_ns", s.runtime_ns)
            .boolean("time_based", s.time_based)
            .uint("ramp_ns", s.ramp_ns)
            .uint("fsync", u64::from(s.fsync))
            .boolean("invalidate", s.invalidate)
            .string(Some("invalidated"), self.invalidated.short())
            .uint("randseed", s.randseed)
            .string(Some("random_distribution"), &s.random_distribution())
            .begin_array("files");
        for f in &self.files {
            w.string(None, f);
        }
        w.end_array()
            .string(Some("mode"), &self.env.mode)
            .uint("node", u64::from(self.env.node))
            .uint("busy_instances", u64::from(self.env.busy_instances))
            .uint("vcpus_per_instance", u64::from(self.env.vcpus_per_instance));
        for (key, d) in [("read", &self.read), ("write", &self.write)] {
            let l = d.lat.unwrap_or_default();
            w.begin(Some(key))
                .number("iops", &json::milli(d.iops_milli))
                .uint("bw_kib", d.bw_kib())
                .uint("bw_bytes", d.bw_bytes)
                .uint("ios", d.ios)
                .uint("bytes", d.bytes)
                .begin(Some("lat_ns"))
                .uint("min", l.min)
                .uint("mean", l.mean)
                .uint("p50", l.p50)
                .uint("p99", l.p99)
                .uint("p999", l.p999)
                .uint("max", l.max)
                .end()
                .end();
        }
        w.uint("elapsed_ns", self.elapsed_ns)
            .uint("fsyncs", self.fsyncs)
            .boolean("hit_runtime", self.hit_runtime)
            .uint("laid_out_bytes", self.laid_out_bytes)
            .end();
        w.finish()
    }

    /// The summary followed by the `RESULT {json}` line: what the shell
    /// prints.
    pub fn render(&self) -> String {
        let mut out = self.summary();
        out.push_str("RESULT ");
        out.push_str(&self.json());
        out.push('\n');
        out
    }
}

fn plural(n: u32) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
