use serde_json::json;

use super::fio::{aggregate, fio_shot, Shot};
use super::*;
use crate::bench::model::{
    figure_id, Status, Workload, GROUP_BIG, GROUP_DIR, GROUP_FIO, GROUP_INV,
};
use crate::CmdOutput;

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
            r#"RESULT {{"busy_instances":2,"effective_iodepth":1,"max_iodepth":1,"read":{{"ios":256,"iops":3341.5,"bw_bytes":13688392,"lat_ns":{{"mean":{mean}}}}}}}"#
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
    assert_eq!(f.params["max_iodepth"], json!(1));
    assert_eq!(f.raw["read"]["lat_ns"]["mean"], json!(295539));
    assert_eq!(f.params["values"], json!([295.539, 100.0, 400.0]));
    let w2 = Workload::by_key("write-iops").unwrap();
    assert!(matches!(fio_shot(w2, &result(1)), Shot::Fail(ref m) if m.contains("no write I/O")));
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
    assert_eq!(ids.len(), 1 + 12 + 2 * (42 + 4 + 3 + 2 + 7 + 3));
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
    assert_eq!(ids.len(), 1 + 12 + 4 * (42 + 4 + 3 + 2 + 7 + 3));
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
