//! The node cache's control commands: `cache policy [NAME]`, `cache config
//! [KEY=VALUE ...]` and `locality PATH`.

use alloc::format;
use alloc::string::String;

use super::cachearg::{os_err, unknown_policy, MAX_LIMIT};
use super::{quoted, Args, Ctx, Error};
use crate::os::{CacheControls, PolicyName, MIN_CACHE_LIMIT};

/// Longest TTL `cache config ttl=` accepts (30 days).
pub const MAX_TTL_S: u64 = 30 * 24 * 3600;
/// Largest promotion threshold `cache config promote=` accepts.
pub const MAX_PROMOTE: u32 = 1 << 20;
/// Longest promotion window `cache config promote_window_ms=` accepts (1 h).
pub const MAX_PROMOTE_WINDOW_MS: u64 = 3_600_000;

/// `cache policy [NAME] [--group G]`: the policy name and the group, or
/// a usage error.
fn policy_args<'a>(args: &'a Args<'_>) -> Result<(Option<&'a str>, Option<&'a str>), Error> {
    let mut name = None;
    let mut group = None;
    let mut i = 0;
    while let Some(w) = args.get(i) {
        i += 1;
        if w == "--group" {
            let g = args
                .get(i)
                .ok_or_else(|| Error::Msg("--group needs a NAME".into()))?;
            i += 1;
            if group.replace(g).is_some() {
                return Err(Error::Msg("--group given twice".into()));
            }
        } else if let Some(g) = w.strip_prefix("--group=") {
            if group.replace(g).is_some() {
                return Err(Error::Msg("--group given twice".into()));
            }
        } else if w.starts_with("--") {
            return Err(Error::Msg(format!(
                "unknown option '{}' (valid: --group NAME)",
                quoted(w)
            )));
        } else if name.replace(w).is_some() {
            return Err(Error::Usage);
        }
    }
    Ok((name, group))
}

pub(super) fn cmd_cache_policy(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let (name, group) = policy_args(args)?;
    if let Some(g) = group {
        return super::groups::group_policy(ctx, name, g);
    }
    if let Some(name) = name {
        let p = PolicyName::parse(name).ok_or_else(|| unknown_policy(name))?;
        let mut k = ctx.os.cache_controls().map_err(os_err)?;
        k.policy = p;
        ctx.os.set_cache_controls(k).map_err(os_err)?;
    }
    let k = ctx.os.cache_controls().map_err(os_err)?;
    ctx.println(&format!("policy     {}", k.policy.as_str()));
    ctx.println(&format!("available  {}", PolicyName::names()));
    Ok(())
}

/// Apply `KEY=VALUE` words to `k`: all of them or none (the first bad one
/// is the error).
pub fn apply_config<'a>(
    k: &mut CacheControls,
    words: impl IntoIterator<Item = &'a str>,
) -> Result<(), String> {
    let mut new = *k;
    for w in words {
        let Some((key, v)) = w.split_once('=') else {
            return Err(format!("'{}': expected KEY=VALUE", quoted(w)));
        };
        match key {
            "ttl" => {
                new.ttl_s = v.parse().ok().filter(|s| *s <= MAX_TTL_S).ok_or_else(|| {
                    format!(
                        "ttl={}: expected seconds, 0 (off) to {MAX_TTL_S}",
                        quoted(v)
                    )
                })?
            }
            "limit" => {
                new.limit = match v {
                    "0" | "none" => None,
                    _ => Some(
                        v.parse()
                            .ok()
                            .filter(|n| (MIN_CACHE_LIMIT..=MAX_LIMIT).contains(n))
                            .ok_or_else(|| {
                                format!(
                                "limit={}: expected pages, {MIN_CACHE_LIMIT} to {MAX_LIMIT} (0 or none: the pool)",
                                quoted(v)
                            )
                            })?,
                    ),
                }
            }
            "promote" => {
                new.promote = v
                    .parse()
                    .ok()
                    .filter(|n| *n <= MAX_PROMOTE)
                    .ok_or_else(|| {
                        format!(
                            "promote={}: expected reads per window, 0 (off) to {MAX_PROMOTE}",
                            quoted(v)
                        )
                    })?
            }
            "promote_window_ms" => {
                new.promote_window_ms = v
                    .parse()
                    .ok()
                    .filter(|n| (1..=MAX_PROMOTE_WINDOW_MS).contains(n))
                    .ok_or_else(|| {
                        format!(
                            "promote_window_ms={}: expected milliseconds, 1 to {MAX_PROMOTE_WINDOW_MS}",
                            quoted(v)
                        )
                    })?
            }
            "policy" => {
                new.policy = PolicyName::parse(v).ok_or_else(|| {
                    format!(
                        "policy={}: expected one of {}",
                        quoted(v),
                        PolicyName::names()
                    )
                })?
            }
            _ => {
                return Err(format!(
                    "unknown key '{}' (valid: ttl, limit, policy, promote, promote_window_ms, group)",
                    quoted(key)
                ))
            }
        }
    }
    *k = new;
    Ok(())
}

pub(super) fn cmd_cache_config(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let words = || args.words.iter().map(|w| w.text.as_str());
    if let Some(g) = words().find_map(|w| w.strip_prefix("group=")) {
        let rest = words().filter(|w| !w.starts_with("group="));
        if words().filter(|w| w.starts_with("group=")).count() > 1 {
            return Err(Error::Msg("group= given twice".into()));
        }
        return super::groups::group_config(ctx, g, rest);
    }
    if args.len() > 0 {
        let mut k = ctx.os.cache_controls().map_err(os_err)?;
        apply_config(&mut k, args.words.iter().map(|w| w.text.as_str())).map_err(Error::Msg)?;
        ctx.os.set_cache_controls(k).map_err(os_err)?;
    }
    let k = ctx.os.cache_controls().map_err(os_err)?;
    ctx.println(&format!("policy  {}", k.policy.as_str()));
    match k.limit {
        Some(l) => ctx.println(&format!("limit   {l}")),
        None => ctx.println("limit   none"),
    }
    match k.ttl_s {
        0 => ctx.println("ttl     off"),
        s => ctx.println(&format!("ttl     {s}")),
    }
    match k.promote {
        0 => ctx.println("promote off"),
        t => ctx.println(&format!("promote {t} reads in {} ms", k.promote_window_ms)),
    }
    Ok(())
}

/// Largest `cache readahead` window, KiB (the boot option's bound).
pub const MAX_READAHEAD_KB: u32 = 8192;
/// Largest `cache readahead` fault-around block, KiB.
pub const MAX_FAULTAROUND_KB: u32 = 2048;

/// `cache readahead [KB [FAULTAROUND_KB]]`: show, or set the readahead
/// window (and the mmap fault-around block) at run time, so that one boot
/// can measure sequential reads with readahead on and off.
pub(super) fn cmd_cache_readahead(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let kb = |i: usize, max: u32, what: &str| -> Result<Option<u32>, Error> {
        match args.get(i) {
            None => Ok(None),
            Some(v) => v
                .parse::<u32>()
                .ok()
                .filter(|n| *n <= max)
                .map(Some)
                .ok_or_else(|| {
                    Error::Msg(format!(
                        "{what} '{}': expected KiB, 0 (off) to {max}",
                        quoted(v)
                    ))
                }),
        }
    };
    let ra = kb(0, MAX_READAHEAD_KB, "readahead")?;
    let fa = kb(1, MAX_FAULTAROUND_KB, "fault-around")?;
    if let Some(ra) = ra {
        let (_, old_fa) = ctx.os.readahead_kb().map_err(os_err)?;
        ctx.os
            .set_readahead_kb(ra, fa.unwrap_or(old_fa))
            .map_err(os_err)?;
    }
    let (ra, fa) = ctx.os.readahead_kb().map_err(os_err)?;
    let show = |v: u32| {
        if v == 0 {
            String::from("off")
        } else {
            format!("{v} KiB")
        }
    };
    ctx.println(&format!("readahead    {}", show(ra)));
    ctx.println(&format!("fault-around {}", show(fa)));
    Ok(())
}

pub(super) fn cmd_locality(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let path = args.path(0)?;
    let runs = ctx
        .os
        .locality(&path)
        .map_err(|e| Error::Msg(format!("{}: {e}", quoted(&path))))?;
    if runs.is_empty() {
        ctx.println(&format!("{}: no pages", quoted(&path)));
        return Ok(());
    }
    let mut out = String::new();
    for r in runs {
        let last = r.first.saturating_add(u64::from(r.pages).saturating_sub(1));
        if r.owner == 0 {
            out.push_str(&format!("pages {}-{} on disk only\n", r.first, last));
        } else {
            out.push_str(&format!(
                "pages {}-{} owner={} sharers={}\n",
                r.first, last, r.owner, r.sharers
            ));
        }
    }
    ctx.print(&out);
    Ok(())
}
