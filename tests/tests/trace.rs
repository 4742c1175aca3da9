//! Integration test of the protocol timeline: a 2-node strong cluster
//! records its protocol events (`trace on` on the directory's console and
//! both nodes' shells), node 2 reads a page node 1 brought in (a remote
//! read), and `qemu-run.sh trace` collects every instance's dump and merges
//! them into Chrome trace-event JSON. The file is checked against the
//! format, and the remote read's events for one request tag are in causal
//! order on the merged time axis: node request -> directory serve ->
//! (disk) -> directory reply -> node answer -> install. Then node 1 reads
//! a file larger than its pool (a 16 MiB region): a second timeline shows
//! its eviction sweeps. Before the reads, `bench trace 20000` (the
//! timeline's cost) prints its numbers on node 1.
//!
//! ```text
//! cargo test -p onecopy-tests --test trace -- --test-threads=1
//! ```

use std::time::Duration;

use onecopy_tests::trace::{check_schema, DIR_PID};
use onecopy_tests::{qemu_run, with_cluster, ClusterOpts, Console, Error, Instance};
use serde_json::Value;

const CTL: &str = env!("CARGO_BIN_EXE_onecopy-ctl");

fn fail(msg: String) -> Error {
    Error::Usage(msg)
}

/// The start (`ts`) and end of the first event of `pid` named `name`.
fn span(ev: &[Value], pid: u32, name: &str) -> Option<(f64, f64)> {
    ev.iter()
        .find(|e| e["pid"].as_u64() == Some(u64::from(pid)) && e["name"] == name)
        .map(|e| {
            let ts = e["ts"].as_f64().unwrap_or(-1.0);
            (ts, ts + e["dur"].as_f64().unwrap_or(0.0))
        })
}

/// `bench trace`'s line: the count, and ns per call of each loop and the
/// differences, each a number (the differences signed).
fn check_bench_trace(text: &str) -> Result<(), String> {
    let line = text
        .lines()
        .find(|l| l.starts_with("trace record: n=20000 x "))
        .ok_or("no `trace record: n=20000 x` line")?;
    for key in ["baseline", "off", "on", "off-baseline", "on-baseline"] {
        let value = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{key}=")))
            .ok_or(format!("no {key}="))?;
        let signed = key.ends_with("-baseline");
        let digits = if signed {
            value
                .strip_prefix(['+', '-'])
                .ok_or(format!("{key}={value}: no sign"))?
        } else {
            value
        };
        let (whole, frac) = digits
            .split_once('.')
            .ok_or(format!("{key}={value}: not N.NN"))?;
        if whole.is_empty()
            || frac.len() != 2
            || !whole
                .chars()
                .chain(frac.chars())
                .all(|c| c.is_ascii_digit())
        {
            return Err(format!("{key}={value}: not N.NN"));
        }
    }
    Ok(())
}

#[test]
fn remote_read_timeline_orders_node_directory_disk_node() {
    with_cluster(
        ClusterOpts::new("trace")
            .ctl(CTL)
            .nodes(2)
            .mode("strong")
            .shm_mb(16),
        |c| {
            // The directory's console takes the trace commands too.
            let dir_sock = c.run().socket_path(Instance::Dir);
            let mut dir = Console::connect(&dir_sock, 0, Duration::from_secs(10))?;
            dir.exec("trace on", Duration::from_secs(10))?
                .into_result()?;
            drop(dir);
            c.exec_ok(1, "trace on")?;
            c.exec_ok(2, "trace on")?;
            // The cost microbenchmark prints its numbers; it leaves
            // recording on (the reads below must still be recorded on
            // node 1) and clears the benchmark's events.
            let bench = c.exec_ok(1, "bench trace 20000")?.text();
            check_bench_trace(&bench).map_err(|e| fail(format!("bench trace: {e}:\n{bench}")))?;
            println!("{bench}");
            // Node 1 brings the page in from the disk; node 2 reads it from
            // node 1's copy.
            c.exec_ok(1, "cat /hello.txt")?;
            c.exec_ok(2, "cat /hello.txt")?;
            c.release_console(1);
            c.release_console(2);
            let out_file = c.run_dir().join("trace.json");
            let run_dir = c.run_dir().to_string_lossy().into_owned();
            let out_path = out_file.to_string_lossy().into_owned();
            let out = qemu_run(
                &["trace", "--run-dir", &run_dir, "-o", &out_path],
                c.ctl(),
                Duration::from_secs(120),
            )?;
            if out.code != Some(0) {
                return Err(fail(format!("qemu-run.sh trace failed:\n{}", out.text())));
            }
            let stdout = out.stdout_text();
            // The skew check: one line per instance.
            for who in ["dir:", "n1:", "n2:"] {
                if !stdout
                    .lines()
                    .any(|l| l.starts_with(who) && l.contains("TSC offset"))
                {
                    return Err(fail(format!("no offset line for {who}:\n{}", out.text())));
                }
            }
            println!("{stdout}");
            let text = std::fs::read_to_string(&out_file)
                .map_err(|e| fail(format!("{}: {e}", out_file.display())))?;
            let v: Value = serde_json::from_str(&text)
                .map_err(|e| fail(format!("trace.json is not JSON: {e}")))?;
            check_schema(&v).map_err(|e| fail(format!("trace.json: {e}")))?;
            let ev = v["traceEvents"].as_array().cloned().unwrap_or_default();
            // Node 1's read missed to the disk, node 2's was a remote read:
            // both show the order, node 2's without the disk.
            let mut checked = Vec::new();
            for node in [1u32, 2] {
                // The request spans of this node whose serving the
                // directory recorded.
                let reqs: Vec<(u64, u64, f64, f64)> = ev
                    .iter()
                    .filter(|e| e["pid"].as_u64() == Some(u64::from(node)) && e["ph"] == "X")
                    .filter_map(|e| {
                        let tag = e["args"]["tag"].as_u64()?;
                        let key = e["args"]["key"].as_u64().filter(|k| *k != 0)?;
                        let name = e["name"].as_str()?;
                        (name == format!("request tag {tag}")).then(|| {
                            let ts = e["ts"].as_f64().unwrap_or(-1.0);
                            (tag, key, ts, ts + e["dur"].as_f64().unwrap_or(0.0))
                        })
                    })
                    .collect();
                for (tag, key, req_start, req_end) in reqs {
                    let Some((serve_start, serve_end)) =
                        span(&ev, DIR_PID, &format!("serve n{node} tag {tag}"))
                    else {
                        continue;
                    };
                    let disk = span(&ev, DIR_PID, &format!("disk read n{node} tag {tag}"));
                    // The install of this request's page: the first of its
                    // key after its answer on this node.
                    let install = ev
                        .iter()
                        .filter(|e| {
                            e["pid"].as_u64() == Some(u64::from(node))
                                && e["name"] == "install"
                                && e["args"]["key"].as_u64() == Some(key)
                        })
                        .filter_map(|e| e["ts"].as_f64())
                        .filter(|t| *t >= req_end)
                        .fold(None, |m: Option<f64>, t| Some(m.map_or(t, |m| m.min(t))));
                    let Some(install) = install else {
                        continue; // a page request that installs nothing
                    };
                    let mut order = vec![("node request", req_start), ("dir serve", serve_start)];
                    if let Some((ds, de)) = disk {
                        order.push(("disk start", ds));
                        order.push(("disk done", de));
                    }
                    order.push(("dir reply", serve_end));
                    order.push(("node answer", req_end));
                    order.push(("node install", install));
                    if order.windows(2).any(|w| w[0].1 > w[1].1) {
                        return Err(fail(format!(
                            "n{node} tag {tag}: out of order on the merged axis: {order:?}\n{}",
                            stdout
                        )));
                    }
                    checked.push((node, tag, disk.is_some()));
                }
            }
            if !checked.iter().any(|(n, _, disk)| *n == 1 && *disk) {
                return Err(fail(format!(
                    "no request of n1 with a disk read in order: {checked:?}\n{text}"
                )));
            }
            if !checked.iter().any(|(n, _, disk)| *n == 2 && !*disk) {
                return Err(fail(format!(
                    "no remote read of n2 (served without the disk) in order: {checked:?}\n{text}"
                )));
            }
            // Flow arrows tie the hops together.
            let flows = ev.iter().filter(|e| e["ph"] == "s").count();
            if flows < 4 {
                return Err(fail(format!("only {flows} flow arrows")));
            }
            println!("checked in order: {checked:?}");

            // A file larger than node 1's pool (about 7.5 MiB here), read
            // from the disk: its reads evict.
            c.exec_ok(1, "fill /big 12m")?;
            c.exec_ok(1, "cache drop")?;
            c.exec_ok(1, "trace clear")?;
            c.exec_ok(1, "sum /big")?;
            c.release_console(1);
            c.release_console(2);
            let evict_file = c.run_dir().join("evict.json");
            let evict_path = evict_file.to_string_lossy().into_owned();
            let out = qemu_run(
                &["trace", "--run-dir", &run_dir, "-o", &evict_path],
                c.ctl(),
                Duration::from_secs(120),
            )?;
            if out.code != Some(0) {
                return Err(fail(format!("qemu-run.sh trace failed:\n{}", out.text())));
            }
            let text = std::fs::read_to_string(&evict_file)
                .map_err(|e| fail(format!("{}: {e}", evict_file.display())))?;
            let v: Value = serde_json::from_str(&text)
                .map_err(|e| fail(format!("evict.json is not JSON: {e}")))?;
            check_schema(&v).map_err(|e| fail(format!("evict.json: {e}")))?;
            let freed: u64 = (v["traceEvents"].as_array().into_iter().flatten())
                .filter(|e| {
                    e["pid"].as_u64() == Some(1)
                        && e["ph"] == "X"
                        && e["name"]
                            .as_str()
                            .is_some_and(|n| n.starts_with("eviction sweep"))
                })
                .filter_map(|e| e["args"]["freed"].as_u64())
                .sum();
            if freed == 0 {
                return Err(fail(format!(
                    "no eviction sweep of n1 freed a page while it read 12 MiB:\n{}",
                    out.text()
                )));
            }
            println!("eviction sweeps of n1 freed {freed} pages");
            Ok(())
        },
    );
}
