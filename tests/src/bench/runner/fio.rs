//! The fio figures: one cluster, every workload and engine.

use serde_json::{json, Value};

use super::session::Session;
use super::*;
use std::time::Instant;

use super::steps::StepKind;
use crate::bench::model::{Figure, Kind, Status, Workload, GROUP_FIO, SCENARIOS};
use crate::bench::opts::{size_arg, size_human};
use crate::bench::parse;
use crate::CmdOutput;

/// The kernel's readahead window and fault-around block (boot options
/// `readahead_kb`, `faultaround_kb`; the runner does not change them at
/// boot), set again after a readahead-off workload.
const RA_KB: u32 = 128;
const FA_KB: u32 = 64;

impl Runner {
    /// The fio cluster of `mode`: its steps are `idx` of `w` (one per
    /// workload and engine); booted only if one of them is not kept from
    /// the resumed run. False when the run stops here.
    pub(super) fn fio_cluster(&mut self, mode: &str, w: &mut Walk, idx: &[usize]) -> bool {
        let name = format!("{mode}-fio");
        let phase = format!("{mode}: fio");
        let t = Instant::now();
        let all_kept = idx
            .iter()
            .all(|&i| w.kept.get(i).is_some_and(Option::is_some));
        let mut s = None;
        let mut go_on = true;
        for &i in idx {
            match self.step_begin(w, i) {
                None => {
                    go_on = false;
                    break;
                }
                Some(true) => continue,
                Some(false) => {}
            }
            let Some(StepKind::Fio(wl, e)) = w.steps.get(i).map(|s| s.kind) else {
                continue;
            };
            let t = Instant::now();
            if s.is_none() {
                let shm = self.params.fio_shm_mb;
                s = Some(self.start(&name, mode, 2, Some(shm)));
            }
            if let Some(s) = s.as_mut() {
                self.fio_workload(s, mode, wl, e);
            }
            if !self.step_end(w, i, t) {
                go_on = false;
                break;
            }
        }
        match s {
            Some(mut s) => {
                let stats = self.stats(&mut s, &[(1, "dir stats"), (2, "cache stats")]);
                self.finish(s, stats);
                self.phases.push((phase, t.elapsed().as_secs_f64()));
            }
            None if all_kept => self.keep_phase(&phase, &name),
            None => {}
        }
        go_on
    }

    pub(super) fn fio_workload(&mut self, s: &mut Session, mode: &str, w: &Workload, engine: &str) {
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
        let allow_na = crate::bench::model::na_allowed(GROUP_FIO, mode, w.key, Some(engine));
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
        let mut params = params;
        params["readahead"] = json!(if w.readahead {
            format!("on (readahead_kb={RA_KB}, faultaround_kb={FA_KB}: the kernel's defaults)")
        } else {
            "off on both nodes (cache readahead 0 0), for this workload only".to_string()
        });
        // shots[scenario][repeat]
        let mut shots: Vec<Vec<Shot>> = vec![Vec::new(); SCENARIOS.len()];
        // Off for this workload only, on both nodes (node 1 lays the files
        // out and reads them first), and back on after it.
        let ra_off = if w.readahead {
            Ok(())
        } else {
            s.seq(&[
                (1, "cache readahead 0 0".into()),
                (2, "cache readahead 0 0".into()),
            ])
        };
        match ra_off {
            Err(e) => {
                for sc in shots.iter_mut() {
                    sc.push(Shot::Fail(format!("cache readahead 0 0: {e}")));
                }
            }
            Ok(()) => {
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
            }
        }
        if !w.readahead && s.broken.is_none() {
            let on = format!("cache readahead {RA_KB} {FA_KB}");
            if let Err(e) = s.seq(&[(1, on.clone()), (2, on)]) {
                self.notes.push(format!(
                    "{}: readahead back on after {}: {e}",
                    s.name, w.key
                ));
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
    pub(super) fn fio_once(
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
}

/// The outcome of one fio run.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Shot {
    /// The figure and the RESULT json.
    Ok(f64, Value),
    /// Not supported in this mode (allowed there).
    Na(String),
    /// Failed.
    Fail(String),
}

/// Reads the figure of a fio run from its RESULT line.
pub(super) fn fio_shot(w: &Workload, out: &CmdOutput) -> Shot {
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
pub(super) fn aggregate(f: &mut Figure, shots: &[Shot]) {
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
        for key in ["effective_iodepth", "max_iodepth"] {
            if let Some(v) = r.get(key) {
                f.params[key] = v.clone();
            }
        }
        f.raw = r.clone();
    }
    f.status = Status::Ok(m);
}

#[cfg(test)]
mod ra_tests {
    use super::{FA_KB, RA_KB};

    #[test]
    fn readahead_goes_back_to_the_kernel_defaults() {
        let c = fabric::config::BootConfig::parse("role=node id=1 nodes=1").unwrap();
        assert_eq!((c.readahead_kb, c.faultaround_kb), (RA_KB, FA_KB));
    }
}
