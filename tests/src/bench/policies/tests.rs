//! Host tests of the eviction-policy section: sample script output in
//! (testdata/, made by the scripts' own formatting code), rows, problems
//! and markdown out; malformed lines; the options; a script killed on
//! its time limit.

use std::time::Duration;

use super::child::Outcome;
use super::parse::{cluster_row, policy_row, promote, scan, Span};
use super::plan::{steps, Kind, CXL_LATENCY_NS, QUICK_POLICIES};
use super::published::{self, CACHE_EXT};
use super::report::{report_md, section_md};
use super::results::results_json;
use super::section::{last_words, Part, Section, WORKLOADS};
use crate::bench::opts::{parse_args, Parsed};

const APPS: &str = include_str!("testdata/policy-apps.txt");
const CLUSTER: &str = include_str!("testdata/cluster-policy.txt");
const PROMOTE: &str = include_str!("testdata/promote.txt");

fn ok(text: &str) -> Outcome {
    Outcome {
        code: Some(0),
        seconds: 12.0,
        text: text.into(),
        ..Outcome::default()
    }
}

fn part(kind: Kind, o: Outcome) -> Part {
    let step = steps(true)
        .into_iter()
        .find(|s| s.kind == kind)
        .expect("a step");
    Part::new(step, o, format!("policies/{}", kind.log_name()))
}

fn all_ok() -> Section {
    Section::collect(
        true,
        vec![
            part(Kind::Apps, ok(APPS)),
            part(Kind::Cluster, ok(CLUSTER)),
            part(Kind::Promote, ok(PROMOTE)),
        ],
    )
}

#[test]
fn scan_takes_only_tagged_lines_and_notes_bad_ones() {
    let l = scan(APPS);
    assert_eq!(l.rows.len(), 12, "4 policies x 3 workloads");
    assert_eq!(l.results.len(), 1);
    assert!(l.malformed.is_empty(), "{:?}", l.malformed);
    let text = "[n1] RESULT {\"app\":\"kv\"}\nROW {\"a\":1}\r\nROW {not json\nROW [1,2]\nRESULT \nROW {\"bench\":\"policy-apps\"\nROWS {}\n  ROW {\"indented\":1}\n";
    let l = scan(text);
    assert_eq!(l.rows.len(), 1, "{l:?}");
    assert!(l.results.is_empty());
    assert_eq!(l.malformed.len(), 4, "{:?}", l.malformed);
    assert!(l.malformed[0].starts_with("line 3: ROW is not JSON"));
    assert!(l.malformed[1].contains("not a JSON object"));
    let long = format!("ROW {{\"x\":\"{}", "y".repeat(500));
    let l = scan(&long);
    assert!(l.malformed[0].len() < 250 && l.malformed[0].ends_with("..."));
}

#[test]
fn rows_decode_without_panics() {
    let l = scan(APPS);
    let fifo = l
        .rows
        .iter()
        .map(|v| policy_row(v).expect("a row"))
        .find(|r| r.policy == "fifo" && r.workload == "YCSB-C")
        .expect("fifo");
    assert_eq!(fifo.runs, 3);
    assert_eq!(
        fifo.hit_ratio,
        Some(Span {
            lo: 0.746,
            hi: 0.75
        })
    );
    assert_eq!(fifo.vs_fifo, Some(1.0));
    let v = serde_json::json!({"bench":"policy-apps","workload":"search","policy":"mru","hit_ratio":null,"throughput":"fast","vs_fifo":1.5,"runs":-1});
    let r = policy_row(&v).expect("decodes");
    assert_eq!((r.hit_ratio, r.throughput, r.runs), (None, None, 1));
    assert_eq!(r.vs_fifo, Some(1.5));
    for bad in [
        serde_json::json!({"bench":"policy-apps","policy":"lru"}),
        serde_json::json!({"bench":"policy-apps","workload":7,"policy":"lru"}),
        serde_json::json!({"workload":"YCSB-C","policy":"lru"}),
        serde_json::json!({"bench":"cluster-policy","row":"median"}),
    ] {
        assert!(policy_row(&bad).is_err(), "{bad}");
    }
    let c = scan(CLUSTER);
    let rows: Vec<_> = c
        .rows
        .iter()
        .map(|v| cluster_row(v).expect("row"))
        .collect();
    assert_eq!(rows.len(), 6);
    assert_eq!(rows[5].policy, "cluster");
    assert_eq!(rows[5].ops_vs_first, Some(1.02));
    assert!(cluster_row(
        &serde_json::json!({"bench":"cluster-policy","row":"mean","policy":"lru"})
    )
    .is_err());
    assert!(cluster_row(&serde_json::json!({"bench":"cluster-policy","row":"round"})).is_err());
    let p = promote(&scan(PROMOTE).results[0]).expect("promote");
    assert_eq!(p.replica_kib(), Some(1024.0));
    assert!((p.mean_ratio().unwrap() - 3710.0 / 3970.0).abs() < 1e-9);
    let p = promote(&serde_json::json!({"bench":"promote","off_mean_ns":0,"on_mean_ns":5}))
        .expect("decodes");
    assert_eq!((p.mean_ratio(), p.replica_kib()), (None, None));
    assert!(promote(&serde_json::json!({"bench":"other"})).is_err());
}

#[test]
fn a_complete_run_has_every_table_and_no_problem() {
    let s = all_ok();
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    assert!(s.notes.is_empty(), "{:?}", s.notes);
    let md = section_md(&s);
    assert!(md.starts_with("## Eviction policies\n"));
    for w in WORKLOADS {
        assert!(
            md.contains(&format!(
                "### {}",
                match *w {
                    "search" => "File search",
                    w => w,
                }
            )),
            "{w}"
        );
    }
    assert!(md.contains("| policy | hit ratio | throughput (lookups/s) | vs FIFO | per CPU-s vs FIFO | cache_ext (published) |"), "{md}");
    assert!(
        md.contains("| fifo (3 runs) | 0.746..0.750 | 1000..1120 | 1.00x | 1.00x |  |"),
        "{md}"
    );
    assert!(md.contains("| lfu | 0.750 | 1010 | 1.01x | 0.99x | LFU +37% throughput (YCSB-C-like zipfian kv) (1.37x) |"), "{md}");
    assert!(
        md.contains("| get-scan | ")
            && md.contains("GET-SCAN policy +70% GET throughput (1.70x) |")
    );
    assert!(md.contains("MRU about 2x throughput (file search) (2.00x) |"));
    assert!(
        md.contains("| lru | 1700 | 9.18 | 89500 | 1.00x | 1.00x | 1660 / 1739 |"),
        "{md}"
    );
    assert!(
        md.contains("| cluster | 1727 | 9.29 | 95000 | 1.02x | 1.01x | 1820 / 1634 |"),
        "{md}"
    );
    assert!(
        md.contains("| mean (median of the rounds) | 3.97 | 3.71 | 0.93x |"),
        "{md}"
    );
    assert!(md.contains("| p50 (median of the rounds) | 3.40 | 3.08 | 0.91x |"));
    assert!(md.contains("256 replica pages on node 2 after the last run (1024 KiB of node memory)"));
    assert!(md.contains("owned pages capped at 512 (2.0 MiB)"), "{md}");
    assert!(
        md.contains("### Multi-node: `webserver` on 2 nodes, cluster-aware vs LRU"),
        "{md}"
    );
    assert!(
        md.contains("Busy: all 2 nodes + the directory (3 instances)"),
        "{md}"
    );
    assert!(md.contains("`tools/bench-policy-apps.sh --no-build --runtime 1 --passes 1 --policies \"fifo lru lfu mru get-scan cluster\"`"), "{md}");
    assert!(md.contains("None: every script succeeded"));
    let machine = serde_json::json!({"nproc":"2","cpu":"x","qemu":"QEMU 8"});
    let full = report_md(&s, &machine, "--policies --quick run T", 99.0);
    assert!(full.contains("Every part succeeded.") && full.contains(&md));
    let j = results_json(&s, &machine, "T", 99.0);
    assert_eq!(j["complete"], true);
    assert_eq!(j["workloads"].as_array().map(Vec::len), Some(12));
    assert_eq!(j["multi_node"].as_array().map(Vec::len), Some(6));
    assert_eq!(j["tiering"]["replica_kib"], 1024.0);
    assert_eq!(j["parts"][0]["result"]["limit"], 512);
    assert_eq!(
        j["cache_ext_published"]["figures"].as_array().map(Vec::len),
        Some(3)
    );
    let fifo = j["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["policy"] == "fifo")
        .unwrap();
    assert_eq!(fifo["hit_ratio"]["min"], 0.746);
}

#[test]
fn failures_and_gaps_are_problems_not_crashes() {
    let failed = Outcome {
        code: Some(1),
        seconds: 3.0,
        text: "boot\nbench-cluster-policy.sh: error: node 2 gave no RESULT\n[n2] garbage\n".into(),
        ..Outcome::default()
    };
    let hung = Outcome {
        code: None,
        timed_out: true,
        seconds: 600.0,
        ..Outcome::default()
    };
    // Apps: one workload's rows cut, one line mangled.
    let apps: String = APPS
        .lines()
        .filter(|l| !(l.contains("\"GET-SCAN\"") && l.contains("\"mru\"")))
        .map(|l| {
            if l.contains("\"search\"") && l.contains("\"lfu\"") {
                "ROW {\"bench\":\"policy-apps\",\"workload\":\"search\","
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let s = Section::collect(
        true,
        vec![
            part(Kind::Apps, ok(&apps)),
            part(Kind::Cluster, failed),
            part(Kind::Promote, hung),
        ],
    );
    let p = s.problems.join("\n");
    assert!(
        p.contains("tools/bench-policy-apps.sh: GET-SCAN mru: no row"),
        "{p}"
    );
    assert!(
        p.contains("tools/bench-policy-apps.sh: search lfu: no row"),
        "{p}"
    );
    assert!(p.contains("tools/bench-cluster-policy.sh failed: exit status 1 (log policies/bench-cluster-policy.log); last words: bench-cluster-policy.sh: error: node 2 gave no RESULT"), "{p}");
    assert!(
        p.contains("tools/bench-promote.sh failed: timed out after 600 s"),
        "{p}"
    );
    assert_eq!(s.problems.len(), 4, "{p}");
    assert!(
        s.notes
            .iter()
            .any(|n| n.contains("skipped line") && n.contains("not JSON")),
        "{:?}",
        s.notes
    );
    let md = section_md(&s);
    assert!(
        md.contains("| mru | n/a | n/a | n/a | n/a | |")
            || md.contains("| mru | n/a | n/a | n/a | n/a |  |"),
        "{md}"
    );
    assert!(md.contains("No figures (see Problems)."));
    assert!(md.contains("### Problems\n\n- tools/"));
    assert_eq!(
        results_json(&s, &serde_json::json!({}), "T", 1.0)["complete"],
        false
    );
    // A run that printed nothing at all.
    let s = Section::collect(
        false,
        vec![
            part(Kind::Apps, ok("")),
            part(Kind::Promote, ok("RESULT {\"bench\":\"promote\"}")),
        ],
    );
    let p = s.problems.join("\n");
    assert!(p.contains("no RESULT line (parameters unknown)"), "{p}");
    assert!(
        p.contains("YCSB-C fifo: no row"),
        "quick list from the arguments: {p}"
    );
    assert!(p.contains("tools/bench-promote.sh: off mean n/a"), "{p}");
    assert_eq!(
        last_words("a\nb error x\nc\n\n").as_deref(),
        Some("b error x")
    );
    assert_eq!(last_words("a\nc\n").as_deref(), Some("c"));
    assert_eq!(last_words(" \n"), None);
}

#[test]
fn published_figures_one_per_workload() {
    assert_eq!(CACHE_EXT.len(), 3);
    for w in WORKLOADS {
        assert!(published::for_workload(w).is_some(), "{w}");
    }
    assert_eq!(
        published::for_workload("YCSB-C").map(|p| (p.policy, p.ratio)),
        Some(("lfu", 1.37))
    );
    assert_eq!(
        published::for_workload("GET-SCAN").map(|p| (p.policy, p.ratio)),
        Some(("get-scan", 1.70))
    );
    assert_eq!(
        published::for_workload("search").map(|p| (p.policy, p.ratio)),
        Some(("mru", 2.0))
    );
    assert_eq!(published::cell("YCSB-C", "mru"), "");
    for p in CACHE_EXT {
        assert!(
            QUICK_POLICIES.split(' ').any(|q| q == p.policy),
            "{} runs in --quick",
            p.policy
        );
    }
}

#[test]
fn the_plan() {
    let q = steps(true);
    assert_eq!(
        q.iter().map(|s| s.kind).collect::<Vec<_>>(),
        [Kind::Apps, Kind::Cluster, Kind::Promote]
    );
    assert!(steps(false)
        .iter()
        .chain(&q)
        .all(|s| s.args[0] == "--no-build" && s.timeout >= Duration::from_secs(300)));
    assert_eq!(q[1].command_line(), "tools/bench-cluster-policy.sh --no-build --nodes 2 --runtime 2 --rounds 1 --size 8m --limit 512");
    assert_eq!(q[2].command_line(), format!("tools/bench-promote.sh --no-build --cxl-latency-ns {CXL_LATENCY_NS} --runtime 1 --rounds 1"));
    assert_eq!(
        steps(false)[2].command_line(),
        "tools/bench-promote.sh --no-build --cxl-latency-ns 250"
    );
    assert_eq!(
        steps(false)[0].command_line(),
        "tools/bench-policy-apps.sh --no-build"
    );
    assert_eq!(Kind::Cluster.log_name(), "bench-cluster-policy.log");
}

#[test]
fn options() {
    let p = |a: &[&str]| parse_args(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    let Ok(Parsed::Run(o)) = p(&["--policies", "--quick", "--out", "/tmp/x"]) else {
        panic!("should parse")
    };
    assert!(o.policies && o.quick && !o.apps);
    for bad in [
        &["--policies", "--apps"][..],
        &["--apps", "--quick", "--policies"],
        &["--policies", "--modes", "strong"],
        &["--policies", "--cxl-latency-ns=100"],
        &["--policies", "--keep-runs"],
        &["--policies=1"],
    ] {
        assert!(p(bad).is_err(), "{bad:?} should be refused");
    }
    assert!(p(&["--policies", "--apps"]).unwrap_err().contains("--apps"));
    assert!(crate::bench::opts::USAGE.contains("--policies [--quick] [--out DIR]"));
}
