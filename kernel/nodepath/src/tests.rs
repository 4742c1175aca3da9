//! Host tests of the whole node data path: a real directory and two (or
//! more) nodes in one process ([`crate::rig`]).

use std::cell::Cell;
use std::rc::Rc;

use fabric::config::Mode;
use fabric::proto::{Errno, PageKey};
use fabric::shm::SharedMem;
use osapi::io::{BatchIo, OpenFlags};
use osapi::keys::cache as k;

use crate::node::Node;
use crate::pagecache::Slot;
use crate::rig::{window_offset, HostEnv, Rig, RigConfig};
use crate::wait::DIR_SILENT_NS;

/// The protocol timeline's ring and its on/off flag are global: the
/// tests that turn it on hold this, one at a time.
pub(crate) static TRACE_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub(crate) fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|o| ((o % 251) as u8) ^ ((o >> 12) as u8) ^ seed)
        .collect()
}

pub(crate) fn create() -> OpenFlags {
    OpenFlags {
        create: true,
        truncate: true,
        ..OpenFlags::default()
    }
}

pub(crate) fn write_file(n: &mut Node<HostEnv>, path: &str, data: &[u8]) {
    let fd = n.open(path, create()).unwrap();
    assert_eq!(n.write(fd, data).unwrap(), data.len());
    n.close(fd).unwrap();
}

pub(crate) fn write_at(n: &mut Node<HostEnv>, path: &str, at: u64, data: &[u8]) {
    let fd = n.open(path, OpenFlags::default()).unwrap();
    n.seek(fd, at).unwrap();
    assert_eq!(n.write(fd, data).unwrap(), data.len());
    n.close(fd).unwrap();
}

/// The window accesses of node `n` (`Node::mmap_io`'s `access`): loads
/// and stores through its recorded mappings into the shared region.
pub(crate) fn window_io(
    rig: &Rig,
    n: &Node<HostEnv>,
) -> impl FnMut(u64, &mut [u8], bool) -> Result<(), Errno> {
    let sh = rig.sh.clone();
    let mapped = n.link.env.mapped.clone();
    move |va: u64, b: &mut [u8], write: bool| {
        let pa = *mapped.borrow().get(&(va & !0xFFF)).ok_or(Errno::Io)?;
        let off = (pa - crate::rig::SHM_PA) as usize + (va & 0xFFF) as usize;
        if write {
            sh.mem.write(off, b);
        } else {
            sh.mem.read(off, b);
        }
        Ok(())
    }
}

pub(crate) fn read_file(n: &mut Node<HostEnv>, path: &str) -> Vec<u8> {
    let fd = n.open(path, OpenFlags::default()).unwrap();
    let mut out = Vec::new();
    let mut buf = vec![0u8; 10_000];
    loop {
        let k = n.read(fd, &mut buf).unwrap();
        if k == 0 {
            break;
        }
        out.extend_from_slice(&buf[..k]);
    }
    n.close(fd).unwrap();
    out
}

/// The slot node `n` holds for `key` (single copy), if any.
fn slot(n: &mut Node<HostEnv>, key: PageKey) -> Option<Slot> {
    let st = n.vfs.data_path().single_copy().unwrap();
    st.coherence().unwrap().cache.slot(&key).cloned()
}

pub(crate) fn stat_value(n: &Node<HostEnv>, key: &str) -> String {
    n.cache_stats("none", 0)
        .unwrap()
        .into_iter()
        .find(|(k, _)| k == key)
        .unwrap_or_else(|| panic!("no '{key}' in cache stats"))
        .1
}

#[test]
fn a_read_on_node_2_maps_node_1s_frame() {
    let rig = Rig::new(RigConfig::new(2, Mode::Strong));
    let data = pattern(3 * 4096 + 100, 0);
    write_file(&mut rig.node(1), "/f", &data);
    assert_eq!(read_file(&mut rig.node(2), "/f"), data);
    let ino = rig.node(2).stat("/f").unwrap().ino;
    let pool1 = rig.sh.layout.pool_gfns(1);
    for idx in 0..4 {
        let key = PageKey { ino, idx };
        let Some(Slot::Local { gfn: g1, .. }) = slot(&mut rig.node(1), key) else {
            panic!("node 1 owns page {idx}");
        };
        let Some(Slot::Remote { gfn: g2, .. }) = slot(&mut rig.node(2), key) else {
            panic!("node 2 maps page {idx}");
        };
        assert_eq!(g1, g2, "one copy: node 2 maps node 1's frame");
        assert!(g1 >= pool1.0 && g1 < pool1.0 + pool1.1);
    }
    assert_eq!(stat_value(&rig.node(2), k::RESIDENT_OWNED), "0");
    assert_eq!(stat_value(&rig.node(2), k::REMOTE_MAPPINGS), "4");
    // The mmap window of node 2 points at node 1's frames too.
    let fd = rig.node(2).open("/f", OpenFlags::default()).unwrap();
    let (base, pages, size) = rig.node(2).mmap_lazy(fd).unwrap();
    assert_eq!((pages, size), (4, data.len() as u64));
    let mut got = vec![0u8; data.len()];
    rig.window_read(2, base, &mut got).unwrap();
    assert_eq!(got, data);
    let off = window_offset(&rig.node(2).link.env, base).unwrap();
    let Some(Slot::Local { gfn, .. }) = slot(&mut rig.node(1), PageKey { ino, idx: 0 }) else {
        panic!("node 1 owns page 0");
    };
    assert_eq!(off, gfn as usize * 4096);
    assert_eq!(rig.node(2).fault_counts(), (4, 0));
    rig.node(2).munmap();
    assert!(rig.node(2).link.env.mapped.borrow().is_empty());
    rig.node(2).close(fd).unwrap();
}

#[test]
fn strong_writes_are_visible_at_once_both_ways() {
    let rig = Rig::new(RigConfig::new(2, Mode::Strong));
    write_file(&mut rig.node(1), "/f", &pattern(8192, 0));
    assert_eq!(read_file(&mut rig.node(2), "/f"), pattern(8192, 0));
    // Node 1 writes its frame; node 2 reads it through its mapping, no
    // fsync in between.
    write_at(&mut rig.node(1), "/f", 10, b"from node one");
    let got = read_file(&mut rig.node(2), "/f");
    assert_eq!(&got[10..23], b"from node one");
    // Node 2 writes straight into node 1's frame.
    write_at(&mut rig.node(2), "/f", 4096 + 7, b"from node two");
    let got = read_file(&mut rig.node(1), "/f");
    assert_eq!(&got[4096 + 7..4096 + 20], b"from node two");
    assert_eq!(stat_value(&rig.node(2), k::RESIDENT_OWNED), "0");
    // And it reaches the disk at fsync.
    let fd = rig.node(1).open("/f", OpenFlags::default()).unwrap();
    rig.node(1).fsync(fd).unwrap();
    rig.node(1).close(fd).unwrap();
    rig.node(1).sync().unwrap();
    let disk = disk_bytes(&rig, "/f");
    assert_eq!(&disk[10..23], b"from node one");
    assert_eq!(&disk[4096 + 7..4096 + 20], b"from node two");
}

/// The bytes of `path` on the directory's disk (shuts the directory down:
/// call it last).
pub(crate) fn disk_bytes(rig: &Rig, path: &str) -> Vec<u8> {
    let mut fs = rig.sh.dir.borrow_mut().shutdown(&*rig.sh.mem).unwrap();
    let a = fs.lookup(path).unwrap();
    let mut buf = vec![0u8; a.size as usize];
    let n = fs.read(a.ino, 0, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

#[test]
fn relaxed_writes_are_private_until_fsync() {
    let rig = Rig::new(RigConfig::new(2, Mode::Relaxed));
    write_file(&mut rig.node(1), "/f", &pattern(8192, 0));
    // Full-page writes made private copies, written back at close; node 1
    // reads the pages into its frames, node 2 maps them.
    assert_eq!(read_file(&mut rig.node(1), "/f"), pattern(8192, 0));
    assert_eq!(read_file(&mut rig.node(2), "/f"), pattern(8192, 0));
    let fd = rig.node(2).open("/f", OpenFlags::default()).unwrap();
    rig.node(2).seek(fd, 100).unwrap();
    rig.node(2).write(fd, b"relaxed").unwrap();
    assert_eq!(stat_value(&rig.node(2), k::PRIVATE_COPIES), "1");
    // Node 1 still sees its own frame.
    assert_eq!(read_file(&mut rig.node(1), "/f"), pattern(8192, 0));
    // fsync writes the private copy back, which refreshes the owner's frame.
    rig.node(2).fsync(fd).unwrap();
    rig.node(2).close(fd).unwrap();
    assert_eq!(stat_value(&rig.node(2), k::PRIVATE_COPIES), "0");
    let got = read_file(&mut rig.node(1), "/f");
    assert_eq!(&got[100..107], b"relaxed");
    assert_eq!(&disk_bytes(&rig, "/f")[100..107], b"relaxed");
}

#[test]
fn private_mode_keeps_private_copies() {
    let rig = Rig::new(RigConfig::new(2, Mode::Private));
    let data = pattern(5 * 4096, 3);
    write_file(&mut rig.node(1), "/f", &data);
    assert_eq!(read_file(&mut rig.node(2), "/f"), data);
    assert_eq!(stat_value(&rig.node(2), k::RESIDENT_PRIVATE), "5");
    assert_eq!(stat_value(&rig.node(2), k::REMOTE_MAPPINGS), "0");
    assert!(!rig.node(2).has_windows());
    // A second read is served from the cache.
    assert_eq!(read_file(&mut rig.node(2), "/f"), data);
    assert_eq!(stat_value(&rig.node(2), k::MISSES), "5");
    // Close-to-open: node 1's write is seen at the next open.
    write_at(&mut rig.node(1), "/f", 0, b"changed");
    assert_eq!(&read_file(&mut rig.node(2), "/f")[..7], b"changed");
    assert_eq!(
        rig.node(2).cache_drop().unwrap(),
        "dropped the private cache"
    );
    assert_eq!(stat_value(&rig.node(2), k::RESIDENT_PRIVATE), "0");
}

#[test]
fn a_small_pool_reclaims_and_keeps_the_data() {
    let mut cfg = RigConfig::new(2, Mode::Strong);
    cfg.region = 1 << 20;
    let rig = Rig::new(cfg);
    let pool = rig.sh.layout.pool_frames as usize;
    assert!(pool < 64, "a small pool ({pool} frames)");
    let data = pattern((pool + 40) * 4096, 9);
    write_file(&mut rig.node(1), "/big", &data);
    assert_eq!(read_file(&mut rig.node(1), "/big"), data);
    assert!(stat_value(&rig.node(1), k::INVALIDATIONS_SENT) != "0");
    assert_eq!(read_file(&mut rig.node(2), "/big"), data);
    let fd = rig.node(1).open("/big", OpenFlags::default()).unwrap();
    rig.node(1).fsync(fd).unwrap();
    rig.node(1).close(fd).unwrap();
    assert_eq!(disk_bytes(&rig, "/big"), data);
}

#[test]
fn truncate_retires_pages_on_every_node() {
    let rig = Rig::new(RigConfig::new(2, Mode::Strong));
    let data = pattern(4 * 4096, 1);
    write_file(&mut rig.node(1), "/t", &data);
    assert_eq!(read_file(&mut rig.node(2), "/t"), data);
    let fd = rig.node(1).open("/t", OpenFlags::default()).unwrap();
    rig.node(1).truncate(fd, 5000).unwrap();
    rig.node(1).close(fd).unwrap();
    rig.idle(10);
    assert_eq!(read_file(&mut rig.node(2), "/t"), data[..5000].to_vec());
    assert_eq!(read_file(&mut rig.node(1), "/t"), data[..5000].to_vec());
    let owned: u64 = stat_value(&rig.node(1), k::RESIDENT_OWNED).parse().unwrap();
    assert!(owned <= 2, "{owned} pages owned after truncate to 2 pages");
    // Growing again reads zeros past the old end.
    let fd = rig.node(2).open("/t", OpenFlags::default()).unwrap();
    rig.node(2).truncate(fd, 3 * 4096).unwrap();
    rig.node(2).close(fd).unwrap();
    let got = read_file(&mut rig.node(1), "/t");
    assert_eq!(got.len(), 3 * 4096);
    assert_eq!(&got[..5000], &data[..5000]);
    assert!(
        got[8192..].iter().all(|b| *b == 0),
        "zeros past the old end"
    );
}

#[test]
fn unlink_forgets_the_file_everywhere() {
    let rig = Rig::new(RigConfig::new(2, Mode::Strong));
    write_file(&mut rig.node(1), "/u", &pattern(3 * 4096, 2));
    assert_eq!(read_file(&mut rig.node(2), "/u").len(), 3 * 4096);
    assert_eq!(stat_value(&rig.node(2), k::REMOTE_MAPPINGS), "3");
    rig.node(1).unlink("/u").unwrap();
    rig.idle(10);
    assert_eq!(rig.node(2).stat("/u").err(), Some(Errno::NotFound));
    assert_eq!(stat_value(&rig.node(1), k::RESIDENT_OWNED), "0");
    assert_eq!(stat_value(&rig.node(2), k::REMOTE_MAPPINGS), "0");
    // The name can be used again, with new contents.
    write_file(&mut rig.node(2), "/u", b"again");
    assert_eq!(read_file(&mut rig.node(1), "/u"), b"again");
}

#[test]
fn mmap_io_loads_and_stores_through_the_window() {
    for mode in [Mode::Strong, Mode::Relaxed] {
        mmap_io_through_the_window(mode);
    }
}

fn mmap_io_through_the_window(mode: Mode) {
    let rig = Rig::new(RigConfig::new(2, mode));
    write_file(&mut rig.node(1), "/m", &pattern(2 * 4096, 4));
    // Node 1 owns the pages (relaxed: its writes went back at close).
    assert_eq!(read_file(&mut rig.node(1), "/m"), pattern(2 * 4096, 4));
    let mut buf = vec![0u8; 6000];
    // Loads: through node 2's recorded mappings into the shared region.
    let mut n = rig.node(2);
    let mut io = window_io(&rig, &n);
    n.mmap_io("/m", 1000, 6000, false, &mut buf, &mut io)
        .unwrap();
    assert_eq!(buf, pattern(2 * 4096, 4)[1000..7000].to_vec());
    assert_eq!(
        n.mmap_io("/m", 5000, 6000, false, &mut buf, &mut io).err(),
        Some(Errno::Invalid),
        "past the end"
    );
    // A store into node 1's frame (relaxed mode too: the one copy).
    let mut w = b"stored".to_vec();
    n.mmap_io("/m", 4090, 6, true, &mut w, &mut io).unwrap();
    drop(n);
    assert_eq!(&read_file(&mut rig.node(1), "/m")[4090..4096], b"stored");
    rig.node(2).sync().unwrap();
    assert_eq!(&disk_bytes(&rig, "/m")[4090..4096], b"stored", "{mode:?}");
}

#[test]
fn invalidating_an_owned_page_unmaps_it_on_the_sharer() {
    let rig = Rig::new(RigConfig::new(2, Mode::Strong));
    write_file(&mut rig.node(1), "/i", &pattern(2 * 4096, 5));
    assert_eq!(read_file(&mut rig.node(2), "/i").len(), 2 * 4096);
    let ino = rig.node(1).stat("/i").unwrap().ino;
    // Node 2's DIR_INV is serviced by its idle loop while node 1 waits.
    assert!(rig.node(1).invalidate_page(ino, 0).unwrap());
    assert!(
        !rig.node(1).invalidate_page(ino, 0).unwrap(),
        "not ours any more"
    );
    assert_eq!(slot(&mut rig.node(2), PageKey { ino, idx: 0 }), None);
    assert!(matches!(
        slot(&mut rig.node(2), PageKey { ino, idx: 1 }),
        Some(Slot::Remote { .. })
    ));
    assert_eq!(stat_value(&rig.node(2), k::INVALIDATIONS_RECEIVED), "1");
    // The data survived (written back by the directory).
    assert_eq!(read_file(&mut rig.node(2), "/i"), pattern(2 * 4096, 5));
    assert_eq!(
        rig.node(1).cache_drop().unwrap(),
        "invalidated 1 owned pages, dropped 0 remote mappings"
    );
}

#[test]
fn bench_dir_maps_and_drops_pages_owned_elsewhere() {
    let rig = Rig::new(RigConfig::new(2, Mode::Strong));
    write_file(&mut rig.node(1), "/d", &pattern(10 * 4096, 6));
    let a = rig.node(2).stat("/d").unwrap();
    // 10 maps + 10 drops per round.
    assert_eq!(rig.node(2).bench_dir(a.ino, a.size, 3, 4).unwrap(), 60);
    assert_eq!(stat_value(&rig.node(2), k::REMOTE_MAPPINGS), "0");
    // On the owner it is refused: it would need pages owned elsewhere.
    assert_eq!(
        rig.node(1).bench_dir(a.ino, a.size, 1, 4).err(),
        Some(Errno::Invalid)
    );
    let p = Rig::new(RigConfig::new(1, Mode::Private));
    assert_eq!(
        p.node(1).bench_dir(a.ino, a.size, 1, 4).err(),
        Some(Errno::NotSupported)
    );
}

#[test]
fn a_batch_resolves_its_reads_together() {
    for mode in [Mode::Strong, Mode::Private, Mode::Net] {
        let rig = Rig::new(RigConfig::new(2, mode));
        write_file(&mut rig.node(1), "/b", &pattern(8 * 4096, 7));
        let mut n = rig.node(2);
        let fd = n.open("/b", OpenFlags::default()).unwrap();
        let mut b1 = vec![0u8; 4096];
        let mut b2 = vec![0u8; 3 * 4096];
        let mut w = vec![1u8; 10];
        let ios = [
            BatchIo::new(fd, 0, false, &mut b1),
            BatchIo::new(fd, 4 * 4096 + 1, false, &mut b2),
            BatchIo::new(fd, 0, true, &mut w),
        ];
        // Pages 0 and 4..=7 (the write is not prefetched; the read is
        // clipped at the end of the file).
        let pages: Vec<u64> = n.batch_pages(&ios).unwrap().iter().map(|p| p.1).collect();
        assert_eq!(pages, vec![0, 4, 5, 6, 7], "{mode:?}");
        n.prepare_batch(&ios).unwrap();
        let misses = stat_value(&n, k::MISSES);
        assert_eq!(misses, "5", "{mode:?}: every read page came in");
        // The reads are hits now.
        n.seek(fd, 4 * 4096).unwrap();
        let mut buf = vec![0u8; 4096];
        n.read(fd, &mut buf).unwrap();
        assert_eq!(stat_value(&n, k::MISSES), "5", "{mode:?}");
        n.close(fd).unwrap();
    }
}

#[test]
fn an_mmap_batch_resolves_its_loads_together() {
    let rig = Rig::new(RigConfig::new(2, Mode::Strong));
    write_file(&mut rig.node(1), "/mb", &pattern(4 * 4096, 9));
    write_file(&mut rig.node(1), "/mc", &pattern(4096, 3));
    let mut n = rig.node(2);
    let mut io = window_io(&rig, &n);
    let mut bufs: Vec<Vec<u8>> = (0..4).map(|_| vec![0u8; 4096]).collect();
    let mut small = vec![0u8; 100];
    let t0 = rig.sh.now();
    let mut ios: Vec<osapi::io::MmapIo<'_>> = bufs
        .iter_mut()
        .enumerate()
        .map(|(i, b)| osapi::io::MmapIo::new("/mb", i as u64 * 4096, false, b))
        .collect();
    ios.push(osapi::io::MmapIo::new("/mc", 4000, false, &mut small));
    let mut past = vec![0u8; 10];
    ios.push(osapi::io::MmapIo::new("/mc", 4090, false, &mut past));
    n.mmap_batch(&mut ios, &mut io).unwrap();
    let done: Vec<_> = ios.iter().map(|io| io.done).collect();
    assert_eq!(
        done,
        vec![
            Ok(4096),
            Ok(4096),
            Ok(4096),
            Ok(4096),
            Err(Errno::Invalid),
            Err(Errno::Invalid)
        ],
        "a load past the end fails alone"
    );
    drop(ios);
    let want = pattern(4 * 4096, 9);
    for (i, b) in bufs.iter().enumerate() {
        assert_eq!(b[..], want[i * 4096..(i + 1) * 4096], "page {i}");
    }
    assert_eq!(stat_value(&n, k::MISSES), "5", "the five pages came in");
    let batched_ns = rig.sh.now() - t0;
    drop(n);
    // The same loads one by one, on a fresh cluster: a directory round
    // trip each (the rig's simulated clock; behaviour, not host timing).
    let rig = Rig::new(RigConfig::new(2, Mode::Strong));
    write_file(&mut rig.node(1), "/mb", &pattern(4 * 4096, 9));
    write_file(&mut rig.node(1), "/mc", &pattern(4096, 3));
    let sh = rig.sh.clone();
    let mut n = rig.node(2);
    let mut io = window_io(&rig, &n);
    let t0 = sh.now();
    let mut b = vec![0u8; 4096];
    for i in 0..4u64 {
        n.mmap_io("/mb", i * 4096, 4096, false, &mut b, &mut io)
            .unwrap();
    }
    n.mmap_io("/mc", 0, 100, false, &mut b, &mut io).unwrap();
    let one_by_one_ns = sh.now() - t0;
    assert!(
        batched_ns * 2 < one_by_one_ns,
        "the misses went out together: {batched_ns} ns, one by one {one_by_one_ns} ns (simulated)"
    );
    drop(n);
    let mut p = Rig::new(RigConfig::new(1, Mode::Private));
    let _ = &mut p;
    let mut none: [osapi::io::MmapIo<'_>; 0] = [];
    assert_eq!(
        p.node(1).mmap_batch(&mut none, &mut |_, _, _| Ok(())).err(),
        Some(Errno::NotSupported)
    );
}

/// Private mode: a batch's missing reads go to the file server as
/// several ring requests in flight together (sub-slots of the read slot),
/// up to `ring_reads`; with `ring_reads=1`, one at a time.
#[test]
fn private_reads_of_a_batch_share_the_ring_round_trips() {
    let mut seen = Vec::new();
    for ring_reads in [32, 1, 3] {
        let mut cfg = RigConfig::new(2, Mode::Private);
        cfg.ring_reads = ring_reads;
        let rig = Rig::new(cfg);
        let data = pattern(16 * 4096, 11);
        write_file(&mut rig.node(1), "/r", &data);
        let sh = rig.sh.clone();
        let mut n = rig.node(2);
        let fd = n.open("/r", OpenFlags::default()).unwrap();
        // Eight separate pages (no two contiguous: eight requests).
        let mut bufs: Vec<Vec<u8>> = (0..8).map(|_| vec![0u8; 4096]).collect();
        let ios: Vec<BatchIo<'_>> = bufs
            .iter_mut()
            .enumerate()
            .map(|(i, b)| BatchIo::new(fd, i as u64 * 2 * 4096, false, b))
            .collect();
        let t0 = sh.now();
        n.prepare_batch(&ios).unwrap();
        let ns = sh.now() - t0;
        drop(ios);
        let (groups, reads, max) = n.link.ring_read_stats;
        assert_eq!(reads, 8, "ring_reads={ring_reads}");
        assert_eq!(max, ring_reads.min(8) as u64, "ring_reads={ring_reads}");
        assert_eq!(groups, 8u64.div_ceil(ring_reads.min(8) as u64));
        assert_eq!(stat_value(&n, k::RING_READS_MAX), format!("{max}"));
        // Every page came in, with the right bytes (hits now).
        assert_eq!(stat_value(&n, k::MISSES), "8");
        for i in 0..8u64 {
            let mut b = vec![0u8; 4096];
            n.seek(fd, i * 2 * 4096).unwrap();
            n.read(fd, &mut b).unwrap();
            let at = (i * 2 * 4096) as usize;
            assert_eq!(b[..], data[at..at + 4096], "page {}", i * 2);
        }
        assert_eq!(stat_value(&n, k::MISSES), "8");
        n.close(fd).unwrap();
        seen.push(ns);
    }
    // Simulated time (behaviour of the rig's clock, not host timing): one
    // round trip for the eight against eight.
    assert!(seen[0] * 3 < seen[1], "{seen:?}");
}

/// A contiguous run larger than what is left of the read slot starts the
/// next group; the data still lands in order.
#[test]
fn private_reads_that_fill_the_slot_go_in_several_groups() {
    let rig = Rig::new(RigConfig::new(2, Mode::Private));
    let data = pattern(64 * 4096, 12);
    write_file(&mut rig.node(1), "/big", &data);
    let mut n = rig.node(2);
    let fd = n.open("/big", OpenFlags::default()).unwrap();
    // 3 pages, then 16 contiguous (one request of a whole slot), then 2.
    let mut a = vec![0u8; 3 * 4096];
    let mut b = vec![0u8; 16 * 4096];
    let mut c = vec![0u8; 2 * 4096];
    let ios = [
        BatchIo::new(fd, 0, false, &mut a),
        BatchIo::new(fd, 8 * 4096, false, &mut b),
        BatchIo::new(fd, 40 * 4096, false, &mut c),
    ];
    n.prepare_batch(&ios).unwrap();
    let (groups, reads, _) = n.link.ring_read_stats;
    assert_eq!(
        (groups, reads),
        (3, 3),
        "the 64 KiB run needs the slot alone"
    );
    assert_eq!(stat_value(&n, k::MISSES), "21");
    let mut got = vec![0u8; 16 * 4096];
    n.seek(fd, 8 * 4096).unwrap();
    n.read(fd, &mut got).unwrap();
    assert_eq!(got[..], data[8 * 4096..24 * 4096]);
    n.close(fd).unwrap();
}

/// Doorbell counters of node `k`: (rings of the directory, sleeps, sleeps
/// refused because work was waiting).
fn bells(rig: &Rig, k: u32) -> (u64, u64, u64) {
    let n = rig.node(k);
    let e = &n.link.env;
    (e.rings.get(), e.sleeps.get(), e.woke_with_work.get())
}

#[test]
fn every_request_and_every_ack_rings_the_directory() {
    let rig = Rig::new(RigConfig::new(2, Mode::Strong));
    let r0 = bells(&rig, 1).0;
    rig.node(1).ring_call(&fabric::proto::Request::Nop).unwrap();
    assert_eq!(bells(&rig, 1).0, r0 + 1, "one ring per request");
    // Node 2 shares node 1's page; node 1 invalidates it: node 2's idle
    // loop acks the DIR_INV and rings the directory for it.
    write_file(&mut rig.node(1), "/f", &pattern(4096, 1));
    assert_eq!(read_file(&mut rig.node(2), "/f"), pattern(4096, 1));
    let ino = rig.node(1).stat("/f").unwrap().ino;
    let (r1, r2) = (bells(&rig, 1).0, bells(&rig, 2).0);
    assert!(rig.node(1).invalidate_page(ino, 0).unwrap());
    assert_eq!(bells(&rig, 2).0, r2 + 1, "the sharer's ack rang");
    assert!(bells(&rig, 1).0 > r1, "the invalidation rang");
}

#[test]
fn a_sleeping_node_rechecks_its_rings_and_waits_still_complete() {
    use fabric::proto::{PageReq, Request};
    let rig = Rig::new(RigConfig::new(2, Mode::Strong));
    rig.sh.doorbells.set(true);
    write_file(&mut rig.node(1), "/f", &pattern(8192, 2));
    assert_eq!(read_file(&mut rig.node(2), "/f"), pattern(8192, 2));
    // Idle with nothing waiting: node 2 sleeps.
    let now = rig.sh.now();
    assert!(rig.node(2).idle_sleep(now + 1_000_000, &mut || false));
    assert_eq!(bells(&rig, 2).1, 1);
    // Past its deadline it does not.
    assert!(rig.node(2).idle_sleep(now, &mut || false));
    assert_eq!(bells(&rig, 2).1, 1);
    // Other work (serial input) refuses the sleep.
    assert!(rig.node(2).idle_sleep(u64::MAX, &mut || true));
    assert_eq!(bells(&rig, 2).2, 1);
    // A DIR_INV waiting in node 2's notify ring refuses it too.
    rig.freeze(2);
    let ino = rig.node(1).stat("/f").unwrap().ino;
    let key = PageKey { ino, idx: 0 };
    let inv = Request::Page(PageReq::Inv { key, dirty: false });
    rig.node(1).link.send(&inv, &mut ()).unwrap();
    rig.idle(3);
    assert!(rig.node(2).idle_sleep(u64::MAX, &mut || false));
    assert_eq!(bells(&rig, 2), (bells(&rig, 2).0, 1, 2));
    // With doorbells on, calls and page traffic still complete.
    rig.node(1).ring_call(&Request::Nop).unwrap();
    write_file(&mut rig.node(1), "/g", &pattern(4096, 3));
    assert_eq!(read_file(&mut rig.node(1), "/g"), pattern(4096, 3));
}

#[test]
fn a_batch_sees_a_truncate_that_completed_while_it_fetched() {
    // Node 1 truncates the file while node 2's batch waits for its pages:
    // the batch's reads must clip at the new size, not copy the fetched
    // (or zeroed) pages under the old one.
    let rig = Rig::new(RigConfig::new(2, Mode::Strong));
    let data = pattern(8 * 4096, 11);
    write_file(&mut rig.node(1), "/t", &data);
    let fd2 = rig.node(2).open("/t", OpenFlags::default()).unwrap();
    let n1 = rig.node_rc(1);
    let done = Rc::new(Cell::new(false));
    let flag = done.clone();
    rig.set_hook(Some(Box::new(move |me| {
        if me != 2 || flag.get() {
            return;
        }
        if let Ok(mut n) = n1.try_borrow_mut() {
            let fd = n.open("/t", OpenFlags::default()).unwrap();
            n.truncate(fd, 4096).unwrap();
            n.close(fd).unwrap();
            flag.set(true);
        }
    })));
    let mut n = rig.node(2);
    let mut buf = vec![0u8; 8 * 4096];
    n.prepare_batch(&[BatchIo::new(fd2, 0, false, &mut buf)])
        .unwrap();
    rig.set_hook(None);
    assert!(done.get(), "the truncate ran inside the batch");
    // The batch's read, as `Os::io_batch` runs it after the prefetch.
    n.seek(fd2, 0).unwrap();
    let got = n.read(fd2, &mut buf).unwrap();
    assert_eq!(got, 4096, "the read clipped at the new size");
    assert_eq!(&buf[..4096], &data[..4096]);
}

mod ahead;
mod appends;
mod broken;
mod copies;
mod daxfs;
mod deleg;
mod evicted;
mod failure;
mod fence;
mod groups;
mod indoubt;
mod membership;
mod meta;
mod policy;
mod profile;
mod promote;
mod quiet;
mod readahead;
mod reclaiming;
mod runs;
mod sc_writeback;
mod strong_writes;
mod task_reads;
mod task_writeback;
mod torndown;
mod trace;
mod unlock;
mod unwritten;
mod windows;
mod writes;
