//! Relaxed mode: pages a truncate or unlink is tearing down stay in their
//! owner's frame, readable there, until every sharer acked (only then is
//! the owner told to free the frame). Writes through the file server
//! meanwhile must reach that frame, or the owner reads the torn-down
//! bytes after a newer write completed; one that grows the file over
//! those pages waits for the teardown instead (`torndown.rs`).

use super::*;

/// Node 1 owns `/f`'s pages and node 2 maps them; node 2 sleeps (its
/// DIR_INVs wait in its ring) while node 3 acts on `/f`, and wakes up
/// after a while (a write-back growing `/f` over the cut pages waits for
/// it); then node 1 reads `/f`.
fn evicted_owner_reads(act: impl FnOnce(&mut Node<HostEnv>)) -> Vec<u8> {
    let rig = Rig::new(RigConfig::new(3, Mode::Relaxed));
    let a = pattern(3 * 4096, 1);
    write_file(&mut rig.node(1), "/f", &a);
    rig.node(1).sync().unwrap();
    rig.node(1).cache_drop().unwrap();
    assert_eq!(read_file(&mut rig.node(1), "/f"), a);
    assert_eq!(read_file(&mut rig.node(2), "/f"), a);
    let ino = rig.node(1).stat("/f").unwrap().ino;
    let key = PageKey { ino, idx: 0 };
    let Some(Slot::Local { gfn, .. }) = slot(&mut rig.node(1), key) else {
        panic!("node 1 owns /f's page");
    };
    assert!(matches!(
        slot(&mut rig.node(2), key),
        Some(Slot::Remote { gfn: g2, .. }) if g2 == gfn
    ));
    rig.freeze(2);
    let sh = rig.sh.clone();
    let seen = Rc::new(Cell::new(0u32));
    rig.set_hook(Some(Box::new(move |_| {
        seen.set(seen.get() + 1);
        if seen.get() == 300 {
            sh.thaw(2);
        }
    })));
    act(&mut rig.node(3));
    rig.set_hook(None);
    let got = read_file(&mut rig.node(1), "/f");
    rig.thaw(2);
    rig.idle(10);
    got
}

/// A truncate-and-rewrite (the shell's `write`) by node 3: node 1 reads
/// the new bytes, not the ones the truncate cut.
#[test]
fn an_owner_reads_a_rewrite_of_pages_a_truncate_is_tearing_down() {
    let b = pattern(2 * 4096 + 100, 2);
    let got = evicted_owner_reads(|n3| write_file(n3, "/f", &b));
    assert_eq!(got.len(), b.len());
    assert!(got == b, "node 1 read the truncated bytes of /f");
}

/// A truncate to 0, then a write past the end (a gap): the gap reads as
/// zeros, not as the cut data.
#[test]
fn an_owner_reads_zeros_in_the_gap_of_a_write_past_a_cut_end() {
    let tail = pattern(100, 3);
    let got = evicted_owner_reads(|n3| {
        let fd = n3.open("/f", OpenFlags::default()).unwrap();
        n3.truncate(fd, 0).unwrap();
        n3.seek(fd, 3 * 4096 - 100).unwrap();
        assert_eq!(n3.write(fd, &tail).unwrap(), tail.len());
        n3.close(fd).unwrap();
    });
    let mut want = vec![0u8; 3 * 4096];
    want[3 * 4096 - 100..].copy_from_slice(&tail);
    assert_eq!(got.len(), want.len());
    let bad: Vec<usize> = (0..3)
        .filter(|p| got[p * 4096..(p + 1) * 4096] != want[p * 4096..(p + 1) * 4096])
        .collect();
    assert!(bad.is_empty(), "pages {bad:?} of /f show the cut data");
}
