//! Host tests of strong mode's writes: whole pages cached nowhere asked
//! for in batches, a late exclusive grant given back, and a read miss
//! that needs no validation round trip while no file changed.

use fabric::config::Mode;
use fabric::proto::PageKey;
use osapi::io::OpenFlags;
use osapi::keys::cache as keys;

use crate::rig::{Rig, RigConfig};
use crate::singlecopy::BATCH;
use crate::tests::{disk_bytes, pattern, read_file, stat_value, write_file};

use fabric::PAGE_SIZE as PAGE;

#[test]
fn a_read_miss_skips_validation_while_no_file_changed() {
    use fabric::proto::Op;
    let rig = Rig::new(RigConfig::new(2, Mode::Strong));
    let data = pattern(4 * PAGE, 5);
    write_file(&mut rig.node(2), "/f", &data);
    let getattrs = || rig.sh.dir.borrow().ops()[Op::Getattr as usize];
    let fd = rig.node(1).open("/f", OpenFlags::default()).unwrap();
    let mut page = vec![0u8; PAGE];
    // The open's lookup confirmed the version: misses are not validated
    // (no Getattr) while the metadata epoch stands still.
    let g0 = getattrs();
    assert_eq!(rig.node(1).read(fd, &mut page).unwrap(), PAGE);
    assert!(page[..] == data[..PAGE]);
    assert_eq!(getattrs() - g0, 0, "the open confirmed the version");
    assert_eq!(rig.node(1).read(fd, &mut page).unwrap(), PAGE);
    assert!(page[..] == data[PAGE..2 * PAGE]);
    assert_eq!(getattrs() - g0, 0, "no round trip while no file changed");
    // Another node shrinks the file: the next miss sees the epoch move,
    // validates, and reads at the new size.
    let f2 = rig.node(2).open("/f", OpenFlags::default()).unwrap();
    rig.node(2).truncate(f2, 3 * PAGE as u64 - 100).unwrap();
    rig.node(2).close(f2).unwrap();
    let mut rest = vec![0u8; 2 * PAGE];
    let n = rig.node(1).read(fd, &mut rest).unwrap();
    assert_eq!(n, PAGE - 100, "read clipped at the new end of file");
    assert!(rest[..n] == data[2 * PAGE..3 * PAGE - 100]);
    assert!(getattrs() - g0 >= 1, "the moved epoch was validated");
    rig.node(1).close(fd).unwrap();
}

#[test]
fn a_late_exclusive_grant_is_given_back() {
    // Node 1's full-page write times out before the directory serves its
    // LOOKUP_LOCK; the grant (E) comes later, when nobody waits for it.
    // Unreleased, every other node's request for the page would be told
    // to retry until node 1 left. Node 1's idle check gives it back.
    let mut cfg = RigConfig::new(2, Mode::Strong);
    cfg.rpc_timeout_ns = 1_000_000;
    let rig = Rig::new(cfg);
    let old = pattern(2 * PAGE, 7);
    write_file(&mut rig.node(2), "/e", &old);
    rig.node(2).cache_drop().unwrap();
    let fd = rig.node(1).open("/e", OpenFlags::default()).unwrap();
    rig.set_dir_up(false);
    assert!(rig.node(1).write(fd, &[0xEE; PAGE]).is_err(), "timed out");
    rig.set_dir_up(true);
    rig.idle(10); // the directory serves the LOOKUP_LOCK: E for node 1
    let ino = rig.node(1).stat("/e").unwrap().ino;
    let phase = || {
        rig.sh
            .dir
            .borrow()
            .pages()
            .entry(&PageKey { ino, idx: 0 })
            .map(|e| e.phase)
    };
    assert!(
        matches!(phase(), Some(dirsvc::pagedir::Phase::Exclusive { .. })),
        "{:?}",
        phase()
    );
    rig.node(1).check(); // the idle loop's membership check
    rig.idle(10);
    assert_eq!(phase(), None, "the late grant was given back");
    assert_eq!(read_file(&mut rig.node(2), "/e"), old);
    rig.node(1).close(fd).unwrap();
}

/// Strong mode: a write covering many whole pages cached nowhere asks for
/// them together (LOOKUP_LOCKs in batches of BATCH, then one batch of
/// UNLOCKs), not two round trips per page; the bytes reach every reader
/// and the disk. Pages another node owns are written into its frame.
#[test]
fn strong_full_page_writes_go_out_in_batches() {
    let rig = Rig::new(RigConfig::new(2, Mode::Strong));
    let pages = 2 * BATCH + 3;
    // Node 2 owns the first two pages; the rest are cached nowhere.
    let old = pattern(2 * PAGE, 5);
    write_file(&mut rig.node(2), "/f", &old);
    let batches =
        |n: &crate::node::Node<_>| -> u64 { stat_value(n, keys::PAGE_BATCHES).parse().unwrap() };
    let before = batches(&rig.node(1));
    // Unaligned by 100 bytes: the first and last pages are partial.
    let new = pattern(pages * PAGE, 6);
    let fd = rig.node(1).open("/f", OpenFlags::default()).unwrap();
    rig.node(1).seek(fd, 100).unwrap();
    assert_eq!(rig.node(1).write(fd, &new).unwrap(), new.len());
    let used = batches(&rig.node(1)) - before;
    // Per round of BATCH whole pages one LOOKUP_LOCK batch and one UNLOCK
    // batch (3 rounds), plus a few for the two partial pages and node 2's
    // pages; page by page it was 2 per page (134).
    assert!(used <= 12, "{used} page request batches for {pages} pages");
    rig.node(1).fsync(fd).unwrap();
    rig.node(1).close(fd).unwrap();
    let mut want = old[..100].to_vec();
    want.extend_from_slice(&new);
    assert!(read_file(&mut rig.node(2), "/f") == want);
    assert!(read_file(&mut rig.node(1), "/f") == want);
    assert!(disk_bytes(&rig, "/f") == want);
}
