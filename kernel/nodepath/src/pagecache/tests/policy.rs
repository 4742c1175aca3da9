//! Reclaim under every eviction policy, as a property: from random
//! histories of fills, remote mappings, reads, writes, misses left in
//! flight, reclaims (answered, refused, unanswered), file evictions,
//! invalidations, sharer reports, policy switches, limits and TTLs,
//! `pick_victims` only returns owned, settled pages with their own dirty
//! bits, each once, and as many as asked whenever that many are owned; the
//! policy's lists hold exactly the owned pages.

use alloc::collections::BTreeSet;
use alloc::vec::Vec;

use fabric::rng::SplitMix64;

use super::super::*;
use crate::policy::PolicyName;

const POOL: (u64, u64) = (1000, 1040);

fn key(idx: u64) -> PageKey {
    PageKey { ino: 9, idx }
}

/// Owned pages a reclaim may take: `Local` and not in flight.
fn takeable(c: &NodeCache) -> Vec<(PageKey, bool)> {
    c.slots()
        .filter_map(|(k, s)| match s {
            Slot::Local { dirty, .. } if !c.in_flight(k) => Some((*k, *dirty)),
            _ => None,
        })
        .collect()
}

#[track_caller]
fn lists_match_owned(c: &NodeCache, ctx: &str) {
    let listed: BTreeSet<PageKey> = c.listed_pages().into_iter().collect();
    let owned: BTreeSet<PageKey> = c
        .slots()
        .filter(|(_, s)| matches!(s, Slot::Local { .. }))
        .map(|(k, _)| *k)
        .collect();
    assert_eq!(listed, owned, "{ctx}");
    assert_eq!(c.listed_pages().len(), c.owned_pages(), "{ctx}");
}

fn history(policy: PolicyName, seed: u64) {
    let mut rng = SplitMix64::new(seed);
    let mut c = NodeCache::new(Mode::Strong, POOL, 64);
    c.set_policy(policy);
    // A second task group, sharing the node's lists until a step gives it
    // lists of its own.
    assert_eq!(c.ensure_group("scan"), Ok(1));
    let mut reclaiming: Vec<PageKey> = Vec::new();
    let mut now = 0u64;
    for step in 0..400 {
        let ctx = alloc::format!("{policy:?} seed {seed:#x} step {step}");
        now += 1000;
        c.set_clock(now);
        c.set_group(rng.below(2) as u32);
        let k = key(rng.below(80));
        match rng.below(16) {
            0..=3 => {
                if c.slot(&k).is_none() {
                    if let Some(PageReq::Read { frame, .. }) = c.start_miss(k, false) {
                        // Most misses fill our frame; some map a peer's;
                        // some stay in flight for a while.
                        match rng.below(8) {
                            0 => {}
                            1 => {
                                let r = PageReply::Shared { owner: 2, gfn: 7 };
                                c.complete_miss(k, r, |_| true);
                            }
                            _ => {
                                c.complete_miss(k, PageReply::Owner { gfn: frame }, |_| true);
                            }
                        }
                    }
                }
            }
            4..=6 => {
                c.lookup(&k);
            }
            7 => c.mark_dirty(&k),
            8 => c.cleaned(&k),
            9 => {
                if c.in_flight(&k) {
                    let r = PageReply::Owner {
                        gfn: c.frames_debug().1.iter().find(|(x, _)| *x == k).unwrap().1,
                    };
                    c.complete_miss(k, r, |_| true);
                }
            }
            10 => c.sharers(k, rng.below(4) as u32),
            11 => {
                c.invalidate(&k);
            }
            12 => c.evict_local(9, 70 + rng.below(10)),
            13 if rng.below(2) == 0 => {
                let p = PolicyName::ALL[rng.below(PolicyName::ALL.len() as u64) as usize];
                c.set_policy(p);
            }
            13 => {
                // The second group gets a policy and/or a limit of its own.
                let p = PolicyName::ALL[rng.below(PolicyName::ALL.len() as u64) as usize];
                let conf = crate::policy::GroupConf {
                    name: "scan".into(),
                    policy: (rng.below(2) == 0).then_some(p),
                    limit: (rng.below(2) == 0).then_some(rng.range(1, 40) as usize),
                };
                assert_eq!(c.configure_group(&conf), Ok(1), "{ctx}");
                if let Some((1, over)) = c.over_group_limits().first().copied() {
                    let v = c.pick_victims_in(crate::policy::Target::Group(1), over);
                    for (k, _) in &v {
                        assert!(matches!(c.slot(k), Some(Slot::Reclaiming { .. })), "{ctx}");
                        reclaiming.push(*k);
                    }
                }
            }
            14 => {
                // Answer the reclaims in flight: done, refused or nothing.
                for k in core::mem::take(&mut reclaiming) {
                    match rng.below(3) {
                        0 => c.reclaimed(&k),
                        1 => c.reclaim_failed(&k),
                        _ => reclaiming.push(k),
                    }
                }
            }
            _ => {
                let n = rng.range(1, 50) as usize;
                let before = takeable(&c);
                let got = if rng.below(10) == 0 {
                    c.set_ttl_ns(rng.range(1, 20) * 1000);
                    let v = c.expired(now);
                    c.set_ttl_ns(0);
                    v
                } else {
                    let v = c.pick_victims(n);
                    assert_eq!(v.len(), n.min(before.len()), "{ctx}: asked {n}");
                    v
                };
                let mut seen = BTreeSet::new();
                for (k, dirty) in &got {
                    assert!(seen.insert(*k), "{ctx}: {k:?} twice");
                    assert!(before.contains(&(*k, *dirty)), "{ctx}: {k:?} {dirty}");
                    assert!(matches!(c.slot(k), Some(Slot::Reclaiming { .. })), "{ctx}");
                    reclaiming.push(*k);
                }
            }
        }
        lists_match_owned(&c, &ctx);
    }
}

#[test]
fn reclaim_under_every_policy_takes_only_owned_settled_pages_and_enough() {
    for policy in PolicyName::ALL {
        for seed in 0..40u64 {
            history(policy, 0x9011_0000 + seed);
        }
    }
}

#[test]
fn the_limit_makes_misses_reclaim_first() {
    let mut c = NodeCache::new(Mode::Strong, (0, 200), 8);
    c.set_limit(Some(10));
    assert_eq!(c.limit(), Some(policy::MIN_LIMIT));
    for i in 0..policy::MIN_LIMIT as u64 {
        let Some(PageReq::Read { frame, .. }) = c.start_miss(key(i), false) else {
            panic!("miss {i} refused below the limit");
        };
        c.complete_miss(key(i), PageReply::Owner { gfn: frame }, |_| true);
    }
    assert_eq!(c.start_miss(key(500), false), None, "at the limit");
    assert_eq!(c.over_owned_limit(), 0);
    assert_eq!(c.pick_victims(4).len(), 4);
    assert!(c.start_miss(key(500), false).is_some());
    c.set_limit(None);
    assert!(c.start_miss(key(501), false).is_some());
}

#[test]
fn a_policy_switch_keeps_dirty_pages_dirty() {
    let mut c = NodeCache::new(Mode::Strong, (0, 8), 8);
    for i in 0..4 {
        let Some(PageReq::Read { frame, .. }) = c.start_miss(key(i), false) else {
            panic!()
        };
        c.complete_miss(key(i), PageReply::Owner { gfn: frame }, |_| true);
    }
    c.mark_dirty(&key(2));
    c.set_policy(PolicyName::S3Fifo);
    c.set_policy(PolicyName::Mru);
    let v = c.pick_victims(8);
    assert_eq!(v.len(), 4);
    assert!(v.contains(&(key(2), true)));
    assert_eq!(v.iter().filter(|(_, d)| *d).count(), 1);
}
