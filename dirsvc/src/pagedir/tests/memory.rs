//! The compact layout: bytes per cached page, the wide layout, the table
//! against a plain map.

use super::super::*;
use alloc::collections::BTreeMap;
use alloc::vec;
use fabric::layout::Layout;
use fabric::proto::{PageReply, PageReq};

/// Deterministic pseudo-random numbers.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

/// A directory of `nodes` nodes caching `pages` pages spread over files of
/// 1..=2048 pages, read in an interleaved order by the nodes in turn, every
/// tenth page mapped by two other nodes, a few pages left in E and TBI.
fn populate(nodes: u32, pages: u64) -> (Layout, PageDir) {
    let l = Layout::compute(1 << 30, nodes).unwrap();
    let mut d = PageDir::for_nodes(nodes);
    let mut rng = Lcg(7);
    let mut files = Vec::new();
    let mut total = 0;
    while total < pages {
        let len = (1 + rng.next() % 2048).min(pages - total);
        files.push((100 + files.len() as u64, len, 0u64));
        total += len;
    }
    let frames_per_node = l.pool_gfns(1).1 - l.pool_gfns(1).0;
    let mut used = vec![0u64; nodes as usize + 1];
    let mut n = 0u64;
    let mut tag = 1u32;
    while n < pages {
        for f in files.iter_mut().filter(|f| f.2 < f.1) {
            let key = PageKey { ino: f.0, idx: f.2 };
            f.2 += 1;
            let node = (n % u64::from(nodes)) as u8 + 1;
            let frame = l.pool_gfns(u32::from(node)).0 + used[usize::from(node)];
            used[usize::from(node)] += 1;
            assert!(used[usize::from(node)] <= frames_per_node);
            tag += 1;
            let out = d.handle(&l, node, tag, PageReq::Read { key, frame });
            assert_eq!(out, vec![Action::Fill { key, gfn: frame }]);
            if n % 1000 != 1 {
                d.filled(key, true);
            }
            if n.is_multiple_of(10) {
                for s in [node % nodes as u8 + 1, (node + 1) % nodes as u8 + 1] {
                    let frame = l.pool_gfns(u32::from(s)).0;
                    d.handle(&l, s, 1, PageReq::Read { key, frame });
                }
                if n.is_multiple_of(1000) {
                    d.handle(&l, node, 2, PageReq::Inv { key, dirty: true });
                }
            }
            n += 1;
        }
    }
    (l, d)
}

#[test]
fn at_most_16_bytes_per_cached_page_up_to_32_nodes() {
    let (_, d) = populate(32, 100_000);
    d.check().unwrap();
    assert_eq!(d.len(), 100_000);
    assert_eq!(d.width(), Width::Narrow);
    let b = d.bytes_per_entry();
    std::println!(
        "narrow: {} bytes for {} pages: {b:.2} B/page",
        d.memory(),
        d.len()
    );
    assert!(b <= 16.0, "{b} bytes per entry");
    assert!(
        b <= BYTES_PER_ENTRY as f64,
        "{b} > BYTES_PER_ENTRY {BYTES_PER_ENTRY}"
    );
    assert!(b >= NARROW_RECORD as f64);
    const { assert!(BYTES_PER_ENTRY <= 16) };
}

#[test]
fn wide_layout_above_32_nodes() {
    let (_, d) = populate(64, 100_000);
    d.check().unwrap();
    assert_eq!(d.width(), Width::Wide);
    let b = d.bytes_per_entry();
    std::println!(
        "wide: {} bytes for {} pages: {b:.2} B/page",
        d.memory(),
        d.len()
    );
    assert!(b >= WIDE_RECORD as f64 && b <= 18.0, "{b} bytes per entry");
}

#[test]
fn sharers_33_to_64_are_kept_and_invalidated() {
    let l = Layout::compute(1 << 30, 64).unwrap();
    let mut d = PageDir::for_nodes(64);
    let key = PageKey { ino: 5, idx: 70 };
    let g = l.pool_gfns(40).0;
    d.handle(&l, 40, 1, PageReq::Read { key, frame: g });
    d.filled(key, true);
    for n in 33..=64u8 {
        let frame = l.pool_gfns(u32::from(n)).0 + 1;
        let out = d.handle(&l, n, 2, PageReq::Read { key, frame });
        if n == 40 {
            assert_eq!(out.last(), Some(&reply_owner(40, g)));
        }
        d.check().unwrap();
    }
    let e = d.entry(&key).unwrap();
    assert_eq!(e.sharers, 0xffff_ffff_0000_0000 & !(1u64 << 39));
    assert_eq!(d.state_of(&key, 64), PageState::S);
    assert_eq!(d.state_of(&key, 33), PageState::S);
    assert_eq!(d.state_of(&key, 32), PageState::I);
    // Node 64 drops; the owner invalidates the other 30.
    d.handle(&l, 64, 3, PageReq::Drop { key, dirty: true });
    assert_eq!(d.state_of(&key, 64), PageState::I);
    let out = d.handle(&l, 40, 4, PageReq::Inv { key, dirty: false });
    let invs: Vec<u8> = out
        .iter()
        .filter_map(|a| match a {
            Action::Invalidate { node, .. } => Some(*node),
            _ => None,
        })
        .collect();
    let want: Vec<u8> = (33..=63u8).filter(|&n| n != 40).collect();
    assert_eq!(invs, want);
    assert_eq!(d.state_of(&key, 40), PageState::Tbi);
    let mut last = Vec::new();
    for n in want {
        d.check().unwrap();
        last = d.ack(n, key, false);
    }
    assert!(d.is_empty());
    assert!(
        last.contains(&Action::WriteBack { key, gfn: g }),
        "{last:?}"
    );
    assert!(last.contains(&Action::Reply {
        node: 40,
        tag: 4,
        reply: PageReply::Done { written: true }
    }));
}

fn reply_owner(node: u8, gfn: u64) -> Action {
    Action::Reply {
        node,
        tag: 2,
        reply: PageReply::Owner { gfn },
    }
}

/// Frames anywhere, owned by node 1.
struct Anywhere;

impl FrameOwner for Anywhere {
    fn owner_of(&self, _gfn: u64) -> Option<u8> {
        Some(1)
    }
}

#[test]
fn frames_beyond_32_bits_are_refused() {
    let mut d = PageDir::for_nodes(4);
    let key = PageKey { ino: 1, idx: 0 };
    for frame in [1u64 << 32, u64::MAX] {
        let out = d.handle(&Anywhere, 1, 3, PageReq::Read { key, frame });
        assert_eq!(
            out,
            vec![Action::Reply {
                node: 1,
                tag: 3,
                reply: PageReply::Refused
            }]
        );
    }
    assert!(d.is_empty());
    assert_eq!(d.stats().refused, 2);
    let out = d.handle(
        &Anywhere,
        1,
        3,
        PageReq::Read {
            key,
            frame: 0xffff_ffff,
        },
    );
    assert_eq!(
        out,
        vec![Action::Fill {
            key,
            gfn: 0xffff_ffff
        }]
    );
}

#[test]
fn narrow_table_refuses_sharers_above_32() {
    let mut t = table::Table::new(Width::Narrow);
    let e = Entry {
        owner: 1,
        gfn: 9,
        sharers: 1 << 32,
        dirty: false,
        phase: Phase::Owned,
    };
    assert_eq!(t.put(PageKey { ino: 1, idx: 1 }, &e), Err(Unfit::Node));
    assert_eq!(t.len(), 0);
    assert_eq!(t.memory(), 0);
}

#[test]
fn table_matches_a_plain_map() {
    for width in [Width::Narrow, Width::Wide] {
        let mut t = table::Table::new(width);
        let mut m: BTreeMap<PageKey, Entry> = BTreeMap::new();
        let mut rng = Lcg(width as u64 + 1);
        for step in 0..20_000u32 {
            let key = PageKey {
                ino: rng.next() % 5,
                idx: rng.next() % 300,
            };
            let sharers = rng.next()
                & if width == Width::Narrow {
                    0xffff_fffe
                } else {
                    !1
                };
            let phase = match rng.next() % 4 {
                0 => Phase::Exclusive {
                    by_dir: step % 2 == 0,
                    tag: step,
                },
                1 => Phase::Invalidating {
                    pending: sharers,
                    tag: step,
                },
                _ => Phase::Owned,
            };
            let e = Entry {
                owner: 1,
                gfn: u64::from(rng.next() as u32),
                sharers,
                dirty: step % 3 == 0,
                phase,
            };
            if rng.next().is_multiple_of(3) {
                assert_eq!(t.remove(&key), m.remove(&key));
            } else {
                t.put(key, &e).unwrap();
                m.insert(key, e);
            }
            assert_eq!(t.get(&key), m.get(&key).copied());
            assert_eq!(t.len(), m.len());
            if step % 2000 == 0 {
                t.check().unwrap();
                let all: Vec<(PageKey, Entry)> = t.iter().collect();
                let want: Vec<(PageKey, Entry)> = m.iter().map(|(k, e)| (*k, *e)).collect();
                assert_eq!(all, want);
                let from: Vec<PageKey> = m
                    .keys()
                    .filter(|k| k.ino == 2 && k.idx >= 100)
                    .copied()
                    .collect();
                assert_eq!(t.keys_from(2, 100), from);
            }
        }
    }
}
