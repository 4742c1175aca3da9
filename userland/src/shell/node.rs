//! Node status commands: `nodes`, `cache stats`, `cache drop`, `cache
//! hold`, `dir stats`,
//! `uptime`, `trace`, `fio`, `shutdown`.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::{one_line, Args, Ctx, Error};

pub(super) fn cmd_nodes(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> Result<(), Error> {
    let info = ctx.os.cluster();
    let mut out = format!("epoch={}\n", info.epoch);
    for n in &info.nodes {
        let mark = if n.id == info.self_id { '*' } else { ' ' };
        let id = if n.id == 0 {
            String::from("dir")
        } else {
            format!("{}", n.id)
        };
        out.push_str(&format!(
            "{} {:<4} {:<8} heartbeat={} epoch={}\n",
            mark,
            id,
            one_line(&n.state),
            n.heartbeat,
            n.epoch
        ));
    }
    ctx.print(&out);
    Ok(())
}

fn print_pairs(ctx: &mut Ctx<'_>, pairs: &[(String, String)]) {
    let width = pairs.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (k, v) in pairs {
        out.push_str(&format!("{:<width$}  {}\n", one_line(k), one_line(v)));
    }
    ctx.print(&out);
}

pub(super) fn cmd_cache_stats(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> Result<(), Error> {
    let pairs = ctx
        .os
        .cache_stats()
        .map_err(|e| Error::Msg(format!("{e}")))?;
    print_pairs(ctx, &pairs);
    Ok(())
}

pub(super) fn cmd_cache_drop(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> Result<(), Error> {
    let line = ctx
        .os
        .cache_drop()
        .map_err(|e| Error::Msg(format!("{e}")))?;
    ctx.println(&line);
    Ok(())
}

/// Largest page index `cache hold` takes (a slot tag's page offset has 20 bits).
pub const MAX_HOLD_PAGE: u64 = (1 << 20) - 1;

pub(super) fn cmd_cache_hold(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let path = args.path(0)?;
    let page_arg = args.get(1).ok_or(Error::Usage)?;
    let page = match crate::parse::u64_dec(page_arg) {
        Ok(p) if p <= MAX_HOLD_PAGE => p,
        _ => {
            return Err(Error::Msg(format!(
                "bad page '{}' (0 to {MAX_HOLD_PAGE})",
                super::quoted(page_arg)
            )))
        }
    };
    let pin = match args.get(2) {
        Some("pin") => true,
        Some("claim") => false,
        Some(s) => {
            return Err(Error::Msg(format!(
                "bad hold '{}' (claim or pin)",
                super::quoted(s)
            )))
        }
        None => return Err(Error::Usage),
    };
    let line = ctx
        .os
        .cache_hold(&path, page, pin)
        .map_err(super::at(&path))?;
    ctx.println(&line);
    Ok(())
}

pub(super) fn cmd_dir_stats(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> Result<(), Error> {
    let pairs = ctx.os.dir_stats().map_err(|e| Error::Msg(format!("{e}")))?;
    print_pairs(ctx, &pairs);
    Ok(())
}

pub(super) fn cmd_trace(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let (inst, hz, now) = ctx
        .os
        .trace_clock()
        .ok_or_else(|| Error::Msg(String::from("no protocol timeline on this system")))?;
    fabric::trace::command(args.get(0).unwrap_or(""), inst, hz, now, |l| ctx.println(l))
        .map_err(|usage| Error::Msg(String::from(usage)))
}

pub(super) fn cmd_uptime(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> Result<(), Error> {
    ctx.println(&format_uptime(ctx.os.uptime_ns()));
    Ok(())
}

/// `up S.UUUUUU s` for a time in nanoseconds.
pub(super) fn format_uptime(ns: u64) -> String {
    format!(
        "up {}.{:06} s",
        ns / 1_000_000_000,
        (ns % 1_000_000_000) / 1000
    )
}

pub(super) fn cmd_fio(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let argv: Vec<&str> = args.words.iter().map(|w| w.text.as_str()).collect();
    let out = crate::fio::command(&mut *ctx.os, &argv)
        .map_err(|e| Error::Msg(String::from(e.message())))?;
    ctx.print(&out);
    Ok(())
}

pub(super) fn cmd_app(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let argv: Vec<&str> = args.words.iter().map(|w| w.text.as_str()).collect();
    let out = crate::app::command(&mut *ctx.os, &argv)
        .map_err(|e| Error::Msg(String::from(e.message())))?;
    ctx.print(&out);
    Ok(())
}

pub(super) fn cmd_shutdown(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> Result<(), Error> {
    ctx.shutdown = true;
    Ok(())
}
