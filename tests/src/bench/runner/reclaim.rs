//! The reclaim figures: a sequential read larger than the pool.

use serde_json::json;

use super::fio::{aggregate, fio_shot, Shot};
use super::*;
use crate::bench::model::{Figure, Kind, Status, Workload, GROUP_BIG};
use crate::bench::opts::size_arg;

impl Runner {
    pub(super) fn big_cluster(&mut self, mode: &str) {
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
                            readahead: true,
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
}
