//! Reclaim ahead of need (`crate::watermark`): free frames kept between
//! the low and high marks between operations and at idle, so a miss
//! waits for reclaim only when the pool is exhausted.

use super::*;
use crate::watermark::Watermarks;

fn num(n: &Node<HostEnv>, key: &str) -> u64 {
    stat_value(n, key).parse().unwrap()
}

/// Free frames of node `k`'s pool.
fn free_frames(rig: &Rig, k: u32) -> usize {
    let v = stat_value(&rig.node(k), k::POOL_FRAMES);
    v.split('/').next().unwrap().parse().unwrap()
}

fn rig(mode: Mode, marks: Watermarks) -> Rig {
    let mut cfg = RigConfig::new(1, mode);
    cfg.region = 2 << 20;
    cfg.reclaim = marks;
    cfg.cache_pages = 200; // the private cache of `private` mode
    Rig::new(cfg)
}

/// Read `path` in reads of `chunk` bytes.
fn read_in(n: &mut Node<HostEnv>, path: &str, chunk: usize) -> Vec<u8> {
    let fd = n.open(path, OpenFlags::default()).unwrap();
    let mut out = Vec::new();
    let mut buf = vec![0u8; chunk];
    loop {
        let got = n.read(fd, &mut buf).unwrap();
        if got == 0 {
            break;
        }
        out.extend_from_slice(&buf[..got]);
    }
    n.close(fd).unwrap();
    out
}

#[test]
fn the_pool_is_back_above_the_high_mark_after_a_burst() {
    let rig = rig(Mode::Strong, Watermarks::new(10, 25));
    let pool = rig.sh.layout.pool_frames as usize;
    let (low, high) = Watermarks::new(10, 25).frames(pool);
    // A burst of dirty pages larger than the pool.
    let data = pattern((pool + pool / 2) * 4096, 3);
    write_file(&mut rig.node(1), "/burst", &data);
    rig.idle_node(1, 1_000_000);
    let free = free_frames(&rig, 1);
    assert!(
        free >= high,
        "{free} frames free after idle, high mark {high} (low {low}, pool {pool})"
    );
    assert!(num(&rig.node(1), k::RECLAIMS_AHEAD) > 0);
    assert_eq!(
        stat_value(&rig.node(1), k::RECLAIM_WATERMARKS),
        format!("{low}/{high}")
    );
    // The dirty pages reclaimed ahead were written back.
    assert_eq!(read_file(&mut rig.node(1), "/burst"), data);
    let fd = rig.node(1).open("/burst", OpenFlags::default()).unwrap();
    rig.node(1).fsync(fd).unwrap();
    rig.node(1).close(fd).unwrap();
    assert_eq!(disk_bytes(&rig, "/burst"), data);
}

#[test]
fn a_miss_does_not_wait_while_the_pool_is_above_the_low_mark() {
    let rig = rig(Mode::Strong, Watermarks::new(10, 25));
    let pool = rig.sh.layout.pool_frames as usize;
    let (_, high) = Watermarks::new(10, 25).frames(pool);
    let small = pattern(4 * 4096, 5);
    write_file(&mut rig.node(1), "/small", &small);
    rig.node(1).sync().unwrap();
    rig.node(1).cache_drop().unwrap();
    write_file(&mut rig.node(1), "/fill", &pattern(2 * pool * 4096, 6));
    rig.idle_node(1, 1_000_000);
    assert!(free_frames(&rig, 1) >= high);
    let waited = num(&rig.node(1), k::MISSES_WAITED_RECLAIM);
    let misses = num(&rig.node(1), k::MISSES);
    assert_eq!(read_file(&mut rig.node(1), "/small"), small);
    assert_eq!(num(&rig.node(1), k::MISSES), misses + 4, "four misses");
    assert_eq!(
        num(&rig.node(1), k::MISSES_WAITED_RECLAIM),
        waited,
        "no miss waited for reclaim"
    );
}

/// A file three times the pool read in small reads: with the marks, the
/// reclaim runs between the reads and (almost) no miss waits; without,
/// a miss waits every time the pool runs dry.
#[test]
fn reads_of_a_file_larger_than_the_pool_rarely_wait_for_reclaim() {
    let mut waited = Vec::new();
    for marks in [Watermarks::new(10, 25), Watermarks::OFF] {
        let rig = rig(Mode::Strong, marks);
        let pool = rig.sh.layout.pool_frames as usize;
        let data = pattern(3 * pool * 4096, 7);
        write_file(&mut rig.node(1), "/big", &data);
        rig.node(1).sync().unwrap();
        rig.node(1).cache_drop().unwrap();
        let before = num(&rig.node(1), k::MISSES_WAITED_RECLAIM);
        assert_eq!(read_in(&mut rig.node(1), "/big", 2 * 4096), data);
        let w = num(&rig.node(1), k::MISSES_WAITED_RECLAIM) - before;
        let ahead = num(&rig.node(1), k::RECLAIMS_AHEAD);
        waited.push((w, ahead, pool));
    }
    let [(on, ahead_on, pool), (off, ahead_off, _)] = waited[..] else {
        unreachable!()
    };
    assert!(
        ahead_on >= pool as u64,
        "pages reclaimed ahead of need: {ahead_on} (pool {pool})"
    );
    assert_eq!(ahead_off, 0, "no reclaim ahead of need with the marks off");
    assert!(off >= 3, "{off} misses waited without the marks");
    assert!(on <= 1, "{on} misses waited with the marks ({off} without)");
}

#[test]
fn relaxed_mode_reclaims_ahead_of_need_and_keeps_the_data() {
    let rig = rig(Mode::Relaxed, Watermarks::new(10, 25));
    let pool = rig.sh.layout.pool_frames as usize;
    let data = pattern(2 * pool * 4096, 8);
    write_file(&mut rig.node(1), "/r", &data);
    rig.node(1).sync().unwrap();
    rig.node(1).cache_drop().unwrap();
    assert_eq!(read_in(&mut rig.node(1), "/r", 4096), data);
    assert!(num(&rig.node(1), k::RECLAIMS_AHEAD) > 0);
    assert!(num(&rig.node(1), k::MISSES_WAITED_RECLAIM) <= 1);
}

#[test]
fn private_mode_keeps_room_ahead_of_need_and_keeps_the_data() {
    let marks = Watermarks::new(10, 25);
    let rig = rig(Mode::Private, marks);
    let data = pattern(600 * 4096, 9);
    // Dirty pages beyond the cache: written back ahead of need.
    write_file(&mut rig.node(1), "/p", &data);
    rig.idle_node(1, 1_000_000);
    let cached = num(&rig.node(1), k::RESIDENT_PRIVATE) as usize;
    let (_, high) = marks.frames(200);
    assert!(
        cached <= 200 - high,
        "{cached} pages cached, high mark {high}"
    );
    assert!(num(&rig.node(1), k::RECLAIMS_AHEAD) > 0);
    assert_eq!(read_in(&mut rig.node(1), "/p", 4096), data);
    rig.node(1).sync().unwrap();
    assert_eq!(disk_bytes(&rig, "/p"), data);
}

/// A page whose background eviction is still in flight is read again at
/// once: the read waits for the eviction's answer (taking it in) and
/// fetches the page anew, with its bytes.
#[test]
fn a_page_read_while_its_background_eviction_flies_comes_back() {
    let rig = rig(Mode::Strong, Watermarks::new(10, 25));
    let pool = rig.sh.layout.pool_frames as usize;
    let data = pattern((pool - 2) * 4096, 4);
    write_file(&mut rig.node(1), "/e", &data);
    let ino = rig.node(1).stat("/e").unwrap().ino;
    // Under the low mark: INVs go out, nobody waits for them yet.
    assert!(rig.node(1).reclaim_ahead(false) > 0);
    let victim = (0..pool as u64 - 2)
        .map(|idx| PageKey { ino, idx })
        .find(|&key| matches!(slot(&mut rig.node(1), key), Some(Slot::Reclaiming { .. })))
        .expect("a page being evicted");
    {
        // The data path's own resolve, as a read or write makes it
        // (without the operation's start, which takes answers in first).
        let mut n = rig.node(1);
        let n = &mut *n;
        let st = n.vfs.data_path().single_copy().unwrap();
        st.resolve(&mut n.link, &[victim], false).unwrap();
    }
    assert!(matches!(
        slot(&mut rig.node(1), victim),
        Some(Slot::Local { .. })
    ));
    let fd = rig.node(1).open("/e", OpenFlags::default()).unwrap();
    rig.node(1).seek(fd, victim.idx * 4096).unwrap();
    let mut buf = vec![0u8; 4096];
    assert_eq!(rig.node(1).read(fd, &mut buf).unwrap(), 4096);
    rig.node(1).close(fd).unwrap();
    let at = victim.idx as usize * 4096;
    assert_eq!(buf, data[at..at + 4096]);
}
