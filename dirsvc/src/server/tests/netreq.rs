//! `net` mode's requests against the fake asynchronous disk: reads,
//! writes, namespace changes and fsyncs wait for the device in the same
//! queues as the ring path's, the loop serves other requests meanwhile,
//! and each answer comes out of `take_net_answers` with its token.

use super::super::*;
use super::fileread::read_req;
use super::fills::Rig;
use crate::fakedisk::Completion;
use fabric::netwire::Frame;
use fabric::proto::{Errno, Request, Response};

/// `req` (tag `tag`) as a request frame, with `payload`.
fn frame(req: &Request, tag: u32, payload: &[u8]) -> Frame {
    Frame {
        desc: req.encode(tag),
        payload: payload.to_vec(),
    }
}

/// Serve `req` from node `node`'s link with `token`.
fn serve(rig: &Rig, node: u32, req: &Request, payload: &[u8], token: u64) -> Option<Frame> {
    rig.dir
        .borrow_mut()
        .serve_net(&*rig.mem, node, &frame(req, token as u32, payload), token)
}

fn write(ino: u64, idx: u64) -> Request {
    Request::Data {
        gen: 0,
        op: Op::Write,
        slot: 2,
        at: 0,
        ino,
        offset: idx * 4096,
        len: 4096,
    }
}

fn decode(f: &Frame, op: Op) -> Response {
    Response::decode(&f.desc, op).unwrap().1
}

/// Run the loop until `n` answers came out (bounded); them, by token.
fn answers(rig: &Rig, n: usize) -> Vec<NetAnswer> {
    let mut out = Vec::new();
    for _ in 0..200 {
        rig.step();
        out.extend(rig.dir.borrow_mut().take_net_answers());
        if out.len() >= n {
            break;
        }
    }
    out.sort_by_key(|a| a.token);
    out
}

#[test]
fn a_net_read_waits_for_the_disk_while_other_requests_are_answered() {
    let rig = Rig::new(2, 32, 32);
    let mut a = rig.join(1);
    let ino = rig.file(&mut a, 3);
    rig.disk.set_mode(Completion::Hold);
    let submitted = rig.disk.submitted();
    assert!(serve(&rig, 1, &read_req(ino, 100, 8192), &[], 7).is_none());
    assert_eq!(
        rig.disk.submitted() - submitted,
        3,
        "one device read per block"
    );
    // The loop and the link go on: a metadata call is answered now.
    rig.step();
    let got = serve(&rig, 1, &Request::Getattr { ino }, &[], 8).expect("answered now");
    assert!(matches!(decode(&got, Op::Getattr), Response::Attr(x) if x.size == 3 * 4096));
    assert!(rig.dir.borrow_mut().take_net_answers().is_empty());
    rig.disk.set_mode(Completion::InOrder);
    assert!(rig.disk.complete(1));
    assert!(rig.disk.complete(0));
    assert!(rig.disk.complete(0));
    let got = answers(&rig, 1);
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].node, got[0].token), (1, 7));
    assert!(matches!(
        decode(&got[0].frame, Op::Read),
        Response::Data { bytes: 8192, .. }
    ));
    let mut want = vec![1u8; 4096 - 100];
    want.extend([2u8; 4096]);
    want.extend([3u8; 100]);
    assert_eq!(got[0].frame.payload, want, "the bytes travel in the frame");
    assert_eq!(rig.dir.borrow().net_answered_later(), 1);
    assert_eq!(rig.dir.borrow().reads_pending(), 0);
}

#[test]
fn net_writes_creates_and_fsyncs_are_answered_once_their_blocks_landed() {
    let rig = Rig::new(1, 32, 32);
    let mut a = rig.join(1);
    let ino = rig.file(&mut a, 2);
    rig.disk.set_mode(Completion::Hold);
    assert!(serve(&rig, 1, &write(ino, 0), &[9u8; 4096], 1).is_none());
    // A read of the block being written sees the new bytes at once.
    let r = serve(&rig, 1, &read_req(ino, 0, 4096), &[], 2).expect("from the pending write");
    assert_eq!(r.payload, vec![9u8; 4096]);
    assert!(serve(&rig, 1, &Request::Fsync { ino }, &[], 3).is_none());
    let create = Request::Path {
        op: Op::Create,
        slot: 0,
        at: 0,
        len: 2,
        exclusive: true,
    };
    assert!(serve(&rig, 1, &create, b"/g", 4).is_none());
    rig.step();
    assert!(
        rig.dir.borrow_mut().take_net_answers().is_empty(),
        "nothing landed"
    );
    rig.disk.set_mode(Completion::InOrder);
    let got = answers(&rig, 3);
    let tokens: Vec<u64> = got.iter().map(|a| a.token).collect();
    assert_eq!(tokens, [1, 3, 4]);
    assert!(matches!(
        decode(&got[0].frame, Op::Write),
        Response::Data { bytes: 4096, .. }
    ));
    assert_eq!(decode(&got[1].frame, Op::Fsync), Response::Ok);
    assert!(matches!(
        decode(&got[2].frame, Op::Create),
        Response::Attr(_)
    ));
    assert!(got.iter().all(|a| a.frame.payload.is_empty()));
    // On the disk: the file's new bytes, and /g.
    let r = serve(&rig, 1, &read_req(ino, 0, 4096), &[], 5);
    let r = r
        .or_else(|| answers(&rig, 1).pop().map(|a| a.frame))
        .unwrap();
    assert_eq!(r.payload, vec![9u8; 4096]);
    let lookup = Request::Path {
        op: Op::Lookup,
        slot: 0,
        at: 0,
        len: 2,
        exclusive: false,
    };
    let l = serve(&rig, 1, &lookup, b"/g", 6).expect("a lookup is answered now");
    assert!(matches!(decode(&l, Op::Lookup), Response::Attr(_)));
}

#[test]
fn a_failed_net_node_gets_no_late_read_answer() {
    let rig = Rig::new(2, 32, 32);
    let mut a = rig.join(1);
    let _b = rig.join(2);
    let ino = rig.file(&mut a, 1);
    rig.disk.set_mode(Completion::Hold);
    assert!(serve(&rig, 1, &read_req(ino, 0, 4096), &[], 1).is_none());
    assert!(rig.fail_silent(1, 2));
    rig.disk.set_mode(Completion::InOrder);
    for _ in 0..10 {
        rig.step();
    }
    assert!(rig.dir.borrow_mut().take_net_answers().is_empty());
    assert_eq!(rig.dir.borrow().reads_pending(), 0);
    // Not a member now: refused at once.
    let r = serve(&rig, 1, &Request::Getattr { ino }, &[], 2).unwrap();
    assert_eq!(decode(&r, Op::Getattr), Response::Err(Errno::Unavailable));
}

#[test]
fn fill_depth_zero_answers_net_requests_at_once() {
    let rig = Rig::new(1, 8, 0);
    let mut a = rig.join(1);
    let ino = rig.file(&mut a, 1);
    rig.disk.set_mode(Completion::Hold);
    let r = serve(&rig, 1, &read_req(ino, 0, 4096), &[], 1).expect("synchronous");
    assert_eq!(r.payload, vec![1u8; 4096]);
    let w = serve(&rig, 1, &write(ino, 0), &[5u8; 4096], 2).expect("synchronous");
    assert!(matches!(
        decode(&w, Op::Write),
        Response::Data { bytes: 4096, .. }
    ));
    assert_eq!(rig.disk.submitted(), 0, "nothing asynchronous");
    assert_eq!(rig.dir.borrow().net_answered_later(), 0);
}

/// A device flush in flight (an fsync's) holds one of the device's slots:
/// the writes that follow must leave it room, or the device refuses one
/// of them and the write fails (`Io`) with part of its blocks on the disk.
#[test]
fn writes_behind_an_fsync_leave_room_for_its_flush() {
    let rig = Rig::new(1, 8, 32);
    let mut a = rig.join(1);
    let ino = rig.file(&mut a, 1);
    rig.disk.set_mode(Completion::Hold);
    assert!(
        serve(&rig, 1, &Request::Fsync { ino: 0 }, &[], 1).is_none(),
        "the flush is in flight"
    );
    let w = Request::Data {
        gen: 0,
        op: Op::Write,
        slot: 2,
        at: 0,
        ino,
        offset: 0,
        len: 65536,
    };
    assert!(serve(&rig, 1, &w, &[7u8; 65536], 2).is_none());
    assert!(rig.disk.in_flight().len() <= 8, "within the device's depth");
    rig.disk.set_mode(Completion::InOrder);
    let got = answers(&rig, 2);
    assert_eq!(got.len(), 2);
    assert_eq!(decode(&got[0].frame, Op::Fsync), Response::Ok);
    assert!(matches!(
        decode(&got[1].frame, Op::Write),
        Response::Data { bytes: 65536, .. }
    ));
    let r = serve(&rig, 1, &read_req(ino, 0, 65536), &[], 3);
    let r = r
        .or_else(|| answers(&rig, 1).pop().map(|a| a.frame))
        .unwrap();
    assert_eq!(r.payload, vec![7u8; 65536]);
}
