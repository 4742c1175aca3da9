//! psync and mmap jobs as tasks ([`crate::task`]): each job is one task
//! doing one I/O at a time (pread/pwrite, or a load/store through the
//! mapping); the I/Os of every job waiting at the same moment go out in
//! one flush, so `--numjobs=N` has up to N I/Os in flight.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::{Cell, RefCell};

use super::meter::Meter;
use super::{mmap_unsupported, os_err, FioError, Job};
use crate::fio::offsets::Ddir;
use crate::fio::options::{Engine, JobSpec};
use crate::os::{Errno, Os};
use crate::pattern;
use crate::task::{FlushStats, Task, Tasks};

/// What the job tasks share (never borrowed across an `.await`).
struct Shared<'m> {
    meter: RefCell<&'m mut Meter>,
    /// A job failed or the runtime passed: every job stops issuing.
    stop: Cell<bool>,
    /// The executor's flushes when measuring started (after the ramp).
    base: Cell<Option<FlushStats>>,
}

/// Run every job as a task until each has done its I/Os (or the runtime
/// passed, or one failed: the first failure in job order is the run's
/// error). Returns the flushes while measuring (all of them if nothing
/// was measured).
pub(super) fn run_tasks(
    os: &mut dyn Os,
    spec: &JobSpec,
    jobs: &mut [Job],
    meter: &mut Meter,
    budget: u64,
) -> Result<FlushStats, FioError> {
    let bs = usize::try_from(spec.bs).map_err(|_| FioError::new(String::from("bs too large")))?;
    let mut bufs: Vec<Vec<u8>> = Vec::new();
    for _ in 0..jobs.len() {
        let mut b: Vec<u8> = Vec::new();
        if b.try_reserve_exact(bs).is_err() {
            return Err(FioError::new(format!(
                "cannot allocate {} I/O buffers of {bs} bytes (one per job)",
                jobs.len()
            )));
        }
        b.resize(bs, 0);
        bufs.push(b);
    }
    let measuring_from_start = meter.measuring;
    let sh = Shared {
        meter: RefCell::new(meter),
        stop: Cell::new(false),
        base: Cell::new(if measuring_from_start {
            Some(FlushStats::default())
        } else {
            None
        }),
    };
    let ex = Tasks::new(os);
    let tasks: Vec<Task<'_, Result<(), FioError>>> = jobs
        .iter_mut()
        .zip(bufs)
        .map(|(job, buf)| {
            Box::pin(job_task(&ex, spec, job, &sh, budget, buf)) as Task<'_, Result<(), FioError>>
        })
        .collect();
    let results = ex
        .run(tasks)
        .map_err(|e| FioError::new(format!("internal: {e}")))?;
    for r in results {
        r?;
    }
    let all = ex.stats();
    Ok(match sh.base.get() {
        Some(b) if all.flushes > b.flushes => all.since(&b),
        _ => all,
    })
}

/// One job: I/Os one at a time until its budget is done or the run
/// stops.
async fn job_task(
    ex: &Tasks<'_>,
    spec: &JobSpec,
    job: &mut Job,
    sh: &Shared<'_>,
    budget: u64,
    mut buf: Vec<u8>,
) -> Result<(), FioError> {
    let r = job_loop(ex, spec, job, sh, budget, &mut buf).await;
    if r.is_err() {
        sh.stop.set(true);
    }
    r
}

async fn job_loop(
    ex: &Tasks<'_>,
    spec: &JobSpec,
    job: &mut Job,
    sh: &Shared<'_>,
    budget: u64,
    buf: &mut Vec<u8>,
) -> Result<(), FioError> {
    let fd = job
        .fd
        .ok_or_else(|| os_err(&job.path, "open", Errno::BadFd))?;
    let bs = buf.len();
    loop {
        if sh.stop.get() || job.done >= budget {
            return Ok(());
        }
        let now = ex.uptime_ns();
        {
            let mut m = sh.meter.borrow_mut();
            m.check_clock(now, 1)?;
            let was = m.measuring;
            if m.expired(now) {
                sh.stop.set(true);
                return Ok(());
            }
            if !was && m.measuring {
                sh.base.set(Some(ex.stats()));
            }
        }
        let dir = job.mix.pick();
        let off = job.offsets.next_offset(dir);
        let write = dir == Ddir::Write;
        if write {
            pattern::fill(buf, off);
        }
        let io = core::mem::take(buf);
        let done = match (spec.ioengine, write) {
            (Engine::Mmap, false) => ex.mmap_read(&job.path, off, io).await,
            (Engine::Mmap, true) => ex.mmap_write(&job.path, off, io).await,
            (_, false) => ex.pread(fd, off, io).await,
            (_, true) => ex.pwrite(fd, off, io).await,
        };
        let (lat, completed_ns) = (done.latency_ns(), done.completed_ns);
        *buf = done.buf;
        let what = match (spec.ioengine, write) {
            (Engine::Mmap, false) => "mmap read",
            (Engine::Mmap, true) => "mmap write",
            (_, false) => "read",
            (_, true) => "write",
        };
        match done.result {
            Ok(n) if n == bs => {}
            Ok(n) => {
                return Err(FioError::new(format!(
                    "{}: {what} at {off}: short ({n} of {bs} bytes)",
                    job.path
                )))
            }
            Err(Errno::NotSupported) if spec.ioengine == Engine::Mmap => {
                return Err(mmap_unsupported())
            }
            Err(e) => return Err(os_err(&job.path, &format!("{what} at {off}"), e)),
        }
        {
            let mut m = sh.meter.borrow_mut();
            if m.measuring {
                m.record(dir, lat);
                job.done += 1;
                m.last_done = m.last_done.max(completed_ns);
            }
        }
        if write && spec.fsync > 0 {
            job.writes += 1;
            if job.writes >= spec.fsync {
                job.writes = 0;
                // A task's fsync yields while its write-back and flush
                // are in flight.
                ex.fsync(fd)
                    .await
                    .map_err(|e| os_err(&job.path, "fsync", e))?;
                let now = ex.uptime_ns();
                let mut m = sh.meter.borrow_mut();
                if m.measuring {
                    m.fsyncs += 1;
                    m.last_done = m.last_done.max(now);
                }
            }
        }
    }
}
