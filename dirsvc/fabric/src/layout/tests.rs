//! Host tests of the region layout and the header accessors.

use super::*;
use crate::shm::HeapShm;

#[test]
fn compute_format_read_round_trip() {
    for (mb, nodes) in [
        (1usize, 1u32),
        (16, 2),
        (64, 2),
        (64, 4),
        (256, 16),
        (64, 64),
    ] {
        let size = mb << 20;
        let l = Layout::compute(size, nodes).unwrap();
        l.validate().unwrap();
        assert!(l.pool_frames > 0, "{mb} MiB / {nodes}");
        let mem = HeapShm::new(size);
        l.format(&*mem, 7);
        assert_eq!(Layout::read(&*mem), Ok(l));
        let h = Header::new(&*mem, l);
        assert_eq!(h.epoch(), 7);
        assert_eq!(h.next_epoch(), 8);
        assert_eq!(h.dir_state(), Some(DirState::Booting));
        // Areas of different nodes do not overlap.
        if nodes >= 2 {
            let a = l.channel(1).ack;
            let b = l.channel(2).request;
            assert!(a.off + RingLoc::bytes(a.slots) <= b.off);
            let (s1, n1) = l.bulk_slot(1, l.bulk_slots - 1).unwrap();
            let (s2, _) = l.bulk_slot(2, 0).unwrap();
            assert!(s1 + n1 <= s2);
            let (_, end1) = l.pool_gfns(1);
            let (first2, _) = l.pool_gfns(2);
            assert_eq!(end1, first2);
            assert_eq!(l.gfn_owner(first2), Some(2));
            assert_eq!(l.gfn_owner(end1 - 1), Some(1));
        }
        let (_, last) = l.pool_gfns(nodes);
        assert!(last as usize * PAGE_SIZE <= size);
        assert_eq!(l.gfn_owner(last), None);
    }
}

#[test]
fn refuses_bad_regions() {
    let size = 4 << 20;
    let l = Layout::compute(size, 2).unwrap();
    let mem = HeapShm::new(size);
    assert!(matches!(Layout::read(&*mem), Err(LayoutError::BadMagic(0))));
    l.format(&*mem, 1);
    // Version.
    mem.store_u32(8, VERSION + 1);
    assert_eq!(
        Layout::read(&*mem),
        Err(LayoutError::BadVersion(VERSION + 1))
    );
    mem.store_u32(8, VERSION);
    assert_eq!(Layout::read(&*mem), Ok(l));
    // A field changed without fixing the checksum.
    mem.store_u64(48, 12345);
    assert_eq!(Layout::read(&*mem), Err(LayoutError::BadChecksum));
    // Consistent checksum but overlapping areas.
    let mut bad = l;
    bad.bulk_off = l.channels_off;
    bad.format(&*mem, 1);
    assert!(matches!(
        Layout::read(&*mem),
        Err(LayoutError::Inconsistent(_))
    ));
    // Header claims a bigger region than we have.
    let big = Layout::compute(size * 2, 2).unwrap();
    big.format(&*mem, 1);
    assert!(matches!(
        Layout::read(&*mem),
        Err(LayoutError::TooSmall { .. })
    ));
    // Too small to be useful / bad node counts.
    assert!(matches!(
        Layout::compute(4096, 2),
        Err(LayoutError::TooSmall { .. })
    ));
    assert_eq!(Layout::compute(size, 0), Err(LayoutError::BadNodeCount(0)));
    assert_eq!(
        Layout::compute(size, 65),
        Err(LayoutError::BadNodeCount(65))
    );
}

#[test]
fn out_of_range_ids_are_refused() {
    let size = 2 << 20;
    let l = Layout::compute(size, 2).unwrap();
    let mem = HeapShm::new(size);
    l.format(&*mem, 1);
    let h = Header::new(&*mem, l);
    assert_eq!(l.bulk_slot(0, 0), None);
    assert_eq!(l.bulk_slot(3, 0), None);
    assert_eq!(l.bulk_slot(1, l.bulk_slots), None);
    assert_eq!(h.node_state(0), None);
    assert_eq!(h.node_state(3), None);
    h.set_node_state(99, NodeState::Up); // ignored, no panic
    mem.store_u32(NODE_TABLE, 77);
    assert_eq!(h.node_state(1), None);
}
