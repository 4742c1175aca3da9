//! The policy study's workloads on the mock: `kv`'s scan mix
//! and `search`.

use alloc::string::ToString;
use alloc::vec::Vec;

use super::{app, num, os_with, result_line};
use crate::app::dataset::plan;
use crate::app::fileset;
use crate::app::search::{count, Counter};

/// The json object of operation kind `name`.
fn op<'j>(j: &'j str, name: &str) -> &'j str {
    let at = j
        .find(&alloc::format!("\"{name}\":{{"))
        .unwrap_or_else(|| panic!("{name} in {j}"));
    &j[at..]
}

#[test]
fn kv_scan_mix_counts_exactly_and_is_deterministic() {
    let args = "kv --ops 400 --threads 8 --dist zipf:0.99 --scan-frac 0.05 --scan-len 16";
    let a = app(&mut os_with("kv", 1 << 20, 9), args).unwrap();
    let b = app(&mut os_with("kv", 1 << 20, 9), args).unwrap();
    assert_eq!(a, b);
    let j = result_line(&a);
    assert_eq!(num(&j, "operations"), 400);
    assert_eq!(num(op(&j, "scan"), "count"), 20, "{j}");
    assert_eq!(num(op(&j, "get"), "count"), 380, "{j}");
    assert_eq!(num(op(&j, "scan"), "bytes_read"), 20 * 16 * 4096);
    assert_eq!(num(&j, "scan_keys"), 20 * 16 * 3);
    assert_eq!(num(&j, "scan_len"), 16);
    assert!(j.contains("\"scan_frac\":\"0.05\""), "{j}");
    assert!(j.contains("\"scan_group\":\"default\""), "{j}");
    assert!(j.contains("\"metric\":\"lookups_per_s\""));
    // No scan options: the output has no scan kind (unchanged).
    let plain = app(&mut os_with("kv", 1 << 20, 9), "kv --ops 50").unwrap();
    assert!(!plain.contains("scan"), "{plain}");
}

#[test]
fn kv_scans_run_in_their_group_and_come_back() {
    let mut os = os_with("kv", 1 << 20, 9);
    let out = app(
        &mut os,
        "kv --ops 100 --threads 4 --scan-frac 0.02 --scan-len 8 --scan-group scans --group gets",
    )
    .unwrap();
    let j = result_line(&out);
    assert_eq!(num(op(&j, "scan"), "count"), 2);
    assert!(j.contains("\"scan_group\":\"scans\""), "{j}");
    // The command enters gets; the check and every scan enter scans and
    // go back to gets; the command ends in default.
    let g: Vec<&str> = os.task_groups.iter().map(|s| s.as_str()).collect();
    assert_eq!(
        g,
        ["gets", "scans", "gets", "scans", "gets", "scans", "gets", "default"]
    );
    assert_eq!(os.open_fds(), 0);
}

#[test]
fn kv_scan_errors_are_clear() {
    let mut os = os_with("kv", 256 << 10, 9);
    let e = app(&mut os, "kv --ops 5 --scan-frac 2").unwrap_err();
    assert!(e.message().contains("--scan-frac"), "{e}");
    let e = app(&mut os, "kv --ops 5 --scan-frac 0.5 --scan-len 100000").unwrap_err();
    assert!(e.message().contains("longer than the table"), "{e}");
    let e = app(&mut os, "kv --ops 5 --scan-len 4").unwrap_err();
    assert!(e.message().contains("need --scan-frac"), "{e}");
    // A scan over a corrupt block says so.
    let mut t = os.file("/apps/kv/table.sst").unwrap().to_vec();
    t[5 * 4096] ^= 0xff;
    os.put("/apps/kv/table.sst", &t);
    let e = app(&mut os, "kv --ops 4 --scan-frac 1 --scan-len 60").unwrap_err();
    assert!(e.message().contains("does not start with its key"), "{e}");
    assert_eq!(os.open_fds(), 0);
}

#[test]
fn counter_matches_brute_force_across_chunks() {
    let data: Vec<u8> = (0..5000u32)
        .map(|i| b"aab"[(i.wrapping_mul(2654435761) >> 29) as usize % 3])
        .collect();
    for pat in [&b"a"[..], b"aa", b"aab", b"aaba", b"bbbbbbbbbbbb"] {
        let want = count(&data, pat);
        for chunk in [1usize, 2, 3, 7, 64, 4096, 5000] {
            let mut c = Counter::new(pat);
            for part in data.chunks(chunk) {
                c.feed(part);
            }
            assert_eq!(c.matches, want, "{pat:?} in chunks of {chunk}");
        }
    }
    assert_eq!(count(b"aaaa", b"aa"), 3);
    assert_eq!(count(b"a", b"aa"), 0);
}

/// The pattern's occurrences in the whole dataset, counted on its plan.
fn brute_force(size: u64, seed: u64, pat: &[u8]) -> u64 {
    let ds = plan("search", size, seed, "/apps/search").unwrap();
    ds.files
        .iter()
        .filter(|f| !f.path.ends_with("manifest"))
        .map(|f| {
            let mut b = alloc::vec![0u8; f.size as usize];
            f.gen.fill(0, &mut b);
            count(&b, pat)
        })
        .sum()
}

#[test]
fn search_counts_what_brute_force_counts_for_any_threads() {
    let size = 1 << 20;
    let want = brute_force(size, 9, b"oc");
    assert!(want > 0, "the default pattern occurs");
    let mut outs = Vec::new();
    for threads in [1, 3, 8] {
        let mut os = os_with("search", size, 9);
        let out = app(
            &mut os,
            &alloc::format!("search --passes 3 --threads {threads} --runtime 1000"),
        )
        .unwrap();
        let j = result_line(&out);
        assert_eq!(num(&j, "matches_per_pass"), want, "{j}");
        assert_eq!(num(&j, "matches"), 3 * want);
        assert_eq!(num(&j, "passes_done"), 3);
        let files = num(&j, "files");
        assert_eq!(num(&j, "operations"), 3 * files);
        assert_eq!(num(op(&j, "searchfile"), "count"), 3 * files);
        assert!(j.contains("\"metric\":\"passes_per_s\""));
        assert_eq!(os.open_fds(), 0);
        outs.push(j);
    }
    // Another pattern, another count, still brute force's.
    let mut os = os_with("search", size, 9);
    let out = app(&mut os, "search --passes 1 --pattern xyz").unwrap();
    assert_eq!(
        num(&result_line(&out), "matches_per_pass"),
        brute_force(size, 9, b"xyz")
    );
}

#[test]
fn search_reads_every_file_whole_each_pass() {
    let mut os = os_with("search", 256 << 10, 4);
    let out = app(&mut os, "search --passes 2 --threads 1").unwrap();
    let j = result_line(&out);
    let ds = plan("search", 256 << 10, 4, "/apps/search").unwrap();
    // Every file but the manifest, twice.
    assert_eq!(num(&j, "files"), ds.files.len() as u64 - 1);
    assert_eq!(num(&j, "bytes_read"), 2 * (ds.bytes() - ds.files[0].size));
    let p = fileset::file_path("/apps/search", 50, 0);
    assert!(os.file(&p).is_some(), "{p}");
    // --ops ends a run in the middle of a pass: no per-pass count then.
    let mut os = os_with("search", 256 << 10, 4);
    let out = app(&mut os, "search --ops 3").unwrap();
    let j = result_line(&out);
    assert_eq!(num(&j, "files_searched"), 3);
    assert!(!j.contains("matches_per_pass"), "{j}");
}

#[test]
fn search_errors_are_clear() {
    let mut os = os_with("search", 256 << 10, 4);
    for (args, want) in [
        ("search --passes 0", "--passes"),
        ("search --passes x", "--passes"),
        ("search --frob 1", "known: --runtime"),
    ] {
        let e = app(&mut os, args).unwrap_err().message().to_string();
        assert!(e.contains(want), "{args}: {e}");
    }
    let long = "p".repeat(65);
    let e = app(&mut os, &alloc::format!("search --pattern {long}")).unwrap_err();
    assert!(e.message().contains("1 to 64 bytes"), "{e}");
    // Another workload's dataset directory is not a search dataset.
    let e = app(&mut os, "kv --ops 1").unwrap_err();
    assert!(e.message().contains("no kv dataset"), "{e}");
    assert_eq!(os.open_fds(), 0);
}
