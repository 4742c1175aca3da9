//! What onecopy-bench measures: workloads, scenarios and figures.

use serde_json::{json, Value};

/// The residency scenarios of DPC §6.2.
pub const SCENARIOS: &[&str] = &["CM", "CM-R", "CH-R"];

/// What a scenario means (for the report).
pub fn scenario_desc(s: &str) -> &'static str {
    match s {
        "CM" => "file on disk, cached nowhere (cache drop on every node first)",
        "CM-R" => "node 1 read the files first; node 2's first touch",
        "CH-R" => "node 2 runs again: it already holds / maps the pages",
        _ => "",
    }
}

/// The fio engines.
pub const ENGINES: &[&str] = &["libaio", "mmap"];

/// What a workload measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Mean completion latency (4k, iodepth 1, 1 job).
    Latency,
    /// Aggregate bandwidth (128k sequential, distinct files).
    Bandwidth,
    /// Aggregate IOPS (4k random, per-job files).
    Iops,
}

impl Kind {
    /// Metric name.
    pub fn metric(self) -> &'static str {
        match self {
            Kind::Latency => "mean latency",
            Kind::Bandwidth => "bandwidth",
            Kind::Iops => "IOPS",
        }
    }
    /// Unit of the figure.
    pub fn unit(self) -> &'static str {
        match self {
            Kind::Latency => "us",
            Kind::Bandwidth => "MiB/s",
            Kind::Iops => "IOPS",
        }
    }
    /// Lower is better (latency).
    pub fn lower_is_better(self) -> bool {
        matches!(self, Kind::Latency)
    }
}

/// One fio workload of DPC Fig. 6-9 (scaled).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Workload {
    /// Short key (`read-lat`): figure ids, fio job names, file names.
    pub key: &'static str,
    /// Title for the report.
    pub title: &'static str,
    /// fio `--rw`.
    pub rw: &'static str,
    /// Block size.
    pub bs: u64,
    /// What is measured.
    pub kind: Kind,
    /// Reads (otherwise writes).
    pub read: bool,
    /// DPC figure it corresponds to (libaio or mmap).
    pub dpc_fig: &'static str,
    /// Readahead and fault-around on (the kernel's defaults); off: the
    /// nodes run it after `cache readahead 0 0`, to be set beside the
    /// same workload with them on.
    pub readahead: bool,
}

/// The key of the sequential read bandwidth workload (Fig. 6b/7b).
pub const READ_BW: &str = "read-bw";
/// The same with readahead and fault-around off.
pub const READ_BW_RA_OFF: &str = "read-bw-ra-off";

/// Every fio workload, in report order.
pub const WORKLOADS: &[Workload] = &[
    Workload {
        key: "read-lat",
        title: "Read latency",
        rw: "randread",
        bs: 4096,
        kind: Kind::Latency,
        read: true,
        dpc_fig: "6a/7a",
        readahead: true,
    },
    Workload {
        key: "read-bw",
        title: "Read bandwidth",
        rw: "read",
        bs: 128 << 10,
        kind: Kind::Bandwidth,
        read: true,
        dpc_fig: "6b/7b",
        readahead: true,
    },
    Workload {
        key: "read-bw-ra-off",
        title: "Read bandwidth, readahead off",
        rw: "read",
        bs: 128 << 10,
        kind: Kind::Bandwidth,
        read: true,
        dpc_fig: "6b/7b",
        readahead: false,
    },
    Workload {
        key: "read-iops",
        title: "Read IOPS",
        rw: "randread",
        bs: 4096,
        kind: Kind::Iops,
        read: true,
        dpc_fig: "6c/7c",
        readahead: true,
    },
    Workload {
        key: "write-lat",
        title: "Write latency",
        rw: "randwrite",
        bs: 4096,
        kind: Kind::Latency,
        read: false,
        dpc_fig: "8a/9a",
        readahead: true,
    },
    Workload {
        key: "write-bw",
        title: "Write bandwidth",
        rw: "write",
        bs: 128 << 10,
        kind: Kind::Bandwidth,
        read: false,
        dpc_fig: "8b/9b",
        readahead: true,
    },
    Workload {
        key: "write-iops",
        title: "Write IOPS",
        rw: "randwrite",
        bs: 4096,
        kind: Kind::Iops,
        read: false,
        dpc_fig: "8c/9c",
        readahead: true,
    },
];

impl Workload {
    /// Looks a workload up by key.
    pub fn by_key(key: &str) -> Option<&'static Workload> {
        WORKLOADS.iter().find(|w| w.key == key)
    }
    /// Jobs (1 for latency).
    pub fn jobs(&self, p: &super::opts::Params) -> u32 {
        if self.kind == Kind::Latency {
            1
        } else {
            p.jobs
        }
    }
    /// Bytes per job's file.
    pub fn size(&self, p: &super::opts::Params) -> u64 {
        if self.kind == Kind::Latency {
            p.lat_size
        } else {
            p.job_size
        }
    }
    /// iodepth passed to fio.
    pub fn iodepth(&self, p: &super::opts::Params) -> u32 {
        if self.kind == Kind::Latency {
            1
        } else {
            p.iodepth
        }
    }
    /// The DPC figure this is part of, for an engine.
    pub fn dpc_figure(&self, engine: &str) -> String {
        let (libaio, mmap) = self.dpc_fig.split_once('/').unwrap_or((self.dpc_fig, ""));
        format!("Fig. {}", if engine == "mmap" { mmap } else { libaio })
    }
}

/// The group a figure belongs to.
pub const GROUP_FIO: &str = "fio";
/// `bench inv` with sharers.
pub const GROUP_INV: &str = "reclaim-inv";
/// Sequential read of a file larger than the pool.
pub const GROUP_BIG: &str = "reclaim-bigfile";
/// Directory microbenchmarks.
/// Batch sizes of `bench dir` (page requests published together).
pub const DIR_BATCHES: [usize; 7] = [1, 2, 4, 8, 16, 32, 64];

/// Scenario of the `bench dir` figure for batch size `b`.
pub fn dir_batch_scenario(b: usize) -> String {
    format!("batch of {b}")
}

pub const GROUP_DIR: &str = "directory";
/// Host baseline.
pub const GROUP_HOST: &str = "host";

/// True where a mode has no such operation by design, so that the node's
/// `not supported` answer is recorded as n/a rather than a failure:
/// private and net modes (independent per-node caches) have no mmap path
/// and no page directory. `bench inv` exists in every
/// mode: in private and net it drops one page of the node's own copy (the
/// baseline's invalidation, DPC's 11 us), so it must be a number there too.
pub fn na_allowed(group: &str, mode: &str, workload: &str, engine: Option<&str>) -> bool {
    match mode {
        "private" | "net" => {
            (group == GROUP_FIO && engine == Some("mmap"))
                || (group == GROUP_DIR && workload == "bench dir")
        }
        // DaxFS's design: no mmap path, no page directory, and a node
        // invalidates no copy itself (a write's file server frees the
        // shared slots).
        "daxfs" => {
            (group == GROUP_FIO && engine == Some("mmap"))
                || (group == GROUP_DIR && workload == "bench dir")
                || group == GROUP_INV
        }
        _ => false,
    }
}

/// Why a figure may be n/a (for the report).
pub fn na_reason(group: &str, mode: &str) -> &'static str {
    match (mode, group) {
        ("private", GROUP_FIO) => "private mode has no mmap path",
        ("private", GROUP_DIR) => "private mode has no page directory",
        ("net", GROUP_FIO) => {
            "net mode has no mmap path (like private mode; its file data comes only through TCP requests to the file server)"
        }
        ("net", GROUP_DIR) => {
            "net mode has no page directory (the directory serves files over TCP/IP only)"
        }
        ("daxfs", GROUP_FIO) => {
            "daxfs mode has no mmap path (reads copy out of the shared slots)"
        }
        ("daxfs", GROUP_DIR) => {
            "daxfs mode has no page directory (nodes share the slot cache by CAS)"
        }
        ("daxfs", GROUP_INV) => {
            "daxfs mode has no node-side invalidation (a write's file server frees the shared slots)"
        }
        _ => "",
    }
}

/// How a figure came out.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    /// Measured: `value` is the figure.
    Ok(f64),
    /// Not applicable in this mode by design (e.g. mmap in private mode):
    /// the node's own answer.
    NotApplicable(String),
    /// Expected but missing: the error.
    Failed(String),
}

impl Status {
    /// The value if measured.
    pub fn value(&self) -> Option<f64> {
        match self {
            Status::Ok(v) if v.is_finite() => Some(*v),
            _ => None,
        }
    }
    /// The word in results.json.
    pub fn word(&self) -> &'static str {
        match self {
            Status::Ok(v) if v.is_finite() => "ok",
            Status::Ok(_) => "failed",
            Status::NotApplicable(_) => "n/a",
            Status::Failed(_) => "failed",
        }
    }
    /// The error or the reason for n/a.
    pub fn note(&self) -> Option<String> {
        match self {
            Status::Ok(v) if v.is_finite() => None,
            Status::Ok(v) => Some(format!("not a number: {v}")),
            Status::NotApplicable(s) | Status::Failed(s) => Some(s.clone()),
        }
    }
}

/// Where a cluster ran (recorded with each of its figures).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Context {
    /// Run-folder-independent name of the cluster (`strong-fio`).
    pub cluster: String,
    /// Nodes.
    pub nodes: u8,
    /// Shared region MiB.
    pub shm_mb: u32,
    /// Frames per node pool, MiB.
    pub pool_mib: f64,
    /// Storage profile.
    pub storage: String,
    /// CXL latency (ns).
    pub cxl_latency_ns: u32,
    /// Accelerator line of qemu-run.sh (`tcg (no vmx/svm ...)`).
    pub accel: String,
    /// Time dilation of the cluster (`off` or the factor qemu-run.sh
    /// applied).
    pub dilation: String,
}

/// One number of the report.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// Unique id: `group/mode/workload/engine/scenario` (`-` for none).
    pub id: String,
    /// [`GROUP_FIO`], [`GROUP_INV`], ...
    pub group: String,
    /// Mode (`host` for the host baseline).
    pub mode: String,
    /// Scenario (`CM`, `CM-R`, `CH-R`, `1 sharer`, ...).
    pub scenario: String,
    /// Workload key or benchmark name.
    pub workload: String,
    /// fio engine.
    pub engine: Option<String>,
    /// Metric name.
    pub metric: String,
    /// Unit.
    pub unit: String,
    /// Lower is better.
    pub lower_is_better: bool,
    /// Result.
    pub status: Status,
    /// Parameters (fio options, sizes, ...).
    pub params: Value,
    /// Where it ran.
    pub context: Context,
    /// Busy instances during the measurement (from fio's RESULT, else the
    /// node and the directory).
    pub busy_instances: Option<u64>,
    /// The node's command line(s).
    pub command: String,
    /// RESULT json (fio) or the output line(s).
    pub raw: Value,
}

/// Builds a figure id.
pub fn figure_id(
    group: &str,
    mode: &str,
    workload: &str,
    engine: Option<&str>,
    scenario: &str,
) -> String {
    format!(
        "{group}/{mode}/{workload}/{}/{scenario}",
        engine.unwrap_or("-")
    )
}

impl Figure {
    /// A figure without a result yet (status Failed "not measured").
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        group: &str,
        mode: &str,
        workload: &str,
        engine: Option<&str>,
        scenario: &str,
        metric: &str,
        unit: &str,
        lower_is_better: bool,
    ) -> Figure {
        Figure {
            id: figure_id(group, mode, workload, engine, scenario),
            group: group.into(),
            mode: mode.into(),
            scenario: scenario.into(),
            workload: workload.into(),
            engine: engine.map(str::to_string),
            metric: metric.into(),
            unit: unit.into(),
            lower_is_better,
            status: Status::Failed("not measured".into()),
            params: Value::Null,
            context: Context::default(),
            busy_instances: None,
            command: String::new(),
            raw: Value::Null,
        }
    }

    /// The value if measured.
    pub fn value(&self) -> Option<f64> {
        self.status.value()
    }

    /// Id of the same figure in another mode.
    pub fn id_in_mode(&self, mode: &str) -> String {
        figure_id(
            &self.group,
            mode,
            &self.workload,
            self.engine.as_deref(),
            &self.scenario,
        )
    }

    /// A figure read back from results.json ([`Figure::to_json`]); None
    /// if a field that identifies it is missing.
    pub fn from_json(j: &Value) -> Option<Figure> {
        let st = |k: &str| j[k].as_str().map(str::to_string);
        let note = st("error").unwrap_or_default();
        let status = match j["status"].as_str()? {
            "ok" => Status::Ok(j["value"].as_f64()?),
            "n/a" => Status::NotApplicable(note),
            _ => Status::Failed(note),
        };
        Some(Figure {
            id: st("id")?,
            group: st("group")?,
            mode: st("mode")?,
            scenario: st("scenario")?,
            workload: st("workload")?,
            engine: st("engine"),
            metric: st("metric").unwrap_or_default(),
            unit: st("unit").unwrap_or_default(),
            lower_is_better: j["lower_is_better"].as_bool()?,
            status,
            params: j["params"].clone(),
            context: Context {
                cluster: st("cluster").unwrap_or_default(),
                nodes: j["nodes"]
                    .as_u64()
                    .and_then(|n| u8::try_from(n).ok())
                    .unwrap_or(0),
                shm_mb: j["shm_mb"]
                    .as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .unwrap_or(0),
                pool_mib: j["pool_mib_per_node"].as_f64().unwrap_or(f64::NAN),
                storage: st("storage").unwrap_or_default(),
                cxl_latency_ns: j["cxl_latency_ns"]
                    .as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .unwrap_or(0),
                accel: st("accel").unwrap_or_default(),
                dilation: st("dilation").unwrap_or_else(|| "off".into()),
            },
            busy_instances: j["busy_instances"].as_u64(),
            command: st("command").unwrap_or_default(),
            raw: j["raw"].clone(),
        })
    }

    /// The figure as JSON (results.json).
    pub fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "group": self.group,
            "mode": self.mode,
            "scenario": self.scenario,
            "workload": self.workload,
            "engine": self.engine,
            "metric": self.metric,
            "unit": self.unit,
            "lower_is_better": self.lower_is_better,
            "status": self.status.word(),
            "value": self.value(),
            "error": self.status.note(),
            "params": self.params,
            "cluster": self.context.cluster,
            "nodes": self.context.nodes,
            "shm_mb": self.context.shm_mb,
            "pool_mib_per_node": self.context.pool_mib,
            "storage": self.context.storage,
            "cxl_latency_ns": self.context.cxl_latency_ns,
            "accel": self.context.accel,
            "dilation": self.context.dilation,
            "busy_instances": self.busy_instances,
            "command": self.command,
            "raw": self.raw,
        })
    }
}

/// Formats a value for tables: 3 significant digits, thousands kept.
pub fn fmt_value(v: f64) -> String {
    let a = v.abs();
    if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// Formats a ratio: `2.61x`; below 0.1 with two significant digits
/// (`0.0072x`), so that a small ratio never shows as `0.00x`.
pub fn fmt_ratio(r: f64) -> String {
    if r >= 100.0 {
        format!("{r:.0}x")
    } else if r >= 10.0 {
        format!("{r:.1}x")
    } else if r >= 0.1 || r <= 0.0 || !r.is_finite() {
        format!("{r:.2}x")
    } else {
        let decimals = ((-r.log10().floor()) as usize + 1).min(12);
        format!("{r:.decimals$}x")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_status() {
        let mut f = Figure::new(
            GROUP_FIO,
            "strong",
            "read-lat",
            Some("libaio"),
            "CM-R",
            "mean latency",
            "us",
            true,
        );
        assert_eq!(f.id, "fio/strong/read-lat/libaio/CM-R");
        assert_eq!(f.id_in_mode("private"), "fio/private/read-lat/libaio/CM-R");
        assert_eq!(f.value(), None);
        assert_eq!(f.status.word(), "failed");
        f.status = Status::Ok(f64::NAN);
        assert_eq!(f.value(), None);
        assert_eq!(f.status.word(), "failed");
        f.status = Status::Ok(12.5);
        assert_eq!(f.value(), Some(12.5));
        let j = f.to_json();
        assert_eq!(j["value"], json!(12.5));
        assert_eq!(j["error"], Value::Null);
        f.status = Status::NotApplicable("not supported".into());
        assert_eq!(f.to_json()["status"], json!("n/a"));
        assert_eq!(f.to_json()["value"], Value::Null);
    }

    #[test]
    fn not_applicable() {
        assert!(na_allowed(GROUP_FIO, "private", "read-lat", Some("mmap")));
        assert!(!na_allowed(
            GROUP_FIO,
            "private",
            "read-lat",
            Some("libaio")
        ));
        assert!(!na_allowed(GROUP_FIO, "relaxed", "write-bw", Some("mmap")));
        assert!(!na_allowed(GROUP_FIO, "relaxed", "read-bw", Some("mmap")));
        assert!(!na_allowed(GROUP_FIO, "strong", "write-bw", Some("mmap")));
        assert!(!na_allowed(GROUP_INV, "private", "bench inv", None));
        assert!(!na_allowed(GROUP_INV, "strong", "bench inv", None));
        assert!(na_allowed(GROUP_DIR, "private", "bench dir", None));
        assert!(!na_allowed(GROUP_DIR, "private", "bench ring", None));
        assert!(na_reason(GROUP_FIO, "relaxed").is_empty());
        // net: like private.
        assert!(na_allowed(GROUP_FIO, "net", "read-lat", Some("mmap")));
        assert!(na_allowed(GROUP_FIO, "net", "write-bw", Some("mmap")));
        assert!(!na_allowed(GROUP_FIO, "net", "read-lat", Some("libaio")));
        assert!(!na_allowed(GROUP_INV, "net", "bench inv", None));
        assert!(na_allowed(GROUP_DIR, "net", "bench dir", None));
        assert!(!na_allowed(GROUP_DIR, "net", "bench ring", None));
        assert!(!na_allowed(GROUP_DIR, "net", "bench rpc", None));
        assert!(!na_allowed(GROUP_DIR, "net", "bench read", None));
        assert!(na_allowed(GROUP_FIO, "daxfs", "read-lat", Some("mmap")));
        assert!(!na_allowed(GROUP_FIO, "daxfs", "read-lat", Some("libaio")));
        assert!(na_allowed(GROUP_DIR, "daxfs", "bench dir", None));
        assert!(!na_allowed(GROUP_DIR, "daxfs", "bench read", None));
        assert!(na_allowed(GROUP_INV, "daxfs", "bench inv", None));
        assert!(na_reason(GROUP_INV, "daxfs").starts_with("daxfs mode has no"));
        assert!(!na_allowed(
            GROUP_BIG,
            "net",
            "seq read > pool",
            Some("libaio")
        ));
        for g in [GROUP_FIO, GROUP_DIR] {
            assert!(na_reason(g, "net").starts_with("net mode has no"), "{g}");
        }
        assert_eq!(na_reason(GROUP_INV, "net"), "");
        assert_eq!(na_reason(GROUP_BIG, "net"), "");
    }

    #[test]
    fn workloads() {
        assert_eq!(WORKLOADS.len(), 7);
        let on = Workload::by_key(READ_BW).unwrap();
        let off = Workload::by_key(READ_BW_RA_OFF).unwrap();
        assert!(on.readahead && !off.readahead);
        assert_eq!(
            (on.rw, on.bs, on.kind, on.dpc_fig),
            (off.rw, off.bs, off.kind, off.dpc_fig),
            "the same workload, readahead apart"
        );
        assert_eq!(WORKLOADS.iter().filter(|w| !w.readahead).count(), 1);
        let w = Workload::by_key("write-bw").unwrap();
        assert_eq!(w.dpc_figure("mmap"), "Fig. 9b");
        assert_eq!(w.dpc_figure("libaio"), "Fig. 8b");
        let p = crate::bench::opts::Params::new(true);
        assert_eq!(Workload::by_key("read-lat").unwrap().jobs(&p), 1);
        assert_eq!(w.jobs(&p), p.jobs);
    }

    #[test]
    fn formatting() {
        assert_eq!(fmt_value(1234.56), "1235");
        assert_eq!(fmt_value(123.456), "123.5");
        assert_eq!(fmt_value(12.3456), "12.35");
        assert_eq!(fmt_value(1.23456), "1.235");
        assert_eq!(fmt_ratio(2.6), "2.60x");
        assert_eq!(fmt_ratio(72.8), "72.8x");
        assert_eq!(fmt_ratio(123.4), "123x");
        assert_eq!(fmt_ratio(0.1), "0.10x");
        assert_eq!(fmt_ratio(0.0072), "0.0072x");
        assert_eq!(fmt_ratio(0.000_672), "0.00067x");
        assert_eq!(fmt_ratio(0.05), "0.050x");
    }
}
