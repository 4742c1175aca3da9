//! Two nodes append lines to one file at the same time, through their
//! shells (`append PATH TEXT`: open with append, write, close). Strong
//! mode: every line is in the file exactly once, whole, on both nodes and
//! on disk.
//!
//! ```text
//! cargo build --release -p onecopy-kernel --target x86_64-unknown-none
//! cargo build --release -p flatfs --bins
//! cargo build --release -p onecopy-ivshmem-server
//! cargo test -p onecopy-tests --test appends -- --test-threads=1
//! ```

use std::fs;
use std::path::Path;

use onecopy_tests::{inspect, mkfs, unique_run_dir, with_cluster, ClusterOpts};

const CTL: &str = env!("CARGO_BIN_EXE_onecopy-ctl");

/// Rounds; each has both nodes append one line at the same time.
const ROUNDS: usize = 40;

fn line(node: u8, k: usize) -> String {
    // Lengths vary: a shorter line stored over a longer one would leave
    // a visible tail.
    format!(
        "node{node}-line{k:03}-{}",
        "x".repeat((k * 7 + node as usize * 13) % 37)
    )
}

/// Every wanted line exactly once, nothing else.
fn check_lines(what: &str, got: &[String], want: &[String]) {
    let mut g: Vec<&str> = got.iter().map(String::as_str).collect();
    let mut w: Vec<&str> = want.iter().map(String::as_str).collect();
    g.sort_unstable();
    w.sort_unstable();
    assert!(g == w, "{what}: lines differ\n got: {g:?}\nwant: {w:?}");
}

fn concurrent_appends(mode: &str) {
    let name = format!("appends-{mode}");
    let run_dir = unique_run_dir(&name).expect("run dir");
    let image = run_dir.join("test.img");
    mkfs(&image, 64, None::<&Path>).expect("mkfs");
    let mut want = Vec::new();
    let opts = ClusterOpts::new(&name)
        .ctl(CTL)
        .mode(mode)
        .nodes(2)
        .run_dir(&run_dir)
        .disk(&image);
    with_cluster(opts, |c| {
        c.keep_run_dir(); // the image is examined after the cluster stops
        c.exec_ok(1, "write /log head")?;
        want.push("head".to_string());
        for k in 0..ROUNDS {
            let (a, b) = (line(1, k), line(2, k));
            let c1 = format!("append /log {a}");
            let c2 = format!("append /log {b}");
            for out in c.exec_together(&[(1, &c1), (2, &c2)])? {
                out.into_result()?;
            }
            want.push(a);
            want.push(b);
        }
        for k in 1..=2u8 {
            let out = c.exec_ok(k, "cat /log")?;
            check_lines(&format!("cat on node {k}"), &out.lines, &want);
        }
        c.exec_ok(1, "sync")?;
        c.exec_ok(2, "sync")?;
        c.stop()?;
        Ok(())
    });
    let out = inspect(&image, &["--cat", "/log"]).expect("inspect");
    assert_eq!(out.code, Some(0), "inspect --cat: {}", out.text());
    assert!(!out.stdout.contains(&0), "zeros on disk: {:?}", out.stdout);
    let text = String::from_utf8_lossy(&out.stdout);
    let got: Vec<String> = text.lines().map(str::to_string).collect();
    check_lines("the disk", &got, &want);
    let out = inspect(&image, &["--check"]).expect("inspect");
    assert_eq!(out.code, Some(0), "inspect --check: {}", out.text());
    let _ = fs::remove_dir_all(&run_dir);
}

#[test]
fn strong_concurrent_appends_keep_every_line_once() {
    concurrent_appends("strong");
}
