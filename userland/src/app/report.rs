//! A workload run's report: the summary text and one `RESULT {json}`
//! line (throughput, per-operation rates and latency percentiles, bytes,
//! this node's cache counters over the run, the workload's own figures).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::meter::{milli_text, per_s_milli, Meter, OpStat};
use crate::fio::json::{milli, JsonWriter};
use crate::fio::RunEnv;
use crate::os::{MissCounters, MissStats, Os};
use crate::stats::keys::{cache, dir};
use crate::task::{FlushStats, MetaStats};

/// The `cache stats` counters a report carries (their change over the
/// run), where the mode has them.
pub const CACHE_KEYS: &[&str] = &[
    cache::HITS_LOCAL,
    cache::HITS_REMOTE,
    cache::HITS_PRIVATE,
    cache::MISSES,
    cache::REMOTE_MAPS,
    cache::DISK_READS_FILLS,
    cache::DISK_READS_PAGES,
    cache::PAGE_BATCHES,
    cache::WRITEBACKS,
    cache::PAGES_WRITTEN_BACK,
    cache::TASK_WRITEBACK_PAGES,
    cache::INVALIDATIONS_SENT,
    cache::MMAP_FAULTS,
    cache::READAHEAD_PAGES,
    cache::READAHEAD_HITS,
    cache::READAHEAD_WASTED,
    cache::FAULTAROUND_PAGES,
];

/// The `dir stats` counters a report carries (their change over the
/// run: the directory's, so every node's at N > 1).
pub const DIR_KEYS: &[&str] = &[
    dir::REQUESTS_SERVED,
    dir::PAGE_REQUESTS,
    dir::FILLS,
    dir::WRITEBACKS,
    dir::DISK_BLOCKS_READ,
    dir::DISK_BLOCKS_WRITTEN,
];

/// The counters a run's report is the change of, taken at the start of
/// its measured phase and at its end.
#[derive(Debug, Clone, Default)]
pub struct Baseline {
    /// [`CACHE_KEYS`].
    pub cache: Vec<(String, u64)>,
    /// [`DIR_KEYS`].
    pub dir: Vec<(String, u64)>,
    /// The node's and the directory's miss timers (`bench miss`'s).
    pub miss: Option<MissCounters>,
}

impl Baseline {
    /// At the start: the directory's counters before the node's timers,
    /// so that the calls fetching them are not timed as the run's.
    pub fn start(os: &mut dyn Os) -> Baseline {
        let cache = cache_snapshot(os);
        let dir = dir_snapshot(os);
        let miss = os.miss_counters().ok();
        Baseline { cache, dir, miss }
    }

    /// At the end: the node's timers first, for the same reason.
    pub fn end(os: &mut dyn Os) -> Baseline {
        let miss = os.miss_counters().ok();
        let cache = cache_snapshot(os);
        let dir = dir_snapshot(os);
        Baseline { cache, dir, miss }
    }
}

/// The numeric [`DIR_KEYS`] of `dir stats` now (none without them).
pub fn dir_snapshot(os: &mut dyn Os) -> Vec<(String, u64)> {
    let Ok(lines) = os.dir_stats() else {
        return Vec::new();
    };
    lines
        .into_iter()
        .filter(|(k, _)| DIR_KEYS.contains(&k.as_str()))
        .filter_map(|(k, v)| crate::parse::u64_dec(v.trim()).ok().map(|n| (k, n)))
        .collect()
}

/// Where the time of a run's misses went (sums over the run, ns): the
/// node's round trips to the directory and its installing of their
/// answers (node clock), and the directory's service of the misses it
/// timed, page fills and file-server reads together (its clock).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MissTime {
    /// The node's time in round trips (every call: misses, metadata,
    /// write-backs).
    pub round_trip_ns: u64,
    /// The node's time installing answers (page cache fill, mapping).
    pub install_ns: u64,
    /// The directory's timed misses and their phases.
    pub dir: MissStats,
}

fn stats_delta(b: &MissStats, a: &MissStats) -> MissStats {
    MissStats {
        count: a.count.saturating_sub(b.count),
        lookup_ns: a.lookup_ns.saturating_sub(b.lookup_ns),
        disk_ns: a.disk_ns.saturating_sub(b.disk_ns),
        fill_ns: a.fill_ns.saturating_sub(b.fill_ns),
        reply_ns: a.reply_ns.saturating_sub(b.reply_ns),
    }
}

fn stats_sum(x: &MissStats, y: &MissStats) -> MissStats {
    MissStats {
        count: x.count.saturating_add(y.count),
        lookup_ns: x.lookup_ns.saturating_add(y.lookup_ns),
        disk_ns: x.disk_ns.saturating_add(y.disk_ns),
        fill_ns: x.fill_ns.saturating_add(y.fill_ns),
        reply_ns: x.reply_ns.saturating_add(y.reply_ns),
    }
}

/// The change of the miss timers from `b` to `a`.
pub fn miss_time_delta(b: &MissCounters, a: &MissCounters) -> MissTime {
    MissTime {
        round_trip_ns: a.round_trip_ns.saturating_sub(b.round_trip_ns),
        install_ns: a.fill_ns.saturating_sub(b.fill_ns),
        dir: stats_sum(
            &stats_delta(&b.page_fills, &a.page_fills),
            &stats_delta(&b.file_reads, &a.file_reads),
        ),
    }
}

/// The numeric [`CACHE_KEYS`] of `cache stats` now (none if the OS has
/// no cache statistics).
pub fn cache_snapshot(os: &mut dyn Os) -> Vec<(String, u64)> {
    let Ok(lines) = os.cache_stats() else {
        return Vec::new();
    };
    lines
        .into_iter()
        .filter(|(k, _)| CACHE_KEYS.contains(&k.as_str()))
        .filter_map(|(k, v)| crate::parse::u64_dec(v.trim()).ok().map(|n| (k, n)))
        .collect()
}

/// `after - before` per key present in both.
pub fn cache_delta(before: &[(String, u64)], after: &[(String, u64)]) -> Vec<(String, u64)> {
    after
        .iter()
        .filter_map(|(k, a)| {
            before
                .iter()
                .find(|(b, _)| b == k)
                .map(|(_, b)| (k.clone(), a.saturating_sub(*b)))
        })
        .collect()
}

/// A workload figure beside the standard ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Extra {
    /// An integer.
    Uint(u64),
    /// A value in thousandths (printed `x.yyy`).
    Milli(u64),
    /// Text.
    Text(String),
}

/// Everything a report shows.
#[derive(Debug, Clone)]
pub struct Report {
    /// `webserver`, `kv`, ...
    pub app: &'static str,
    /// Where it ran.
    pub env: RunEnv,
    /// Tasks.
    pub threads: u32,
    /// `--seed`.
    pub seed: u64,
    /// The dataset directory.
    pub dir: String,
    /// What the headline throughput is (`geomean_flowop_ops_per_s`, ...).
    pub metric: &'static str,
    /// Its unit (`ops/s`, `lookups/s`, `tokens/s`, `queries/s`).
    pub unit: &'static str,
    /// The headline throughput in thousandths.
    pub throughput_milli: u64,
    /// Operation kinds and their figures.
    pub names: &'static [&'static str],
    /// Figures per kind.
    pub ops: Vec<OpStat>,
    /// Top-level operations started.
    pub started: u64,
    /// Start to the last operation's end.
    pub elapsed_ns: u64,
    /// I/Os per executor flush.
    pub flush: FlushStats,
    /// Metadata calls that yielded, and the most in flight together.
    pub meta: MetaStats,
    /// Cache counters' change over the run.
    pub cache: Vec<(String, u64)>,
    /// The directory's counters' change over the run.
    pub dir_counters: Vec<(String, u64)>,
    /// Where the misses' time went over the run (None: no timers here).
    pub miss_time: Option<MissTime>,
    /// The warm-up before the measured phase (ns; 0: none).
    pub warmup_ns: u64,
    /// The workload's own figures.
    pub extra: Vec<(&'static str, Extra)>,
}

impl Report {
    /// A report from a finished meter (the headline still to be set).
    pub fn from_meter(app: &'static str, env: RunEnv, m: &Meter) -> Report {
        Report {
            app,
            env,
            threads: 0,
            seed: 0,
            dir: String::new(),
            metric: "",
            unit: "",
            throughput_milli: 0,
            names: m.names(),
            ops: m.stats(),
            started: m.started(),
            elapsed_ns: m.elapsed_ns(),
            flush: FlushStats::default(),
            meta: MetaStats::default(),
            cache: Vec::new(),
            dir_counters: Vec::new(),
            miss_time: None,
            warmup_ns: 0,
            extra: Vec::new(),
        }
    }

    /// Per-second rate of kind `i`, in thousandths.
    pub fn rate_milli(&self, i: usize) -> u64 {
        self.ops
            .get(i)
            .map_or(0, |s| per_s_milli(s.lat.count(), self.elapsed_ns))
    }

    /// Bytes read by all kinds.
    pub fn bytes_read(&self) -> u64 {
        self.ops.iter().map(|s| s.read).sum()
    }

    /// Bytes written by all kinds.
    pub fn bytes_written(&self) -> u64 {
        self.ops.iter().map(|s| s.written).sum()
    }

    /// The summary and the `RESULT` line.
    pub fn render(&self) -> String {
        let mut out = format!(
            "app {} on node {} ({} mode): {} threads, seed {}, dataset {}\n",
            self.app, self.env.node, self.env.mode, self.threads, self.seed, self.dir
        );
        out.push_str(&format!(
            "  {}: {} {} over {} ms ({} operations){}\n",
            self.metric,
            milli_text(self.throughput_milli),
            self.unit,
            self.elapsed_ns / 1_000_000,
            self.started,
            if self.warmup_ns > 0 {
                format!(", after a warm-up of {} ms", self.warmup_ns / 1_000_000)
            } else {
                String::new()
            }
        ));
        for (i, (name, s)) in self.names.iter().zip(&self.ops).enumerate() {
            out.push_str(&format!(
                "  {name:<16} {:>8} ops {:>12}/s  lat us p50 {} p99 {} p99.9 {} max {}\n",
                s.lat.count(),
                milli_text(self.rate_milli(i)),
                s.lat.percentile(500) / 1000,
                s.lat.percentile(990) / 1000,
                s.lat.percentile(999) / 1000,
                s.lat.max() / 1000
            ));
        }
        out.push_str(&format!(
            "  read {} KiB, written {} KiB, I/Os in flight at a flush mean {} max {}, sent per flush {}\n",
            self.bytes_read() / 1024,
            self.bytes_written() / 1024,
            milli_text(self.flush.mean_milli()),
            self.flush.max,
            milli_text(self.flush.per_flush_milli())
        ));
        out.push_str(&format!(
            "  metadata calls yielded {}, at once {}, in flight together (max) {}\n",
            self.meta.yielded, self.meta.immediate, self.meta.max_in_flight
        ));
        if !self.cache.is_empty() {
            let parts: Vec<String> = self.cache.iter().map(|(k, v)| format!("{k} {v}")).collect();
            out.push_str(&format!("  cache: {}\n", parts.join(", ")));
        }
        if !self.dir_counters.is_empty() {
            let parts: Vec<String> = self
                .dir_counters
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            out.push_str(&format!("  directory: {}\n", parts.join(", ")));
        }
        if let Some(t) = &self.miss_time {
            out.push_str(&format!(
                "  miss time ms: round trips {}, install {}; directory ({} timed) lookup {}, disk {}, fill {}, reply {}\n",
                t.round_trip_ns / 1_000_000,
                t.install_ns / 1_000_000,
                t.dir.count,
                t.dir.lookup_ns / 1_000_000,
                t.dir.disk_ns / 1_000_000,
                t.dir.fill_ns / 1_000_000,
                t.dir.reply_ns / 1_000_000
            ));
        }
        for (k, v) in &self.extra {
            let text = match v {
                Extra::Uint(n) => format!("{n}"),
                Extra::Milli(n) => milli_text(*n),
                Extra::Text(t) => t.clone(),
            };
            out.push_str(&format!("  {k}: {text}\n"));
        }
        out.push_str("RESULT ");
        out.push_str(&self.json());
        out.push('\n');
        out
    }

    /// The `RESULT` document.
    pub fn json(&self) -> String {
        let mut j = JsonWriter::new();
        j.begin(None)
            .string(Some("app"), self.app)
            .uint("node", u64::from(self.env.node))
            .string(Some("mode"), &self.env.mode)
            .uint("busy_instances", u64::from(self.env.busy_instances))
            .uint("threads", u64::from(self.threads))
            .uint("seed", self.seed)
            .string(Some("dataset"), &self.dir)
            .string(Some("metric"), self.metric)
            .string(Some("unit"), self.unit)
            .number("throughput", &milli(self.throughput_milli))
            .uint("operations", self.started)
            .uint("elapsed_ns", self.elapsed_ns)
            .uint("warmup_ns", self.warmup_ns)
            .uint("bytes_read", self.bytes_read())
            .uint("bytes_written", self.bytes_written())
            .number("mean_iodepth", &milli(self.flush.mean_milli()))
            .uint("max_iodepth", self.flush.max)
            .number("ios_per_flush", &milli(self.flush.per_flush_milli()))
            .uint("meta_yielded", self.meta.yielded)
            .uint("meta_max_in_flight", self.meta.max_in_flight);
        j.begin(Some("ops"));
        for (i, (name, s)) in self.names.iter().zip(&self.ops).enumerate() {
            j.begin(Some(name))
                .uint("count", s.lat.count())
                .number("per_s", &milli(self.rate_milli(i)))
                .uint("bytes_read", s.read)
                .uint("bytes_written", s.written);
            j.begin(Some("lat_ns"))
                .uint("mean", s.lat.mean())
                .uint("p50", s.lat.percentile(500))
                .uint("p90", s.lat.percentile(900))
                .uint("p99", s.lat.percentile(990))
                .uint("p99.9", s.lat.percentile(999))
                .uint("max", s.lat.max())
                .end();
            j.end();
        }
        j.end();
        j.begin(Some("cache"));
        for (k, v) in &self.cache {
            j.uint(k, *v);
        }
        j.end();
        j.begin(Some("dir"));
        for (k, v) in &self.dir_counters {
            j.uint(k, *v);
        }
        j.end();
        if let Some(t) = &self.miss_time {
            j.begin(Some("miss_time_ns"))
                .uint("round_trips", t.round_trip_ns)
                .uint("install", t.install_ns)
                .uint("dir_timed", t.dir.count)
                .uint("dir_lookup", t.dir.lookup_ns)
                .uint("dir_disk", t.dir.disk_ns)
                .uint("dir_fill", t.dir.fill_ns)
                .uint("dir_reply", t.dir.reply_ns)
                .end();
        }
        for (k, v) in &self.extra {
            match v {
                Extra::Uint(n) => j.uint(k, *n),
                Extra::Milli(n) => j.number(k, &milli(*n)),
                Extra::Text(t) => j.string(Some(k), t),
            };
        }
        j.end();
        j.finish()
    }
}
