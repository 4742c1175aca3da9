use super::lookup::Phase;
use super::*;
use core::sync::atomic::AtomicU64;

fn area(slots: usize) -> Vec<AtomicU64> {
    let n = PageCache::<[AtomicU64]>::words_needed(slots).unwrap();
    (0..n).map(|_| AtomicU64::new(0)).collect()
}

fn spin() -> crate::SpinWaiter {
    crate::SpinWaiter { left: 1000 }
}

fn fill(pc: &PageCache<'_, [AtomicU64]>, slot: usize) {
    let job = pc.pending_at(slot).unwrap().expect("pending");
    assert!(pc.publish(&job).unwrap());
}

#[test]
fn slot_word_packs_state_refcount_tag_owner() {
    let t = Tag::new(0xFFFF_FFFF, 0xF_FFFE).unwrap();
    let w = make(PENDING, t, 63);
    let s = decode(w).unwrap();
    assert_eq!((s.state, s.refs, s.tag, s.owner), (PENDING, 0, t, 63));
    let v = make(VALID, t, 0) + 3 * REF_INC;
    assert_eq!(decode(v).unwrap().refs, 3);
    assert_eq!(decode(v).unwrap().tag, t);
    assert!(Tag::new(1 << 32, 0).is_err());
    // The retired slots' tag is no page's.
    assert_eq!(Tag::new(0xFFFF_FFFF, 0xF_FFFF), Err(Error::TooBig));
    assert!(Tag::new(0xFFFF_FFFF, 0xF_FFFE).is_ok());
    assert!(Tag::new(1, 1 << 20).is_err());
    // Values nobody writes.
    assert_eq!(decode(5 << TAG_SHIFT), Err(Error::Corrupt));
    assert_eq!(decode(make(VALID, t, 1)), Err(Error::Corrupt));
    assert_eq!(decode(make(PENDING, t, 1) | REF_INC), Err(Error::Corrupt));
}

#[test]
fn page_n_of_every_file_does_not_share_one_window() {
    // With DaxFS's home (`tag & mask`) page 0 of every file starts at
    // slot 0: 64 files' first pages would fight over 8 slots.
    let a = area(1024);
    let pc = PageCache::format(&a[..], 0, 1024).unwrap();
    let mut homes: Vec<usize> = (1..=64)
        .map(|ino| pc.home(Tag::new(ino, 0).unwrap()))
        .collect();
    homes.sort();
    homes.dedup();
    assert!(homes.len() > 48, "{} homes", homes.len());
    for ino in 1..=64 {
        let Lookup::Miss(s) = pc
            .lookup(Tag::new(ino, 0).unwrap(), 0, 0, &mut spin())
            .unwrap()
        else {
            panic!()
        };
        fill(&pc, s);
    }
    // No eviction was needed: all 64 first pages are cached.
    let valid = (0..1024)
        .filter(|&s| pc.slot(s).unwrap().state == VALID)
        .count();
    assert_eq!(valid, 64);
}

#[test]
fn header_is_checked_on_attach() {
    let a = area(64);
    assert_eq!(
        PageCache::attach(&a[..], 0, 64).err(),
        Some(Error::BadHeader)
    );
    PageCache::format(&a[..], 0, 64).unwrap();
    assert!(PageCache::attach(&a[..], 0, 64).is_ok());
    assert_eq!(
        PageCache::attach(&a[..], 0, 32).err(),
        Some(Error::BadHeader)
    );
    assert_eq!(
        PageCache::attach(&a[..], 1, 64).err(),
        Some(Error::OutOfBounds)
    );
    assert_eq!(
        PageCache::format(&a[..], 0, 48).err(),
        Some(Error::BadHeader)
    );
}

#[test]
fn miss_fill_hit_unpin() {
    let a = area(64);
    let pc = PageCache::format(&a[..], 0, 64).unwrap();
    let t = Tag::new(7, 3).unwrap();
    let Lookup::Miss(s) = pc.lookup(t, 1, 0, &mut spin()).unwrap() else {
        panic!("expected a miss")
    };
    assert_eq!(pc.slot(s).unwrap().state, PENDING);
    assert_eq!(pc.slot(s).unwrap().owner, 1);
    // Another participant waits, and times out with the slot and owner.
    assert_eq!(
        pc.lookup(t, 2, 0, &mut crate::SpinWaiter { left: 3 }),
        Err(Error::Timeout { slot: s, owner: 1 })
    );
    assert_eq!(pc.fills(), Ok(0));
    fill(&pc, s);
    assert_eq!(pc.count_fill(), Ok(1));
    assert_eq!(pc.fills(), Ok(1));
    assert_eq!(pc.lookup(t, 2, 0, &mut spin()), Ok(Lookup::Hit(s)));
    assert_eq!(pc.lookup(t, 1, 0, &mut spin()), Ok(Lookup::Hit(s)));
    assert_eq!(pc.slot(s).unwrap().refs, 2);
    assert!(pc.referenced(s).unwrap());
    pc.unpin(2, 0, s).unwrap();
    pc.unpin(1, 0, s).unwrap();
    assert_eq!(pc.unpin(1, 0, s), Err(Error::NotPinned));
    assert_eq!(pc.slot(s).unwrap().refs, 0);
}

#[test]
fn invalidate_frees_an_unpinned_copy_and_leaves_pins_and_claims() {
    let a = area(64);
    let pc = PageCache::format(&a[..], 0, 64).unwrap();
    let t = Tag::new(4, 2).unwrap();
    let none = Invalidated::default();
    assert_eq!(pc.invalidate(t), Ok(none));
    let Lookup::Miss(s) = pc.lookup(t, 1, 0, &mut spin()).unwrap() else {
        panic!()
    };
    // A claim in flight stays: its fill comes after the write.
    assert_eq!(pc.invalidate(t), Ok(none));
    fill(&pc, s);
    // Another tag is left alone.
    assert_eq!(pc.invalidate(Tag::new(4, 3).unwrap()), Ok(none));
    let freed = Invalidated {
        freed: 1,
        retired: 0,
    };
    assert_eq!(pc.invalidate(t), Ok(freed));
    assert_eq!(pc.slot(s).unwrap().state, FREE);
    // The next reader misses and claims the page again.
    assert!(matches!(
        pc.lookup(t, 2, 0, &mut spin()),
        Ok(Lookup::Miss(_))
    ));
    // By predicate: every page of inode 5 from page 1 on.
    let mut slots = Vec::new();
    for p in 0..4 {
        slots.push(load_and_release(&pc, Tag::new(5, p).unwrap()));
    }
    let got = pc.invalidate_where(|t| t.ino() == 5 && t.pgoff() >= 1);
    assert_eq!(
        got,
        Ok(Invalidated {
            freed: 3,
            retired: 0
        })
    );
    assert_eq!(pc.slot(slots[0]).unwrap().state, VALID);
    for s in &slots[1..] {
        assert_eq!(pc.slot(*s).unwrap().state, FREE);
    }
}

#[test]
fn drop_copy_frees_an_unpinned_copy_of_the_tag_only() {
    let a = area(64);
    let pc = PageCache::format(&a[..], 0, 64).unwrap();
    let t = Tag::new(6, 1).unwrap();
    let Lookup::Miss(s) = pc.lookup(t, 1, 0, &mut spin()).unwrap() else {
        panic!()
    };
    // A claim in flight is not a copy to drop.
    assert_eq!(pc.drop_copy(s, t), Ok(Dropped::Gone));
    fill(&pc, s);
    // Pinned by another reader: kept, still valid.
    assert_eq!(pc.lookup(t, 2, 0, &mut spin()), Ok(Lookup::Hit(s)));
    assert_eq!(pc.drop_copy(s, t), Ok(Dropped::Pinned));
    assert_eq!(pc.slot(s).unwrap().state, VALID);
    pc.unpin(2, 0, s).unwrap();
    // Another tag's copy in the slot is left alone.
    assert_eq!(pc.drop_copy(s, Tag::new(6, 2).unwrap()), Ok(Dropped::Gone));
    assert_eq!(pc.drop_copy(s, t), Ok(Dropped::Freed));
    assert_eq!(pc.slot(s).unwrap().state, FREE);
    assert_eq!(pc.drop_copy(s, t), Ok(Dropped::Gone));
    assert_eq!(pc.drop_copy(64, t), Err(Error::OutOfBounds));
}

#[test]
fn a_failed_fill_frees_the_slot_and_waiters_claim_again() {
    let a = area(64);
    let pc = PageCache::format(&a[..], 0, 64).unwrap();
    let t = Tag::new(1, 1).unwrap();
    let Lookup::Miss(s) = pc.lookup(t, 0, 0, &mut spin()).unwrap() else {
        panic!()
    };
    let job = pc.pending_at(s).unwrap().unwrap();
    assert!(pc.abort_fill(&job).unwrap());
    assert_eq!(pc.slot(s).unwrap().state, FREE);
    assert!(matches!(
        pc.lookup(t, 1, 0, &mut spin()),
        Ok(Lookup::Miss(_))
    ));
    // A stale job (its slot changed) does not publish.
    assert!(!pc.publish(&job).unwrap());
}

#[test]
fn the_pin_limit_waits_instead_of_overflowing() {
    let a = area(64);
    let pc = PageCache::format(&a[..], 0, 64).unwrap();
    let t = Tag::new(1, 1).unwrap();
    let Lookup::Miss(s) = pc.lookup(t, 0, 0, &mut spin()).unwrap() else {
        panic!()
    };
    fill(&pc, s);
    for rec in 0..15 {
        assert_eq!(pc.lookup(t, 0, rec, &mut spin()), Ok(Lookup::Hit(s)));
    }
    assert_eq!(pc.slot(s).unwrap().refs, 15);
    assert!(pc
        .lookup(t, 1, 0, &mut crate::SpinWaiter { left: 5 })
        .is_err());
    assert_eq!(pc.slot(s).unwrap().refs, 15);
    pc.unpin(0, 3, s).unwrap();
    assert_eq!(pc.lookup(t, 1, 0, &mut spin()), Ok(Lookup::Hit(s)));
}

/// Tags whose home is `home`, found by search (the hash is fixed).
fn tags_with_home(pc: &PageCache<'_, [AtomicU64]>, home: usize, n: usize) -> Vec<Tag> {
    (0..)
        .map(|p| Tag::new(9, p).unwrap())
        .filter(|t| pc.home(*t) == home)
        .take(n)
        .collect()
}

fn cached(pc: &PageCache<'_, [AtomicU64]>, t: Tag) -> Option<usize> {
    (0..pc.slots()).find(|&s| {
        let x = pc.slot(s).unwrap();
        x.state == VALID && x.tag == t
    })
}

fn load_and_release(pc: &PageCache<'_, [AtomicU64]>, t: Tag) -> usize {
    let s = match pc.lookup(t, 0, 0, &mut spin()).unwrap() {
        Lookup::Miss(s) => {
            fill(pc, s);
            let Lookup::Hit(h) = pc.lookup(t, 0, 0, &mut spin()).unwrap() else {
                panic!()
            };
            assert_eq!(h, s);
            s
        }
        Lookup::Hit(s) => s,
    };
    pc.unpin(0, 0, s).unwrap();
    s
}

#[test]
fn mh_clock_evicts_the_cold_slot_of_the_window() {
    let a = area(64);
    let pc = PageCache::format(&a[..], 0, 64).unwrap();
    let tags = tags_with_home(&pc, 5, 9);
    let slots: Vec<usize> = tags[..8]
        .iter()
        .map(|t| load_and_release(&pc, *t))
        .collect();
    // The window 5..13 is full; all are referenced (publish sets the bit).
    for (i, s) in slots.iter().enumerate() {
        assert_eq!(*s, 5 + i);
        assert!(pc.referenced(*s).unwrap());
    }
    // Cool one slot: the sweep-like clear of its bit makes it the victim.
    a[pc.aux_word(9).unwrap()].fetch_and(!AUX_REF, core::sync::atomic::Ordering::SeqCst);
    let s = load_and_release(&pc, tags[8]);
    assert_eq!(s, 9);
    assert_eq!(cached(&pc, tags[4]), None);
    for t in [0, 1, 2, 3, 5, 6, 7] {
        assert!(cached(&pc, tags[t]).is_some());
    }
}

#[test]
fn mh_clock_all_hot_clears_and_rescans_and_skips_pins() {
    let a = area(64);
    let pc = PageCache::format(&a[..], 0, 64).unwrap();
    let tags = tags_with_home(&pc, 60, 9);
    for t in &tags[..8] {
        load_and_release(&pc, *t);
    }
    // Pin the first slot of the window (60): it must survive.
    assert_eq!(pc.lookup(tags[0], 3, 0, &mut spin()), Ok(Lookup::Hit(60)));
    let s = load_and_release(&pc, tags[8]);
    // All hot: bits cleared, the rescan takes the first cold unpinned
    // slot, which is the window's second (61), the window wrapping.
    assert_eq!(s, 61);
    assert!(cached(&pc, tags[0]).is_some());
    for i in 2..8 {
        let idx = (60 + i) & 63;
        assert!(!pc.referenced(idx).unwrap(), "slot {idx}");
    }
}

#[test]
fn a_window_of_pins_and_claims_blocks_then_gives_up() {
    let a = area(8);
    let pc = PageCache::format(&a[..], 0, 8).unwrap();
    let tags = tags_with_home(&pc, 0, 9);
    for (r, t) in tags[..8].iter().enumerate() {
        let Lookup::Miss(_) = pc.lookup(*t, 1, r as u8, &mut spin()).unwrap() else {
            panic!()
        };
    }
    // Eight PENDING slots: nothing to evict.
    assert!(pc
        .lookup(tags[8], 2, 0, &mut crate::SpinWaiter { left: 20 })
        .is_err());
}

#[test]
fn sweep_advances_the_hand_by_cas_and_clears_bits() {
    let a = area(128);
    let pc = PageCache::format(&a[..], 0, 128).unwrap();
    let mut filled = Vec::new();
    for p in 0..40 {
        filled.push(load_and_release(&pc, Tag::new(2, p).unwrap()));
    }
    assert!(pc.sweep().unwrap());
    assert_eq!(a[2].load(core::sync::atomic::Ordering::SeqCst), 64);
    for s in &filled {
        assert_eq!(pc.referenced(*s).unwrap(), *s >= 64, "slot {s}");
    }
    assert!(pc.sweep().unwrap());
    assert_eq!(a[2].load(core::sync::atomic::Ordering::SeqCst), 0);
    for s in &filled {
        assert!(!pc.referenced(*s).unwrap());
    }
    // An untrusted hand is reduced to a slot.
    a[2].store(u64::MAX, core::sync::atomic::Ordering::SeqCst);
    assert!(pc.sweep().unwrap());
    assert_eq!(a[2].load(core::sync::atomic::Ordering::SeqCst), 63);
}

#[test]
fn reclaim_frees_a_failed_owners_claims_and_pins() {
    let a = area(64);
    let pc = PageCache::format(&a[..], 0, 64).unwrap();
    let t1 = Tag::new(1, 1).unwrap();
    let t2 = Tag::new(1, 2).unwrap();
    let t3 = Tag::new(1, 3).unwrap();
    // Owner 4 claims t1 (PENDING) and dies; owner 5 waits in vain.
    let Lookup::Miss(s1) = pc.lookup(t1, 4, 0, &mut spin()).unwrap() else {
        panic!()
    };
    // Owner 4 pins t2 twice and dies holding the pins.
    let s2 = load_and_release(&pc, t2);
    assert_eq!(pc.lookup(t2, 4, 1, &mut spin()), Ok(Lookup::Hit(s2)));
    assert_eq!(pc.lookup(t2, 4, 2, &mut spin()), Ok(Lookup::Hit(s2)));
    assert_eq!(pc.lookup(t2, 6, 0, &mut spin()), Ok(Lookup::Hit(s2)));
    // And is caught between intent and pin CAS on t3.
    let s3 = load_and_release(&pc, t3);
    let mut op = LookupOp::new(&pc, t3, 4, 3).unwrap();
    while !matches!(op.phase, Phase::Pin { .. }) {
        assert_eq!(op.step(&pc).unwrap(), Step::Again);
    }
    assert!(matches!(
        pc.lookup(t1, 5, 0, &mut crate::SpinWaiter { left: 3 }),
        Err(Error::Timeout { owner: 4, .. })
    ));
    let r = pc.reclaim_owner(4).unwrap();
    assert_eq!(
        r,
        Reclaimed {
            claims: 1,
            pins: 2,
            uncertain: 1
        }
    );
    assert_eq!(pc.slot(s1).unwrap().state, FREE);
    assert_eq!(pc.slot(s2).unwrap().refs, 1);
    assert_eq!(pc.slot(s3).unwrap().refs, 0);
    // The waiter now claims the page itself.
    assert!(matches!(
        pc.lookup(t1, 5, 0, &mut spin()),
        Ok(Lookup::Miss(_))
    ));
    // Reclaim is idempotent.
    assert_eq!(pc.reclaim_owner(4).unwrap(), Reclaimed::default());
    pc.unpin(6, 0, s2).unwrap();
    assert_eq!(pc.slot(s2).unwrap().refs, 0);
}

#[test]
fn a_claim_that_fails_validation_gives_its_slot_back() {
    let a = area(64);
    let pc = PageCache::format(&a[..], 0, 64).unwrap();
    let t = Tag::new(3, 3).unwrap();
    // A scans and claims, but another claim of its home validates first.
    let mut op = LookupOp::new(&pc, t, 1, 0).unwrap();
    while !matches!(op.phase, Phase::Validate { .. }) {
        op.step(&pc).unwrap();
    }
    let Phase::Validate { idx, .. } = op.phase else {
        unreachable!()
    };
    assert_eq!(pc.slot(idx).unwrap().state, CLAIMED);
    a[pc.aux_word(pc.home(t)).unwrap()]
        .fetch_add(AUX_SEQ_INC, core::sync::atomic::Ordering::SeqCst);
    // Undo, restart, and this time the claim validates.
    let got = loop {
        if let Step::Done(l) = op.step(&pc).unwrap() {
            break l;
        }
    };
    assert_eq!(got, Lookup::Miss(idx));
    assert_eq!(op.restarts, 1);
}

#[test]
fn corrupt_slot_words_are_errors_not_panics() {
    let a = area(64);
    let pc = PageCache::format(&a[..], 0, 64).unwrap();
    let t = Tag::new(1, 1).unwrap();
    let home = pc.home(t);
    a[pc.slot_word(home).unwrap()].store(u64::MAX, core::sync::atomic::Ordering::SeqCst);
    assert_eq!(pc.lookup(t, 0, 0, &mut spin()), Err(Error::Corrupt));
    assert_eq!(pc.unpin(0, 0, home), Err(Error::NotPinned));
    assert_eq!(pc.slot(64), Err(Error::OutOfBounds));
    // A pin record naming a slot out of range.
    a[pc.rec_word(7, 0).unwrap()].store(
        (REC_HELD << REC_KIND_SHIFT) | 1000,
        core::sync::atomic::Ordering::SeqCst,
    );
    a[pc.slot_word(home).unwrap()].store(0, core::sync::atomic::Ordering::SeqCst);
    assert_eq!(pc.reclaim_owner(7), Err(Error::Corrupt));
    assert_eq!(pc.reclaim_owner(64), Err(Error::OutOfBounds));
}

#[test]
fn invalidating_a_pinned_copy_retires_it_until_its_last_unpin() {
    let a = area(64);
    let pc = PageCache::format(&a[..], 0, 64).unwrap();
    let t = Tag::new(4, 2).unwrap();
    let s = load_and_release(&pc, t);
    // Two readers are copying the old page out.
    assert_eq!(pc.lookup(t, 2, 0, &mut spin()), Ok(Lookup::Hit(s)));
    assert_eq!(pc.lookup(t, 3, 0, &mut spin()), Ok(Lookup::Hit(s)));
    let retired = Invalidated {
        freed: 0,
        retired: 1,
    };
    // The writer does not wait for them.
    assert_eq!(pc.invalidate(t), Ok(retired));
    let w = pc.slot(s).unwrap();
    assert_eq!((w.state, w.refs), (VALID, 2));
    assert!(w.tag.is_retired());
    // No lookup finds the stale copy: the next reader misses and the page
    // is filled again into another slot.
    let Ok(Lookup::Miss(s2)) = pc.lookup(t, 4, 0, &mut spin()) else {
        panic!("a retired copy was found")
    };
    assert_ne!(s2, s);
    fill(&pc, s2);
    assert_eq!(pc.lookup(t, 4, 0, &mut spin()), Ok(Lookup::Hit(s2)));
    pc.unpin(4, 0, s2).unwrap();
    // The retired copy stays until its last reader is done, then is FREE.
    assert_eq!(
        pc.invalidate(t),
        Ok(Invalidated {
            freed: 1,
            retired: 0
        })
    );
    pc.unpin(2, 0, s).unwrap();
    assert_eq!(pc.slot(s).unwrap().refs, 1);
    assert_eq!(pc.slot(s).unwrap().state, VALID);
    pc.unpin(3, 0, s).unwrap();
    assert_eq!(pc.slot(s).unwrap().state, FREE);
}

#[test]
fn a_failed_readers_pin_of_a_retired_copy_is_freed_by_its_reclaim() {
    let a = area(64);
    let pc = PageCache::format(&a[..], 0, 64).unwrap();
    let t = Tag::new(6, 0).unwrap();
    let s = load_and_release(&pc, t);
    // Owner 9 pins the page and fails holding the pin.
    assert_eq!(pc.lookup(t, 9, 5, &mut spin()), Ok(Lookup::Hit(s)));
    // A write retires the copy at once: readers fill the new page.
    assert_eq!(pc.invalidate(t).unwrap().retired, 1);
    assert!(matches!(
        pc.lookup(t, 1, 0, &mut spin()),
        Ok(Lookup::Miss(_))
    ));
    // The reclaim of owner 9 frees the retired slot.
    assert_eq!(pc.reclaim_owner(9).unwrap().pins, 1);
    assert_eq!(pc.slot(s).unwrap().state, FREE);
}

/// Words whose `evict_hand` another participant advances by one window
/// right before our CAS on it (once).
struct RacedHand<'a> {
    inner: &'a [AtomicU64],
    raced: core::cell::Cell<bool>,
}

impl Words for RacedHand<'_> {
    fn len(&self) -> usize {
        self.inner.len()
    }
    fn load(&self, i: usize) -> Result<u64, Error> {
        self.inner.load(i)
    }
    fn store(&self, i: usize, v: u64) -> Result<(), Error> {
        self.inner.store(i, v)
    }
    fn cas(&self, i: usize, old: u64, new: u64) -> Result<Result<u64, u64>, Error> {
        if i == HAND_WORD && !self.raced.replace(true) {
            self.inner.store(i, old + SWEEP_BATCH as u64)?;
        }
        self.inner.cas(i, old, new)
    }
    fn fetch_or(&self, i: usize, bits: u64) -> Result<u64, Error> {
        self.inner.fetch_or(i, bits)
    }
    fn fetch_and(&self, i: usize, bits: u64) -> Result<u64, Error> {
        self.inner.fetch_and(i, bits)
    }
}

#[test]
fn a_sweep_that_loses_the_hand_race_clears_nothing() {
    let a = area(128);
    let pc = PageCache::format(&a[..], 0, 128).unwrap();
    let filled: Vec<usize> = (0..40)
        .map(|p| load_and_release(&pc, Tag::new(3, p).unwrap()))
        .collect();
    let raced = RacedHand {
        inner: &a[..],
        raced: core::cell::Cell::new(false),
    };
    let pc2 = PageCache::attach(&raced, 0, 128).unwrap();
    // Another participant won the window 0..64 (its bits are its to
    // clear): this sweep skips it and clears nothing.
    assert_eq!(pc2.sweep(), Ok(false));
    assert_eq!(pc2.evict_hand(), Ok(64));
    for s in &filled {
        assert!(pc.referenced(*s).unwrap(), "slot {s}");
    }
    // The next sweep wins the window 64..128.
    assert_eq!(pc2.sweep(), Ok(true));
    assert_eq!(pc2.evict_hand(), Ok(0));
    for s in &filled {
        assert_eq!(pc.referenced(*s).unwrap(), *s < 64, "slot {s}");
    }
}

#[test]
fn after_a_sweep_the_pages_not_read_again_are_evicted_first() {
    let a = area(64);
    let pc = PageCache::format(&a[..], 0, 64).unwrap();
    let tags = tags_with_home(&pc, 20, 9);
    let slots: Vec<usize> = tags[..8]
        .iter()
        .map(|t| load_and_release(&pc, *t))
        .collect();
    // One sweep covers the whole cache: every reference bit is cleared.
    assert!(pc.sweep().unwrap());
    for s in &slots {
        assert!(!pc.referenced(*s).unwrap());
    }
    // Every page but tags[5] is read again (a hit sets its bit back).
    for (i, t) in tags[..8].iter().enumerate() {
        if i != 5 {
            assert_eq!(cached(&pc, *t), Some(slots[i]));
            let Ok(Lookup::Hit(s)) = pc.lookup(*t, 1, 0, &mut spin()) else {
                panic!()
            };
            pc.unpin(1, 0, s).unwrap();
        }
    }
    // A new page of the full window evicts the one not read again, and
    // no bit had to be cleared to find it.
    let s = load_and_release(&pc, tags[8]);
    assert_eq!(s, slots[5]);
    assert_eq!(cached(&pc, tags[5]), None);
    for (i, slot) in slots.iter().enumerate() {
        if i != 5 {
            assert!(pc.referenced(*slot).unwrap(), "slot {slot}");
        }
    }
}
