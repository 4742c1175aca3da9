//! What the application study runs: the apps, the node counts, the
//! node cache every mode gets, the dataset sizes chosen from it, the
//! shared region and the run length. Pure (host-tested).

use serde_json::{json, Value};

use crate::bench::opts::BenchOpts;

const MIB: u64 = 1 << 20;

pub use super::list::{App, APPS};

/// RAM per instance of the study's clusters (MiB): the smallest kernel
/// heap (24 MiB), so the node cache is small and the datasets stay small
/// enough for TCG.
pub const MEM_MB: u32 = 48;

/// Default warm-up of every app run (s): as Filebench and db_bench run a
/// warm-up before they measure, long enough at TCG's pace for every app
/// to fill a node's cache (2,048 pages) once before the measured phase.
pub const WARMUP_S: u32 = 2;
/// The warm-up of `--quick` (s).
pub const QUICK_WARMUP_S: u32 = 1;

/// Free room per node in the datasets' image (MiB): 50 fileserver
/// threads keep a file of 128 KiB mean each between loops, and a
/// thread's files live until it deletes them.
pub const DISK_MARGIN_MB_PER_NODE: u32 = 64;

/// Working set per app as a multiple of one node's cache: beyond one
/// node (1.5-2x, DPC's 30-60 GB over 32 GB), within two nodes' caches.
pub const WORKING_SET_FACTOR: f64 = 1.75;

/// The node cache pages of a kernel with `mem_mb` MiB of RAM, as the
/// kernel computes it (`mm::heap_size_for`, then
/// `nodepath::node::cache_pages_for_heap`). The kernel sees a little
/// less RAM than QEMU's `-m` (firmware areas), which only matters
/// between the clamps; the runner checks the boot log's figure.
pub fn cache_pages_for_mem(mem_mb: u32) -> usize {
    let ram = (u64::from(mem_mb) * MIB) as usize;
    let heap = (ram / 2).clamp(24 << 20, 64 << 20) / 4096 * 4096;
    nodepath::node::cache_pages_for_heap(heap)
}

/// A dataset's size for a node cache of `cache_pages`: the working-set
/// factor times the cache, rounded up to whole MiB.
pub fn dataset_bytes(cache_pages: usize) -> u64 {
    let want = (cache_pages as f64 * 4096.0 * WORKING_SET_FACTOR).ceil() as u64;
    want.div_ceil(MIB) * MIB
}

/// The smallest shared region (MiB, a power of two, 16..=8192) whose
/// pool per node holds `cache_pages` with a quarter to spare for
/// `nodes` nodes, so that the single-copy modes can be capped at the
/// node cache (`cache config limit=`) and never run out of pool first.
pub fn shm_mb_for(cache_pages: usize, nodes: u8) -> Option<u32> {
    let need = cache_pages as f64 * 4096.0 * 1.25 / MIB as f64;
    let mut mb = 16u32;
    while mb <= 8192 {
        if crate::bench::runner::pool_mib(mb, nodes) >= need {
            return Some(mb);
        }
        mb *= 2;
    }
    None
}

/// The study's plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Modes, in order (`private` first: the baseline).
    pub modes: Vec<String>,
    /// Node counts (1 first).
    pub nodes: Vec<u8>,
    /// The apps.
    pub apps: Vec<App>,
    /// `--runtime` of every app run (s): its measured phase.
    pub runtime_s: u32,
    /// `--warmup` of every app run (s; 0: none): run first, not counted.
    pub warmup_s: u32,
    /// RAM per instance (MiB).
    pub mem_mb: u32,
    /// Node cache pages every mode gets (private/net page cache, the
    /// single-copy modes' owned pages through `cache config limit=`).
    pub cache_pages: usize,
    /// Bytes of each app's dataset.
    pub dataset_bytes: u64,
    /// Shared region of every cluster (MiB), sized for the largest N.
    pub shm_mb: u32,
    /// Free room in the image beyond the datasets (MiB): the files that
    /// fileserver, varmail and webserver's log write on every node.
    pub disk_margin_mb: u32,
    /// Storage profile.
    pub storage: String,
    /// Limit of one app command (s).
    pub cmd_timeout_s: u64,
    /// Limit of one boot (s).
    pub boot_timeout_s: u64,
    /// Every node's eviction policy (`--policy`; None: the default).
    pub policy: Option<String>,
}

impl Plan {
    /// The plan for a command line.
    pub fn from_opts(o: &BenchOpts) -> Result<Plan, String> {
        let mut modes = o.modes.clone();
        if !modes.iter().any(|m| m == "private") {
            return Err(
                "--apps needs the private mode (every figure is normalized to single-node private)"
                    .into(),
            );
        }
        modes.retain(|m| m != "private");
        modes.insert(0, "private".into());
        let nodes =
            o.apps_nodes.clone().unwrap_or_else(
                || {
                    if o.quick {
                        vec![1, 2]
                    } else {
                        vec![1, 2, 4]
                    }
                },
            );
        let runtime_s = o.apps_runtime.unwrap_or(if o.quick { 1 } else { 5 });
        let warmup_s = o
            .apps_warmup
            .unwrap_or(if o.quick { QUICK_WARMUP_S } else { WARMUP_S });
        let cache_pages = cache_pages_for_mem(MEM_MB);
        let max_n = nodes.iter().copied().max().unwrap_or(1);
        let shm_mb = shm_mb_for(cache_pages, max_n).ok_or_else(|| {
            format!("no shared region holds {max_n} pools of {cache_pages} pages")
        })?;
        let apps: Vec<App> = match &o.apps_list {
            None => APPS.to_vec(),
            Some(list) => APPS
                .iter()
                .filter(|a| list.iter().any(|n| n == a.name))
                .copied()
                .collect(),
        };
        if apps.is_empty() {
            return Err("--apps-list names no app".into());
        }
        Ok(Plan {
            modes,
            nodes,
            apps,
            runtime_s,
            warmup_s,
            mem_mb: MEM_MB,
            cache_pages,
            dataset_bytes: dataset_bytes(cache_pages),
            shm_mb,
            disk_margin_mb: DISK_MARGIN_MB_PER_NODE * u32::from(max_n),
            storage: if o.storage_set {
                o.storage.clone()
            } else {
                "sas-raid".into()
            },
            cmd_timeout_s: u64::from(runtime_s) + u64::from(warmup_s) + 600,
            boot_timeout_s: 180,
            policy: o.policy.clone(),
        })
    }

    /// `mkfs --dataset` specs of every app.
    pub fn dataset_specs(&self) -> Vec<String> {
        self.apps
            .iter()
            .map(|a| format!("{}:{}k", a.name, self.dataset_bytes / 1024))
            .collect()
    }

    /// The command node `node` runs for `app`: the same app, runtime and
    /// options everywhere, the node's own fixed seed.
    pub fn command(&self, app: &str, node: u8) -> String {
        let warm = if self.warmup_s > 0 {
            format!(" --warmup {}", self.warmup_s)
        } else {
            String::new()
        };
        format!("app {app} --runtime {}{warm} --seed {node}", self.runtime_s)
    }

    /// The plan as JSON.
    pub fn to_json(&self) -> Value {
        json!({
            "modes": self.modes,
            "nodes": self.nodes,
            "apps": self.apps.iter().map(|a| a.name).collect::<Vec<_>>(),
            "runtime_s": self.runtime_s,
            "warmup_s": self.warmup_s,
            "mem_mb": self.mem_mb,
            "cache_pages_per_node": self.cache_pages,
            "cache_mib_per_node": self.cache_pages as f64 * 4096.0 / MIB as f64,
            "dataset_bytes_per_app": self.dataset_bytes,
            "working_set_factor": WORKING_SET_FACTOR,
            "shm_mb": self.shm_mb,
            "disk_margin_mb": self.disk_margin_mb,
            "pool_mib_per_node": self.nodes.iter()
                .map(|&n| (n.to_string(), json!(crate::bench::runner::pool_mib(self.shm_mb, n))))
                .collect::<serde_json::Map<_, _>>(),
            "storage": self.storage,
            "cmd_timeout_s": self.cmd_timeout_s,
            "boot_timeout_s": self.boot_timeout_s,
            "policy": self.policy.as_deref().unwrap_or("fifo"),
        })
    }
}
