//! Queries (holds_frames_of, state_of) and the invariant check.

use super::*;

#[test]
fn holds_frames_of_tracks_owned_and_reserved_pages() {
    let mut t = T::new();
    assert!(!t.d.holds_frames_of(1));
    t.read(1, 1);
    assert!(t.d.holds_frames_of(1));
    t.d.filled(K, true);
    t.share(2);
    assert!(!t.d.holds_frames_of(2), "sharing holds no frame");
    t.req(
        1,
        2,
        PageReq::Inv {
            key: K,
            dirty: false,
        },
    );
    assert!(t.d.holds_frames_of(1), "until the sharers acked");
    t.ack(2, false);
    assert!(!t.d.holds_frames_of(1));
}

#[test]
fn state_of_shows_all_five_states() {
    let mut t = T::new();
    assert_eq!(t.d.state_of(&K, 1), PageState::I);
    t.read(1, 1);
    assert_eq!(t.d.state_of(&K, 1), PageState::E);
    t.d.filled(K, true);
    t.share(2);
    assert_eq!(
        [1, 2, 3].map(|n| t.d.state_of(&K, n)),
        [PageState::O, PageState::S, PageState::I]
    );
    t.req(
        1,
        2,
        PageReq::Inv {
            key: K,
            dirty: false,
        },
    );
    assert_eq!(t.d.state_of(&K, 1), PageState::Tbi);
    assert_eq!(t.d.state_of(&K, 0), PageState::I);
    assert_eq!(t.d.state_of(&K, 65), PageState::I);
}

#[test]
fn check_flags_hand_made_bad_entries() {
    let good = Entry {
        owner: 1,
        gfn: 100,
        sharers: 0b10,
        dirty: false,
        phase: Phase::Owned,
    };
    let bad = |e: Entry, want: &str| {
        let mut d = PageDir::new();
        put(&mut d, K, e);
        let err = d.check().unwrap_err();
        assert!(err.contains(want), "{err}");
    };
    let mut d = PageDir::new();
    put(&mut d, K, good);
    d.check().unwrap();
    bad(Entry { owner: 0, ..good }, "out of range");
    bad(Entry { owner: 65, ..good }, "out of range");
    bad(
        Entry {
            sharers: 0b11,
            ..good
        },
        "also a sharer",
    );
    bad(
        Entry {
            phase: Phase::Exclusive {
                by_dir: true,
                tag: 1,
            },
            ..good
        },
        "sharers while in E",
    );
    bad(
        Entry {
            phase: Phase::Invalidating {
                pending: 0b100,
                tag: 1,
            },
            ..good
        },
        "non-sharers",
    );
    // Owner bit outside an eviction, even with tag 0.
    bad(
        Entry {
            sharers: 0b11,
            phase: Phase::Invalidating {
                pending: 0b10,
                tag: 0,
            },
            ..good
        },
        "also a sharer",
    );
    // Two pages in one frame.
    let mut d = PageDir::new();
    put(&mut d, K, good);
    put(
        &mut d,
        PageKey { ino: 7, idx: 9 },
        Entry {
            owner: 2,
            sharers: 0,
            ..good
        },
    );
    assert!(d.check().unwrap_err().contains("frame 100"));
    // Eviction bookkeeping out of step with the entry.
    let mut d = PageDir::new();
    put(&mut d, K, good);
    d.evicting.insert(K, false);
    assert!(d.check().unwrap_err().contains("evicted but"));
    let mut d = PageDir::new();
    d.evicting.insert(K, false);
    assert!(d.check().unwrap_err().contains("not cached"));
    let mut d = PageDir::new();
    put(
        &mut d,
        K,
        Entry {
            sharers: 0b11,
            phase: Phase::Invalidating {
                pending: 0b11,
                tag: 0,
            },
            ..good
        },
    );
    d.evicting.insert(K, true);
    assert!(d.check().unwrap_err().contains("owner told before"));
}
