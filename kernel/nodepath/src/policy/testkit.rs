//! Host-test harness for the policies: a cache of `cap` pages driven by a
//! trace, through the same [`Evictor`] the node cache uses; every victim
//! is accepted (the node cache's refusals are tested there).

use alloc::vec::Vec;

use fabric::proto::PageKey;

use super::{Evictor, PolicyName};

/// One step of a trace (pages are numbers; group 0 unless given).
#[derive(Debug, Clone, Copy)]
pub enum Op {
    /// Install a page that is not resident (evicting one if full).
    A(u64),
    /// Access a resident page.
    H(u64),
    /// Read: access if resident (a hit), else install (a miss).
    R(u64),
    /// Read by a group.
    G(u64, u32),
    /// The page leaves without eviction (its file was truncated).
    D(u64),
    /// The directory reports the page's sharer count; a rise is a remote
    /// access.
    S(u64, u32),
}

/// What a trace produced.
#[derive(Debug, Default)]
pub struct Trace {
    /// Pages evicted, in order.
    pub victims: Vec<u64>,
    /// Reads that hit.
    pub hits: usize,
    /// Reads that missed.
    pub misses: usize,
}

pub fn key(n: u64) -> PageKey {
    PageKey { ino: 1, idx: n }
}

/// Run `ops` on a cache of `cap` pages under `policy`.
pub fn run(policy: PolicyName, cap: usize, ops: &[Op]) -> Trace {
    let mut ev = Evictor::new(policy);
    run_on(&mut ev, cap, ops)
}

/// Run `ops` on `ev` (a cache of `cap` pages).
pub fn run_on(ev: &mut Evictor, cap: usize, ops: &[Op]) -> Trace {
    let mut t = Trace::default();
    let mut sharers = alloc::collections::BTreeMap::new();
    for op in ops {
        let (page, group) = match *op {
            Op::G(p, g) => (p, g),
            Op::A(p) | Op::H(p) | Op::R(p) | Op::D(p) | Op::S(p, _) => (p, 0),
        };
        ev.set_group(group);
        let k = key(page);
        match *op {
            Op::H(_) => {
                assert!(ev.contains(&k), "H({page}): not resident");
                ev.accessed(k);
            }
            Op::D(_) => ev.removed(&k),
            Op::S(_, n) => {
                let old = sharers.insert(page, n).unwrap_or(0);
                ev.sharers(k, n, n > old);
            }
            Op::R(_) | Op::G(..) if ev.contains(&k) => {
                t.hits += 1;
                ev.accessed(k);
            }
            Op::A(_) | Op::R(_) | Op::G(..) => {
                assert!(!ev.contains(&k), "A({page}): resident already");
                if !matches!(op, Op::A(_)) {
                    t.misses += 1;
                }
                if ev.len() >= cap {
                    let mut c = ev.propose(1);
                    if c.is_empty() {
                        // Policies needing a second pass (CLOCK, S3-FIFO
                        // moving pages between queues) get it.
                        c = ev.propose(1);
                    }
                    let v = *c.first().expect("a full cache proposes a victim");
                    ev.removed(&v);
                    t.victims.push(v.idx);
                }
                ev.added(k);
            }
        }
        assert!(ev.len() <= cap, "over capacity after {op:?}");
    }
    t
}

/// A zipf-like skewed trace over `pages` pages (`n` reads, seeded): page
/// `i` drawn with weight about 1/(i+1).
pub fn skewed(pages: u64, n: usize, seed: u64) -> Vec<Op> {
    let mut rng = fabric::rng::SplitMix64::new(seed);
    let weights: Vec<f64> = (0..pages).map(|i| 1.0 / (i as f64 + 1.0)).collect();
    let total: f64 = weights.iter().sum();
    (0..n)
        .map(|_| {
            let mut x = (rng.next_u64() % 1_000_000) as f64 / 1_000_000.0 * total;
            let mut p = 0;
            for (i, w) in weights.iter().enumerate() {
                if x < *w {
                    p = i as u64;
                    break;
                }
                x -= w;
                p = i as u64;
            }
            Op::R(p)
        })
        .collect()
}
