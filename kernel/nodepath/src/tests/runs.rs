//! Reclaim and fsync in runs: one INV (or WRITEBACK) entry per contiguous
//! run of a file's pages, not one per page; at most `BATCH` (32) pages per
//! round trip, so a 64-page file goes as two entries of 32.

use super::*;

fn num(n: &Node<HostEnv>, key: &str) -> u64 {
    stat_value(n, key).parse().unwrap()
}

#[test]
fn a_cache_drop_of_a_64_page_file_sends_one_invalidation_entry_per_32_pages() {
    let rig = Rig::new(RigConfig::new(1, Mode::Strong));
    let data = pattern(64 * 4096, 4);
    write_file(&mut rig.node(1), "/f", &data);
    rig.node(1).sync().unwrap();
    let (pages, entries) = {
        let n = rig.node(1);
        (
            num(&n, k::INVALIDATIONS_SENT),
            num(&n, k::INVALIDATION_ENTRIES),
        )
    };
    rig.node(1).cache_drop().unwrap();
    let n = rig.node(1);
    assert_eq!(num(&n, k::INVALIDATIONS_SENT) - pages, 64);
    assert_eq!(num(&n, k::INVALIDATION_ENTRIES) - entries, 2);
    drop(n);
    assert_eq!(read_file(&mut rig.node(1), "/f"), data);
}

#[test]
fn an_fsync_of_64_dirty_pages_is_one_writeback_entry_per_32_pages() {
    let rig = Rig::new(RigConfig::new(1, Mode::Strong));
    write_file(&mut rig.node(1), "/f", &pattern(64 * 4096, 5));
    rig.node(1).sync().unwrap();
    // Overwrite every page in place (strong mode: into our frames).
    let data = pattern(64 * 4096, 6);
    let before = rig.sh.dir.borrow().run_stats();
    let fd = rig.node(1).open("/f", OpenFlags::default()).unwrap();
    assert_eq!(rig.node(1).write(fd, &data).unwrap(), data.len());
    rig.node(1).fsync(fd).unwrap();
    rig.node(1).close(fd).unwrap();
    let after = rig.sh.dir.borrow().run_stats();
    assert_eq!((after.0 - before.0, after.1 - before.1), (2, 64));
    assert_eq!(disk_bytes(&rig, "/f"), data);
}
