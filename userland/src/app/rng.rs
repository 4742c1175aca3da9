//! Deterministic randomness for the workloads and their datasets: a
//! SplitMix64 generator, a keyed hash, and the distributions the
//! workloads draw from (uniform ranges, Filebench's gamma file sizes,
//! YCSB's zipfian keys). `core` has no `ln` / `exp` in `no_std`, so the
//! two are computed here (f64 arithmetic only; host-checked against
//! `std` to 1e-12 relative).

/// SplitMix64: small, fast, and the same sequence everywhere.
#[derive(Debug, Clone)]
pub struct Rng(u64);

/// The SplitMix64 finaliser: a good 64-bit mix of `x`.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A hash of two words (seed and position, token and layer, ...).
pub fn hash2(a: u64, b: u64) -> u64 {
    mix(mix(a) ^ b.rotate_left(17))
}

impl Rng {
    /// A generator for `seed` (and a stream number, so threads of one
    /// run draw different sequences).
    pub fn new(seed: u64, stream: u64) -> Rng {
        Rng(hash2(seed, stream))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }

    /// Uniform in `0..n` (0 for `n == 0`), by multiply-shift.
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

/// Natural logarithm of a positive finite `x` (NaN-free: `x <= 0` gives
/// a large negative number).
pub fn ln(x: f64) -> f64 {
    if x <= 0.0 || x.is_nan() {
        return -745.0;
    }
    // x = m * 2^e with m in [sqrt(1/2), sqrt(2)).
    let bits = x.to_bits();
    let mut e = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mut m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000);
    if e == -1023 {
        // Subnormal: scale up first.
        return ln(x * (1u64 << 54) as f64) - 54.0 * core::f64::consts::LN_2;
    }
    if m > core::f64::consts::SQRT_2 {
        m /= 2.0;
        e += 1;
    }
    // ln m = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172.
    let s = (m - 1.0) / (m + 1.0);
    let s2 = s * s;
    let mut term = s;
    let mut sum = 0.0;
    let mut k = 1.0;
    while k < 40.0 {
        sum += term / k;
        term *= s2;
        k += 2.0;
    }
    2.0 * sum + e as f64 * core::f64::consts::LN_2
}

/// `e^x` (0 below -745, infinity above 709).
pub fn exp(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x < -745.0 {
        return 0.0;
    }
    if x > 709.0 {
        return f64::INFINITY;
    }
    // x = k ln2 + r, |r| <= ln2 / 2.
    let kf = x / core::f64::consts::LN_2;
    let k = if kf < 0.0 { kf - 0.5 } else { kf + 0.5 } as i64;
    let r = x - k as f64 * core::f64::consts::LN_2;
    let mut sum = 1.0;
    let mut term = 1.0;
    let mut i = 1.0;
    while i < 25.0 {
        term *= r / i;
        sum += term;
        i += 1.0;
    }
    // Multiply by 2^k in steps that stay in range.
    let mut k = k;
    while k > 0 {
        let step = k.min(1000);
        sum *= f64::from_bits(((step + 1023) as u64) << 52);
        k -= step;
    }
    while k < 0 {
        let step = (-k).min(1000);
        sum /= f64::from_bits(((step + 1023) as u64) << 52);
        k += step;
    }
    sum
}

/// `x^y` for `x > 0`.
pub fn powf(x: f64, y: f64) -> f64 {
    exp(y * ln(x))
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

    #[test]
    fn ln_and_exp_match_std() {
        for &x in &[
            1e-300, 1e-5, 0.1, 0.5, 0.999, 1.0, 1.5, 2.0, 10.0, 12345.678, 1e300,
        ] {
            let (a, b) = (ln(x), x.ln());
            assert!(
                (a - b).abs() <= 1e-12 * b.abs().max(1.0),
                "ln {x}: {a} vs {b}"
            );
        }
        for &x in &[-700.0, -20.0, -1.0, -0.3, 0.0, 0.3, 1.0, 5.5, 100.0, 700.0] {
            let (a, b) = (exp(x), x.exp());
            assert!((a - b).abs() <= 1e-12 * b.abs(), "exp {x}: {a} vs {b}");
        }
        assert_eq!(exp(-800.0), 0.0);
        assert!(exp(800.0).is_infinite());
        assert!(ln(0.0) < -700.0);
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
