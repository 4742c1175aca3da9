//! The kernel command line: `role=dir nodes=N ...` or
//! `role=node id=K nodes=N ...`. Unknown keys are reported, not fatal, so a
//! newer launcher can pass options an older kernel ignores; the launcher
//! itself refuses a key that is not in [`BOOT_OPTIONS`] before it boots
//! anything (`qemu-run.sh --append-extra`), so a typo is not lost in a
//! guest log.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

mod policy;

pub use policy::PolicyName;

/// One key of the kernel command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BootOption {
    /// The key (`key=value`).
    pub key: &'static str,
    /// A value [`BootConfig::parse`] accepts (for tests and docs).
    pub example: &'static str,
    /// Set by the launcher from its own flags (`--nodes`) and refused in
    /// `qemu-run.sh --append-extra`, where it would contradict them.
    pub launcher_only: bool,
}

const fn opt(key: &'static str, example: &'static str) -> BootOption {
    BootOption {
        key,
        example,
        launcher_only: false,
    }
}

/// Every key [`BootConfig::parse`] understands: the one list of boot
/// options. `qemu-run.sh` keeps a copy for `--append-extra` (it must
/// refuse a typo before it builds or boots, without a built tool), and
/// the host test `tests/tests/docs.rs` fails when that copy, or the boot
/// option table of `docs/USAGE.md`, differs from this one.
pub const BOOT_OPTIONS: &[BootOption] = &[
    BootOption {
        key: "role",
        example: "dir",
        launcher_only: true,
    },
    BootOption {
        key: "id",
        example: "1",
        launcher_only: true,
    },
    BootOption {
        key: "nodes",
        example: "2",
        launcher_only: true,
    },
    opt("mode", "strong"),
    opt("policy", "lru"),
    opt("storage", "sata-ssd"),
    opt("cxl_ns", "250"),
    opt("doorbell", "1"),
    opt("log", "debug"),
    opt("hb_timeout_ms", "3000"),
    opt("rpc_timeout_ms", "10000"),
    opt("dir_spin_us", "5000"),
    opt("dir_bell_spin_us", "200"),
    opt("bell_spin_us", "20"),
    opt("tick_hz", "1000"),
    opt("remote_limit", "8192"),
    opt("cache_pages", "2048"),
    opt("ring_reads", "32"),
    opt("fill_depth", "32"),
    opt("disk_lat_us", "120"),
    BootOption {
        key: "dilation_pct",
        example: "450",
        launcher_only: true,
    },
    opt("disk_irq", "1"),
    opt("lazy_inv", "1"),
    opt("fence", "1"),
    opt("doorbell_selftest", "300"),
    opt("task_reads", "each"),
    opt("baseline_writes", "back"),
    opt("readahead_kb", "128"),
    opt("faultaround_kb", "64"),
    opt("reclaim_low", "0"),
    opt("reclaim_high", "8"),
    opt("trace", "1"),
    opt("delegation", "1"),
];

/// Default low watermark of a node's free frames, percent of its frames:
/// off until an A/B on a quiet host shows that reclaim ahead of need does
/// not slow the read path (the one measurement so far, on a loaded host,
/// had a sequential read slower with it; `reclaim_low=4` turns it on).
pub const DEFAULT_RECLAIM_LOW: u32 = 0;
/// Default high watermark of a node's free frames, percent of its frames.
pub const DEFAULT_RECLAIM_HIGH: u32 = 8;

/// Which part an instance plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The directory service (owns the disk).
    Dir,
    /// A compute node with this id (1-based).
    Node(u32),
}

/// Parsed boot configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootConfig {
    /// Role of this instance.
    pub role: Role,
    /// Number of nodes in the cluster.
    pub nodes: u32,
    /// Heartbeat timeout after which the directory fails a node (ms).
    pub hb_timeout_ms: u64,
    /// How long the directory keeps spinning after its last request before
    /// it halts between timer ticks (microseconds).
    pub dir_spin_us: u64,
    /// With doorbells: how long the directory keeps spinning after its last
    /// request before it halts until a doorbell (microseconds, default
    /// 200): acks and follow-up requests that come soon need no wakeup.
    pub dir_bell_spin_us: u64,
    /// With doorbells: how long a node waiting for the directory spins
    /// before it sleeps until a doorbell (microseconds, default 20).
    pub bell_spin_us: u64,
    /// How long a node waits for one directory answer (ms).
    pub rpc_timeout_ms: u64,
    /// Page-cache mode (`mode=private|strong|relaxed|net`, default strong).
    pub mode: Mode,
    /// Timer tick rate (Hz): how often a halted kernel wakes to look at
    /// its rings (an idle node answers invalidations within one tick).
    pub tick_hz: u32,
    /// Emulated CXL latency added to every copy from a peer's frame (ns,
    /// up to 10 ms: `qemu-run.sh --cxl-latency-ns` takes up to 100 us and
    /// multiplies it by the dilation, at most 100).
    pub cxl_ns: u64,
    /// Storage profile name given by the launcher (recorded in results;
    /// the directory's disk driver adds its access latency, see
    /// [`BootConfig::disk_latency_us`]).
    pub storage: String,
    /// Directory: most disk requests (page fills and block writes) in
    /// flight (`fill_depth=N`, 0..=64, default 32, bounded by the device's
    /// queue); 0: every fill and write is synchronous and the serving loop
    /// waits for it (the old behaviour, kept for comparison).
    pub fill_depth: u32,
    /// Directory: access latency the disk driver adds to every request
    /// (`disk_lat_us=N`, 0..=100000); `None`: the storage profile's.
    pub disk_lat_us: Option<u64>,
    /// How many times slower this guest's CPU runs than the host's, in
    /// percent (`dilation_pct=N`, 10..=10000, default 100; set by
    /// `qemu-run.sh --dilation`): the disk latency is scaled by it, so
    /// that compute and I/O keep hardware's proportions.
    pub dilation_pct: u64,
    /// Log level (`log=error|warn|info|debug|trace`, default info).
    pub log: log::LevelFilter,
    /// Most remote mappings a node keeps before dropping old ones.
    pub remote_limit: u64,
    /// `private` mode: most file-server reads one batch keeps in flight
    /// over the rings, side by side in the read bulk slot
    /// (`ring_reads=N`, 1..=32, default 32; 1: one request at a time).
    pub ring_reads: u32,
    /// Use the ivshmem-doorbell device's interrupts (`doorbell=0|1`,
    /// default 0): the launcher sets it when it started the ivshmem server
    /// and gave every instance `-device ivshmem-doorbell`.
    pub doorbell: bool,
    /// Directory, doorbell mode: halt for the disk until its completion
    /// interrupt (`disk_irq=0|1`, default 1: virtio-blk MSI-X) instead of
    /// polling its used ring every 20 us (0, kept for comparison).
    pub disk_irq: bool,
    /// Doorbell mode: a DIR_INV to a node that sleeps with nothing in
    /// flight is taken as acknowledged without waking it (`lazy_inv=0|1`,
    /// default 1; nodes announce such sleeps, the directory takes them;
    /// see `fabric::doorbell`). 0: every invalidation waits for the
    /// sharer's ack, as before.
    pub lazy_inv: bool,
    /// Record protocol events from boot (`trace=0|1`, default 0; the
    /// shell's `trace on|off` changes it at run time; see `fabric::trace`).
    pub trace: bool,
    /// Directory: a node declared failed is fenced before its frames, and
    /// the frames it mapped, are reused (`fence=0|1`, default 1: the host's
    /// fencer, `qemu-run.sh`'s ivshmem server, kills its QEMU and confirms
    /// in the region; see `fabric::fence`). 0: reused at once, safe only
    /// if a failed node can never run again.
    pub fence: bool,
    /// Node, doorbell mode: time this many doorbell round trips to the
    /// directory at boot (`doorbell_selftest=N`, 0..=10000, default 0): ring
    /// its vector 1, wait for its echo word; logs median, p99, min, max.
    pub doorbell_selftest: u32,
    /// How `private` and `net` nodes write (`baseline_writes=back|through`,
    /// default back): buffered in the node's page cache and written back at
    /// fsync, close, sync and under memory pressure, or sent to the file
    /// server on every write.
    pub baseline_writes: BaselineWrites,
    /// Node: the most pages its own cache holds (`cache_pages=N`, 64 to
    /// 16M; default a third of the kernel heap, which also caps it): the
    /// private cache of `private` and `net`, the bound on relaxed mode's
    /// private copies (a smaller cache puts writes and reads under memory
    /// pressure on purpose).
    pub cache_pages: Option<u64>,
    /// Eviction policy of every node's owned pages (`policy=NAME`,
    /// default `fifo`; see [`PolicyName`]).
    pub policy: PolicyName,
    /// Node: tasks' read misses (`task_reads=each|batch`): each task's
    /// I/O runs as soon as its own pages are in, or (batch) every task of
    /// a flush waits until the slowest miss of the flush is in. Default
    /// each, but batch in `net` mode, where each read as a TCP call of
    /// its own measured 0.7-1.0x of the batch's IOPS
    /// (`tools/bench-task-reads.sh --mode net` compares them):
    /// the baseline keeps its faster way unless asked.
    pub task_reads_each: bool,
    /// Node: the largest readahead window of a sequential reader, KiB
    /// (`readahead_kb=N`, 0..=8192, default 128 as Linux's
    /// `read_ahead_kb`; 0: no readahead, a read fetches only its pages).
    pub readahead_kb: u32,
    /// Node: on an mmap fault, the already cached pages within this many
    /// KiB around the fault (an aligned block, as Linux's
    /// `fault_around_bytes`) are mapped too (`faultaround_kb=N`, 0..=2048,
    /// default 64; 0: only the faulting page).
    pub faultaround_kb: u32,
    /// Node: reclaim ahead of need starts when the free frames (the
    /// single-copy pool, or the private cache's room) drop under this
    /// percent of the node's frames (`reclaim_low=N`, 0..=50, default
    /// [`DEFAULT_RECLAIM_LOW`]; 0: off, a miss reclaims when it finds no
    /// frame).
    pub reclaim_low: u32,
    /// Node: reclaim ahead of need goes on, in batches, until this
    /// percent of the node's frames is free (`reclaim_high=N`, 1..=90,
    /// above `reclaim_low`, default [`DEFAULT_RECLAIM_HIGH`]).
    pub reclaim_high: u32,
    /// Strong mode: a node that alone holds a range of a file takes it
    /// whole from the directory and writes, extends and frees its pages
    /// without a request per page; another node's request for one of
    /// them recalls it (`delegation=0|1`, default 0; see
    /// `fabric::proto::deleg`).
    pub delegation: bool,
    /// Keys that were not understood (reported in the log).
    pub unknown: Vec<String>,
}

fn num(key: &str, v: &str, min: u64, max: u64) -> Result<u64, String> {
    let n: u64 = v
        .parse()
        .map_err(|_| alloc::format!("{key}={v}: not a number"))?;
    if n < min || n > max {
        return Err(alloc::format!("{key}={v}: must be in {min}..={max}"));
    }
    Ok(n)
}

/// Values a boot option sets that are settled only once the whole line
/// is read (`role` needs `id`; `task_reads` defaults by mode).
#[derive(Default)]
struct Pending {
    role: Option<String>,
    id: Option<u32>,
    task_reads: Option<bool>,
}

/// `0` or `1` for a switch `key`.
fn switch(key: &str, v: &str) -> Result<bool, String> {
    match v {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err(alloc::format!("{key}={v}: expected 0 or 1")),
    }
}

impl BootConfig {
    /// Parse a command line.
    pub fn parse(cmdline: &str) -> Result<BootConfig, String> {
        let mut c = BootConfig::defaults();
        let mut pending = Pending::default();
        for word in cmdline.split_ascii_whitespace() {
            let (k, v) = word.split_once('=').unwrap_or((word, ""));
            // Only the table's keys reach `set`, so a key parsed there but
            // missing from the table is reported as unknown, and the test
            // `every_boot_option_of_the_table_is_parsed` fails for a table
            // key `set` does not parse.
            if !BOOT_OPTIONS.iter().any(|o| o.key == k) || !c.set(k, v, &mut pending)? {
                c.unknown.push(word.to_string());
            }
        }
        c.settle(pending)
    }

    /// Every option at its default (`role` still to be given).
    fn defaults() -> BootConfig {
        BootConfig {
            role: Role::Dir,
            nodes: 2,
            hb_timeout_ms: 3000,
            dir_spin_us: 5000,
            dir_bell_spin_us: 200,
            bell_spin_us: 20,
            rpc_timeout_ms: 10_000,
            mode: Mode::Strong,
            remote_limit: 8192,
            ring_reads: 32,
            doorbell: false,
            disk_irq: true,
            lazy_inv: true,
            trace: false,
            fence: true,
            doorbell_selftest: 0,
            baseline_writes: BaselineWrites::Back,
            tick_hz: 1000,
            cxl_ns: 0,
            storage: "none".to_string(),
            fill_depth: 32,
            disk_lat_us: None,
            dilation_pct: 100,
            log: log::LevelFilter::Info,
            policy: PolicyName::Fifo,
            cache_pages: None,
            task_reads_each: true,
            readahead_kb: 128,
            faultaround_kb: 64,
            reclaim_low: DEFAULT_RECLAIM_LOW,
            reclaim_high: DEFAULT_RECLAIM_HIGH,
            delegation: false,
            unknown: Vec::new(),
        }
    }

    /// Apply `k=v`; `Ok(false)` if `k` is not an option this parser knows.
    fn set(&mut self, k: &str, v: &str, p: &mut Pending) -> Result<bool, String> {
        let max_nodes = crate::layout::MAX_NODES as u64;
        match k {
            "role" => p.role = Some(v.to_string()),
            "id" => p.id = Some(num(k, v, 1, max_nodes)? as u32),
            "nodes" => self.nodes = num(k, v, 1, max_nodes)? as u32,
            "hb_timeout_ms" => self.hb_timeout_ms = num(k, v, 50, 3_600_000)?,
            "dir_spin_us" => self.dir_spin_us = num(k, v, 0, 10_000_000)?,
            "dir_bell_spin_us" => self.dir_bell_spin_us = num(k, v, 0, 10_000_000)?,
            "bell_spin_us" => self.bell_spin_us = num(k, v, 0, 10_000_000)?,
            "rpc_timeout_ms" => self.rpc_timeout_ms = num(k, v, 10, 3_600_000)?,
            "remote_limit" => self.remote_limit = num(k, v, 1, 1 << 30)?,
            "ring_reads" => self.ring_reads = num(k, v, 1, 32)? as u32,
            "cache_pages" => self.cache_pages = Some(num(k, v, 64, 1 << 24)?),
            "tick_hz" => self.tick_hz = num(k, v, 100, 20_000)? as u32,
            "cxl_ns" => self.cxl_ns = num(k, v, 0, 10_000_000)?,
            "fill_depth" => self.fill_depth = num(k, v, 0, 64)? as u32,
            "disk_lat_us" => self.disk_lat_us = Some(num(k, v, 0, 100_000)?),
            "dilation_pct" => self.dilation_pct = num(k, v, 10, 10_000)?,
            "readahead_kb" => self.readahead_kb = num(k, v, 0, 8192)? as u32,
            "faultaround_kb" => self.faultaround_kb = num(k, v, 0, 2048)? as u32,
            "reclaim_low" => self.reclaim_low = num(k, v, 0, 50)? as u32,
            "reclaim_high" => self.reclaim_high = num(k, v, 1, 90)? as u32,
            "doorbell_selftest" => self.doorbell_selftest = num(k, v, 0, 10_000)? as u32,
            "doorbell" => self.doorbell = switch(k, v)?,
            "disk_irq" => self.disk_irq = switch(k, v)?,
            "lazy_inv" => self.lazy_inv = switch(k, v)?,
            "fence" => self.fence = switch(k, v)?,
            "trace" => self.trace = switch(k, v)?,
            "delegation" => self.delegation = switch(k, v)?,
            "task_reads" => {
                p.task_reads = Some(match v {
                    "each" => true,
                    "batch" => false,
                    _ => return Err(alloc::format!("task_reads={v}: expected each or batch")),
                })
            }
            _ => return self.set_named(k, v),
        }
        Ok(true)
    }

    /// Options whose value is a name (`mode`, `policy`, `storage`, ...).
    fn set_named(&mut self, k: &str, v: &str) -> Result<bool, String> {
        match k {
            "baseline_writes" => {
                self.baseline_writes = BaselineWrites::parse(v).ok_or_else(|| {
                    alloc::format!("baseline_writes={v}: expected back or through")
                })?
            }
            "policy" => {
                self.policy = PolicyName::parse(v).ok_or_else(|| {
                    alloc::format!("policy={v}: expected one of {}", PolicyName::names())
                })?
            }
            "storage" => match v {
                "none" | "nvme" | "sata-ssd" | "sas-raid" => self.storage = v.to_string(),
                _ => return Err(alloc::format!("storage={v}: unknown profile")),
            },
            "log" => {
                self.log = match v {
                    "error" => log::LevelFilter::Error,
                    "warn" => log::LevelFilter::Warn,
                    "info" => log::LevelFilter::Info,
                    "debug" => log::LevelFilter::Debug,
                    "trace" => log::LevelFilter::Trace,
                    _ => {
                        return Err(alloc::format!(
                            "log={v}: expected error, warn, info, debug or trace"
                        ))
                    }
                }
            }
            "mode" => {
                self.mode = Mode::parse(v)
                    .ok_or_else(|| alloc::format!("mode={v}: expected one of {}", Mode::names()))?
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Settle what depends on the whole line: the role (a node needs its
    /// id), `task_reads`' default by mode, the watermarks' order.
    fn settle(mut self, p: Pending) -> Result<BootConfig, String> {
        self.role = match p.role.as_deref() {
            Some("dir") => Role::Dir,
            Some("node") => {
                let id = p.id.ok_or("role=node needs id=K")?;
                if id > self.nodes {
                    return Err(alloc::format!("id={id} but nodes={}", self.nodes));
                }
                Role::Node(id)
            }
            Some(other) => return Err(alloc::format!("role={other}: expected dir or node")),
            None => return Err("missing role=dir or role=node".to_string()),
        };
        self.task_reads_each = p.task_reads.unwrap_or(self.mode != Mode::Net);
        if self.reclaim_low > 0 && self.reclaim_high <= self.reclaim_low {
            return Err(alloc::format!(
                "reclaim_high={} must be above reclaim_low={} (percent of the node's frames)",
                self.reclaim_high,
                self.reclaim_low
            ));
        }
        Ok(self)
    }
}

impl BootConfig {
    /// Access latency of one disk request (us): `disk_lat_us`, else the
    /// storage profile's (a 4 KiB random read at queue depth 1 of such a
    /// device), times the dilation (`dilation_pct`). QEMU's throttling
    /// (the launcher's `--storage`, which divides its rates by the same
    /// dilation) caps the rate (IOPS, bytes/s) but adds no latency of its
    /// own, so without this a request at a time costs what the host's
    /// page cache costs.
    pub fn disk_latency_us(&self) -> u64 {
        let base = self
            .disk_lat_us
            .unwrap_or_else(|| profile_latency_us(&self.storage));
        base.saturating_mul(self.dilation_pct) / 100
    }
}

/// The access latency (us) of a storage profile: `nvme` 80, `sata-ssd`
/// 120, `sas-raid` 100, `none` (and anything else) 0.
pub fn profile_latency_us(profile: &str) -> u64 {
    match profile {
        "nvme" => 80,
        "sata-ssd" => 120,
        "sas-raid" => 100,
        _ => 0,
    }
}

/// Write policy of the private-cache modes (`private`, `net`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BaselineWrites {
    /// Buffered: a write is a copy into the node's page cache; dirty pages
    /// go to the file server at fsync, close, sync and under pressure.
    Back,
    /// Every write goes to the file server, which writes the disk before
    /// answering.
    Through,
}

impl BaselineWrites {
    /// Parse `back|through`.
    pub fn parse(s: &str) -> Option<BaselineWrites> {
        match s {
            "back" => Some(BaselineWrites::Back),
            "through" => Some(BaselineWrites::Through),
            _ => None,
        }
    }

    /// Name for `cache stats` and the benchmark report.
    pub fn as_str(self) -> &'static str {
        match self {
            BaselineWrites::Back => "back",
            BaselineWrites::Through => "through",
        }
    }
}

/// Cache mode, chosen at boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Independent per-node caches through the storage server (baseline).
    Private,
    /// Single copy, coherent writes (DPC_SC).
    Strong,
    /// Single copy for reads, private writable copies reconciled at
    /// write-back (DPC).
    Relaxed,
    /// Private per-node caches, file data over TCP (smoltcp, virtio-net)
    /// to the directory's storage server: the NFS-like baseline.
    Net,
    /// DaxFS's decentralized design: nodes share one page cache of slots
    /// in the region, claimed and published by compare-and-swap, with no
    /// directory on the read path but the fill of a miss
    /// ([`daxcache::pcache`]). Needs atomics across instances (KVM or
    /// `--accel tcg-multi`).
    Daxfs,
}

impl Mode {
    /// Every mode, the default first (the order `qemu-run.sh --help`
    /// lists them; `tests/tests/docs.rs` checks the launcher's list).
    pub const ALL: [Mode; 5] = [
        Mode::Strong,
        Mode::Relaxed,
        Mode::Private,
        Mode::Net,
        Mode::Daxfs,
    ];

    /// Parse a mode's name ([`Mode::as_str`]).
    pub fn parse(s: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.as_str() == s)
    }

    /// Every mode's name, comma-separated (for error messages).
    pub fn names() -> String {
        let names: Vec<&str> = Mode::ALL.iter().map(|m| m.as_str()).collect();
        names.join(", ")
    }

    /// Name for `cache stats`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Private => "private",
            Mode::Strong => "strong",
            Mode::Relaxed => "relaxed",
            Mode::Net => "net",
            Mode::Daxfs => "daxfs",
        }
    }

    /// Does this mode use the page directory?
    pub fn single_copy(self) -> bool {
        !matches!(self, Mode::Private | Mode::Net | Mode::Daxfs)
    }

    /// Does this mode need read-modify-write instructions to be atomic
    /// across instances (KVM, or multi-threaded TCG)?
    pub fn needs_shared_atomics(self) -> bool {
        self == Mode::Daxfs
    }
}

#[cfg(test)]
mod tests;
