//! Drives the clusters: one at a time, every figure recorded (measured,
//! n/a or failed with its error), every cluster stopped.

use std::fs;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::model::{
    dir_batch_scenario, figure_id, Context, Figure, Kind, Status, Workload, DIR_BATCHES, ENGINES,
    GROUP_BIG, GROUP_DIR, GROUP_FIO, GROUP_HOST, GROUP_INV, SCENARIOS, WORKLOADS,
};
use super::opts::{size_arg, size_human, BenchOpts, Params};
use super::parse;
use crate::{
    host_tool, mkfs, repo_root, run_with_timeout, unique_run_dir, Cluster, ClusterOpts, CmdOutput,
    Error, Instance,
};

const MIB: f64 = 1_048_576.0;

/// Scenario of the `bench rpc` figure.
pub const RPC_SCENARIO: &str = "empty request round trip";

/// Everything one run measured.
#[derive(Debug)]
pub struct Runner {
    /// Command line.
    pub opts: BenchOpts,
    /// Sizes and counts.
    pub params: Params,
    /// Results folder.
    pub out: PathBuf,
    /// Every figure, in measuring order.
    pub figures: Vec<Figure>,
    /// One record per cluster (launch output, stats, duration, failures).
    pub clusters: Vec<Value>,
    /// Warnings that are not figures (a failed clean-up, ...).
    pub notes: Vec<String>,
    /// Seconds spent per phase.
    pub phases: Vec<(String, f64)>,
    /// The onecopy-ctl binary.
    pub ctl: PathBuf,
    started: Instant,
}

/// `onecopy-ctl` next to this executable, else the harness's default.
pub fn find_ctl() -> PathBuf {
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            let p = dir.join("onecopy-ctl");
            if p.is_file() {
                return p;
            }
        }
    }
    crate::default_ctl()
}

/// `onecopy-pingpong` next to this executable, else target/release.
pub fn find_pingpong() -> PathBuf {
    find_tool("onecopy-pingpong")
}

/// A host tool next to this executable, else in target/release.
pub fn find_tool(name: &str) -> PathBuf {
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            for d in [Some(dir), dir.parent()].into_iter().flatten() {
                let p = d.join(name);
                if p.is_file() {
                    return p;
                }
            }
        }
    }
    host_tool(name)
}

/// Workload name of the host page-directory figures.
pub const HOST_DIR_BENCH: &str = "pagedir-bench";

/// Scenarios of the host page-directory figures, with where each is in
/// `pagedir-bench`'s RESULT json.
pub fn host_dir_figures() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = [
        ("lookup (READ hit -> Shared)", "/lookup"),
        ("map (READ miss -> Fill, filled)", "/map"),
        ("drop (DROP)", "/drop"),
        ("invalidate, 0 sharers", "/inv0"),
        ("invalidate, 1 sharer", "/inv1"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    v.extend(
        DIR_BATCHES
            .iter()
            .map(|&b| (dir_batch_scenario(b), format!("/batch/{b}"))),
    );
    v
}

/// Pool per node (MiB) for a region of `shm_mb` shared by `nodes` nodes.
pub fn pool_mib(shm_mb: u32, nodes: u8) -> f64 {
    fabric::layout::Layout::compute((shm_mb as usize) << 20, u32::from(nodes))
        .map(|l| l.pool_frames as f64 * fabric::PAGE_SIZE as f64 / MIB)
        .unwrap_or(f64::NAN)
}

/// One booted cluster (or the reason it is not there).
struct Session {
    name: String,
    cluster: Option<Cluster>,
    broken: Option<String>,
    ctx: Context,
    timeout: Duration,
    guard: Option<Child>,
    transcript: String,
    failures: Vec<String>,
    started: Instant,
    launch: String,
}

impl Session {
    /// Runs `cmd` on `node`: Ok only for an `ok` status.
    fn run(&mut self, node: u8, cmd: &str) -> Result<CmdOutput, String> {
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
    fn seq(&mut self, cmds: &[(u8, String)]) -> Result<(), String> {
        for (n, c) in cmds {
            self.run(*n, c)?;
        }
        Ok(())
    }
}

fn one_line(s: &str) -> String {
    let mut t: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if t.len() > 600 {
        let mut cut = 600;
        while !t.is_char_boundary(cut) {
            cut -= 1;
        }
        t.truncate(cut);
        t.push_str("...");
    }
    t
}

/// A watchdog process (its own process group, so a terminal's Ctrl-C does
/// not reach it): when this process is gone without having stopped the
/// cluster (Ctrl-C, kill), it runs `qemu-run.sh stop` for it. Killed (by
/// its pid) once the cluster was stopped normally.
fn spawn_guard(run_dir: &Path, ctl: &Path) -> Option<Child> {
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
    /// A runner writing into `out`.
    pub fn new(opts: BenchOpts, out: PathBuf) -> Runner {
        let params = Params::from_opts(&opts);
        Runner {
            opts,
            params,
            out,
            figures: Vec::new(),
            clusters: Vec::new(),
            notes: Vec::new(),
            phases: Vec::new(),
            ctl: find_ctl(),
            started: Instant::now(),
        }
    }

    /// Seconds since the start.
    pub fn elapsed(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    fn say(&self, msg: &str) {
        eprintln!("[{:7.1}s] {msg}", self.elapsed());
    }

    /// Runs everything: host ping-pong, then per mode the fio cluster, the
    /// invalidation / directory cluster and the small-pool cluster.
    pub fn run_all(&mut self) {
        let t = Instant::now();
        self.host_pingpong();
        self.phases
            .push(("host ping-pong".into(), t.elapsed().as_secs_f64()));
        let t = Instant::now();
        self.host_pagedir();
        self.phases
            .push(("host page directory".into(), t.elapsed().as_secs_f64()));
        for mode in self.opts.modes.clone() {
            let t = Instant::now();
            self.fio_cluster(&mode);
            self.phases
                .push((format!("{mode}: fio"), t.elapsed().as_secs_f64()));
            let t = Instant::now();
            self.inv_cluster(&mode);
            self.phases.push((
                format!("{mode}: invalidation + directory"),
                t.elapsed().as_secs_f64(),
            ));
            let t = Instant::now();
            self.big_cluster(&mode);
            self.phases.push((
                format!("{mode}: larger-than-pool read"),
                t.elapsed().as_secs_f64(),
            ));
        }
    }

    fn start(&mut self, name: &str, mode: &str, nodes: u8, shm_mb: Option<u32>) -> Session {
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
        s.guard = spawn_guard(&run_dir, &self.ctl);
        let mut o = ClusterOpts::new(&format!("bench-{name}"))
            .nodes(nodes)
            .mode(mode)
            .run_dir(&run_dir)
            .disk(&disk)
            .ctl(&self.ctl)
            .storage(&self.opts.storage)
            .cxl_latency_ns(self.opts.cxl_latency_ns)
            .append_extra(&format!("baseline_writes={}", p.baseline_writes))
            .cmd_timeout(p.cmd_timeout)
            .boot_timeout(p.boot_timeout);
        if let Some(m) = shm_mb {
            o = o.shm_mb(m);
        }
        match Cluster::start(o) {
            Ok(c) => {
                s.launch = c.launch_output().to_string();
                s.ctx.accel = parse::accel(&s.launch).unwrap_or_else(|| "unknown".into());
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

    fn finish(&mut self, mut s: Session, extra: Value) {
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
        if let Some(mut g) = s.guard.take() {
            let _ = g.kill();
            let _ = g.wait();
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

    fn push(&mut self, f: Figure) {
        let shown = match &f.status {
            Status::Ok(v) => format!("{} {}", super::model::fmt_value(*v), f.unit),
            Status::NotApplicable(m) => format!("n/a ({m})"),
            Status::Failed(m) => format!("FAILED: {m}"),
        };
        let engine = f
            .engine
            .as_deref()
            .map(|e| format!("/{e}"))
            .unwrap_or_default();
        self.say(&format!(
            "{} {}{} {}: {shown}",
            f.context.cluster, f.workload, engine, f.scenario
        ));
        self.figures.push(f);
    }

    // ---------------------------------------------------------------- host

    fn host_pingpong(&mut self) {
        let p = self.params.clone();
        let bin = find_pingpong();
        let mut fig = Figure::new(
            GROUP_HOST,
            "host",
            "ping-pong",
            None,
            "median",
            "round trip (median of medians)",
            "ns",
            true,
        );
        fig.context.cluster = "host".into();
        fig.command = format!("{} {}", bin.display(), p.pingpong_rounds);
        fig.params = json!({"rounds": p.pingpong_rounds, "repeats": p.pingpong_repeats});
        fig.busy_instances = Some(0);
        let mut medians = Vec::new();
        let mut lines = Vec::new();
        let mut err = None;
        for _ in 0..p.pingpong_repeats {
            let mut cmd = Command::new(&bin);
            cmd.arg(p.pingpong_rounds.to_string());
            match run_with_timeout(cmd, Duration::from_secs(120)) {
                Ok(o) if o.code == Some(0) => {
                    let text: Vec<String> = o.stdout_text().lines().map(str::to_string).collect();
                    match parse::summary(&text, "host ping-pong") {
                        Ok(s) => medians.push(s.median),
                        Err(e) => err = Some(e),
                    }
                    lines.extend(text);
                }
                Ok(o) => err = Some(format!("exit {:?}: {}", o.code, one_line(&o.text()))),
                Err(e) => err = Some(e.to_string()),
            }
        }
        fig.raw = json!(lines);
        fig.status = match (parse::median(&medians), err) {
            (Some(m), _) if medians.len() == p.pingpong_repeats as usize => Status::Ok(m),
            (_, Some(e)) => Status::Failed(format!("{}: {e}", bin.display())),
            _ => Status::Failed("no ping-pong result".into()),
        };
        self.push(fig);
    }

    /// `pagedir-bench`: the page directory's code on the host, one figure
    /// per operation and per `bench dir` batch size (all from one run).
    fn host_pagedir(&mut self) {
        let bin = find_tool("pagedir-bench");
        let rounds = if self.opts.quick { 3 } else { 20 };
        let mut cmd = Command::new(&bin);
        cmd.args(["--rounds", &rounds.to_string()]);
        let command = format!("{} --rounds {rounds}", bin.display());
        let out = match run_with_timeout(cmd, Duration::from_secs(300)) {
            Ok(o) if o.code == Some(0) => {
                let text: Vec<String> = o.stdout_text().lines().map(str::to_string).collect();
                parse::fio_result(&text).map(|v| (v, text))
            }
            Ok(o) => Err(format!("exit {:?}: {}", o.code, one_line(&o.text()))),
            Err(e) => Err(format!("{}: {e}", bin.display())),
        };
        for (sc, pointer) in host_dir_figures() {
            let mut fig = Figure::new(
                GROUP_HOST,
                "host",
                HOST_DIR_BENCH,
                None,
                &sc,
                "page directory operations per second (host, same code)",
                "ops/s",
                false,
            );
            fig.context.cluster = "host".into();
            fig.command = command.clone();
            fig.busy_instances = Some(0);
            fig.status = match &out {
                Ok((v, text)) => {
                    fig.params = json!({
                        "pages": v["pages"], "rounds": v["rounds"], "profile": v["profile"],
                        "bytes_per_entry": v["bytes_per_entry"]
                    });
                    fig.raw = json!(text);
                    match parse::json_num(v, &pointer) {
                        Ok(x) => Status::Ok(x),
                        Err(e) => Status::Failed(e),
                    }
                }
                Err(e) => Status::Failed(e.clone()),
            };
            self.push(fig);
        }
    }

    // ----------------------------------------------------------------- fio

    fn fio_cluster(&mut self, mode: &str) {
        let name = format!("{mode}-fio");
        let shm = self.params.fio_shm_mb;
        let mut s = self.start(&name, mode, 2, Some(shm));
        for w in WORKLOADS {
            for e in ENGINES {
                self.fio_workload(&mut s, mode, w, e);
            }
        }
        let stats = self.stats(&mut s, &[(1, "dir stats"), (2, "cache stats")]);
        self.finish(s, stats);
    }

    fn stats(&mut self, s: &mut Session, cmds: &[(u8, &str)]) -> Value {
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

    fn fio_workload(&mut self, s: &mut Session, mode: &str, w: &Workload, engine: &str) {
        let p = self.params.clone();
        let jobs = w.jobs(&p);
        let size = w.size(&p);
        let depth = w.iodepth(&p);
        let dir = format!("/{}-{engine}", w.key);
        let spec = |rw: &str, bs: u64, eng: &str| {
            format!(
                "fio --name={} --rw={rw} --bs={} --size={} --numjobs={jobs} --iodepth={depth} --ioengine={eng} --invalidate=0 --directory={dir}",
                w.key,
                size_arg(bs),
                size_arg(size)
            )
        };
        let cmd = spec(w.rw, w.bs, engine);
        let warm = spec("read", 128 << 10, "libaio");
        let allow_na = super::model::na_allowed(GROUP_FIO, mode, w.key, Some(engine));
        let params = json!({
            "rw": w.rw,
            "bs": w.bs,
            "size_per_job": size,
            "numjobs": jobs,
            "iodepth": depth,
            "ioengine": engine,
            "files": format!("{jobs} x {} in {dir}", size_human(size)),
            "layout_and_warm": warm,
            "dpc_figure": w.dpc_figure(engine),
            "repeats": p.repeats,
        });
        // shots[scenario][repeat]
        let mut shots: Vec<Vec<Shot>> = vec![Vec::new(); SCENARIOS.len()];
        for _ in 0..p.repeats.max(1) {
            let one = self.fio_once(s, w, &cmd, &warm, &dir, jobs, allow_na);
            let all_na = one.iter().all(|x| matches!(x, Shot::Na(_)));
            for (i, shot) in one.into_iter().enumerate() {
                shots[i].push(shot);
            }
            if all_na || s.broken.is_some() {
                break;
            }
        }
        for (i, sc) in SCENARIOS.iter().enumerate() {
            let mut f = Figure::new(
                GROUP_FIO,
                mode,
                w.key,
                Some(engine),
                sc,
                w.kind.metric(),
                w.kind.unit(),
                w.kind.lower_is_better(),
            );
            f.params = params.clone();
            f.context = s.ctx.clone();
            f.command = format!("n2: {cmd}");
            aggregate(&mut f, &shots[i]);
            self.push(f);
        }
    }

    /// One pass of the CM, CM-R, CH-R procedure for a workload; the files
    /// are removed at the end.
    #[allow(clippy::too_many_arguments)]
    fn fio_once(
        &mut self,
        s: &mut Session,
        w: &Workload,
        cmd: &str,
        warm: &str,
        dir: &str,
        jobs: u32,
        allow_na: bool,
    ) -> Vec<Shot> {
        let shot = |r: Result<CmdOutput, String>| match r {
            Ok(out) => fio_shot(w, &out),
            Err(e) if allow_na && parse::is_unsupported(&e) => Shot::Na(e),
            Err(e) => Shot::Fail(e),
        };
        let mut out = Vec::new();
        'measure: {
            let setup = s.seq(&[
                (1, format!("mkdir {dir}")),
                (1, warm.to_string()),
                (1, "sync".into()),
                (1, "cache drop".into()),
                (2, "cache drop".into()),
            ]);
            if let Err(e) = setup {
                out = vec![Shot::Fail(format!("setup (layout on node 1): {e}")); 3];
                break 'measure;
            }
            let cm = shot(s.run(2, cmd));
            if matches!(cm, Shot::Na(_)) {
                out = vec![cm; 3];
                break 'measure;
            }
            out.push(cm);
            let prep = s.seq(&[
                (2, "sync".into()),
                (1, "cache drop".into()),
                (2, "cache drop".into()),
                (1, warm.to_string()),
            ]);
            if let Err(e) = prep {
                out.extend(vec![Shot::Fail(format!("warming node 1: {e}")); 2]);
                break 'measure;
            }
            out.push(shot(s.run(2, cmd)));
            out.push(shot(s.run(2, cmd)));
        }
        // Clean up so the next pass starts from empty caches and a disk
        // with room.
        let mut cleanup: Vec<(u8, String)> = vec![
            (2, "sync".into()),
            (1, "cache drop".into()),
            (2, "cache drop".into()),
        ];
        for j in 0..jobs {
            cleanup.push((1, format!("rm {dir}/{}.{j}.0", w.key)));
        }
        cleanup.push((1, format!("rmdir {dir}")));
        cleanup.push((1, "sync".into()));
        if s.broken.is_none() {
            if let Err(e) = s.seq(&cleanup) {
                self.notes
                    .push(format!("{}: clean-up after {}: {e}", s.name, cmd));
            }
        }
        out
    }

    // ------------------------------------------------ invalidation, directory

    fn inv_cluster(&mut self, mode: &str) {
        let p = self.params.clone();
        let name = format!("{mode}-inv");
        let mut s = self.start(&name, mode, 3, None);
        let f = "/inv.dat";
        let inv_na = super::model::na_allowed(GROUP_INV, mode, "bench inv", None);
        let dir_na = super::model::na_allowed(GROUP_DIR, mode, "bench dir", None);
        let size = p.inv_size;
        let setup = s.seq(&[
            (1, format!("fill {f} {}", size_arg(size))),
            (1, "sync".into()),
            (1, "cache drop".into()),
            (2, "cache drop".into()),
            (3, "cache drop".into()),
        ]);
        let setup_err = setup.err().map(|e| format!("setup: {e}"));
        let file_params =
            json!({"file": f, "size": size, "pages": size / fabric::PAGE_SIZE as u64});
        // bench read in the four scenarios (one timed 4 KiB read per page).
        let reads = [
            (1, "CM", "node 1, cached nowhere"),
            (1, "local hit", "node 1 again (its own frames)"),
            (2, "CM-R", "node 2, node 1 owns the pages: one-page lookup"),
            (2, "CH-R", "node 2 again (mapped)"),
        ];
        for (node, sc, what) in reads {
            let mut fig = Figure::new(
                GROUP_DIR,
                mode,
                "bench read",
                None,
                sc,
                "median latency of one 4 KiB read",
                "us",
                true,
            );
            fig.context = s.ctx.clone();
            fig.params = json!({"file": f, "size": size, "what": what});
            fig.command = format!("n{node}: bench read {f}");
            fig.busy_instances = Some(2);
            fig.status = match &setup_err {
                Some(e) => Status::Failed(e.clone()),
                None => match s.run(node, &format!("bench read {f}")) {
                    Ok(o) => summary_status(&mut fig, &o.lines, "read 4k:"),
                    Err(e) => Status::Failed(e),
                },
            };
            self.push(fig);
        }
        // Synchronous invalidation of every page node 1 owns, with 2, 1, 0
        // sharers (the sharers idle at their prompt).
        let cases: [(&str, Vec<(u8, String)>); 3] = [
            ("2 sharers", vec![(3, format!("bench read {f}"))]),
            (
                "1 sharer",
                vec![
                    (1, format!("bench read {f}")),
                    (2, format!("bench read {f}")),
                ],
            ),
            ("0 sharers", vec![(1, format!("bench read {f}"))]),
        ];
        for (sc, prep) in cases {
            let mut fig = Figure::new(
                GROUP_INV,
                mode,
                "bench inv",
                None,
                sc,
                "median latency of one synchronous page invalidation",
                "us",
                true,
            );
            fig.context = s.ctx.clone();
            fig.params = file_params.clone();
            fig.params["sharers_idle"] = json!(true);
            fig.params["tick_hz"] = json!(1000);
            fig.params["operation"] = json!(if super::opts::BASELINES.contains(&mode) {
                "drop one page of node 1's own cached copy (the baseline's invalidation, no protocol; the other nodes' copies are independent)"
            } else {
                "synchronous invalidation through the directory (sharers unmap first)"
            });
            fig.command = format!("n1: bench inv {f}");
            fig.busy_instances = Some(2);
            fig.status = match &setup_err {
                Some(e) => Status::Failed(e.clone()),
                None => match s.seq(&prep) {
                    Err(e) => Status::Failed(format!("preparing the sharers: {e}")),
                    Ok(()) => match s.run(1, &format!("bench inv {f}")) {
                        Ok(o) => summary_status(&mut fig, &o.lines, "invalidate 1 page:"),
                        Err(e) if inv_na && parse::is_unsupported(&e) => Status::NotApplicable(e),
                        Err(e) => Status::Failed(e),
                    },
                },
            };
            self.push(fig);
        }
        // bench ring: median of the runs' medians.
        let mut fig = Figure::new(
            GROUP_DIR,
            mode,
            "bench ring",
            None,
            "empty round trip",
            "median round trip (median of runs)",
            "ns",
            true,
        );
        fig.context = s.ctx.clone();
        fig.params = json!({"rounds": p.ring_rounds, "repeats": p.ring_repeats});
        fig.command = format!("n1: bench ring {} (x{})", p.ring_rounds, p.ring_repeats);
        fig.busy_instances = Some(2);
        let mut medians = Vec::new();
        let mut lines = Vec::new();
        let mut err = None;
        for _ in 0..p.ring_repeats {
            match s.run(1, &format!("bench ring {}", p.ring_rounds)) {
                Ok(o) => {
                    match parse::summary(&o.lines, "ring round trip:") {
                        Ok(x) => medians.push(x.median),
                        Err(e) => err = Some(e),
                    }
                    lines.extend(o.lines);
                }
                Err(e) => err = Some(e),
            }
        }
        fig.raw = json!(lines);
        fig.status = match (parse::median(&medians), err) {
            (Some(m), None) => Status::Ok(m),
            (_, Some(e)) => Status::Failed(e),
            (None, None) => Status::Failed("no bench ring result".into()),
        };
        self.push(fig);
        self.bench_rpc(&mut s, mode);
        // bench dir: page requests for a file node 1 owns, published in
        // batches of 1 to 64 (DPC: batched lookups).
        let owner = match &setup_err {
            Some(e) => Err(e.clone()),
            None => s
                .run(1, &format!("bench read {f}"))
                .map(|_| ())
                .map_err(|e| format!("node 1 taking the pages: {e}")),
        };
        for b in DIR_BATCHES {
            let mut fig = Figure::new(
                GROUP_DIR,
                mode,
                "bench dir",
                None,
                &dir_batch_scenario(b),
                "directory page operations per second",
                "ops/s",
                false,
            );
            fig.context = s.ctx.clone();
            fig.params =
                json!({"file": f, "size": size, "rounds": p.dir_rounds, "owner": 1, "batch": b});
            fig.command = format!("n1: bench read {f}; n2: bench dir {f} {} {b}", p.dir_rounds);
            fig.busy_instances = Some(2);
            fig.status = match &owner {
                Err(e) => Status::Failed(e.clone()),
                Ok(()) => match s.run(2, &format!("bench dir {f} {} {b}", p.dir_rounds)) {
                    Ok(o) => match parse::dir_ops(&o.lines) {
                        Ok((ops, us, rate)) => {
                            fig.raw = json!({"ops": ops, "us": us, "line": o.lines});
                            Status::Ok(rate)
                        }
                        Err(e) => Status::Failed(e),
                    },
                    Err(e) if dir_na && parse::is_unsupported(&e) => Status::NotApplicable(e),
                    Err(e) => Status::Failed(e),
                },
            };
            self.push(fig);
        }
        let stats = self.stats(&mut s, &[(1, "dir stats"), (1, "cache stats")]);
        self.finish(s, stats);
    }

    /// `bench rpc`: an empty request to the file server over the mode's
    /// file transport (the rings, or TCP in net mode); median of the runs'
    /// medians. A transport other than the mode's fails the figure.
    fn bench_rpc(&mut self, s: &mut Session, mode: &str) {
        let p = self.params.clone();
        let want = parse::rpc_transport(mode);
        let mut fig = Figure::new(
            GROUP_DIR,
            mode,
            "bench rpc",
            None,
            RPC_SCENARIO,
            "median round trip (median of runs)",
            "ns",
            true,
        );
        fig.context = s.ctx.clone();
        fig.params = json!({
            "rounds": p.rpc_rounds,
            "repeats": p.rpc_repeats,
            "expected_transport": want,
        });
        fig.command = format!("n1: bench rpc {} (x{})", p.rpc_rounds, p.rpc_repeats);
        fig.busy_instances = Some(2);
        let mut medians = Vec::new();
        let mut p99s = Vec::new();
        let mut lines = Vec::new();
        let mut transports = Vec::new();
        let mut err = None;
        for _ in 0..p.rpc_repeats {
            match s.run(1, &format!("bench rpc {}", p.rpc_rounds)) {
                Ok(o) => {
                    match parse::rpc_summary(&o.lines) {
                        Ok((t, x)) => {
                            if t != want {
                                err = Some(format!(
                                    "bench rpc went over '{t}', expected '{want}' in {mode} mode"
                                ));
                            }
                            transports.push(t);
                            medians.push(x.median);
                            p99s.extend(x.p99);
                        }
                        Err(e) => err = Some(e),
                    }
                    lines.extend(o.lines);
                }
                Err(e) => err = Some(e),
            }
        }
        transports.dedup();
        fig.params["transport"] = json!(transports.join(","));
        fig.params["medians_ns"] = json!(medians);
        if let Some(m) = parse::median(&p99s) {
            fig.params["p99_ns_median_of_runs"] = json!(m);
        }
        fig.raw = json!(lines);
        fig.status = match (parse::median(&medians), err) {
            (Some(m), None) => Status::Ok(m),
            (_, Some(e)) => Status::Failed(e),
            (None, None) => Status::Failed("no bench rpc result".into()),
        };
        self.push(fig);
    }

    // ------------------------------------------------------ larger than pool

    fn big_cluster(&mut self, mode: &str) {
        let p = self.params.clone();
        let name = format!("{mode}-bigfile");
        let mut s = self.start(&name, mode, 2, Some(p.big_shm_mb));
        let f = "/big.dat";
        let cmd = format!(
            "fio --name=big --rw=read --bs=128k --size={} --numjobs=1 --iodepth={} --ioengine=libaio --invalidate=0 --filename={f}",
            size_arg(p.big_file),
            p.iodepth
        );
        let setup = s.seq(&[
            (1, format!("fill {f} {}", size_arg(p.big_file))),
            (1, "sync".into()),
            (1, "cache drop".into()),
            (2, "cache drop".into()),
        ]);
        let setup_err = setup.err().map(|e| format!("setup: {e}"));
        let steps: [(&str, Vec<(u8, String)>); 3] = [
            ("pass 1: cached nowhere", vec![]),
            ("pass 2: same node again", vec![]),
            (
                "after node 1 read it",
                vec![(2, "cache drop".into()), (1, cmd.clone())],
            ),
        ];
        for (sc, prep) in steps {
            let mut fig = Figure::new(
                GROUP_BIG,
                mode,
                "seq read > pool",
                Some("libaio"),
                sc,
                "bandwidth",
                "MiB/s",
                false,
            );
            fig.context = s.ctx.clone();
            fig.params = json!({
                "file_bytes": p.big_file,
                "pool_mib_per_node": s.ctx.pool_mib,
                "shm_mb": p.big_shm_mb,
                "bs": 131072,
                "numjobs": 1,
            });
            fig.command = format!("n2: {cmd}");
            fig.status = match &setup_err {
                Some(e) => Status::Failed(e.clone()),
                None => match s.seq(&prep) {
                    Err(e) => Status::Failed(format!("preparing: {e}")),
                    Ok(()) => {
                        let w = Workload {
                            key: "big",
                            title: "",
                            rw: "read",
                            bs: 131072,
                            kind: Kind::Bandwidth,
                            read: true,
                            dpc_fig: "",
                        };
                        let shot = match s.run(2, &cmd) {
                            Ok(out) => fio_shot(&w, &out),
                            Err(e) => Shot::Fail(e),
                        };
                        aggregate(&mut fig, &[shot]);
                        fig.status.clone()
                    }
                },
            };
            self.push(fig);
        }
        let stats = self.stats(&mut s, &[(1, "dir stats"), (2, "cache stats")]);
        self.finish(s, stats);
    }

    /// Writes a line to `progress.log` in the results folder.
    pub fn log_line(&self, line: &str) {
        if let Ok(mut f) = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.out.join("progress.log"))
        {
            let _ = writeln!(f, "{line}");
        }
    }

    /// The figure with an id.
    pub fn figure(&self, id: &str) -> Option<&Figure> {
        self.figures.iter().find(|f| f.id == id)
    }

    /// Every figure id the run must produce.
    pub fn expected_ids(&self) -> Vec<String> {
        let mut ids = vec![figure_id(GROUP_HOST, "host", "ping-pong", None, "median")];
        for (sc, _) in host_dir_figures() {
            ids.push(figure_id(GROUP_HOST, "host", HOST_DIR_BENCH, None, &sc));
        }
        for m in &self.opts.modes {
            for w in WORKLOADS {
                for e in ENGINES {
                    for sc in SCENARIOS {
                        ids.push(figure_id(GROUP_FIO, m, w.key, Some(e), sc));
                    }
                }
            }
            for sc in ["CM", "local hit", "CM-R", "CH-R"] {
                ids.push(figure_id(GROUP_DIR, m, "bench read", None, sc));
            }
            for sc in ["2 sharers", "1 sharer", "0 sharers"] {
                ids.push(figure_id(GROUP_INV, m, "bench inv", None, sc));
            }
            ids.push(figure_id(
                GROUP_DIR,
                m,
                "bench ring",
                None,
                "empty round trip",
            ));
            ids.push(figure_id(GROUP_DIR, m, "bench rpc", None, RPC_SCENARIO));
            for b in DIR_BATCHES {
                ids.push(figure_id(
                    GROUP_DIR,
                    m,
                    "bench dir",
                    None,
                    &dir_batch_scenario(b),
                ));
            }
            for sc in [
                "pass 1: cached nowhere",
                "pass 2: same node again",
                "after node 1 read it",
            ] {
                ids.push(figure_id(
                    GROUP_BIG,
                    m,
                    "seq read > pool",
                    Some("libaio"),
                    sc,
                ));
            }
        }
        ids
    }

    /// Problems that make the run incomplete: expected figures that are
    /// missing, failed or not a number (n/a is accepted only where the
    /// mode has no such operation: mmap and `bench dir` in private and net
    /// modes, relaxed mmap writes).
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        for id in self.expected_ids() {
            match self.figure(&id) {
                None => out.push(format!("{id}: missing")),
                Some(f) => match &f.status {
                    Status::Ok(v) if v.is_finite() => {}
                    Status::Ok(v) => out.push(format!("{id}: not a number ({v})")),
                    Status::NotApplicable(_)
                        if super::model::na_allowed(
                            &f.group,
                            &f.mode,
                            &f.workload,
                            f.engine.as_deref(),
                        ) => {}
                    Status::NotApplicable(m) => {
                        out.push(format!("{id}: n/a where the operation should exist: {m}"))
                    }
                    Status::Failed(m) => out.push(format!("{id}: {m}")),
                },
            }
        }
        out
    }
}

/// The outcome of one fio run.
#[derive(Debug, Clone, PartialEq)]
enum Shot {
    /// The figure and the RESULT json.
    Ok(f64, Value),
    /// Not supported in this mode (allowed there).
    Na(String),
    /// Failed.
    Fail(String),
}

/// Reads the figure of a fio run from its RESULT line.
fn fio_shot(w: &Workload, out: &CmdOutput) -> Shot {
    let r = match parse::fio_result(&out.lines) {
        Ok(r) => r,
        Err(e) => return Shot::Fail(e),
    };
    let dir = if w.read { "read" } else { "write" };
    let ios = parse::json_num(&r, &format!("/{dir}/ios")).unwrap_or(0.0);
    let v = if ios <= 0.0 {
        Err(format!("fio completed no {dir} I/O"))
    } else {
        match w.kind {
            Kind::Latency => {
                parse::json_num(&r, &format!("/{dir}/lat_ns/mean")).map(|ns| ns / 1000.0)
            }
            Kind::Bandwidth => parse::json_num(&r, &format!("/{dir}/bw_bytes")).map(|b| b / MIB),
            Kind::Iops => parse::json_num(&r, &format!("/{dir}/iops")),
        }
    };
    match v {
        Ok(x) if x.is_finite() => Shot::Ok(x, r),
        Ok(x) => Shot::Fail(format!("not a number: {x}")),
        Err(e) => Shot::Fail(e),
    }
}

/// Sets a figure from its repeats: the median of the values (the RESULT
/// json of the run that gave it); a failed repeat fails the figure.
fn aggregate(f: &mut Figure, shots: &[Shot]) {
    let values: Vec<f64> = shots
        .iter()
        .filter_map(|s| match s {
            Shot::Ok(v, _) => Some(*v),
            _ => None,
        })
        .collect();
    f.params["values"] = json!(values);
    if let Some(e) = shots.iter().find_map(|s| match s {
        Shot::Fail(e) => Some(e.clone()),
        _ => None,
    }) {
        f.status = Status::Failed(e);
        return;
    }
    if let Some(e) = shots.iter().find_map(|s| match s {
        Shot::Na(e) => Some(e.clone()),
        _ => None,
    }) {
        f.status = Status::NotApplicable(e);
        return;
    }
    let Some(m) = parse::median(&values) else {
        f.status = Status::Failed("not measured".into());
        return;
    };
    // The run closest to the median supplies the RESULT json.
    let best = shots
        .iter()
        .filter_map(|s| match s {
            Shot::Ok(v, r) => Some((*v, r)),
            _ => None,
        })
        .min_by(|a, b| (a.0 - m).abs().total_cmp(&(b.0 - m).abs()));
    if let Some((_, r)) = best {
        f.busy_instances = r.get("busy_instances").and_then(Value::as_u64);
        if let Some(eff) = r.get("effective_iodepth") {
            f.params["effective_iodepth"] = eff.clone();
        }
        f.raw = r.clone();
    }
    f.status = Status::Ok(m);
}

/// Reads a `bench read|inv` summary: the median in microseconds.
fn summary_status(f: &mut Figure, lines: &[String], label: &str) -> Status {
    f.raw = json!(lines);
    match parse::summary(lines, label) {
        Ok(s) => {
            f.params["samples"] = json!(s.n);
            if let Some(m) = s.mean {
                f.params["mean_us"] = json!(m / 1000.0);
            }
            if let Some(p) = s.p99 {
                f.params["p99_us"] = json!(p / 1000.0);
            }
            Status::Ok(s.median / 1000.0)
        }
        Err(e) => Status::Failed(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools() {
        let small = pool_mib(16, 2);
        assert!(small > 6.0 && small < 8.0, "{small}");
        assert!(pool_mib(64, 3) < pool_mib(64, 2));
    }

    #[test]
    fn fio_records() {
        let w = Workload::by_key("read-lat").unwrap();
        let mut f = Figure::new(
            GROUP_FIO,
            "strong",
            w.key,
            Some("libaio"),
            "CM",
            "m",
            "us",
            true,
        );
        f.params = json!({});
        let result = |mean: u64| CmdOutput {
            node: 2,
            cmd: "fio".into(),
            lines: vec![format!(
                r#"RESULT {{"busy_instances":2,"effective_iodepth":1,"read":{{"ios":256,"iops":3341.5,"bw_bytes":13688392,"lat_ns":{{"mean":{mean}}}}}}}"#
            )],
            status: crate::Status::Ok,
            logs: vec![],
            raw: String::new(),
            closed: false,
        };
        let shots: Vec<Shot> = [295539, 100000, 400000]
            .iter()
            .map(|m| fio_shot(w, &result(*m)))
            .collect();
        aggregate(&mut f, &shots);
        assert_eq!(f.status, Status::Ok(295.539));
        assert_eq!(f.busy_instances, Some(2));
        assert_eq!(f.params["effective_iodepth"], json!(1));
        assert_eq!(f.raw["read"]["lat_ns"]["mean"], json!(295539));
        assert_eq!(f.params["values"], json!([295.539, 100.0, 400.0]));
        let w2 = Workload::by_key("write-iops").unwrap();
        assert!(
            matches!(fio_shot(w2, &result(1)), Shot::Fail(ref m) if m.contains("no write I/O"))
        );
        let mut g = f.clone();
        aggregate(&mut g, &[shots[0].clone(), Shot::Fail("boom".into())]);
        assert_eq!(g.status, Status::Failed("boom".into()));
        aggregate(&mut g, &[Shot::Na("not supported".into())]);
        assert_eq!(g.status, Status::NotApplicable("not supported".into()));
    }

    #[test]
    fn expected_and_problems() {
        let o = BenchOpts {
            modes: vec!["strong".into(), "private".into()],
            ..BenchOpts::default()
        };
        let mut r = Runner::new(o, PathBuf::from("/nonexistent"));
        let ids = r.expected_ids();
        assert_eq!(ids.len(), 1 + 12 + 2 * (36 + 4 + 3 + 2 + 7 + 3));
        assert_eq!(r.problems().len(), ids.len());
        for id in &ids {
            let parts: Vec<&str> = id.split('/').collect();
            let engine = (parts[3] != "-").then_some(parts[3]);
            let mut f = Figure::new(
                parts[0], parts[1], parts[2], engine, parts[4], "m", "u", true,
            );
            assert_eq!(&f.id, id);
            f.status = if parts[1] == "private" && parts[3] == "mmap" {
                Status::NotApplicable("not supported".into())
            } else {
                Status::Ok(1.0)
            };
            r.figures.push(f);
        }
        assert_eq!(r.problems(), Vec::<String>::new());
        r.figures[1].status = Status::Failed("boom".into());
        r.figures[2].status = Status::NotApplicable("x".into());
        assert_eq!(r.problems().len(), 2);
    }

    #[test]
    fn net_mode_expected_and_not_applicable() {
        let mut r = Runner::new(BenchOpts::default(), PathBuf::from("/nonexistent"));
        let ids = r.expected_ids();
        assert_eq!(ids.len(), 1 + 12 + 4 * (36 + 4 + 3 + 2 + 7 + 3));
        for m in ["strong", "relaxed", "private", "net"] {
            assert!(
                ids.contains(&figure_id(GROUP_DIR, m, "bench rpc", None, RPC_SCENARIO)),
                "{m}"
            );
        }
        // What net mode does not have is n/a by design; the rest must be
        // a number.
        let na = |id: &str| {
            let parts: Vec<&str> = id.split('/').collect();
            (parts[1] == "private" || parts[1] == "net")
                && (parts[3] == "mmap" || parts[2] == "bench dir")
                || (parts[1] == "relaxed" && parts[3] == "mmap" && parts[2].starts_with("write-"))
        };
        for id in &ids {
            let parts: Vec<&str> = id.split('/').collect();
            let engine = (parts[3] != "-").then_some(parts[3]);
            let mut f = Figure::new(
                parts[0], parts[1], parts[2], engine, parts[4], "m", "u", true,
            );
            f.status = if na(id) {
                Status::NotApplicable("not supported".into())
            } else {
                Status::Ok(1.0)
            };
            r.figures.push(f);
        }
        assert_eq!(r.problems(), Vec::<String>::new());
        for bad in [
            figure_id(GROUP_DIR, "net", "bench rpc", None, RPC_SCENARIO),
            figure_id(GROUP_DIR, "net", "bench read", None, "CM-R"),
            figure_id(GROUP_INV, "net", "bench inv", None, "1 sharer"),
            figure_id(GROUP_INV, "private", "bench inv", None, "0 sharers"),
            figure_id(GROUP_FIO, "net", "read-bw", Some("libaio"), "CH-R"),
            figure_id(
                GROUP_BIG,
                "net",
                "seq read > pool",
                Some("libaio"),
                "after node 1 read it",
            ),
        ] {
            let i = r.figures.iter().position(|f| f.id == bad).unwrap();
            let saved = r.figures[i].status.clone();
            r.figures[i].status = Status::NotApplicable("not supported".into());
            assert_eq!(r.problems().len(), 1, "{bad}");
            r.figures[i].status = saved;
        }
    }
}
