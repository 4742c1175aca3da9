//! Running a parsed job: layout, cache drop, the timed interleaved I/O
//! loop, and the figures.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::offsets::{Ddir, Mix, OffsetGen};
use super::options::{Engine, JobSpec};
use super::report::{DirStats, Invalidated, Report, Samples, RESERVOIR};
use super::{FioError, RunEnv};
use crate::os::{BatchIo, Errno, Fd, FileKind, OpenFlags, Os};
use crate::pattern;

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

/// I/Os per batch wanted for `spec` (libaio): every job's `iodepth`,
/// capped at [`MAX_BATCH`] and by [`MAX_BATCH_BYTES`] of buffers.
fn batch_slots(spec: &JobSpec, bs: usize) -> usize {
    let want =
        usize::try_from(u64::from(spec.iodepth) * u64::from(spec.numjobs)).unwrap_or(MAX_BATCH);
    want.min(MAX_BATCH).min(MAX_BATCH_BYTES / bs.max(1)).max(1)
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
    if spec.ioengine == Engine::Libaio {
        probe_batch(os, jobs)?;
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
    let start = os.uptime_ns();
    let mut meter = Meter::new(spec, limits, start, budget);
    let effective_iodepth = match spec.ioengine {
        Engine::Libaio => run_batched(os, spec, jobs, &mut meter, buf, budget)?,
        Engine::Psync | Engine::Mmap => {
            run_sync(os, spec, jobs, &mut meter, buf, budget)?;
            1
        }
    };

    let elapsed_ns = if meter.measuring {
        meter.last_done.saturating_sub(meter.measure_start)
    } else {
        0
    };
    let [mut rs, mut ws] = meter.samples;
    Ok(Report {
        spec: spec.clone(),
        env: env.clone(),
        read: DirStats::new(rs.count(), spec.bs, elapsed_ns, rs.latency()),
        write: DirStats::new(ws.count(), spec.bs, elapsed_ns, ws.latency()),
        elapsed_ns,
        effective_iodepth,
        fsyncs: meter.fsyncs,
        files: Vec::new(),
        laid_out_files: 0,
        laid_out_bytes: 0,
        invalidated,
        hit_runtime: meter.hit_runtime,
    })
}

/// The clock side of a run: ramp, runtime, a stuck clock, and what is
/// measured.
struct Meter {
    /// Latency samples: reads, writes.
    samples: [Samples; 2],
    /// fsync calls while measuring.
    fsyncs: u64,
    /// The ramp is over.
    measuring: bool,
    ramp_end: u64,
    /// When measuring started.
    measure_start: u64,
    /// When the runtime is over (`u64::MAX`: never).
    deadline: u64,
    /// The last measured completion.
    last_done: u64,
    hit_runtime: bool,
    last_clock: u64,
    /// I/Os issued without the clock moving.
    stuck: u64,
    stuck_limit: u64,
    runtime_ns: u64,
    time_based: bool,
}

impl Meter {
    fn new(spec: &JobSpec, limits: Limits, start: u64, budget: u64) -> Meter {
        let expect = budget.saturating_mul(u64::from(spec.numjobs));
        let cap = |used: bool| if used { limits.reservoir } else { 1 };
        Meter {
            samples: [
                Samples::new(cap(spec.rw.reads()), expect),
                Samples::new(cap(spec.rw.writes()), expect),
            ],
            fsyncs: 0,
            measuring: spec.ramp_ns == 0,
            ramp_end: start.saturating_add(spec.ramp_ns),
            measure_start: start,
            deadline: deadline_after(start, spec.runtime_ns),
            last_done: start,
            hit_runtime: false,
            last_clock: start,
            stuck: 0,
            stuck_limit: limits.stuck_ios,
            runtime_ns: spec.runtime_ns,
            time_based: spec.time_based,
        }
    }

    /// `ios` I/Os are about to be issued at `now`: fail if the clock has
    /// not moved for too many of them and the end of the run depends on
    /// it.
    fn check_clock(&mut self, now: u64, ios: u64) -> Result<(), FioError> {
        if now != self.last_clock {
            self.last_clock = now;
            self.stuck = 0;
        } else if !self.measuring || self.time_based {
            self.stuck = self.stuck.saturating_add(ios);
            if self.stuck > self.stuck_limit {
                return Err(FioError::new(String::from(
                    "the clock does not advance (uptime_ns is stuck)",
                )));
            }
        }
        Ok(())
    }

    /// At `now`, before issuing I/O: start measuring if the ramp is over;
    /// `true` if the runtime has passed (the run ends).
    fn expired(&mut self, now: u64) -> bool {
        if !self.measuring && now >= self.ramp_end {
            self.measuring = true;
            self.measure_start = now;
            self.last_done = now;
            self.deadline = deadline_after(now, self.runtime_ns);
        }
        if self.measuring && now >= self.deadline {
            self.hit_runtime = true;
            return true;
        }
        false
    }

    /// Record one completed I/O of `dir` that took `lat` (while
    /// measuring).
    fn record(&mut self, dir: Ddir, lat: u64) {
        if let Some(s) = self.samples.get_mut(dir.index()) {
            s.push(lat);
        }
    }
}

/// psync and mmap: jobs take turns round-robin, one synchronous I/O each
/// per turn.
fn run_sync(
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
fn fsync_job(os: &mut dyn Os, job: &Job, meter: &mut Meter) -> Result<(), FioError> {
    if let Some(fd) = job.fd {
        os.fsync(fd).map_err(|e| os_err(&job.path, "fsync", e))?;
    }
    if meter.measuring {
        meter.fsyncs += 1;
        meter.last_done = os.uptime_ns();
    }
    Ok(())
}

/// Check before the run that [`Os::io_batch`] works here: one empty read
/// at offset 0 of the first job's file.
fn probe_batch(os: &mut dyn Os, jobs: &[Job]) -> Result<(), FioError> {
    let Some(job) = jobs.first() else {
        return Ok(());
    };
    let fd = job
        .fd
        .ok_or_else(|| os_err(&job.path, "open", Errno::BadFd))?;
    let mut probe = [BatchIo::new(fd, 0, false, &mut [])];
    let r = os.io_batch(&mut probe).and_then(|()| {
        let [p] = &probe;
        p.done.map(|_| ())
    });
    match r {
        Ok(()) => Ok(()),
        Err(Errno::NotSupported) => Err(libaio_unsupported()),
        Err(e) => Err(os_err(&job.path, "io_batch", e)),
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
/// completion minus its submission. Returns the mean number of I/Os per
/// batch (while measuring if any batch was measured), rounded.
fn run_batched(
    os: &mut dyn Os,
    spec: &JobSpec,
    jobs: &mut [Job],
    meter: &mut Meter,
    bufs: &mut [u8],
    budget: u64,
) -> Result<u32, FioError> {
    let bs = usize::try_from(spec.bs).unwrap_or(usize::MAX);
    let cap = (bufs.len() / bs.max(1)).clamp(1, MAX_BATCH);
    let mut slots: Vec<Slot> = Vec::with_capacity(cap);
    let mut first = 0usize;
    // (batches, I/Os): while measuring, and in all.
    let mut measured = (0u64, 0u64);
    let mut all = (0u64, 0u64);
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
    let (batches, ios) = if measured.0 > 0 { measured } else { all };
    Ok(rounded_mean(ios, batches))
}

/// `sum / count` rounded to the nearest integer (0 if `count` is 0).
fn rounded_mean(sum: u64, count: u64) -> u32 {
    let mean = sum
        .saturating_add(count / 2)
        .checked_div(count)
        .unwrap_or(0);
    u32::try_from(mean).unwrap_or(u32::MAX)
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
