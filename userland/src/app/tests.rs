//! The workloads on the in-memory mock: each runs, is deterministic for
//! a seed, and checks what it reads; bad input is one clear error.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use super::dataset::{self, parse_spec, plan, write_os};
use super::*;
use crate::mock::MockOs;

mod policy_apps;
mod workloads;

/// A mock holding `app`'s dataset of `size` bytes with `seed`.
pub(super) fn os_with(app: &str, size: u64, seed: u64) -> MockOs {
    let mut os = MockOs::new();
    os.capacity = 256 << 20;
    os.max_fds = 64; // as a node's VFS
    os.can_seek = true;
    os.can_mmap = true;
    let ds = plan(app, size, seed, &alloc::format!("/apps/{app}")).unwrap();
    write_os(&mut os, &ds).unwrap();
    os.batches.clear();
    os
}

/// Run `app ARGS` on `os`; the output.
pub(super) fn app(os: &mut MockOs, args: &str) -> Result<String, AppError> {
    let argv: Vec<&str> = args.split_whitespace().collect();
    command(os, &argv)
}

/// The `RESULT` json of an output.
pub(super) fn result_line(out: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .expect("a RESULT line")
        .to_string()
}

/// The integer after `"key":` in `json` (first occurrence).
pub(super) fn num(json: &str, key: &str) -> u64 {
    let pat = alloc::format!("\"{key}\":");
    let at = json.find(&pat).unwrap_or_else(|| panic!("{key} in {json}")) + pat.len();
    json[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap()
}

fn err(os: &mut MockOs, args: &str) -> String {
    app(os, args).unwrap_err().message().to_string()
}

#[test]
fn bad_names_and_options_are_clear_errors() {
    let mut os = os_with("kv", 256 << 10, 1);
    assert!(err(&mut os, "").contains("usage: app NAME"));
    let e = err(&mut os, "nope");
    assert!(
        e.contains("unknown app 'nope'") && e.contains("webserver"),
        "{e}"
    );
    let e = err(&mut os, "kv --frob 1");
    assert!(
        e.contains("unknown option --frob") && e.contains("--dist"),
        "{e}"
    );
    assert!(err(&mut os, "kv --threads 0").contains("bad value '0' for --threads"));
    assert!(err(&mut os, "kv --threads 999").contains("1..=256"));
    assert!(err(&mut os, "kv --runtime x").contains("--runtime"));
    assert!(err(&mut os, "kv --ops").contains("--ops needs a value"));
    assert!(err(&mut os, "kv --seed zz").contains("--seed"));
    assert!(err(&mut os, "kv stray").contains("unexpected argument 'stray'"));
    assert!(err(&mut os, "kv --dist zipf:1.5").contains("0 < THETA < 1"));
    assert!(err(&mut os, "kv --dist normal").contains("--dist"));
    assert!(err(&mut os, "kv --dist uniform --dist uniform").contains("twice"));
    assert!(err(&mut os, "infer --seq-len 0").contains("--seq-len"));
    assert!(err(&mut os, "ann --beam 99").contains("--beam"));
    assert!(err(&mut os, "ann --list 5").contains("--list"));
    assert!(err(&mut os, "webserver --dist uniform").contains("unknown option --dist"));
    // No dataset, or another app's.
    let e = err(&mut os, "ann --ops 1");
    assert!(
        e.contains("/apps/ann/manifest") && e.contains("--dataset ann:SIZE"),
        "{e}"
    );
    let e = err(&mut os, "kv --ops 1 --dir /apps/nothing");
    assert!(e.contains("/apps/nothing/manifest"), "{e}");
    os.put("/apps/x/manifest", b"app=infer\nformat=1\nseed=1\n");
    let e = err(&mut os, "kv --ops 1 --dir /apps/x");
    assert!(e.contains("a infer dataset, not kv"), "{e}");
    os.put("/apps/x/manifest", b"app=kv\nformat=9\nseed=1\n");
    assert!(err(&mut os, "kv --ops 1 --dir /apps/x").contains("format 9"));
    assert_eq!(os.open_fds(), 0);
}

#[test]
fn dataset_specs_parse_with_clear_errors() {
    assert_eq!(
        parse_spec("kv:64m").unwrap(),
        ("kv".to_string(), 64 << 20, 1)
    );
    assert_eq!(
        parse_spec("ann:1m:0x10").unwrap(),
        ("ann".to_string(), 1 << 20, 16)
    );
    assert!(parse_spec("kv").unwrap_err().contains("NAME:SIZE"));
    assert!(parse_spec("db:1m")
        .unwrap_err()
        .contains("unknown app 'db'"));
    assert!(parse_spec("kv:1q").unwrap_err().contains("bad size"));
    assert!(parse_spec("kv:1k").unwrap_err().contains("bad size"));
    assert!(parse_spec("kv:1m:x").unwrap_err().contains("bad seed"));
    assert!(parse_spec("kv:1m:1:2").is_err());
}

#[test]
fn datasets_are_deterministic_per_seed() {
    for name in NAMES {
        let bytes = |seed: u64| {
            let ds = plan(name, 256 << 10, seed, "/d").unwrap();
            let mut all = Vec::new();
            for f in &ds.files {
                let mut b = alloc::vec![0u8; f.size as usize];
                f.gen.fill(0, &mut b);
                all.push((f.path.clone(), b));
            }
            all
        };
        let a = bytes(3);
        assert_eq!(a, bytes(3), "{name}");
        assert_ne!(a, bytes(4), "{name}");
        // Chunked generation gives the same bytes as one fill.
        let ds = plan(name, 256 << 10, 3, "/d").unwrap();
        for (f, (_, whole)) in ds.files.iter().zip(&a) {
            let mut chunked = alloc::vec![0u8; whole.len()];
            for (i, c) in chunked.chunks_mut(8192).enumerate() {
                f.gen.fill(i as u64 * 8192, c);
            }
            assert_eq!(&chunked, whole, "{name} {}", f.path);
        }
        let total = ds.bytes();
        assert!(total > 16 << 10 && total < 4 << 20, "{name}: {total}");
    }
    assert!(plan("kv", 1, 1, "/d").is_err());
    assert!(dataset::plan("nope", 1 << 20, 1, "/d").is_err());
}
