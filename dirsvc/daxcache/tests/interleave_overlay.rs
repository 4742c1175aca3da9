//! Exhaustive interleavings of the hash overlay's step machines
//! (`common::explore`): inserters of one key, copy-on-write writers of one
//! page entry with a reader, appenders of one file.

use std::sync::atomic::{AtomicU64, Ordering};

mod common;
use common::{explore, explore_with, Moved};

use daxcache::overlay::{
    InsertOp, Inserted, Key, Overlay, PublishOp, ReadOp, ReserveOp, UpdateOp, PAGE_WORDS,
};
use daxcache::Step;

/// Overlay: inserters of one key (distinct pool entries) and of a key
/// sharing its home bucket.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Ins {
    key: Key,
    /// An inserter, or (None) a reader that looks the key up once.
    op: Option<InsertOp>,
    out: Option<Inserted>,
    /// What the reader found: the entry's offset, if any.
    read: Option<Option<usize>>,
}

const BUCKETS: usize = 4;
const POOL: usize = 4 * PAGE_WORDS;

fn ov_step(p: &mut Ins, mem: &[AtomicU64]) -> Moved {
    let ov = Overlay::attach(mem, 0, BUCKETS, POOL).unwrap();
    let Some(op) = &mut p.op else {
        // A key claimed but not yet published reads as absent, never as
        // an entry that is not the key's.
        p.read = Some(ov.lookup(p.key).unwrap().map(|(_, v)| v.off));
        return Moved::Yes;
    };
    match op.step(&ov).unwrap() {
        Step::Again => Moved::Yes,
        Step::Blocked => Moved::Waited,
        Step::Done(r) => {
            p.out = Some(r);
            Moved::Yes
        }
    }
}

fn overlay_inserts(keys: &[Key], reader_keys: &[Key]) -> usize {
    let n = Overlay::<[AtomicU64]>::words_needed(BUCKETS, POOL).unwrap();
    let mem: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
    let ov = Overlay::format(&mem[..], 0, BUCKETS, POOL).unwrap();
    let ins: Vec<Ins> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| Ins {
            key: *k,
            op: Some(InsertOp::new(&ov, *k, i * PAGE_WORDS).unwrap()),
            out: None,
            read: None,
        })
        .chain(reader_keys.iter().map(|k| Ins {
            key: *k,
            op: None,
            out: None,
            read: None,
        }))
        .collect();
    let tracked: Vec<usize> = (1..daxcache::overlay::HEADER_WORDS + BUCKETS * 2).collect();
    explore(
        &mem,
        &tracked,
        ins,
        ov_step,
        |p| p.out.is_some() || p.read.is_some(),
        |all, mem| {
            let ov = Overlay::attach(mem, 0, BUCKETS, POOL).unwrap();
            let readers: Vec<&Ins> = all.iter().filter(|p| p.op.is_none()).collect();
            let ps = all;
            let ins: Vec<Ins> = ps.iter().filter(|p| p.op.is_some()).cloned().collect();
            let ps = &ins[..];
            let mut distinct: Vec<Key> = ps.iter().map(|p| p.key).collect();
            distinct.sort_by_key(|k| k.raw());
            distinct.dedup();
            for k in distinct {
                let mine: Vec<(usize, &Ins)> =
                    ps.iter().enumerate().filter(|(_, p)| p.key == k).collect();
                let new: Vec<usize> = mine
                    .iter()
                    .filter(|(_, p)| matches!(p.out, Some(Inserted::New { .. })))
                    .map(|(i, _)| *i)
                    .collect();
                assert_eq!(new.len(), 1, "key {k:?}: {ps:?}");
                // The key maps to the winner's entry, and everyone else saw it.
                let (b, v) = ov.lookup(k).unwrap().expect("published");
                assert_eq!(v.off, new[0] * PAGE_WORDS);
                for r in &readers {
                    if r.key == k {
                        let got = r.read.unwrap();
                        assert!(got.is_none() || got == Some(v.off), "reader saw {got:?}");
                    }
                }
                for (_, p) in &mine {
                    match p.out {
                        Some(Inserted::New { bucket }) => assert_eq!(bucket, b),
                        Some(Inserted::Existing { bucket, .. }) => assert_eq!(bucket, b),
                        other => panic!("{other:?}"),
                    }
                }
            }
        },
    )
}

#[test]
fn concurrent_inserts_of_one_key_publish_one_value() {
    let k = Key::data(3, 3).unwrap();
    let s2 = overlay_inserts(&[k, k], &[k]);
    let s3 = overlay_inserts(&[k, k, k], &[]);
    eprintln!("{s2} / {s3} states");
}

#[test]
fn concurrent_inserts_of_colliding_keys_lose_none() {
    let n = Overlay::<[AtomicU64]>::words_needed(BUCKETS, POOL).unwrap();
    let mem: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
    let ov = Overlay::format(&mem[..], 0, BUCKETS, POOL).unwrap();
    let k0 = Key::data(3, 0).unwrap();
    let home = ov.home(k0);
    let same: Vec<Key> = (1..)
        .map(|p| Key::data(3, p).unwrap())
        .filter(|k| ov.home(*k) == home)
        .take(2)
        .collect();
    let s = overlay_inserts(&[k0, same[0], same[1]], &[same[1]]);
    let s2 = overlay_inserts(&[k0, same[0], k0], &[k0]);
    eprintln!("{s} / {s2} states");
}

/// Pages of the writers' tests: two words, so that a copy or a store of a
/// page takes two steps and can be torn.
const PW: usize = 2;
/// Pool of the writers' tests: four pages (three writers' new versions
/// and the first one), recycled through the free list.
const WPOOL: usize = 4 * PW;
const INO: u64 = 9;
const PG: u64 = 1;

/// A copy-on-write writer of page `PG` of `INO` (each write adds one to
/// both words of the page), or a reader of it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Wr {
    Writer(UpdateOp, Vec<u64>),
    Reader(ReadOp, Vec<u64>),
    Wrote,
    /// What the reader copied (`None`: the overlay had no such page).
    Read(Option<Vec<u64>>),
}

fn w_ov(mem: &[AtomicU64]) -> Overlay<'_, [AtomicU64]> {
    Overlay::attach_paged(mem, 0, BUCKETS, WPOOL, PW).unwrap()
}

fn w_step(p: &mut Wr, mem: &[AtomicU64]) -> Moved {
    let ov = w_ov(mem);
    match p {
        Wr::Writer(op, buf) => {
            let r = op
                .step(&ov, buf, &mut |b| b.fill(0), &mut |b| {
                    for x in b.iter_mut() {
                        *x += 1;
                    }
                })
                .unwrap();
            if let Step::Done(()) = r {
                *p = Wr::Wrote;
            }
        }
        Wr::Reader(op, buf) => {
            if let Step::Done(found) = op.step(&ov, buf).unwrap() {
                *p = Wr::Read(found.then(|| buf.clone()));
            }
        }
        Wr::Wrote | Wr::Read(_) => unreachable!(),
    }
    Moved::Yes
}

/// The published version of the page: never written after it was
/// published, so always whole (both words equal).
fn published(mem: &[AtomicU64]) -> Option<Vec<u64>> {
    let mut buf = vec![0; PW];
    w_ov(mem)
        .read_page(INO, PG, &mut buf)
        .unwrap()
        .then_some(buf)
}

/// `writers` writers of one page (which holds `start` in both words if
/// `start` is some, else is absent) and `readers` readers: every write is
/// applied to the version before it (the page ends at `start + writers`),
/// the published version is whole in every state reached, a reader copies
/// one whole version, and every pool page is published or free again.
fn writers_of_one_page(writers: usize, readers: usize, start: Option<u64>) -> usize {
    let n = Overlay::<[AtomicU64]>::words_needed(BUCKETS, WPOOL).unwrap();
    let mem: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
    let ov = Overlay::format_paged(&mem[..], 0, BUCKETS, WPOOL, PW).unwrap();
    let mut buf = vec![0; PW];
    if let Some(v) = start {
        ov.update_page(INO, PG, &mut buf, &mut |b| b.fill(v), &mut |_| {})
            .unwrap();
    }
    let key = Key::data(INO, PG).unwrap();
    let mut ps: Vec<Wr> = (0..writers)
        .map(|_| Wr::Writer(UpdateOp::new(&ov, key, &buf).unwrap(), vec![0; PW]))
        .collect();
    ps.extend((0..readers).map(|_| Wr::Reader(ReadOp::new(&ov, key, &buf).unwrap(), vec![0; PW])));
    let tracked: Vec<usize> = (1..n).collect();
    let first = start.unwrap_or(0);
    let last = first + writers as u64;
    explore_with(
        &mem,
        &tracked,
        ps,
        w_step,
        |p| matches!(p, Wr::Wrote | Wr::Read(_)),
        |_, mem| {
            if let Some(v) = published(mem) {
                assert!(
                    v[0] == v[1] && (first..=last).contains(&v[0]),
                    "published {v:?}"
                );
            }
        },
        |ps, mem| {
            assert_eq!(
                published(mem),
                Some(vec![last; PW]),
                "a write was lost: {ps:?}"
            );
            for p in ps {
                if let Wr::Read(Some(v)) = p {
                    assert!(v[0] == v[1] && (first..=last).contains(&v[0]), "read {v:?}");
                }
            }
            let used = w_ov(mem).pool_used().unwrap() as usize / PW;
            assert_eq!(
                w_ov(mem).free_pages().unwrap() + 1,
                used,
                "a pool page leaked"
            );
        },
    )
}

#[test]
fn two_writers_of_one_page_lose_no_update_and_a_reader_sees_no_torn_page() {
    let s1 = writers_of_one_page(2, 1, None);
    let s2 = writers_of_one_page(2, 1, Some(5));
    eprintln!("{s1} / {s2} states");
}

#[test]
fn three_writers_of_one_page_lose_no_update() {
    let s1 = writers_of_one_page(3, 0, None);
    let s2 = writers_of_one_page(3, 0, Some(5));
    eprintln!("{s1} / {s2} states");
}

/// An appender of `len` bytes to `INO`: reserve, write its bytes (one
/// word of `data` per byte, its id), publish.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Ap {
    Reserving(ReserveOp),
    Writing { start: u64, k: u64 },
    Publishing(PublishOp, u64),
    Done(u64),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct App {
    id: u64,
    len: u64,
    a: Ap,
}

const APOOL: usize = 8;
/// The file's bytes, one word each, after the overlay's words.
fn data_word(start: u64) -> usize {
    Overlay::<[AtomicU64]>::words_needed(BUCKETS, APOOL).unwrap() + start as usize
}

fn a_step(p: &mut App, mem: &[AtomicU64]) -> Moved {
    let ov = Overlay::attach(mem, 0, BUCKETS, APOOL).unwrap();
    match &mut p.a {
        Ap::Reserving(op) => {
            if let Step::Done(start) = op.step(&ov).unwrap() {
                p.a = Ap::Writing { start, k: 0 };
            }
        }
        Ap::Writing { start, k } => {
            mem[data_word(*start + *k)].store(p.id, Ordering::SeqCst);
            *k += 1;
            if *k == p.len {
                p.a = Ap::Publishing(PublishOp::new(&ov, INO, *start, p.len).unwrap(), *start);
            }
        }
        Ap::Publishing(op, start) => match op.step(&ov).unwrap() {
            Step::Again => {}
            Step::Blocked => return Moved::Waited,
            Step::Done(()) => p.a = Ap::Done(*start),
        },
        Ap::Done(_) => unreachable!(),
    }
    Moved::Yes
}

/// Appenders of `lens` bytes to one file of `initial` bytes: the size
/// never covers a byte not yet written (in every state reached), and in
/// the end it is the sum, every append in its own range, none lost.
fn appenders(lens: &[u64], initial: u64) -> usize {
    let total: u64 = initial + lens.iter().sum::<u64>();
    let n = data_word(total);
    let mem: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
    let ov = Overlay::format(&mem[..], 0, BUCKETS, APOOL).unwrap();
    ov.inode(INO, 0o644, initial).unwrap();
    for o in 0..initial {
        mem[data_word(o)].store(99, Ordering::SeqCst);
    }
    let ps: Vec<App> = lens
        .iter()
        .enumerate()
        .map(|(i, &len)| App {
            id: i as u64 + 1,
            len,
            a: Ap::Reserving(ReserveOp::new(&ov, INO, len).unwrap()),
        })
        .collect();
    let tracked: Vec<usize> = (1..n).collect();
    let size = |mem: &[AtomicU64]| {
        Overlay::attach(mem, 0, BUCKETS, APOOL)
            .unwrap()
            .size(INO)
            .unwrap()
            .unwrap()
    };
    explore_with(
        &mem,
        &tracked,
        ps,
        a_step,
        |p| matches!(p.a, Ap::Done(_)),
        |_, mem| {
            for o in 0..size(mem) {
                assert_ne!(
                    mem[data_word(o)].load(Ordering::SeqCst),
                    0,
                    "size {} covers byte {o}, not yet written",
                    size(mem)
                );
            }
        },
        |ps, mem| {
            assert_eq!(size(mem), total, "{ps:?}");
            for p in ps {
                let Ap::Done(start) = p.a else { unreachable!() };
                assert!(start >= initial);
                for o in start..start + p.len {
                    assert_eq!(mem[data_word(o)].load(Ordering::SeqCst), p.id, "{ps:?}");
                }
            }
        },
    )
}

#[test]
fn two_and_three_appenders_lose_nothing_and_publish_no_unwritten_byte() {
    let s2 = appenders(&[1, 2], 0);
    let s3 = appenders(&[2, 1, 1], 1);
    eprintln!("{s2} / {s3} states");
}
