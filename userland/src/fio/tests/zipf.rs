//! `--random_distribution`: parsing, errors, the offsets it gives and the
//! `RESULT` field.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::vec::Vec;

use super::{offsets, p, perr, run_fake, FakeOs};
use crate::fio::offsets::Ddir;

#[test]
fn parses_fio_syntax() {
    assert_eq!(p(&["--size=1m", "--rw=randread"]).zipf_theta, None);
    let s = p(&[
        "--size=1m",
        "--rw=randread",
        "--random_distribution=zipf:0.99",
    ]);
    assert_eq!(s.zipf_theta, Some(990_000));
    assert_eq!(s.random_distribution(), "zipf:0.99");
    let s = p(&[
        "--size=1m",
        "--rw=randrw",
        "--random_distribution=zipf:1.2",
        "--random_distribution=random",
    ]);
    assert_eq!(
        (s.zipf_theta, s.random_distribution().as_str()),
        (None, "random")
    );
    // Only the random patterns take a distribution other than random.
    let s = p(&["--size=1m", "--random_distribution=random"]);
    assert_eq!(s.zipf_theta, None);
}

#[test]
fn rejects_bad_distributions() {
    let hint = "random, or zipf:THETA with THETA > 0, not 1, at most 100";
    for v in [
        "zipf",
        "zipf:",
        "zipf:1",
        "zipf:1.0",
        "zipf:0",
        "zipf:-1",
        "zipf:x",
        "pareto:0.5",
        "normal",
        "zipf:0.9:1",
    ] {
        assert_eq!(
            perr(&[
                "--size=1m",
                "--rw=randread",
                &format!("--random_distribution={v}")
            ]),
            format!("fio: bad value '{v}' for option 'random_distribution' ({hint})"),
        );
    }
    assert_eq!(
        perr(&["--size=1m", "--rw=read", "--random_distribution=zipf:0.9"]),
        "fio: random_distribution=zipf needs a random pattern (--rw=randread, randwrite or randrw)"
    );
}

/// How often each block comes up in `n` offsets.
fn counts(args: &[&str], n: usize) -> BTreeMap<u64, usize> {
    let mut m = BTreeMap::new();
    for o in offsets(args, 0, n, Ddir::Read) {
        *m.entry(o).or_insert(0) += 1;
    }
    m
}

#[test]
fn zipf_offsets_are_skewed_aligned_and_scattered() {
    // 1024 blocks of 4 KiB; 20000 draws.
    let args = [
        "--size=4m",
        "--rw=randread",
        "--random_distribution=zipf:0.99",
    ];
    let c = counts(&args, 20_000);
    assert!(c.keys().all(|o| o % 4096 == 0 && *o < 4 << 20));
    let mut freq: Vec<usize> = c.values().copied().collect();
    freq.sort_unstable_by(|a, b| b.cmp(a));
    // The hottest tenth of the blocks gets well over half of the I/Os
    // (about 72% for theta 0.99), unlike the random map (10%).
    let hot: usize = freq.iter().take(102).sum();
    assert!(hot > 12_000, "top 10% of blocks: {hot} of 20000");
    // The hottest block is not simply block 0: ranks are scattered.
    let hottest = c.iter().max_by_key(|(_, n)| **n).map(|(o, _)| *o).unwrap();
    let low: usize = (0..102u64)
        .map(|b| c.get(&(b * 4096)).copied().unwrap_or(0))
        .sum();
    assert!(
        low < 6_000,
        "the first 10% of the file got {low}: ranks not scattered (hottest {hottest})"
    );
    // Deterministic per seed, different for another seed or job.
    assert_eq!(
        offsets(&args, 0, 500, Ddir::Read),
        offsets(&args, 0, 500, Ddir::Read)
    );
    assert_ne!(
        offsets(&args, 0, 500, Ddir::Read),
        offsets(&args, 1, 500, Ddir::Read)
    );
    // The uniform random map, for comparison, spreads the same I/Os.
    let u = counts(&["--size=4m", "--rw=randread"], 20_000);
    let mut uf: Vec<usize> = u.values().copied().collect();
    uf.sort_unstable_by(|a, b| b.cmp(a));
    assert!(uf.iter().take(102).sum::<usize>() < 3_000);
}

#[test]
fn result_line_names_the_distribution() {
    let mut os = FakeOs::new();
    let r = run_fake(
        &mut os,
        &[
            "--size=256k",
            "--rw=randread",
            "--random_distribution=zipf:1.1",
        ],
    );
    assert!(
        r.json().contains("\"random_distribution\":\"zipf:1.1\""),
        "{}",
        r.json()
    );
}
