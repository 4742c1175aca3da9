//! Task groups in the shell: `cache groups`, and the
//! group forms of `cache policy NAME --group G` and `cache config group=G
//! [limit=PAGES] [policy=NAME]`. A group is made by the first command
//! naming it (here, or `app`/`fio --group`); its settings are checked
//! whole before anything changes.

use alloc::format;
use alloc::string::String;

use super::cachearg::{os_err, unknown_policy, MAX_LIMIT};
use super::{quoted, Ctx, Error};
use crate::os::{
    valid_group_name, CacheGroup, GroupSettings, PolicyName, DEFAULT_GROUP_NAME, MAX_GROUP_NAME,
    MIN_CACHE_LIMIT,
};

/// `'NAME': expected 1 to 32 of A-Z a-z 0-9 _ - .` unless `name` is usable.
pub fn check_group_name(name: &str) -> Result<(), String> {
    if valid_group_name(name) {
        return Ok(());
    }
    Err(format!(
        "bad group name '{}' (1 to {MAX_GROUP_NAME} of A-Z a-z 0-9 _ - .)",
        quoted(name)
    ))
}

/// The settings of group `name` now (a group not made yet: nothing of
/// its own).
fn current(ctx: &mut Ctx<'_>, name: &str) -> Result<GroupSettings, Error> {
    let gs = ctx.os.cache_groups().map_err(os_err)?;
    Ok(match gs.into_iter().find(|g| g.settings.name == name) {
        Some(g) => g.settings,
        None => GroupSettings {
            name: name.into(),
            policy: None,
            limit: None,
        },
    })
}

fn find(ctx: &mut Ctx<'_>, name: &str) -> Result<CacheGroup, Error> {
    let gs = ctx.os.cache_groups().map_err(os_err)?;
    (gs.into_iter().find(|g| g.settings.name == name))
        .ok_or_else(|| Error::Msg(format!("no group '{}'", quoted(name))))
}

fn policy_text(g: &CacheGroup) -> String {
    if g.settings.name == DEFAULT_GROUP_NAME {
        format!("{} (the node's)", g.policy.as_str())
    } else if g.settings.policy.is_some() {
        format!("{} (its own)", g.policy.as_str())
    } else {
        format!("{} (the node's)", g.policy.as_str())
    }
}

/// `cache policy [NAME] --group G`.
pub(super) fn group_policy(
    ctx: &mut Ctx<'_>,
    name: Option<&str>,
    group: &str,
) -> Result<(), Error> {
    check_group_name(group).map_err(Error::Msg)?;
    if let Some(name) = name {
        let p = PolicyName::parse(name).ok_or_else(|| unknown_policy(name))?;
        let mut s = current(ctx, group)?;
        s.policy = Some(p);
        ctx.os.set_cache_group(&s).map_err(os_err)?;
    }
    let g = find(ctx, group)?;
    ctx.println(&format!("group      {}", g.settings.name));
    ctx.println(&format!("policy     {}", policy_text(&g)));
    ctx.println(&format!("available  {}", PolicyName::names()));
    Ok(())
}

/// Apply `KEY=VALUE` words (`limit`, `policy`) to group settings: all or
/// none.
pub fn apply_group_config<'a>(
    s: &mut GroupSettings,
    words: impl IntoIterator<Item = &'a str>,
) -> Result<(), String> {
    let mut new = s.clone();
    for w in words {
        let Some((key, v)) = w.split_once('=') else {
            return Err(format!("'{}': expected KEY=VALUE", quoted(w)));
        };
        match key {
            "limit" => {
                new.limit = match v {
                    "0" | "none" => None,
                    _ => Some(
                        v.parse()
                            .ok()
                            .filter(|n| (MIN_CACHE_LIMIT..=MAX_LIMIT).contains(n))
                            .ok_or_else(|| {
                                format!(
                                    "limit={}: expected pages, {MIN_CACHE_LIMIT} to {MAX_LIMIT} (0 or none: no limit of its own)",
                                    quoted(v)
                                )
                            })?,
                    ),
                }
            }
            "policy" => {
                new.policy = Some(PolicyName::parse(v).ok_or_else(|| {
                    format!(
                        "policy={}: expected one of {}",
                        quoted(v),
                        PolicyName::names()
                    )
                })?)
            }
            "ttl" => return Err(String::from("ttl is the node's, not a group's (drop group=)")),
            "group" => return Err(String::from("group= given twice")),
            _ => {
                return Err(format!(
                    "unknown key '{}' for a group (valid: limit, policy)",
                    quoted(key)
                ))
            }
        }
    }
    *s = new;
    Ok(())
}

/// `cache config group=G [limit=PAGES] [policy=NAME]`.
pub(super) fn group_config<'a>(
    ctx: &mut Ctx<'_>,
    group: &str,
    words: impl IntoIterator<Item = &'a str>,
) -> Result<(), Error> {
    check_group_name(group).map_err(Error::Msg)?;
    let words: alloc::vec::Vec<&str> = words.into_iter().collect();
    if !words.is_empty() {
        let mut s = current(ctx, group)?;
        apply_group_config(&mut s, words).map_err(Error::Msg)?;
        ctx.os.set_cache_group(&s).map_err(os_err)?;
    }
    let g = find(ctx, group)?;
    ctx.println(&format!("group   {}", g.settings.name));
    ctx.println(&format!("policy  {}", policy_text(&g)));
    match g.settings.limit {
        Some(l) => ctx.println(&format!("limit   {l}")),
        None => ctx.println("limit   none"),
    }
    Ok(())
}

/// `cache groups`: one line per group.
pub(super) fn cmd_cache_groups(ctx: &mut Ctx<'_>, _: &super::Args<'_>) -> Result<(), Error> {
    let gs = ctx.os.cache_groups().map_err(os_err)?;
    let mut out = format!(
        "{:<16} {:<8} {:>8} {:>8} {:>10} {:>10} {:>10}\n",
        "group", "policy", "limit", "pages", "hits", "misses", "evictions"
    );
    for g in gs {
        let own = if g.settings.policy.is_some() { "" } else { "*" };
        let limit = g
            .settings
            .limit
            .map_or(String::from("none"), |l| format!("{l}"));
        out.push_str(&format!(
            "{:<16} {:<8} {:>8} {:>8} {:>10} {:>10} {:>10}\n",
            g.settings.name,
            format!("{}{own}", g.policy.as_str()),
            limit,
            g.pages,
            g.hits,
            g.misses,
            g.evictions
        ));
    }
    out.push_str("(* = the node's policy)\n");
    ctx.print(&out);
    Ok(())
}
