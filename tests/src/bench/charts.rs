//! The microbenchmark report's charts: which figures each chart shows
//! (fio per workload and engine, invalidation, the big-file reads, the
//! round trips), drawn by [`super::plot`].

use std::path::Path;

use plotters::style::RGBColor;

use super::model::{
    figure_id, Figure, Kind, Workload, ENGINES, GROUP_BIG, GROUP_DIR, GROUP_FIO, GROUP_INV,
    SCENARIOS, WORKLOADS,
};
use super::opts::Params;
use super::plot::{draw, mode_color, Bars};
use super::runner::RPC_SCENARIO;

/// File name of the round-trip chart (bench ring, bench rpc, bench read
/// CM-R per mode).
pub const ROUND_TRIPS_PNG: &str = "round-trips.png";

/// File name of a fio chart.
pub fn fio_png_name(workload: &str, engine: &str) -> String {
    format!("fio-{workload}-{engine}.png")
}

fn find(figs: &[Figure], id: &str) -> Option<f64> {
    figs.iter().find(|f| f.id == id).and_then(Figure::value)
}

/// Draws every chart of a run into `dir`; returns the files written and
/// the errors (a chart that could not be drawn is not fatal).
pub fn draw_all(
    dir: &Path,
    figs: &[Figure],
    modes: &[String],
    p: &Params,
    run_label: &str,
) -> (Vec<String>, Vec<String>) {
    let series: Vec<(String, RGBColor)> =
        modes.iter().map(|m| (m.clone(), mode_color(m))).collect();
    let c = Charts {
        figs,
        modes,
        series,
        run_label,
    };
    let mut charts = vec![(
        super::report::HEADLINE_PNG.to_string(),
        super::report::headline_bars(figs, modes, run_label),
    )];
    for w in WORKLOADS {
        for e in ENGINES {
            charts.push((fio_png_name(w.key, e), c.fio(w, e, p)));
        }
    }
    charts.push(("reclaim-inv.png".into(), c.inv(p)));
    charts.push(("reclaim-bigfile.png".into(), c.bigfile(p)));
    charts.push((ROUND_TRIPS_PNG.into(), c.round_trips()));
    let mut files = Vec::new();
    let mut errors = Vec::new();
    for (name, b) in charts {
        match draw(&dir.join(&name), &b) {
            Ok(()) => files.push(name),
            Err(e) => errors.push(format!("{name}: {e}")),
        }
    }
    (files, errors)
}

/// What every chart of one run shares: its figures, its modes (one series
/// each) and the run's label.
struct Charts<'a> {
    figs: &'a [Figure],
    modes: &'a [String],
    series: Vec<(String, RGBColor)>,
    run_label: &'a str,
}

impl Charts<'_> {
    /// `values[group][mode]` of figure ids `id(mode, group)`.
    fn values(&self, groups: &[&str], id: impl Fn(&str, &str) -> String) -> Vec<Vec<Option<f64>>> {
        groups
            .iter()
            .map(|g| {
                self.modes
                    .iter()
                    .map(|m| find(self.figs, &id(m, g)))
                    .collect()
            })
            .collect()
    }

    /// One fio workload with one engine, per scenario (DPC Fig. 6-9).
    fn fio(&self, w: &Workload, e: &str, p: &Params) -> Bars {
        let metric = match w.kind {
            Kind::Latency => "mean latency (us), lower is better",
            Kind::Bandwidth => "bandwidth (MiB/s), higher is better",
            Kind::Iops => "IOPS, higher is better",
        };
        Bars {
            title: format!("{} - {e} ({} style)", w.title, w.dpc_figure(e)),
            subtitle: format!(
                "fio --rw={} --bs={} --iodepth={} --numjobs={}, {} per file; {}",
                w.rw,
                super::opts::size_arg(w.bs),
                w.iodepth(p),
                w.jobs(p),
                super::opts::size_human(w.size(p)),
                self.run_label,
            ),
            y_label: metric.into(),
            x_label: "scenario (CM: cached nowhere; CM-R: node 1 read it first, node 2's \
                      first touch; CH-R: node 2 again)"
                .into(),
            groups: SCENARIOS.iter().map(|s| s.to_string()).collect(),
            series: self.series.clone(),
            values: self.values(SCENARIOS, |m, sc| {
                figure_id(GROUP_FIO, m, w.key, Some(e), sc)
            }),
            ..Bars::default()
        }
    }

    /// Synchronous invalidation of one page by its number of sharers (DPC
    /// 6.2.5).
    fn inv(&self, p: &Params) -> Bars {
        let inv = ["2 sharers", "1 sharer", "0 sharers"];
        Bars {
            title: "Synchronous invalidation of one page (DPC 6.2.5)".into(),
            subtitle: format!(
                "bench inv, median per page, {} file, idle sharers; {}",
                super::opts::size_human(p.inv_size),
                self.run_label
            ),
            y_label: "median latency per page (us), lower is better".into(),
            x_label: "other nodes holding the page (sharers)".into(),
            groups: inv.iter().map(|s| s.to_string()).collect(),
            series: self.series.clone(),
            values: self.values(&inv, |m, sc| figure_id(GROUP_INV, m, "bench inv", None, sc)),
            ..Bars::default()
        }
    }

    /// Sequential reads of a file larger than the pool, by pass.
    fn bigfile(&self, p: &Params) -> Bars {
        let big = [
            "pass 1: cached nowhere",
            "pass 2: same node again",
            "after node 1 read it",
        ];
        Bars {
            title: "Sequential read of a file larger than the pool".into(),
            subtitle: format!(
                "{} file, {:.1} MiB pool per node, bs=128k, 1 job; {}",
                super::opts::size_human(p.big_file),
                super::runner::pool_mib(p.big_shm_mb, 2),
                self.run_label
            ),
            y_label: "bandwidth (MiB/s), higher is better".into(),
            x_label: "pass over the file".into(),
            groups: big.iter().map(|s| s.to_string()).collect(),
            series: self.series.clone(),
            values: self.values(&big, |m, sc| {
                figure_id(GROUP_BIG, m, "seq read > pool", Some("libaio"), sc)
            }),
            ..Bars::default()
        }
    }

    /// Round trips to the directory: the control rings, the file transport
    /// (rings, or TCP in net mode), a one-page CM-R read; all in us.
    fn round_trips(&self) -> Bars {
        let trips: [(&str, &str, &str, f64); 3] = [
            ("ring (bench ring)", "bench ring", "empty round trip", 1e-3),
            ("file request (bench rpc)", "bench rpc", RPC_SCENARIO, 1e-3),
            ("4 KiB read CM-R (bench read)", "bench read", "CM-R", 1.0),
        ];
        Bars {
            title: "Round trips to the directory: rings vs TCP".into(),
            subtitle: format!(
                "medians; bench rpc over the rings, over TCP/IP in net mode; {}",
                self.run_label
            ),
            y_label: "median round trip (us), lower is better".into(),
            x_label: "operation".into(),
            groups: trips.iter().map(|t| t.0.to_string()).collect(),
            series: self.series.clone(),
            values: trips
                .iter()
                .map(|(_, b, sc, mul)| {
                    self.modes
                        .iter()
                        .map(|m| {
                            find(self.figs, &figure_id(GROUP_DIR, m, b, None, sc)).map(|v| v * mul)
                        })
                        .collect()
                })
                .collect(),
            ..Bars::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_chart_has_every_mode() {
        let dir = crate::unique_run_dir("bench-charts-all").unwrap();
        let modes: Vec<String> = crate::bench::opts::MODES
            .iter()
            .map(|m| m.to_string())
            .collect();
        let mut figs = Vec::new();
        for m in &modes {
            let mut f = Figure::new(
                GROUP_DIR,
                m,
                "bench rpc",
                None,
                RPC_SCENARIO,
                "m",
                "ns",
                true,
            );
            f.status = crate::bench::model::Status::Ok(if m == "net" { 7e5 } else { 2e3 });
            figs.push(f);
        }
        let p = Params::new(true);
        let (files, errors) = draw_all(&dir, &figs, &modes, &p, "unit test");
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            files.len(),
            18,
            "headline ratios + 14 fio + 2 reclaim + round trips"
        );
        assert!(files.iter().any(|f| f == ROUND_TRIPS_PNG));
        for f in &files {
            let bytes = std::fs::read(dir.join(f)).unwrap();
            assert_eq!(&bytes[1..4], b"PNG", "{f}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
