//! `ln`, `exp` and `powf` for `f64` without `std` or libm (the kernel is
//! `no_std`): range reduction to a small interval, then a series. Accurate
//! to a few ulps over the range the zipf generators and the gamma draws
//! use; host tests compare with `std`. The one copy of these for the
//! workloads, fio and the datasets (`userland::fio::fmath` re-exports it).

const LN2: f64 = core::f64::consts::LN_2;

/// Natural logarithm; NaN for `x < 0` or NaN, `-inf` for 0, `inf` for `inf`.
pub fn ln(x: f64) -> f64 {
    if x.is_nan() || x < 0.0 {
        return f64::NAN;
    }
    if x == 0.0 {
        return f64::NEG_INFINITY;
    }
    if x.is_infinite() {
        return f64::INFINITY;
    }
    // x = m * 2^e with m in [1, 2); subnormals scaled up first.
    let (x, bias) = if x < f64::MIN_POSITIVE {
        (x * pow2(54), -54)
    } else {
        (x, 0)
    };
    let bits = x.to_bits();
    let mut e = ((bits >> 52) & 0x7ff) as i32 - 1023 + bias;
    let mut m = f64::from_bits((bits & ((1u64 << 52) - 1)) | (1023u64 << 52));
    // m in [sqrt(1/2), sqrt(2)) so that |s| below is at most 0.172.
    if m > core::f64::consts::SQRT_2 {
        m *= 0.5;
        e += 1;
    }
    // ln(m) = 2 atanh(s) = 2 (s + s^3/3 + s^5/5 + ...), s = (m-1)/(m+1).
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
    f64::from(e) * LN2 + 2.0 * sum
}

/// `e^x`; 0 below -745, `inf` above 709.8.
pub fn exp(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    if x > 709.78 {
        return f64::INFINITY;
    }
    if x < -745.2 {
        return 0.0;
    }
    // x = k ln2 + r, |r| <= ln2/2.
    let kf = x / LN2;
    let k = if kf >= 0.0 {
        (kf + 0.5) as i32
    } else {
        (kf - 0.5) as i32
    };
    let r = x - f64::from(k) * LN2;
    let mut term = 1.0;
    let mut sum = 1.0;
    let mut n = 1.0;
    while n < 24.0 {
        term *= r / n;
        sum += term;
        n += 1.0;
    }
    // Scale by 2^k in two steps so that neither factor overflows.
    let half = k / 2;
    sum * pow2(half) * pow2(k - half)
}

/// `2^k` for `k` in -1022..=1023 (0 below, `inf` above).
fn pow2(k: i32) -> f64 {
    if k < -1022 {
        return 0.0;
    }
    if k > 1023 {
        return f64::INFINITY;
    }
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// `x^y` for `x > 0` (NaN otherwise, except `0^y` = 0 for `y > 0`).
pub fn powf(x: f64, y: f64) -> f64 {
    if x == 0.0 && y > 0.0 {
        return 0.0;
    }
    if x == 1.0 || y == 0.0 {
        return 1.0;
    }
    exp(y * ln(x))
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        a == b || ((a - b) / b).abs() <= rel
    }

    #[test]
    fn ln_matches_std() {
        let mut x = 1e-300;
        while x < 1e300 {
            for f in [1.0, 1.3, 1.41, 1.42, 1.9, 2.7] {
                let v = x * f;
                assert!(
                    close(ln(v), v.ln(), 1e-14) || (ln(v) - v.ln()).abs() < 1e-15,
                    "{v}"
                );
            }
            x *= 7.3;
        }
        assert!(close(ln(5e-320), 5e-320f64.ln(), 1e-12), "subnormal");
        assert_eq!(ln(1.0), 0.0);
        assert!(ln(-1.0).is_nan() && ln(f64::NAN).is_nan());
        assert_eq!(ln(0.0), f64::NEG_INFINITY);
        assert_eq!(ln(f64::INFINITY), f64::INFINITY);
    }

    #[test]
    fn exp_matches_std() {
        let mut x = -708.0; // below, results are subnormal (fewer bits)
        while x < 709.0 {
            assert!(
                close(exp(x), x.exp(), 1e-13),
                "{x}: {} vs {}",
                exp(x),
                x.exp()
            );
            x += 0.737;
        }
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(800.0), f64::INFINITY);
        assert_eq!(exp(-800.0), 0.0);
        assert!(exp(f64::NAN).is_nan());
    }

    #[test]
    fn powf_matches_std() {
        for x in [1e-9, 0.001, 0.5, 0.99, 2.0, 3.0, 1000.0, 1e7] {
            for y in [-100.0, -1.2, -0.99, -0.5, 0.01, 0.5, 1.0, 2.5, 50.0] {
                let (a, b): (f64, f64) = (powf(x, y), std::primitive::f64::powf(x, y));
                assert!(close(a, b, 1e-12), "{x}^{y}: {a} vs {b}");
            }
        }
        assert_eq!(powf(0.0, 2.0), 0.0);
        assert_eq!(powf(7.0, 0.0), 1.0);
    }
}
