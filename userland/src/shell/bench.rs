//! Benchmark commands: `bench read`, `bench inv`, `bench dir`,
//! `bench pingpong`, `bench doorbell`, `bench ring`, `bench rpc`,
//! `bench calibrate`, `bench trace`.

use alloc::format;
use alloc::string::String;

use crate::parse;
use crate::stats::Summary;

use super::{at, quoted, Args, Ctx, Error, BENCH_RING_DEFAULT, BENCH_RING_MAX};

/// Print `LABEL: n=.. median=.. ns p99=.. ns min=.. ns max=.. ns`.
fn print_summary(ctx: &mut Ctx<'_>, label: &str, samples: &mut [u64]) -> Result<(), Error> {
    let s = Summary::from_samples(samples).ok_or_else(|| Error::Msg(String::from("no samples")))?;
    ctx.println(&format!(
        "{label}: n={} median={} ns p99={} ns min={} ns max={} ns mean={} ns",
        s.count, s.median, s.p99, s.min, s.max, s.mean
    ));
    Ok(())
}

pub(super) fn cmd_bench_read(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let path = args.path(0)?;
    let mut samples = ctx.os.bench_read(&path).map_err(at(&path))?;
    print_summary(ctx, "read 4k", &mut samples)
}

pub(super) fn cmd_bench_inv(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let path = args.path(0)?;
    let mut samples = ctx.os.bench_inv(&path).map_err(at(&path))?;
    print_summary(ctx, "invalidate 1 page", &mut samples)
}

pub(super) fn cmd_bench_dir(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let path = args.path(0)?;
    let rounds = match args.get(1) {
        None => 10,
        Some(s) => parse::u64_dec(s)
            .ok()
            .filter(|r| (1..=100_000).contains(r))
            .ok_or_else(|| Error::Msg(format!("bad rounds '{}' (1 to 100000)", quoted(s))))?
            as u32,
    };
    let max = crate::os::MAX_DIR_BATCH;
    let batch = match args.get(2) {
        None => crate::os::DEFAULT_DIR_BATCH,
        Some(s) => parse::u64_dec(s)
            .ok()
            .filter(|b| (1..=max as u64).contains(b))
            .ok_or_else(|| Error::Msg(format!("bad batch '{}' (1 to {max})", quoted(s))))?
            as usize,
    };
    let (ops, ns) = ctx.os.bench_dir(&path, rounds, batch).map_err(at(&path))?;
    let per_sec = ops
        .saturating_mul(1_000_000_000)
        .checked_div(ns)
        .unwrap_or(0);
    ctx.println(&format!(
        "directory page ops: n={ops} in {} us = {per_sec} ops/s (batch {batch})",
        ns / 1000
    ));
    Ok(())
}

pub(super) fn cmd_bench_pingpong(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let count = bench_count(args)?;
    let mut samples = ctx
        .os
        .bench_pingpong(count)
        .map_err(|e| Error::Msg(format!("{e}")))?;
    print_summary(ctx, "cache-line round trip", &mut samples)
}

pub(super) fn cmd_bench_calibrate(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    use fabric::calibrate::{line, Workload, DEFAULT_ROUNDS, MAX_ROUNDS};
    let rounds = match args.get(0) {
        None => DEFAULT_ROUNDS,
        Some(s) => parse::u64_dec(s)
            .ok()
            .filter(|r| (1..=u64::from(MAX_ROUNDS)).contains(r))
            .ok_or_else(|| Error::Msg(format!("bad rounds '{}' (1 to {MAX_ROUNDS})", quoted(s))))?
            as u32,
    };
    let mut w = Workload::new();
    // One short warm-up run (caches, the TLB, TCG's translation of the
    // code) before the timed one.
    let _ = w.run(rounds.min(1000));
    let t0 = ctx.os.uptime_ns();
    let sum = w.run(rounds);
    let ns = ctx.os.uptime_ns().saturating_sub(t0);
    ctx.println(&line(rounds, ns, sum));
    Ok(())
}

/// Most increments of one `bench atomics`.
pub const MAX_ATOMIC_COUNT: u64 = 100_000_000;

pub(super) fn cmd_bench_atomics(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let count = match args.get(0) {
        Some("reset") => 0,
        Some(s) => match s.parse::<u64>() {
            Ok(n) if (1..=MAX_ATOMIC_COUNT).contains(&n) => n,
            _ => {
                return Err(Error::Msg(format!(
                    "bad count '{s}' (1 to {MAX_ATOMIC_COUNT}, or reset)"
                )))
            }
        },
        None => 1_000_000,
    };
    let (before, after, ns) = ctx
        .os
        .bench_atomics(count)
        .map_err(|e| Error::Msg(format!("{e}")))?;
    if count == 0 {
        ctx.println(&format!("atomics probe reset (was {before})"));
    } else {
        let per = ns.checked_div(count).unwrap_or(0);
        ctx.println(&format!(
            "atomics: {count} increments in {} us ({per} ns each); probe {before} -> {after}",
            ns / 1000
        ));
    }
    Ok(())
}

pub(super) fn cmd_bench_doorbell(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let count = bench_count(args)?;
    let mut samples = ctx
        .os
        .bench_doorbell(count)
        .map_err(|e| Error::Msg(format!("{e}")))?;
    print_summary(ctx, "doorbell round trip", &mut samples)
}

/// The optional COUNT of `bench ring` / `bench pingpong` / `bench doorbell`.
fn bench_count(args: &Args<'_>) -> Result<usize, Error> {
    Ok(match args.get(0) {
        None => BENCH_RING_DEFAULT,
        Some(s) => parse::u64_dec(s)
            .ok()
            .and_then(|c| usize::try_from(c).ok())
            .filter(|c| (1..=BENCH_RING_MAX).contains(c))
            .ok_or_else(|| {
                Error::Msg(format!(
                    "bad count '{}' (1 to {})",
                    quoted(s),
                    BENCH_RING_MAX
                ))
            })?,
    })
}

pub(super) fn cmd_bench_ring(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let count = bench_count(args)?;
    let mut samples = ctx
        .os
        .bench_ring(count)
        .map_err(|e| Error::Msg(format!("{e}")))?;
    let s = Summary::from_samples(&mut samples)
        .ok_or_else(|| Error::Msg(String::from("no samples")))?;
    ctx.println(&format!(
        "ring round trip: n={} median={} ns p99={} ns min={} ns max={} ns",
        s.count, s.median, s.p99, s.min, s.max
    ));
    Ok(())
}

pub(super) fn cmd_bench_rpc(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let count = bench_count(args)?;
    let (transport, mut samples) = ctx
        .os
        .bench_rpc(count)
        .map_err(|e| Error::Msg(format!("{e}")))?;
    let s = Summary::from_samples(&mut samples)
        .ok_or_else(|| Error::Msg(String::from("no samples")))?;
    ctx.println(&format!(
        "rpc round trip over {transport}: n={} median={} ns p99={} ns min={} ns max={} ns",
        s.count, s.median, s.p99, s.min, s.max
    ));
    Ok(())
}

/// Hundredths of a nanosecond per call as `N.NN`, with a sign if asked.
fn centi_ns(v: i128, plus: bool) -> String {
    let sign = if v < 0 {
        "-"
    } else if plus {
        "+"
    } else {
        ""
    };
    let a = v.unsigned_abs();
    format!("{sign}{}.{:02}", a / 100, a % 100)
}

pub(super) fn cmd_bench_trace(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    use fabric::trace::{BENCH_DEFAULT, BENCH_MAX};
    let count = match args.get(0) {
        None => BENCH_DEFAULT,
        Some(s) => parse::u64_dec(s)
            .ok()
            .filter(|c| (1..=BENCH_MAX).contains(c))
            .ok_or_else(|| Error::Msg(format!("bad count '{}' (1 to {BENCH_MAX})", quoted(s))))?,
    };
    let t = ctx
        .os
        .bench_trace(count)
        .map_err(|e| Error::Msg(format!("{e}")))?;
    if t.calls == 0 {
        return Err(Error::Msg(String::from("no calls timed")));
    }
    // Per call in hundredths of a nanosecond: 100000 calls make the
    // resolution far finer than that.
    let per = |ns: u64| (i128::from(ns) * 100) / i128::from(t.calls);
    let (base, off, on) = (per(t.base_ns), per(t.off_ns), per(t.on_ns));
    ctx.println(&format!(
        "trace record: n={count} x {} rounds, ns per call: baseline={} off={} on={} off-baseline={} on-baseline={} (timeline cleared)",
        t.calls / count,
        centi_ns(base, false),
        centi_ns(off, false),
        centi_ns(on, false),
        centi_ns(off - base, true),
        centi_ns(on - base, true),
    ));
    Ok(())
}
