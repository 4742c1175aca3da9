//! Host tests of task groups over a real directory:
//! a scan in a group with a page limit next to a key-value-like hot set
//! in another group leaves the hot set cached (and without the limit the
//! scan flushes it); GET-SCAN chooses its list by the task's group;
//! settings are checked before anything changes.

use fabric::config::{Mode, PolicyName};
use fabric::proto::Errno;

use crate::control::GroupConf;
use crate::rig::{Rig, RigConfig};
use crate::tests::{pattern, write_file};

const HOT: usize = 40;
const SCAN: usize = 400;
const NODE_LIMIT: usize = 200;

/// A rig whose node 1 will own `/hot` (40 pages) and `/scan` (400 pages)
/// when it reads them: node 2 writes them and gives its pages back, so
/// they are on disk only. Node 1's owned pages are capped at 200.
fn rig(policy: PolicyName) -> Rig {
    let mut cfg = RigConfig::new(2, Mode::Strong);
    cfg.region = 16 << 20;
    cfg.policy = policy;
    let rig = Rig::new(cfg);
    write_file(&mut rig.node(2), "/hot", &pattern(HOT * 4096, 1));
    write_file(&mut rig.node(2), "/scan", &pattern(SCAN * 4096, 2));
    rig.node(2).cache_drop().unwrap();
    rig.idle(20);
    let mut k = rig.node(1).cache_controls().unwrap();
    k.limit = Some(NODE_LIMIT);
    rig.node(1).set_cache_controls(k).unwrap();
    rig
}

/// (pages, hits, misses, evictions) of group `name` on node 1.
fn group(rig: &Rig, name: &str) -> (usize, u64, u64, u64) {
    let gs = rig.node(1).cache_groups().unwrap();
    let g = gs
        .iter()
        .find(|g| g.conf.name == name)
        .expect("group exists");
    (g.pages, g.stats.hits, g.stats.misses, g.stats.evictions)
}

/// Read `path` on node 1 as group `name`, 16 pages per read (so each
/// page is one access).
fn read_as(rig: &Rig, name: &str, path: &str) {
    let mut n = rig.node(1);
    n.set_task_group(name).unwrap();
    let fd = n.open(path, Default::default()).unwrap();
    let mut buf = vec![0u8; 16 * 4096];
    let mut total = 0;
    loop {
        let k = n.read(fd, &mut buf).unwrap();
        if k == 0 {
            break;
        }
        total += k;
    }
    n.close(fd).unwrap();
    assert!(total > 0, "{path}");
}

/// The hot set, read twice by `kv`, then a scan by `scan` (with
/// `limit`), then the hot set again: the hot set's misses on the second
/// pass.
fn kv_then_scan(policy: PolicyName, scan_limit: Option<usize>) -> (Rig, u64) {
    let rig = rig(policy);
    read_as(&rig, "kv", "/hot");
    read_as(&rig, "kv", "/hot");
    assert_eq!(group(&rig, "kv"), (HOT, HOT as u64, HOT as u64, 0));
    if scan_limit.is_some() {
        rig.node(1)
            .set_cache_group(&GroupConf {
                name: "scan".into(),
                policy: None,
                limit: scan_limit,
            })
            .unwrap();
    }
    read_as(&rig, "scan", "/scan");
    let before = group(&rig, "kv").2;
    read_as(&rig, "kv", "/hot");
    let misses = group(&rig, "kv").2 - before;
    (rig, misses)
}

#[test]
fn a_scan_group_with_a_limit_does_not_evict_the_kv_groups_pages() {
    let (rig, misses) = kv_then_scan(PolicyName::Lru, Some(64));
    assert_eq!(misses, 0, "the hot set stayed");
    let (pages, hits, _, evictions) = group(&rig, "kv");
    assert_eq!((pages, hits, evictions), (HOT, 2 * HOT as u64, 0));
    let (pages, _, misses, evictions) = group(&rig, "scan");
    // Reclaim at the limit takes a batch (32) at a time.
    assert!(
        (32..=64).contains(&pages),
        "the scan kept to its limit: {pages}"
    );
    assert_eq!(misses, SCAN as u64);
    assert_eq!(evictions as usize, SCAN - pages);
    // Without the limit the same scan flushes the hot set (LRU, node
    // limit 200 < 400 scanned).
    let (rig, misses) = kv_then_scan(PolicyName::Lru, None);
    assert_eq!(misses, HOT as u64, "the scan flushed the hot set");
    assert_eq!(group(&rig, "kv").3, HOT as u64);
}

#[test]
fn get_scan_takes_a_scan_groups_pages_first() {
    // The node runs GET-SCAN; `scan` has no lists of its own, so its
    // pages share the node's (`default`'s) lists, and the task's group
    // chooses the list: `default`'s tasks are the GETs, `scan`'s pages
    // go to the scan list and are evicted first.
    let rig = rig(PolicyName::GetScan);
    read_as(&rig, "default", "/hot");
    read_as(&rig, "scan", "/scan");
    let before = group(&rig, "default").2;
    read_as(&rig, "default", "/hot");
    assert_eq!(group(&rig, "default").2 - before, 0, "GETs kept");
    assert_eq!(group(&rig, "default").0, HOT);
    // The same under LRU flushes them.
    let rig = self::rig(PolicyName::Lru);
    read_as(&rig, "default", "/hot");
    read_as(&rig, "scan", "/scan");
    let before = group(&rig, "default").2;
    read_as(&rig, "default", "/hot");
    assert_eq!(group(&rig, "default").2 - before, HOT as u64);
}

#[test]
fn bad_group_settings_are_refused_and_change_nothing() {
    let rig = rig(PolicyName::Fifo);
    let before = rig.node(1).cache_groups().unwrap();
    let bad = GroupConf {
        name: "no spaces".into(),
        policy: Some(PolicyName::Lru),
        limit: None,
    };
    assert_eq!(rig.node(1).set_cache_group(&bad), Err(Errno::Invalid));
    assert_eq!(rig.node(1).set_task_group("a/b"), Err(Errno::Invalid));
    assert_eq!(rig.node(1).cache_groups().unwrap(), before);
    for i in 1..16 {
        rig.node(1).set_task_group(&format!("g{i}")).unwrap();
    }
    let full = rig.node(1).cache_groups().unwrap();
    assert_eq!(rig.node(1).set_task_group("g16"), Err(Errno::NoSpace));
    assert_eq!(rig.node(1).cache_groups().unwrap(), full);
    // `default`'s policy is the node's.
    let conf = GroupConf {
        name: "default".into(),
        policy: Some(PolicyName::Sieve),
        limit: None,
    };
    rig.node(1).set_cache_group(&conf).unwrap();
    assert_eq!(
        rig.node(1).cache_controls().unwrap().policy,
        PolicyName::Sieve
    );
}

#[test]
fn a_group_keeps_to_its_limit_and_a_lowered_limit_applies_at_once() {
    let rig = rig(PolicyName::Fifo);
    read_as(&rig, "kv", "/hot");
    let conf = GroupConf {
        name: "kv".into(),
        policy: Some(PolicyName::Lfu),
        limit: Some(100),
    };
    rig.node(1).set_cache_group(&conf).unwrap();
    assert_eq!(group(&rig, "kv").0, HOT, "under the limit: nothing goes");
    read_as(&rig, "kv", "/scan");
    let (pages, _, _, evictions) = group(&rig, "kv");
    assert!(pages <= 100 && pages > 0, "{pages}");
    assert_eq!(evictions as usize, HOT + SCAN - pages);
    let low = GroupConf {
        limit: Some(64),
        ..conf.clone()
    };
    rig.node(1).set_cache_group(&low).unwrap();
    assert!(group(&rig, "kv").0 <= 64);
    let gs = rig.node(1).cache_groups().unwrap();
    assert_eq!(gs[1].conf, low);
    assert_eq!(gs[1].policy, PolicyName::Lfu);
    assert!(gs[1].own_lists);
}
