//! How to start a cluster: [`ClusterOpts`] and its builder.

use std::path::PathBuf;
use std::time::Duration;

/// How to start a cluster.
#[derive(Debug, Clone)]
pub struct ClusterOpts {
    /// Used in the run directory's name.
    pub name: String,
    /// Number of nodes (1..=16).
    pub nodes: u8,
    /// Disk image (default: qemu-run.sh creates `RUN/disk.img` from tools/sample).
    pub disk: Option<PathBuf>,
    /// Run directory (default: [`unique_run_dir`](super::unique_run_dir)).
    pub run_dir: Option<PathBuf>,
    /// `auto`, `tcg` or `kvm` (default: qemu-run.sh's `auto`).
    pub accel: Option<String>,
    /// Shared region size in MiB.
    pub shm_mb: Option<u32>,
    /// Memory per instance in MiB.
    pub mem_mb: Option<u32>,
    /// Extra `key=value` pairs for every kernel command line.
    pub append_extra: Option<String>,
    /// Page-cache mode (qemu-run.sh `--mode`: `strong`, `relaxed` or
    /// `private`; default: qemu-run.sh's `strong`).
    pub mode: Option<String>,
    /// Eviction policy of every node (qemu-run.sh `--policy`: `fifo`,
    /// `lru`, `s3fifo`, ...; default: qemu-run.sh's `fifo`).
    pub policy: Option<String>,
    /// Storage throttling profile (qemu-run.sh `--storage`: `none`, `nvme`,
    /// `sata-ssd` or `sas-raid`; default: qemu-run.sh's `none`).
    pub storage: Option<String>,
    /// Emulated CXL latency in ns added to every copy from a peer's frame
    /// (qemu-run.sh `--cxl-latency-ns`; default: qemu-run.sh's 0).
    pub cxl_latency_ns: Option<u32>,
    /// Time dilation (qemu-run.sh `--dilation`: `off`, `auto` or a factor
    /// such as `4.5`; default: qemu-run.sh's `off`).
    pub dilation: Option<String>,
    /// Doorbells (qemu-run.sh `--doorbell on|off`; default:
    /// `ONECOPY_TEST_DOORBELL`, else qemu-run.sh's).
    pub doorbell: Option<String>,
    /// Require "directory ready" and every node joined (default). When
    /// false, a cluster that boots but is not ready (e.g. a bad disk image)
    /// is kept running for the test to examine.
    pub expect_ready: bool,
    /// Limit for the boot (qemu-run.sh `--boot-timeout`).
    pub boot_timeout: Duration,
    /// Default limit for one shell command.
    pub cmd_timeout: Duration,
    /// The `onecopy-ctl` binary (default: [`default_ctl`](super::default_ctl)).
    pub ctl: Option<PathBuf>,
    /// Host files placed on the disk before boot (qemu-run.sh `--put
    /// HOST_PATH:GUEST_PATH`, one each).
    pub puts: Vec<(PathBuf, String)>,
}

impl Default for ClusterOpts {
    fn default() -> Self {
        ClusterOpts {
            name: "cluster".into(),
            nodes: 2,
            disk: None,
            run_dir: None,
            accel: None,
            shm_mb: None,
            mem_mb: None,
            append_extra: None,
            mode: None,
            policy: None,
            storage: None,
            cxl_latency_ns: None,
            dilation: None,
            doorbell: doorbell_from_env(),
            expect_ready: true,
            boot_timeout: Duration::from_secs(60),
            cmd_timeout: Duration::from_secs(60),
            ctl: None,
            puts: Vec::new(),
        }
    }
}

/// `ONECOPY_TEST_DOORBELL=on|off`: the doorbell setting of every cluster a
/// test starts without choosing one (so the integration tests run in both
/// settings: `ONECOPY_TEST_DOORBELL=off tests/run.sh --integration`);
/// unset: qemu-run.sh's default. Any other value is refused loudly.
fn doorbell_from_env() -> Option<String> {
    match std::env::var("ONECOPY_TEST_DOORBELL").ok().as_deref() {
        None | Some("") => None,
        Some(v @ ("on" | "off")) => Some(v.to_string()),
        Some(v) => panic!("ONECOPY_TEST_DOORBELL must be on or off, got {v:?}"),
    }
}

impl ClusterOpts {
    /// Defaults with a name.
    pub fn new(name: &str) -> Self {
        ClusterOpts {
            name: name.into(),
            ..Default::default()
        }
    }
    /// Sets `--doorbell` (`on` or `off`).
    pub fn doorbell(mut self, on: bool) -> Self {
        self.doorbell = Some(if on { "on" } else { "off" }.into());
        self
    }
    /// Sets the number of nodes.
    pub fn nodes(mut self, n: u8) -> Self {
        self.nodes = n;
        self
    }
    /// Sets the disk image.
    pub fn disk(mut self, p: impl Into<PathBuf>) -> Self {
        self.disk = Some(p.into());
        self
    }
    /// Sets the run directory.
    pub fn run_dir(mut self, p: impl Into<PathBuf>) -> Self {
        self.run_dir = Some(p.into());
        self
    }
    /// Sets the accelerator.
    pub fn accel(mut self, a: &str) -> Self {
        self.accel = Some(a.into());
        self
    }
    /// Sets extra kernel command-line pairs.
    pub fn append_extra(mut self, s: &str) -> Self {
        self.append_extra = Some(s.into());
        self
    }
    /// Sets the page-cache mode (`strong`, `relaxed`, `private` or `net`).
    pub fn mode(mut self, m: &str) -> Self {
        self.mode = Some(m.into());
        self
    }
    /// Sets the eviction policy of every node (`fifo`, `lru`, `s3fifo`, ...).
    pub fn policy(mut self, p: &str) -> Self {
        self.policy = Some(p.into());
        self
    }
    /// Sets the storage throttling profile (`none`, `nvme`, `sata-ssd`, `sas-raid`).
    pub fn storage(mut self, p: &str) -> Self {
        self.storage = Some(p.into());
        self
    }
    /// Sets the emulated CXL latency (ns) of a copy from a peer's frame.
    pub fn cxl_latency_ns(mut self, ns: u32) -> Self {
        self.cxl_latency_ns = Some(ns);
        self
    }
    /// Sets the time dilation (`off`, `auto` or a factor such as `4.5`).
    pub fn dilation(mut self, d: &str) -> Self {
        self.dilation = Some(d.into());
        self
    }
    /// Sets the shared region size in MiB (a power of two >= 16).
    pub fn shm_mb(mut self, mb: u32) -> Self {
        self.shm_mb = Some(mb);
        self
    }
    /// Sets the memory per instance in MiB.
    pub fn mem_mb(mut self, mb: u32) -> Self {
        self.mem_mb = Some(mb);
        self
    }
    /// Sets whether readiness is required.
    pub fn expect_ready(mut self, yes: bool) -> Self {
        self.expect_ready = yes;
        self
    }
    /// Sets the boot limit.
    pub fn boot_timeout(mut self, t: Duration) -> Self {
        self.boot_timeout = t;
        self
    }
    /// Sets the default command limit.
    pub fn cmd_timeout(mut self, t: Duration) -> Self {
        self.cmd_timeout = t;
        self
    }
    /// Sets the `onecopy-ctl` binary.
    pub fn ctl(mut self, p: impl Into<PathBuf>) -> Self {
        self.ctl = Some(p.into());
        self
    }
    /// Adds a `--put HOST:GUEST`: the host file `host` at `guest` on the
    /// disk.
    pub fn put(mut self, host: impl Into<PathBuf>, guest: &str) -> Self {
        self.puts.push((host.into(), guest.into()));
        self
    }
}
