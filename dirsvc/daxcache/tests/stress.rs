//! Threaded stress on real atomics: participants as std threads sharing one
//! `AtomicU64` array, as instances share the region.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

use daxcache::overlay::{Overlay, PAGE_WORDS};
use daxcache::pcache::{Lookup, PageCache, Tag, CLAIMED, FREE, PENDING, VALID};
use daxcache::{Error, Waiter};

/// Yields the thread between polls, giving up after `left` polls.
struct Yield {
    left: u64,
}

impl Waiter for Yield {
    fn pause(&mut self) -> bool {
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        thread::yield_now();
        true
    }
}

fn waiter() -> Yield {
    Yield { left: 10_000_000 }
}

fn words(n: usize) -> Arc<Vec<AtomicU64>> {
    Arc::new((0..n).map(|_| AtomicU64::new(0)).collect())
}

/// Reads page `tag` through the cache as a participant that fills its own
/// misses: the data of a slot is one word (`data[slot]`), the tag's value.
/// Returns whether this call filled it.
fn read(pc: &PageCache<'_, [AtomicU64]>, data: &[AtomicU64], tag: Tag, owner: u8) -> bool {
    let mut filled = false;
    loop {
        match pc.lookup(tag, owner, 0, &mut waiter()) {
            Ok(Lookup::Hit(s)) => {
                // Pinned: the slot holds our page until we unpin.
                assert_eq!(data[s].load(Ordering::SeqCst), tag.raw() + 1, "slot {s}");
                pc.unpin(owner, 0, s).unwrap();
                return filled;
            }
            Ok(Lookup::Miss(s)) => {
                data[s].store(tag.raw() + 1, Ordering::SeqCst);
                let job = pc.pending_at(s).unwrap().expect("our claim");
                assert_eq!(job.tag, tag);
                assert!(pc.publish(&job).unwrap());
                filled = true;
            }
            // A window full of claims and pins: try again.
            Err(Error::Busy) => thread::yield_now(),
            Err(e) => panic!("{e:?}"),
        }
    }
}

fn check_quiet(pc: &PageCache<'_, [AtomicU64]>) {
    let mut tags = Vec::new();
    for s in 0..pc.slots() {
        let x = pc.slot(s).unwrap();
        assert!(x.state == FREE || x.state == VALID, "slot {s}: {x:?}");
        assert_ne!(x.state, PENDING);
        assert_ne!(x.state, CLAIMED);
        assert_eq!(x.refs, 0, "slot {s}");
        if x.state == VALID {
            tags.push(x.tag);
        }
    }
    let n = tags.len();
    tags.sort();
    tags.dedup();
    assert_eq!(tags.len(), n, "a page cached twice");
}

#[test]
fn pages_that_fit_are_filled_once_by_concurrent_readers() {
    const SLOTS: usize = 256;
    const THREADS: u8 = 4;
    let w = words(PageCache::<[AtomicU64]>::words_needed(SLOTS).unwrap());
    let data = words(SLOTS);
    PageCache::format(&w[..], 0, SLOTS).unwrap();
    let fills = words(32);
    let hs: Vec<_> = (0..THREADS)
        .map(|o| {
            let (w, data, fills) = (w.clone(), data.clone(), fills.clone());
            thread::spawn(move || {
                let pc = PageCache::attach(&w[..], 0, SLOTS).unwrap();
                for i in 0..4000u64 {
                    let p = (i * 7 + u64::from(o) * 3) % 32;
                    if read(&pc, &data, Tag::new(1, p).unwrap(), o) {
                        fills[p as usize].fetch_add(1, Ordering::SeqCst);
                    }
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let pc = PageCache::attach(&w[..], 0, SLOTS).unwrap();
    for (p, f) in fills.iter().enumerate() {
        assert_eq!(f.load(Ordering::SeqCst), 1, "page {p}");
    }
    check_quiet(&pc);
}

#[test]
fn eviction_churn_keeps_pinned_data_and_a_consistent_cache() {
    const SLOTS: usize = 64;
    const THREADS: u8 = 4;
    let w = words(PageCache::<[AtomicU64]>::words_needed(SLOTS).unwrap());
    let data = words(SLOTS);
    PageCache::format(&w[..], 0, SLOTS).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let sweeper = {
        let (w, stop) = (w.clone(), stop.clone());
        thread::spawn(move || {
            let pc = PageCache::attach(&w[..], 0, SLOTS).unwrap();
            let mut won = 0u64;
            // Sweeps at least once, however the threads were scheduled.
            loop {
                won += u64::from(pc.sweep().unwrap());
                if stop.load(Ordering::SeqCst) {
                    return won;
                }
                thread::yield_now();
            }
        })
    };
    let hs: Vec<_> = (0..THREADS)
        .map(|o| {
            let (w, data) = (w.clone(), data.clone());
            thread::spawn(move || {
                let pc = PageCache::attach(&w[..], 0, SLOTS).unwrap();
                let mut rng = 0x1234_5678u64 + u64::from(o);
                let mut fills = 0;
                for _ in 0..5000 {
                    rng = daxcache::hash64(rng);
                    // Skewed: half the reads on 16 hot pages, half on 300.
                    let p = if rng & 1 == 0 { rng % 16 } else { rng % 300 };
                    fills += u64::from(read(&pc, &data, Tag::new(2, p).unwrap(), o));
                }
                fills
            })
        })
        .collect();
    let fills: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
    stop.store(true, Ordering::SeqCst);
    assert!(sweeper.join().unwrap() > 0);
    // The cache holds 64 of 300 pages: it evicted, and hits happened too.
    assert!(fills > 300 && fills < 20_000, "{fills} fills");
    check_quiet(&PageCache::attach(&w[..], 0, SLOTS).unwrap());
}

#[test]
fn concurrent_page_writers_lose_no_update_and_readers_never_see_a_torn_page() {
    const BUCKETS: usize = 64;
    const POOL: usize = 16 * PAGE_WORDS;
    const THREADS: usize = 4;
    const ROUNDS: u64 = 300;
    let w = words(Overlay::<[AtomicU64]>::words_needed(BUCKETS, POOL).unwrap());
    Overlay::format(&w[..], 0, BUCKETS, POOL).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (w, stop) = (w.clone(), stop.clone());
        thread::spawn(move || {
            let ov = Overlay::attach(&w[..], 0, BUCKETS, POOL).unwrap();
            let mut buf = vec![0u64; PAGE_WORDS];
            let mut whole = 0u64;
            // Reads at least once after the writers finished, however the
            // threads were scheduled.
            let mut last = false;
            while !last {
                last = stop.load(Ordering::SeqCst);
                if ov.read_page(1, 0, &mut buf).unwrap() {
                    // Every version of the page is consistent: the last
                    // word is the sum of the others.
                    let sum: u64 = buf[..PAGE_WORDS - 1].iter().sum();
                    assert_eq!(buf[PAGE_WORDS - 1], sum, "torn page");
                    whole += 1;
                }
                thread::yield_now();
            }
            whole
        })
    };
    let hs: Vec<_> = (0..THREADS)
        .map(|t| {
            let w = w.clone();
            thread::spawn(move || {
                let ov = Overlay::attach(&w[..], 0, BUCKETS, POOL).unwrap();
                let mut buf = vec![0u64; PAGE_WORDS];
                for _ in 0..ROUNDS {
                    ov.update_page(1, 0, &mut buf, &mut |b| b.fill(0), &mut |b| {
                        // Each writer bumps its own word (and every other
                        // word of its stripe), then the checksum.
                        for x in b[..PAGE_WORDS - 1].iter_mut().skip(t).step_by(THREADS) {
                            *x += 1;
                        }
                        b[PAGE_WORDS - 1] = b[..PAGE_WORDS - 1].iter().sum();
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    stop.store(true, Ordering::SeqCst);
    assert!(reader.join().unwrap() > 0);
    let ov = Overlay::attach(&w[..], 0, BUCKETS, POOL).unwrap();
    let mut buf = vec![0u64; PAGE_WORDS];
    assert!(ov.read_page(1, 0, &mut buf).unwrap());
    for (i, x) in buf[..PAGE_WORDS - 1].iter().enumerate() {
        assert_eq!(*x, ROUNDS, "word {i}: an update was lost");
    }
    // Replaced pages were recycled: the pool never ran out (16 pages for
    // 1,200 writes).
    assert!(ov.pool_used().unwrap() <= POOL as u64);
}

#[test]
fn an_append_storm_loses_no_append_and_never_shows_a_size_without_data() {
    const BUCKETS: usize = 256;
    const POOL: usize = 64 * PAGE_WORDS;
    const THREADS: u64 = 4;
    const APPENDS: u64 = 200;
    const LEN: u64 = 8;
    let w = words(Overlay::<[AtomicU64]>::words_needed(BUCKETS, POOL).unwrap());
    let ov = Overlay::format(&w[..], 0, BUCKETS, POOL).unwrap();
    ov.inode(3, 0o644, 0).unwrap();
    // The file's bytes are words here: word k of the file is at page
    // k / 511 (the last word of a page is unused), written with k + 1.
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (w, stop) = (w.clone(), stop.clone());
        thread::spawn(move || {
            let ov = Overlay::attach(&w[..], 0, BUCKETS, POOL).unwrap();
            let mut buf = vec![0u64; PAGE_WORDS];
            let mut last = 0;
            while !stop.load(Ordering::SeqCst) {
                let size = ov.size(3).unwrap().unwrap();
                assert!(size >= last, "size went back");
                last = size;
                if size > 0 {
                    // The last word under the size is written.
                    let k = size - 1;
                    assert!(ov.read_page(3, k / 511, &mut buf).unwrap());
                    assert_eq!(
                        buf[(k % 511) as usize],
                        k + 1,
                        "size {size} without its data"
                    );
                }
                thread::yield_now();
            }
        })
    };
    let hs: Vec<_> = (0..THREADS)
        .map(|_| {
            let w = w.clone();
            thread::spawn(move || {
                let ov = Overlay::attach(&w[..], 0, BUCKETS, POOL).unwrap();
                let mut buf = vec![0u64; PAGE_WORDS];
                for _ in 0..APPENDS {
                    let start = ov.reserve_append(3, LEN).unwrap();
                    for k in start..start + LEN {
                        ov.update_page(3, k / 511, &mut buf, &mut |b| b.fill(0), &mut |b| {
                            b[(k % 511) as usize] = k + 1
                        })
                        .unwrap();
                    }
                    ov.publish_append(3, start, LEN, &mut waiter()).unwrap();
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    stop.store(true, Ordering::SeqCst);
    reader.join().unwrap();
    let total = THREADS * APPENDS * LEN;
    assert_eq!(ov.size(3).unwrap(), Some(total));
    let mut buf = vec![0u64; PAGE_WORDS];
    for k in 0..total {
        assert!(ov.read_page(3, k / 511, &mut buf).unwrap());
        assert_eq!(buf[(k % 511) as usize], k + 1, "word {k}");
    }
}
