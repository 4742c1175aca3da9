//! Smoke test of `onecopy-bench --quick`: every expected figure is
//! produced and is a number (or n/a where the mode has no such operation),
//! and results.json, report.md and the PNG charts exist. It boots twelve
//! clusters one after the other, three per mode (strong, relaxed, private,
//! net; about 80 s on 2 cores with TCG), so it is `#[ignore]`d and runs
//! only when asked for (`tests/run.sh` does):
//!
//! ```text
//! cargo build --release -p onecopy-kernel --target x86_64-unknown-none
//! cargo build --release -p flatfs --bins
//! cargo test -p onecopy-tests --test bench -- --ignored --nocapture
//! ```
//!
//! It checks that every figure is produced, never how fast anything is.
//! A second test runs the application study quick (`--apps --quick
//! --modes private,strong,net`: six clusters, about 3 minutes).
//! A third runs the eviction-policy section quick (`--policies --quick`:
//! four clusters, bench-promote.sh in relaxed and in strong mode; about
//! 90 s). A fourth interrupts a run with SIGINT once its first cluster is
//! up: nothing of that cluster may be left, and the report must be there,
//! marked partial (about 40 s).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use onecopy_tests::{qemu_run, run_with_timeout, unique_run_dir};
use serde_json::Value;

const BENCH: &str = env!("CARGO_BIN_EXE_onecopy-bench");
const CTL: &str = env!("CARGO_BIN_EXE_onecopy-ctl");

fn is_png(p: &Path) -> bool {
    fs::read(p).is_ok_and(|b| b.len() > 100 && b.starts_with(b"\x89PNG\r\n\x1a\n"))
}

/// Runs `onecopy-bench ARGS --out OUT` within `limit` and returns its
/// results.json, after checking that it ended in time with exit status 0
/// and that the run is complete (no problems listed). On a failure the
/// message carries its stderr and `more(out)` (e.g. the scripts' logs).
fn run_bench(args: &[&str], out: &Path, limit: Duration, more: impl Fn(&Path) -> String) -> Value {
    let what = format!("onecopy-bench {}", args.join(" "));
    let mut cmd = Command::new(BENCH);
    cmd.args(args).arg("--out").arg(out).env("ONECOPY_CTL", CTL);
    let o = run_with_timeout(cmd, limit).expect("run onecopy-bench");
    assert!(!o.timed_out, "{what} timed out:\n{}", o.text());
    assert_eq!(
        o.code,
        Some(0),
        "{what} failed (results in {}):\n{}\n{}",
        out.display(),
        o.stderr_text(),
        more(out)
    );
    let json: Value =
        serde_json::from_str(&fs::read_to_string(out.join("results.json")).expect("results.json"))
            .expect("results.json is JSON");
    assert_eq!(
        json["complete"],
        Value::Bool(true),
        "problems: {}",
        json["problems"]
    );
    // Every report says where it comes from.
    let prov = &json["provenance"];
    let commit = prov["commit"].as_str().unwrap_or("");
    assert!(
        commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit()),
        "{what}: provenance commit {commit:?}"
    );
    assert!(prov["dirty"].is_boolean(), "{what}: provenance dirty");
    assert!(
        prov["command"]
            .as_str()
            .is_some_and(|c| c.contains(args[0])),
        "{what}: provenance command {}",
        prov["command"]
    );
    for k in [
        "load_start",
        "load_end",
        "date_utc",
        "date_end_utc",
        "accel",
    ] {
        assert!(!prov[k].is_null(), "{what}: provenance lacks {k}");
    }
    assert!(
        prov["host"]["qemu"]
            .as_str()
            .is_some_and(|q| q.contains("QEMU")),
        "{what}: provenance QEMU version {}",
        prov["host"]["qemu"]
    );
    let md = fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(
        md.contains("## Provenance"),
        "{what}: report.md lacks its provenance"
    );
    assert!(md.contains(commit), "{what}: report.md lacks the commit");
    let params: Value =
        serde_json::from_str(&fs::read_to_string(out.join("params.json")).expect("params.json"))
            .expect("params.json is JSON");
    assert_eq!(params["commit"], commit, "{what}: params.json");
    json
}

#[test]
#[ignore = "boots 12 QEMU clusters (about 2 minutes): run with -- --ignored, as tests/run.sh does"]
fn quick_bench_produces_every_figure() {
    let out = unique_run_dir("bench-smoke").expect("results folder");
    let json = run_bench(&["--quick"], &out, Duration::from_secs(15 * 60), |_| {
        String::new()
    });
    assert_eq!(json["quick"], Value::Bool(true));
    let figures = json["figures"].as_array().expect("figures");
    assert_eq!(
        json["modes"],
        serde_json::json!(["strong", "relaxed", "private", "net"]),
        "default modes"
    );
    // host ping-pong, host page directory (5 operations + 7 batch sizes),
    // per mode: 42 fio (7 workloads, read-bw-ra-off among them, x 2
    // engines x 3 scenarios), 4 bench read, 3 bench inv, ring, rpc, 7
    // bench dir batch sizes, 3 larger-than-pool passes.
    assert_eq!(
        figures.len(),
        1 + 12 + 4 * (42 + 4 + 3 + 2 + 7 + 3),
        "figure count"
    );
    for f in figures {
        let id = f["id"].as_str().expect("id");
        match f["status"].as_str() {
            Some("ok") => assert!(
                f["value"].as_f64().is_some_and(f64::is_finite),
                "{id}: value is not a number: {}",
                f["value"]
            ),
            Some("n/a") => {
                assert!(f["value"].is_null(), "{id}: n/a with a value");
                assert!(
                    f["error"].as_str().is_some_and(|e| !e.is_empty()),
                    "{id}: n/a without the reason"
                );
            }
            other => panic!("{id}: status {other:?}: {}", f["error"]),
        }
        if f["mode"] == "net" && f["status"] == "ok" {
            assert!(
                f["ratio_vs_private"].as_f64().is_some_and(f64::is_finite),
                "{id}: no ratio vs private"
            );
        }
        if f["workload"] == "bench rpc" {
            let want = if f["mode"] == "net" { "tcp" } else { "ring" };
            assert_eq!(f["params"]["transport"], want, "{id}: transport");
        }
        if f["group"] == "fio" && f["status"] == "ok" {
            assert!(f["raw"]["read"].is_object(), "{id}: RESULT json kept");
            assert!(
                f["busy_instances"].as_u64().is_some(),
                "{id}: busy instances"
            );
        }
    }
    let report = fs::read_to_string(out.join("report.md")).expect("report.md");
    for section in [
        "## Machine",
        "## Headline ratios",
        "## fio: latency, bandwidth, IOPS",
        "## Fig. 6b/7b: sequential read bandwidth, readahead on and off",
        "## Reclaim cost",
        "## Directory microbenchmarks",
        "## Page directory: host vs in-guest",
    ] {
        assert!(report.contains(section), "report.md lacks {section}");
    }
    // net beside the others in the headline table and the tables.
    for needle in [
        "strong vs net",
        "net vs private",
        "| bench rpc | empty request round trip over tcp | net |",
        "| bench rpc | empty request round trip over ring | private |",
        "over TCP (net)",
    ] {
        assert!(report.contains(needle), "report.md lacks '{needle}'");
    }
    let heads = json["headlines"].as_array().expect("headlines");
    for (mode, base) in [("strong", "net"), ("strong", "private"), ("net", "private")] {
        assert!(
            heads.iter().any(|h| h["mode"] == mode
                && h["baseline"] == base
                && h["key"] == "chr-bandwidth"
                && h["ratio"].as_f64().is_some()),
            "no CH-R bandwidth headline {mode} vs {base}"
        );
    }
    let plots = json["plots"].as_array().expect("plots");
    assert_eq!(
        plots.len(),
        18,
        "headline ratios + 14 fio charts + 2 reclaim charts + round trips"
    );
    for p in plots {
        let p = out.join(p.as_str().expect("plot name"));
        assert!(is_png(&p), "{} is not a PNG", p.display());
    }
    let _ = fs::remove_dir_all(&out);
}

/// `onecopy-bench --apps --quick --modes private,strong,net --dilation
/// auto`: one cluster per (mode, N = 1, 2), every app on all nodes at
/// once (about 3 minutes on 2 cores; strong at N = 2 is where webserver's
/// logs once ran out of extents), readahead on (the default) and the
/// testbed calibrated at the first boot, a warm-up of 1 s before each
/// measured phase. Checks that every cell has a figure, normalized to
/// single-node private, with each node's RESULT (warm-up, directory
/// counters, miss timers) and CPU share kept, that the report has the
/// Fig. 10 table and chart, the one-node section with the time per miss
/// by phase, and states the warm-up and the measured dilation; never how
/// fast.
#[test]
#[ignore = "boots 6 QEMU clusters (about 3 minutes): run with -- --ignored, as tests/run.sh does"]
fn quick_apps_produce_every_cell() {
    let out = unique_run_dir("bench-apps-smoke").expect("results folder");
    let json = run_bench(
        &[
            "--apps",
            "--quick",
            "--modes",
            "private,strong,net",
            "--dilation",
            "auto",
        ],
        &out,
        Duration::from_secs(10 * 60),
        |_| String::new(),
    );
    assert_eq!(json["plan"]["nodes"], serde_json::json!([1, 2]));
    assert_eq!(json["plan"]["cache_pages_per_node"], 2048);
    let cells = json["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 6 * 3 * 2, "6 apps x 3 modes x 2 node counts");
    for c in cells {
        let what = format!("{} {} N={}", c["app"], c["mode"], c["nodes"]);
        let n = c["nodes"].as_u64().expect("nodes") as usize;
        assert!(c["error"].is_null(), "{what}: {}", c["error"]);
        assert_eq!(c["per_node"].as_array().map(Vec::len), Some(n), "{what}");
        assert_eq!(c["results"].as_array().map(Vec::len), Some(n), "{what}");
        assert_eq!(
            c["cpu_share_nodes"].as_array().map(Vec::len),
            Some(n),
            "{what}"
        );
        assert!(
            c["normalized_to_1node_private"]
                .as_f64()
                .is_some_and(|v| v.is_finite() && v > 0.0),
            "{what}: normalized"
        );
        assert!(
            c["vs_private_same_n"].as_f64().is_some(),
            "{what}: vs private"
        );
        if c["mode"] == "private" && c["nodes"] == 1 {
            assert_eq!(
                c["normalized_to_1node_private"].as_f64(),
                Some(1.0),
                "{what}"
            );
        }
        for r in c["results"].as_array().expect("results") {
            assert_eq!(r["app"], c["app"], "{what}");
            assert_eq!(r["mode"], c["mode"], "{what}");
            // The warm-up ran, and the figures cover the measured phase.
            assert_eq!(r["warmup_ns"].as_u64(), Some(1_000_000_000), "{what}");
            assert!(r["dir"].is_object(), "{what}: directory counters");
            assert!(
                r["miss_time_ns"]["round_trips"].as_u64().is_some(),
                "{what}: miss timers"
            );
        }
    }
    // infer: node K decodes sequences 0.. with its own seed K, so equal
    // (seed, sequence count) means equal tokens if every cluster read
    // the same weights, in both modes and at both N.
    let mut seen: std::collections::HashMap<(u64, u64), String> = Default::default();
    for c in cells.iter().filter(|c| c["app"] == "infer") {
        for r in c["results"].as_array().expect("results") {
            let key = (
                r["seed"].as_u64().expect("seed"),
                r["sequences"].as_u64().expect("sequences"),
            );
            let sum = r["checksum"].as_str().expect("checksum").to_string();
            let first = seen.entry(key).or_insert_with(|| sum.clone());
            assert_eq!(
                *first, sum,
                "infer {key:?}: tokens differ in {} N={}",
                c["mode"], c["nodes"]
            );
        }
    }
    let report = fs::read_to_string(out.join("report.md")).expect("report.md");
    for needle in [
        "## Fig. 10: per-node throughput normalized to single-node `private`",
        "## Ratio vs `private` at the same N",
        "## CPU share over each run",
        "## DPC's published numbers",
        "## Goals, judged on this run",
        "Cache capacity per node, the same in every mode: 2048 pages",
        "| **geomean** (DPC's five) |",
        "(storage latency x D, rates / D; `qemu-run.sh --dilation`)",
        "**a warm-up of 1 s before the measured phase**",
        "readahead on in every mode",
        "## One node: where the time goes (N = 1)",
        "**Time per miss, by phase (us)**",
    ] {
        assert!(report.contains(needle), "report.md lacks '{needle}'");
    }
    // `auto` became the factor measured at the first boot.
    assert!(
        !report.contains("time dilation auto"),
        "the dilation was never measured: report.md still says auto"
    );
    assert!(is_png(&out.join("apps-fig10.png")), "no Fig. 10 chart");
    let _ = fs::remove_dir_all(&out);
}

/// `onecopy-bench --policies --quick`: the eviction-policy section's
/// three scripts (cache_ext's workloads under six policies on one node,
/// the webserver on two nodes with `lru` and `cluster`, promotion off and
/// on in relaxed and then in strong mode; about 90 s). Checks that all
/// four runs succeeded, every workload has a row per policy with its hit
/// ratio and ratio to FIFO, the multi-node medians are there, each mode
/// has its tiering figures (replicas made) in results.json and its row
/// in report.md, and report.md has the section; never how fast anything
/// is.
#[test]
#[ignore = "boots 4 QEMU clusters (about 90 s): run with -- --ignored, as tests/run.sh does"]
fn quick_policies_produce_every_row() {
    use onecopy_tests::bench::policies::plan::QUICK_POLICIES;
    let out = unique_run_dir("bench-policies-smoke").expect("results folder");
    // On a failure, every script's log.
    let logs = |out: &Path| {
        fs::read_dir(out.join("policies"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| {
                let text = fs::read_to_string(e.path()).unwrap_or_default();
                format!("--- {}\n{text}", e.path().display())
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let json = run_bench(
        &["--policies", "--quick"],
        &out,
        Duration::from_secs(10 * 60),
        logs,
    );
    let parts = json["parts"].as_array().expect("parts");
    assert_eq!(parts.len(), 4, "three scripts, bench-promote.sh twice");
    for p in parts {
        assert_eq!(
            p["ok"],
            Value::Bool(true),
            "{}: {}",
            p["command"],
            p["failure"]
        );
    }
    // The last two: bench-promote.sh, relaxed then strong mode.
    for (p, mode) in parts[2..].iter().zip(["relaxed", "strong"]) {
        assert_eq!(p["script"], "tools/bench-promote.sh");
        assert!(
            p["command"]
                .as_str()
                .is_some_and(|c| c.contains(&format!(" --mode {mode} "))),
            "{mode}: {}",
            p["command"]
        );
        assert_eq!(p["log"], format!("policies/bench-promote-{mode}.log"));
        assert_eq!(p["result"]["mode"], mode, "the script ran in {mode} mode");
    }
    let policies: Vec<&str> = QUICK_POLICIES.split_whitespace().collect();
    let rows = json["workloads"].as_array().expect("workloads");
    for w in ["YCSB-C", "GET-SCAN", "search"] {
        for p in &policies {
            let row = rows
                .iter()
                .find(|r| r["workload"] == w && r["policy"] == *p)
                .unwrap_or_else(|| panic!("no {w} row for {p}"));
            let hit = &row["hit_ratio"];
            assert!(
                hit.as_f64().is_some() || hit["min"].as_f64().is_some(),
                "{w} {p}: hit ratio {hit}"
            );
            assert!(
                row["vs_fifo"].as_f64().is_some_and(|v| v > 0.0),
                "{w} {p}: ratio to FIFO {}",
                row["vs_fifo"]
            );
        }
    }
    let multi = json["multi_node"].as_array().expect("multi_node");
    for p in ["lru", "cluster"] {
        assert!(
            multi.iter().any(|r| r["row"] == "median"
                && r["policy"] == p
                && r["ops_per_s"].as_f64().is_some_and(|v| v > 0.0)),
            "no multi-node median for {p}"
        );
    }
    let tiering = json["tiering"].as_array().expect("tiering: a list");
    let modes: Vec<&Value> = tiering.iter().map(|t| &t["mode"]).collect();
    assert_eq!(modes, ["relaxed", "strong"], "one tiering entry per mode");
    for t in tiering {
        let mode = &t["mode"];
        for k in ["off_mean_ns", "on_mean_ns", "mean_on_over_off"] {
            assert!(
                t[k].as_f64().is_some_and(|v| v > 0.0),
                "tiering {mode} {k}: {}",
                t[k]
            );
        }
        assert!(
            t["replica_pages"].as_f64().is_some_and(|n| n > 0.0),
            "promotion made no replicas in {mode} mode: {t}"
        );
    }
    let report = fs::read_to_string(out.join("report.md")).expect("report.md");
    // The tiering table: one row per mode, in the order they ran, with
    // every figure.
    let tiers = report
        .split("### Tiering")
        .nth(1)
        .and_then(|t| t.split("\n### ").next())
        .expect("a tiering section");
    let rows: Vec<&str> = tiers
        .lines()
        .filter(|l| l.starts_with("| relaxed |") || l.starts_with("| strong |"))
        .collect();
    assert_eq!(rows.len(), 2, "a tiering row per mode:\n{tiers}");
    assert!(
        rows[0].starts_with("| relaxed |") && rows[1].starts_with("| strong |"),
        "{tiers}"
    );
    for r in rows {
        assert!(!r.contains("n/a"), "a tiering figure missing: {r}");
    }
    for needle in [
        "## Eviction policies",
        "### YCSB-C",
        "### GET-SCAN",
        "### File search",
        "### Multi-node",
        "### Tiering",
        // Each tiering run's parameters name its mode (the multi-node
        // line's "N nodes, MODE mode;" differs).
        "--mode relaxed --cxl-latency-ns 250 --runtime 1 --rounds 1`): 1 directory + 2 nodes, relaxed mode, `--cxl-latency-ns",
        "--mode strong --cxl-latency-ns 250 --runtime 1 --rounds 1`): 1 directory + 2 nodes, strong mode (",
        "### cache_ext's published figures",
    ] {
        assert!(report.contains(needle), "report.md lacks '{needle}'");
    }
    let _ = fs::remove_dir_all(&out);
}

/// Pids of live processes (not this one) whose command line mentions
/// `needle`.
fn processes_mentioning(needle: &str) -> Vec<u32> {
    let me = std::process::id();
    let mut pids = Vec::new();
    for e in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me || !onecopy_tests::run::pid_alive(pid) {
            continue;
        }
        if let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) {
            if String::from_utf8_lossy(&cmdline).contains(needle) {
                pids.push(pid);
            }
        }
    }
    pids
}

/// Every serial log of a run dir, for a failure message.
fn run_logs(run_dir: &Path) -> String {
    fs::read_dir(run_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
        .map(|e| {
            let text = fs::read_to_string(e.path()).unwrap_or_default();
            format!("--- {}\n{text}", e.path().display())
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// SIGINT to `onecopy-bench` once its first cluster is up: it exits 130
/// within a minute, no process of that cluster's run dir is left (QEMU,
/// the launcher, the watchdog), and the report is written and marked
/// partial, naming the step it was in.
#[test]
#[ignore = "boots a QEMU cluster (about 40 s): run with -- --ignored, as tests/run.sh does"]
fn sigint_stops_the_clusters_and_leaves_a_partial_report() {
    let out = unique_run_dir("bench-sigint").expect("results folder");
    let scratch = unique_run_dir("bench-sigint-log").expect("log folder");
    fs::create_dir_all(&scratch).expect("log folder");
    let err_path = scratch.join("stderr.txt");
    let err = fs::File::create(&err_path).expect("stderr file");
    let mut child = Command::new(BENCH)
        .args(["--quick", "--modes", "strong", "--out"])
        .arg(&out)
        .env("ONECOPY_CTL", CTL)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(err))
        .spawn()
        .expect("start onecopy-bench");
    // The first cluster's run dir, once it is up.
    let marker = "strong-fio up: run dir ";
    let deadline = Instant::now() + Duration::from_secs(240);
    let run_dir: Option<PathBuf> = loop {
        let text = fs::read_to_string(&err_path).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| l.contains(marker)) {
            let dir = line.split(marker).nth(1).unwrap_or("").trim();
            break Some(PathBuf::from(dir));
        }
        if Instant::now() >= deadline || child.try_wait().ok().flatten().is_some() {
            break None;
        }
        thread::sleep(Duration::from_millis(100));
    };
    // Let it be in the middle of a command.
    thread::sleep(Duration::from_secs(1));
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break Some(st);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        thread::sleep(Duration::from_millis(100));
    };
    let stderr = fs::read_to_string(&err_path).unwrap_or_default();
    // What the run left, looked at before this test cleans up after it.
    let left = run_dir
        .as_ref()
        .map(|d| processes_mentioning(&format!("{}/", d.display())))
        .unwrap_or_default();
    let logs = run_dir.as_deref().map(run_logs).unwrap_or_default();
    if let Some(d) = &run_dir {
        let _ = qemu_run(
            &["stop", "--run-dir", &d.to_string_lossy()],
            Path::new(CTL),
            Duration::from_secs(60),
        );
    }
    let run_dir = run_dir.unwrap_or_else(|| {
        panic!("the first cluster did not come up (no '{marker}' line):\n{stderr}")
    });
    let status = status.unwrap_or_else(|| {
        panic!("onecopy-bench did not exit within 120 s of SIGINT:\n{stderr}\n{logs}")
    });
    assert_eq!(
        status.code(),
        Some(130),
        "exit status after SIGINT:\n{stderr}\n{logs}"
    );
    assert!(
        left.is_empty(),
        "processes of {} left after onecopy-bench exited: {left:?}\n{stderr}\n{logs}",
        run_dir.display()
    );
    let json: Value = fs::read_to_string(out.join("results.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| panic!("no readable results.json after SIGINT:\n{stderr}"));
    assert_eq!(json["complete"], Value::Bool(false), "{stderr}");
    assert_eq!(json["partial"]["signal"], "SIGINT", "{stderr}");
    let at = json["partial"]["interrupted_at"].as_str().unwrap_or("");
    assert!(
        at.starts_with("fio ") && at.ends_with(", mode strong, N=2"),
        "interrupted at {at:?}:\n{stderr}"
    );
    let md = fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(
        md.contains(&format!("partial: interrupted at {at}")),
        "report.md is not marked partial:\n{md}"
    );
    assert!(
        stderr
            .contains("onecopy-bench: step 3/18: fio read-lat/libaio, mode strong, N=2; elapsed "),
        "no progress line for the first fio step:\n{stderr}"
    );
    let _ = fs::remove_dir_all(&out);
    let _ = fs::remove_dir_all(&scratch);
}
