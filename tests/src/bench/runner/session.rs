//! One cluster's session: booting it, running commands on it, stopping
//! it and recording what it did.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::*;
use crate::bench::model::{Context, Status};
use crate::bench::parse;
use crate::{mkfs, repo_root, unique_run_dir, Cluster, ClusterOpts, CmdOutput, Error, Instance};

/// One booted cluster (or the reason it is not there).
pub(super) struct Session {
    pub(super) name: String,
    pub(super) cluster: Option<Cluster>,
    pub(super) broken: Option<String>,
    pub(super) ctx: Context,
    pub(super) timeout: Duration,
    pub(super) guard: Option<Guard>,
    pub(super) transcript: String,
    pub(super) failures: Vec<String>,
    pub(super) started: Instant,
    pub(super) launch: String,
}

impl Session {
    /// Runs `cmd` on `node`: Ok only for an `ok` status.
    pub(super) fn run(&mut self, node: u8, cmd: &str) -> Result<CmdOutput, String> {
        if let Some(sig) = crate::bench::interrupt::interrupted() {
            let why = format!(
                "interrupted by {}",
                crate::bench::interrupt::signal_name(sig)
            );
            self.broken.get_or_insert(why.clone());
            return Err(format!("not run: {why}"));
        }
        if let Some(why) = &self.broken {
            return Err(format!(
                "not run: cluster {} failed earlier: {why}",
                self.name
            ));
        }
        let Some(c) = self.cluster.as_mut() else {
            return Err(format!("not run: cluster {} is not up", self.name));
        };
        let t0 = Instant::now();
        let r = c.exec_timeout(node, cmd.as_bytes(), self.timeout);
        let secs = t0.elapsed().as_secs_f64();
        match r {
            Ok(out) => {
                self.transcript.push_str(&format!(
                    "n{node}> {cmd}    [{secs:.2} s]\n{}\n{}\n",
                    out.lines.join("\n"),
                    match &out.status {
                        crate::Status::Ok => "ok".to_string(),
                        crate::Status::Error(m) => format!("error: {m}"),
                    }
                ));
                match out.error_message() {
                    None => Ok(out),
                    Some(m) => Err(format!("n{node}: {cmd}: error: {m}")),
                }
            }
            Err(e) => {
                let msg = format!("n{node}: {cmd}: {}", one_line(&e.to_string()));
                self.transcript
                    .push_str(&format!("n{node}> {cmd}    [{secs:.2} s]\n!! {msg}\n"));
                if matches!(
                    e,
                    Error::Timeout { .. } | Error::Closed { .. } | Error::Io { .. }
                ) {
                    self.broken = Some(msg.clone());
                }
                Err(msg)
            }
        }
    }

    /// Runs commands in order; the first failure stops.
    pub(super) fn seq(&mut self, cmds: &[(u8, String)]) -> Result<(), String> {
        for (n, c) in cmds {
            self.run(*n, c)?;
        }
        Ok(())
    }
}

/// What stops a cluster when the runner cannot: the signal handler's
/// registration (SIGINT, SIGTERM) and a watchdog process (its own process
/// group, so a terminal's Ctrl-C does not reach it) that runs
/// `qemu-run.sh stop` for it when this process is gone without having
/// stopped it (SIGKILL, a second signal). Ended once the cluster was
/// stopped normally.
#[derive(Debug)]
pub(crate) struct Guard {
    watchdog: Option<Child>,
    _registration: crate::bench::interrupt::Registration,
}

impl Guard {
    /// The cluster was stopped: the watchdog is killed (by its pid), the
    /// registration dropped.
    pub(crate) fn end(mut self) {
        if let Some(mut g) = self.watchdog.take() {
            let _ = g.kill();
            let _ = g.wait();
        }
    }
}

/// The guard of the cluster in `run_dir` (see [`Guard`]).
pub(crate) fn spawn_guard(run_dir: &Path, ctl: &Path) -> Guard {
    Guard {
        watchdog: spawn_watchdog(run_dir, ctl),
        _registration: crate::bench::interrupt::register_run_dir(run_dir, ctl),
    }
}

fn spawn_watchdog(run_dir: &Path, ctl: &Path) -> Option<Child> {
    let script = r#"while kill -0 "$1" 2>/dev/null; do sleep 1; done
ONECOPY_CTL="$4" exec bash "$3/qemu-run.sh" stop --run-dir "$2""#;
    Command::new("bash")
        .arg("-c")
        .arg(script)
        .arg("onecopy-bench-guard")
        .arg(std::process::id().to_string())
        .arg(run_dir)
        .arg(repo_root())
        .arg(ctl)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .ok()
}

impl Runner {
    pub(super) fn start(
        &mut self,
        name: &str,
        mode: &str,
        nodes: u8,
        shm_mb: Option<u32>,
    ) -> Session {
        let p = &self.params;
        let shm = shm_mb.unwrap_or(64);
        let ctx = Context {
            cluster: name.to_string(),
            nodes,
            shm_mb: shm,
            pool_mib: pool_mib(shm, nodes),
            storage: self.opts.storage.clone(),
            cxl_latency_ns: self.opts.cxl_latency_ns,
            accel: String::new(),
            dilation: self.opts.dilation.clone(),
        };
        let mut s = Session {
            name: name.to_string(),
            cluster: None,
            broken: None,
            ctx,
            timeout: p.cmd_timeout,
            guard: None,
            transcript: String::new(),
            failures: Vec::new(),
            started: Instant::now(),
            launch: String::new(),
        };
        self.say(&format!(
            "boot {name}: mode {mode}, 1 directory + {nodes} nodes, shm {shm} MiB (pool {:.1} MiB per node)",
            s.ctx.pool_mib
        ));
        let run_dir = match unique_run_dir(&format!("bench-{name}")) {
            Ok(d) => d,
            Err(e) => {
                s.broken = Some(format!("run folder: {e}"));
                return s;
            }
        };
        let disk = run_dir.join("bench.img");
        if let Err(e) = mkfs(&disk, p.disk_mb, None) {
            s.broken = Some(format!("mkfs: {}", one_line(&e.to_string())));
            let _ = fs::remove_dir_all(&run_dir);
            return s;
        }
        s.guard = Some(spawn_guard(&run_dir, &self.ctl));
        let mut o = ClusterOpts::new(&format!("bench-{name}"))
            .nodes(nodes)
            .mode(mode)
            .run_dir(&run_dir)
            .disk(&disk)
            .ctl(&self.ctl)
            .storage(&self.opts.storage)
            .cxl_latency_ns(self.opts.cxl_latency_ns)
            .dilation(&self.opts.dilation)
            .doorbell(self.opts.doorbell)
            .append_extra(&format!("baseline_writes={}", p.baseline_writes))
            .cmd_timeout(p.cmd_timeout)
            .boot_timeout(p.boot_timeout);
        if let Some(m) = shm_mb {
            o = o.shm_mb(m);
        }
        if let Some(a) = self.opts.accel_for(mode) {
            o = o.accel(a);
        }
        match Cluster::start(o) {
            Ok(c) => {
                s.launch = c.launch_output().to_string();
                self.say(&format!("{name} up: run dir {}", run_dir.display()));
                s.ctx.accel = parse::accel(&s.launch).unwrap_or_else(|| "unknown".into());
                // `auto` is measured once, at the first boot: every later
                // cluster of the run uses the same D, so the modes compare
                // under one scaling.
                if let Some(d) = parse::dilation(&s.launch) {
                    if self.opts.dilation == "auto" {
                        self.say(&format!("dilation measured at the first boot: {d}"));
                        self.opts.dilation = d.clone();
                    }
                    s.ctx.dilation = d;
                }
                s.cluster = Some(c);
            }
            Err(e) => {
                let msg = format!("boot failed: {}", one_line(&e.to_string()));
                self.say(&format!("{name}: {msg}"));
                if let Error::Launch { output, .. } = &e {
                    s.launch = output.clone();
                }
                s.broken = Some(msg);
                let _ = fs::remove_file(&disk);
            }
        }
        s
    }

    pub(super) fn finish(&mut self, mut s: Session, extra: Value) {
        let mut stop_error = None;
        let mut logs_dir = None;
        let failures: Vec<String> = self
            .figures
            .iter()
            .filter(|f| f.context.cluster == s.name && matches!(f.status, Status::Failed(_)))
            .map(|f| f.id.clone())
            .collect();
        s.failures.extend(failures);
        if let Some(mut c) = s.cluster.take() {
            if !s.failures.is_empty() || s.broken.is_some() {
                let dir = self.out.join("logs").join(&s.name);
                if fs::create_dir_all(&dir).is_ok() {
                    for inst in Instance::all(c.nodes()) {
                        let _ =
                            fs::write(dir.join(format!("{}.log", inst.name())), c.run().log(inst));
                    }
                    let _ = fs::write(dir.join("launch.txt"), &s.launch);
                    logs_dir = Some(dir.display().to_string());
                }
            }
            if self.opts.keep_runs {
                c.keep_run_dir();
            }
            let disk = c.run_dir().join("bench.img");
            if let Err(e) = c.stop() {
                stop_error = Some(one_line(&e.to_string()));
                self.notes
                    .push(format!("{}: stopping the cluster failed: {e}", s.name));
            }
            let _ = fs::remove_file(disk);
            drop(c);
        }
        if let Some(g) = s.guard.take() {
            g.end();
        }
        let tdir = self.out.join("transcripts");
        if fs::create_dir_all(&tdir).is_ok() {
            let _ = fs::write(tdir.join(format!("{}.txt", s.name)), &s.transcript);
        }
        let secs = s.started.elapsed().as_secs_f64();
        self.say(&format!(
            "{} done in {secs:.1} s ({} failed figures)",
            s.name,
            s.failures.len()
        ));
        self.clusters.push(json!({
            "name": s.name,
            "nodes": s.ctx.nodes,
            "shm_mb": s.ctx.shm_mb,
            "pool_mib_per_node": s.ctx.pool_mib,
            "storage": s.ctx.storage,
            "cxl_latency_ns": s.ctx.cxl_latency_ns,
            "doorbell": self.opts.doorbell,
            "accel": s.ctx.accel,
            "launch_output": s.launch,
            "broken": s.broken,
            "failed_figures": s.failures,
            "stop_error": stop_error,
            "logs": logs_dir,
            "seconds": secs,
            "stats": extra,
        }));
    }

    pub(super) fn stats(&mut self, s: &mut Session, cmds: &[(u8, &str)]) -> Value {
        let mut m = serde_json::Map::new();
        for (n, c) in cmds {
            let v = match s.run(*n, c) {
                Ok(o) => json!(o.lines),
                Err(e) => json!(format!("error: {e}")),
            };
            m.insert(format!("n{n}: {c}"), v);
        }
        Value::Object(m)
    }
}
