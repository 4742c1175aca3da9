//! Shell tests of task groups over the in-memory [`MockOs`]: `cache
//! groups`, `cache policy NAME --group G`, `cache config group=G ...`,
//! and `fio`/`app --group NAME` entering the group and leaving it.

use super::super::*;
use crate::mock::MockOs;
use crate::os::{GroupSettings, PolicyName};
use alloc::string::ToString;

fn run(os: &mut MockOs, line: &str) -> String {
    let outcome = Shell::new(1).execute(os, line);
    assert_eq!(outcome, Outcome::Continue, "{line:?}");
    os.take_out()
}

fn ok(os: &mut MockOs, line: &str) -> String {
    let out = run(os, line);
    out.strip_suffix("ok\n")
        .unwrap_or_else(|| panic!("{line:?} did not succeed: {out:?}"))
        .to_string()
}

fn err(os: &mut MockOs, line: &str) -> String {
    let out = run(os, line);
    let last = out.trim_end().rsplit('\n').next().unwrap_or("").to_string();
    last.strip_prefix("error: ")
        .unwrap_or_else(|| panic!("{line:?} did not fail: {out:?}"))
        .to_string()
}

fn settings(os: &MockOs, name: &str) -> Option<GroupSettings> {
    (os.groups.iter())
        .find(|g| g.settings.name == name)
        .map(|g| g.settings.clone())
}

#[test]
fn cache_policy_with_a_group_sets_that_groups_policy_only() {
    let mut os = MockOs::new();
    let out = ok(&mut os, "cache policy mru --group scan");
    assert!(
        out.starts_with("group      scan\npolicy     mru (its own)\n"),
        "{out}"
    );
    assert_eq!(settings(&os, "scan").unwrap().policy, Some(PolicyName::Mru));
    assert_eq!(
        os.controls.unwrap().policy,
        PolicyName::Fifo,
        "node unchanged"
    );
    // Shown without a name; --group=G works too; the node's policy for a
    // group with none of its own.
    let out = ok(&mut os, "cache policy --group=scan");
    assert!(out.contains("policy     mru (its own)"), "{out}");
    ok(&mut os, "cache config group=kv limit=100");
    let out = ok(&mut os, "cache policy --group kv");
    assert!(out.contains("policy     fifo (the node's)"), "{out}");
    // `default`'s policy is the node's.
    ok(&mut os, "cache policy lru --group default");
    assert_eq!(os.controls.unwrap().policy, PolicyName::Lru);
}

#[test]
fn bad_group_policy_commands_are_refused_and_change_nothing() {
    let mut os = MockOs::new();
    let before = os.groups.clone();
    assert_eq!(
        err(&mut os, "cache policy nope --group scan"),
        "cache policy: unknown policy 'nope' (valid: fifo, lru, clock, lfu, mru, s3fifo, sieve, arc, get-scan, cluster)"
    );
    assert_eq!(
        err(&mut os, "cache policy lru --group"),
        "cache policy: --group needs a NAME"
    );
    assert_eq!(
        err(&mut os, "cache policy lru --group a/b"),
        "cache policy: bad group name 'a/b' (1 to 32 of A-Z a-z 0-9 _ - .)"
    );
    assert_eq!(
        err(&mut os, "cache policy lru --grp x"),
        "cache policy: unknown option '--grp' (valid: --group NAME)"
    );
    assert_eq!(
        err(&mut os, "cache policy --group=a --group b"),
        "cache policy: --group given twice"
    );
    assert_eq!(
        err(&mut os, "cache policy --group nosuch"),
        "cache policy: no group 'nosuch'"
    );
    assert_eq!(os.groups, before);
    assert_eq!(os.controls.unwrap().policy, PolicyName::Fifo);
}

#[test]
fn cache_config_with_a_group_sets_its_limit_and_policy_all_or_nothing() {
    let mut os = MockOs::new();
    assert_eq!(
        ok(&mut os, "cache config group=scan limit=256 policy=mru"),
        "group   scan\npolicy  mru (its own)\nlimit   256\n"
    );
    assert_eq!(
        settings(&os, "scan").unwrap(),
        GroupSettings {
            name: "scan".into(),
            policy: Some(PolicyName::Mru),
            limit: Some(256),
        }
    );
    // Order does not matter; limit=none drops the limit, keeps the policy.
    assert_eq!(
        ok(&mut os, "cache config limit=none group=scan"),
        "group   scan\npolicy  mru (its own)\nlimit   none\n"
    );
    let before = os.groups.clone();
    for (line, msg) in [
        (
            "cache config group=scan limit=10",
            "cache config: limit=10: expected pages, 64 to 4294967296 (0 or none: no limit of its own)",
        ),
        (
            "cache config group=scan limit=128 policy=x",
            "cache config: policy=x: expected one of fifo, lru, clock, lfu, mru, s3fifo, sieve, arc, get-scan, cluster",
        ),
        (
            "cache config group=scan ttl=5",
            "cache config: ttl is the node's, not a group's (drop group=)",
        ),
        (
            "cache config group=scan size=5",
            "cache config: unknown key 'size' for a group (valid: limit, policy)",
        ),
        (
            "cache config group=a group=b",
            "cache config: group= given twice",
        ),
        (
            "cache config group=bad! limit=64",
            "cache config: bad group name 'bad!' (1 to 32 of A-Z a-z 0-9 _ - .)",
        ),
        ("cache config group=", "cache config: bad group name '' (1 to 32 of A-Z a-z 0-9 _ - .)"),
    ] {
        assert_eq!(err(&mut os, line), msg, "{line}");
    }
    assert_eq!(os.groups, before, "nothing changed");
    // A node without a single-copy cache.
    os.controls = None;
    assert_eq!(
        err(&mut os, "cache config group=scan limit=64"),
        "cache config: not supported"
    );
}

#[test]
fn cache_groups_lists_every_group_with_its_counters() {
    let mut os = MockOs::new();
    ok(&mut os, "cache config group=scan limit=64 policy=mru");
    os.groups[1].pages = 64;
    os.groups[1].misses = 400;
    os.groups[1].evictions = 336;
    os.groups[0].hits = 80;
    let out = ok(&mut os, "cache groups");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    let cols = |l: &str| l.split_whitespace().map(String::from).collect::<Vec<_>>();
    assert_eq!(
        cols(lines[0]),
        [
            "group",
            "policy",
            "limit",
            "pages",
            "hits",
            "misses",
            "evictions"
        ]
    );
    assert_eq!(
        cols(lines[1]),
        ["default", "fifo*", "none", "0", "80", "0", "0"]
    );
    assert_eq!(
        cols(lines[2]),
        ["scan", "mru", "64", "64", "0", "400", "336"]
    );
    assert_eq!(lines[3], "(* = the node's policy)");
    assert_eq!(err(&mut os, "cache groups x"), "usage: cache groups");
}

#[test]
fn fio_and_app_run_in_their_group_and_leave_it() {
    let mut os = MockOs::new();
    os.can_seek = true;
    ok(
        &mut os,
        "fio --name=s --rw=read --size=64k --invalidate=0 --group scan",
    );
    assert_eq!(os.task_groups, ["scan", "default"]);
    assert!(settings(&os, "scan").is_some(), "made by --group");
    // A failing run leaves the group too.
    os.task_groups.clear();
    let e = err(&mut os, "app kv --group=kv --dir /nope --ops 1");
    assert!(e.starts_with("app: "), "{e}");
    assert_eq!(os.task_groups, ["kv", "default"]);
    // Bad names are refused before anything runs.
    os.task_groups.clear();
    assert_eq!(
        err(&mut os, "fio --size=64k --group a/b"),
        "fio: bad value 'a/b' for option 'group' (1 to 32 of A-Z a-z 0-9 _ - .)"
    );
    assert_eq!(
        err(&mut os, "fio --size=64k --group"),
        "fio: option '--group' requires a NAME"
    );
    assert_eq!(
        err(&mut os, "app kv --group x --group y"),
        "app: --group given twice"
    );
    assert_eq!(
        err(&mut os, "app kv --group \"a b\""),
        "app: bad value 'a b' for --group (1 to 32 of A-Z a-z 0-9 _ - .)"
    );
    assert!(os.task_groups.is_empty());
    // A mode without groups: a clear error, nothing run.
    os.controls = None;
    let e = err(&mut os, "fio --size=64k --invalidate=0 --group scan");
    assert_eq!(
        e,
        "fio: --group scan: task groups need a single-copy mode (strong or relaxed): not supported"
    );
}
