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
//!   `RESULT {json}` line with the same figures and the parameters.
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
use core::fmt;

use crate::os::Os;

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
/// the text to print (summary and `RESULT` line).
pub fn command(os: &mut dyn Os, args: &[&str]) -> Result<String, FioError> {
    let spec = parse(args)?;
    let env = RunEnv::from_os(os);
    let Some(group) = spec.group.as_deref() else {
        return Ok(run(os, &spec, &env)?.render());
    };
    crate::os::in_group(os, group, |os| run(os, &spec, &env))
        .map_err(|e| FioError::new(format!("--group {group}: {e}")))?
        .map(|r| r.render())
}
