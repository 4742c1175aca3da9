//! libaio: batches gathered round-robin across the jobs, issued with one
//! [`Os::io_batch`] call each, and checked on completion.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::meter::Meter;
use super::sync::fsync_job;
use super::{libaio_unsupported, os_err, FioError, Job, MAX_BATCH, MAX_BATCH_BYTES};
use crate::fio::offsets::Ddir;
use crate::fio::options::JobSpec;
use crate::os::{BatchIo, Errno, Os};
use crate::pattern;
use crate::task::FlushStats;

/// I/Os per batch wanted for `spec` (libaio): every job's `iodepth`,
/// capped at [`MAX_BATCH`] and by [`MAX_BATCH_BYTES`] of buffers.
pub(super) fn batch_slots(spec: &JobSpec, bs: usize) -> usize {
    let want =
        usize::try_from(u64::from(spec.iodepth) * u64::from(spec.numjobs)).unwrap_or(MAX_BATCH);
    want.min(MAX_BATCH).min(MAX_BATCH_BYTES / bs.max(1)).max(1)
}

/// Check before the run that [`Os::io_batch`] works here: one empty read
/// at offset 0 of the first job's file; the error with that file's path.
pub(super) fn probe_raw(os: &mut dyn Os, jobs: &[Job]) -> Result<(), (String, Errno)> {
    let Some(job) = jobs.first() else {
        return Ok(());
    };
    let fd = job.fd.ok_or_else(|| (job.path.clone(), Errno::BadFd))?;
    let mut probe = [BatchIo::new(fd, 0, false, &mut [])];
    os.io_batch(&mut probe)
        .and_then(|()| {
            let [p] = &probe;
            p.done.map(|_| ())
        })
        .map_err(|e| (job.path.clone(), e))
}

/// [`probe_raw`] for libaio: "not supported" is libaio's error.
pub(super) fn probe_batch(os: &mut dyn Os, jobs: &[Job]) -> Result<(), FioError> {
    match probe_raw(os, jobs) {
        Ok(()) => Ok(()),
        Err((_, Errno::NotSupported)) => Err(libaio_unsupported()),
        Err((path, e)) => Err(os_err(&path, "io_batch", e)),
    }
}

/// One I/O of a batch being formed.
#[derive(Debug, Clone, Copy)]
struct Slot {
    job: usize,
    dir: Ddir,
    off: u64,
}

/// Pick the next batch: round-robin over the jobs from `first`, one I/O
/// per job per round, each job up to `iodepth` I/Os (and what is left of
/// its size while measuring), at most `cap` in all. A job whose write
/// makes an fsync due stops there (the fsync follows the batch, before
/// any further write of the job). Returns the job after the last one
/// served (where the next batch starts).
fn gather(
    spec: &JobSpec,
    jobs: &mut [Job],
    measuring: bool,
    budget: u64,
    first: usize,
    cap: usize,
    slots: &mut Vec<Slot>,
) -> usize {
    slots.clear();
    let depth = u64::from(spec.iodepth);
    for job in jobs.iter_mut() {
        // The budget counts measured I/Os only (as with psync).
        job.room = if measuring {
            budget.saturating_sub(job.done).min(depth)
        } else {
            depth
        };
        job.open = job.room > 0;
    }
    let n = jobs.len();
    let mut next = first;
    loop {
        let mut added = false;
        for k in 0..n {
            if slots.len() >= cap {
                return next;
            }
            let j = (first + k) % n;
            let Some(job) = jobs.get_mut(j) else {
                continue;
            };
            if !job.open {
                continue;
            }
            let dir = job.mix.pick();
            let off = job.offsets.next_offset(dir);
            slots.push(Slot { job: j, dir, off });
            job.room -= 1;
            added = true;
            next = (j + 1) % n;
            if job.room == 0 {
                job.open = false;
            }
            if dir == Ddir::Write && spec.fsync > 0 {
                job.writes += 1;
                if job.writes >= spec.fsync {
                    job.writes = 0;
                    job.sync_due = true;
                    job.open = false;
                }
            }
        }
        if !added {
            return next;
        }
    }
}

/// libaio: every turn gathers up to `iodepth` I/Os of every job into one
/// [`Os::io_batch`] call; each I/O's completion latency is the batch's
/// completion minus its submission. Returns the batches (while measuring
/// if any batch was measured; `max` over the whole run).
pub(super) fn run_batched(
    os: &mut dyn Os,
    spec: &JobSpec,
    jobs: &mut [Job],
    meter: &mut Meter,
    bufs: &mut [u8],
    budget: u64,
) -> Result<FlushStats, FioError> {
    let bs = usize::try_from(spec.bs).unwrap_or(usize::MAX);
    let cap = (bufs.len() / bs.max(1)).clamp(1, MAX_BATCH);
    let mut slots: Vec<Slot> = Vec::with_capacity(cap);
    let mut first = 0usize;
    // (batches, I/Os): while measuring, and in all.
    let mut measured = (0u64, 0u64);
    let mut all = (0u64, 0u64);
    let mut max = 0u64;
    loop {
        let now = os.uptime_ns();
        if meter.expired(now) {
            break;
        }
        first = gather(spec, jobs, meter.measuring, budget, first, cap, &mut slots);
        if slots.is_empty() {
            break;
        }
        let n = slots.len();
        meter.check_clock(now, n as u64)?;

        let mut ios: Vec<BatchIo<'_>> = Vec::with_capacity(n);
        for (slot, buf) in slots.iter().zip(bufs.chunks_mut(bs)) {
            let job = jobs
                .get(slot.job)
                .ok_or_else(|| FioError::new(String::from("internal: bad job index")))?;
            let fd = job
                .fd
                .ok_or_else(|| os_err(&job.path, "open", Errno::BadFd))?;
            let write = slot.dir == Ddir::Write;
            if write {
                pattern::fill(buf, slot.off);
            }
            ios.push(BatchIo::new(fd, slot.off, write, buf));
        }
        if ios.len() != n {
            return Err(FioError::new(String::from("internal: too few I/O buffers")));
        }
        let t0 = os.uptime_ns();
        let r = os.io_batch(&mut ios);
        let t1 = os.uptime_ns();
        match r {
            Ok(()) => {}
            Err(Errno::NotSupported) => return Err(libaio_unsupported()),
            Err(e) => return Err(FioError::new(format!("io_batch of {n} I/Os: {e}"))),
        }
        check_batch(spec, jobs, &slots, &ios)?;
        drop(ios);

        let lat = t1.saturating_sub(t0);
        all = (all.0 + 1, all.1 + n as u64);
        max = max.max(n as u64);
        if meter.measuring {
            measured = (measured.0 + 1, measured.1 + n as u64);
            for slot in &slots {
                meter.record(slot.dir, lat);
                if let Some(job) = jobs.get_mut(slot.job) {
                    job.done += 1;
                }
            }
            meter.last_done = t1;
        }
        for job in jobs.iter_mut() {
            if job.sync_due {
                job.sync_due = false;
                fsync_job(os, job, meter)?;
            }
        }
    }
    let (flushes, ios) = if measured.0 > 0 { measured } else { all };
    Ok(FlushStats {
        flushes,
        ios,
        max,
        sent: ios,
    })
}

/// The first failed I/O of a completed batch, as an error naming its
/// file, direction and offset (and how many of the batch failed).
fn check_batch(
    spec: &JobSpec,
    jobs: &[Job],
    slots: &[Slot],
    ios: &[BatchIo<'_>],
) -> Result<(), FioError> {
    let bs = usize::try_from(spec.bs).unwrap_or(usize::MAX);
    let failed = |io: &BatchIo<'_>| io.done != Ok(bs);
    let Some((slot, io)) = slots.iter().zip(ios).find(|(_, io)| failed(io)) else {
        return Ok(());
    };
    let nfailed = ios.iter().filter(|io| failed(io)).count();
    let path = jobs.get(slot.job).map_or("?", |j| j.path.as_str());
    let what = if slot.dir == Ddir::Write {
        "write"
    } else {
        "read"
    };
    let off = slot.off;
    let why = match io.done {
        Err(Errno::NotSupported) => return Err(libaio_unsupported()),
        Err(e) => format!("{e}"),
        Ok(k) => format!("short ({k} of {bs} bytes)"),
    };
    Err(FioError::new(format!(
        "{path}: {what} at {off}: {why}; {nfailed} of {} I/Os of the batch failed",
        ios.len()
    )))
}
