//! fio's `--random_distribution=zipf:THETA`: block ranks drawn from a
//! Zipf distribution with exponent theta (rank 0 the most frequent), by
//! the method of Gray et al., "Quickly generating billion-record synthetic
//! databases" (SIGMOD 1994), which fio (`lib/zipf.c`) and YCSB also use.
//! As in fio, theta must be positive and not 1, and the normalising sum
//! is computed over at most [`MAX_ZETA_TERMS`] ranks (an approximation
//! above that). The caller scatters ranks over the file.

use datasets::fmath::powf;
use fabric::rng::SplitMix64;

/// Most terms of the normalising sum (fio stops at 10 million; the kernel
/// computes in soft float, so we stop earlier: 2^20 ranks are 4 GiB of
/// 4 KiB blocks).
pub const MAX_ZETA_TERMS: u64 = 1 << 20;

/// theta is kept in millionths so that job specs compare exactly.
pub const THETA_SCALE: u32 = 1_000_000;

/// A Zipf generator over ranks `[0, n)`.
#[derive(Debug, Clone)]
pub struct Zipf {
    n: u64,
    theta: f64,
    zetan: f64,
    zeta2: f64,
    alpha: f64,
    eta: f64,
}

fn zeta(n: u64, theta: f64) -> f64 {
    let mut sum = 0.0;
    let mut i = 1;
    while i <= n.min(MAX_ZETA_TERMS) {
        sum += powf(i as f64, -theta);
        i += 1;
    }
    sum
}

impl Zipf {
    /// A generator over `n >= 1` ranks with exponent `theta_millionths /
    /// 1e6` (positive, not 1: [`parse_theta`] checks).
    pub fn new(n: u64, theta_millionths: u32) -> Zipf {
        let n = n.max(1);
        let theta = f64::from(theta_millionths) / f64::from(THETA_SCALE);
        let zetan = zeta(n, theta);
        let zeta2 = 1.0 + powf(2.0, -theta);
        let alpha = 1.0 / (1.0 - theta);
        let eta = (1.0 - powf(2.0 / n as f64, 1.0 - theta)) / (1.0 - zeta2 / zetan);
        Zipf {
            n,
            theta,
            zetan,
            zeta2,
            alpha,
            eta,
        }
    }

    /// The exponent.
    pub fn theta(&self) -> f64 {
        self.theta
    }

    /// The next rank, in `[0, n)`.
    pub fn next(&self, rng: &mut SplitMix64) -> u64 {
        // 53 random bits as a uniform double in [0, 1).
        let u = (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        let uz = u * self.zetan;
        if uz < 1.0 || self.n == 1 {
            return 0;
        }
        if uz < self.zeta2 || self.n == 2 {
            return 1;
        }
        let v = self.n as f64 * powf(self.eta * u - self.eta + 1.0, self.alpha);
        if v.is_nan() || v < 0.0 {
            return 0;
        }
        (v as u64).min(self.n - 1)
    }
}

/// Parses fio's THETA of `zipf:THETA` (a decimal number, positive, not 1,
/// at most 100) into millionths.
pub fn parse_theta(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    let t: f64 = s.parse().ok()?;
    if !(t > 0.0 && t <= 100.0) {
        return None;
    }
    let m = (t * f64::from(THETA_SCALE) + 0.5) as u32;
    (m != 0 && m != THETA_SCALE).then_some(m)
}

/// `theta_millionths` as fio writes it (`0.99`, `1.2`).
pub fn theta_str(m: u32) -> alloc::string::String {
    let mut s = alloc::format!("{}.{:06}", m / THETA_SCALE, m % THETA_SCALE);
    while s.ends_with('0') {
        s.pop();
    }
    if s.ends_with('.') {
        s.push('0');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn histogram(n: u64, theta_m: u32, draws: u32) -> alloc::vec::Vec<u32> {
        let z = Zipf::new(n, theta_m);
        let mut rng = SplitMix64::new(42);
        let mut h = vec![0u32; n as usize];
        for _ in 0..draws {
            let r = z.next(&mut rng);
            assert!(r < n, "rank {r} out of [0, {n})");
            h[r as usize] += 1;
        }
        h
    }

    #[test]
    fn frequencies_follow_the_law() {
        // theta 0.99 over 1000 ranks: P(rank k) = (k+1)^-0.99 / zeta.
        let (n, draws) = (1000u64, 400_000u32);
        let h = histogram(n, 990_000, draws);
        let zn: f64 = (1..=n).map(|i| (i as f64).powf(-0.99)).sum();
        for k in [0usize, 1] {
            let want = ((k + 1) as f64).powf(-0.99) / zn * f64::from(draws);
            let got = f64::from(h[k]);
            assert!(
                (got - want).abs() / want < 0.05,
                "rank {k}: {got} vs {want}"
            );
        }
        // The hot tenth of the ranks gets most of the draws.
        let hot: u32 = h[..100].iter().sum();
        let want: f64 = (1..=100).map(|i| (i as f64).powf(-0.99)).sum::<f64>() / zn;
        let got = f64::from(hot) / f64::from(draws);
        assert!((got - want).abs() < 0.03, "top 10%: {got} vs {want}");
        assert!(got > 0.6, "top 10% only {got}");
    }

    #[test]
    fn higher_theta_is_more_skewed_and_theta_above_one_works() {
        let a = histogram(500, 500_000, 50_000);
        let b = histogram(500, 1_200_000, 50_000);
        assert!(b[0] > a[0] * 2, "{} vs {}", b[0], a[0]);
        let tail_b: u32 = b[250..].iter().sum();
        let tail_a: u32 = a[250..].iter().sum();
        assert!(tail_b < tail_a);
    }

    #[test]
    fn tiny_ranges() {
        assert_eq!(histogram(1, 990_000, 100)[0], 100);
        let h = histogram(2, 990_000, 1000);
        assert!(h[0] > h[1] && h[1] > 0, "{h:?}");
        assert_eq!(histogram(3, 2_000_000, 1000).len(), 3);
    }

    #[test]
    fn theta_parsing() {
        assert_eq!(parse_theta("0.99"), Some(990_000));
        assert_eq!(parse_theta("1.2"), Some(1_200_000));
        assert_eq!(parse_theta("2"), Some(2_000_000));
        assert_eq!(parse_theta(".5"), Some(500_000));
        for bad in [
            "",
            "1",
            "1.0",
            "0",
            "0.0",
            "-0.5",
            "abc",
            "1e3",
            "0.5x",
            "101",
            "nan",
            "inf",
            "0.0000001",
        ] {
            assert_eq!(parse_theta(bad), None, "{bad}");
        }
        assert_eq!(theta_str(990_000), "0.99");
        assert_eq!(theta_str(1_200_000), "1.2");
        assert_eq!(theta_str(2_000_000), "2.0");
    }
}
