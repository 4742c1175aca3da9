//! Runs the application study: one cluster per (N, mode), every app on
//! all N nodes at once, each node's RESULT and every instance's CPU time
//! recorded. Every cluster is stopped, whatever happened.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::parse::{app_result, node_cache_pages, proc_cpu_ticks};
use super::plan::Plan;
use super::table::{Cell, Study};
use crate::bench::opts::BenchOpts;
use crate::bench::runner::steps::{progress_line, Progress};
use crate::bench::runner::{find_ctl, one_line, spawn_guard};
use crate::{host_tool, run_with_timeout, unique_run_dir, Cluster, ClusterOpts};

/// Everything the study measured.
#[derive(Debug)]
pub struct AppsRunner {
    /// Command line.
    pub opts: BenchOpts,
    /// What runs.
    pub plan: Plan,
    /// Results folder.
    pub out: PathBuf,
    /// Every (app, mode, N).
    pub study: Study,
    /// One record per cluster.
    pub clusters: Vec<Value>,
    /// Warnings (a failed clean-up, ...).
    pub notes: Vec<String>,
    /// Seconds spent building the datasets' image.
    pub mkfs_s: f64,
    /// Set when a signal stopped the study: (where, which signal).
    pub partial: Option<(String, String)>,
    ctl: PathBuf,
    clk_tck: f64,
    started: Instant,
}

/// CPU ticks of the processes whose pid files are given (None where a
/// pid file or its process is gone).
fn cpu_ticks(pid_files: &[PathBuf]) -> Vec<Option<u64>> {
    pid_files
        .iter()
        .map(|p| {
            let pid = fs::read_to_string(p).ok()?.trim().parse::<u32>().ok()?;
            proc_cpu_ticks(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
        })
        .collect()
}

fn clk_tck() -> f64 {
    let mut c = Command::new("getconf");
    c.arg("CLK_TCK");
    run_with_timeout(c, Duration::from_secs(10))
        .ok()
        .and_then(|o| o.stdout_text().trim().parse::<f64>().ok())
        .filter(|t| *t > 0.0)
        .unwrap_or(100.0)
}

impl AppsRunner {
    /// A study writing into `out`.
    pub fn new(opts: BenchOpts, plan: Plan, out: PathBuf) -> AppsRunner {
        AppsRunner {
            opts,
            plan,
            out,
            study: Study::default(),
            clusters: Vec::new(),
            notes: Vec::new(),
            mkfs_s: 0.0,
            partial: None,
            ctl: find_ctl(),
            clk_tck: clk_tck(),
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

    /// Builds the datasets once, then runs every (N, mode): private
    /// first at each N, so that each same-N ratio is taken minutes apart
    /// at most.
    pub fn run_all(&mut self) {
        let t = Instant::now();
        let img_dir = match unique_run_dir("apps-image") {
            Ok(d) => d,
            Err(e) => return self.fail_all(&format!("run folder: {e}")),
        };
        let image = img_dir.join("apps.img");
        let built = fs::create_dir_all(&img_dir)
            .map_err(|e| e.to_string())
            .and_then(|()| self.mkfs(&image));
        self.mkfs_s = t.elapsed().as_secs_f64();
        match built {
            Err(e) => self.fail_all(&format!("mkfs --dataset: {e}")),
            Ok(()) => {
                self.say(&format!(
                    "datasets built in {:.1} s: {}",
                    self.mkfs_s,
                    self.plan.dataset_specs().join(",")
                ));
                self.clusters_in_order(&image);
            }
        }
        let _ = fs::remove_dir_all(&img_dir);
    }

    /// Every (N, mode) cluster, one progress line each, until a signal.
    fn clusters_in_order(&mut self, image: &Path) {
        let order: Vec<(u8, String)> = self
            .plan
            .nodes
            .iter()
            .flat_map(|&n| self.plan.modes.iter().map(move |m| (n, m.clone())))
            .collect();
        // A cluster's cost grows with its nodes (boot, one app run each).
        let mut progress = Progress::new(
            order.iter().map(|(n, _)| 2.0 + f64::from(*n)).collect(),
            vec![false; order.len()],
        );
        // Seconds per unit of weight before one was measured: the full
        // study is about 8 minutes for 3 x 4 clusters of weight 3..6.
        let scale = if self.opts.quick { 4.0 } else { 9.0 };
        for (i, (n, mode)) in order.iter().enumerate() {
            let label = format!("{} apps, mode {mode}, N={n}", self.plan.apps.len());
            if let Some(sig) = crate::bench::interrupt::interrupted() {
                self.partial = Some((label, crate::bench::interrupt::signal_name(sig)));
                return;
            }
            eprintln!(
                "onecopy-bench: {}",
                progress_line(
                    i,
                    order.len(),
                    &label,
                    self.elapsed(),
                    progress.eta(i, scale)
                )
            );
            let t = Instant::now();
            self.cluster(mode, *n, image);
            progress.measured(i, t.elapsed().as_secs_f64());
            if let Some(sig) = crate::bench::interrupt::interrupted() {
                self.partial = Some((label, crate::bench::interrupt::signal_name(sig)));
                return;
            }
        }
    }

    fn mkfs(&self, image: &Path) -> Result<(), String> {
        let mut cmd = Command::new(host_tool("mkfs"));
        // mkfs adds --size-mb to what the datasets need.
        cmd.arg("--size-mb")
            .arg(self.plan.disk_margin_mb.to_string());
        for d in self.plan.dataset_specs() {
            cmd.arg("--dataset").arg(d);
        }
        cmd.arg(image);
        let o = run_with_timeout(cmd, Duration::from_secs(600)).map_err(|e| e.to_string())?;
        if o.code != Some(0) {
            return Err(format!("exit {:?}: {}", o.code, one_line(&o.text())));
        }
        Ok(())
    }

    fn fail_all(&mut self, why: &str) {
        self.say(why);
        for n in self.plan.nodes.clone() {
            for mode in self.plan.modes.clone() {
                self.fail_cluster(&mode, n, why);
            }
        }
    }

    fn fail_cluster(&mut self, mode: &str, n: u8, why: &str) {
        for app in self.plan.apps.clone() {
            self.study.cells.push(Cell {
                app: app.name.into(),
                mode: mode.into(),
                nodes: n,
                per_node: Vec::new(),
                cpu_nodes: Vec::new(),
                cpu_dir: None,
                wall_s: 0.0,
                unit: String::new(),
                error: Some(why.into()),
                results: Vec::new(),
            });
        }
    }

    fn cluster(&mut self, mode: &str, n: u8, image: &Path) {
        let name = format!("apps-{mode}-{n}n");
        let t = Instant::now();
        self.say(&format!(
            "boot {name}: 1 directory + {n} nodes, mode {mode}, {} MiB RAM each, shm {} MiB, storage {}",
            self.plan.mem_mb, self.plan.shm_mb, self.plan.storage
        ));
        let run_dir = match unique_run_dir(&name) {
            Ok(d) => d,
            Err(e) => return self.fail_cluster(mode, n, &format!("run folder: {e}")),
        };
        let disk = run_dir.join("apps.img");
        if let Err(e) =
            fs::create_dir_all(&run_dir).and_then(|()| fs::copy(image, &disk).map(|_| ()))
        {
            return self.fail_cluster(mode, n, &format!("copying the datasets' image: {e}"));
        }
        let guard = spawn_guard(&run_dir, &self.ctl);
        let mut o = ClusterOpts::new(&name);
        if let Some(p) = &self.plan.policy {
            o = o.policy(p);
        }
        if let Some(a) = self.opts.accel_for(mode) {
            o = o.accel(a);
        }
        let o = o
            .nodes(n)
            .mode(mode)
            .run_dir(&run_dir)
            .disk(&disk)
            .ctl(&self.ctl)
            .storage(&self.plan.storage)
            .dilation(&self.opts.dilation)
            .doorbell(self.opts.doorbell)
            .shm_mb(self.plan.shm_mb)
            .mem_mb(self.plan.mem_mb)
            .append_extra(&format!(
                "baseline_writes={} delegation={}",
                self.opts.baseline_writes,
                u8::from(self.opts.delegation)
            ))
            .cmd_timeout(Duration::from_secs(self.plan.cmd_timeout_s))
            .boot_timeout(Duration::from_secs(self.plan.boot_timeout_s));
        let mut transcript = String::new();
        let mut record = json!({ "name": name, "mode": mode, "nodes": n });
        match Cluster::start(o) {
            Err(e) => {
                let msg = format!("boot failed: {}", one_line(&e.to_string()));
                self.say(&format!("{name}: {msg}"));
                self.fail_cluster(mode, n, &msg);
                record["error"] = json!(msg);
                let _ = fs::remove_dir_all(&run_dir);
            }
            Ok(mut c) => {
                record["launch_output"] = json!(c.launch_output());
                // `auto` is measured once, at the first boot; every later
                // cluster of the study uses the same D.
                if let Some(d) = crate::bench::parse::dilation(c.launch_output()) {
                    if self.opts.dilation == "auto" {
                        self.say(&format!("dilation measured at the first boot: {d}"));
                        self.opts.dilation = d.clone();
                    }
                    record["dilation"] = json!(d);
                }
                let stats = self.on_cluster(&mut c, mode, n, &mut transcript);
                record["stats"] = stats;
                let broken = self
                    .study
                    .cells
                    .iter()
                    .any(|x| x.mode == mode && x.nodes == n && x.error.is_some());
                if broken {
                    let dir = self.out.join("logs").join(&name);
                    if fs::create_dir_all(&dir).is_ok() {
                        for inst in crate::Instance::all(c.nodes()) {
                            let _ = fs::write(
                                dir.join(format!("{}.log", inst.name())),
                                c.run().log(inst),
                            );
                        }
                        record["logs"] = json!(dir.display().to_string());
                    }
                }
                if self.opts.keep_runs {
                    c.keep_run_dir();
                }
                if let Err(e) = c.stop() {
                    self.notes
                        .push(format!("{name}: stopping the cluster failed: {e}"));
                }
                let _ = fs::remove_file(&disk);
            }
        }
        guard.end();
        let tdir = self.out.join("transcripts");
        if fs::create_dir_all(&tdir).is_ok() {
            let _ = fs::write(tdir.join(format!("{name}.txt")), &transcript);
        }
        record["seconds"] = json!(t.elapsed().as_secs_f64());
        self.say(&format!(
            "{name} done in {:.1} s",
            t.elapsed().as_secs_f64()
        ));
        self.clusters.push(record);
    }

    /// Checks the node cache, caps the single-copy pools at it, runs
    /// every app; the cluster's final `cache stats`.
    fn on_cluster(&mut self, c: &mut Cluster, mode: &str, n: u8, tr: &mut String) -> Value {
        let nodes: Vec<u8> = (1..=n).collect();
        let exec =
            |c: &mut Cluster, node: u8, cmd: &str, tr: &mut String| -> Result<String, String> {
                let r = c.exec(node, cmd).and_then(|o| o.into_result());
                match r {
                    Ok(o) => {
                        let t = o.text();
                        tr.push_str(&format!("n{node}> {cmd}\n{t}\n"));
                        Ok(t)
                    }
                    Err(e) => {
                        let m = format!("n{node}: {cmd}: {}", one_line(&e.to_string()));
                        tr.push_str(&format!("n{node}> {cmd}\n!! {m}\n"));
                        Err(m)
                    }
                }
            };
        // The node cache the datasets were sized for.
        let mut setup = Ok(());
        for &k in &nodes {
            let got = c
                .wait_log(&format!("node{k}"), "node cache: ", Duration::from_secs(10))
                .ok()
                .and_then(|l| node_cache_pages(&l));
            if got != Some(self.plan.cache_pages) {
                setup = Err(format!(
                    "n{k}: boot log says node cache {got:?} pages, the datasets were sized for {}",
                    self.plan.cache_pages
                ));
                break;
            }
        }
        // The single-copy modes' owned pages get the same capacity.
        if setup.is_ok() && (mode == "strong" || mode == "relaxed") {
            for &k in &nodes {
                let cmd = format!("cache config limit={}", self.plan.cache_pages);
                if let Err(e) = exec(c, k, &cmd, tr) {
                    setup = Err(e);
                    break;
                }
            }
        }
        let mut pid_files = vec![c.run_dir().join("dir.pid")];
        pid_files.extend(
            nodes
                .iter()
                .map(|k| c.run_dir().join(format!("node{k}.pid"))),
        );
        let mut broken: Option<String> = setup.err();
        for app in self.plan.apps.clone() {
            let mut cell = Cell {
                app: app.name.into(),
                mode: mode.into(),
                nodes: n,
                per_node: Vec::new(),
                cpu_nodes: Vec::new(),
                cpu_dir: None,
                wall_s: 0.0,
                unit: String::new(),
                error: broken.clone().map(|b| format!("not run: {b}")).or_else(|| {
                    crate::bench::interrupt::interrupted().map(|sig| {
                        format!(
                            "not run: interrupted by {}",
                            crate::bench::interrupt::signal_name(sig)
                        )
                    })
                }),
                results: Vec::new(),
            };
            if cell.error.is_none() {
                // Every app starts from empty caches, in every mode.
                for &k in &nodes {
                    if let Err(e) = exec(c, k, "cache drop", tr) {
                        cell.error = Some(e);
                        break;
                    }
                }
            }
            if cell.error.is_none() {
                self.run_app(c, &mut cell, &pid_files, tr);
                if let Some(e) = &cell.error {
                    if e.contains("timed out") || e.contains("closed") {
                        broken = Some(e.clone());
                    }
                }
            }
            let shown = match (&cell.error, cell.per_node_mean()) {
                (Some(e), _) => format!("FAILED: {e}"),
                (None, Some(m)) => format!(
                    "{m:.1} {} per node (nodes: {}), cpu per node {}",
                    cell.unit,
                    cell.per_node
                        .iter()
                        .map(|v| format!("{v:.1}"))
                        .collect::<Vec<_>>()
                        .join(" "),
                    cell.cpu_nodes
                        .iter()
                        .map(|v| format!("{:.0}%", v * 100.0))
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
                (None, None) => "no figure".into(),
            };
            self.say(&format!("{mode} N={n} {}: {shown}", app.name));
            self.study.cells.push(cell);
        }
        let mut stats = serde_json::Map::new();
        if broken.is_none() {
            for &k in &nodes {
                let v = match exec(c, k, "cache stats", tr) {
                    Ok(t) => json!(t.lines().collect::<Vec<_>>()),
                    Err(e) => json!(format!("error: {e}")),
                };
                stats.insert(format!("n{k}: cache stats"), v);
            }
        }
        Value::Object(stats)
    }

    fn run_app(&self, c: &mut Cluster, cell: &mut Cell, pid_files: &[PathBuf], tr: &mut String) {
        let cmds: Vec<(u8, String)> = (1..=cell.nodes)
            .map(|k| (k, self.plan.command(&cell.app, k)))
            .collect();
        let refs: Vec<(u8, &str)> = cmds.iter().map(|(k, s)| (*k, s.as_str())).collect();
        let before = cpu_ticks(pid_files);
        let t0 = Instant::now();
        let outs = c.exec_together(&refs);
        cell.wall_s = t0.elapsed().as_secs_f64();
        let after = cpu_ticks(pid_files);
        let share: Vec<Option<f64>> = before
            .iter()
            .zip(&after)
            .map(|(b, a)| match (b, a) {
                (Some(b), Some(a)) if cell.wall_s > 0.0 => {
                    Some(a.saturating_sub(*b) as f64 / self.clk_tck / cell.wall_s)
                }
                _ => None,
            })
            .collect();
        cell.cpu_dir = share.first().copied().flatten();
        cell.cpu_nodes = share
            .iter()
            .skip(1)
            .map(|s| s.unwrap_or(f64::NAN))
            .collect();
        let outs = match outs {
            Ok(o) => o,
            Err(e) => {
                let m = one_line(&e.to_string());
                tr.push_str(&format!("together: {cmds:?}\n!! {m}\n"));
                cell.error = Some(m);
                return;
            }
        };
        for ((k, cmd), out) in cmds.iter().zip(outs) {
            let text = out.text();
            tr.push_str(&format!(
                "n{k}> {cmd}    [{:.2} s, together]\n{text}\n",
                cell.wall_s
            ));
            let r = out
                .into_result()
                .map_err(|e| format!("n{k}: {cmd}: {}", one_line(&e.to_string())))
                .and_then(|o| app_result(&o.text(), &cell.app, *k, &cell.mode));
            match r {
                Ok(r) => {
                    cell.unit = r.unit.clone();
                    cell.per_node.push(r.throughput);
                    cell.results.push(r.raw);
                }
                Err(e) => {
                    if cell.error.is_none() {
                        cell.error = Some(e);
                    }
                }
            }
        }
    }
}
