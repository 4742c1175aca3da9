//! Host tests of the study's pure parts: sizing, parsing, arithmetic.

use super::parse::{app_result, node_cache_pages, proc_cpu_ticks};
use super::plan::{cache_pages_for_mem, dataset_bytes, shm_mb_for, Plan, APPS, MEM_MB};
use super::table::{geomean, goals, mean, ratio, Cell, Study};
use crate::bench::opts::{parse_args, BenchOpts, Parsed};

fn cell(app: &str, mode: &str, n: u8, per_node: &[f64]) -> Cell {
    Cell {
        app: app.into(),
        mode: mode.into(),
        nodes: n,
        per_node: per_node.to_vec(),
        cpu_nodes: vec![0.5; per_node.len()],
        cpu_dir: Some(0.1),
        wall_s: 1.0,
        unit: "ops/s".into(),
        error: None,
        results: Vec::new(),
    }
}

#[test]
fn node_cache_follows_the_kernel() {
    // 48 MiB of RAM: the smallest heap, 24 MiB, a third of it in pages.
    assert_eq!(cache_pages_for_mem(48), 2048);
    assert_eq!(cache_pages_for_mem(32), 2048);
    assert_eq!(cache_pages_for_mem(128), (64 << 20) / 3 / 4096);
    assert_eq!(cache_pages_for_mem(64), (32 << 20) / 3 / 4096);
    assert_eq!(cache_pages_for_mem(MEM_MB), 2048);
}

#[test]
fn datasets_exceed_one_cache_and_fit_in_two() {
    for pages in [2048usize, 2730, 5461] {
        let d = dataset_bytes(pages);
        let cache = pages as u64 * 4096;
        assert!(d >= cache * 3 / 2, "{pages}: {d}");
        assert!(d <= 2 * cache, "{pages}: {d}");
        assert_eq!(d % (1 << 20), 0);
    }
    assert_eq!(dataset_bytes(2048), 14 << 20);
}

#[test]
fn the_region_holds_every_pool() {
    for n in [1u8, 2, 4, 8] {
        let mb = shm_mb_for(2048, n).expect("a region");
        assert!(mb.is_power_of_two() && (16..=8192).contains(&mb));
        let pool = crate::bench::runner::pool_mib(mb, n);
        assert!(pool >= 10.0, "n={n}: {mb} MiB gives {pool} MiB per node");
        if mb > 16 {
            assert!(
                crate::bench::runner::pool_mib(mb / 2, n) < 10.0,
                "n={n}: {mb} is not the smallest"
            );
        }
    }
}

#[test]
fn plan_from_the_command_line() {
    let o = |a: &[&str]| match parse_args(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>()) {
        Ok(Parsed::Run(o)) => *o,
        other => panic!("{a:?}: {other:?}"),
    };
    let p = Plan::from_opts(&o(&["--apps"])).unwrap();
    assert_eq!(p.nodes, vec![1, 2, 4]);
    assert_eq!(p.modes, vec!["private", "strong", "relaxed", "net"]);
    assert_eq!(p.storage, "sas-raid");
    assert_eq!(p.disk_margin_mb, 4 * 64, "room for 4 nodes' files");
    assert_eq!(p.apps.len(), APPS.len());
    assert_eq!(p.dataset_specs()[0], "kv:14336k");
    assert_eq!(p.command("kv", 3), "app kv --runtime 5 --warmup 2 --seed 3");
    assert_eq!(p.to_json()["warmup_s"], 2);
    let q = Plan::from_opts(&o(&[
        "--apps",
        "--quick",
        "--modes",
        "strong,private",
        "--storage",
        "none",
    ]))
    .unwrap();
    assert_eq!(q.nodes, vec![1, 2]);
    assert_eq!(q.modes, vec!["private", "strong"], "private first");
    assert_eq!(q.storage, "none");
    assert_eq!(q.runtime_s, 1);
    assert_eq!(q.warmup_s, 1);
    let none = Plan::from_opts(&o(&["--apps", "--apps-warmup", "0"])).unwrap();
    assert_eq!(
        none.command("kv", 1),
        "app kv --runtime 5 --seed 1",
        "0: no warm-up"
    );
    let e = Plan::from_opts(&o(&["--apps", "--modes", "strong"])).unwrap_err();
    assert!(e.contains("private"), "{e}");
    assert!(
        Plan::from_opts(&BenchOpts::default()).unwrap().to_json()["cache_pages_per_node"] == 2048
    );
}

#[test]
fn result_lines_are_checked() {
    let out = "app kv on node 2 (strong mode): ...\n  lookups_per_s: 10\nRESULT {\"app\":\"kv\",\"node\":2,\"mode\":\"strong\",\"metric\":\"lookups_per_s\",\"unit\":\"lookups/s\",\"throughput\":1583.536,\"operations\":7920}";
    let r = app_result(out, "kv", 2, "strong").unwrap();
    assert_eq!(r.throughput, 1583.536);
    assert_eq!((r.unit.as_str(), r.operations), ("lookups/s", 7920));
    for (text, app, node, mode, want) in [
        ("no result", "kv", 2, "strong", "no RESULT"),
        ("RESULT {bad", "kv", 2, "strong", "not JSON"),
        (out, "ann", 2, "strong", "not ann"),
        (out, "kv", 1, "strong", "node"),
        (out, "kv", 2, "private", "mode"),
        (
            "RESULT {\"app\":\"kv\",\"node\":2,\"mode\":\"strong\"}",
            "kv",
            2,
            "strong",
            "throughput",
        ),
        (
            "RESULT {\"app\":\"kv\",\"node\":2,\"mode\":\"strong\",\"throughput\":-1}",
            "kv",
            2,
            "strong",
            "throughput",
        ),
    ] {
        let e = app_result(text, app, node, mode).unwrap_err();
        assert!(e.contains(want), "{text}: {e}");
    }
}

#[test]
fn boot_log_and_proc_stat() {
    assert_eq!(
        node_cache_pages(
            "[    0.303939] n1 INFO  node cache: 2048 pages (a third of the 24 MiB kernel heap)"
        ),
        Some(2048)
    );
    assert_eq!(node_cache_pages("node cache: many pages"), None);
    assert_eq!(node_cache_pages("node cache: 12 frames"), None);
    assert_eq!(node_cache_pages("nothing"), None);
    let stat =
        "2000 (qemu system x86) S 1 2000 2000 0 -1 4194560 100 0 0 0 250 37 0 0 20 0 3 0 100 0 0";
    assert_eq!(proc_cpu_ticks(stat), Some(287));
    assert_eq!(proc_cpu_ticks("2000 (qemu) S 1"), None);
    assert_eq!(proc_cpu_ticks(""), None);
}

#[test]
fn means_and_ratios() {
    assert_eq!(mean(&[1.0, 3.0]), Some(2.0));
    assert_eq!(mean(&[]), None);
    assert!((geomean(&[2.0, 8.0]).unwrap() - 4.0).abs() < 1e-12);
    assert_eq!(geomean(&[]), None);
    assert_eq!(geomean(&[1.0, 0.0]), None);
    assert_eq!(geomean(&[1.0, f64::NAN]), None);
    assert_eq!(ratio(Some(3.0), Some(2.0)), Some(1.5));
    assert_eq!(ratio(Some(3.0), Some(0.0)), None);
    assert_eq!(ratio(None, Some(1.0)), None);
}

fn study() -> Study {
    let mut s = Study::default();
    for a in APPS {
        s.cells.push(cell(a.name, "private", 1, &[100.0]));
        s.cells.push(cell(a.name, "private", 2, &[50.0, 70.0]));
        s.cells
            .push(cell(a.name, "private", 4, &[25.0, 25.0, 25.0, 25.0]));
        s.cells.push(cell(a.name, "strong", 1, &[99.0]));
        s.cells.push(cell(a.name, "strong", 2, &[300.0, 500.0]));
        s.cells
            .push(cell(a.name, "strong", 4, &[200.0, 200.0, 200.0, 200.0]));
    }
    s
}

#[test]
fn normalization_is_per_node_over_single_node_private() {
    let mut s = study();
    // Per node at N=2: mean 400; single-node private 100.
    assert_eq!(s.normalized("kv", "strong", 2), Some(4.0));
    assert_eq!(s.vs_private_same_n("kv", "strong", 2), Some(400.0 / 60.0));
    assert_eq!(s.normalized("kv", "private", 4), Some(0.25));
    assert_eq!(s.cell("kv", "strong", 4).unwrap().aggregate(), Some(800.0));
    // The geomean of DPC's five leaves varmail out.
    s.cells
        .retain(|c| !(c.app == "varmail" && c.mode == "strong"));
    assert_eq!(
        s.geomean_over(APPS, |a| s.normalized(a, "strong", 2)),
        Some(4.0)
    );
    // A failed cell or a missing node has no figure, and no geomean.
    let i = s
        .cells
        .iter()
        .position(|c| c.app == "kv" && c.mode == "strong" && c.nodes == 2)
        .unwrap();
    s.cells[i].error = Some("boom".into());
    assert_eq!(s.normalized("kv", "strong", 2), None);
    assert_eq!(s.geomean_over(APPS, |a| s.normalized(a, "strong", 2)), None);
    s.cells[i].error = None;
    s.cells[i].per_node.pop();
    assert_eq!(s.per_node("kv", "strong", 2), None);
}

#[test]
fn goals_are_judged() {
    let s = study();
    let modes = vec!["private".to_string(), "strong".to_string()];
    let g = goals(&s, APPS, &modes, &[1, 2, 4]);
    let find = |w: &str| {
        g.iter()
            .find(|x| x.what.contains(w))
            .unwrap_or_else(|| panic!("{w}: {g:?}"))
    };
    // 99 vs 100: within 2%.
    assert_eq!(find("1 node: strong").met, Some(true));
    // 4 nodes: 200 / 25 = 8x >= 5.6, but < 16.2 for webserver.
    assert_eq!(find("geomean over DPC's five").met, Some(true));
    assert_eq!(find("webserver >= 16.2x").met, Some(false));
    // 400/60 = 6.7x at 2 nodes, 8x at 4: not lower.
    assert_eq!(find("not lower at 4 nodes than at 2").met, Some(true));
    // Without a 4-node run there is no 4-node goal; a gap is "not measured".
    let mut t = s.clone();
    t.cells
        .retain(|c| !(c.app == "ann" && c.mode == "strong" && c.nodes == 1));
    let g = goals(&t, APPS, &modes, &[1, 2]);
    assert!(g.iter().all(|x| !x.what.contains("4 nodes")));
    assert_eq!(
        g.iter().find(|x| x.what.contains("1 node")).unwrap().met,
        None
    );
}

#[test]
fn apps_list_runs_in_report_order() {
    let args: Vec<String> = [
        "--apps",
        "--apps-list",
        "webserver, kv,webserver",
        "--policy=cluster",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let Ok(Parsed::Run(o)) = parse_args(&args) else {
        panic!("should parse")
    };
    let plan = Plan::from_opts(&o).expect("plan");
    let names: Vec<&str> = plan.apps.iter().map(|a| a.name).collect();
    assert_eq!(names, ["kv", "webserver"], "report order kept");
    assert_eq!(plan.to_json()["policy"], "cluster");
}
