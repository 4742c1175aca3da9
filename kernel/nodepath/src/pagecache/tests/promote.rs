//! Hot-page promotion: when a replica is made, what reads it, and every
//! way it goes (DIR_INV, DROP, write, open, cold, rejoin).

use super::super::*;

const POOL: (u64, u64) = (100, 104);
const PEER: u64 = 500;
const MS: u64 = 1_000_000;

fn key(idx: u64) -> PageKey {
    PageKey { ino: 3, idx }
}

/// A relaxed cache promoting after more than `t` reads in 10 ms.
fn cache(mode: Mode, t: u32) -> NodeCache {
    let mut c = NodeCache::new(mode, POOL, 8);
    c.set_promotion(Promotion {
        threshold: t,
        window_ns: 10 * MS,
    });
    c
}

fn map(c: &mut NodeCache, k: PageKey, gfn: u64) {
    c.start_miss(k, false).unwrap();
    let r = PageReply::Shared { owner: 2, gfn };
    assert_eq!(c.complete_miss(k, r, |_| true), Installed::Remote(gfn));
}

/// Read `k` `n` times at `now`, promoting as the read path does.
fn read(c: &mut NodeCache, k: PageKey, n: u32, now: u64) -> Hit {
    c.set_clock(now);
    let mut last = Hit::Miss;
    for _ in 0..n {
        last = c.lookup(&k);
        if matches!(last, Hit::Remote(_)) && c.wants_replica(&k) {
            assert!(c.set_replica(&k, Box::new([7u8; PAGE])));
        }
    }
    last
}

#[test]
fn a_page_read_more_than_the_threshold_in_a_window_is_replicated() {
    let mut c = cache(Mode::Relaxed, 3);
    map(&mut c, key(0), PEER);
    assert_eq!(read(&mut c, key(0), 3, MS), Hit::Remote(PEER));
    assert_eq!(c.replica_pages(), 0, "3 reads are not more than 3");
    assert_eq!(read(&mut c, key(0), 1, 2 * MS), Hit::Remote(PEER));
    assert_eq!(c.replica_pages(), 1);
    assert_eq!(read(&mut c, key(0), 1, 3 * MS), Hit::Replica(PEER));
    assert_eq!(c.replica(&key(0)).map(|p| p[0]), Some(7));
    let s = c.stats();
    assert_eq!((s.promotions, s.hits_replica, s.hits_remote), (1, 1, 4));
}

#[test]
fn reads_spread_over_windows_do_not_promote() {
    let mut c = cache(Mode::Relaxed, 3);
    map(&mut c, key(0), PEER);
    for w in 0..10 {
        read(&mut c, key(0), 2, w * 11 * MS);
    }
    assert_eq!(c.replica_pages(), 0);
    assert_eq!(c.stats().promotions, 0);
}

#[test]
fn threshold_zero_never_promotes() {
    for mode in [Mode::Strong, Mode::Relaxed] {
        let mut c = cache(mode, 0);
        map(&mut c, key(0), PEER);
        assert_eq!(read(&mut c, key(0), 100, MS), Hit::Remote(PEER));
        assert!(!c.wants_replica(&key(0)));
        assert_eq!(c.replica_pages(), 0, "{mode:?}");
    }
}

#[test]
fn strong_mode_revokes_a_replica_and_a_refusal_starts_the_count_again() {
    // The cache only proposes; in strong mode the directory grants
    // (PROMOTE) and takes replicas back before a store (REVOKE).
    let mut c = cache(Mode::Strong, 2);
    map(&mut c, key(0), PEER);
    read(&mut c, key(0), 3, MS);
    assert_eq!(c.replica_pages(), 1);
    assert!(c.revoke_replica(&key(0)));
    assert!(!c.revoke_replica(&key(0)), "only once");
    assert_eq!(c.replica_pages(), 0);
    assert_eq!(c.lookup(&key(0)), Hit::Remote(PEER), "the mapping stays");
    assert_eq!(c.stats().revocations, 1);
    // Hot again, but the directory says no: the count starts over.
    c.set_clock(2 * MS);
    for _ in 0..3 {
        c.lookup(&key(0));
    }
    assert!(c.wants_replica(&key(0)));
    c.promote_refused(&key(0));
    assert!(!c.wants_replica(&key(0)));
    assert_eq!(c.stats().promotions_refused, 1);
    c.lookup(&key(0));
    c.lookup(&key(0));
    assert!(!c.wants_replica(&key(0)), "2 reads are not more than 2");
    c.lookup(&key(0));
    assert!(c.wants_replica(&key(0)));
}

#[test]
fn the_protocol_tears_a_replica_down_with_its_mapping() {
    let mut c = cache(Mode::Relaxed, 1);
    map(&mut c, key(0), PEER);
    map(&mut c, key(1), PEER + 1);
    read(&mut c, key(0), 2, MS);
    read(&mut c, key(1), 2, MS);
    assert_eq!(c.replica_pages(), 2);
    // DIR_INV (owner reclaim, file eviction): gone, and a new mapping
    // starts cold.
    assert_eq!(c.dir_inv(&key(0)), Some(false));
    assert_eq!(c.replica(&key(0)), None);
    assert_eq!(c.replica_pages(), 1);
    map(&mut c, key(0), PEER + 2);
    assert_eq!(read(&mut c, key(0), 1, MS), Hit::Remote(PEER + 2));
    // DROP of every mapping (`cache drop`).
    let dropped = c.all_remote();
    c.forget_remote(&dropped);
    assert_eq!(c.replica_pages(), 0);
    assert_eq!(c.replica(&key(1)), None);
}

#[test]
fn a_write_replaces_the_replica_with_a_private_copy() {
    let mut c = cache(Mode::Relaxed, 1);
    map(&mut c, key(0), PEER);
    read(&mut c, key(0), 2, MS);
    assert!(c.make_private(key(0), Box::new([9u8; PAGE])));
    assert_eq!(c.replica_pages(), 0);
    assert_eq!(c.lookup(&key(0)), Hit::Private);
    assert_eq!(c.private(&key(0)).map(|p| p[0]), Some(9));
}

#[test]
fn an_open_drops_the_files_replicas_only() {
    let mut c = cache(Mode::Relaxed, 1);
    let other = PageKey { ino: 4, idx: 0 };
    map(&mut c, key(0), PEER);
    map(&mut c, other, PEER + 1);
    read(&mut c, key(0), 2, MS);
    read(&mut c, other, 2, MS);
    assert_eq!(c.drop_replicas(3), 1);
    assert_eq!(c.replica(&key(0)), None);
    assert!(c.replica(&other).is_some());
    // The mapping stays: reads go to the peer's frame and heat up again.
    assert_eq!(c.lookup(&key(0)), Hit::Remote(PEER));
    assert_eq!(c.stats().demotions, 1);
}

#[test]
fn a_replica_unread_for_a_window_is_demoted() {
    let mut c = cache(Mode::Relaxed, 1);
    map(&mut c, key(0), PEER);
    map(&mut c, key(1), PEER + 1);
    read(&mut c, key(0), 2, MS);
    read(&mut c, key(1), 2, MS);
    read(&mut c, key(1), 1, 8 * MS); // key(1) stays warm
    assert_eq!(c.demote_cold(5 * MS), 0);
    assert_eq!(c.demote_cold(12 * MS), 1);
    assert_eq!(c.replica(&key(0)), None);
    assert!(c.replica(&key(1)).is_some());
    assert_eq!(c.demote_cold(30 * MS), 1);
    assert_eq!(c.replica_pages(), 0);
}

#[test]
fn replicas_are_bounded_by_the_pool() {
    let mut c = cache(Mode::Relaxed, 1);
    for i in 0..6 {
        map(&mut c, key(i), PEER + i);
        read(&mut c, key(i), 2, MS);
    }
    assert_eq!(c.replica_pages(), c.pool_frames());
    assert!(!c.wants_replica(&key(5)));
}

#[test]
fn forgetting_everything_forgets_replicas() {
    let mut c = cache(Mode::Relaxed, 1);
    map(&mut c, key(0), PEER);
    read(&mut c, key(0), 2, MS);
    c.forget_all();
    assert_eq!(c.replica_pages(), 0);
    assert_eq!(c.replica(&key(0)), None);
}
