//! The proptest configuration every fuzz target of the workspace shares.
//!
//! A target runs `default` cases so a plain `cargo test` stays fast;
//! `PROPTEST_CASES=N` overrides every budget for a longer run. A failing
//! case is shrunk, printed, and its seed persisted in `regressions` (a
//! path relative to the crate root, where cargo runs tests; the files are
//! committed), where every later run replays it first.

#![forbid(unsafe_code)]

use proptest::test_runner::{Config, FileFailurePersistence};

/// The case budget: `PROPTEST_CASES` when it is set to a number, else
/// `default`.
pub fn budget(default: u32, env: Option<&str>) -> u32 {
    env.and_then(|v| v.trim().parse().ok()).unwrap_or(default)
}

/// The configuration of one fuzz target: [`budget`] cases, failures
/// persisted in `regressions`.
pub fn config(default: u32, regressions: &'static str) -> Config {
    Config {
        cases: budget(default, std::env::var("PROPTEST_CASES").ok().as_deref()),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(regressions))),
        ..Config::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_overrides_the_default_budget() {
        assert_eq!(budget(64, None), 64);
        assert_eq!(budget(64, Some("1000")), 1000);
        assert_eq!(budget(64, Some(" 7 ")), 7);
        // Not a number: the default, not zero cases.
        assert_eq!(budget(64, Some("lots")), 64);
        assert_eq!(budget(64, Some("")), 64);
    }

    #[test]
    fn failures_persist_where_asked() {
        let c = config(5, "proptest-regressions/x.txt");
        let p = format!("{:?}", c.failure_persistence);
        assert!(p.contains("proptest-regressions/x.txt"), "{p}");
    }
}
