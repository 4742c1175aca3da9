//! `fio`: a compatible subset of the fio benchmark, over [`Os`].
//!
//! ```text
//! fio --name=lat --rw=randread --bs=4k --size=64m --filename=/data/f \
//!     --numjobs=1 --iodepth=1 --runtime=10 --time_based --ioengine=psync
//! ```
//!
//! * [`parse`] takes fio's own option syntax (`--opt=value`, `--flag`,
//!   sizes like `4k` / `1g` in powers of 1024, times like `10`, `500ms`).
//!   An unknown option or a bad value is an error before anything runs:
//!   `fio: unrecognized option '--foo'`, `fio: bad value 'x' for option
//!   'bs' (...)`.
//! * [`run`] lays the files out (not timed; reads need data, so files are
//!   extended with the [`pattern`](crate::pattern) bytes), drops this
//!   node's cache if `--invalidate=1` (the default), then runs all
//!   `numjobs` jobs together (as tasks, see *Depth*), timing every I/O
//!   with [`Os::uptime_ns`]. A job does `size / bs`
//!   measured I/Os, or with `--time_based` keeps going (wrapping around)
//!   until `--runtime` has passed; `--runtime` also stops a size-limited
//!   run early. I/Os started during `--ramp_time` are not measured and do
//!   not count towards the size.
//! * Offsets: see [`offsets`]. Sequential jobs walk from 0; random jobs
//!   visit every block once per pass in a seeded order (fio's random map),
//!   or with `--random_distribution=zipf:THETA` draw blocks from a Zipf
//!   law (see [`zipf`]); job `j` is seeded with `randseed + j`.
//! * `--ioengine=psync` does positioned reads and writes, through
//!   [`Os::io_batch`] as tasks; without positioned batches it falls back
//!   to `read`/`write` at the descriptor position, moved with [`Os::seek`]
//!   (random and mixed patterns need it; a sequential job that wraps
//!   around reopens its file if the OS cannot seek). `--ioengine=mmap` loads and stores through the mapping
//!   ([`Os::mmap_batch`], which the default implements with
//!   [`Os::mmap_io`]).
//!   `--ioengine=libaio` submits I/Os in batches with [`Os::io_batch`]
//!   (see *Depth*).
//! * [`Report`]: IOPS, bandwidth and completion latency (min, mean, p50,
//!   p99, p99.9, max) per direction, rendered as a fio-like summary and one
//!   `RESULT {json}` line with the same figures and the parameters; with
//!   `--output-format=json` / `json+`, fio's own JSON document instead
//!   (see [`fiojson`]).
//! * `fio FILE` runs the jobs of a fio job file, one after another (see
//!   [`jobfile`]).
//!
//! # Depth
//!
//! [`Os`] calls are synchronous, so the jobs run as tasks of
//! [`crate::task::Tasks`]: each psync or mmap job does one I/O at a time,
//! and when every job waits, the I/Os of all of them go out in one
//! [`Os::io_batch`] (psync) or [`Os::mmap_batch`] (mmap) call, so
//! `--numjobs=N` has up to N I/Os in flight. An I/O's completion latency
//! runs from its queueing to the end of the call that carried it. If the
//! OS cannot do positioned batches (the probe, an empty read, answers
//! `NotSupported`), psync jobs take turns round-robin with synchronous
//! calls instead, one I/O in flight (as with fio's psync).
//!
//! With `--ioengine=libaio` each turn gathers,
//! round-robin across the jobs (one I/O per job per round, continuing with
//! the job after the last one served), up to `iodepth` I/Os of every job
//! into one [`Os::io_batch`] call, at most [`runner::MAX_BATCH`] (256) per
//! call and [`runner::MAX_BATCH_BYTES`] of buffers. The batch is timed
//! from submission to completion with [`Os::uptime_ns`], and every I/O of
//! it gets that completion latency (fio's `io_submit` / `io_getevents` at
//! full queue depth). Offsets, directions, sizes, ramp, runtime (checked
//! before each batch) and `--fsync` (a job stops adding I/Os at the write
//! that makes an fsync due; the fsync follows the batch) keep the psync
//! semantics. For every engine the report gives the depth measured:
//! `effective_iodepth`, the mean number of I/Os in flight at a flush (all jobs
//! together, rounded), `mean_iodepth` and `max_iodepth`. An I/O that fails or comes up
//! short fails the run, naming its file, direction and offset.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

use crate::os::Os;

pub mod fiojson;
pub mod jobfile;
pub mod json;
pub mod offsets;
pub mod options;
pub mod report;
pub mod runner;
pub mod zipf;

pub use options::{parse, Engine, JobSpec, Rw};
pub use report::{DirStats, Invalidated, Latency, Report};
pub use runner::run;

#[cfg(test)]
mod tests;

/// Why `fio` did not run or did not finish. Displayed as `fio: <message>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FioError {
    msg: String,
}

impl FioError {
    /// An error with `msg` (without the `fio: ` prefix).
    pub fn new(msg: String) -> FioError {
        FioError { msg }
    }

    /// The message without the `fio: ` prefix.
    pub fn message(&self) -> &str {
        &self.msg
    }
}

impl fmt::Display for FioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fio: {}", self.msg)
    }
}

/// Where a run happens, as the caller knows it (shown in the report).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunEnv {
    /// This node's id.
    pub node: u16,
    /// The cache mode (`private`, `onecopy`, ...).
    pub mode: String,
    /// Instances kept busy by the run (this node, the directory, ...).
    pub busy_instances: u32,
    /// vCPUs of each busy instance.
    pub vcpus_per_instance: u32,
}

impl RunEnv {
    /// The environment as `os` reports it ([`Os::run_env`]); every
    /// instance has one vCPU.
    pub fn from_os(os: &mut dyn Os) -> RunEnv {
        let (node, mode, busy_instances) = os.run_env();
        RunEnv {
            node,
            mode,
            busy_instances,
            vcpus_per_instance: 1,
        }
    }
}

/// Parse `args` and run them on `os`: the whole `fio` command. Returns
/// the text to print: for the `normal` output format the summary and
/// `RESULT` line of each job, for `json` / `json+` fio's JSON document.
///
/// `args` are options (`--opt=value`), or one job file path (read from
/// the node's file system, see [`jobfile`]) with at most `--group` and
/// `--output-format` beside it. The jobs of a file run one after another.
pub fn command(os: &mut dyn Os, args: &[&str]) -> Result<String, FioError> {
    let mut format = fiojson::Format::default();
    let mut rest: Vec<&str> = Vec::new();
    let mut file: Option<&str> = None;
    for &a in args {
        if let Some(v) = a.strip_prefix("--output-format=") {
            format = fiojson::Format::parse(v).ok_or_else(|| {
                FioError::new(format!(
                    "bad value '{}' for option 'output-format' (normal, json, json+, or several joined by ',')",
                    options::quoted(v)
                ))
            })?;
        } else if a == "--output-format" {
            return Err(FioError::new(String::from(
                "option '--output-format' requires a value (--output-format=json)",
            )));
        } else if !a.starts_with('-') && rest.last().is_none_or(|p| *p != "--group") {
            if file.replace(a).is_some() {
                return Err(FioError::new(String::from(
                    "one job file at a time (fio FILE)",
                )));
            }
        } else {
            rest.push(a);
        }
    }
    let specs = match file {
        None => vec![parse(&rest)?],
        Some(path) => {
            let mut group = None;
            let mut it = rest.iter().copied();
            while let Some(a) = it.next() {
                match options::group_arg(a, &mut it) {
                    Some(g) => {
                        if group.replace(g?).is_some() {
                            return Err(FioError::new(String::from("--group given twice")));
                        }
                    }
                    None => {
                        return Err(FioError::new(format!(
                            "with a job file only --output-format and --group go on the command line; put '{}' in the file",
                            options::quoted(a)
                        )))
                    }
                }
            }
            let text = read_job_file(os, path)?;
            let mut specs = jobfile::parse_jobfile(path, &text)?;
            for s in &mut specs {
                s.group.clone_from(&group);
            }
            specs
        }
    };
    let env = RunEnv::from_os(os);
    let mut reports = Vec::new();
    let mut out = String::new();
    for (i, spec) in specs.iter().enumerate() {
        let mut r = match spec.group.as_deref() {
            None => run(os, spec, &env)?,
            Some(group) => crate::os::in_group(os, group, |os| run(os, spec, &env))
                .map_err(|e| FioError::new(format!("--group {group}: {e}")))??,
        };
        r.groupid = u32::try_from(i).unwrap_or(u32::MAX);
        if format.normal {
            out.push_str(&r.render());
        }
        reports.push(r);
    }
    if format.json || format.json_plus {
        out.push_str(&fiojson::document(&reports, format.json_plus));
        out.push('\n');
    }
    Ok(out)
}

/// The text of job file `path` on the node's file system.
fn read_job_file(os: &mut dyn Os, path: &str) -> Result<String, FioError> {
    let fail = |e: &dyn fmt::Display| {
        FioError::new(format!(
            "cannot read job file '{}': {e}",
            options::quoted(path)
        ))
    };
    let abs = crate::parse::path(path).map_err(|e| fail(&e))?;
    let fd = os
        .open(&abs, crate::os::OpenFlags::default())
        .map_err(|e| fail(&e))?;
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let res = loop {
        match os.read(fd, &mut buf) {
            Ok(0) => break Ok(()),
            Ok(n) => {
                let Some(chunk) = buf.get(..n) else {
                    break Err(fail(&"read returned too much"));
                };
                if data.len() + n > jobfile::MAX_JOB_FILE {
                    break Err(fail(&format_args!(
                        "longer than {} bytes",
                        jobfile::MAX_JOB_FILE
                    )));
                }
                data.extend_from_slice(chunk);
            }
            Err(e) => break Err(fail(&e)),
        }
    };
    let closed = os.close(fd);
    res?;
    closed.map_err(|e| fail(&e))?;
    String::from_utf8(data).map_err(|_| fail(&"not UTF-8 text"))
}
