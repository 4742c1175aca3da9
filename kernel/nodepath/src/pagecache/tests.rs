use super::*;
use alloc::collections::BTreeSet;

impl NodeCache {
    /// Free frames and frames in flight (for the checks of the tests
    /// and of the simulation).
    pub(crate) fn frames_debug(&self) -> (Vec<u64>, Vec<(PageKey, u64)>) {
        let mut inflight: Vec<(PageKey, u64)> =
            self.inflight.iter().map(|(k, g)| (*k, *g)).collect();
        inflight.sort_unstable();
        (self.frames.free_list().to_vec(), inflight)
    }
}

const POOL: (u64, u64) = (100, 104);
const PEER: u64 = 500;

fn key(idx: u64) -> PageKey {
    PageKey { ino: 3, idx }
}

fn cache() -> NodeCache {
    NodeCache::new(Mode::Strong, POOL, 2)
}

fn yes(_: u64) -> bool {
    true
}

fn no(_: u64) -> bool {
    false
}

/// Every frame of the pool is exactly once free, in flight or held by
/// a slot; the remote count matches; deferred DIR_INVs are in flight.
#[track_caller]
fn pool_ok(c: &NodeCache) {
    assert_eq!(c.private_count(), c.counts().2, "private copies counted");
    let mut seen = BTreeSet::new();
    let held = c.slots.values().filter_map(|s| match s {
        Slot::Local { gfn, .. } | Slot::Reserved { gfn } | Slot::Reclaiming { gfn } => Some(*gfn),
        _ => None,
    });
    for g in c
        .frames
        .free_list()
        .iter()
        .copied()
        .chain(c.inflight.values().copied())
        .chain(held)
    {
        assert!(c.frames.contains(g), "frame {g} not ours");
        assert!(seen.insert(g), "frame {g} twice: {c:?}");
    }
    assert_eq!(seen.len(), c.pool_frames(), "lost a frame: {c:?}");
    let remote = c
        .slots
        .values()
        .filter(|s| matches!(s, Slot::Remote { .. }))
        .count();
    assert_eq!(c.held.remote, remote);
    assert!(c.owed.deferred().all(|k| c.inflight.contains_key(k)));
    assert_eq!(c.counts().1, remote);
}

/// Own `k` through a READ fill; returns its frame.
fn own(c: &mut NodeCache, k: PageKey) -> u64 {
    let Some(PageReq::Read { frame, .. }) = c.start_miss(k, false) else {
        panic!("no READ");
    };
    assert_eq!(
        c.complete_miss(k, PageReply::Owner { gfn: frame }, yes),
        Installed::Local(frame)
    );
    pool_ok(c);
    frame
}

/// Map `k` from a peer's frame `gfn`.
fn map(c: &mut NodeCache, k: PageKey, gfn: u64) {
    c.start_miss(k, false).unwrap();
    let r = PageReply::Shared { owner: 2, gfn };
    assert_eq!(c.complete_miss(k, r, yes), Installed::Remote(gfn));
    pool_ok(c);
}

#[test]
fn a_new_cache_has_every_frame_free() {
    let c = cache();
    assert_eq!((c.free_frames(), c.pool_frames()), (4, 4));
    assert_eq!(c.counts(), (0, 0, 0));
    assert!(c.is_ours(100) && c.is_ours(103) && !c.is_ours(104) && !c.is_ours(99));
    pool_ok(&c);
}

#[test]
fn start_miss_builds_read_or_lookup_lock_with_a_frame_of_ours() {
    let mut c = cache();
    let Some(PageReq::Read { key: k, frame }) = c.start_miss(key(0), false) else {
        panic!()
    };
    assert_eq!(k, key(0));
    assert!(c.is_ours(frame));
    assert!(matches!(
        c.start_miss(key(1), true),
        Some(PageReq::LookupLock { .. })
    ));
    // Relaxed mode never asks LOOKUP_LOCK.
    let mut r = NodeCache::new(Mode::Relaxed, POOL, 2);
    assert!(matches!(
        r.start_miss(key(1), true),
        Some(PageReq::Read { .. })
    ));
    assert_eq!(c.free_frames(), 2);
    assert_eq!(c.stats().misses, 2);
    pool_ok(&c);
}

#[test]
fn start_miss_refuses_a_page_in_flight_and_an_empty_pool() {
    let mut c = cache();
    c.start_miss(key(0), false).unwrap();
    assert_eq!(c.start_miss(key(0), true), None, "already in flight");
    for i in 1..4 {
        c.start_miss(key(i), false).unwrap();
    }
    assert_eq!(c.start_miss(key(9), false), None, "pool empty");
    assert_eq!(c.free_frames(), 0);
    pool_ok(&c);
}

#[test]
fn owner_answer_installs_our_frame() {
    let mut c = cache();
    let g = own(&mut c, key(0));
    assert_eq!(
        c.slot(&key(0)),
        Some(&Slot::Local {
            gfn: g,
            dirty: false
        })
    );
    assert_eq!(c.lookup(&key(0)), Hit::Local(g));
    assert_eq!(c.stats().fills, 1);
    assert_eq!(c.stats().hits_local, 1);
    // An owner answer naming another frame gives ours back.
    c.start_miss(key(1), false).unwrap();
    assert_eq!(
        c.complete_miss(key(1), PageReply::Owner { gfn: g }, yes),
        Installed::Failed
    );
    assert_eq!(c.slot(&key(1)), None);
    pool_ok(&c);
}

#[test]
fn shared_answer_maps_the_peer_frame_and_frees_ours() {
    let mut c = cache();
    map(&mut c, key(0), PEER);
    assert_eq!(c.free_frames(), 4);
    assert_eq!(c.lookup(&key(0)), Hit::Remote(PEER));
    assert_eq!(c.counts(), (0, 1, 0));
    assert_eq!(c.stats().remote_maps, 1);
    // Not exported: refused.
    c.start_miss(key(1), false).unwrap();
    let r = PageReply::Shared {
        owner: 2,
        gfn: PEER + 1,
    };
    assert_eq!(c.complete_miss(key(1), r, no), Installed::Failed);
    // Our own frame cannot be a peer's.
    c.start_miss(key(2), false).unwrap();
    let r = PageReply::Shared { owner: 2, gfn: 101 };
    assert_eq!(c.complete_miss(key(2), r, yes), Installed::Failed);
    assert_eq!(c.stats().refused_maps, 2);
    assert_eq!(c.counts(), (0, 1, 0));
    pool_ok(&c);
}

#[test]
fn exclusive_answer_reserves_until_unlocked() {
    let mut c = cache();
    let Some(PageReq::LookupLock { frame, .. }) = c.start_miss(key(0), true) else {
        panic!()
    };
    assert_eq!(
        c.complete_miss(key(0), PageReply::Exclusive { gfn: frame }, yes),
        Installed::Reserved(frame)
    );
    assert_eq!(c.lookup(&key(0)), Hit::Miss, "not readable while reserved");
    assert_eq!(c.pick_victims(4), vec![], "not a victim while reserved");
    pool_ok(&c);
    c.unlocked(key(0));
    assert_eq!(
        c.slot(&key(0)),
        Some(&Slot::Local {
            gfn: frame,
            dirty: true
        })
    );
    assert_eq!(c.pick_victims(4), vec![(key(0), true)]);
    c.unlocked(key(5)); // nothing reserved: no-op
    pool_ok(&c);
}

#[test]
fn retry_refusal_and_io_error_give_the_frame_back() {
    let mut c = cache();
    for (r, want) in [
        (PageReply::Retry, Installed::Retry),
        (PageReply::Refused, Installed::Failed),
        (PageReply::IoError, Installed::Failed),
        (PageReply::Done { written: false }, Installed::Failed),
    ] {
        c.start_miss(key(0), false).unwrap();
        assert_eq!(c.complete_miss(key(0), r, yes), want);
        assert_eq!(c.free_frames(), 4);
        assert_eq!(c.slot(&key(0)), None);
    }
    assert_eq!(c.stats().retries, 1);
    // An answer to a miss never started.
    assert_eq!(
        c.complete_miss(key(1), PageReply::Owner { gfn: 100 }, yes),
        Installed::Failed
    );
    pool_ok(&c);
}

#[test]
fn victims_are_the_oldest_owned_pages_and_their_frames_come_back() {
    let mut c = cache();
    let g0 = own(&mut c, key(0));
    own(&mut c, key(1));
    let g2 = own(&mut c, key(2));
    map(&mut c, key(3), PEER);
    c.mark_dirty(&key(0));
    assert_eq!(c.pick_victims(2), vec![(key(0), true), (key(1), false)]);
    assert_eq!(c.slot(&key(0)), Some(&Slot::Reclaiming { gfn: g0 }));
    assert_eq!(c.lookup(&key(0)), Hit::Miss, "not usable while reclaiming");
    assert_eq!(c.stats().invs_sent, 2);
    pool_ok(&c);
    c.reclaimed(&key(0));
    assert_eq!(c.slot(&key(0)), None);
    // Refused: back as it was (dirty, to be safe), last in line.
    c.reclaim_failed(&key(1));
    assert!(matches!(
        c.slot(&key(1)),
        Some(Slot::Local { dirty: true, .. })
    ));
    assert_eq!(c.all_owned(), vec![(key(2), false), (key(1), true)]);
    assert_eq!(c.slot(&key(2)), Some(&Slot::Reclaiming { gfn: g2 }));
    // Answers for pages that are not reclaiming change nothing.
    c.reclaimed(&key(3));
    c.reclaim_failed(&key(3));
    assert_eq!(c.lookup(&key(3)), Hit::Remote(PEER));
    c.reclaimed(&key(1));
    c.reclaimed(&key(2));
    assert_eq!(c.free_frames(), 4);
    pool_ok(&c);
}

#[test]
fn invalidate_tears_down_mappings_and_evicted_copies() {
    let mut c = cache();
    map(&mut c, key(0), PEER);
    c.mark_dirty(&key(0));
    assert!(c.invalidate(&key(0)), "the dirty bit goes with the ack");
    assert_eq!(c.counts(), (0, 0, 0));
    map(&mut c, key(0), PEER);
    assert!(!c.invalidate(&key(0)));
    // File eviction: our own copy goes, in every state that holds one.
    own(&mut c, key(1));
    c.mark_dirty(&key(1));
    assert!(!c.invalidate(&key(1)), "evicted data is not written back");
    own(&mut c, key(2));
    c.pick_victims(1);
    c.invalidate(&key(2));
    let Some(PageReq::LookupLock { frame, .. }) = c.start_miss(key(3), true) else {
        panic!()
    };
    c.complete_miss(key(3), PageReply::Exclusive { gfn: frame }, yes);
    c.invalidate(&key(3)); // UNLOCK served, its answer not yet in
    c.unlocked(key(3));
    assert_eq!(c.slot(&key(3)), None);
    assert!(!c.invalidate(&key(9)), "nothing here");
    assert_eq!(c.free_frames(), 4);
    assert_eq!(c.stats().invs_received, 6);
    assert_eq!(c.pick_victims(4), vec![]);
    pool_ok(&c);
}

#[test]
fn dir_inv_during_a_miss_waits_for_the_answer() {
    let mut c = cache();
    // Shared answer overtaken by the DIR_INV of that very mapping.
    c.start_miss(key(0), false).unwrap();
    assert_eq!(c.dir_inv(&key(0)), None);
    assert!(c.take_acks().is_empty(), "not before the answer");
    pool_ok(&c);
    let r = PageReply::Shared {
        owner: 2,
        gfn: PEER,
    };
    assert_eq!(c.complete_miss(key(0), r, yes), Installed::Retry);
    assert_eq!(c.slot(&key(0)), None, "the mapping is not installed");
    assert_eq!(c.take_acks(), vec![(key(0), false)]);
    assert!(c.take_acks().is_empty());
    // A fill whose page was evicted before the answer arrived.
    let Some(PageReq::Read { frame, .. }) = c.start_miss(key(1), false) else {
        panic!()
    };
    assert_eq!(c.dir_inv(&key(1)), None);
    assert_eq!(
        c.complete_miss(key(1), PageReply::Owner { gfn: frame }, yes),
        Installed::Retry
    );
    assert_eq!(c.slot(&key(1)), None);
    assert_eq!(c.take_acks(), vec![(key(1), false)]);
    // Retry and refusals just release the ack.
    c.start_miss(key(2), false).unwrap();
    c.dir_inv(&key(2));
    assert_eq!(
        c.complete_miss(key(2), PageReply::Retry, yes),
        Installed::Retry
    );
    assert_eq!(c.take_acks(), vec![(key(2), false)]);
    // E cannot be what was invalidated: installed, ack released.
    let Some(PageReq::LookupLock { frame, .. }) = c.start_miss(key(3), true) else {
        panic!()
    };
    c.dir_inv(&key(3));
    assert_eq!(
        c.complete_miss(key(3), PageReply::Exclusive { gfn: frame }, yes),
        Installed::Reserved(frame)
    );
    assert_eq!(c.take_acks(), vec![(key(3), false)]);
    // Without a miss in flight the ack is due at once.
    map(&mut c, key(4), PEER);
    c.mark_dirty(&key(4));
    assert_eq!(c.dir_inv(&key(4)), Some(true));
    assert_eq!(c.dir_inv(&key(4)), Some(false));
    assert_eq!(c.free_frames(), 3);
    pool_ok(&c);
}

#[test]
fn a_dropped_dirty_mapping_reports_its_dirty_bit_to_a_racing_dir_inv() {
    let mut c = cache();
    map(&mut c, key(0), PEER);
    map(&mut c, key(1), PEER + 1);
    map(&mut c, key(2), PEER + 2);
    c.mark_dirty(&key(0));
    // Limit 2: the oldest key goes, with its dirty bit.
    assert_eq!(c.over_limit(), vec![(key(0), true)]);
    assert_eq!(c.over_limit(), vec![]);
    // The DROP is not answered yet and a DIR_INV comes: dirty.
    assert_eq!(c.dir_inv(&key(0)), Some(true));
    assert_eq!(c.dir_inv(&key(0)), Some(false), "reported once");
    // Answered first: forgotten.
    c.mark_dirty(&key(1));
    assert_eq!(c.all_remote(), vec![(key(1), true), (key(2), false)]);
    c.drop_done(&key(1));
    assert_eq!(c.dir_inv(&key(1)), Some(false));
    // A later miss on the page means the DROP was answered.
    map(&mut c, key(5), PEER + 5);
    c.mark_dirty(&key(5));
    c.forget_remote(&[(key(5), false)]);
    map(&mut c, key(5), PEER + 5);
    assert_eq!(c.dir_inv(&key(5)), Some(false));
    assert_eq!(c.stats().drops, 4);
    pool_ok(&c);
}

#[test]
fn dirty_pages_are_listed_and_cleaned() {
    let mut c = cache();
    own(&mut c, key(0));
    own(&mut c, PageKey { ino: 4, idx: 0 });
    map(&mut c, key(1), PEER);
    own(&mut c, key(2));
    c.mark_dirty(&key(0));
    c.mark_dirty(&key(1));
    c.mark_dirty(&PageKey { ino: 4, idx: 0 });
    c.mark_dirty(&key(7)); // absent: no-op
    assert_eq!(c.dirty_pages(3), vec![key(0), key(1)]);
    assert_eq!(c.dirty_inodes(), vec![3, 4]);
    c.cleaned(&key(0));
    c.cleaned(&key(1));
    assert_eq!(c.dirty_pages(3), vec![]);
    assert_eq!(c.dirty_inodes(), vec![4]);
    pool_ok(&c);
}

#[test]
fn private_copies_replace_mappings_in_relaxed_mode() {
    let mut c = NodeCache::new(Mode::Relaxed, POOL, 2);
    map(&mut c, key(0), PEER);
    assert!(c.make_private(key(0), Box::new([7; PAGE])));
    assert!(!c.make_private(key(1), Box::new([8; PAGE])));
    assert_eq!(c.lookup(&key(0)), Hit::Private);
    assert_eq!(c.private(&key(1)).map(|p| p[0]), Some(8));
    c.private_mut(&key(1)).unwrap()[0] = 9;
    assert_eq!(c.private_pages(3), vec![key(0), key(1)]);
    assert_eq!(c.dirty_inodes(), vec![3]);
    assert_eq!(c.counts(), (0, 0, 2));
    assert!(
        !c.make_private(key(1), Box::new([9; PAGE])),
        "a copy replaced"
    );
    assert_eq!(c.private_count(), 2);
    c.evict_local(3, 1);
    assert_eq!(c.private_count(), 1);
    assert!(!c.make_private(key(1), Box::new([9; PAGE])));
    c.drop_private(&key(0));
    assert_eq!(c.private_pages(3), vec![key(1)]);
    assert_eq!(c.stats().hits_private, 1);
    pool_ok(&c);
}

#[test]
fn forget_all_frees_everything() {
    let mut c = cache();
    own(&mut c, key(0));
    map(&mut c, key(1), PEER);
    c.start_miss(key(2), true).unwrap();
    c.dir_inv(&key(2));
    c.pick_victims(1);
    c.forget_all();
    assert_eq!(c.free_frames(), 4);
    assert_eq!(c.counts(), (0, 0, 0));
    assert!(c.take_acks().is_empty());
    assert!(c.start_miss(key(2), false).is_some());
    pool_ok(&c);
}

/// Random sequences of every operation (including nonsense answers):
/// the pool never loses or duplicates a frame.
#[test]
fn pool_accounting_survives_any_sequence() {
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut rnd = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    for round in 0..200 {
        let mode = if round % 3 == 0 {
            Mode::Relaxed
        } else {
            Mode::Strong
        };
        let mut c = NodeCache::new(mode, POOL, (round % 3) as usize);
        let mut sent: Vec<(PageKey, u64)> = Vec::new();
        for _ in 0..300 {
            let k = key(rnd(6));
            match rnd(16) {
                0 | 1 => {
                    if let Some(PageReq::Read { frame, .. } | PageReq::LookupLock { frame, .. }) =
                        c.start_miss(k, rnd(2) == 0)
                    {
                        sent.push((k, frame));
                    }
                }
                2..=4 if !sent.is_empty() => {
                    let (k, frame) = sent.swap_remove(rnd(sent.len() as u64) as usize);
                    let reply = match rnd(8) {
                        0 | 1 => PageReply::Owner { gfn: frame },
                        2 => PageReply::Exclusive { gfn: frame },
                        3 | 4 => PageReply::Shared {
                            owner: 2,
                            gfn: PEER + rnd(3),
                        },
                        5 => PageReply::Retry,
                        6 => PageReply::Owner { gfn: 100 + rnd(4) },
                        _ => PageReply::IoError,
                    };
                    c.complete_miss(k, reply, |g| g != PEER + 2);
                }
                5 => c.unlocked(k),
                6 => c.mark_dirty(&k),
                7 => {
                    let _ = c.dir_inv(&k);
                    let _ = c.take_acks();
                }
                8 => {
                    c.invalidate(&k);
                }
                9 => {
                    c.pick_victims(1 + rnd(3) as usize);
                }
                10 => c.reclaimed(&k),
                11 => c.reclaim_failed(&k),
                12 => {
                    c.over_limit();
                }
                13 if matches!(c.slot(&k), None | Some(Slot::Remote { .. }))
                    && !sent.iter().any(|(s, _)| *s == k) =>
                {
                    c.make_private(k, Box::new([0; PAGE]));
                }
                14 => {
                    let _ = c.take_victim(&k);
                    c.evict_local(3, rnd(6));
                }
                15 if rnd(20) == 0 => {
                    c.forget_all();
                    sent.clear();
                }
                _ => {
                    let _ = c.lookup(&k);
                    c.drop_private(&k);
                    c.cleaned(&k);
                }
            }
            pool_ok(&c);
        }
    }
}

#[test]
fn range_inv_tears_down_the_span_and_acks_once() {
    let mut c = cache();
    let span = |first, count| fabric::proto::PageSpan::new(3, first, count).unwrap();
    // Pages 0-1 ours, 2 mapped (written through), 3 outside the span.
    own(&mut c, key(0));
    own(&mut c, key(1));
    map(&mut c, key(2), PEER);
    c.mark_dirty(&key(2));
    own(&mut c, key(3));
    assert_eq!(c.range_inv(&span(0, 3)), vec![(span(0, 3), true)]);
    pool_ok(&c);
    assert_eq!((c.free_frames(), c.counts().1), (3, 0));
    assert!(c.slot(&key(3)).is_some(), "a page outside the span stays");
    assert!(c.take_acks().is_empty());
    assert!(c.quiet());
}

/// A miss in flight of one page of the span holds back that page's ack
/// only: the runs around it are acked at once, so a request of theirs
/// need not wait for the miss's answer to be taken in.
#[test]
fn range_inv_during_a_miss_of_one_of_its_pages_defers_that_page_alone() {
    let mut c = cache();
    let span = |first, count| fabric::proto::PageSpan::new(3, first, count).unwrap();
    own(&mut c, key(0));
    map(&mut c, key(4), PEER);
    c.mark_dirty(&key(4));
    let Some(PageReq::Read { frame, .. }) = c.start_miss(key(2), false) else {
        panic!()
    };
    assert_eq!(
        c.range_inv(&span(0, 6)),
        vec![(span(0, 2), false), (span(3, 3), true)]
    );
    pool_ok(&c);
    assert_eq!(c.slot(&key(0)), None, "the rest goes at once");
    assert_eq!(c.slot(&key(4)), None);
    assert!(!c.quiet());
    assert!(c.take_acks().is_empty(), "not before the answer");
    // The answer is not kept; the page's own ack is due.
    assert_eq!(
        c.complete_miss(key(2), PageReply::Owner { gfn: frame }, yes),
        Installed::Retry
    );
    assert_eq!(c.slot(&key(2)), None);
    assert_eq!(c.take_acks(), vec![(key(2), false)]);
    pool_ok(&c);
    assert!(c.quiet());
    // Misses at both ends of a span: one run between them.
    let _ = c.start_miss(key(0), false).unwrap();
    let _ = c.start_miss(key(3), false).unwrap();
    assert_eq!(c.range_inv(&span(0, 4)), vec![(span(1, 2), false)]);
    // Every page in flight: nothing to ack yet.
    let _ = c.start_miss(key(5), false).unwrap();
    assert_eq!(c.range_inv(&span(5, 1)), vec![]);
}
mod policy;
mod promote;

#[test]
fn victims_go_as_one_run_per_contiguous_pages_of_a_file() {
    use fabric::proto::{PageRun, PageSpan, RunKind};
    let mut c = NodeCache::new(Mode::Strong, (1000, 1100), 2);
    let k = |ino, idx| PageKey { ino, idx };
    // A 64-page file: one run.
    for i in 0..64 {
        own(&mut c, k(5, i));
    }
    c.mark_dirty(&k(5, 7));
    let mut v = c.pick_victims(usize::MAX);
    v.sort_unstable_by_key(|x| x.0);
    let runs = PageRun::split(RunKind::Inv, &v);
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].span, PageSpan::new(5, 0, 64).unwrap());
    assert_eq!(runs[0].dirty, 1 << 7);
    // Every page but page 9 done: that one is back in the cache.
    assert_eq!(c.run_answered(runs[0].span, !(1 << 9)), 63);
    assert!(matches!(
        c.slot(&k(5, 9)),
        Some(Slot::Local { dirty: true, .. })
    ));
    assert_eq!(c.slot(&k(5, 10)), None);
    pool_ok(&c);
    c.pick_victims(usize::MAX);
    c.reclaimed(&k(5, 9));
    // A gap (page 3), a page whose miss is in flight (page 5), another
    // file right after: four runs.
    for i in [0, 1, 2, 4, 6, 7] {
        own(&mut c, k(6, i));
    }
    own(&mut c, k(7, 8));
    assert!(c.start_miss(k(6, 5), false).is_some());
    let mut v = c.pick_victims(usize::MAX);
    v.sort_unstable_by_key(|x| x.0);
    let spans: Vec<(u64, u64, u64)> = PageRun::split(RunKind::Inv, &v)
        .iter()
        .map(|r| (r.span.ino, r.span.first, r.span.count))
        .collect();
    assert_eq!(spans, [(6, 0, 3), (6, 4, 1), (6, 6, 2), (7, 8, 1)]);
    assert_eq!(c.stats().invs_sent, 64 + 1 + 7);
}
