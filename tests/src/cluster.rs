//! Booting a cluster through `qemu-run.sh` and driving it from a test.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use regex::Regex;

use crate::console::{CmdOutput, Console};
use crate::error::{Error, Result};
use crate::run::{Instance, RunDir};

/// The repository root: `$ONECOPY_ROOT`, else the parent of this crate.
pub fn repo_root() -> PathBuf {
    if let Some(root) = std::env::var_os("ONECOPY_ROOT") {
        return PathBuf::from(root);
    }
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let manifest = fs::canonicalize(&manifest).unwrap_or(manifest);
    manifest.parent().map(Path::to_path_buf).unwrap_or(manifest)
}

/// Cargo's target directory (`$CARGO_TARGET_DIR` or `<root>/target`).
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => {
            let d = PathBuf::from(d);
            if d.is_absolute() {
                d
            } else {
                repo_root().join(d)
            }
        }
        None => repo_root().join("target"),
    }
}

/// A release host tool (`mkfs`, `inspect`) built by `cargo build --release -p flatfs --bins`.
pub fn host_tool(name: &str) -> PathBuf {
    target_dir().join("release").join(name)
}

/// The `onecopy-ctl` helper: `$ONECOPY_CTL`, else the newest of
/// `target/{debug,release}/onecopy-ctl`.
pub fn default_ctl() -> PathBuf {
    if let Some(p) = std::env::var_os("ONECOPY_CTL") {
        return PathBuf::from(p);
    }
    let candidates = [
        target_dir().join("debug/onecopy-ctl"),
        target_dir().join("release/onecopy-ctl"),
    ];
    candidates
        .iter()
        .filter_map(|p| Some((fs::metadata(p).ok()?.modified().ok()?, p)))
        .max()
        .map(|(_, p)| p.clone())
        .unwrap_or_else(|| candidates[0].clone())
}

/// Serialises clusters within one test process: a test run with several
/// threads still boots one cluster at a time.
pub fn serial_guard() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Creates a fresh, unique run directory `target/test-runs/<name>-<pid>-<n>`
/// (under the temp dir if that path would be too long for unix sockets).
pub fn unique_run_dir(name: &str) -> Result<PathBuf> {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(24)
        .collect();
    let mut base = target_dir().join("test-runs");
    // Console sockets live in the run dir and a unix socket path is limited
    // to 107 bytes: fall back to the temp dir for very deep checkouts.
    if base.as_os_str().len() + clean.len() + 40 > 100 {
        base = std::env::temp_dir().join("onecopy-test-runs");
    }
    fs::create_dir_all(&base).map_err(|e| Error::io(format!("create {}", base.display()), e))?;
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("{clean}-{}-{n}", std::process::id()));
        match fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(Error::io(format!("create {}", dir.display()), e)),
        }
    }
}

/// Output of a host command run by the harness.
#[derive(Debug, Clone)]
pub struct HostOutput {
    /// Exit code (`None`: killed by a signal or by the timeout).
    pub code: Option<i32>,
    /// True if the timeout killed it.
    pub timed_out: bool,
    /// Standard output.
    pub stdout: Vec<u8>,
    /// Standard error.
    pub stderr: Vec<u8>,
}

impl HostOutput {
    /// Standard output as text.
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
    /// Standard error as text.
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
    /// Both, stdout first.
    pub fn text(&self) -> String {
        format!("{}{}", self.stdout_text(), self.stderr_text())
    }
}

/// Runs `cmd` with stdin closed, collecting stdout and stderr, killing it
/// after `timeout`. Output written after the process exited by children that
/// inherited its pipes is not waited for beyond two seconds.
pub fn run_with_timeout(mut cmd: Command, timeout: Duration) -> Result<HostOutput> {
    let desc = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::io(format!("spawn {desc}"), e))?;
    let collect = |r: Option<Box<dyn Read + Send>>| {
        let buf = Arc::new(Mutex::new((Vec::new(), false)));
        if let Some(mut r) = r {
            let b = Arc::clone(&buf);
            thread::spawn(move || {
                let mut tmp = [0u8; 8192];
                loop {
                    match r.read(&mut tmp) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => b
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .0
                            .extend_from_slice(&tmp[..n]),
                    }
                }
                b.lock().unwrap_or_else(|e| e.into_inner()).1 = true;
            });
        } else {
            buf.lock().unwrap_or_else(|e| e.into_inner()).1 = true;
        }
        buf
    };
    let out = collect(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let err = collect(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + timeout;
    let mut timed_out = false;
    let status: Option<ExitStatus> = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) if Instant::now() >= deadline => {
                timed_out = true;
                let _ = child.kill();
                break child.wait().ok();
            }
            Ok(None) => thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(Error::io(format!("wait for {desc}"), e)),
        }
    };
    let eof_deadline = Instant::now() + Duration::from_secs(2);
    let take = |b: &Arc<Mutex<(Vec<u8>, bool)>>| loop {
        let g = b.lock().unwrap_or_else(|e| e.into_inner());
        if g.1 || Instant::now() >= eof_deadline {
            return g.0.clone();
        }
        drop(g);
        thread::sleep(Duration::from_millis(10));
    };
    Ok(HostOutput {
        code: if timed_out {
            None
        } else {
            status.and_then(|s| s.code())
        },
        timed_out,
        stdout: take(&out),
        stderr: take(&err),
    })
}

/// Runs `./qemu-run.sh ARGS` from the repository root with `onecopy-ctl` at
/// `ctl`, with a timeout.
pub fn qemu_run(args: &[&str], ctl: &Path, timeout: Duration) -> Result<HostOutput> {
    let root = repo_root();
    let mut cmd = Command::new("bash");
    cmd.arg(root.join("qemu-run.sh"))
        .args(args)
        .current_dir(&root)
        .env("ONECOPY_CTL", ctl);
    run_with_timeout(cmd, timeout)
}

/// Builds a disk image with the host `mkfs` (`from`: a folder to copy in).
pub fn mkfs(image: &Path, size_mb: u32, from: Option<&Path>) -> Result<()> {
    let mut cmd = Command::new(host_tool("mkfs"));
    cmd.arg("--size-mb").arg(size_mb.to_string());
    if let Some(dir) = from {
        cmd.arg("--from").arg(dir);
    }
    cmd.arg(image);
    let out = run_with_timeout(cmd, Duration::from_secs(120))?;
    if out.code != Some(0) {
        return Err(Error::Usage(format!(
            "mkfs {} failed ({:?}): {}",
            image.display(),
            out.code,
            out.text()
        )));
    }
    Ok(())
}

/// Runs the host `inspect IMAGE ARGS...`.
pub fn inspect(image: &Path, args: &[&str]) -> Result<HostOutput> {
    let mut cmd = Command::new(host_tool("inspect"));
    cmd.arg(image).args(args);
    run_with_timeout(cmd, Duration::from_secs(120))
}

/// How to start a cluster.
#[derive(Debug, Clone)]
pub struct ClusterOpts {
    /// Used in the run directory's name.
    pub name: String,
    /// Number of nodes (1..=16).
    pub nodes: u8,
    /// Disk image (default: qemu-run.sh creates `RUN/disk.img` from tools/sample).
    pub disk: Option<PathBuf>,
    /// Run directory (default: [`unique_run_dir`]).
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
    /// Storage throttling profile (qemu-run.sh `--storage`: `none`, `nvme`,
    /// `sata-ssd` or `sas-raid`; default: qemu-run.sh's `none`).
    pub storage: Option<String>,
    /// Emulated CXL latency in ns added to every copy from a peer's frame
    /// (qemu-run.sh `--cxl-latency-ns`; default: qemu-run.sh's 0).
    pub cxl_latency_ns: Option<u32>,
    /// Doorbells (qemu-run.sh `--doorbell on|off`; default: qemu-run.sh's).
    pub doorbell: Option<String>,
    /// Require "directory ready" and every node joined (default). When
    /// false, a cluster that boots but is not ready (e.g. a bad disk image)
    /// is kept running for the test to examine.
    pub expect_ready: bool,
    /// Limit for the boot (qemu-run.sh `--boot-timeout`).
    pub boot_timeout: Duration,
    /// Default limit for one shell command.
    pub cmd_timeout: Duration,
    /// The `onecopy-ctl` binary (default: [`default_ctl`]).
    pub ctl: Option<PathBuf>,
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
            storage: None,
            cxl_latency_ns: None,
            doorbell: None,
            expect_ready: true,
            boot_timeout: Duration::from_secs(60),
            cmd_timeout: Duration::from_secs(60),
            ctl: None,
        }
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
}

/// A running cluster owned by a test. Dropping it stops the cluster; if the
/// thread is panicking (a failed test), every instance's log is printed to
/// stderr and the run directory is kept, otherwise the run directory is
/// removed (set `ONECOPY_KEEP_RUNS=1` to keep it).
pub struct Cluster {
    run: RunDir,
    nodes: u8,
    ctl: PathBuf,
    cmd_timeout: Duration,
    consoles: BTreeMap<u8, Console>,
    stopped: bool,
    keep_run_dir: bool,
    launch_output: String,
    _serial: MutexGuard<'static, ()>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("run_dir", &self.run.path())
            .field("nodes", &self.nodes)
            .field("stopped", &self.stopped)
            .finish()
    }
}

/// Runs `f` on a fresh cluster started from `o`, for integration tests:
/// panics if the cluster does not start or `f` fails (the cluster, dropped
/// during the panic, prints every instance's log and stops).
pub fn with_cluster(o: ClusterOpts, f: impl FnOnce(&mut Cluster) -> Result<()>) {
    let mut c = match Cluster::start(o) {
        Ok(c) => c,
        Err(e) => panic!("cluster did not start: {e}"),
    };
    if let Err(e) = f(&mut c) {
        panic!("{e}");
    }
}

impl Cluster {
    /// Boots a cluster with `qemu-run.sh --detach --no-build` (the kernel and
    /// host tools must already be built) and waits until it is up.
    pub fn start(opts: ClusterOpts) -> Result<Cluster> {
        if !(1..=16).contains(&opts.nodes) {
            return Err(Error::Usage(format!(
                "nodes must be 1..=16, got {}",
                opts.nodes
            )));
        }
        let serial = serial_guard();
        let run_dir = match &opts.run_dir {
            Some(d) => d.clone(),
            None => unique_run_dir(&opts.name)?,
        };
        let ctl = opts.ctl.clone().unwrap_or_else(default_ctl);
        let mut cluster = Cluster {
            run: RunDir::new(&run_dir),
            nodes: opts.nodes,
            ctl: ctl.clone(),
            cmd_timeout: opts.cmd_timeout,
            consoles: BTreeMap::new(),
            stopped: false,
            keep_run_dir: false,
            launch_output: String::new(),
            _serial: serial,
        };
        let run_dir_s = run_dir.to_string_lossy().into_owned();
        let nodes_s = opts.nodes.to_string();
        let boot_s = opts.boot_timeout.as_secs().max(1).to_string();
        let mut args: Vec<String> = vec![
            "--detach".into(),
            "--no-build".into(),
            "--run-dir".into(),
            run_dir_s,
            "--nodes".into(),
            nodes_s,
            "--boot-timeout".into(),
            boot_s,
        ];
        let mut push = |flag: &str, v: Option<String>| {
            if let Some(v) = v {
                args.push(flag.into());
                args.push(v);
            }
        };
        push(
            "--disk",
            opts.disk.as_ref().map(|d| d.to_string_lossy().into_owned()),
        );
        push("--accel", opts.accel.clone());
        push("--shm-mb", opts.shm_mb.map(|v| v.to_string()));
        push("--mem-mb", opts.mem_mb.map(|v| v.to_string()));
        push("--append-extra", opts.append_extra.clone());
        push("--mode", opts.mode.clone());
        push("--storage", opts.storage.clone());
        push("--doorbell", opts.doorbell.clone());
        push(
            "--cxl-latency-ns",
            opts.cxl_latency_ns.map(|v| v.to_string()),
        );
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = qemu_run(&argv, &ctl, opts.boot_timeout + Duration::from_secs(120))?;
        cluster.launch_output = out.text();
        eprintln!(
            "--- qemu-run.sh {} ---\n{}",
            argv.join(" "),
            cluster.launch_output
        );
        let acceptable = match out.code {
            Some(0) => true,
            Some(1) if !opts.expect_ready => {
                // Not ready, but kept running (--detach): every instance must
                // at least have been launched.
                Instance::all(opts.nodes)
                    .into_iter()
                    .all(|i| cluster.run.pid(i).is_some())
            }
            _ => false,
        };
        if !acceptable {
            cluster.keep_run_dir = true;
            cluster.dump_logs();
            return Err(Error::Launch {
                status: out.code,
                output: cluster.launch_output.clone(),
                run_dir,
            });
        }
        Ok(cluster)
    }

    /// The run directory.
    pub fn run_dir(&self) -> &Path {
        self.run.path()
    }

    /// The run directory helper.
    pub fn run(&self) -> &RunDir {
        &self.run
    }

    /// Number of nodes.
    pub fn nodes(&self) -> u8 {
        self.nodes
    }

    /// The disk image in use (from cluster.env).
    pub fn disk(&self) -> Option<PathBuf> {
        self.run.env().get("DISK").map(PathBuf::from)
    }

    /// Everything qemu-run.sh printed while starting the cluster.
    pub fn launch_output(&self) -> &str {
        &self.launch_output
    }

    /// Keeps the run directory when the cluster is dropped.
    pub fn keep_run_dir(&mut self) {
        self.keep_run_dir = true;
    }

    /// The `onecopy-ctl` binary in use.
    pub fn ctl(&self) -> &Path {
        &self.ctl
    }

    fn check_node(&self, node: u8) -> Result<()> {
        if node == 0 || node > self.nodes {
            return Err(Error::Usage(format!(
                "no node {node} in a cluster of {} nodes",
                self.nodes
            )));
        }
        Ok(())
    }

    fn console(&mut self, node: u8, timeout: Duration) -> Result<&mut Console> {
        self.check_node(node)?;
        if !self.consoles.contains_key(&node) {
            let path = self.run.socket_path(Instance::Node(node));
            let c = Console::connect(&path, node, timeout)?;
            self.consoles.insert(node, c);
        }
        Ok(self
            .consoles
            .get_mut(&node)
            .expect("console inserted above"))
    }

    /// Runs `cmd` on node `node` with the default timeout. An `error:`
    /// status is returned as `Ok` (see [`Cluster::exec_ok`]).
    pub fn exec(&mut self, node: u8, cmd: &str) -> Result<CmdOutput> {
        self.exec_timeout(node, cmd.as_bytes(), self.cmd_timeout)
    }

    /// Runs `cmd` and requires the `ok` status.
    pub fn exec_ok(&mut self, node: u8, cmd: &str) -> Result<CmdOutput> {
        self.exec(node, cmd)?.into_result()
    }

    /// Runs a command that prints a `KEY  VALUE` table (`cache stats`,
    /// `dir stats`) and parses it.
    pub fn stats(&mut self, node: u8, cmd: &str) -> Result<crate::shell::Stats> {
        let out = self.exec_ok(node, cmd)?;
        Ok(crate::shell::Stats::parse(node, cmd, &out.text()))
    }

    /// Runs raw bytes (no `\r`/`\n` inside) as a command line.
    pub fn exec_bytes(&mut self, node: u8, cmd: &[u8]) -> Result<CmdOutput> {
        self.exec_timeout(node, cmd, self.cmd_timeout)
    }

    /// Runs a command line with an explicit timeout (covering connecting,
    /// if this is the first command on that node).
    pub fn exec_timeout(&mut self, node: u8, cmd: &[u8], timeout: Duration) -> Result<CmdOutput> {
        let deadline = Instant::now() + timeout;
        let console = self.console(node, timeout)?;
        let r = console.exec_bytes(cmd, deadline.saturating_duration_since(Instant::now()));
        if matches!(
            r,
            Err(Error::Timeout { .. } | Error::Closed { .. } | Error::Io { .. })
        ) {
            // The console's state is unknown: reconnect next time.
            self.consoles.remove(&node);
        }
        r
    }

    /// Waits until a line of the serial log of `name` (`dir`, `node2`, `n2`
    /// or `2`) matches `pattern`; returns that line. Fails early if the
    /// instance exited without printing it.
    pub fn wait_log(&self, name: &str, pattern: &str, timeout: Duration) -> Result<String> {
        let inst = Instance::parse(name)
            .ok_or_else(|| Error::Usage(format!("unknown instance name {name:?}")))?;
        let re =
            Regex::new(pattern).map_err(|e| Error::Usage(format!("bad regex {pattern:?}: {e}")))?;
        let deadline = Instant::now() + timeout;
        let find = || {
            let log = self.run.log(inst);
            log.lines()
                .map(|l| l.trim_end_matches('\r'))
                .find(|l| re.is_match(l))
                .map(str::to_string)
        };
        loop {
            if let Some(l) = find() {
                return Ok(l);
            }
            let what = format!("/{pattern}/ in {}", self.run.log_path(inst).display());
            let tail = || tail_lines(&self.run.log(inst), 20);
            if let Some(reason) = self.run.exit_reason(inst) {
                thread::sleep(Duration::from_millis(100));
                if let Some(l) = find() {
                    return Ok(l);
                }
                return Err(Error::Closed {
                    what: format!("{what} ({reason})"),
                    partial: tail(),
                });
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what,
                    partial: tail(),
                });
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// The serial log of `name` so far.
    pub fn log(&self, name: &str) -> String {
        Instance::parse(name)
            .map(|i| self.run.log(i))
            .unwrap_or_default()
    }

    /// SIGKILLs node `node`'s QEMU and waits (5 s at most) until it is gone.
    pub fn kill_node(&mut self, node: u8) -> Result<()> {
        self.check_node(node)?;
        self.consoles.remove(&node);
        self.kill_instance(Instance::Node(node))
    }

    /// SIGKILLs the directory's QEMU and waits (5 s at most) until it is gone.
    pub fn kill_directory(&mut self) -> Result<()> {
        self.kill_instance(Instance::Dir)
    }

    fn kill_instance(&mut self, inst: Instance) -> Result<()> {
        let pid = self
            .run
            .pid(inst)
            .ok_or_else(|| Error::Usage(format!("no pid recorded for {inst}")))?;
        let status = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .stderr(Stdio::null())
            .status()
            .map_err(|e| Error::io("run kill", e))?;
        let deadline = Instant::now() + Duration::from_secs(5);
        while crate::run::pid_alive(pid) {
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: format!("{inst} (pid {pid}) to die after SIGKILL (kill: {status})"),
                    partial: String::new(),
                });
            }
            thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// Waits until the QEMU of `name` has exited; returns its exit status
    /// (1 = clean shutdown, 3 = panic) if it was recorded.
    pub fn wait_exit(&self, name: &str, timeout: Duration) -> Result<Option<i32>> {
        let inst = Instance::parse(name)
            .ok_or_else(|| Error::Usage(format!("unknown instance name {name:?}")))?;
        let deadline = Instant::now() + timeout;
        while self.run.alive(inst) {
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: format!("{inst} to exit"),
                    partial: tail_lines(&self.run.log(inst), 20),
                });
            }
            thread::sleep(Duration::from_millis(20));
        }
        // The wrapper records the status right after QEMU exits.
        let until = Instant::now() + Duration::from_secs(2);
        loop {
            if let Some(s) = self.run.exit_status(inst) {
                return Ok(Some(s));
            }
            if Instant::now() >= until {
                return Ok(None);
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the cluster (`qemu-run.sh stop`): no QEMU process and no shared
    /// memory file remain; logs stay.
    pub fn stop(&mut self) -> Result<()> {
        self.consoles.clear();
        if self.stopped {
            return Ok(());
        }
        let dir = self.run.path().to_string_lossy().into_owned();
        let out = qemu_run(
            &["stop", "--run-dir", &dir],
            &self.ctl,
            Duration::from_secs(60),
        )?;
        self.stopped = true;
        if out.code != Some(0) {
            return Err(Error::Usage(format!(
                "qemu-run.sh stop failed ({:?}): {}",
                out.code,
                out.text()
            )));
        }
        Ok(())
    }

    /// Prints every instance's full serial log (and QEMU's stderr) to stderr.
    pub fn dump_logs(&self) {
        eprintln!(
            "===== onecopy cluster logs (run dir {}) =====",
            self.run.path().display()
        );
        for inst in Instance::all(self.nodes) {
            let log = self.run.log(inst);
            eprintln!("----- {}.log ({} bytes) -----", inst.name(), log.len());
            eprintln!("{}", log.replace('\r', ""));
            let err = self.run.stderr(inst);
            if !err.trim().is_empty() {
                eprintln!("----- {}.stderr -----\n{}", inst.name(), err);
            }
            if let Some(reason) = self.run.exit_reason(inst) {
                eprintln!("----- {reason}");
            }
        }
        eprintln!("===== end of logs =====");
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let failing = thread::panicking();
        self.consoles.clear();
        if let Err(e) = self.stop() {
            eprintln!("onecopy-tests: stopping the cluster failed: {e}");
        }
        if failing {
            self.dump_logs();
        }
        if failing || self.keep_run_dir {
            eprintln!("(run dir kept: {})", self.run.path().display());
        } else if std::env::var_os("ONECOPY_KEEP_RUNS").is_none() {
            let _ = fs::remove_dir_all(self.run.path());
        }
    }
}

/// The last `n` lines of `text`.
pub fn tail_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tails() {
        assert_eq!(tail_lines("a\nb\nc\n", 2), "b\nc");
        assert_eq!(tail_lines("a", 5), "a");
        assert_eq!(tail_lines("", 5), "");
    }

    #[test]
    fn host_commands_time_out() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo out; echo err >&2; exit 3"]);
        let out = run_with_timeout(cmd, Duration::from_secs(10)).unwrap();
        assert_eq!(out.code, Some(3));
        assert_eq!(out.stdout_text(), "out\n");
        assert_eq!(out.stderr_text(), "err\n");
        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        let start = Instant::now();
        let out = run_with_timeout(cmd, Duration::from_millis(200)).unwrap();
        assert!(out.timed_out);
        assert_eq!(out.code, None);
        assert!(start.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn run_dirs_are_unique() {
        let a = unique_run_dir("unit test/x").unwrap();
        let b = unique_run_dir("unit test/x").unwrap();
        assert_ne!(a, b);
        assert!(a
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("unit_test_x-"));
        fs::remove_dir(&a).unwrap();
        fs::remove_dir(&b).unwrap();
    }
}
