//! Ordered sizes (`server/ordered.rs`): what a crash of the directory
//! leaves on the disk after a strong-mode growth (frames first, then the
//! size published by `Setattr`), write-backs of the pages under it, and
//! an fsync. A crash is the disk as it is: every write that landed,
//! none still held.

use super::super::*;
use super::fills::Rig;
use crate::fakedisk::Completion;
use fabric::proto::{PageKey, PageReply, PageReq, Request, Response};
use flatfs::MemDisk;
use nodepath::client::Client;

const P: u64 = 4096;

/// The file `ino` as a directory restarted on the disk now would see it.
fn after_crash(rig: &Rig, ino: u64) -> Vec<u8> {
    let img = rig.disk.with_disk(|d| d.blocks().to_vec());
    let mut fs = Fs::mount(MemDisk::from_bytes(img)).expect("the image mounts");
    let size = fs.getattr(ino).unwrap().size as usize;
    let mut v = vec![0u8; size];
    assert_eq!(fs.read(ino, 0, &mut v).unwrap(), size);
    v
}

/// Node `c` (node `node`) takes page `idx` of `ino` into its frame
/// `nth` and stores `v` over all of it (a strong-mode write).
/// Assert that a crash now leaves `ino` as `want` (`what` says why).
fn crash_shows(rig: &Rig, ino: u64, want: &[u8], what: &str) {
    let got = after_crash(rig, ino);
    let zeros = got.iter().filter(|&&b| b == 0).count();
    assert!(
        got == want,
        "{what}: after a crash the file holds {} bytes ({zeros} zero), want {} bytes",
        got.len(),
        want.len()
    );
}

fn store(rig: &Rig, c: &mut Client, node: u32, ino: u64, idx: u64, nth: u64, v: u8) {
    let (g0, _) = rig.layout.pool_gfns(node);
    let gfn = g0 + nth;
    let key = PageKey { ino, idx };
    assert_eq!(
        rig.call(c, &Rig::read(key, gfn)),
        Ok(Response::Page(PageReply::Owner { gfn }))
    );
    rig.mem
        .write(rig.layout.frame_off(gfn).unwrap(), &[v; P as usize]);
}

fn publish(rig: &Rig, c: &mut Client, ino: u64, size: u64) {
    let r = rig.call(
        c,
        &Request::Setattr {
            gen: 0,
            ino,
            size,
            expect: None,
            locked: false,
        },
    );
    assert!(
        matches!(r, Ok(Response::Attr(a)) if a.size == size),
        "{r:?}"
    );
}

fn evict(rig: &Rig, c: &mut Client, ino: u64, idx: u64) {
    let key = PageKey { ino, idx };
    let r = rig.call(c, &Request::Page(PageReq::Inv { key, dirty: true }));
    assert!(r.is_ok(), "{r:?}");
}

fn settle(rig: &Rig) {
    for _ in 0..20 {
        rig.step();
    }
}

/// Grow a one-page file to three pages and a bit in frames, publish the
/// size, crash: the old size, never the new one over zeros. Write back
/// the last page first: still the old size (the page under it is not on
/// the disk); then the middle one: the whole file. Grow again and fsync:
/// data and size are on the disk when the fsync is answered.
fn a_grown_size_is_recorded_only_over_its_data(fill_depth: usize) {
    let rig = Rig::new(2, 64, fill_depth);
    let mut a = rig.join(1);
    let ino = rig.file(&mut a, 1);
    settle(&rig);
    let old = vec![1u8; P as usize];
    crash_shows(&rig, ino, &old, "the file as written");

    store(&rig, &mut a, 1, ino, 1, 1, 0xA1);
    store(&rig, &mut a, 1, ino, 2, 2, 0xA2);
    let size = 2 * P + 100;
    publish(&rig, &mut a, ino, size);
    settle(&rig);
    crash_shows(
        &rig,
        ino,
        &old,
        "a crash after the size publication shows the old size",
    );

    evict(&rig, &mut a, ino, 2);
    settle(&rig);
    crash_shows(
        &rig,
        ino,
        &old,
        "page 1 is not on the disk yet: the size stays below it",
    );

    evict(&rig, &mut a, ino, 1);
    settle(&rig);
    let mut want = old.clone();
    want.extend([0xA1; P as usize]);
    want.extend([0xA2; 100]);
    crash_shows(&rig, ino, &want, "both pages written: all of it");

    // Grown again, then fsync'd without the node writing anything back
    // (another node's fsync, say): the directory writes the frames.
    store(&rig, &mut a, 1, ino, 2, 3, 0xB2);
    store(&rig, &mut a, 1, ino, 3, 4, 0xB3);
    publish(&rig, &mut a, ino, 4 * P);
    settle(&rig);
    crash_shows(&rig, ino, &want, "grown again, not synced");
    let r = rig.call(&mut a, &Request::Fsync { ino });
    assert_eq!(r, Ok(Response::Ok));
    let mut want = want[..2 * P as usize].to_vec();
    want.extend([0xB2; P as usize]);
    want.extend([0xB3; P as usize]);
    crash_shows(&rig, ino, &want, "fsync'd: data and size");
}

#[test]
fn a_grown_size_is_recorded_only_over_its_data_async() {
    a_grown_size_is_recorded_only_over_its_data(32);
}

#[test]
fn a_grown_size_is_recorded_only_over_its_data_sync() {
    a_grown_size_is_recorded_only_over_its_data(0);
}

/// A truncation below a held size is recorded at once, and a growth of
/// the file's new incarnation starts from it.
#[test]
fn a_truncation_under_a_held_size_is_recorded_at_once() {
    let rig = Rig::new(2, 64, 32);
    let mut a = rig.join(1);
    let ino = rig.file(&mut a, 2);
    settle(&rig);
    store(&rig, &mut a, 1, ino, 2, 2, 0xC2);
    publish(&rig, &mut a, ino, 3 * P);
    publish(&rig, &mut a, ino, 100);
    settle(&rig);
    crash_shows(&rig, ino, &[1u8; 100], "cut under a held size");
    store(&rig, &mut a, 1, ino, 0, 3, 0xD0);
    publish(&rig, &mut a, ino, P);
    settle(&rig);
    crash_shows(&rig, ino, &[1u8; 100], "page 0 not written back");
    evict(&rig, &mut a, ino, 0);
    settle(&rig);
    crash_shows(&rig, ino, &[0xD0; P as usize], "page 0 written back");
}

/// A write-back of a page past the end of the file (its writer stored it
/// and has not published the size yet) writes nothing, and the file's
/// version stays: nothing a reader can see changed (size, bytes), and
/// the writer's size publication over that version goes through. But its
/// writer is answered `written` and takes the page as clean: the
/// directory keeps it dirty, so its eviction after the publication (the
/// writer acking clean) still writes it back.
#[test]
fn a_write_back_past_the_end_keeps_the_page_dirty_until_it_is_in_the_file() {
    let rig = Rig::new(2, 64, 32);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let ino = rig.file(&mut a, 1);
    settle(&rig);
    let attr = |c: &mut Client| match rig.call(c, &Request::Getattr { ino }) {
        Ok(Response::Attr(a)) => a,
        r => panic!("{r:?}"),
    };
    let before = attr(&mut b);
    store(&rig, &mut a, 1, ino, 1, 1, 0xA1);
    let key = PageKey { ino, idx: 1 };
    let r = rig.call(
        &mut a,
        &Request::Page(PageReq::Writeback { key, dirty: true }),
    );
    assert_eq!(r, Ok(Response::Page(PageReply::Done { written: true })));
    settle(&rig);
    let seen = attr(&mut b);
    assert_eq!(
        (seen.size, seen.version),
        (before.size, before.version),
        "nothing changed"
    );
    crash_shows(&rig, ino, &[1u8; P as usize], "nothing written");
    let r = rig.call(
        &mut a,
        &Request::Setattr {
            gen: 0,
            ino,
            size: 2 * P,
            expect: Some(before.version),
            locked: false,
        },
    );
    assert!(
        matches!(r, Ok(Response::Attr(x)) if x.size == 2 * P),
        "{r:?}"
    );
    let r = rig.call(&mut a, &Request::Page(PageReq::Inv { key, dirty: false }));
    assert!(r.is_ok(), "{r:?}");
    settle(&rig);
    let mut want = vec![1u8; P as usize];
    want.extend([0xA1; P as usize]);
    crash_shows(&rig, ino, &want, "evicted after the size publication");
}

/// An fsync of a file with more grown pages cached than the write queue
/// holds writes them back a batch at a time as the queue drains (never
/// all at once: the directory's heap), and is answered only once all of
/// them and the whole size are on the disk.
#[test]
fn an_fsync_of_many_grown_pages_writes_them_back_in_bounded_batches() {
    let rig = Rig::with_config(1, 64, 32, |c| c.write_backlog_max = 16);
    let mut a = rig.join(1);
    let ino = rig.file(&mut a, 1);
    settle(&rig);
    let pages = 150u64;
    for idx in 1..=pages {
        store(&rig, &mut a, 1, ino, idx, idx, idx as u8);
    }
    publish(&rig, &mut a, ino, (pages + 1) * P);
    settle(&rig);
    let before = rig.dir.borrow().write_stats().max_held;
    assert!(before < 16, "{before}");
    let r = rig.call(&mut a, &Request::Fsync { ino });
    assert_eq!(r, Ok(Response::Ok));
    let held = rig.dir.borrow().write_stats().max_held;
    assert!(
        held <= 16 + 66,
        "{held} block writes held at once: a batch of 64 pages over the limit at most"
    );
    let mut want = vec![1u8; P as usize];
    for idx in 1..=pages {
        want.extend([idx as u8; P as usize]);
    }
    crash_shows(&rig, ino, &want, "fsync'd: every page and the size");
}

/// A synchronous wait for the writes in flight (a creation that raises
/// the sequence floor, `net` mode's changes) while an fsync settles a
/// file's pages waits for what is queued, not for the whole settling,
/// and the directory beats while it waits.
#[test]
fn a_drain_during_a_settling_waits_for_the_queue_not_for_every_page() {
    let rig = Rig::with_config(1, 64, 32, |c| c.write_backlog_max = 16);
    let mut a = rig.join(1);
    let ino = rig.file(&mut a, 1);
    settle(&rig);
    let pages = 300u64;
    for idx in 1..=pages {
        store(&rig, &mut a, 1, ino, idx, idx, idx as u8);
    }
    publish(&rig, &mut a, ino, (pages + 1) * P);
    settle(&rig);
    let tag = a
        .send(&*rig.mem, &Request::Fsync { ino }, &mut || true)
        .unwrap();
    rig.step(); // the settling starts
                // The disk completes one write per wait from now on.
    rig.disk.set_mode(Completion::Hold);
    let h = Header::new(&*rig.mem, rig.layout);
    let (beat, written) = (h.dir_heartbeat(), rig.dir.borrow().write_stats().submitted);
    rig.dir.borrow_mut().drain_writes(&*rig.mem, None);
    let during = rig.dir.borrow().write_stats().submitted - written;
    assert!(
        during < pages,
        "the drain wrote {during} blocks: it ran the whole settling"
    );
    assert!(
        h.dir_heartbeat() > beat,
        "the directory beat while it waited"
    );
    rig.disk.set_mode(Completion::InOrder);
    let mut answered = false;
    for _ in 0..2000 {
        rig.step();
        if let Some((t, _)) = a.recv(&*rig.mem).unwrap() {
            assert_eq!(t, tag);
            answered = true;
            break;
        }
    }
    assert!(answered, "the fsync is answered once the settling goes on");
    let mut bytes = vec![1u8; P as usize];
    for idx in 1..=pages {
        bytes.extend([idx as u8; P as usize]);
    }
    crash_shows(&rig, ino, &bytes, "fsync'd: every page and the size");
}
