//! psync and mmap: jobs take turns, one synchronous I/O each per turn;
//! positioning a descriptor (seek or reopen) and moving a whole buffer.

use alloc::format;
use alloc::string::String;

use super::meter::Meter;
use super::{mmap_unsupported, os_err, FioError, Job};
use crate::fio::offsets::Ddir;
use crate::fio::options::{Engine, JobSpec};
use crate::os::{Errno, Fd, OpenFlags, Os};
use crate::pattern;

/// psync and mmap: jobs take turns round-robin, one synchronous I/O each
/// per turn.
pub(super) fn run_sync(
    os: &mut dyn Os,
    spec: &JobSpec,
    jobs: &mut [Job],
    meter: &mut Meter,
    buf: &mut [u8],
    budget: u64,
) -> Result<(), FioError> {
    let buf = buf
        .get_mut(..usize::try_from(spec.bs).unwrap_or(usize::MAX))
        .ok_or_else(|| FioError::new(String::from("I/O buffer too small")))?;
    'run: loop {
        let mut progressed = false;
        for job in jobs.iter_mut() {
            if job.done >= budget {
                continue;
            }
            let now = os.uptime_ns();
            meter.check_clock(now, 1)?;
            if meter.expired(now) {
                break 'run;
            }
            let dir = job.mix.pick();
            let off = job.offsets.next_offset(dir);
            let (lat, t1) = one_io(os, spec, job, dir, off, buf)?;
            if meter.measuring {
                meter.record(dir, lat);
                job.done += 1;
                meter.last_done = t1;
            }
            if dir == Ddir::Write && spec.fsync > 0 {
                job.writes += 1;
                if job.writes >= spec.fsync {
                    job.writes = 0;
                    fsync_job(os, job, meter)?;
                }
            }
            progressed = true;
        }
        if !progressed {
            return Ok(());
        }
    }
    Ok(())
}

/// fsync the job's file (`--fsync`), counted and timed while measuring.
pub(super) fn fsync_job(os: &mut dyn Os, job: &Job, meter: &mut Meter) -> Result<(), FioError> {
    if let Some(fd) = job.fd {
        os.fsync(fd).map_err(|e| os_err(&job.path, "fsync", e))?;
    }
    if meter.measuring {
        meter.fsyncs += 1;
        meter.last_done = os.uptime_ns();
    }
    Ok(())
}

/// Move the job's descriptor to `off`: seek, or reopen to rewind when
/// the OS cannot seek.
fn position(os: &mut dyn Os, job: &mut Job, off: u64) -> Result<Fd, FioError> {
    let fd = job
        .fd
        .ok_or_else(|| os_err(&job.path, "open", Errno::BadFd))?;
    if job.pos == off {
        return Ok(fd);
    }
    match os.seek(fd, off) {
        Ok(()) => {
            job.pos = off;
            Ok(fd)
        }
        Err(Errno::NotSupported) if off == 0 => {
            job.fd = None;
            os.close(fd).map_err(|e| os_err(&job.path, "close", e))?;
            let fd = os
                .open(&job.path, OpenFlags::default())
                .map_err(|e| os_err(&job.path, "reopen", e))?;
            job.fd = Some(fd);
            job.pos = 0;
            Ok(fd)
        }
        Err(e) => Err(os_err(&job.path, &format!("seek to {off}"), e)),
    }
}

/// One I/O of `bs` bytes at `off`; returns (latency, completion time).
/// Positioning and filling the write buffer happen before the clock
/// starts.
fn one_io(
    os: &mut dyn Os,
    spec: &JobSpec,
    job: &mut Job,
    dir: Ddir,
    off: u64,
    buf: &mut [u8],
) -> Result<(u64, u64), FioError> {
    let write = dir == Ddir::Write;
    if write {
        pattern::fill(buf, off);
    }
    let what = if write { "write" } else { "read" };
    let (t0, t1) = match spec.ioengine {
        Engine::Mmap => {
            let t0 = os.uptime_ns();
            let r = os.mmap_io(&job.path, off, buf.len(), write, buf);
            let t1 = os.uptime_ns();
            match r {
                Ok(()) => (t0, t1),
                Err(Errno::NotSupported) => return Err(mmap_unsupported()),
                Err(e) => {
                    return Err(os_err(&job.path, &format!("mmap {what} at {off}"), e));
                }
            }
        }
        // libaio goes through run_batched; one synchronous positioned
        // I/O is its degenerate form.
        Engine::Psync | Engine::Libaio => {
            let fd = position(os, job, off)?;
            let t0 = os.uptime_ns();
            let r = transfer(os, fd, write, buf);
            let t1 = os.uptime_ns();
            match r {
                Ok(()) => {
                    job.pos = off.saturating_add(buf.len() as u64);
                    (t0, t1)
                }
                Err(e) => {
                    // The position is unknown after a failed transfer.
                    job.pos = u64::MAX;
                    return Err(os_err(&job.path, &format!("{what} at {off}"), e));
                }
            }
        }
    };
    Ok((t1.saturating_sub(t0), t1))
}

/// Move all of `buf` (short transfers are continued; end of file or a
/// write that makes no progress is an I/O error).
fn transfer(os: &mut dyn Os, fd: Fd, write: bool, buf: &mut [u8]) -> Result<(), Errno> {
    let mut done = 0;
    while done < buf.len() {
        let rest = buf.get_mut(done..).ok_or(Errno::Io)?;
        let n = if write {
            os.write(fd, rest)?
        } else {
            os.read(fd, rest)?
        };
        if n == 0 {
            return Err(Errno::Io);
        }
        done += n;
    }
    Ok(())
}
