//! Integration tests of the application workloads: two
//! nodes run the same `app` at the same time over one dataset built on
//! the host (`mkfs --dataset`), in strong mode.
//!
//! ```text
//! cargo test -p onecopy-tests --test apps -- --test-threads=1
//! ```
//!
//! They check behaviour (where misses were served from, that RESULT
//! lines parse and agree), never timing.

use std::time::Duration;

use onecopy_tests::{mkfs_datasets, unique_run_dir, with_cluster, ClusterOpts, Error, Result};
use serde_json::Value;

const CTL: &str = env!("CARGO_BIN_EXE_onecopy-ctl");

fn fail(msg: String) -> Error {
    Error::Usage(msg)
}

/// The RESULT json of an `app` answer.
fn result(node: u8, out: &str) -> Result<Value> {
    let line = out
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("RESULT "))
        .ok_or_else(|| fail(format!("n{node}: no RESULT line: {out}")))?;
    serde_json::from_str(line).map_err(|e| fail(format!("n{node}: RESULT json: {e}: {line}")))
}

fn cache(v: &Value, key: &str) -> u64 {
    v["cache"][key]
        .as_u64()
        .unwrap_or_else(|| panic!("cache '{key}' missing in {v}"))
}

/// Node 1 reads the kv table first (it owns every page); then both
/// nodes run `app kv` at once. Node 2's misses are remote maps of node
/// 1's frames, never disk reads; both find every key.
#[test]
fn two_nodes_run_kv_at_once_and_the_second_maps_remote_pages() {
    let dir = unique_run_dir("apps-kv-img").expect("run dir");
    std::fs::create_dir_all(&dir).expect("run dir");
    let image = dir.join("apps.img");
    mkfs_datasets(&image, &["kv:4m", "infer:1m"]).expect("mkfs --dataset");
    let opts = ClusterOpts::new("apps-kv")
        .ctl(CTL)
        .disk(&image)
        .cmd_timeout(Duration::from_secs(240))
        .boot_timeout(Duration::from_secs(60));
    with_cluster(opts, |c| {
        c.exec_ok(1, "sum /apps/kv/table.sst")?;
        let outs = c.exec_together(&[
            (1, "app kv --ops 400 --threads 8 --seed 1"),
            (2, "app kv --ops 400 --threads 8 --seed 2"),
        ])?;
        let mut rs = Vec::new();
        for (node, out) in [1u8, 2].into_iter().zip(outs) {
            let text = out.into_result()?.text();
            rs.push(result(node, &text)?);
        }
        for (i, v) in rs.iter().enumerate() {
            assert_eq!(v["app"], "kv", "{v}");
            assert_eq!(v["mode"], "strong", "{v}");
            assert_eq!(v["operations"].as_u64(), Some(400), "n{}: {v}", i + 1);
            assert_eq!(v["ops"]["get"]["count"].as_u64(), Some(400), "{v}");
        }
        let n2 = &rs[1];
        let misses = cache(n2, "misses");
        assert!(misses > 0, "n2 had no misses: {n2}");
        assert_eq!(
            cache(n2, "disk reads caused (fills)"),
            0,
            "n2 read from disk: {n2}"
        );
        assert!(cache(n2, "remote maps (CM-R)") > 0, "n2: {n2}");
        assert_eq!(cache(&rs[0], "disk reads caused (fills)"), 0, "{}", rs[0]);

        // infer: both nodes decode the same sequences at once; the
        // checksums agree (the same weights were read on both).
        let outs = c.exec_together(&[
            (1, "app infer --ops 2 --seq-len 2 --threads 2"),
            (2, "app infer --ops 2 --seq-len 2 --threads 1"),
        ])?;
        let mut sums = Vec::new();
        for (node, out) in [1u8, 2].into_iter().zip(outs) {
            let v = result(node, &out.into_result()?.text())?;
            assert_eq!(v["sequences"].as_u64(), Some(2), "{v}");
            sums.push(v["checksum"].as_str().unwrap_or("").to_string());
        }
        assert!(!sums[0].is_empty());
        assert_eq!(sums[0], sums[1], "nodes decoded different tokens");
        Ok(())
    });
    let _ = std::fs::remove_dir_all(&dir);
}

/// Both nodes run `app webserver` at once: each appends to its own log
/// (`/apps/webserver/nK/log`), so the two logs grow side by side on the
/// disk. Before the file system reserved room behind a growing file, each
/// append of one log took the blocks behind the other, every log ran out
/// of its 11 extent slots after 130-370 KiB, and the append failed with
/// `no space left` on a nearly empty disk (seen in strong and relaxed
/// mode at N >= 2, before flatfs reserved room behind a growing extent). About 60 loops of 1..16 KiB
/// appends per node (some 500 KiB) is past that point.
#[test]
fn two_nodes_run_webserver_at_once_and_their_logs_keep_growing() {
    let dir = unique_run_dir("apps-web-img").expect("run dir");
    std::fs::create_dir_all(&dir).expect("run dir");
    let image = dir.join("apps.img");
    mkfs_datasets(&image, &["webserver:1m"]).expect("mkfs --dataset");
    let opts = ClusterOpts::new("apps-web")
        .ctl(CTL)
        .disk(&image)
        .cmd_timeout(Duration::from_secs(300))
        .boot_timeout(Duration::from_secs(60));
    with_cluster(opts, |c| {
        let outs = c.exec_together(&[
            (1, "app webserver --ops 64 --threads 8 --seed 1"),
            (2, "app webserver --ops 64 --threads 8 --seed 2"),
        ])?;
        for (node, out) in [1u8, 2].into_iter().zip(outs) {
            let text = out.into_result()?.text();
            let v = result(node, &text)?;
            assert_eq!(v["app"], "webserver", "{v}");
            assert_eq!(v["operations"].as_u64(), Some(64), "n{node}: {v}");
            assert_eq!(v["ops"]["appendlog"]["count"].as_u64(), Some(64), "{v}");
        }
        for node in [1u8, 2] {
            let out = c.exec_ok(node, &format!("stat /apps/webserver/n{node}/log"))?;
            let text = out.text();
            let size: u64 = text
                .split_whitespace()
                .find_map(|w| w.strip_prefix("size="))
                .and_then(|w| w.parse().ok())
                .ok_or_else(|| fail(format!("n{node}: no size in: {text}")))?;
            assert!(size >= 64 * 1024, "n{node}: log of {size} bytes");
        }
        Ok(())
    });
    let _ = std::fs::remove_dir_all(&dir);
}

/// `app search` (cache_ext's file search) on one node, with its owned
/// pages capped below the dataset so every pass reclaims: the matches
/// per pass are the ones counted on the host from the dataset's plan,
/// under FIFO and under MRU.
#[test]
fn search_counts_the_host_computed_matches_under_reclaim() {
    use userland::app::{dataset, search};
    let spec = "search:1m";
    let (name, size, seed) = dataset::parse_spec(spec).expect("spec");
    let ds = dataset::plan(&name, size, seed, "/apps/search").expect("plan");
    let want: u64 = ds
        .files
        .iter()
        .filter(|f| !f.path.ends_with("/manifest"))
        .map(|f| {
            let mut b = vec![0u8; f.size as usize];
            f.gen.fill(0, &mut b);
            search::count(&b, search::DEFAULT_PATTERN.as_bytes())
        })
        .sum();
    assert!(want > 0);
    let dir = unique_run_dir("apps-search-img").expect("run dir");
    std::fs::create_dir_all(&dir).expect("run dir");
    let image = dir.join("apps.img");
    mkfs_datasets(&image, &[spec]).expect("mkfs --dataset");
    let opts = ClusterOpts::new("apps-search")
        .ctl(CTL)
        .nodes(1)
        .disk(&image)
        .cmd_timeout(Duration::from_secs(240))
        .boot_timeout(Duration::from_secs(60));
    with_cluster(opts, |c| {
        c.exec_ok(1, "cache config limit=64")?;
        for policy in ["fifo", "mru"] {
            c.exec_ok(1, &format!("cache policy {policy}"))?;
            let out = c.exec_ok(1, "app search --passes 2 --threads 4 --runtime 200")?;
            let v = result(1, &out.text())?;
            assert_eq!(v["app"], "search", "{v}");
            assert_eq!(v["mode"], "strong", "{v}");
            assert_eq!(v["passes_done"].as_u64(), Some(2), "{policy}: {v}");
            assert_eq!(v["matches_per_pass"].as_u64(), Some(want), "{policy}: {v}");
            assert_eq!(v["matches"].as_u64(), Some(2 * want), "{policy}: {v}");
            assert!(cache(&v, "misses") > 0, "{policy}: {v}");
        }
        Ok(())
    });
    let _ = std::fs::remove_dir_all(&dir);
}
