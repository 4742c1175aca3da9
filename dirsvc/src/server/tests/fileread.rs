//! Asynchronous file-server reads (`private` mode's misses over the
//! rings): the loop against a heap region, the fake asynchronous disk and
//! real node clients.

use super::super::*;
use super::fills::Rig;
use crate::fakedisk::Completion;
use fabric::proto::{Errno, PageKey, PageReply, Request, Response};
use nodepath::client::Client;

/// A read of `len` bytes at `offset` of `ino` into slot 1.
pub(super) fn read_req(ino: u64, offset: u64, len: u32) -> Request {
    Request::Data {
        gen: 0,
        op: Op::Read,
        slot: 1,
        at: 0,
        ino,
        offset,
        len,
    }
}

/// Take `c`'s answers, decoded as answers to file reads, by tag.
fn data_answers(rig: &Rig, c: &mut Client) -> Vec<(u32, Result<u32, Errno>)> {
    let mut out = Vec::new();
    while let Some((tag, d)) = c.recv(&*rig.mem).unwrap() {
        match Response::decode(&d, Op::Read) {
            Ok((_, Response::Data { bytes, .. })) => out.push((tag, Ok(bytes))),
            Ok((_, Response::Err(e))) => out.push((tag, Err(e))),
            x => panic!("not a read's answer: {x:?}"),
        }
    }
    out
}

/// The first `n` bytes of `c`'s slot 1.
fn slot1(rig: &Rig, c: &mut Client, n: usize) -> Vec<u8> {
    let (off, _) = c.bulk(1).unwrap();
    let mut v = vec![0u8; n];
    rig.mem.read(off, &mut v);
    v
}

#[test]
fn a_file_read_goes_to_the_disk_while_the_loop_serves_others() {
    let rig = Rig::new(2, 32, 32);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let ino = rig.file(&mut a, 3);
    let (b0, _) = rig.layout.pool_gfns(2);
    // Node 2 caches page 0 as a single copy (a fill, completed at once).
    assert_eq!(
        rig.call(&mut b, &Rig::read(PageKey { ino, idx: 0 }, b0)),
        Ok(Response::Page(PageReply::Owner { gfn: b0 }))
    );
    // Node 1 reads 8192 bytes from offset 100: blocks 0, 1 and 2.
    rig.disk.set_mode(Completion::Hold);
    let reads = rig.disk.submitted();
    let tag = a
        .send(&*rig.mem, &read_req(ino, 100, 8192), &mut || true)
        .unwrap();
    for _ in 0..5 {
        rig.step();
    }
    assert_eq!(rig.disk.submitted() - reads, 3, "one device read per block");
    assert_eq!(rig.disk.in_flight().len(), 3, "all in flight together");
    assert!(
        data_answers(&rig, &mut a).is_empty(),
        "no answer before the disk"
    );
    assert_eq!(rig.dir.borrow().reads_pending(), 1);
    // Node 2's metadata call and its lookup of its cached page are
    // answered meanwhile.
    assert!(matches!(
        rig.call(&mut b, &Request::Getattr { ino }),
        Ok(Response::Attr(x)) if x.size == 3 * 4096
    ));
    assert_eq!(
        rig.call(&mut b, &Rig::read(PageKey { ino, idx: 0 }, b0 + 1)),
        Ok(Response::Page(PageReply::Owner { gfn: b0 }))
    );
    // Blocks arrive out of order; the answer waits for the last one.
    assert!(rig.disk.complete(2));
    assert!(rig.disk.complete(0));
    rig.step();
    assert!(data_answers(&rig, &mut a).is_empty(), "one block still out");
    assert!(rig.disk.complete(0));
    let p = rig.step();
    assert_ne!(p.responded & 1, 0, "node 1 is reported for its doorbell");
    assert_eq!(data_answers(&rig, &mut a), vec![(tag, Ok(8192))]);
    let got = slot1(&rig, &mut a, 8192);
    let mut want = vec![1u8; 4096 - 100];
    want.extend([2u8; 4096]);
    want.extend([3u8; 100]);
    assert_eq!(got, want, "the bytes of blocks 0..=2 from offset 100");
    assert_eq!(rig.dir.borrow().reads_pending(), 0);
    assert_eq!(rig.dir.borrow().fills_pending(), 0);
}

#[test]
fn a_file_read_is_short_at_the_end_and_empty_past_it() {
    let rig = Rig::new(1, 32, 32);
    let mut a = rig.join(1);
    let ino = rig.file(&mut a, 2);
    assert!(matches!(
        rig.call(&mut a, &read_req(ino, 4096 + 4000, 4096)),
        Ok(Response::Data { bytes: 96, .. })
    ));
    assert_eq!(slot1(&rig, &mut a, 96), vec![2u8; 96]);
    let reads = rig.disk.submitted();
    assert!(matches!(
        rig.call(&mut a, &read_req(ino, 1 << 20, 4096)),
        Ok(Response::Data { bytes: 0, .. })
    ));
    assert_eq!(
        rig.disk.submitted(),
        reads,
        "nothing to read: no device read"
    );
    // Bad requests are refused at once: a length past the slot, a
    // directory, an unknown file.
    assert_eq!(
        rig.call(&mut a, &read_req(ino, 0, u32::MAX)),
        Err(Errno::Invalid)
    );
    assert_eq!(rig.call(&mut a, &read_req(1, 0, 4096)), Err(Errno::IsDir));
    assert_eq!(
        rig.call(&mut a, &read_req(999, 0, 4096)),
        Err(Errno::NotFound)
    );
    assert_eq!(rig.dir.borrow().reads_pending(), 0);
}

#[test]
fn a_bad_block_fails_its_file_read_with_an_io_error() {
    let rig = Rig::new(1, 8, 32);
    let mut a = rig.join(1);
    let ino = rig.file(&mut a, 2);
    // A damaged block: its checksum does not match.
    let lba = rig.dir.borrow().fs().unwrap().file_blocks(ino).unwrap()[1];
    rig.disk
        .with_disk(|d| d.blocks_mut()[lba as usize * 4096] ^= 0xff);
    assert_eq!(rig.call(&mut a, &read_req(ino, 0, 8192)), Err(Errno::Io));
    // A device error.
    rig.disk.fail_next_reads(1);
    assert_eq!(rig.call(&mut a, &read_req(ino, 0, 4096)), Err(Errno::Io));
    // The good block still reads.
    assert!(matches!(
        rig.call(&mut a, &read_req(ino, 0, 4096)),
        Ok(Response::Data { bytes: 4096, .. })
    ));
    assert_eq!(rig.dir.borrow().reads_pending(), 0);
}

/// A block the device refuses to start fails its file read (answered
/// `Io` once its other blocks are in), and only it: another node's page
/// fill of the same page goes on.
#[test]
fn a_refused_block_fails_its_file_read_not_a_page_fill() {
    let rig = Rig::new(2, 8, 32);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let ino = rig.file(&mut a, 2);
    let (b0, _) = rig.layout.pool_gfns(2);
    rig.disk.set_mode(Completion::Hold);
    let fill = b
        .send(
            &*rig.mem,
            &Rig::read(PageKey { ino, idx: 0 }, b0),
            &mut || true,
        )
        .unwrap();
    rig.step();
    assert_eq!(rig.disk.in_flight().len(), 1, "node 2's fill of page 0");
    rig.disk.refuse_next_reads(1);
    let tag = a
        .send(&*rig.mem, &read_req(ino, 0, 8192), &mut || true)
        .unwrap();
    rig.step();
    assert_eq!(
        rig.disk.in_flight().len(),
        2,
        "block 1 went out, block 0 was refused"
    );
    assert!(data_answers(&rig, &mut a).is_empty(), "block 1 still out");
    rig.disk.set_mode(Completion::InOrder);
    for _ in 0..5 {
        rig.step();
    }
    assert_eq!(data_answers(&rig, &mut a), vec![(tag, Err(Errno::Io))]);
    let got = super::fills::answers(&rig, &mut b);
    assert_eq!(got, vec![(fill, PageReply::Owner { gfn: b0 })]);
    assert_eq!(rig.frame(b0), [1u8; 4096]);
    assert_eq!(rig.dir.borrow().reads_pending(), 0);
}

#[test]
fn a_file_read_sees_a_write_still_in_flight() {
    let rig = Rig::new(1, 8, 32);
    let mut a = rig.join(1);
    let ino = rig.file(&mut a, 1);
    // A write whose block writes the device holds (it is answered once
    // they landed).
    rig.disk.set_mode(Completion::Hold);
    rig.send_write(&mut a, ino, 0, 0x77);
    rig.step();
    assert!(!rig.disk.writes_in_flight().is_empty(), "the write flies");
    let reads = rig.disk.submitted();
    let tag = a
        .send(&*rig.mem, &read_req(ino, 0, 4096), &mut || true)
        .unwrap();
    rig.step();
    assert_eq!(
        rig.disk.submitted(),
        reads,
        "the pending bytes, not the device"
    );
    let got = data_answers(&rig, &mut a);
    assert!(got.contains(&(tag, Ok(4096))), "{got:?}");
    assert_eq!(slot1(&rig, &mut a, 4096), vec![0x77; 4096]);
}

#[test]
fn a_node_failing_during_its_file_read_gets_no_bytes_in_its_slot() {
    let rig = Rig::new(2, 8, 32);
    let mut a = rig.join(1);
    let ino = rig.file(&mut a, 1);
    rig.disk.set_mode(Completion::Hold);
    a.send(&*rig.mem, &read_req(ino, 0, 4096), &mut || true)
        .unwrap();
    rig.step();
    assert_eq!(rig.disk.in_flight().len(), 1);
    // Node 1 goes silent and is failed.
    assert!(rig.fail_silent(1, 2));
    assert_eq!(rig.dir.borrow().reads_pending(), 0, "dropped");
    let (off, _) = a.bulk(1).unwrap();
    rig.mem.write(off, &[0xAB; 4096]);
    assert!(rig.disk.complete(0));
    let p = rig.step();
    assert_eq!(p.completed, 1);
    assert_eq!(
        slot1(&rig, &mut a, 4096),
        vec![0xAB; 4096],
        "late read discarded"
    );
    assert_eq!(rig.dir.borrow().disk_queue_stats().cancelled, 1);
}

#[test]
fn a_write_of_the_file_waits_for_its_reads_in_flight() {
    let rig = Rig::new(2, 8, 32);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let ino = rig.file(&mut a, 1);
    rig.disk.set_mode(Completion::Hold);
    let tag = a
        .send(&*rig.mem, &read_req(ino, 0, 4096), &mut || true)
        .unwrap();
    rig.step();
    assert_eq!(rig.disk.in_flight().len(), 1);
    // Node 2's write of the block is served only after the read landed:
    // node 1 gets the bytes from before the write.
    rig.write_then_release(&mut b, ino, 0, 0x55);
    assert_eq!(data_answers(&rig, &mut a), vec![(tag, Ok(4096))]);
    assert_eq!(slot1(&rig, &mut a, 4096), vec![1u8; 4096]);
    assert_eq!(rig.dir.borrow().disk_queue_stats().barriers, 1);
    rig.disk.set_mode(Completion::InOrder);
    assert!(matches!(
        rig.call(&mut a, &read_req(ino, 0, 4096)),
        Ok(Response::Data { bytes: 4096, .. })
    ));
    assert_eq!(slot1(&rig, &mut a, 4096), vec![0x55; 4096]);
}

#[test]
fn fill_depth_zero_keeps_file_reads_synchronous() {
    let rig = Rig::new(1, 8, 0);
    let mut a = rig.join(1);
    let ino = rig.file(&mut a, 1);
    rig.disk.set_mode(Completion::Hold);
    assert!(matches!(
        rig.call(&mut a, &read_req(ino, 0, 4096)),
        Ok(Response::Data { bytes: 4096, .. })
    ));
    assert_eq!(rig.disk.submitted(), 0, "no asynchronous read");
    assert_eq!(slot1(&rig, &mut a, 4096), vec![1u8; 4096]);
}
