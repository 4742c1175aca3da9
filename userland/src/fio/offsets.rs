//! Deterministic offsets and read/write decisions for one job.
//!
//! * Sequential patterns walk the file block by block from offset 0, one
//!   stream per direction (fio keeps a last position per direction), and
//!   wrap around at the end.
//! * Random patterns follow fio's default *random map*: within one pass
//!   every block of `[0, size)` is visited exactly once, in a seeded
//!   pseudo-random order; the next pass uses a new order. Each offset is
//!   therefore uniform over the bs-aligned offsets, and a size-limited
//!   run touches every block once (a cold-cache run stays cold).
//! * With `--random_distribution=zipf:THETA`, a random pattern draws each
//!   block's rank from a Zipf law ([`Zipf`]) instead; ranks are scattered
//!   over the file by a fixed seeded permutation, so the hot blocks are not
//!   all at the start (fio hashes them for the same reason).
//! * Mixed patterns pick the direction of each I/O with its own generator:
//!   read with probability `rwmixread` percent.
//!
//! Everything is a pure function of the seed (`randseed + job index`).

use super::options::{JobSpec, Rw};
use super::zipf::Zipf;

/// The direction of one I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ddir {
    /// A read.
    Read,
    /// A write.
    Write,
}

impl Ddir {
    /// Index for per-direction arrays: read 0, write 1.
    pub fn index(self) -> usize {
        match self {
            Ddir::Read => 0,
            Ddir::Write => 1,
        }
    }
}

pub use fabric::rng::{mix64, SplitMix64};

/// A seeded pseudo-random permutation of `[0, n)` computed on the fly
/// (no table): a 4-round Feistel network over the smallest even number
/// of bits covering `n`, with cycle walking to stay below `n`.
#[derive(Debug, Clone)]
pub struct Permutation {
    n: u64,
    half: u32,
    keys: [u64; 4],
}

impl Permutation {
    /// A permutation of `[0, n)` chosen by `seed`.
    pub fn new(n: u64, seed: u64) -> Permutation {
        let bits = (64 - n.saturating_sub(1).leading_zeros()).max(2);
        let half = bits.div_ceil(2);
        let mut rng = SplitMix64::new(seed);
        let keys = [
            rng.next_u64(),
            rng.next_u64(),
            rng.next_u64(),
            rng.next_u64(),
        ];
        Permutation { n, half, keys }
    }

    fn feistel(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half) - 1;
        let (mut l, mut r) = (x >> self.half, x & mask);
        for k in self.keys {
            let f = mix64(r ^ k) & mask;
            (l, r) = (r, l ^ f);
        }
        (l << self.half) | r
    }

    /// The image of `i` (`i < n`); values `>= n` are returned unchanged.
    pub fn apply(&self, i: u64) -> u64 {
        if i >= self.n {
            return i;
        }
        // The Feistel domain is at most 4n, so this takes a few steps on
        // average; it ends because i's cycle comes back to i.
        let mut y = self.feistel(i);
        while y >= self.n {
            y = self.feistel(y);
        }
        y
    }
}

/// The offsets of one job, in bytes, always `bs`-aligned and with
/// `offset + bs <= size`.
#[derive(Debug, Clone)]
pub struct OffsetGen {
    bs: u64,
    blocks: u64,
    random: bool,
    seed: u64,
    /// Sequential: next block per direction.
    seq: [u64; 2],
    /// Random: the current pass's order, position in it, pass number.
    perm: Permutation,
    idx: u64,
    pass: u64,
    /// Zipf ranks, their generator, and the permutation scattering them.
    zipf: Option<(Zipf, SplitMix64, Permutation)>,
}

impl OffsetGen {
    /// The generator for job `job` of `spec`.
    pub fn new(spec: &JobSpec, job: u32) -> OffsetGen {
        let blocks = spec.ios_per_job().max(1);
        let seed = spec.randseed.wrapping_add(u64::from(job));
        OffsetGen {
            bs: spec.bs,
            blocks,
            random: spec.rw.is_random(),
            seed,
            seq: [0, 0],
            perm: Permutation::new(blocks, pass_seed(seed, 0)),
            idx: 0,
            pass: 0,
            zipf: spec.zipf_theta.filter(|_| spec.rw.is_random()).map(|t| {
                (
                    Zipf::new(blocks, t),
                    SplitMix64::new(mix64(seed ^ 0x7a69_7066)),
                    Permutation::new(blocks, mix64(seed ^ 0x0073_6361_7474)),
                )
            }),
        }
    }

    /// Number of bs-sized blocks the offsets cover.
    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    /// The offset of the next I/O in direction `dir`.
    pub fn next_offset(&mut self, dir: Ddir) -> u64 {
        let block = if let Some((z, rng, scatter)) = &mut self.zipf {
            scatter.apply(z.next(rng))
        } else if self.random {
            let b = self.perm.apply(self.idx);
            self.idx += 1;
            if self.idx >= self.blocks {
                self.idx = 0;
                self.pass = self.pass.wrapping_add(1);
                self.perm = Permutation::new(self.blocks, pass_seed(self.seed, self.pass));
            }
            b
        } else {
            let s = &mut self.seq[dir.index()];
            let b = *s;
            *s = if b + 1 >= self.blocks { 0 } else { b + 1 };
            b
        };
        block.saturating_mul(self.bs)
    }
}

fn pass_seed(seed: u64, pass: u64) -> u64 {
    mix64(seed ^ mix64(pass.wrapping_add(0x6f66_6673_6574)))
}

/// Chooses the direction of each I/O of one job.
#[derive(Debug, Clone)]
pub struct Mix {
    rw: Rw,
    rwmixread: u64,
    rng: SplitMix64,
}

impl Mix {
    /// The direction chooser for job `job` of `spec`.
    pub fn new(spec: &JobSpec, job: u32) -> Mix {
        let seed = spec.randseed.wrapping_add(u64::from(job));
        Mix {
            rw: spec.rw,
            rwmixread: u64::from(spec.rwmixread),
            rng: SplitMix64::new(mix64(seed ^ 0x0072_776d_6978)),
        }
    }

    /// The direction of the next I/O.
    pub fn pick(&mut self) -> Ddir {
        if !self.rw.is_mixed() {
            return if self.rw.reads() {
                Ddir::Read
            } else {
                Ddir::Write
            };
        }
        if self.rng.below(100) < self.rwmixread {
            Ddir::Read
        } else {
            Ddir::Write
        }
    }
}
