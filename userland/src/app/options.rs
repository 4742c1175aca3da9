//! The options every `app` shares (`--runtime S`, `--warmup S`, `--threads N`,
//! `--seed X`, `--ops N`, `--dir PATH`, `--group NAME`) and the workload's own ones,
//! each as `--opt VALUE` or `--opt=VALUE`. Everything is checked before
//! anything runs; an unknown option or a bad value is one clear error.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use super::AppError;
use crate::fio::options::time_ns;
use crate::parse;

/// Default `--runtime`: 10 s.
pub const DEFAULT_RUNTIME_NS: u64 = 10_000_000_000;
/// Longest `--warmup`: 1 h.
pub const MAX_WARMUP_NS: u64 = 3_600_000_000_000;
/// Largest `--threads` (tasks on one node).
pub const MAX_THREADS: u32 = 256;
/// Default `--seed`.
pub use datasets::DEFAULT_SEED;
/// Longest user text quoted back in an error.
const MAX_QUOTED: usize = 48;

/// Parsed options: the shared ones, and the workload's own still as
/// text (taken with [`Options::take`], then [`Options::finish`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// `--runtime`: stop issuing new operations after this long (ns).
    pub runtime_ns: u64,
    /// `--warmup`: run this long first without counting (ns; 0: none).
    pub warmup_ns: u64,
    /// `--threads`: tasks, `None` for the workload's default.
    pub threads: Option<u32>,
    /// `--seed`: every random choice of the run derives from it.
    pub seed: u64,
    /// `--ops`: stop after this many top-level operations in total
    /// (0: no limit; the run ends at `--runtime`).
    pub ops: u64,
    /// `--dir`: the dataset's directory (default `/apps/NAME`).
    pub dir: Option<String>,
    /// `--group`: the task group the workload's tasks run in (`None`:
    /// the node's, `default`).
    pub group: Option<String>,
    extra: Vec<(String, String)>,
}

fn quoted(s: &str) -> String {
    if s.len() <= MAX_QUOTED {
        return s.to_string();
    }
    let mut end = MAX_QUOTED;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

/// `bad value 'V' for --KEY (WANT)`.
pub fn bad(key: &str, v: &str, want: &str) -> AppError {
    AppError::new(format!("bad value '{}' for --{key} ({want})", quoted(v)))
}

impl Options {
    /// Parse `args` (after `app NAME`); `known` lists the workload's own
    /// option names (without `--`).
    pub fn parse(args: &[&str], known: &[&str]) -> Result<Options, AppError> {
        let mut o = Options {
            runtime_ns: DEFAULT_RUNTIME_NS,
            warmup_ns: 0,
            threads: None,
            seed: DEFAULT_SEED,
            ops: 0,
            dir: None,
            group: None,
            extra: Vec::new(),
        };
        let mut i = 0;
        while i < args.len() {
            let arg = args[i];
            i += 1;
            let Some(body) = arg.strip_prefix("--") else {
                return Err(AppError::new(format!(
                    "unexpected argument '{}' (options are --NAME VALUE)",
                    quoted(arg)
                )));
            };
            let (key, value) = match body.split_once('=') {
                Some((k, v)) => (k, v),
                None => {
                    let Some(v) = args.get(i) else {
                        return Err(AppError::new(format!("--{} needs a value", quoted(body))));
                    };
                    i += 1;
                    (body, *v)
                }
            };
            match key {
                "runtime" => {
                    o.runtime_ns = time_ns(value)
                        .filter(|&t| t > 0)
                        .ok_or_else(|| bad(key, value, "seconds > 0, or with ms/s/m"))?;
                }
                "warmup" => {
                    o.warmup_ns =
                        time_ns(value)
                            .filter(|&t| t <= MAX_WARMUP_NS)
                            .ok_or_else(|| {
                                bad(key, value, "seconds (0: none), or with ms/s/m; at most 1 h")
                            })?;
                }
                "threads" => {
                    o.threads = Some(
                        parse::u64_dec(value)
                            .ok()
                            .and_then(|n| u32::try_from(n).ok())
                            .filter(|n| (1..=MAX_THREADS).contains(n))
                            .ok_or_else(|| bad(key, value, "1..=256"))?,
                    );
                }
                "seed" => {
                    o.seed = parse_u64(value).ok_or_else(|| bad(key, value, "an integer"))?;
                }
                "ops" => {
                    o.ops = parse::u64_dec(value)
                        .ok()
                        .filter(|&n| n > 0)
                        .ok_or_else(|| bad(key, value, "a count > 0"))?;
                }
                "dir" => {
                    let p = parse::path(value)
                        .map_err(|_| bad(key, value, "an absolute path without . or .."))?;
                    o.dir = Some(p);
                }
                "group" => {
                    if !crate::os::valid_group_name(value) {
                        return Err(bad(key, value, "1 to 32 of A-Z a-z 0-9 _ - ."));
                    }
                    if o.group.replace(value.to_string()).is_some() {
                        return Err(AppError::new(String::from("--group given twice")));
                    }
                }
                k if known.contains(&k) => {
                    if o.extra.iter().any(|(e, _)| e == k) {
                        return Err(AppError::new(format!("--{k} given twice")));
                    }
                    o.extra.push((k.to_string(), value.to_string()));
                }
                k => {
                    let mut all: Vec<&str> = Vec::from([
                        "runtime", "warmup", "threads", "seed", "ops", "dir", "group",
                    ]);
                    all.extend_from_slice(known);
                    return Err(AppError::new(format!(
                        "unknown option --{} (known: --{})",
                        quoted(k),
                        all.join(" --")
                    )));
                }
            }
        }
        Ok(o)
    }

    /// The workload's own option `key`, if given.
    pub fn take(&self, key: &str) -> Option<&str> {
        self.extra
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// `--KEY` as a count in `lo..=hi`, or `default`.
    pub fn count(&self, key: &str, default: u64, lo: u64, hi: u64) -> Result<u64, AppError> {
        match self.take(key) {
            None => Ok(default),
            Some(v) => parse::u64_dec(v)
                .ok()
                .filter(|n| (lo..=hi).contains(n))
                .ok_or_else(|| bad(key, v, &format!("{lo}..={hi}"))),
        }
    }

    /// `--KEY` as a size (`4k`, `1m`) in `lo..=hi`, or `default`.
    pub fn size(&self, key: &str, default: u64, lo: u64, hi: u64) -> Result<u64, AppError> {
        match self.take(key) {
            None => Ok(default),
            Some(v) => parse::size(v)
                .ok()
                .filter(|n| (lo..=hi).contains(n))
                .ok_or_else(|| bad(key, v, &format!("a size in {lo}..={hi} bytes"))),
        }
    }

    /// The dataset directory for workload `name`.
    pub fn dir_for(&self, name: &str) -> String {
        self.dir.clone().unwrap_or_else(|| format!("/apps/{name}"))
    }
}

pub use datasets::num::parse_u64;

/// A decimal fraction such as `0.99` as f64 (digits, one optional dot).
pub fn parse_fraction(s: &str) -> Option<f64> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if int.len() > 9 || frac.len() > 9 {
        return None;
    }
    let i = if int.is_empty() {
        0
    } else {
        parse::u64_dec(int).ok()?
    };
    let f = if frac.is_empty() {
        0
    } else {
        parse::u64_dec(frac).ok()?
    };
    let mut scale = 1.0;
    for _ in 0..frac.len() {
        scale *= 10.0;
    }
    Some(i as f64 + f as f64 / scale)
}
