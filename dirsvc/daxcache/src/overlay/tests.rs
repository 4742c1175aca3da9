use super::*;
use core::sync::atomic::{AtomicU64, Ordering};

fn area(buckets: usize, pool: usize) -> Vec<AtomicU64> {
    let n = Overlay::<[AtomicU64]>::words_needed(buckets, pool).unwrap();
    (0..n).map(|_| AtomicU64::new(0)).collect()
}

fn page(x: u64) -> Vec<u64> {
    vec![x; PAGE_WORDS]
}

#[test]
fn keys_are_daxfs_keys() {
    assert_eq!(Key::data(3, 5).unwrap().raw(), (3 << 20) | 5);
    assert_eq!(Key::inode(3).unwrap().raw(), (3 << 20) | 0xF_FFFF);
    assert!(Key::data(3, MAX_PGOFF + 1).is_err());
    assert!(Key::data(MAX_INO + 1, 0).is_err());
}

#[test]
fn header_is_checked() {
    let a = area(16, 4096);
    assert!(Overlay::attach(&a[..], 0, 16, 4096).is_err());
    Overlay::format(&a[..], 0, 16, 4096).unwrap();
    assert!(Overlay::attach(&a[..], 0, 16, 4096).is_ok());
    assert_eq!(
        Overlay::attach(&a[..], 0, 16, 2048).err(),
        Some(Error::BadHeader)
    );
    assert_eq!(
        Overlay::attach(&a[..], 0, 32, 4096).err(),
        Some(Error::OutOfBounds)
    );
}

#[test]
fn write_read_rewrite_recycles_the_old_page() {
    let a = area(16, 8 * PAGE_WORDS);
    let ov = Overlay::format(&a[..], 0, 16, 8 * PAGE_WORDS).unwrap();
    let mut buf = page(0);
    assert!(!ov.read_page(1, 0, &mut buf).unwrap());
    ov.update_page(1, 0, &mut buf, &mut |b| b.fill(7), &mut |b| b[3] = 9)
        .unwrap();
    let mut out = page(0);
    assert!(ov.read_page(1, 0, &mut out).unwrap());
    assert_eq!((out[0], out[3], out[511]), (7, 9, 7));
    let used = ov.pool_used().unwrap();
    // A rewrite takes a new page, then recycles the old one: the next
    // write reuses it instead of bumping.
    ov.update_page(1, 0, &mut buf, &mut |_| panic!("present"), &mut |b| {
        b[4] = 1
    })
    .unwrap();
    assert_eq!(ov.pool_used().unwrap(), used + PAGE_WORDS as u64);
    ov.update_page(1, 1, &mut buf, &mut |b| b.fill(0), &mut |b| b[0] = 1)
        .unwrap();
    assert_eq!(ov.pool_used().unwrap(), used + PAGE_WORDS as u64);
    assert!(ov.read_page(1, 0, &mut out).unwrap());
    assert_eq!((out[0], out[3], out[4]), (7, 9, 1));
    let (_, v) = ov.lookup(Key::data(1, 0).unwrap()).unwrap().unwrap();
    assert_eq!(v.version, 1);
}

#[test]
fn an_unpublished_value_reads_as_absent_and_any_inserter_completes_it() {
    let a = area(16, 4 * PAGE_WORDS);
    let ov = Overlay::format(&a[..], 0, 16, 4 * PAGE_WORDS).unwrap();
    let key = Key::data(2, 2).unwrap();
    // An inserter claims the key, then fails before publishing.
    let mut op = InsertOp::new(&ov, key, 0).unwrap();
    op.step(&ov).unwrap();
    op.step(&ov).unwrap();
    assert!(matches!(op.phase, ops::Phase::Publish { .. }));
    assert_eq!(ov.lookup(key).unwrap(), None);
    let mut buf = page(0);
    assert!(!ov.read_page(2, 2, &mut buf).unwrap());
    // Another writer of the page publishes its own.
    ov.update_page(2, 2, &mut buf, &mut |b| b.fill(0), &mut |b| b[0] = 5)
        .unwrap();
    assert!(ov.read_page(2, 2, &mut buf).unwrap());
    assert_eq!(buf[0], 5);
    // The stale inserter then finds the key taken.
    assert!(matches!(
        op.step(&ov).unwrap(),
        Step::Done(Inserted::Existing { .. })
    ));
}

#[test]
fn full_table_and_pool_are_errors() {
    let a = area(2, 2 * PAGE_WORDS);
    let ov = Overlay::format(&a[..], 0, 2, 2 * PAGE_WORDS).unwrap();
    let mut buf = page(0);
    ov.update_page(1, 0, &mut buf, &mut |b| b.fill(0), &mut |_| {})
        .unwrap();
    ov.update_page(1, 1, &mut buf, &mut |b| b.fill(0), &mut |_| {})
        .unwrap();
    assert_eq!(
        ov.update_page(1, 2, &mut buf, &mut |b| b.fill(0), &mut |_| {}),
        Err(Error::NoSpace)
    );
}

#[test]
fn sizes_grow_by_cas_and_appends_publish_in_order() {
    let a = area(16, 64);
    let ov = Overlay::format(&a[..], 0, 16, 64).unwrap();
    assert_eq!(ov.size(4).unwrap(), None);
    assert_eq!(ov.extend_size(4, 1), Err(Error::NoInode));
    assert_eq!(ov.reserve_append(4, 1), Err(Error::NoInode));
    let off = ov.inode(4, 0o644, 100).unwrap();
    assert_eq!(ov.inode(4, 0o644, 0).unwrap(), off);
    assert_eq!(ov.size(4).unwrap(), Some(100));
    assert_eq!(ov.extend_size(4, 50).unwrap(), 100);
    assert_eq!(ov.extend_size(4, 150).unwrap(), 150);
    let r1 = ov.reserve_append(4, 10).unwrap();
    let r2 = ov.reserve_append(4, 5).unwrap();
    assert_eq!((r1, r2), (150, 160));
    // The second cannot publish before the first.
    assert_eq!(
        ov.publish_append(4, r2, 5, &mut crate::SpinWaiter { left: 3 }),
        Err(Error::Busy)
    );
    assert_eq!(ov.size(4).unwrap(), Some(150));
    ov.publish_append(4, r1, 10, &mut crate::SpinWaiter { left: 3 })
        .unwrap();
    ov.publish_append(4, r2, 5, &mut crate::SpinWaiter { left: 3 })
        .unwrap();
    assert_eq!(ov.size(4).unwrap(), Some(165));
    assert_eq!(ov.next_ino().unwrap(), 1);
    assert_eq!(ov.next_ino().unwrap(), 2);
}

#[test]
fn tagged_free_list_and_corrupt_offsets() {
    let a = area(16, 4 * PAGE_WORDS);
    let ov = Overlay::format(&a[..], 0, 16, 4 * PAGE_WORDS).unwrap();
    ov.push_free(0, Kind::Data).unwrap();
    ov.push_free(PAGE_WORDS, Kind::Data).unwrap();
    let h = a[H_FREE_DATA].load(Ordering::SeqCst);
    assert_eq!(h >> HEAD_OFF_BITS, 2);
    assert_eq!(ov.pop_free(Kind::Data).unwrap(), Some(PAGE_WORDS));
    assert_eq!(ov.pop_free(Kind::Data).unwrap(), Some(0));
    assert_eq!(ov.pop_free(Kind::Data).unwrap(), None);
    assert_eq!(a[H_FREE_DATA].load(Ordering::SeqCst) >> HEAD_OFF_BITS, 4);
    // Misaligned or out-of-pool offsets are refused.
    assert_eq!(ov.push_free(3, Kind::Data), Err(Error::Corrupt));
    a[H_FREE_DATA].store(5, Ordering::SeqCst);
    assert_eq!(ov.pop_free(Kind::Data), Err(Error::Corrupt));
    a[H_FREE_DATA].store(0, Ordering::SeqCst);
    // A published value pointing outside the pool.
    let key = Key::data(1, 1).unwrap();
    InsertOp::new(&ov, key, 0).unwrap();
    ov.insert(key, 0).unwrap();
    let b = ov.lookup(key).unwrap().unwrap().0;
    a[ov.bucket_word(b).unwrap() + 1].store((1 << 40) | 1, Ordering::SeqCst);
    assert_eq!(ov.lookup(key), Err(Error::Corrupt));
}
