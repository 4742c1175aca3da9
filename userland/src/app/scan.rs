//! `app kv`'s scan mix (cache_ext's GET-SCAN workload, seed 004: GETs
//! with a small share of range scans run by other tasks): `--scan-frac F`
//! makes a fraction F of the top-level operations range scans, each
//! reading `--scan-len N` consecutive table blocks from a random start;
//! `--scan-group NAME` runs the scans' reads in task group NAME (cache_ext
//! tells SCAN from GET by the requesting PID; here by the group, which is
//! what the `get-scan` policy looks at).
//!
//! The schedule is exact, not random: operation number n (1-based, over
//! all threads) is a scan when `floor(n * F)` steps past
//! `floor((n - 1) * F)`, so N operations hold exactly `floor(N * F)`
//! scans, evenly spread.

use alloc::format;
use alloc::string::String;

use super::options::{bad, parse_fraction, Options};
use super::AppError;
use crate::os::{Errno, Os, MAX_GROUPS};

/// The options this adds to `kv`.
pub const OPTIONS: &[&str] = &["scan-frac", "scan-len", "scan-group"];
/// Default `--scan-len` in blocks (4 MiB).
pub const DEFAULT_LEN: u64 = 1024;
/// Largest `--scan-len`.
pub const MAX_LEN: u64 = 1 << 20;
/// Blocks a scan reads per I/O.
pub const CHUNK_BLOCKS: u64 = 64;
/// Fractions are kept in parts per billion.
const PPB: u64 = 1_000_000_000;

/// The scan mix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanMix {
    /// Share of operations that are scans, in parts per billion (0: none).
    pub ppb: u64,
    /// Blocks per scan.
    pub len: u64,
    /// Task group of the scans' reads (`None`: the command's).
    pub group: Option<String>,
}

impl ScanMix {
    /// From the parsed options (errors name the option).
    pub fn from(o: &Options) -> Result<ScanMix, AppError> {
        let ppb = match o.take("scan-frac") {
            None => 0,
            Some(v) => parse_fraction(v)
                .filter(|f| (0.0..=1.0).contains(f))
                .map(|f| (f * PPB as f64 + 0.5) as u64)
                .ok_or_else(|| bad("scan-frac", v, "a fraction 0..=1, like 0.0005"))?,
        };
        let len = o.count("scan-len", DEFAULT_LEN, 1, MAX_LEN)?;
        let group = match o.take("scan-group") {
            None => None,
            Some(g) if crate::os::valid_group_name(g) => Some(String::from(g)),
            Some(g) => return Err(bad("scan-group", g, "1 to 32 of A-Z a-z 0-9 _ - .")),
        };
        if ppb == 0 && (o.take("scan-len").is_some() || group.is_some()) {
            return Err(AppError::new(String::from(
                "--scan-len and --scan-group need --scan-frac above 0",
            )));
        }
        Ok(ScanMix { ppb, len, group })
    }

    /// Are there scans at all?
    pub fn on(&self) -> bool {
        self.ppb > 0
    }

    /// Is operation number `n` (1-based, over all threads) a scan?
    pub fn is_scan(&self, n: u64) -> bool {
        if n == 0 || self.ppb == 0 {
            return false;
        }
        let at = |k: u64| (u128::from(k) * u128::from(self.ppb) / u128::from(PPB)) as u64;
        at(n) > at(n - 1)
    }

    /// Scans among the first `n` operations.
    pub fn scans_in(&self, n: u64) -> u64 {
        (u128::from(n) * u128::from(self.ppb) / u128::from(PPB)) as u64
    }

    /// The scan length checked against a table of `blocks` data blocks.
    pub fn check(&self, blocks: u64) -> Result<(), AppError> {
        if self.on() && self.len > blocks {
            return Err(AppError::new(format!(
                "--scan-len {} is longer than the table ({blocks} blocks)",
                self.len
            )));
        }
        Ok(())
    }

    /// The fraction as text (`0.0005`).
    pub fn frac_text(&self) -> String {
        let mut s = format!("{}.{:09}", self.ppb / PPB, self.ppb % PPB);
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.push('0');
        }
        s
    }
}

/// Put this node's tasks in group `name` (a scan's reads, or back to the
/// command's group after one).
pub fn enter(os: &mut dyn Os, name: &str) -> Result<(), AppError> {
    os.set_task_group(name).map_err(|e| {
        AppError::new(match e {
            Errno::NotSupported => String::from(
                "--scan-group: task groups need a single-copy mode (strong or relaxed): not supported",
            ),
            Errno::NoSpace => format!("--scan-group: too many groups (at most {MAX_GROUPS})"),
            e => format!("--scan-group {name}: {e}"),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mix(args: &[&str]) -> Result<ScanMix, AppError> {
        let mut known = alloc::vec::Vec::from(OPTIONS);
        known.push("dist");
        ScanMix::from(&Options::parse(args, &known)?)
    }

    #[test]
    fn the_schedule_is_exact_and_spread() {
        let m = mix(&["--scan-frac", "0.25"]).unwrap();
        let scans: alloc::vec::Vec<u64> = (1..=12).filter(|&n| m.is_scan(n)).collect();
        assert_eq!(scans, [4, 8, 12]);
        let m = mix(&["--scan-frac=0.0005"]).unwrap();
        assert_eq!(m.ppb, 500_000);
        assert_eq!((1..=10_000).filter(|&n| m.is_scan(n)).count(), 5);
        assert_eq!(m.scans_in(10_000), 5);
        assert_eq!(m.frac_text(), "0.0005");
        assert!(!m.is_scan(0));
        let all = mix(&["--scan-frac", "1"]).unwrap();
        assert!((1..100).all(|n| all.is_scan(n)));
        assert_eq!(all.frac_text(), "1.0");
        let none = mix(&[]).unwrap();
        assert!(!none.on() && !(1..1000).any(|n| none.is_scan(n)));
    }

    #[test]
    fn bad_values_are_clear_errors() {
        let e = |a: &[&str]| mix(a).unwrap_err().message().to_string();
        assert!(e(&["--scan-frac", "1.5"]).contains("--scan-frac"));
        assert!(e(&["--scan-frac", "-1"]).contains("--scan-frac"));
        assert!(e(&["--scan-frac", "x"]).contains("0..=1"));
        assert!(e(&["--scan-frac", "0.1", "--scan-len", "0"]).contains("--scan-len"));
        assert!(e(&["--scan-frac", "0.1", "--scan-group", "a b"]).contains("--scan-group"));
        assert!(e(&["--scan-len", "8"]).contains("need --scan-frac"));
        let m = mix(&["--scan-frac", "0.1", "--scan-len", "9", "--scan-group", "s"]).unwrap();
        assert_eq!(m.group.as_deref(), Some("s"));
        assert!(m
            .check(8)
            .unwrap_err()
            .message()
            .contains("longer than the table"));
        assert!(m.check(9).is_ok());
    }
}
