//! Property-based fuzzing of `qemu-run.sh`'s flag parsing, through its
//! `--check` mode (validate the flags, then exit without building, locking
//! or booting). A host test: it runs bash only, never QEMU, and is part of
//! a plain `cargo test`.
//!
//! Flag lines come from a grammar: every option of the `run` subcommand
//! with a valid value, a garbage value or no value at all, unknown options,
//! stray words, values inline (`--x=v`) or as the next word, `--check`
//! anywhere. Every line must give exit 0 with `qemu-run.sh: flags ok` on
//! stdout and nothing on stderr, or exit 2 with nothing on stdout and one
//! `qemu-run.sh: error: ` line on stderr; a line with a known-bad item must
//! be refused and a line of only valid items accepted.
//!
//! Budget: `cases` below (override with `PROPTEST_CASES=N`); failures are
//! persisted in `tests/proptest-regressions/launcher_fuzz.txt` (committed)
//! and replayed first on every run.

use std::path::{Path, PathBuf};
use std::process::Command;

use proptest::prelude::*;
use proptest::test_runner::Config;

fn cases(default: u32) -> Config {
    onecopy_fuzzcfg::config(default, "proptest-regressions/launcher_fuzz.txt")
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// An existing file (for `--disk`, `--put` and `--kernel`): this test's source.
fn existing_file() -> String {
    root()
        .join("tests/tests/launcher_fuzz.rs")
        .to_string_lossy()
        .into_owned()
}

/// What an item of the line is known to do to the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// Accepted on its own (and with every other `Valid` item).
    Valid,
    /// Refused whatever else the line holds.
    Bad,
    /// Depends (e.g. a garbage value some options happen to accept).
    Unknown,
}

/// One item of a flag line: its words, the option it sets (for the
/// given-twice rule) and its verdict.
#[derive(Debug, Clone)]
struct Item {
    words: Vec<String>,
    flag: Option<&'static str>,
    verdict: Verdict,
}

/// `(flag, valid values, values known to be invalid)`. Valid values of
/// `--console`, `--gdb` and `-e` stay within one node so they hold with
/// any `--nodes`.
fn options() -> Vec<(&'static str, Vec<String>, Vec<&'static str>)> {
    let f = existing_file();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    vec![
        (
            "--nodes",
            s(&["1", "2", "16", "03"]),
            vec!["0", "17", "-1", "x", "2x", "99999999999", ""],
        ),
        (
            "--mode",
            s(&["strong", "relaxed", "private", "net"]),
            vec!["Strong", "nfs", "", " strong"],
        ),
        (
            "--policy",
            s(&["fifo", "lru", "get-scan", "cluster"]),
            vec!["LRU", "random", "", "lru clock"],
        ),
        ("--doorbell", s(&["on", "off"]), vec!["yes", "1", ""]),
        (
            "--storage",
            s(&["none", "nvme", "sata-ssd", "sas-raid"]),
            vec!["ssd", "NVME", ""],
        ),
        (
            "--cxl-latency-ns",
            s(&["0", "100", "100000"]),
            vec!["100001", "-5", "1e3", ""],
        ),
        (
            "--dilation",
            s(&["off", "auto", "1", "4.5", "0.10", "100", "12.25"]),
            vec!["0", "0.05", "100.01", "4.567", "x", "-1", "1e2", ""],
        ),
        ("--pin", s(&["auto", "off"]), vec!["on", ""]),
        (
            "--accel",
            s(&["auto", "tcg", "kvm"]),
            vec!["hvf", "TCG", ""],
        ),
        ("--disk", vec![f.clone()], vec!["/nonexistent/disk.img", ""]),
        (
            "--put",
            vec![format!("{f}:/jobs/fuzz.fio")],
            vec!["/nonexistent/job.fio:/jobs/x.fio", "no-colon", ":/x", ""],
        ),
        (
            "--shm-mb",
            s(&["16", "64", "8192"]),
            vec!["15", "48", "16384", "0", "x", ""],
        ),
        (
            "--mem-mb",
            s(&["32", "128", "16384"]),
            vec!["31", "16385", "lots", ""],
        ),
        (
            "--run-dir",
            s(&["/tmp/onecopy-fuzz-run"]),
            vec!["/tmp/a,b", "/tmp/q'uote", ""],
        ),
        ("--console", s(&["0", "1"]), vec!["17", "-1", "one", ""]),
        ("--gdb", s(&["0", "1"]), vec!["17", "x", ""]),
        (
            "--boot-timeout",
            s(&["1", "30", "3600"]),
            vec!["0", "3601", "soon", ""],
        ),
        ("--cmd-timeout", s(&["1", "60"]), vec!["0", "never", ""]),
        (
            "--append-extra",
            s(&[
                "mode=strong hb_timeout_ms=500",
                "lazy_inv=0",
                "task_reads=batch",
            ]),
            // Unknown boot options, options the launcher sets itself, and
            // words that are not key=value are refused before booting.
            vec![
                "a;b",
                "$(reboot)",
                "x=\"1\"",
                "hb_ms=50",
                "x=1",
                "nodes=3",
                "lazy_inv",
            ],
        ),
        ("--kernel", vec![f], vec!["/nonexistent/kernel.elf", ""]),
    ]
}

/// Switches: no value.
const SWITCHES: [&str; 2] = ["--detach", "--no-build"];

fn valued_item() -> impl Strategy<Value = Item> {
    let opts = options();
    (
        0..opts.len(),
        0..4u8,
        any::<prop::sample::Index>(),
        any::<bool>(),
        "[ -~]{0,10}",
    )
        .prop_map(move |(i, kind, pick, inline, garbage)| {
            let (flag, valid, bad) = &opts[i];
            let (value, verdict) = match kind {
                0 | 1 => (valid[pick.index(valid.len())].clone(), Verdict::Valid),
                2 => (bad[pick.index(bad.len())].to_string(), Verdict::Bad),
                _ => (garbage, Verdict::Unknown),
            };
            let words = if inline {
                vec![format!("{flag}={value}")]
            } else {
                vec![flag.to_string(), value]
            };
            Item {
                words,
                flag: Some(flag),
                verdict,
            }
        })
}

fn item() -> impl Strategy<Value = Item> {
    let opts = options();
    let names: Vec<&'static str> = opts.iter().map(|o| o.0).collect();
    prop_oneof![
        8 => valued_item(),
        2 => (prop::sample::select(SWITCHES.to_vec()), any::<bool>()).prop_map(|(s, with_value)| Item {
            words: vec![if with_value { format!("{s}=1") } else { s.to_string() }],
            flag: Some(s),
            verdict: if with_value { Verdict::Bad } else { Verdict::Valid },
        }),
        // A valued option with its value missing (the next word, if any,
        // is an option or nothing).
        1 => prop::sample::select(names).prop_map(|f| Item {
            words: vec![f.to_string()],
            flag: Some(f),
            verdict: Verdict::Unknown,
        }),
        1 => prop::sample::select(vec![
            "--bogus", "--nodes2", "-x", "--", "---nodes", "--NODES", "-h2", "--helpme", "--check=yes",
        ])
        .prop_map(|w| Item {
            words: vec![w.to_string()],
            flag: None,
            verdict: Verdict::Bad,
        }),
        1 => prop::sample::select(vec!["1", "strong", "run", "ls /"]).prop_map(|w| Item {
            words: vec![w.to_string()],
            flag: None,
            verdict: Verdict::Bad,
        }),
        1 => prop::sample::select(vec!["1: ls /", "1:sum /f", " 1 : cat /x"]).prop_map(|e| Item {
            words: vec!["-e".to_string(), e.to_string()],
            flag: None,
            verdict: Verdict::Valid,
        }),
        1 => prop::sample::select(vec!["17: ls", "ls /", "1:", "1: a\nb", "x: ls"]).prop_map(|e| Item {
            words: vec!["-e".to_string(), e.to_string()],
            flag: None,
            verdict: Verdict::Bad,
        }),
    ]
}

/// What a line should do: `Some(true)` accepted, `Some(false)` refused,
/// `None` either.
fn expected(items: &[Item]) -> Option<bool> {
    // A valued option whose value is missing takes the next item's first
    // word as its value (unless that word looks like an option, which is
    // refused): what the line then means is not modelled.
    let bare = |i: &Item| i.words.len() == 1 && i.flag.is_some_and(|f| i.words[0] == f);
    if items
        .windows(2)
        .any(|w| bare(&w[0]) && !SWITCHES.contains(&w[0].words[0].as_str()))
    {
        return None;
    }
    if items.iter().any(|i| i.verdict == Verdict::Bad) {
        return Some(false);
    }
    // --put builds its own disk: not with --disk.
    let has = |flag: &str| items.iter().any(|i| i.flag == Some(flag));
    if has("--put") && has("--disk") {
        return Some(false);
    }
    let mut seen = Vec::new();
    for f in items.iter().filter_map(|i| i.flag) {
        if seen.contains(&f) {
            return Some(false);
        }
        seen.push(f);
    }
    if items.iter().all(|i| i.verdict == Verdict::Valid) {
        return Some(true);
    }
    None
}

proptest! {
    #![proptest_config(cases(150))]

    #[test]
    fn launcher_flags_are_accepted_or_refused_in_one_line(
        items in proptest::collection::vec(item(), 0..5),
        check_at in any::<prop::sample::Index>(),
    ) {
        let mut words: Vec<String> = items.iter().flat_map(|i| i.words.clone()).collect();
        // `--check` anywhere between items (never inside one).
        let bounds: Vec<usize> = std::iter::once(0)
            .chain(items.iter().scan(0, |n, i| {
                *n += i.words.len();
                Some(*n)
            }))
            .collect();
        words.insert(bounds[check_at.index(bounds.len())], "--check".to_string());
        let out = Command::new("bash")
            .arg(root().join("qemu-run.sh"))
            .args(&words)
            .env("ONECOPY_CTL", "/nonexistent/onecopy-ctl")
            .output()
            .expect("run bash");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let code = out.status.code();
        let accepted = match code {
            Some(0) => {
                prop_assert_eq!(&*stdout, "qemu-run.sh: flags ok\n", "{:?}", words);
                prop_assert_eq!(&*stderr, "", "{:?}", words);
                true
            }
            Some(2) => {
                prop_assert_eq!(&*stdout, "", "{:?}", words);
                prop_assert_eq!(stderr.lines().count(), 1, "{:?}: {:?}", words, stderr);
                prop_assert!(stderr.starts_with("qemu-run.sh: error: "), "{:?}: {:?}", words, stderr);
                false
            }
            _ => {
                prop_assert!(false, "{:?}: exit {:?}, stdout {:?}, stderr {:?}", words, code, stdout, stderr);
                unreachable!()
            }
        };
        if let Some(want) = expected(&items) {
            prop_assert_eq!(accepted, want, "{:?}: {:?}", words, stderr);
        }
    }
}
