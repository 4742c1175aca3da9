//! Running a parsed job: buffers, the layout phase (`layout`), opening the
//! jobs and dropping the cache, then the engine's timed loop measured by
//! `meter`, and the figures. psync and mmap jobs run as tasks (`tasks`:
//! the I/Os of all waiting jobs flushed together); psync falls back to
//! taking turns with synchronous calls (`sync`) where positioned batches
//! are not supported; libaio gathers every job's iodepth into one batch
//! (`batched`).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::offsets::{Mix, OffsetGen};
use super::options::{Engine, JobSpec};
use super::report::{DirStats, Invalidated, Report, RESERVOIR};
use super::{FioError, RunEnv};
use crate::os::{Errno, Fd, FileKind, OpenFlags, Os};
use crate::task::FlushStats;

mod batched;
mod layout;
mod meter;
mod sync;
mod tasks;

use batched::{batch_slots, probe_batch, probe_raw, run_batched};
use layout::layout;
use meter::Meter;
use sync::run_sync;
use tasks::run_tasks;

/// Write size of the layout phase.
const LAYOUT_CHUNK: usize = 64 * 1024;

/// Most I/Os in one [`Os::io_batch`] call (`--ioengine=libaio`).
pub const MAX_BATCH: usize = 256;

/// Most bytes of I/O buffers in flight in one batch: with a large `bs`
/// the batch holds fewer I/Os (at least one).
pub const MAX_BATCH_BYTES: usize = 8 << 20;

/// Knobs the tests turn; [`Limits::default`] is what `fio` uses.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Latency samples kept per direction (see [`RESERVOIR`]).
    pub reservoir: usize,
    /// A run whose end depends on the clock fails after this many I/Os
    /// without `uptime_ns` moving (a stuck clock would loop forever).
    pub stuck_ios: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            reservoir: RESERVOIR,
            stuck_ios: 1_000_000,
        }
    }
}

/// One job's state during the run.
struct Job {
    path: String,
    /// `None` only after a failed reopen.
    fd: Option<Fd>,
    /// Where the descriptor's position is (psync).
    pos: u64,
    offsets: OffsetGen,
    mix: Mix,
    /// Measured I/Os so far.
    done: u64,
    /// Writes since the last fsync.
    writes: u32,
    /// libaio: I/Os this job may still add to the batch being formed.
    room: u64,
    /// libaio: the job may add more I/Os to the batch being formed.
    open: bool,
    /// libaio: an fsync is due once the batch completes.
    sync_due: bool,
}

fn os_err(path: &str, what: &str, e: Errno) -> FioError {
    FioError::new(format!("{path}: {what}: {e}"))
}

fn mmap_unsupported() -> FioError {
    FioError::new(String::from("ioengine=mmap not supported in this mode"))
}

fn libaio_unsupported() -> FioError {
    FioError::new(String::from(
        "ioengine=libaio not supported in this mode (needs io_batch, or seek)",
    ))
}

/// Run `spec` on `os` and measure it. See the [module docs](super).
pub fn run(os: &mut dyn Os, spec: &JobSpec, env: &RunEnv) -> Result<Report, FioError> {
    run_with(os, spec, env, Limits::default())
}

/// [`run`] with explicit limits.
pub(crate) fn run_with(
    os: &mut dyn Os,
    spec: &JobSpec,
    env: &RunEnv,
    limits: Limits,
) -> Result<Report, FioError> {
    let mut files: Vec<String> = Vec::new();
    for j in 0..spec.numjobs {
        let f = spec.file_for(j);
        if !files.contains(&f) {
            files.push(f);
        }
    }
    if spec.ioengine == Engine::Mmap {
        // A zero-length probe: only "not supported" matters here.
        let first = files.first().map_or("/", String::as_str);
        if os.mmap_io(first, 0, 0, false, &mut []) == Err(Errno::NotSupported) {
            return Err(mmap_unsupported());
        }
    }
    if let Some(dir) = &spec.directory {
        match os.stat(dir) {
            Ok(a) if a.kind == FileKind::Dir => {}
            Ok(_) => return Err(os_err(dir, "directory", Errno::NotDir)),
            Err(e) => return Err(os_err(dir, "directory", e)),
        }
    }
    let bs = usize::try_from(spec.bs).map_err(|_| FioError::new(String::from("bs too large")))?;
    // One buffer of bs per I/O in flight; libaio takes fewer I/Os per
    // batch if memory is short.
    // (psync and mmap tasks allocate their own buffer each.)
    let mut slots = if spec.ioengine == Engine::Libaio {
        batch_slots(spec, bs)
    } else {
        1
    };
    let mut buf: Vec<u8> = Vec::new();
    while buf.try_reserve_exact(slots.saturating_mul(bs)).is_err() {
        if slots == 1 {
            return Err(FioError::new(format!(
                "cannot allocate a {bs}-byte I/O buffer"
            )));
        }
        slots /= 2;
    }
    buf.resize(slots * bs, 0);

    let (laid_out_files, laid_out_bytes) = layout(os, spec, &files)?;

    let mut jobs: Vec<Job> = Vec::new();
    let result = open_and_run(os, spec, env, limits, &mut jobs, &mut buf);
    // Close everything, even after an error; a close error is reported
    // only if the run itself succeeded.
    let mut close_err = None;
    for job in &mut jobs {
        if let Some(fd) = job.fd.take() {
            if let Err(e) = os.close(fd) {
                close_err.get_or_insert(os_err(&job.path, "close", e));
            }
        }
    }
    let mut report = result?;
    if let Some(e) = close_err {
        return Err(e);
    }
    report.files = files;
    report.laid_out_files = laid_out_files;
    report.laid_out_bytes = laid_out_bytes;
    Ok(report)
}

/// Open one descriptor per job, check positioned I/O, drop the cache,
/// then run and measure.
fn open_and_run(
    os: &mut dyn Os,
    spec: &JobSpec,
    env: &RunEnv,
    limits: Limits,
    jobs: &mut Vec<Job>,
    buf: &mut [u8],
) -> Result<Report, FioError> {
    for j in 0..spec.numjobs {
        let path = spec.file_for(j);
        let fd = os
            .open(&path, OpenFlags::default())
            .map_err(|e| os_err(&path, "open", e))?;
        jobs.push(Job {
            path,
            fd: Some(fd),
            pos: 0,
            offsets: OffsetGen::new(spec, j),
            mix: Mix::new(spec, j),
            done: 0,
            writes: 0,
            room: 0,
            open: false,
            sync_due: false,
        });
    }
    // Random and mixed patterns need to move the position; sequential
    // single-direction ones only rewind (done by reopening if need be).
    if spec.ioengine == Engine::Psync && (spec.rw.is_random() || spec.rw.is_mixed()) {
        if let Some(job) = jobs.first() {
            if let Some(fd) = job.fd {
                match os.seek(fd, 0) {
                    Ok(()) => {}
                    Err(Errno::NotSupported) => {
                        return Err(FioError::new(format!(
                            "rw={} needs positioned I/O (seek), not supported in this mode",
                            spec.rw.as_str()
                        )))
                    }
                    Err(e) => return Err(os_err(&job.path, "seek", e)),
                }
            }
        }
    }
    // psync runs as tasks if positioned batches work here; otherwise
    // the jobs take turns with synchronous calls.
    let as_tasks = match spec.ioengine {
        Engine::Libaio => {
            probe_batch(os, jobs)?;
            false
        }
        Engine::Mmap => true,
        Engine::Psync => match probe_raw(os, jobs) {
            Ok(()) => true,
            Err((_, Errno::NotSupported)) => false,
            Err((path, e)) => return Err(os_err(&path, "io_batch", e)),
        },
    };
    let invalidated = if !spec.invalidate {
        Invalidated::No
    } else {
        match os.cache_drop() {
            Ok(line) => Invalidated::Dropped(line),
            Err(Errno::NotSupported) => Invalidated::NotSupported,
            Err(e) => Invalidated::Failed(format!("{e}")),
        }
    };

    let budget = if spec.time_based {
        u64::MAX
    } else {
        spec.ios_per_job()
    };
    let start = os.uptime_ns();
    let mut meter = Meter::new(spec, limits, start, budget);
    let depth = if spec.ioengine == Engine::Libaio {
        run_batched(os, spec, jobs, &mut meter, buf, budget)?
    } else if as_tasks {
        run_tasks(os, spec, jobs, &mut meter, budget)?
    } else {
        run_sync(os, spec, jobs, &mut meter, buf, budget)?;
        // One synchronous call at a time: each I/O is its own "flush".
        let k = meter.samples.iter().map(|s| s.count()).sum::<u64>();
        FlushStats {
            flushes: k,
            ios: k,
            max: k.min(1),
            sent: k,
        }
    };

    let elapsed_ns = if meter.measuring {
        meter.last_done.saturating_sub(meter.measure_start)
    } else {
        0
    };
    let [mut rs, mut ws] = meter.samples;
    let read = DirStats::new(rs.count(), spec.bs, elapsed_ns, rs.latency());
    let write = DirStats::new(ws.count(), spec.bs, elapsed_ns, ws.latency());
    Ok(Report {
        spec: spec.clone(),
        env: env.clone(),
        read,
        write,
        elapsed_ns,
        effective_iodepth: if spec.ioengine != Engine::Libaio && !as_tasks {
            1
        } else {
            depth.mean_rounded()
        },
        max_iodepth: u32::try_from(depth.max).unwrap_or(u32::MAX),
        mean_iodepth_milli: depth.mean_milli(),
        per_flush_milli: depth.per_flush_milli(),
        tasks: as_tasks,
        fsyncs: meter.fsyncs,
        files: Vec::new(),
        laid_out_files: 0,
        laid_out_bytes: 0,
        invalidated,
        hit_runtime: meter.hit_runtime,
        dists: [rs.dist(), ws.dist()],
        groupid: 0,
    })
}
