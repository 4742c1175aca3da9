//! Deterministic randomness for the workloads and their datasets: the
//! project's SplitMix64 (`fabric::rng`) seeded per stream, a keyed hash,
//! and the distributions the workloads draw from (uniform ranges,
//! Filebench's gamma file sizes, YCSB's zipfian keys), computed with
//! [`crate::fmath`] (`core` has no `ln` in `no_std`).

use fabric::rng::{mix64, SplitMix64, GOLDEN};

use crate::fmath::{ln, powf};

/// SplitMix64 (`fabric::rng`) for one seed and stream, with the
/// workloads' distributions on top.
#[derive(Debug, Clone)]
pub struct Rng(SplitMix64);

/// One step of SplitMix64 from `x`: a good 64-bit mix of it.
fn mix(x: u64) -> u64 {
    mix64(x.wrapping_add(GOLDEN))
}

/// A hash of two words (seed and position, token and layer, ...).
pub fn hash2(a: u64, b: u64) -> u64 {
    mix(mix(a) ^ b.rotate_left(17))
}

impl Rng {
    /// A generator for `seed` (and a stream number, so threads of one
    /// run draw different sequences): SplitMix64 started one step past
    /// `hash2(seed, stream)`.
    pub fn new(seed: u64, stream: u64) -> Rng {
        Rng(SplitMix64::new(hash2(seed, stream).wrapping_add(GOLDEN)))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `0..n` (0 for `n == 0`), by multiply-shift (one draw
    /// each, unlike `SplitMix64::below`'s rejection, so a workload's
    /// draws do not depend on the values drawn).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo).saturating_add(1))
    }

    /// Uniform in (0, 1]: never 0, so `ln` of it is finite.
    pub fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// Gamma-distributed with shape 1.5 and the given mean (Filebench's
    /// `cvar-gamma` file sizes with `gamma:1.5`): an exponential with
    /// scale `mean / 1.5` plus half a squared normal of the same scale
    /// (Gamma(1) + Gamma(1/2)); the normal is Irwin-Hall (12 uniforms),
    /// so the tail is cut at 6 sigma. Rounded, at least 1.
    pub fn gamma15(&mut self, mean: u64) -> u64 {
        let theta = mean as f64 / 1.5;
        let e = -ln(self.unit());
        let mut z = -6.0;
        for _ in 0..12 {
            z += self.unit();
        }
        let v = theta * (e + z * z / 2.0);
        (v + 0.5).max(1.0) as u64
    }
}

/// Most items a [`Zipf`] draws from (its setup sums one term per item).
pub const MAX_ZIPF_ITEMS: u64 = 1 << 26;

/// YCSB's zipfian generator (Gray et al., "Quickly generating
/// billion-record synthetic databases"): item `i` of `n` has weight
/// `1 / (i+1)^theta`, `0 < theta < 1`; rank 0 is the hottest.
#[derive(Debug, Clone)]
pub struct Zipf {
    n: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    half_pow_theta: f64,
}

impl Zipf {
    /// The distribution over `n` items (`1..=MAX_ZIPF_ITEMS`) with
    /// exponent `theta` (in (0, 1)); `None` outside those ranges.
    pub fn new(n: u64, theta: f64) -> Option<Zipf> {
        if !(theta > 0.0 && theta < 1.0) || n == 0 || n > MAX_ZIPF_ITEMS {
            return None;
        }
        let mut zetan = 0.0;
        for i in 1..=n {
            zetan += 1.0 / powf(i as f64, theta);
        }
        let zeta2 = 1.0 + 1.0 / powf(2.0, theta);
        let eta = (1.0 - powf(2.0 / n as f64, 1.0 - theta)) / (1.0 - zeta2 / zetan);
        Some(Zipf {
            n,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta,
            half_pow_theta: powf(0.5, theta),
        })
    }

    /// The exponent.
    pub fn theta(&self) -> f64 {
        self.theta
    }

    /// A rank in `0..n` (0 the most likely).
    pub fn sample(&self, rng: &mut Rng) -> u64 {
        let u = rng.unit();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + self.half_pow_theta {
            return 1.min(self.n - 1);
        }
        let r = self.n as f64 * powf(self.eta * u - self.eta + 1.0, self.alpha);
        (r as u64).min(self.n - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn sequences_are_the_workloads_own() {
        // The values every dataset and benchmark was built with: a change
        // here changes every dataset's bytes and every run's choices.
        let mut r = Rng::new(7, 0);
        assert_eq!(r.next_u64(), 0x68bf_fcd4_b372_ef48);
        assert_eq!(r.next_u64(), 0xff2a_2af9_7c9c_6861);
        assert_eq!(r.next_u64(), 0x19f4_e3db_1165_03dc);
        assert_eq!(hash2(1, 2), 0xeb49_39e6_1d87_c848);
    }

    #[test]
    fn rng_is_deterministic_and_streams_differ() {
        let a: Vec<u64> = {
            let mut r = Rng::new(7, 0);
            (0..5).map(|_| r.next_u64()).collect()
        };
        let b: Vec<u64> = {
            let mut r = Rng::new(7, 0);
            (0..5).map(|_| r.next_u64()).collect()
        };
        let c: Vec<u64> = {
            let mut r = Rng::new(7, 1);
            (0..5).map(|_| r.next_u64()).collect()
        };
        assert_eq!(a, b);
        assert_ne!(a, c);
        let mut r = Rng::new(1, 2);
        for _ in 0..1000 {
            assert!(r.below(10) < 10);
            let v = r.range(3, 5);
            assert!((3..=5).contains(&v));
        }
        assert_eq!(r.below(0), 0);
    }

    #[test]
    fn gamma_has_the_asked_mean_and_a_spread() {
        let mut r = Rng::new(42, 0);
        let n = 20000;
        let v: Vec<u64> = (0..n).map(|_| r.gamma15(16384)).collect();
        let mean = v.iter().sum::<u64>() / n;
        assert!((15500..17300).contains(&mean), "mean {mean}");
        let small = v.iter().filter(|&&x| x < 4096).count();
        let big = v.iter().filter(|&&x| x > 49152).count();
        assert!(small > 500 && big > 100, "small {small} big {big}");
    }

    #[test]
    fn zipf_skews_to_low_ranks_and_rejects_bad_theta() {
        assert!(Zipf::new(100, 0.0).is_none());
        assert!(Zipf::new(100, 1.0).is_none());
        assert!(Zipf::new(0, 0.5).is_none());
        let z = Zipf::new(1000, 0.99).unwrap();
        let mut r = Rng::new(3, 0);
        let mut hot = 0;
        for _ in 0..10000 {
            let k = z.sample(&mut r);
            assert!(k < 1000);
            if k < 10 {
                hot += 1;
            }
        }
        // The 10 hottest of 1000 take about 39% of draws at theta 0.99.
        assert!(hot > 3000 && hot < 5000, "hot {hot}");
    }
}
