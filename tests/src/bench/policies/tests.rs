//! Host tests of the eviction-policy section: sample script output in
//! (testdata/, made by the scripts' own formatting code; promote.txt is
//! the format before `--mode`, promote-strong.txt the current one), rows,
//! problems and markdown out; malformed lines; the options; a script
//! killed on its time limit.

use std::time::Duration;

use super::child::Outcome;
use super::parse::{cluster_row, policy_row, promote, scan, Span};
use super::plan::{steps, Kind, TierMode, CXL_LATENCY_NS, QUICK_POLICIES};
use super::published::{self, CACHE_EXT};
use super::report::{report_md, section_md};
use super::results::results_json;
use super::section::{last_words, Part, Section, WORKLOADS};
use crate::bench::opts::{parse_args, Parsed};

const APPS: &str = include_str!("testdata/policy-apps.txt");
const CLUSTER: &str = include_str!("testdata/cluster-policy.txt");
const PROMOTE: &str = include_str!("testdata/promote.txt");
const PROMOTE_STRONG: &str = include_str!("testdata/promote-strong.txt");

/// The two tiering runs.
const RELAXED: Kind = Kind::Promote(TierMode::Relaxed);
const STRONG: Kind = Kind::Promote(TierMode::Strong);

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
            part(RELAXED, ok(PROMOTE)),
            part(STRONG, ok(PROMOTE_STRONG)),
        ],
    )
}

/// A failed run's outcome: exit status 1 after 3 s, `text` its log.
fn exit_1(text: &str) -> Outcome {
    Outcome {
        code: Some(1),
        seconds: 3.0,
        text: text.into(),
        ..Outcome::default()
    }
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
    assert_eq!(p.mode, "relaxed", "a RESULT from before --mode");
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
    let relaxed = "| relaxed | 3.97 | 3.71 | 0.93x | 3.40 | 3.08 | 0.91x | 256 (1024 KiB) |";
    let strong = "| strong | 3.43 | 3.14 | 0.92x | 3.32 | 3.02 | 0.91x | 256 (1024 KiB) |";
    let (Some(r), Some(st)) = (md.find(relaxed), md.find(strong)) else {
        panic!("a tiering row per mode: {md}")
    };
    assert!(r < st, "relaxed first, as they ran: {md}");
    assert!(md.contains("| mode | mean off (us) | mean on (us) | mean on / off | p50 off (us) | p50 on (us) | p50 on / off | replica pages on node 2 |"), "{md}");
    assert!(md.contains("- **tiering, relaxed mode: CH-R latency, promotion off / on** (`tools/bench-promote.sh --no-build --mode relaxed --cxl-latency-ns 250 --runtime 1 --rounds 1`): 1 directory + 2 nodes, relaxed mode, `--cxl-latency-ns 250`; node 2 reads a 1m file"), "{md}");
    assert!(md.contains("- **tiering, strong mode: CH-R latency, promotion off / on** (`tools/bench-promote.sh --no-build --mode strong --cxl-latency-ns 250 --runtime 1 --rounds 1`): 1 directory + 2 nodes, strong mode (the directory grants each replica"), "{md}");
    assert_eq!(
        md.matches("1 directory + 2 nodes, relaxed mode").count(),
        1,
        "{md}"
    );
    assert!(
        md.contains(
            "| bench-promote.sh (strong mode) | 12 s | ok | `policies/bench-promote-strong.log` |"
        ),
        "{md}"
    );
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
    let tiering = j["tiering"].as_array().expect("a list");
    assert_eq!(tiering.len(), 2, "{tiering:?}");
    assert_eq!(tiering[0]["mode"], "relaxed");
    assert_eq!(tiering[0]["replica_kib"], 1024.0);
    assert_eq!(tiering[0]["off_mean_ns"], 3970.0);
    assert_eq!(tiering[1]["mode"], "strong");
    assert_eq!(tiering[1]["on_p50_ns"], 3020.0);
    assert!(tiering[1]["mean_on_over_off"]
        .as_f64()
        .is_some_and(|r| (r - 3140.0 / 3430.0).abs() < 1e-9));
    assert_eq!(j["parts"].as_array().map(Vec::len), Some(4));
    assert_eq!(j["parts"][0]["result"]["limit"], 512);
    assert_eq!(j["parts"][3]["log"], "policies/bench-promote-strong.log");
    assert_eq!(j["parts"][3]["result"]["mode"], "strong");
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
    let failed =
        exit_1("boot\nbench-cluster-policy.sh: error: node 2 gave no RESULT\n[n2] garbage\n");
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
            part(RELAXED, hung),
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
        p.contains("tools/bench-promote.sh (relaxed mode) failed: timed out after 600 s"),
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
            part(RELAXED, ok("RESULT {\"bench\":\"promote\"}")),
        ],
    );
    let p = s.problems.join("\n");
    assert!(p.contains("no RESULT line (parameters unknown)"), "{p}");
    assert!(
        p.contains("YCSB-C fifo: no row"),
        "quick list from the arguments: {p}"
    );
    assert!(
        p.contains("tools/bench-promote.sh (relaxed mode): off mean n/a"),
        "{p}"
    );
    assert_eq!(
        last_words("a\nb error x\nc\n\n").as_deref(),
        Some("b error x")
    );
    assert_eq!(last_words("a\nc\n").as_deref(), Some("c"));
    assert_eq!(last_words(" \n"), None);
}

#[test]
fn promote_result_mode_from_the_result_or_relaxed() {
    let p = promote(&scan(PROMOTE_STRONG).results[0]).expect("promote");
    assert_eq!(p.mode, "strong");
    assert_eq!(
        (p.off_mean_ns, p.replica_pages),
        (Some(3430.0), Some(256.0))
    );
    let mode = |v: serde_json::Value| promote(&v).map(|p| p.mode);
    assert_eq!(
        mode(serde_json::json!({"bench":"promote","mode":"relaxed"})).as_deref(),
        Ok("relaxed")
    );
    assert_eq!(
        mode(serde_json::json!({"bench":"promote"})).as_deref(),
        Ok("relaxed"),
        "missing: the old scripts' only mode"
    );
    assert_eq!(
        mode(serde_json::json!({"bench":"promote","mode":null})).as_deref(),
        Ok("relaxed")
    );
    for bad in [
        serde_json::json!({"bench":"promote","mode":7}),
        serde_json::json!({"bench":"promote","mode":["strong"]}),
        serde_json::json!({"bench":"promote","mode":{"m":"x".repeat(500)}}),
    ] {
        let e = mode(bad.clone()).expect_err("not a mode");
        assert!(
            e.starts_with("promote RESULT with mode ") && e.len() < 200,
            "{bad}: {e}"
        );
    }
}

#[test]
fn a_failed_strong_run_is_its_own_problem() {
    let s = Section::collect(
        true,
        vec![
            part(Kind::Apps, ok(APPS)),
            part(Kind::Cluster, ok(CLUSTER)),
            part(RELAXED, ok(PROMOTE)),
            part(
                STRONG,
                exit_1("accel: tcg\nbench-promote.sh: error: expected 2 fio results, got 1 (output below)\n[n2] fio: killed\n"),
            ),
        ],
    );
    assert_eq!(
        s.problems,
        ["tools/bench-promote.sh (strong mode) failed: exit status 1 (log policies/bench-promote-strong.log); last words: bench-promote.sh: error: expected 2 fio results, got 1 (output below)"]
    );
    assert!(s.promote_of(TierMode::Relaxed).is_some());
    assert!(s.promote_of(TierMode::Strong).is_none());
    let md = section_md(&s);
    assert!(
        md.contains("| relaxed | 3.97 | 3.71 | 0.93x | 3.40 | 3.08 | 0.91x | 256 (1024 KiB) |"),
        "{md}"
    );
    assert!(
        md.contains("| strong | n/a | n/a | n/a | n/a | n/a | n/a | n/a |"),
        "{md}"
    );
    assert!(
        md.contains("| bench-promote.sh (strong mode) | 3 s | exit status 1 | `policies/bench-promote-strong.log` |"),
        "{md}"
    );
    assert!(!md.contains("No figures"), "{md}");
    let j = results_json(&s, &serde_json::json!({}), "T", 1.0);
    assert_eq!(j["complete"], false);
    let t = j["tiering"].as_array().expect("a list");
    assert_eq!(t.len(), 1, "{t:?}");
    assert_eq!(t[0]["mode"], "relaxed");
    assert_eq!(j["parts"][3]["failure"], "exit status 1");
}

#[test]
fn a_strong_run_without_its_figures_says_which() {
    // The strong run printed the relaxed RESULT (a script that ignored
    // --mode): skipped, so strong has no RESULT.
    let s = Section::collect(
        true,
        vec![part(RELAXED, ok(PROMOTE)), part(STRONG, ok(PROMOTE))],
    );
    assert_eq!(
        s.problems,
        ["tools/bench-promote.sh (strong mode): no RESULT line"]
    );
    assert_eq!(
        s.notes,
        ["tools/bench-promote.sh (strong mode): skipped a RESULT of relaxed mode, not strong"]
    );
    assert_eq!(s.promote.len(), 1);
    assert!(section_md(&s).contains("| strong | n/a | n/a | n/a | n/a | n/a | n/a | n/a |"));
    // A strong RESULT with one figure: the others are missing, for strong
    // only.
    let s = Section::collect(
        true,
        vec![
            part(RELAXED, ok(PROMOTE)),
            part(
                STRONG,
                ok("RESULT {\"bench\":\"promote\",\"mode\":\"strong\",\"off_mean_ns\":3000}"),
            ),
        ],
    );
    assert_eq!(
        s.problems,
        [
            "tools/bench-promote.sh (strong mode): on mean n/a",
            "tools/bench-promote.sh (strong mode): off p50 n/a",
            "tools/bench-promote.sh (strong mode): on p50 n/a",
            "tools/bench-promote.sh (strong mode): replica pages n/a",
        ]
    );
    let md = section_md(&s);
    assert!(
        md.contains("| strong | 3.00 | n/a | n/a | n/a | n/a | n/a | n/a |"),
        "{md}"
    );
    let j = results_json(&s, &serde_json::json!({}), "T", 1.0);
    assert_eq!(j["tiering"][1]["mode"], "strong");
    assert_eq!(j["tiering"][1]["off_mean_ns"], 3000.0);
    assert!(j["tiering"][1]["on_mean_ns"].is_null());
    // Neither run gave figures: no table.
    let s = Section::collect(
        true,
        vec![part(RELAXED, exit_1("")), part(STRONG, exit_1(""))],
    );
    assert_eq!(s.problems.len(), 2, "{:?}", s.problems);
    assert!(s.problems[0].starts_with("tools/bench-promote.sh (relaxed mode) failed"));
    assert!(s.problems[1].starts_with("tools/bench-promote.sh (strong mode) failed"));
    assert!(section_md(&s).contains("No figures (see Problems)."));
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
    let f = steps(false);
    for plan in [&q, &f] {
        assert_eq!(
            plan.iter().map(|s| s.kind).collect::<Vec<_>>(),
            [Kind::Apps, Kind::Cluster, RELAXED, STRONG]
        );
        assert_eq!(
            plan.iter().map(|s| s.kind.log_name()).collect::<Vec<_>>(),
            [
                "bench-policy-apps.log",
                "bench-cluster-policy.log",
                "bench-promote-relaxed.log",
                "bench-promote-strong.log"
            ],
            "a log per step"
        );
    }
    assert!(f
        .iter()
        .chain(&q)
        .all(|s| s.args[0] == "--no-build" && s.timeout >= Duration::from_secs(300)));
    assert_eq!(q[1].command_line(), "tools/bench-cluster-policy.sh --no-build --nodes 2 --runtime 2 --rounds 1 --size 8m --limit 512");
    for (i, mode) in [(2, "relaxed"), (3, "strong")] {
        assert_eq!(
            q[i].command_line(),
            format!("tools/bench-promote.sh --no-build --mode {mode} --cxl-latency-ns {CXL_LATENCY_NS} --runtime 1 --rounds 1")
        );
        assert_eq!(
            f[i].command_line(),
            format!("tools/bench-promote.sh --no-build --mode {mode} --cxl-latency-ns 250")
        );
        assert_eq!(
            (q[i].timeout.as_secs(), f[i].timeout.as_secs()),
            (600, 1200)
        );
    }
    assert_eq!(f[0].command_line(), "tools/bench-policy-apps.sh --no-build");
    assert_eq!(Kind::Cluster.label(), "bench-cluster-policy.sh");
    assert_eq!(STRONG.label(), "bench-promote.sh (strong mode)");
    assert_eq!(STRONG.script(), "bench-promote.sh");
    assert_ne!(RELAXED.title(), STRONG.title());
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
    assert!(crate::bench::opts::help_text().contains("--policies [--quick] [--out DIR]"));
}
