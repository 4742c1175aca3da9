//! `bench miss [N] [read|batch]`: N cold 4 KiB misses in this node's mode,
//! split into phases (node call, transport, directory lookup / disk read /
//! fill / reply, node fill/map; see [`crate::stats::miss`]).
//!
//! The path a miss takes: `read` (the default) is one `read` call, as the
//! shell's `cat` and `sum` and fio's psync engine without tasks do;
//! `batch` is one [`Os::io_batch`] of one I/O, as fio's libaio engine
//! sends each job's iodepth (the data path's prefetch of the batch's
//! pages, then the read). The two paths differ per mode (the private
//! cache's batch is a group of ring reads), so the phases of both can be
//! set side by side.
//!
//! It writes a scratch file of N + 1 pages ([`MISS_FILE`]), syncs it,
//! drops this node's caches (`cache drop`: in the single-copy modes every
//! page this node owns goes back to the directory, so the pages are cached
//! nowhere), reads page 0 untimed (opening and validating the file), then
//! times a 4 KiB read of each other page, and removes the file.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use crate::os::{BatchIo, Fd, MissCounters, OpenFlags, Os};
use crate::parse;
use crate::pattern;
use crate::stats::miss::{breakdown, render, MissRun};
use crate::stats::percentile;

use super::{quoted, Args, Ctx, Error};

/// The scratch file.
pub const MISS_FILE: &str = "/bench-miss";
/// Default misses.
pub const MISS_DEFAULT: u64 = 64;
/// Most misses (a file of 4 MiB: well inside every mode's cache).
pub const MISS_MAX: u64 = 1024;

const PAGE: usize = 4096;

/// How each timed page is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissPath {
    /// One `read` call.
    Read,
    /// One [`Os::io_batch`] of one I/O.
    Batch,
}

impl MissPath {
    /// The word of the command line and the `RESULT` json.
    pub fn name(self) -> &'static str {
        match self {
            MissPath::Read => "read",
            MissPath::Batch => "batch",
        }
    }
}

pub(super) fn cmd_bench_miss(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let n = match args.get(0) {
        None => MISS_DEFAULT,
        Some(s) => parse::u64_dec(s)
            .ok()
            .filter(|n| (1..=MISS_MAX).contains(n))
            .ok_or_else(|| Error::Msg(format!("bad count '{}' (1 to {MISS_MAX})", quoted(s))))?,
    };
    let path = match args.get(1) {
        None | Some("read") => MissPath::Read,
        Some("batch") => MissPath::Batch,
        Some(s) => {
            return Err(Error::Msg(format!(
                "bad path '{}' (read or batch)",
                quoted(s)
            )))
        }
    };
    let (_, mode, _) = ctx.os.run_env();
    let r = write_file(ctx, n + 1).and_then(|()| measure(ctx, n, &mode, path));
    let gone = ctx.os.unlink(MISS_FILE);
    let run = r?;
    gone.map_err(|e| Error::Msg(format!("{MISS_FILE}: removing it: {e}")))?;
    let b = breakdown(&run).map_err(|e| Error::Msg(String::from(e)))?;
    ctx.os.print(&render(&run, &b));
    Ok(())
}

/// The scratch file: `pages` pages of the test pattern, on the disk, in
/// no node's cache.
fn write_file(ctx: &mut Ctx<'_>, pages: u64) -> Result<(), Error> {
    let err = |what: &str, e| Error::Msg(format!("{MISS_FILE}: {what}: {e}"));
    let flags = OpenFlags {
        create: true,
        truncate: true,
        ..OpenFlags::default()
    };
    ctx.with_file(MISS_FILE, flags, |ctx, fd| {
        let mut buf = vec![0u8; PAGE];
        let mut written = 0u64;
        for i in 0..pages {
            pattern::fill(&mut buf, i * PAGE as u64);
            ctx.write_all_counted(fd, &buf, &mut written)
                .map_err(|e| err("write", e))?;
        }
        ctx.os.fsync(fd).map_err(|e| err("fsync", e))
    })?;
    ctx.os.sync().map_err(|e| err("sync", e))?;
    ctx.os.cache_drop().map_err(|e| err("cache drop", e))?;
    Ok(())
}

fn measure(ctx: &mut Ctx<'_>, n: u64, mode: &str, path: MissPath) -> Result<MissRun, Error> {
    let err = |what: &str, e| Error::Msg(format!("{MISS_FILE}: {what}: {e}"));
    let fd = ctx
        .os
        .open(MISS_FILE, OpenFlags::default())
        .map_err(|e| err("open", e))?;
    let r = timed_reads(ctx, fd, n, mode, path);
    let closed = ctx.os.close(fd);
    let run = r?;
    closed.map_err(|e| err("close", e))?;
    Ok(run)
}

fn timed_reads(
    ctx: &mut Ctx<'_>,
    fd: Fd,
    n: u64,
    mode: &str,
    path: MissPath,
) -> Result<MissRun, Error> {
    let err = |what: &str, e| Error::Msg(format!("{MISS_FILE}: {what}: {e}"));
    let mut page = vec![0u8; PAGE];
    read_page(ctx, fd, 0, &mut page)?;
    let before = ctx
        .os
        .miss_counters()
        .map_err(|e| err("miss counters", e))?;
    let mut samples: Vec<u64> = Vec::with_capacity(n as usize);
    for i in 1..=n {
        let t0 = ctx.os.uptime_ns();
        match path {
            MissPath::Read => read_page(ctx, fd, i, &mut page)?,
            MissPath::Batch => batch_page(ctx.os, fd, i, &mut page)?,
        }
        samples.push(ctx.os.uptime_ns().saturating_sub(t0));
        if let Some(bad) = pattern::first_mismatch(&page, i * PAGE as u64) {
            return Err(Error::Msg(format!(
                "{MISS_FILE}: page {i} reads back wrong at byte {bad}"
            )));
        }
    }
    let after = ctx
        .os
        .miss_counters()
        .map_err(|e| err("miss counters", e))?;
    Ok(run_of(mode, path, &samples, &before, &after))
}

/// Read page `idx` whole into `page` as a batch of one I/O.
fn batch_page(os: &mut dyn Os, fd: Fd, idx: u64, page: &mut [u8]) -> Result<(), Error> {
    let e = |e| Error::Msg(format!("{MISS_FILE}: batch read of page {idx}: {e}"));
    let len = page.len();
    let mut ios = [BatchIo::new(fd, idx * PAGE as u64, false, page)];
    os.io_batch(&mut ios).map_err(e)?;
    let got = ios[0].done.map_err(e)?;
    if got != len {
        return Err(Error::Msg(format!(
            "{MISS_FILE}: batch read of page {idx}: {got} of {len} bytes"
        )));
    }
    Ok(())
}

/// Read page `idx` whole into `page`.
fn read_page(ctx: &mut Ctx<'_>, fd: Fd, idx: u64, page: &mut [u8]) -> Result<(), Error> {
    let e = |e| Error::Msg(format!("{MISS_FILE}: read of page {idx}: {e}"));
    ctx.os.seek(fd, idx * PAGE as u64).map_err(e)?;
    let got = ctx.os.read(fd, page).map_err(e)?;
    if got != page.len() {
        return Err(Error::Msg(format!(
            "{MISS_FILE}: read of page {idx}: {got} of {} bytes",
            page.len()
        )));
    }
    Ok(())
}

/// The run from the read times and the counters around them: the
/// directory's kind of miss is the mode's (file-server reads in the
/// private-cache modes, page fills in the single-copy ones).
fn run_of(
    mode: &str,
    path: MissPath,
    samples: &[u64],
    before: &MissCounters,
    after: &MissCounters,
) -> MissRun {
    let dir = if matches!(mode, "private" | "net") {
        after.file_reads.since(&before.file_reads)
    } else {
        after.page_fills.since(&before.page_fills)
    };
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    MissRun {
        mode: String::from(mode),
        path: path.name(),
        misses: samples.len() as u64,
        total_ns: samples.iter().sum(),
        median_ns: percentile(&sorted, 500).unwrap_or(0),
        round_trip_ns: after.round_trip_ns.saturating_sub(before.round_trip_ns),
        node_fill_ns: after.fill_ns.saturating_sub(before.fill_ns),
        dir,
    }
}
