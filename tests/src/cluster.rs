//! Booting a cluster through `qemu-run.sh` and driving it from a test.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::MutexGuard;
use std::thread;
use std::time::{Duration, Instant};

use regex::Regex;

use crate::console::{CmdOutput, Console};
use crate::error::{Error, Result};
use crate::run::{Instance, RunDir};

mod host;
mod opts;

pub use host::{
    default_ctl, host_tool, inspect, mkfs, mkfs_datasets, qemu_run, repo_root, run_with_timeout,
    serial_guard, tail_lines, target_dir, unique_run_dir, HostOutput,
};
pub use opts::ClusterOpts;

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
        push("--policy", opts.policy.clone());
        push("--storage", opts.storage.clone());
        push("--doorbell", opts.doorbell.clone());
        push(
            "--cxl-latency-ns",
            opts.cxl_latency_ns.map(|v| v.to_string()),
        );
        push("--dilation", opts.dilation.clone());
        for (host, guest) in &opts.puts {
            push("--put", Some(format!("{}:{guest}", host.display())));
        }
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

    /// Runs one command on each of several nodes at the same time (one
    /// thread per console, each with the default timeout); their answers
    /// in the order given. A node may appear once.
    pub fn exec_together(&mut self, cmds: &[(u8, &str)]) -> Result<Vec<CmdOutput>> {
        let timeout = self.cmd_timeout;
        for (i, (node, _)) in cmds.iter().enumerate() {
            if cmds[..i].iter().any(|(n, _)| n == node) {
                return Err(Error::Usage(format!("exec_together: n{node} given twice")));
            }
            self.console(*node, timeout)?;
        }
        let mut consoles: Vec<(u8, &mut Console)> = self
            .consoles
            .iter_mut()
            .filter(|(n, _)| cmds.iter().any(|(c, _)| c == *n))
            .map(|(n, c)| (*n, c))
            .collect();
        let mut outs: Vec<Option<Result<CmdOutput>>> = cmds.iter().map(|_| None).collect();
        std::thread::scope(|s| {
            let handles: Vec<_> = consoles
                .iter_mut()
                .map(|(n, c)| {
                    let cmd = cmds.iter().find(|(k, _)| k == n).map_or("", |(_, c)| *c);
                    let n = *n;
                    (n, s.spawn(move || c.exec(cmd, timeout)))
                })
                .collect();
            for (n, h) in handles {
                let r = h.join().unwrap_or_else(|_| {
                    Err(Error::Usage(format!(
                        "exec_together: n{n}: thread panicked"
                    )))
                });
                if let Some(i) = cmds.iter().position(|(k, _)| *k == n) {
                    outs[i] = Some(r);
                }
            }
        });
        outs.into_iter()
            .map(|o| o.unwrap_or_else(|| Err(Error::Usage("exec_together: no answer".into()))))
            .collect()
    }

    /// Starts `cmd` on node `node` without waiting for its answer (see
    /// [`Console::start`]): it must still be running after `settle`. The
    /// console is forgotten (the next command reconnects); meant for a
    /// command interrupted by killing the node.
    pub fn start_command(&mut self, node: u8, cmd: &str, settle: Duration) -> Result<()> {
        let timeout = self.cmd_timeout;
        let r = self.console(node, timeout)?.start(cmd, settle);
        self.consoles.remove(&node);
        r
    }

    /// Closes this harness's connection to node `node`'s console (the
    /// next command reconnects), so another client may attach meanwhile.
    pub fn release_console(&mut self, node: u8) {
        self.consoles.remove(&node);
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

    /// Boots a replacement for node `node` (whose QEMU died or was killed)
    /// into the running cluster (`qemu-run.sh restart`) and waits until it
    /// joined; returns the launcher's output.
    pub fn restart_node(&mut self, node: u8) -> Result<String> {
        self.check_node(node)?;
        self.consoles.remove(&node);
        let dir = self.run.path().to_string_lossy().into_owned();
        let k = node.to_string();
        let out = qemu_run(
            &["restart", "--run-dir", &dir, &k],
            &self.ctl,
            Duration::from_secs(90),
        )?;
        if out.code != Some(0) {
            return Err(Error::Usage(format!(
                "qemu-run.sh restart {node} failed ({:?}): {}",
                out.code,
                out.text()
            )));
        }
        Ok(out.text())
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
        // Logs of instances replaced by `qemu-run.sh restart`
        // (NAME.log.<ms>), and the ivshmem server's.
        let mut extra: Vec<std::path::PathBuf> = std::fs::read_dir(self.run.path())
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        extra.retain(|p| {
            let n = p.file_name().map(|n| n.to_string_lossy().into_owned());
            n.is_some_and(|n| n.contains(".log.") || n == "ivshmem.log")
        });
        extra.sort();
        for p in extra {
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            eprintln!("----- {} ({} bytes) -----", p.display(), text.len());
            eprintln!("{}", text.replace('\r', ""));
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

#[cfg(test)]
mod tests;
