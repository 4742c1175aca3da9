//! fio's command-line syntax: `--opt=value` and `--flag`.
//!
//! Only the subset in [`parse()`]'s table is accepted; anything else is
//! refused with a fio-style message before anything runs.

use alloc::format;
use alloc::string::String;

use super::FioError;
use crate::parse;

/// Smallest block size (and the granularity of every block size).
pub const MIN_BS: u64 = 512;
/// Largest block size.
pub const MAX_BS: u64 = 16 << 20;
/// Largest `--size` accepted (per job).
pub const MAX_SIZE: u64 = 1 << 40;
/// Largest `--numjobs`.
pub const MAX_JOBS: u32 = 64;
/// Largest `--iodepth`.
pub const MAX_IODEPTH: u32 = 256;
/// Longest `--name` (it becomes part of file names).
pub const MAX_NAME_LEN: usize = 48;
/// fio's default `--randseed`.
pub const DEFAULT_RANDSEED: u64 = 0x89;
/// Longest user text quoted back in an error.
const MAX_QUOTED: usize = 48;

/// The I/O pattern (`--rw`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rw {
    /// Sequential reads.
    Read,
    /// Sequential writes.
    Write,
    /// Random reads.
    RandRead,
    /// Random writes.
    RandWrite,
    /// Sequential mixed reads and writes (`rw` or `readwrite`).
    ReadWrite,
    /// Random mixed reads and writes.
    RandRw,
}

impl Rw {
    /// fio's name for the pattern (`readwrite` is shown as `rw`).
    pub fn as_str(self) -> &'static str {
        match self {
            Rw::Read => "read",
            Rw::Write => "write",
            Rw::RandRead => "randread",
            Rw::RandWrite => "randwrite",
            Rw::ReadWrite => "rw",
            Rw::RandRw => "randrw",
        }
    }

    fn from_str(s: &str) -> Option<Rw> {
        Some(match s {
            "read" => Rw::Read,
            "write" => Rw::Write,
            "randread" => Rw::RandRead,
            "randwrite" => Rw::RandWrite,
            "rw" | "readwrite" => Rw::ReadWrite,
            "randrw" => Rw::RandRw,
            _ => return None,
        })
    }

    /// Random offsets (otherwise sequential).
    pub fn is_random(self) -> bool {
        matches!(self, Rw::RandRead | Rw::RandWrite | Rw::RandRw)
    }

    /// Reads and writes are mixed (`rwmixread` applies).
    pub fn is_mixed(self) -> bool {
        matches!(self, Rw::ReadWrite | Rw::RandRw)
    }

    /// The pattern issues reads.
    pub fn reads(self) -> bool {
        !matches!(self, Rw::Write | Rw::RandWrite)
    }

    /// The pattern issues writes.
    pub fn writes(self) -> bool {
        !matches!(self, Rw::Read | Rw::RandRead)
    }
}

/// The I/O engine (`--ioengine`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// Positioned read/write calls (`psync`; `sync` is accepted as an
    /// alias, the difference does not exist here).
    Psync,
    /// Copies through a mapping of the file ([`crate::os::Os::mmap_io`]).
    Mmap,
    /// Asynchronous I/O at queue depth `--iodepth` per job: the I/Os of
    /// all jobs go to the OS together in one [`crate::os::Os::io_batch`]
    /// call (fio's `libaio` with `io_submit` / `io_getevents`).
    Libaio,
}

impl Engine {
    /// fio's name for the engine.
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Psync => "psync",
            Engine::Mmap => "mmap",
            Engine::Libaio => "libaio",
        }
    }
}

/// One parsed fio job (run `numjobs` times in parallel).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSpec {
    /// `--name` (default `job`).
    pub name: String,
    /// `--rw` (default `read`, like fio).
    pub rw: Rw,
    /// Percentage of reads in a mixed pattern (`--rwmixread`, or
    /// 100 - `--rwmixwrite`; default 50).
    pub rwmixread: u8,
    /// `--bs` in bytes (default 4 KiB).
    pub bs: u64,
    /// `--size` in bytes, per job (required).
    pub size: u64,
    /// `--filename`, if given (not normalised; see [`JobSpec::file_for`]).
    pub filename: Option<String>,
    /// `--directory`, if given (normalised absolute path).
    pub directory: Option<String>,
    /// `--numjobs` (default 1).
    pub numjobs: u32,
    /// `--iodepth` as requested (default 1). Only libaio keeps that many
    /// I/Os of a job in flight; psync and mmap do one at a time.
    pub iodepth: u32,
    /// `--runtime` in nanoseconds; 0 means no limit.
    pub runtime_ns: u64,
    /// `--time_based`: keep going (wrapping around the file) until
    /// `runtime` has passed.
    pub time_based: bool,
    /// `--ioengine` (default psync).
    pub ioengine: Engine,
    /// `--invalidate` (default true): drop this node's cache before the
    /// run.
    pub invalidate: bool,
    /// `--fsync=N`: fsync after every N writes of a job (0 = never).
    pub fsync: u32,
    /// `--ramp_time` in nanoseconds: run this long before measuring.
    pub ramp_ns: u64,
    /// `--randseed` (default 0x89, like fio); job `j` uses `randseed + j`.
    pub randseed: u64,
    /// `--random_distribution=zipf:THETA`: theta in millionths (random
    /// patterns only); `None` is fio's default `random` (the random map).
    pub zipf_theta: Option<u32>,
    /// `--group NAME` (or `--group=NAME`): the task group the jobs run in
    /// (their misses are charged to it, its policy and limit
    /// apply); `None`: the node's (`default`).
    pub group: Option<String>,
}

impl JobSpec {
    /// The file job `job` works on: `--filename` (relative to
    /// `--directory`, or `/`), shared by all jobs, or else fio's per-job
    /// name `DIR/NAME.JOB.0`.
    pub fn file_for(&self, job: u32) -> String {
        let dir = self.directory.as_deref().unwrap_or("/");
        match &self.filename {
            Some(f) => parse::normalize(&format!("{dir}/{f}")),
            None => parse::normalize(&format!("{dir}/{}.{job}.0", self.name)),
        }
    }

    /// `--random_distribution` as fio writes it: `random` or `zipf:THETA`.
    pub fn random_distribution(&self) -> String {
        match self.zipf_theta {
            None => String::from("random"),
            Some(t) => format!("zipf:{}", super::zipf::theta_str(t)),
        }
    }

    /// Number of I/Os each job does when not time based.
    pub fn ios_per_job(&self) -> u64 {
        self.size.checked_div(self.bs).unwrap_or(0)
    }
}

/// Every option [`parse`] knows. `true`: takes a value (`--opt=value`);
/// `false`: a flag (`--flag`, or `--flag=0|1`).
const OPTIONS: &[(&str, bool)] = &[
    ("name", true),
    ("rw", true),
    ("readwrite", true),
    ("rwmixread", true),
    ("rwmixwrite", true),
    ("bs", true),
    ("blocksize", true),
    ("size", true),
    ("filename", true),
    ("directory", true),
    ("numjobs", true),
    ("iodepth", true),
    ("runtime", true),
    ("time_based", false),
    ("ioengine", true),
    ("invalidate", true),
    ("fsync", true),
    ("ramp_time", true),
    ("randseed", true),
    ("random_distribution", true),
    // Accepted for script compatibility; the report is always grouped.
    ("group_reporting", false),
    // Free text about the job, shown by nothing.
    ("description", true),
    // Every I/O goes through the page cache: `direct=0` / `buffered=1`
    // only say so; the other values are refused.
    ("direct", true),
    ("buffered", true),
    // fio's threads instead of processes: jobs are tasks either way.
    ("thread", false),
];

/// The names of the fio options the parser takes (not `--group`, which is
/// ours): `help fio` names them all (a test checks it).
pub fn option_names() -> impl Iterator<Item = &'static str> {
    OPTIONS.iter().map(|(k, _)| *k)
}

/// A user-supplied word, shortened and kept on one line for an error
/// message.
pub(crate) fn quoted(s: &str) -> String {
    let mut out: String = s
        .chars()
        .take(MAX_QUOTED)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if s.chars().count() > MAX_QUOTED {
        out.push_str("...");
    }
    out
}

fn bad(value: &str, opt: &str, hint: &str) -> FioError {
    FioError::new(format!(
        "bad value '{}' for option '{}' ({})",
        quoted(value),
        opt,
        hint
    ))
}

/// An integer in decimal, or hex with `0x`.
fn int(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) if !h.is_empty() && h.len() <= 16 => u64::from_str_radix(h, 16).ok(),
        Some(_) => None,
        None => parse::u64_dec(s).ok(),
    }
}

/// fio's time syntax: an integer, seconds by default, or with a unit
/// `us`, `ms`, `s`, `m` (minutes), `h`, `d`. Returns nanoseconds.
pub fn time_ns(s: &str) -> Option<u64> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    let (num, unit) = s.split_at(digits);
    let mult: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "s" | "sec" => 1_000_000_000,
        "ms" | "msec" => 1_000_000,
        "us" | "usec" => 1_000,
        "m" | "min" => 60_000_000_000,
        "h" | "hour" => 3_600_000_000_000,
        "d" | "day" => 86_400_000_000_000,
        _ => return None,
    };
    parse::u64_dec(num).ok()?.checked_mul(mult)
}

fn flag(value: Option<&str>, opt: &str) -> Result<bool, FioError> {
    match value {
        None | Some("1") => Ok(true),
        Some("0") => Ok(false),
        Some(v) => Err(bad(v, opt, "0 or 1, or no value")),
    }
}

fn ranged(v: &str, opt: &str, lo: u64, hi: u64) -> Result<u64, FioError> {
    int(v)
        .filter(|n| (lo..=hi).contains(n))
        .ok_or_else(|| bad(v, opt, &format!("{lo} to {hi}")))
}

/// A job being built from options: the spec so far and what was given.
#[derive(Debug, Clone)]
pub(crate) struct Builder {
    pub(crate) spec: JobSpec,
    have_size: bool,
}

impl Builder {
    /// fio's defaults.
    pub(crate) fn new() -> Builder {
        Builder {
            spec: JobSpec {
                name: String::from("job"),
                rw: Rw::Read,
                rwmixread: 50,
                bs: 4096,
                size: 0,
                filename: None,
                directory: None,
                numjobs: 1,
                iodepth: 1,
                runtime_ns: 0,
                time_based: false,
                ioengine: Engine::Psync,
                invalidate: true,
                fsync: 0,
                ramp_ns: 0,
                randseed: DEFAULT_RANDSEED,
                zipf_theta: None,
                group: None,
            },
            have_size: false,
        }
    }

    /// Whether `key` is an option of the table; `Some(true)` if it takes a
    /// value.
    pub(crate) fn takes_value(key: &str) -> Option<bool> {
        OPTIONS.iter().find(|(k, _)| *k == key).map(|&(_, v)| v)
    }

    /// Apply option `key` (a name of the table) with `value` (`None`: given
    /// as a bare flag). Errors name the option but no place.
    pub(crate) fn apply(&mut self, key: &str, value: Option<&str>) -> Result<(), FioError> {
        let spec = &mut self.spec;
        let Some(takes_value) = Builder::takes_value(key) else {
            return Err(FioError::new(format!(
                "unrecognized option '{}'",
                quoted(key)
            )));
        };
        if !takes_value {
            let on = flag(value, key)?;
            if key == "time_based" {
                spec.time_based = on;
            }
            return Ok(());
        }
        let Some(v) = value else {
            return Err(FioError::new(format!(
                "option '{key}' requires a value ({key}=VALUE)"
            )));
        };
        match key {
            "name" => {
                let ok = !v.is_empty()
                    && v.chars().count() <= MAX_NAME_LEN
                    && !v.starts_with('.')
                    && v.chars().all(|c| c != '/' && !c.is_control());
                if !ok {
                    return Err(bad(
                        v,
                        key,
                        "1 to 48 characters, no '/', not starting with '.'",
                    ));
                }
                spec.name = String::from(v);
            }
            "description" => {}
            "direct" | "buffered" => {
                let cached = if key == "direct" { "0" } else { "1" };
                if v != cached {
                    return Err(bad(
                        v,
                        key,
                        &format!(
                            "only {key}={cached}: every I/O goes through the page cache, which is what is measured"
                        ),
                    ));
                }
            }
            "rw" | "readwrite" => {
                spec.rw = Rw::from_str(v)
                    .ok_or_else(|| bad(v, key, "read, write, randread, randwrite, rw, randrw"))?;
            }
            "rwmixread" => spec.rwmixread = ranged(v, key, 0, 100)? as u8,
            "rwmixwrite" => spec.rwmixread = 100 - ranged(v, key, 0, 100)? as u8,
            "bs" | "blocksize" => {
                spec.bs = parse::size(v)
                    .ok()
                    .filter(|b| (MIN_BS..=MAX_BS).contains(b) && b % MIN_BS == 0)
                    .ok_or_else(|| bad(v, "bs", "a multiple of 512 from 512 to 16m"))?;
            }
            "size" => {
                spec.size = parse::size(v)
                    .ok()
                    .filter(|s| (1..=MAX_SIZE).contains(s))
                    .ok_or_else(|| bad(v, key, "1 to 1t, e.g. 64m"))?;
                self.have_size = true;
            }
            "filename" => {
                if v.is_empty() || v.chars().any(char::is_control) {
                    return Err(bad(v, key, "a file path"));
                }
                match parse::path(v) {
                    Err(_) => return Err(bad(v, key, "a file path without '.' or '..'")),
                    Ok(p) if p == "/" => return Err(bad(v, key, "a file path")),
                    Ok(_) => {}
                }
                spec.filename = Some(String::from(v));
            }
            "directory" => {
                if v.is_empty() || v.chars().any(char::is_control) {
                    return Err(bad(v, key, "a directory path"));
                }
                let dir = parse::path(v)
                    .map_err(|_| bad(v, key, "a directory path without '.' or '..'"))?;
                spec.directory = Some(dir);
            }
            "numjobs" => spec.numjobs = ranged(v, key, 1, u64::from(MAX_JOBS))? as u32,
            "iodepth" => spec.iodepth = ranged(v, key, 1, u64::from(MAX_IODEPTH))? as u32,
            "runtime" => {
                spec.runtime_ns =
                    time_ns(v).ok_or_else(|| bad(v, key, "seconds, or with us/ms/s/m/h"))?;
            }
            "ramp_time" => {
                spec.ramp_ns =
                    time_ns(v).ok_or_else(|| bad(v, key, "seconds, or with us/ms/s/m/h"))?;
            }
            "ioengine" => {
                spec.ioengine = match v {
                    "psync" | "sync" => Engine::Psync,
                    "mmap" => Engine::Mmap,
                    "libaio" => Engine::Libaio,
                    _ => return Err(bad(v, key, "psync, sync, libaio or mmap")),
                };
            }
            "invalidate" => spec.invalidate = flag(Some(v), key)?,
            "fsync" => spec.fsync = ranged(v, key, 0, u64::from(u32::MAX))? as u32,
            "randseed" => spec.randseed = int(v).ok_or_else(|| bad(v, key, "an integer"))?,
            "random_distribution" => {
                let hint = "random, or zipf:THETA with THETA > 0, not 1, at most 100";
                spec.zipf_theta = match v.split_once(':') {
                    None if v == "random" => None,
                    Some(("zipf", t)) => {
                        Some(super::zipf::parse_theta(t).ok_or_else(|| bad(v, key, hint))?)
                    }
                    _ => return Err(bad(v, key, hint)),
                };
            }
            // Every value option is handled above.
            _ => return Err(FioError::new(format!("unrecognized option '{key}'"))),
        }
        Ok(())
    }

    /// The job, once every option is in: checks what needs several
    /// options together.
    pub(crate) fn finish(self) -> Result<JobSpec, FioError> {
        let spec = self.spec;
        if !self.have_size {
            return Err(FioError::new(String::from(
                "option '--size' is required (e.g. --size=64m)",
            )));
        }
        if spec.size < spec.bs {
            return Err(FioError::new(format!(
                "size {} is smaller than bs {}",
                spec.size, spec.bs
            )));
        }
        if spec.zipf_theta.is_some() && !spec.rw.is_random() {
            return Err(FioError::new(String::from(
                "random_distribution=zipf needs a random pattern (--rw=randread, randwrite or randrw)",
            )));
        }
        if spec.time_based && spec.runtime_ns == 0 {
            return Err(FioError::new(String::from(
                "time_based needs a runtime (e.g. --runtime=10)",
            )));
        }
        Ok(spec)
    }
}

/// Parse `--group NAME` or `--group=NAME` at `arg` (taking the next word
/// from `it` for the first form); `None` if `arg` is not `--group`.
pub(crate) fn group_arg<'a>(
    arg: &'a str,
    it: &mut dyn Iterator<Item = &'a str>,
) -> Option<Result<String, FioError>> {
    if arg != "--group" && !arg.starts_with("--group=") {
        return None;
    }
    // Not a fio option: onecopy's task group, also `--group NAME`.
    let v = match arg.strip_prefix("--group=") {
        Some(v) => v,
        None => match it.next() {
            Some(v) => v,
            None => {
                return Some(Err(FioError::new(String::from(
                    "option '--group' requires a NAME",
                ))))
            }
        },
    };
    if !crate::os::valid_group_name(v) {
        return Some(Err(bad(v, "group", "1 to 32 of A-Z a-z 0-9 _ - .")));
    }
    Some(Ok(String::from(v)))
}

/// Parse fio options (the words after `fio`).
///
/// Every argument must be `--opt=value` or `--flag`; a later occurrence of
/// an option overrides an earlier one (except `--name`: one job section
/// only). `--size` is required. `--output-format` is left to
/// [`super::command`]: here it is refused. Nothing is touched on the OS.
pub fn parse(args: &[&str]) -> Result<JobSpec, FioError> {
    let mut b = Builder::new();
    let mut have_name = false;
    let mut it = args.iter().copied();
    while let Some(arg) = it.next() {
        if let Some(g) = group_arg(arg, &mut it) {
            if b.spec.group.replace(g?).is_some() {
                return Err(FioError::new(String::from("--group given twice")));
            }
            continue;
        }
        let Some(body) = arg.strip_prefix("--") else {
            return Err(FioError::new(format!(
                "unrecognized option '{}' (options are --opt=value; a job file is given alone: fio FILE)",
                quoted(arg)
            )));
        };
        let (key, value) = match body.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (body, None),
        };
        let Some(takes_value) = Builder::takes_value(key) else {
            return Err(FioError::new(format!(
                "unrecognized option '--{}'",
                quoted(key)
            )));
        };
        if takes_value && value.is_none() {
            return Err(FioError::new(format!(
                "option '--{key}' requires a value (--{key}=VALUE)"
            )));
        }
        if key == "name" {
            if have_name {
                return Err(FioError::new(String::from(
                    "only one job section is supported (--name given twice)",
                )));
            }
            have_name = true;
        }
        b.apply(key, value)?;
    }
    b.finish()
}
