//! Exhaustive interleavings of the slot cache's step machines
//! (`common::explore`): claimers, fillers, readers, evictions and failed
//! participants of one or two pages.

use std::sync::atomic::AtomicU64;

mod common;
use common::{explore, Moved};

use daxcache::pcache::{
    FillJob, Lookup, LookupOp, PageCache, Reclaimed, Tag, HEADER_WORDS, PINS_PER_OWNER, SLOT_WORDS,
    VALID,
};
use daxcache::{SpinWaiter, Step};

/// A participant that reads one page: look up; on a miss fill and publish
/// (the claimer is the filler here), look up again; read; unpin.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Reader {
    Looking(LookupOp),
    Filling(usize),
    Pinned(usize),
    Done(usize),
    /// Not a reader: a filler that fails to read slot `.0`'s page and
    /// gives the slot back.
    Abort(usize),
    /// Failed (stopped for good); the directory then reclaims what it held.
    Crashed,
    /// Failed and reclaimed.
    Reclaimed(Reclaimed),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Part {
    owner: u8,
    tag: Tag,
    /// Pages this participant filled and published.
    fills: u8,
    r: Reader,
    /// Steps taken, and the step before which this participant fails.
    steps: u8,
    crash_at: Option<u8>,
}

const SLOTS: usize = 8;

fn pc_area() -> Vec<AtomicU64> {
    let n = PageCache::<[AtomicU64]>::words_needed(SLOTS).unwrap();
    (0..n).map(|_| AtomicU64::new(0)).collect()
}

/// The words a scenario with owners `0..owners` (pin record 0) writes.
fn pc_tracked(owners: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..HEADER_WORDS + SLOTS * SLOT_WORDS).collect();
    for o in 0..owners {
        v.push(HEADER_WORDS + SLOTS * SLOT_WORDS + o * PINS_PER_OWNER);
    }
    v
}

fn pc_step(p: &mut Part, mem: &[AtomicU64]) -> Moved {
    let pc = PageCache::attach(mem, 0, SLOTS).unwrap();
    if p.crash_at == Some(p.steps) && !matches!(p.r, Reader::Crashed | Reader::Reclaimed(_)) {
        p.r = Reader::Crashed;
        return Moved::Yes;
    }
    let moved = pc_run(p, &pc);
    // Only a participant that will fail counts its steps (waiting is not
    // a step), so the others' states stay few.
    if p.crash_at.is_some() && matches!(moved, Moved::Yes) {
        p.steps += 1;
    }
    moved
}

fn pc_run(p: &mut Part, pc: &PageCache<'_, [AtomicU64]>) -> Moved {
    match &mut p.r {
        Reader::Looking(op) => match op.step(pc).unwrap() {
            Step::Again => Moved::Yes,
            Step::Blocked => Moved::Waited,
            Step::Done(Lookup::Miss(s)) => {
                p.r = Reader::Filling(s);
                Moved::Yes
            }
            Step::Done(Lookup::Hit(s)) => {
                p.r = Reader::Pinned(s);
                Moved::Yes
            }
        },
        Reader::Filling(s) => {
            let job: FillJob = pc.pending_at(*s).unwrap().expect("our claim is pending");
            assert_eq!((job.tag, job.owner), (p.tag, p.owner));
            assert!(pc.publish(&job).unwrap());
            p.fills += 1;
            p.r = Reader::Looking(LookupOp::new(pc, p.tag, p.owner, 0).unwrap());
            Moved::Yes
        }
        Reader::Pinned(s) => {
            // The pinned slot holds our page while we read it.
            let x = pc.slot(*s).unwrap();
            assert_eq!((x.state, x.tag), (VALID, p.tag));
            assert!(x.refs >= 1);
            pc.unpin(p.owner, 0, *s).unwrap();
            p.r = Reader::Done(*s);
            Moved::Yes
        }
        Reader::Abort(s) => {
            let job = pc.pending_at(*s).unwrap().expect("pending");
            assert!(pc.abort_fill(&job).unwrap());
            p.r = Reader::Done(*s);
            Moved::Yes
        }
        Reader::Crashed => {
            p.r = Reader::Reclaimed(pc.reclaim_owner(p.owner).unwrap());
            Moved::Yes
        }
        Reader::Done(_) | Reader::Reclaimed(_) => unreachable!(),
    }
}

fn pc_done(p: &Part) -> bool {
    matches!(p.r, Reader::Done(_) | Reader::Reclaimed(_))
}

fn part(pc: &PageCache<'_, [AtomicU64]>, owner: u8, tag: Tag) -> Part {
    Part {
        owner,
        tag,
        fills: 0,
        r: Reader::Looking(LookupOp::new(pc, tag, owner, 0).unwrap()),
        steps: 0,
        crash_at: None,
    }
}

/// Every reader of one tag got it, from one slot, filled exactly once.
fn one_fill_per_page(ps: &[Part], mem: &[AtomicU64]) {
    let pc = PageCache::attach(mem, 0, SLOTS).unwrap();
    let ps: Vec<&Part> = ps.iter().filter(|p| p.owner < FILLER).collect();
    let mut tags: Vec<Tag> = ps.iter().map(|p| p.tag).collect();
    tags.sort();
    tags.dedup();
    for t in tags {
        let fills: u8 = ps.iter().filter(|p| p.tag == t).map(|p| p.fills).sum();
        assert_eq!(fills, 1, "page {t:?} filled {fills} times: {ps:?}");
        let holding: Vec<usize> = (0..SLOTS)
            .filter(|&s| pc.slot(s).unwrap().tag == t && pc.slot(s).unwrap().state != 0)
            .collect();
        assert_eq!(holding.len(), 1, "{t:?} in slots {holding:?}");
        let s = pc.slot(holding[0]).unwrap();
        assert_eq!((s.state, s.refs), (VALID, 0));
        for p in ps.iter().filter(|p| p.tag == t) {
            assert_eq!(p.r, Reader::Done(holding[0]));
        }
    }
}

fn claimers_of_one_page(n: u8) -> usize {
    let mem = pc_area();
    let pc = PageCache::format(&mem[..], 0, SLOTS).unwrap();
    let t = Tag::new(5, 5).unwrap();
    let ps = (0..n).map(|o| part(&pc, o, t)).collect();
    explore(
        &mem,
        &pc_tracked(n.into()),
        ps,
        pc_step,
        pc_done,
        one_fill_per_page,
    )
}

#[test]
fn two_claimers_of_one_page_fill_it_once() {
    let states = claimers_of_one_page(2);
    eprintln!("{states} states");
}

#[test]
fn three_claimers_of_one_page_fill_it_once() {
    let states = claimers_of_one_page(3);
    eprintln!("{states} states");
}

/// A full window of cold pages: every claimer must evict, and two that
/// evict different victims must still not both claim the page (the case
/// where DaxFS's probe-then-claim fills a page twice).
fn claimers_with_eviction(n: u8) -> usize {
    let mem = pc_area();
    let pc = PageCache::format(&mem[..], 0, SLOTS).unwrap();
    let mut w = SpinWaiter { left: 10 };
    for p in 100..100 + SLOTS as u64 {
        let t = Tag::new(9, p).unwrap();
        let Lookup::Miss(s) = pc.lookup(t, 60, 0, &mut w).unwrap() else {
            panic!()
        };
        assert!(pc.publish(&pc.pending_at(s).unwrap().unwrap()).unwrap());
    }
    // Cool the window: every slot is a cold victim.
    assert!(pc.sweep().unwrap());
    for s in 0..SLOTS {
        assert!(!pc.referenced(s).unwrap());
        assert_eq!(pc.slot(s).unwrap().state, VALID);
    }
    let t = Tag::new(5, 5).unwrap();
    let ps = (0..n).map(|o| part(&pc, o, t)).collect();
    explore(
        &mem,
        &pc_tracked(n.into()),
        ps,
        pc_step,
        pc_done,
        one_fill_per_page,
    )
}

#[test]
fn two_claimers_evicting_fill_the_page_once() {
    let states = claimers_with_eviction(2);
    eprintln!("{states} states");
}

#[test]
fn three_claimers_evicting_fill_the_page_once() {
    let states = claimers_with_eviction(3);
    eprintln!("{states} states");
}

/// A participant fails before its k-th step, for every k, while two others
/// read the same page: its claims and pins are reclaimed and nothing
/// wedges. The survivors all read the page, it was published once, no
/// claim is left, and the only pin that may stay is one the reclaim
/// counted as uncertain (failed between its record and its CAS).
#[test]
fn a_participant_failing_at_any_step_does_not_wedge_the_page() {
    let mut crash_points = 0;
    for k in 0..40 {
        let mem = pc_area();
        let pc = PageCache::format(&mem[..], 0, SLOTS).unwrap();
        let t = Tag::new(5, 5).unwrap();
        let mut ps: Vec<Part> = (0..3).map(|o| part(&pc, o, t)).collect();
        ps[2].crash_at = Some(k);
        let crashed = std::cell::Cell::new(false);
        explore(&mem, &pc_tracked(3), ps, pc_step, pc_done, |ps, mem| {
            let pc = PageCache::attach(mem, 0, SLOTS).unwrap();
            let fills: u8 = ps.iter().map(|p| p.fills).sum();
            assert_eq!(fills, 1, "{ps:?}");
            let Reader::Done(s) = ps[0].r else { panic!() };
            assert_eq!(ps[1].r, Reader::Done(s));
            let uncertain = match ps[2].r {
                Reader::Reclaimed(r) => {
                    crashed.set(true);
                    r.uncertain
                }
                _ => 0,
            };
            for x in 0..SLOTS {
                let y = pc.slot(x).unwrap();
                if x == s {
                    assert_eq!((y.state, y.tag), (VALID, t));
                    assert!(y.refs as usize <= uncertain, "{y:?} {ps:?}");
                } else {
                    assert_eq!(y.state, 0, "slot {x}: {y:?}");
                }
            }
        });
        if !crashed.get() {
            // The participant finished before step k: every later k is the same.
            break;
        }
        crash_points += 1;
    }
    eprintln!("{crash_points} failure points");
    assert!(crash_points > 10, "{crash_points}");
}

/// The owner id of the setup's claims and of the aborting filler.
const FILLER: u8 = 60;

/// Tags whose home slot is `home`.
fn tags_at<'a>(
    pc: &'a PageCache<'a, [AtomicU64]>,
    home: usize,
    ino: u64,
) -> impl Iterator<Item = Tag> + 'a {
    (0..)
        .map(move |p| Tag::new(ino, p).unwrap())
        .filter(move |t| pc.home(*t) == home)
}

/// A slot of the window turns FREE (a failed fill of another page) while
/// two claimers scan it: one saw the slot busy and picked the next FREE
/// one, the other sees it FREE and picks it. In DaxFS both claim the page
/// and it is filled twice; the claim validation must keep it to one fill.
#[test]
fn a_slot_freed_during_the_scans_does_not_fill_a_page_twice() {
    let mem = pc_area();
    let pc = PageCache::format(&mem[..], 0, SLOTS).unwrap();
    let t = Tag::new(5, 5).unwrap();
    let h = pc.home(t);
    let mut w = SpinWaiter { left: 10 };
    let mut others = tags_at(&pc, h, 9);
    let mut claim = |tag: Tag| match pc.lookup(tag, FILLER, 0, &mut w).unwrap() {
        Lookup::Miss(s) => s,
        Lookup::Hit(_) => panic!(),
    };
    // Slot h: PENDING with page U, its fill about to fail.
    let u = others.next().unwrap();
    assert_eq!(claim(u), h);
    // Slot h+1: FREE. Slots h+2..h+7: cached pages.
    let v = others.next().unwrap();
    let s1 = claim(v);
    assert_eq!(s1, (h + 1) % SLOTS);
    for _ in 2..SLOTS {
        let s = claim(others.next().unwrap());
        assert!(pc.publish(&pc.pending_at(s).unwrap().unwrap()).unwrap());
    }
    assert!(pc.abort_fill(&pc.pending_at(s1).unwrap().unwrap()).unwrap());
    let mut ps: Vec<Part> = (0..2).map(|o| part(&pc, o, t)).collect();
    ps.push(Part {
        owner: FILLER,
        tag: u,
        fills: 0,
        r: Reader::Abort(h),
        steps: 0,
        crash_at: None,
    });
    let mut tracked = pc_tracked(2);
    tracked.push(HEADER_WORDS + SLOTS * SLOT_WORDS + usize::from(FILLER) * PINS_PER_OWNER);
    let states = explore(&mem, &tracked, ps, pc_step, pc_done, one_fill_per_page);
    eprintln!("{states} states");
}

/// Two pages whose windows overlap, one read by two participants.
#[test]
fn two_pages_three_readers() {
    let mem = pc_area();
    let pc = PageCache::format(&mem[..], 0, SLOTS).unwrap();
    let a = Tag::new(1, 1).unwrap();
    let b = Tag::new(1, 2).unwrap();
    let ps = vec![part(&pc, 0, a), part(&pc, 1, b), part(&pc, 2, a)];
    let states = explore(
        &mem,
        &pc_tracked(3),
        ps,
        pc_step,
        pc_done,
        one_fill_per_page,
    );
    eprintln!("{states} states");
}

/// The searches visit many states (the machines do interleave: a search
/// that ran each participant alone would see a few dozen).
#[test]
fn searches_are_not_trivial() {
    assert!(claimers_of_one_page(2) > 200);
}
