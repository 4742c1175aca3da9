//! Results of a run: latency samples, per-direction figures, and the
//! fio-like text summary plus the `RESULT {json}` line.
//!
//! All arithmetic is integer (the kernel has no FPU state to spare):
//! IOPS are kept in thousandths, bandwidth in bytes per second.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use serde::{Serialize, Serializer};

use super::json;
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
    /// Sum of squares, for the standard deviation.
    sum_sq: u128,
    /// fio's latency histogram ([`hist_index`]): empty until the first
    /// sample, then [`HIST_BINS`] counters.
    hist: Vec<u64>,
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
            sum_sq: 0,
            hist: Vec::new(),
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
        self.sum_sq = self.sum_sq.saturating_add(u128::from(v) * u128::from(v));
        if self.hist.is_empty() && self.hist.try_reserve_exact(HIST_BINS).is_ok() {
            self.hist.resize(HIST_BINS, 0);
        }
        if let Some(c) = self.hist.get_mut(hist_index(v)) {
            *c = c.saturating_add(1);
        }
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

    /// The distribution beyond [`Latency`]: standard deviation, fio's
    /// percentiles and histogram (sorts the kept samples).
    pub(crate) fn dist(&mut self) -> Dist {
        if self.seen == 0 {
            return Dist::default();
        }
        self.kept.sort_unstable();
        let percentiles = FIO_PERCENTILES
            .iter()
            .filter_map(|&ppm| Some((ppm, percentile_ppm(&self.kept, ppm)?)))
            .collect();
        let bins = self
            .hist
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, &c)| (hist_value(i), c))
            .collect();
        Dist {
            count: self.seen,
            sum: self.sum,
            stddev_milli: stddev_milli(self.seen, self.sum, self.sum_sq),
            percentiles,
            bins,
        }
    }
}

/// The percentiles fio reports by default, in millionths (fio's keys
/// `1.000000` ... `99.990000`).
pub const FIO_PERCENTILES: &[u32] = &[
    10_000, 50_000, 100_000, 200_000, 300_000, 400_000, 500_000, 600_000, 700_000, 800_000,
    900_000, 950_000, 990_000, 995_000, 999_000, 999_500, 999_900,
];

/// Bits of precision of a histogram group: 64 bins per power of two.
const HIST_BITS: u32 = 6;
/// Bins per group.
const HIST_VAL: usize = 1 << HIST_BITS;
/// Groups: the histogram covers up to about 2^34 ns (17 s) exactly
/// enough, the last bin takes everything slower.
const HIST_GROUPS: usize = 29;
/// Number of histogram bins (fio's `FIO_IO_U_PLAT_NR`).
pub const HIST_BINS: usize = HIST_GROUPS * HIST_VAL;

/// The bin of a latency in fio's log-linear histogram: values below 128
/// have a bin each; above, each power of two is split into 64 bins.
pub fn hist_index(v: u64) -> usize {
    if v < (HIST_VAL as u64) << 1 {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    let error_bits = msb - HIST_BITS;
    let base = (error_bits as usize + 1) << HIST_BITS;
    let offset = ((v >> error_bits) as usize) & (HIST_VAL - 1);
    (base + offset).min(HIST_BINS - 1)
}

/// The value fio shows for bin `i` (its key in json+'s `bins`): the bin
/// itself below 128, else the middle of the bin's range.
pub fn hist_value(i: usize) -> u64 {
    if i < HIST_VAL << 1 {
        return i as u64;
    }
    let error_bits = (i >> HIST_BITS) as u32 - 1;
    let base = 1u64 << (error_bits + HIST_BITS);
    let k = (i % HIST_VAL) as u64;
    base + (k << error_bits) + (1u64 << error_bits >> 1)
}

/// Nearest-rank percentile of sorted samples at `ppm` millionths.
fn percentile_ppm(sorted: &[u64], ppm: u32) -> Option<u64> {
    let n = sorted.len() as u128;
    let rank = (u128::from(ppm.min(1_000_000)) * n)
        .div_ceil(1_000_000)
        .max(1);
    sorted.get(usize::try_from(rank - 1).ok()?).copied()
}

/// Sample standard deviation (fio's, over `n - 1`) in thousandths.
fn stddev_milli(n: u64, sum: u128, sum_sq: u128) -> u64 {
    if n < 2 {
        return 0;
    }
    let n = u128::from(n);
    // n * sum_sq - sum^2 = n * (n - 1) * variance, exact in integers.
    let num = n
        .saturating_mul(sum_sq)
        .saturating_sub(sum.saturating_mul(sum));
    let var_micro = num.saturating_mul(1_000_000) / (n * (n - 1));
    u64::try_from(var_micro.isqrt()).unwrap_or(u64::MAX)
}

/// A direction's latency distribution beyond [`Latency`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Dist {
    /// Samples recorded.
    pub count: u64,
    /// Their sum in nanoseconds (the mean is `sum / count`).
    pub sum: u128,
    /// Sample standard deviation, in thousandths of a nanosecond.
    pub stddev_milli: u64,
    /// ([`FIO_PERCENTILES`] entry, value): nearest rank over the kept
    /// samples.
    pub percentiles: Vec<(u32, u64)>,
    /// fio's histogram: (bin value, count) of every bin used, ascending.
    pub bins: Vec<(u64, u64)>,
}

/// Completion latency of one direction, in nanoseconds (serialized as is
/// in the `RESULT` line's `lat_ns`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
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
    /// The latency distributions: reads, writes.
    pub dists: [Dist; 2],
    /// Reporting group (the job's index in its job file; 0 otherwise).
    pub groupid: u32,
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
            "{}: (g={}): rw={}, bs={}B, ioengine={}, iodepth={}\n",
            s.name,
            self.groupid,
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
            "{}: (groupid={}, jobs={}): err= 0: node={}, mode={}\n",
            s.name, self.groupid, s.numjobs, self.env.node, self.env.mode
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
        out.push_str(&format!(
            "\nRun status group {} (all jobs):\n",
            self.groupid
        ));
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
        serde_json::to_string(&self.result_doc()).unwrap_or_default()
    }

    /// The `RESULT` document as a serializable value (also the `onecopy`
    /// member of each job in fio's JSON).
    pub fn result_doc(&self) -> ResultDoc<'_> {
        let s = &self.spec;
        let dir = |d: &DirStats| {
            let l = d.lat.unwrap_or_default();
            ResultDir {
                iops: Milli(d.iops_milli),
                bw_kib: d.bw_kib(),
                bw_bytes: d.bw_bytes,
                ios: d.ios,
                bytes: d.bytes,
                lat_ns: l,
            }
        };
        ResultDoc {
            name: &s.name,
            rw: s.rw.as_str(),
            bs: s.bs,
            size: s.size,
            iodepth: s.iodepth,
            effective_iodepth: self.effective_iodepth,
            mean_iodepth: Milli(self.mean_iodepth_milli),
            ios_per_flush: Milli(self.per_flush_milli),
            max_iodepth: self.max_iodepth,
            numjobs: s.numjobs,
            ioengine: s.ioengine.as_str(),
            rwmixread: s.rwmixread,
            runtime_ns: s.runtime_ns,
            time_based: s.time_based,
            ramp_ns: s.ramp_ns,
            fsync: s.fsync,
            invalidate: s.invalidate,
            invalidated: self.invalidated.short(),
            randseed: s.randseed,
            random_distribution: s.random_distribution(),
            files: &self.files,
            mode: &self.env.mode,
            node: self.env.node,
            busy_instances: self.env.busy_instances,
            vcpus_per_instance: self.env.vcpus_per_instance,
            read: dir(&self.read),
            write: dir(&self.write),
            elapsed_ns: self.elapsed_ns,
            fsyncs: self.fsyncs,
            hit_runtime: self.hit_runtime,
            laid_out_bytes: self.laid_out_bytes,
        }
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

/// A thousandths fixed-point value, serialized as a JSON number
/// (`12345` -> `12.345`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Milli(pub u64);

impl Serialize for Milli {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.0 as f64 / 1000.0)
    }
}

/// The `RESULT {json}` document: onecopy's schema, which the benchmark
/// harness and the integration tests read.
#[derive(Debug, Serialize)]
#[allow(missing_docs)]
pub struct ResultDoc<'a> {
    pub name: &'a str,
    pub rw: &'static str,
    pub bs: u64,
    pub size: u64,
    pub iodepth: u32,
    pub effective_iodepth: u32,
    pub mean_iodepth: Milli,
    pub ios_per_flush: Milli,
    pub max_iodepth: u32,
    pub numjobs: u32,
    pub ioengine: &'static str,
    pub rwmixread: u8,
    pub runtime_ns: u64,
    pub time_based: bool,
    pub ramp_ns: u64,
    pub fsync: u32,
    pub invalidate: bool,
    pub invalidated: &'static str,
    pub randseed: u64,
    pub random_distribution: String,
    pub files: &'a [String],
    pub mode: &'a str,
    pub node: u16,
    pub busy_instances: u32,
    pub vcpus_per_instance: u32,
    pub read: ResultDir,
    pub write: ResultDir,
    pub elapsed_ns: u64,
    pub fsyncs: u64,
    pub hit_runtime: bool,
    pub laid_out_bytes: u64,
}

/// One direction of [`ResultDoc`].
#[derive(Debug, Serialize)]
#[allow(missing_docs)]
pub struct ResultDir {
    pub iops: Milli,
    pub bw_kib: u64,
    pub bw_bytes: u64,
    pub ios: u64,
    pub bytes: u64,
    pub lat_ns: Latency,
}
