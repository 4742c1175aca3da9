//! Percentiles and latency summaries (integer-only, so they work the same
//! in the kernel and on the host), and the [`keys`] of the `cache stats`
//! and `dir stats` tables.

pub use osapi::keys;
pub mod miss;

/// The `per_mille`-th percentile of `sorted` (ascending) by the
/// nearest-rank method: the smallest sample such that at least
/// `per_mille / 1000` of all samples are less than or equal to it.
///
/// `per_mille` is in thousandths: 500 is the median, 990 is p99, 999 is
/// p99.9; values above 1000 are treated as 1000 (the maximum), 0 gives the
/// minimum. Returns `None` for no samples.
pub fn percentile(sorted: &[u64], per_mille: u32) -> Option<u64> {
    let n = sorted.len() as u128;
    if n == 0 {
        return None;
    }
    let p = u128::from(per_mille.min(1000));
    // rank = ceil(p * n / 1000), at least 1.
    let rank = (p * n).div_ceil(1000).max(1);
    let idx = usize::try_from(rank - 1).ok()?;
    sorted.get(idx).copied()
}

/// A summary of latency samples (all values in the samples' unit, usually
/// nanoseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// Number of samples.
    pub count: usize,
    /// Smallest sample.
    pub min: u64,
    /// Median (nearest rank).
    pub median: u64,
    /// Arithmetic mean, rounded down.
    pub mean: u64,
    /// 99th percentile (nearest rank).
    pub p99: u64,
    /// Largest sample.
    pub max: u64,
}

impl Summary {
    /// Summarise `samples`, sorting them in place. `None` if empty.
    pub fn from_samples(samples: &mut [u64]) -> Option<Summary> {
        samples.sort_unstable();
        let (&min, &max) = (samples.first()?, samples.last()?);
        let sum: u128 = samples.iter().map(|&s| u128::from(s)).sum();
        let mean = u64::try_from(sum / samples.len() as u128).unwrap_or(u64::MAX);
        Some(Summary {
            count: samples.len(),
            min,
            median: percentile(samples, 500)?,
            mean,
            p99: percentile(samples, 990)?,
            max,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn empty_has_no_percentile() {
        assert_eq!(percentile(&[], 500), None);
        assert_eq!(Summary::from_samples(&mut []), None);
    }

    #[test]
    fn single_sample() {
        for p in [0, 1, 500, 990, 1000, 5000] {
            assert_eq!(percentile(&[7], p), Some(7));
        }
    }

    #[test]
    fn nearest_rank_small() {
        let s = [10, 20, 30, 40];
        assert_eq!(percentile(&s, 0), Some(10));
        assert_eq!(percentile(&s, 250), Some(10));
        assert_eq!(percentile(&s, 251), Some(20));
        assert_eq!(percentile(&s, 500), Some(20));
        assert_eq!(percentile(&s, 501), Some(30));
        assert_eq!(percentile(&s, 990), Some(40));
        assert_eq!(percentile(&s, 1000), Some(40));
        assert_eq!(percentile(&s, u32::MAX), Some(40));
        let s = [1, 2, 3];
        assert_eq!(percentile(&s, 500), Some(2));
    }

    #[test]
    fn nearest_rank_hundred() {
        let s: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&s, 500), Some(50));
        assert_eq!(percentile(&s, 990), Some(99));
        assert_eq!(percentile(&s, 999), Some(100));
        assert_eq!(percentile(&s, 10), Some(1));
        let s: Vec<u64> = (1..=1000).collect();
        assert_eq!(percentile(&s, 990), Some(990));
        assert_eq!(percentile(&s, 999), Some(999));
    }

    #[test]
    fn summary_sorts_and_summarises() {
        let mut s: Vec<u64> = (1..=200).rev().collect();
        let sum = Summary::from_samples(&mut s).unwrap();
        assert_eq!(
            sum,
            Summary {
                count: 200,
                min: 1,
                median: 100,
                mean: 100,
                p99: 198,
                max: 200,
            }
        );
        assert!(s.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn summary_with_outlier_and_huge_values() {
        let mut s = alloc::vec![u64::MAX, u64::MAX, 5];
        let sum = Summary::from_samples(&mut s).unwrap();
        assert_eq!(sum.min, 5);
        assert_eq!(sum.median, u64::MAX);
        assert_eq!(sum.max, u64::MAX);
        assert!(sum.mean > u64::MAX / 2);
    }
}
