//! Task groups: charging, own lists, limits, reclaim by group and by
//! size, and the group a policy hook sees.

use alloc::vec::Vec;

use super::*;
use crate::policy::testkit::key;

/// Add pages `pages` as group `g` (a miss, then the fill).
fn fill(gs: &mut Groups, g: GroupId, pages: impl IntoIterator<Item = u64>) {
    gs.set_current(g);
    for p in pages {
        gs.miss_started(key(p));
        let got = gs.miss_ended(&key(p));
        assert_eq!(got, g);
        gs.added_for(key(p), got);
        gs.filled(key(p));
    }
}

/// Evict `n` pages from `target` (every proposal accepted).
fn evict(gs: &mut Groups, target: Target, n: usize) -> Vec<u64> {
    let v = gs.propose(target, n);
    for k in &v {
        gs.evicted(k);
        gs.removed(k);
    }
    v.iter().map(|k| k.idx).collect()
}

#[test]
fn names_are_checked_and_groups_are_bounded() {
    let mut gs = Groups::new(PolicyName::Fifo);
    assert_eq!(gs.find(DEFAULT_NAME), Some(DEFAULT_GROUP));
    assert_eq!(gs.ensure("kv"), Ok(1));
    assert_eq!(gs.ensure("kv"), Ok(1));
    for bad in ["", "a b", "x/y", &"n".repeat(MAX_NAME + 1)] {
        assert_eq!(gs.ensure(bad), Err(GroupError::BadName), "{bad:?}");
    }
    for i in 2..MAX_GROUPS {
        assert_eq!(gs.ensure(&alloc::format!("g{i}")), Ok(i as GroupId));
    }
    assert_eq!(gs.ensure("one-more"), Err(GroupError::Full));
    assert_eq!(gs.info().len(), MAX_GROUPS);
}

#[test]
fn pages_are_charged_to_the_group_whose_miss_brought_them_in() {
    let mut gs = Groups::new(PolicyName::Lru);
    let kv = gs.ensure("kv").unwrap();
    fill(&mut gs, kv, 0..3);
    fill(&mut gs, DEFAULT_GROUP, 10..12);
    // A miss started by kv and completed while another group runs is
    // still kv's.
    gs.set_current(kv);
    gs.miss_started(key(20));
    gs.set_current(DEFAULT_GROUP);
    let g = gs.miss_ended(&key(20));
    gs.added_for(key(20), g);
    assert_eq!(gs.group_of(&key(20)), Some(kv));
    let info = gs.info();
    assert_eq!((info[0].pages, info[1].pages), (2, 4));
    assert_eq!((info[0].stats.misses, info[1].stats.misses), (2, 4));
    // The read each fill was for is not a hit; the next ones are, for
    // the group of the task reading (not of the page).
    gs.set_current(kv);
    gs.found(&key(0));
    gs.found(&key(0));
    gs.set_current(DEFAULT_GROUP);
    gs.found(&key(1));
    gs.found(&key(1));
    let info = gs.info();
    assert_eq!((info[0].stats.hits, info[1].stats.hits), (1, 1));
    // Without lists of its own, kv's pages are in default's, in order.
    assert!(!info[1].own_lists);
    assert_eq!(gs.listed(), gs.len());
    assert_eq!(gs.len(), 6);
}

#[test]
fn a_policy_or_limit_gives_a_group_its_own_lists_and_its_pages_move_there() {
    let mut gs = Groups::new(PolicyName::Fifo);
    let scan = gs.ensure("scan").unwrap();
    fill(&mut gs, DEFAULT_GROUP, 0..2);
    fill(&mut gs, scan, 100..103);
    let conf = GroupConf {
        name: "scan".into(),
        policy: Some(PolicyName::Mru),
        limit: Some(64),
    };
    assert_eq!(gs.configure(&conf), Ok(scan));
    let info = gs.info();
    assert!(info[1].own_lists);
    assert_eq!(info[1].policy, PolicyName::Mru);
    assert_eq!(info[1].conf, conf);
    assert_eq!(gs.listed(), 5);
    // Its own policy orders its pages (MRU: the newest first), default's
    // FIFO the others.
    assert_eq!(evict(&mut gs, Target::Group(scan), 1), [102]);
    assert_eq!(evict(&mut gs, Target::Group(DEFAULT_GROUP), 1), [0]);
    // The node's policy changes default's lists, not a group's own.
    gs.set_policy(PolicyName::Lru);
    let info = gs.info();
    assert_eq!(
        (info[0].policy, info[1].policy),
        (PolicyName::Lru, PolicyName::Mru)
    );
    // A limit alone: own lists that follow the node's policy.
    let kv = gs.ensure("kv").unwrap();
    let lim = GroupConf {
        name: "kv".into(),
        policy: None,
        limit: Some(100),
    };
    gs.configure(&lim).unwrap();
    gs.set_policy(PolicyName::Clock);
    assert_eq!(gs.info()[kv as usize].policy, PolicyName::Clock);
    assert!(gs.info()[kv as usize].own_lists);
}

#[test]
fn a_group_at_its_limit_reclaims_only_its_own_pages() {
    let mut gs = Groups::new(PolicyName::Fifo);
    let kv = gs.ensure("kv").unwrap();
    let scan = gs
        .configure(&GroupConf {
            name: "scan".into(),
            policy: None,
            limit: Some(4),
        })
        .unwrap();
    fill(&mut gs, kv, 0..3);
    gs.set_current(kv);
    for p in 0..3 {
        gs.accessed(key(p));
    }
    for p in 100..120 {
        gs.set_current(scan);
        if gs.at_limit() {
            assert_eq!(gs.over_limits(), []);
            let v = evict(&mut gs, Target::Group(scan), 1);
            assert!(v[0] >= 100, "evicted {v:?}");
        }
        fill(&mut gs, scan, [p]);
    }
    let info = gs.info();
    assert_eq!(info[kv as usize].pages, 3, "kv untouched");
    assert_eq!(info[kv as usize].stats.evictions, 0);
    assert_eq!(info[scan as usize].pages, 4);
    assert_eq!(info[scan as usize].stats.evictions, 16);
    // A limit lowered at run time shows as an excess.
    gs.configure(&GroupConf {
        name: "kv".into(),
        policy: None,
        limit: Some(1),
    })
    .unwrap();
    assert_eq!(gs.over_limits(), [(kv, 2)]);
}

#[test]
fn node_reclaim_takes_from_every_set_of_lists_by_size() {
    let mut gs = Groups::new(PolicyName::Fifo);
    let a = gs
        .configure(&GroupConf {
            name: "a".into(),
            policy: Some(PolicyName::Fifo),
            limit: None,
        })
        .unwrap();
    fill(&mut gs, DEFAULT_GROUP, 0..10);
    fill(&mut gs, a, 100..130);
    // 8 victims over sizes 10 and 30: 2 and 6.
    let v = evict(&mut gs, Target::Node, 8);
    assert_eq!(v.iter().filter(|p| **p < 100).count(), 2, "{v:?}");
    assert_eq!(v.iter().filter(|p| **p >= 100).count(), 6, "{v:?}");
    // Never more than there are.
    let v = evict(&mut gs, Target::Node, 1000);
    assert_eq!(
        v.len(),
        32,
        "one evict_folios call per list proposes at most 32"
    );
    let all = gs.fallback(Target::Node, 1000, |_| true);
    assert_eq!(all.len(), gs.len());
}

#[test]
fn hooks_see_the_task_group_or_0_for_the_lists_owner() {
    // GET-SCAN as the node's policy: pages of a group sharing default's
    // lists go to the scan list and are evicted first.
    let mut gs = Groups::new(PolicyName::GetScan);
    let scan = gs.ensure("scan").unwrap();
    fill(&mut gs, DEFAULT_GROUP, 0..3);
    fill(&mut gs, scan, 100..103);
    assert_eq!(evict(&mut gs, Target::Node, 3), [100, 101, 102]);
    // In a group's own lists its own tasks are GETs: with GET-SCAN as
    // its policy, another group's reads of its pages are scans.
    let kv = gs
        .configure(&GroupConf {
            name: "kv".into(),
            policy: Some(PolicyName::GetScan),
            limit: None,
        })
        .unwrap();
    fill(&mut gs, kv, 200..203);
    gs.set_current(kv);
    gs.accessed(key(200));
    assert_eq!(evict(&mut gs, Target::Group(kv), 1), [201]);
}

#[test]
fn reset_forgets_pages_but_keeps_settings_and_counters() {
    let mut gs = Groups::new(PolicyName::Fifo);
    let conf = GroupConf {
        name: "kv".into(),
        policy: Some(PolicyName::Lfu),
        limit: Some(70),
    };
    let kv = gs.configure(&conf).unwrap();
    fill(&mut gs, kv, 0..5);
    gs.reset();
    assert!(gs.is_empty());
    let info = gs.info();
    assert_eq!(info[1].conf, conf);
    assert_eq!((info[1].pages, info[1].stats.misses), (0, 5));
    assert_eq!(gs.listed(), 0);
}
