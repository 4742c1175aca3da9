//! Offset generation: sequential, random permutations, mixes.

use super::*;

#[test]
fn splitmix_below_is_in_range_and_known() {
    let mut r = SplitMix64::new(0);
    // The reference SplitMix64 sequence from seed 0.
    assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
    assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    for n in [1u64, 2, 3, 7, 100, 1 << 40, u64::MAX] {
        for _ in 0..200 {
            assert!(r.below(n) < n);
        }
    }
    assert_eq!(r.below(0), 0);
}

#[test]
fn permutation_is_a_bijection() {
    for n in (1..=300u64).chain([1023, 1024, 1025, 4096, 65_537]) {
        for seed in [0u64, 1, 0x89, u64::MAX] {
            let perm = Permutation::new(n, seed);
            let mut seen = vec![false; n as usize];
            for i in 0..n {
                let v = perm.apply(i);
                assert!(v < n, "n={n} i={i} v={v}");
                assert!(!seen[v as usize], "n={n} dup {v}");
                seen[v as usize] = true;
            }
        }
    }
    let perm = Permutation::new(10, 1);
    assert_eq!(perm.apply(10), 10);
    assert_eq!(perm.apply(u64::MAX), u64::MAX);
    // Large domains work without a table.
    let perm = Permutation::new(1 << 31, 7);
    for i in [0u64, 1, 12_345, (1 << 31) - 1] {
        assert!(perm.apply(i) < 1 << 31);
    }
}

#[test]
fn offsets_are_aligned_and_in_range() {
    for args in [
        &["--size=1m", "--rw=randread"][..],
        &["--size=1000000", "--bs=4k", "--rw=randwrite"],
        &["--size=10k", "--bs=4k", "--rw=read"],
        &["--size=13k", "--bs=512", "--rw=randrw"],
        &["--size=16m", "--bs=16m", "--rw=randread"],
    ] {
        let s = p(args);
        for job in [0, 1, 63] {
            let mut g = OffsetGen::new(&s, job);
            for i in 0..5000 {
                let dir = if i % 3 == 0 { Ddir::Write } else { Ddir::Read };
                let o = g.next_offset(dir);
                assert_eq!(o % s.bs, 0, "{args:?}");
                assert!(o + s.bs <= s.size, "{args:?}: {o}");
            }
        }
    }
}

#[test]
fn offsets_are_deterministic_per_seed_and_job() {
    let a = offsets(&["--size=1m", "--rw=randread"], 0, 256, Ddir::Read);
    let b = offsets(&["--size=1m", "--rw=randread"], 0, 256, Ddir::Read);
    assert_eq!(a, b);
    let c = offsets(&["--size=1m", "--rw=randread"], 1, 256, Ddir::Read);
    assert_ne!(a, c);
    let d = offsets(
        &["--size=1m", "--rw=randread", "--randseed=1"],
        0,
        256,
        Ddir::Read,
    );
    assert_ne!(a, d);
    // Job j with seed s is job 0 with seed s + j.
    let e = offsets(
        &["--size=1m", "--rw=randread", "--randseed=138"],
        0,
        256,
        Ddir::Read,
    );
    assert_eq!(c, e);
}

#[test]
fn sequential_covers_the_file_once_then_wraps() {
    let o = offsets(&["--size=40k", "--bs=4k", "--rw=read"], 0, 25, Ddir::Read);
    let want: Vec<u64> = (0..10).chain(0..10).chain(0..5).map(|b| b * 4096).collect();
    assert_eq!(o, want);
    // A size that is not a multiple of bs: the tail is never touched.
    let o = offsets(&["--size=10k", "--bs=4k", "--rw=write"], 0, 4, Ddir::Write);
    assert_eq!(o, [0, 4096, 0, 4096]);
}

#[test]
fn sequential_mixed_keeps_a_stream_per_direction() {
    let s = p(&["--size=40k", "--rw=rw"]);
    let mut g = OffsetGen::new(&s, 0);
    assert_eq!(g.next_offset(Ddir::Read), 0);
    assert_eq!(g.next_offset(Ddir::Read), 4096);
    assert_eq!(g.next_offset(Ddir::Write), 0);
    assert_eq!(g.next_offset(Ddir::Read), 8192);
    assert_eq!(g.next_offset(Ddir::Write), 4096);
}

#[test]
fn random_visits_every_block_once_per_pass() {
    let s = p(&["--size=1m", "--rw=randread"]);
    let mut g = OffsetGen::new(&s, 0);
    assert_eq!(g.blocks(), 256);
    let pass1: Vec<u64> = (0..256).map(|_| g.next_offset(Ddir::Read)).collect();
    let pass2: Vec<u64> = (0..256).map(|_| g.next_offset(Ddir::Read)).collect();
    let all: BTreeSet<u64> = (0..256).map(|b| b * 4096).collect();
    assert_eq!(pass1.iter().copied().collect::<BTreeSet<_>>(), all);
    assert_eq!(pass2.iter().copied().collect::<BTreeSet<_>>(), all);
    assert_ne!(pass1, pass2);
    // Not sequential: few neighbours follow each other.
    let adjacent = pass1.windows(2).filter(|w| w[1] == w[0] + 4096).count();
    assert!(adjacent < 20, "{adjacent}");
}

#[test]
fn random_offsets_are_uniform() {
    // The first offset over many seeds: every one of 16 blocks about equally.
    let mut counts = [0u32; 16];
    for seed in 0..3200u64 {
        let s = p(&["--size=64k", "--rw=randread", &format!("--randseed={seed}")]);
        let mut g = OffsetGen::new(&s, 0);
        counts[(g.next_offset(Ddir::Read) / 4096) as usize] += 1;
    }
    for c in counts {
        assert!((130..=270).contains(&c), "{counts:?}");
    }
}

#[test]
fn mix_ratio_is_honoured() {
    for (pct, lo, hi) in [(50u32, 4800, 5200), (70, 6800, 7200), (10, 850, 1150)] {
        let s = p(&["--size=1m", "--rw=randrw", &format!("--rwmixread={pct}")]);
        let mut m = Mix::new(&s, 0);
        let reads = (0..10_000).filter(|_| m.pick() == Ddir::Read).count();
        assert!((lo..=hi).contains(&reads), "{pct}: {reads}");
    }
    let s = p(&["--size=1m", "--rw=rw", "--rwmixread=0"]);
    let mut m = Mix::new(&s, 0);
    assert!((0..1000).all(|_| m.pick() == Ddir::Write));
    let s = p(&["--size=1m", "--rw=randrw", "--rwmixread=100"]);
    let mut m = Mix::new(&s, 0);
    assert!((0..1000).all(|_| m.pick() == Ddir::Read));
    for (rw, d) in [
        ("read", Ddir::Read),
        ("randread", Ddir::Read),
        ("write", Ddir::Write),
        ("randwrite", Ddir::Write),
    ] {
        let s = p(&["--size=1m", &format!("--rw={rw}"), "--rwmixread=0"]);
        let mut m = Mix::new(&s, 3);
        assert!((0..100).all(|_| m.pick() == d), "{rw}");
    }
}
