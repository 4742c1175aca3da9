//! Running a parsed job: layout, cache drop, the timed interleaved I/O
//! loop, and the figures.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::offsets::{Ddir, Mix, OffsetGen};
use super::options::{Engine, JobSpec};
use super::report::{DirStats, Invalidated, Report, Samples, RESERVOIR};
use super::{FioError, RunEnv};
use crate::os::{Errno, Fd, FileKind, OpenFlags, Os};
use crate::pattern;

/// Write size of the layout phase.
const LAYOUT_CHUNK: usize = 64 * 1024;

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
}

fn os_err(path: &str, what: &str, e: Errno) -> FioError {
    FioError::new(format!("{path}: {what}: {e}"))
}

fn mmap_unsupported() -> FioError {
    FioError::new(String::from("ioengine=mmap not supported in this mode"))
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
    let mut buf: Vec<u8> = Vec::new();
    buf.try_reserve_exact(bs)
        .map_err(|_| FioError::new(format!("cannot allocate a {bs}-byte I/O buffer")))?;
    buf.resize(bs, 0);

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

/// fio's layout phase (not timed): make every file at least `size`
/// bytes. Jobs that read get the userland test pattern appended; write-only
/// jobs just extend the file. Returns (files touched, bytes written).
fn layout(os: &mut dyn Os, spec: &JobSpec, files: &[String]) -> Result<(u32, u64), FioError> {
    let mut touched = 0u32;
    let mut written = 0u64;
    let mut chunk: Vec<u8> = Vec::new();
    for path in files {
        let cur = match os.stat(path) {
            Ok(a) if a.kind == FileKind::Dir => {
                return Err(os_err(path, "layout", Errno::IsDir));
            }
            Ok(a) => a.size,
            Err(Errno::NotFound) => 0,
            Err(e) => return Err(os_err(path, "layout", e)),
        };
        if cur >= spec.size {
            continue;
        }
        touched += 1;
        let flags = OpenFlags {
            create: true,
            append: spec.rw.reads(),
            ..OpenFlags::default()
        };
        let fd = os
            .open(path, flags)
            .map_err(|e| os_err(path, "layout", e))?;
        let r = if spec.rw.reads() {
            if chunk.is_empty() {
                chunk.resize(LAYOUT_CHUNK, 0);
            }
            append_pattern(os, fd, cur, spec.size, &mut chunk, &mut written)
        } else {
            os.truncate(fd, spec.size)
        };
        let closed = os.close(fd);
        r.map_err(|e| os_err(path, "layout", e))?;
        closed.map_err(|e| os_err(path, "layout", e))?;
    }
    Ok((touched, written))
}

/// Append the pattern for `[from, to)` to a file opened for appending.
fn append_pattern(
    os: &mut dyn Os,
    fd: Fd,
    from: u64,
    to: u64,
    chunk: &mut [u8],
    written: &mut u64,
) -> Result<(), Errno> {
    let mut off = from;
    while off < to {
        let n = usize::try_from(to - off).map_or(chunk.len(), |r| r.min(chunk.len()));
        let part = chunk.get_mut(..n).ok_or(Errno::Io)?;
        pattern::fill(part, off);
        let mut done = 0;
        while done < n {
            let k = os.write(fd, part.get(done..).ok_or(Errno::Io)?)?;
            if k == 0 {
                return Err(Errno::Io);
            }
            done += k;
        }
        off += n as u64;
        *written = written.saturating_add(n as u64);
    }
    Ok(())
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
    let expect = budget.saturating_mul(u64::from(spec.numjobs));
    let cap = |used: bool| if used { limits.reservoir } else { 1 };
    let mut samples = [
        Samples::new(cap(spec.rw.reads()), expect),
        Samples::new(cap(spec.rw.writes()), expect),
    ];
    let mut fsyncs = 0u64;

    let start = os.uptime_ns();
    let ramp_end = start.saturating_add(spec.ramp_ns);
    let mut measuring = spec.ramp_ns == 0;
    let mut measure_start = start;
    let mut deadline = deadline_after(start, spec.runtime_ns);
    let mut last_done = start;
    let mut hit_runtime = false;
    let mut last_clock = start;
    let mut stuck = 0u64;

    'run: loop {
        let mut progressed = false;
        for job in jobs.iter_mut() {
            if job.done >= budget {
                continue;
            }
            let now = os.uptime_ns();
            if now != last_clock {
                last_clock = now;
                stuck = 0;
            } else if !measuring || spec.time_based {
                stuck += 1;
                if stuck > limits.stuck_ios {
                    return Err(FioError::new(String::from(
                        "the clock does not advance (uptime_ns is stuck)",
                    )));
                }
            }
            if !measuring && now >= ramp_end {
                measuring = true;
                measure_start = now;
                last_done = now;
                deadline = deadline_after(now, spec.runtime_ns);
            }
            if measuring && now >= deadline {
                hit_runtime = true;
                break 'run;
            }
            let dir = job.mix.pick();
            let off = job.offsets.next_offset(dir);
            let (lat, t1) = one_io(os, spec, job, dir, off, buf)?;
            if measuring {
                if let Some(s) = samples.get_mut(dir.index()) {
                    s.push(lat);
                }
                job.done += 1;
                last_done = t1;
            }
            if dir == Ddir::Write && spec.fsync > 0 {
                job.writes += 1;
                if job.writes >= spec.fsync {
                    job.writes = 0;
                    if let Some(fd) = job.fd {
                        os.fsync(fd).map_err(|e| os_err(&job.path, "fsync", e))?;
                    }
                    if measuring {
                        fsyncs += 1;
                        last_done = os.uptime_ns();
                    }
                }
            }
            progressed = true;
        }
        if !progressed {
            break;
        }
    }

    let elapsed_ns = if measuring {
        last_done.saturating_sub(measure_start)
    } else {
        0
    };
    let [mut rs, mut ws] = samples;
    Ok(Report {
        spec: spec.clone(),
        env: env.clone(),
        read: DirStats::new(rs.count(), spec.bs, elapsed_ns, rs.latency()),
        write: DirStats::new(ws.count(), spec.bs, elapsed_ns, ws.latency()),
        elapsed_ns,
        effective_iodepth: 1,
        fsyncs,
        files: Vec::new(),
        laid_out_files: 0,
        laid_out_bytes: 0,
        invalidated,
        hit_runtime,
    })
}

fn deadline_after(t: u64, runtime_ns: u64) -> u64 {
    if runtime_ns == 0 {
        u64::MAX
    } else {
        t.saturating_add(runtime_ns)
    }
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
        Engine::Psync => {
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
