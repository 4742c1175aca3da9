//! Writes that race the teardown of a shrunk file's pages. A truncate
//! returns once the directory started tearing the cut pages down: the
//! sharers are told to unmap at once, the owner to free its frame only
//! after every sharer acked. Until then the owner still holds the frame
//! (and a slow sharer still maps it), so a write that starts after the
//! truncate returned could store into a frame that is about to be freed
//! and never written back. Such a write must not be lost, nor leave
//! zeros nobody wrote.
//!
//! The forced interleaving: node 1 owns `/f`'s pages, node 2 maps them
//! and is frozen (its DIR_INVs wait in its ring), node 3 cuts `/f`; node
//! 1 then writes `/f` while node 2 is still frozen, and node 2 wakes up
//! a little later (a step hook).

use super::*;
use osapi::meta::{MetaCall, MetaDone};

/// Steps of node 1's write after which the frozen sharer wakes up.
const SHARER_WAKES_AFTER: u32 = 300;

/// `/f` (3 pages) owned by node 1 and mapped by node 2 (frozen on
/// return); node 3 has run `cut`. Returns the rig, `/f`'s first bytes
/// and node 1's descriptor of `/f` opened before the cut if `early`.
fn cut_under_a_slow_sharer(
    mode: Mode,
    early: bool,
    cut: impl FnOnce(&mut Node<HostEnv>),
) -> (Rig, Vec<u8>, Option<osapi::io::Fd>) {
    let rig = Rig::new(RigConfig::new(3, mode));
    let a = pattern(3 * 4096, 1);
    write_file(&mut rig.node(1), "/f", &a);
    rig.node(1).sync().unwrap();
    rig.node(1).cache_drop().unwrap();
    assert_eq!(read_file(&mut rig.node(1), "/f"), a);
    assert_eq!(read_file(&mut rig.node(2), "/f"), a);
    let ino = rig.node(1).stat("/f").unwrap().ino;
    let key = PageKey { ino, idx: 2 };
    let Some(Slot::Local { gfn, .. }) = slot(&mut rig.node(1), key) else {
        panic!("node 1 owns /f's pages");
    };
    assert!(matches!(
        slot(&mut rig.node(2), key),
        Some(Slot::Remote { gfn: g2, .. }) if g2 == gfn
    ));
    let fd = early.then(|| rig.node(1).open("/f", OpenFlags::default()).unwrap());
    rig.freeze(2);
    cut(&mut rig.node(3));
    assert!(
        matches!(slot(&mut rig.node(1), key), Some(Slot::Local { .. })),
        "node 1 was not told yet: the sharer has not acked"
    );
    (rig, a, fd)
}

/// Run `write` on node 1 while node 2 sleeps through its first
/// [`SHARER_WAKES_AFTER`] steps, then let everybody settle and return
/// `/f` as node 3 and node 1 read it.
fn write_then_read(rig: &Rig, write: impl FnOnce(&mut Node<HostEnv>)) -> (Vec<u8>, Vec<u8>) {
    let sh = rig.sh.clone();
    let seen = Rc::new(Cell::new(0u32));
    rig.set_hook(Some(Box::new(move |_| {
        seen.set(seen.get() + 1);
        if seen.get() == SHARER_WAKES_AFTER {
            sh.thaw(2);
        }
    })));
    write(&mut rig.node(1));
    rig.set_hook(None);
    rig.thaw(2);
    rig.idle(50);
    let n3 = read_file(&mut rig.node(3), "/f");
    let n1 = read_file(&mut rig.node(1), "/f");
    (n3, n1)
}

fn cut_to(size: u64) -> impl FnOnce(&mut Node<HostEnv>) {
    move |n3| {
        let fd = n3.open("/f", OpenFlags::default()).unwrap();
        n3.truncate(fd, size).unwrap();
        n3.close(fd).unwrap();
    }
}

fn assert_same(got: &[u8], want: &[u8], who: &str) {
    assert_eq!(got.len(), want.len(), "{who}: size of /f");
    let bad = got.iter().zip(want).filter(|(g, w)| g != w).count();
    assert!(bad == 0, "{who}: {bad} bytes of /f differ from the write");
}

/// After a truncate to 0 returned, node 1 (the owner, not told yet)
/// opens `/f` and writes 100 bytes at 0: every node reads them.
fn a_write_past_the_cut(mode: Mode) {
    let (rig, _, _) = cut_under_a_slow_sharer(mode, false, cut_to(0));
    let b = pattern(100, 7);
    let (n3, n1) = write_then_read(&rig, |n1| write_at(n1, "/f", 0, &b));
    assert_same(&n3, &b, "node 3");
    assert_same(&n1, &b, "node 1");
}

#[test]
fn strong_a_write_past_a_cut_end_outlives_the_teardown() {
    a_write_past_the_cut(Mode::Strong);
}

#[test]
fn relaxed_a_write_past_a_cut_end_outlives_the_teardown() {
    a_write_past_the_cut(Mode::Relaxed);
}

/// A truncate to the middle of page 0 returned; node 1 writes inside the
/// new size, in the page holding the new end (no size to publish): the
/// write is kept, and so is the head the truncate kept.
fn a_write_below_a_mid_page_cut(mode: Mode) {
    let (rig, a, _) = cut_under_a_slow_sharer(mode, false, cut_to(100));
    let w = pattern(50, 9);
    let (n3, n1) = write_then_read(&rig, |n1| write_at(n1, "/f", 10, &w));
    let mut want = a[..100].to_vec();
    want[10..60].copy_from_slice(&w);
    assert_same(&n3, &want, "node 3");
    assert_same(&n1, &want, "node 1");
}

#[test]
fn strong_a_write_below_a_mid_page_cut_outlives_the_teardown() {
    a_write_below_a_mid_page_cut(Mode::Strong);
}

#[test]
fn relaxed_a_write_below_a_mid_page_cut_outlives_the_teardown() {
    a_write_below_a_mid_page_cut(Mode::Relaxed);
}

/// The file is cut to 0 and grown back to 3 pages (node 3) while node 2
/// sleeps; node 1 then writes at 0, inside the file (no size to
/// publish): the write is kept, and the rest reads as zeros, not as the
/// cut bytes.
#[test]
fn strong_a_write_into_a_cut_and_regrown_file_outlives_the_teardown() {
    let (rig, _, _) = cut_under_a_slow_sharer(Mode::Strong, false, cut_to(0));
    let b = pattern(100, 5);
    let sh = rig.sh.clone();
    let seen = Rc::new(Cell::new(0u32));
    rig.set_hook(Some(Box::new(move |_| {
        seen.set(seen.get() + 1);
        if seen.get() == SHARER_WAKES_AFTER {
            sh.thaw(2);
        }
    })));
    // The growth waits for the teardown (the sharer wakes up meanwhile).
    {
        let mut n3 = rig.node(3);
        let fd = n3.open("/f", OpenFlags::default()).unwrap();
        n3.truncate(fd, 3 * 4096).unwrap();
        n3.close(fd).unwrap();
    }
    rig.set_hook(None);
    let (n3, n1) = write_then_read(&rig, |n1| write_at(n1, "/f", 0, &b));
    let mut want = vec![0u8; 3 * 4096];
    want[..100].copy_from_slice(&b);
    assert_same(&n3, &want, "node 3");
    assert_same(&n1, &want, "node 1");
}

/// Node 1 opened `/f` before the truncate to 0 (its size is the old
/// one), and writes 100 bytes at 0 after the truncate returned: the
/// write extends the file again, as after any truncate.
#[test]
fn strong_a_write_through_an_fd_opened_before_the_cut_outlives_the_teardown() {
    let (rig, _, fd) = cut_under_a_slow_sharer(Mode::Strong, true, cut_to(0));
    let fd = fd.unwrap();
    let b = pattern(100, 3);
    let (n3, n1) = write_then_read(&rig, |n1| {
        n1.seek(fd, 0).unwrap();
        assert_eq!(n1.write(fd, &b).unwrap(), b.len());
        n1.close(fd).unwrap();
    });
    assert_same(&n3, &b, "node 3");
    assert_same(&n1, &b, "node 1");
}

/// Node 3 removes `/f` while node 1 holds it open (and owns its pages,
/// not told yet): node 1's write through that descriptor fails instead
/// of storing into a frame the teardown frees (a write that returned
/// success would be gone, and a read back would see zeros).
#[test]
fn strong_a_write_to_a_file_removed_meanwhile_fails() {
    let (rig, _, fd) = cut_under_a_slow_sharer(Mode::Strong, true, |n3| {
        n3.unlink("/f").unwrap();
    });
    let fd = fd.unwrap();
    let b = pattern(100, 4);
    let w = rig.node(1).write(fd, &b);
    assert!(w.is_err(), "a write to a removed file returned {w:?}");
    let _ = rig.node(1).close(fd);
    rig.thaw(2);
    rig.idle(50);
    assert_eq!(rig.node(3).stat("/f").map(|a| a.size), Err(Errno::NotFound));
}

/// Relaxed mode: after a truncate to 0 returned, node 3 writes 100 bytes
/// at 0 and writes them back (a close, or a task's fsync): the write-back
/// grows `/f` over page 0, which node 1 (the owner, not told yet) still
/// holds. Node 1 then writes inside that new size, into its frame: both
/// writes are kept once the teardown ends.
fn a_write_back_growing_over_a_cut_page(task: bool) {
    let (rig, _, _) = cut_under_a_slow_sharer(Mode::Relaxed, false, cut_to(0));
    let b = pattern(100, 6);
    let w = pattern(50, 8);
    let sh = rig.sh.clone();
    let seen = Rc::new(Cell::new(0u32));
    rig.set_hook(Some(Box::new(move |_| {
        seen.set(seen.get() + 1);
        if seen.get() == SHARER_WAKES_AFTER {
            sh.thaw(2);
        }
    })));
    {
        let mut n3 = rig.node(3);
        let fd = n3.open("/f", OpenFlags::default()).unwrap();
        assert_eq!(n3.write(fd, &b), Ok(b.len()));
        if task {
            let t = crate::tests::meta::pending(&mut n3, MetaCall::Fsync { fd });
            let r = crate::tests::meta::finish(&mut n3, t);
            assert_eq!(r, Ok(MetaDone::Ok), "node 3's fsync");
        }
        n3.close(fd).unwrap();
    }
    let (n3, n1) = write_then_read(&rig, |n1| write_at(n1, "/f", 10, &w));
    let mut want = b.clone();
    want[10..60].copy_from_slice(&w);
    assert_same(&n3, &want, "node 3");
    assert_same(&n1, &want, "node 1");
}

#[test]
fn relaxed_a_write_back_growing_over_a_cut_page_keeps_the_owners_later_write() {
    a_write_back_growing_over_a_cut_page(false);
}

#[test]
fn relaxed_a_tasks_write_back_growing_over_a_cut_page_keeps_the_owners_later_write() {
    a_write_back_growing_over_a_cut_page(true);
}

/// Strong mode: node 1 holds `/f` open and owns its pages; node 3 cuts
/// `/f` (node 1 not told yet, the sharer sleeps). A read node 1 starts
/// after the cut returned sees the new size, not the cut bytes, though
/// every page it reads is still held here.
fn a_read_after_a_cut_sees_it(size: u64) {
    let (rig, a, fd) = cut_under_a_slow_sharer(Mode::Strong, true, cut_to(size));
    let fd = fd.unwrap();
    let mut buf = vec![0u8; a.len()];
    let n = {
        let mut n1 = rig.node(1);
        n1.seek(fd, 0).unwrap();
        n1.read(fd, &mut buf).unwrap()
    };
    assert_eq!(n as u64, size, "node 1 read the cut bytes");
    assert_same(&buf[..n], &a[..n], "node 1");
    rig.node(1).close(fd).unwrap();
    rig.thaw(2);
    rig.idle(50);
}

#[test]
fn strong_a_read_after_a_cut_to_zero_sees_it() {
    a_read_after_a_cut_sees_it(0);
}

#[test]
fn strong_a_read_after_a_mid_page_cut_sees_it() {
    a_read_after_a_cut_sees_it(100);
}

/// Node 1 holds `/f` open; node 3 removes `/f` and creates `/g`, which
/// gets `/f`'s inode number again. Node 1's write through its descriptor
/// of the removed file must fail and leave `/g` alone, and a read through
/// it must not return `/g`'s bytes.
#[test]
fn a_descriptor_of_a_removed_file_never_reaches_a_file_reusing_its_number() {
    let mut bad = Vec::new();
    for mode in [Mode::Strong, Mode::Relaxed] {
        let rig = Rig::new(RigConfig::new(3, mode));
        write_file(&mut rig.node(1), "/f", &pattern(3 * 4096, 1));
        rig.node(1).sync().unwrap();
        let fd = rig.node(1).open("/f", OpenFlags::default()).unwrap();
        let old = rig.node(1).stat("/f").unwrap().ino;
        rig.node(3).unlink("/f").unwrap();
        let g = pattern(2 * 4096, 2);
        write_file(&mut rig.node(3), "/g", &g);
        rig.node(3).sync().unwrap();
        assert_eq!(
            rig.node(3).stat("/g").unwrap().ino,
            old,
            "{mode:?}: number reused"
        );
        let mut buf = vec![0u8; 3 * 4096];
        let r = {
            let mut n1 = rig.node(1);
            n1.seek(fd, 0).unwrap();
            n1.read(fd, &mut buf)
        };
        if let Ok(n) = r {
            if n > 0 && buf[..n] == g[..n] {
                bad.push(format!("{mode:?}: a read returned /g's bytes"));
            }
        }
        let w = {
            let mut n1 = rig.node(1);
            n1.seek(fd, 0).unwrap();
            let w = n1.write(fd, &pattern(100, 9));
            let c = n1.close(fd);
            (w, c)
        };
        if w.0.is_ok() && w.1.is_ok() {
            bad.push(format!(
                "{mode:?}: a write to a removed file returned {w:?}"
            ));
        }
        rig.idle(50);
        if read_file(&mut rig.node(2), "/g") != g {
            bad.push(format!("{mode:?}: /g changed"));
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// What node 1 does through its descriptor of `/f` once node 3 removed
/// `/f` and created `/g`, which got the same inode number.
#[derive(Debug, Clone, Copy)]
enum Through {
    /// Close it, writing back the bytes it wrote through it before
    /// (`private` and `net`: dirty pages; relaxed: a private copy of node
    /// 2's frame).
    CloseWritten,
    /// Read through it, nothing of `/f` cached (`private` and `net`: a
    /// fill from the file server).
    Read,
    /// Truncate it to 0 as a task's call (`node/meta.rs`).
    TaskTruncate,
}

/// Node 1 opens `/f` (and writes through it for [`Through::CloseWritten`]);
/// node 3 removes `/f` and creates `/g`, which reuses the number; then
/// node 1 acts through its old descriptor. None of it may reach `/g`:
/// what is wrong, if anything.
fn stale_descriptor(mode: Mode, how: Through) -> Option<String> {
    let rig = Rig::new(RigConfig::new(3, mode));
    write_file(&mut rig.node(1), "/f", &pattern(3 * 4096, 1));
    rig.node(1).sync().unwrap();
    // Node 1 caches nothing of `/f`; relaxed: node 2 holds its frames, so
    // node 1's write makes private copies of them.
    rig.node(1).cache_drop().unwrap();
    read_file(&mut rig.node(2), "/f");
    let fd = rig.node(1).open("/f", OpenFlags::default()).unwrap();
    let old = rig.node(1).stat("/f").unwrap().ino;
    if let Through::CloseWritten = how {
        assert_eq!(rig.node(1).write(fd, &pattern(100, 9)), Ok(100));
    }
    rig.node(3).unlink("/f").unwrap();
    let g = pattern(2 * 4096, 2);
    write_file(&mut rig.node(3), "/g", &g);
    rig.node(3).sync().unwrap();
    assert_eq!(rig.node(3).stat("/g").unwrap().ino, old, "number reused");
    let mut bad = None;
    {
        let mut n1 = rig.node(1);
        match how {
            Through::CloseWritten => {
                let _ = n1.close(fd);
            }
            Through::Read => {
                let mut buf = vec![0u8; 3 * 4096];
                if let Ok(n) = n1.read(fd, &mut buf) {
                    if n > 0 && buf[..n] == g[..n] {
                        bad = Some("a read returned /g's bytes".to_string());
                    }
                }
                let _ = n1.close(fd);
            }
            Through::TaskTruncate => {
                let call = MetaCall::Truncate { fd, size: 0 };
                let r = match n1.meta_start(call) {
                    osapi::meta::MetaStart::Pending(t) => crate::tests::meta::finish(&mut n1, t),
                    osapi::meta::MetaStart::Done(r) => r,
                };
                if r.is_ok() {
                    bad = Some("a truncate through it succeeded".to_string());
                }
                let _ = n1.close(fd);
            }
        }
    }
    rig.idle(50);
    rig.node(1).sync().ok();
    if read_file(&mut rig.node(2), "/g") != g {
        bad = Some(format!(
            "{}/g changed",
            bad.map_or(String::new(), |b| b + "; ")
        ));
    }
    bad.map(|b| format!("{mode:?} {how:?}: {b}"))
}

/// The write-back of bytes written through a descriptor of a removed
/// file, a private cache's fill through it and a task's truncate through
/// it carry the generation the node knew: none reaches the file that
/// reused the number (the directory refuses them), in every mode that
/// buffers or fetches through the file server.
#[test]
fn buffered_bytes_and_fills_of_a_removed_file_never_reach_a_file_reusing_its_number() {
    let mut bad = Vec::new();
    for mode in [Mode::Relaxed, Mode::Private, Mode::Net] {
        for how in [Through::CloseWritten, Through::Read, Through::TaskTruncate] {
            bad.extend(stale_descriptor(mode, how));
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}
