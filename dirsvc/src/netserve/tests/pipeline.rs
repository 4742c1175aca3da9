//! Pipelining over one connection: a batch of reads answered in order,
//! and requests started without waiting beside synchronous calls.

use super::*;

#[test]
fn pipelined_reads_come_back_in_order_with_their_data() {
    let mut rig = Rig::new(41);
    let ino = rig.create("/p");
    let data = pattern(10 * 4096, 9);
    rig.write(ino, 0, &data).unwrap();
    let reqs: Vec<Request> = (0..12u64)
        .map(|i| Request::Data {
            gen: 0,
            op: Op::Read,
            slot: 1,
            at: 0,
            ino,
            offset: i * 4096,
            len: 4096,
        })
        .chain([Request::Getattr { ino }])
        .collect();
    let bytes = rig.client.request_batch(&reqs).unwrap();
    assert_eq!(rig.client.batch_pending(), reqs.len());
    // While a batch waits, nothing else can start one.
    assert_eq!(rig.client.request_batch(&reqs[..1]), Err(Errno::Invalid));
    let frames = rig.deliver_to_server(&bytes).unwrap();
    assert_eq!(frames.len(), reqs.len());
    let answers: Vec<u8> = frames.iter().flat_map(|f| rig.serve(f)).collect();
    let mut done = Vec::new();
    for c in rig.chunks(&answers) {
        rig.client.feed_batch(&c, &mut done).unwrap();
    }
    assert_eq!(rig.client.batch_pending(), 0);
    assert_eq!(done.len(), reqs.len());
    for (i, (resp, payload)) in done.iter().take(12).enumerate() {
        let want = data.get(i * 4096..(i + 1) * 4096).unwrap_or(&[]);
        assert!(matches!(resp, Response::Data { bytes, .. } if *bytes as usize == want.len()));
        assert_eq!(payload.as_slice(), want, "page {i}");
    }
    assert!(
        matches!(&done[12], (Response::Attr(a), p) if a.size == data.len() as u64 && p.is_empty())
    );
    // Requests with a payload cannot be pipelined; neither can too many.
    let w = Request::Data {
        gen: 0,
        op: Op::Write,
        slot: 2,
        at: 0,
        ino,
        offset: 0,
        len: 1,
    };
    assert_eq!(rig.client.request_batch(&[w]), Err(Errno::Invalid));
    let many = vec![Request::Getattr { ino }; MAX_BATCH + 1];
    assert_eq!(rig.client.request_batch(&many), Err(Errno::Invalid));
    // An answer out of order (wrong tag) is a broken connection.
    let bytes = rig.client.request_batch(&reqs[..2]).unwrap();
    let frames = rig.deliver_to_server(&bytes).unwrap();
    let second = rig.serve(&frames[1]);
    assert_eq!(rig.client.feed_batch(&second, &mut done), Err(Errno::Io));
    rig.client.reset();
    assert_eq!(rig.client.batch_pending(), 0);
    // The single-request path still works after a reset.
    assert_eq!(rig.read(ino, 0, 4).unwrap(), data[..4].to_vec());
}

/// Tasks' metadata calls over TCP: requests started without waiting
/// (`NetClient::start`) share the connection's order with a synchronous
/// request and a pipelined batch sent after them; each answer is kept for
/// its caller, a forgotten one is dropped, and a reset loses the rest.
#[test]
fn started_requests_are_answered_in_order_beside_sync_calls_and_batches() {
    let mut rig = Rig::new(43);
    let ino = rig.create("/s");
    rig.write(ino, 0, &pattern(8192, 3)).unwrap();
    // Two started calls, each path staged at the start of slot 0 and
    // copied into its frame at once (the slot is restaged for the next).
    let mut wire = Vec::new();
    rig.client.bulk_write(0, 0, b"/s").unwrap();
    let look = Request::Path {
        op: Op::Lookup,
        slot: 0,
        at: 0,
        len: 2,
        exclusive: false,
    };
    let (a, bytes) = rig.client.start(&look);
    wire.extend(bytes);
    rig.client.bulk_write(0, 0, b"/new").unwrap();
    let (b, bytes) = rig.client.start(&Request::Path {
        op: Op::Create,
        slot: 0,
        at: 0,
        len: 4,
        exclusive: true,
    });
    wire.extend(bytes);
    let (gone, bytes) = rig.client.start(&Request::Getattr { ino });
    wire.extend(bytes);
    rig.client.forget(gone);
    // A batch of reads and a readdir behind them.
    let read = |i: u64| Request::Data {
        gen: 0,
        op: Op::Read,
        slot: 1,
        at: 0,
        ino,
        offset: i * 4096,
        len: 4096,
    };
    wire.extend(rig.client.request_batch(&[read(0), read(1)]).unwrap());
    let (d, bytes) = rig.client.start(&Request::Readdir {
        slot: 3,
        ino: 1,
        cookie: 0,
    });
    wire.extend(bytes);
    assert_eq!(rig.client.outstanding(), 6);
    assert_eq!(rig.client.take(a), None, "not answered yet");
    let frames = rig.deliver_to_server(&wire).unwrap();
    assert_eq!(frames.len(), 6);
    let answers: Vec<u8> = frames.iter().flat_map(|f| rig.serve(f)).collect();
    let mut done = Vec::new();
    for c in rig.chunks(&answers) {
        rig.client.feed_batch(&c, &mut done).unwrap();
    }
    assert_eq!(done.len(), 2, "the batch, in order");
    assert_eq!(done[0].1, pattern(8192, 3)[..4096].to_vec());
    assert_eq!(done[1].1, pattern(8192, 3)[4096..].to_vec());
    assert!(matches!(rig.client.take(a), Some(Ok(Response::Attr(x))) if x.ino == ino));
    let Some(Ok(Response::Attr(n))) = rig.client.take(b) else {
        panic!("create /new")
    };
    assert_eq!(
        rig.client.take(gone),
        Some(Err(Errno::Unavailable)),
        "forgotten"
    );
    // The readdir's records land in slot 3 when its answer is taken.
    let Some(Ok(Response::Entries { count, .. })) = rig.client.take(d) else {
        panic!("readdir")
    };
    assert_eq!(count, 2);
    let mut rec = [0u8; DIRENT_SIZE];
    rig.client.bulk_read(3, &mut rec).unwrap();
    let e = DirEntry::decode(&rec).unwrap();
    assert!(e.name == "s" || e.name == "new", "{e:?}");
    assert_eq!(rig.client.take(a), Some(Err(Errno::Unavailable)), "taken");
    assert_eq!(rig.client.outstanding(), 0);
    // A synchronous call goes through while a started one waits; the
    // started one's answer, met first, is kept.
    let (g, bytes) = rig.client.start(&Request::Getattr { ino: n.ino });
    let mut wire = bytes;
    wire.extend(rig.client.request(&Request::Getattr { ino }));
    let frames = rig.deliver_to_server(&wire).unwrap();
    let answers: Vec<u8> = frames.iter().flat_map(|f| rig.serve(f)).collect();
    let got = rig.deliver_to_client(&answers).unwrap();
    assert!(matches!(got, Some(Response::Attr(x)) if x.ino == ino));
    assert!(matches!(rig.client.take(g), Some(Ok(Response::Attr(x))) if x.ino == n.ino));
    // A reset loses what is outstanding.
    let (lost, _) = rig.client.start(&Request::Getattr { ino });
    rig.client.reset();
    assert_eq!(rig.client.take(lost), Some(Err(Errno::Unavailable)));
    assert_eq!(rig.read(ino, 0, 4).unwrap(), pattern(8192, 3)[..4].to_vec());
}
