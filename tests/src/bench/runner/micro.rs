//! The microbenchmark figures: `bench read`, `bench inv`, `bench ring`,
//! `bench rpc`, `bench dir`.

use serde_json::json;

use super::session::Session;
use super::*;
use crate::bench::model::{dir_batch_scenario, Figure, Status, DIR_BATCHES, GROUP_DIR, GROUP_INV};
use crate::bench::opts::size_arg;
use crate::bench::parse;

impl Runner {
    pub(super) fn inv_cluster(&mut self, mode: &str) {
        let name = format!("{mode}-inv");
        let mut s = self.start(&name, mode, 3, None);
        let f = "/inv.dat";
        let size = self.params.inv_size;
        let setup = s.seq(&[
            (1, format!("fill {f} {}", size_arg(size))),
            (1, "sync".into()),
            (1, "cache drop".into()),
            (2, "cache drop".into()),
            (3, "cache drop".into()),
        ]);
        let setup_err = setup.err().map(|e| format!("setup: {e}"));
        self.bench_reads(&mut s, mode, f, &setup_err);
        self.bench_inv(&mut s, mode, f, &setup_err);
        self.bench_ring(&mut s, mode);
        self.bench_rpc(&mut s, mode);
        self.bench_dir(&mut s, mode, f, &setup_err);
        let stats = self.stats(&mut s, &[(1, "dir stats"), (1, "cache stats")]);
        self.finish(s, stats);
    }

    /// `bench read` of file `f` in the four scenarios (one timed 4 KiB
    /// read per page).
    fn bench_reads(&mut self, s: &mut Session, mode: &str, f: &str, setup_err: &Option<String>) {
        let size = self.params.inv_size;
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
            fig.status = match setup_err {
                Some(e) => Status::Failed(e.clone()),
                None => match s.run(node, &format!("bench read {f}")) {
                    Ok(o) => summary_status(&mut fig, &o.lines, "read 4k:"),
                    Err(e) => Status::Failed(e),
                },
            };
            self.push(fig);
        }
    }

    /// Synchronous invalidation of every page node 1 owns, with 2, 1, 0
    /// sharers (the sharers idle at their prompt).
    fn bench_inv(&mut self, s: &mut Session, mode: &str, f: &str, setup_err: &Option<String>) {
        let size = self.params.inv_size;
        let inv_na = crate::bench::model::na_allowed(GROUP_INV, mode, "bench inv", None);
        let file_params =
            json!({"file": f, "size": size, "pages": size / fabric::PAGE_SIZE as u64});
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
            fig.params["wakeup"] = json!(if self.opts.doorbell {
                "doorbell (tickless)"
            } else {
                "1 kHz tick"
            });
            fig.params["operation"] = json!(if crate::bench::opts::BASELINES.contains(&mode) {
                "drop one page of node 1's own cached copy (the baseline's invalidation, no protocol; the other nodes' copies are independent)"
            } else {
                "synchronous invalidation through the directory (sharers unmap first)"
            });
            fig.command = format!("n1: bench inv {f}");
            fig.busy_instances = Some(2);
            fig.status = match setup_err {
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
    }

    /// `bench ring`: median of the runs' medians.
    fn bench_ring(&mut self, s: &mut Session, mode: &str) {
        let p = self.params.clone();
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
    }

    /// `bench dir`: page requests for a file node 1 owns, published in
    /// batches of 1 to 64 (DPC: batched lookups).
    fn bench_dir(&mut self, s: &mut Session, mode: &str, f: &str, setup_err: &Option<String>) {
        let p = self.params.clone();
        let size = p.inv_size;
        let dir_na = crate::bench::model::na_allowed(GROUP_DIR, mode, "bench dir", None);
        let owner = match setup_err {
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
    }

    /// `bench rpc`: an empty request to the file server over the mode's
    /// file transport (the rings, or TCP in net mode); median of the runs'
    /// medians. A transport other than the mode's fails the figure.
    pub(super) fn bench_rpc(&mut self, s: &mut Session, mode: &str) {
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
}

/// Reads a `bench read|inv` summary: the median in microseconds.
pub(super) fn summary_status(f: &mut Figure, lines: &[String], label: &str) -> Status {
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
