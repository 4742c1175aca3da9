//! The properties: a hostile stream served one frame at a time, the
//! whole stream pipelined, every split point, and the image at the end.

use super::*;

/// The hostile node's stream, one frame served and drained at a time: each
/// frame's answer is checked, and a refused one left the disk as it was.
/// Node 2 writes and reads back between pieces; a node that never joined
/// is refused; the image mounts and verifies at the end.
pub(super) fn one_at_a_time(
    seed: u64,
    pieces: Vec<Piece>,
    cuts: Cuts,
    honest_ops: Vec<(u64, usize, u8)>,
) -> Result<(), TestCaseError> {
    let (mut net, mut honest, _known) = setup(seed);
    let mut honest_ops = honest_ops.into_iter();
    let (mut served, mut refused, mut drops) = (0usize, 0usize, 0usize);
    // The image with every request so far done.
    let mut before = net.image();
    for p in &pieces {
        // A dropped connection loses the rest of the piece; the node
        // reconnects for the next one.
        let mut dropped = false;
        for chunk in chunks(&p.bytes(), &cuts) {
            if dropped {
                break;
            }
            net.push(HOSTILE, &chunk);
            let buffered = net.link(HOSTILE).reader.buffered();
            prop_assert!(
                buffered <= chunk.len() + 2 * (MAX_PAYLOAD + 72),
                "{}",
                buffered
            );
            loop {
                match net.serve_one(HOSTILE) {
                    Served::Nothing => break,
                    Served::Dropped => {
                        drops += 1;
                        dropped = true;
                        break;
                    }
                    Served::Frame(req) => {
                        served += 1;
                        net.drain();
                        let out = net.take_out(HOSTILE);
                        let got = answers(&out);
                        prop_assert_eq!(got.len(), 1, "one answer per frame");
                        let after = net.image();
                        if let Some(e) = check_answer(&req, &got[0])? {
                            refused += 1;
                            prop_assert!(
                                after == before,
                                "refused ({:?}) {:?} changed the disk",
                                e,
                                Raw::decode(&req.desc)
                            );
                        }
                        before = after;
                    }
                }
            }
        }
        // Node 2 is served all along.
        if let Some((off, len, seed)) = honest_ops.next() {
            honest.write_and_read(&mut net, off, len, seed)?;
            before = net.image();
        }
    }
    STATS.with(|s| {
        let mut s = s.borrow_mut();
        s.0 += served;
        s.1 += refused;
        s.2 += drops;
    });
    // A node that never joined: refused, nothing runs.
    let before = net.image();
    net.push(
        STRANGER,
        &Frame {
            desc: Request::Getattr { ino: honest.ino }.encode(5),
            payload: Vec::new(),
        }
        .to_bytes(),
    );
    let Served::Frame(req) = net.serve_one(STRANGER) else {
        panic!("a whole frame")
    };
    net.drain();
    let got = answers(&net.take_out(STRANGER));
    prop_assert_eq!(check_answer(&req, &got[0])?, Some(Errno::Unavailable));
    prop_assert!(net.image() == before);
    // The hostile node, on a new connection, is served.
    net.link(HOSTILE).reset();
    let nop = Frame {
        desc: Request::Nop.encode(9),
        payload: Vec::new(),
    };
    net.push(HOSTILE, &nop.to_bytes());
    prop_assert!(matches!(net.serve_one(HOSTILE), Served::Frame(_)));
    net.drain();
    let got = answers(&net.take_out(HOSTILE));
    prop_assert_eq!(check_answer(&nop, &got[0])?, None);
    verify_image(&mut net, &mut honest)?;
    Ok(())
}

/// The whole stream at once, served as the kernel's link serves it: every
/// complete frame as soon as it is in, answers released in request order
/// while the disk completes requests in any order; node 2's calls
/// interleaved.
pub(super) fn pipelined(
    seed: u64,
    pieces: Vec<Piece>,
    cuts: Cuts,
    honest_ops: Vec<(u64, usize, u8)>,
) -> Result<(), TestCaseError> {
    let (mut net, mut honest, _known) = setup(seed);
    let mut stream = Vec::new();
    // Where each piece starts: a dropped connection loses the rest of its
    // piece, the node reconnects for the next one.
    let mut starts = Vec::new();
    for p in &pieces {
        starts.push(stream.len());
        stream.extend(p.bytes());
    }
    let mut honest_ops = honest_ops.into_iter();
    // Requests served on the current connection, not answered yet.
    let mut sent: std::collections::VecDeque<Frame> = Default::default();
    let mut peer = FrameReader::new();
    let take_answers =
        |net: &mut Net, sent: &mut std::collections::VecDeque<Frame>, peer: &mut FrameReader| {
            peer.push(&net.take_out(HOSTILE));
            while let Some(a) = peer.next_frame().expect("valid answers") {
                let req = sent.pop_front().expect("an answer to a request");
                check_answer(&req, &a)?;
            }
            Ok::<(), TestCaseError>(())
        };
    let mut sizes = match &cuts {
        Cuts::Bytes => Vec::new(),
        Cuts::At(at) => at.clone(),
    }
    .into_iter();
    let mut at = 0;
    let mut k = 0;
    while at < stream.len() {
        let n = match cuts {
            Cuts::Bytes => 1,
            Cuts::At(_) => sizes.next().unwrap_or(stream.len()),
        };
        let end = (at + n).min(stream.len());
        net.push(HOSTILE, &stream[at..end]);
        at = end;
        loop {
            match net.serve_one(HOSTILE) {
                Served::Nothing => break,
                Served::Frame(f) => sent.push_back(f),
                Served::Dropped => {
                    // Answers not sent yet are lost with the connection.
                    sent.clear();
                    peer.reset();
                    at = starts
                        .iter()
                        .copied()
                        .find(|&s| s >= at)
                        .unwrap_or(stream.len());
                    break;
                }
            }
        }
        if k % 3 == 0 {
            net.step();
        }
        take_answers(&mut net, &mut sent, &mut peer)?;
        if k % 7 == 0 {
            if let Some((off, len, seed)) = honest_ops.next() {
                honest.write_and_read(&mut net, off, len, seed)?;
            }
        }
        k += 1;
    }
    net.drain();
    take_answers(&mut net, &mut sent, &mut peer)?;
    prop_assert!(
        sent.is_empty(),
        "every request answered: {} left",
        sent.len()
    );
    for (off, len, seed) in honest_ops {
        honest.write_and_read(&mut net, off, len, seed)?;
    }
    verify_image(&mut net, &mut honest)
}

/// The disk image as flatfs sees it: it mounts, every data checksum
/// verifies, and node 2's file on it holds what the directory serves
/// (its first slot's worth).
pub(super) fn verify_image(net: &mut Net, honest: &mut Honest) -> Result<(), TestCaseError> {
    net.drain();
    let mut fs = Fs::mount(MemDisk::from_bytes(net.image()));
    prop_assert!(fs.is_ok(), "the image mounts: {:?}", fs.as_ref().err());
    let fs = fs.as_mut().unwrap();
    let bad = fs.check_data();
    prop_assert!(
        matches!(&bad, Ok(b) if b.is_empty()),
        "checksums: {:?}",
        bad
    );
    let size = fs.getattr(honest.ino).map(|a| a.size);
    prop_assert!(size.is_ok(), "node 2's file is on the disk");
    let n = (size.unwrap() as usize).min(MAX_PAYLOAD);
    let mut on_disk = vec![0u8; n];
    prop_assert_eq!(fs.read(honest.ino, 0, &mut on_disk), Ok(n));
    let r = Request::Data {
        gen: 0,
        op: Op::Read,
        slot: 1,
        at: 0,
        ino: honest.ino,
        offset: 0,
        len: n as u32,
    };
    let got = honest.call(net, &r);
    prop_assert!(
        matches!(got, Ok(Response::Data { bytes, .. }) if bytes as usize == n),
        "{:?}",
        got
    );
    let mut served = vec![0u8; n];
    honest.client.bulk_read(1, &mut served).unwrap();
    prop_assert!(
        served == on_disk,
        "the disk holds what the directory serves"
    );
    Ok(())
}

pub(super) fn honest_ops() -> impl Strategy<Value = Vec<(u64, usize, u8)>> {
    proptest::collection::vec((0..20_000u64, 1..5000usize, any::<u8>()), 0..4)
}

pub(super) fn known() -> [u64; 3] {
    // The inodes `setup` creates: node 2's file, /d and /d/f (a fresh
    // image numbers them in creation order after the root).
    [2, 3, 4]
}

thread_local! {
    /// Answers by opcode: (ok, error).
    pub(super) static OUTCOMES: std::cell::RefCell<std::collections::BTreeMap<String, (usize, usize)>> = Default::default();
    /// Frames served, refused, connections dropped.
    pub(super) static STATS: std::cell::RefCell<(usize, usize, usize)> = Default::default();
}

/// A stream of valid and invalid frames split in two at every byte
/// boundary: the same answers (opcode, tag, status, payload) each time.
pub(super) fn every_split_point(net: &mut Net, known: &Known) {
    let write = Request::Data {
        gen: 0,
        op: Op::Write,
        slot: 2,
        at: 0,
        ino: known.file,
        offset: 100,
        len: 300,
    };
    let read = Request::Data {
        gen: 0,
        op: Op::Read,
        slot: 1,
        at: 0,
        ino: known.file,
        offset: 0,
        len: 500,
    };
    let bad_slot = Request::Readdir {
        slot: 4,
        ino: known.dir,
        cookie: 0,
    };
    let frames = [
        (Request::Nop.encode(1), Vec::new()),
        (write.encode(2), vec![0x33; 300]),
        (
            Raw {
                op: 0x7777,
                status: 0,
                tag: 3,
                args: [1; 7],
            }
            .encode(),
            Vec::new(),
        ),
        (read.encode(4), Vec::new()),
        (bad_slot.encode(5), Vec::new()),
        (
            Request::Getattr { ino: u64::MAX }.encode(6),
            b"junk".to_vec(),
        ),
        (Request::Getattr { ino: known.file }.encode(7), Vec::new()),
    ];
    let mut stream = Vec::new();
    for (d, p) in &frames {
        encode_frame(d, p, &mut stream);
    }
    let run = |net: &mut Net, parts: [&[u8]; 2]| {
        net.link(HOSTILE).reset();
        for part in parts {
            net.push(HOSTILE, part);
            while let Served::Frame(_) = net.serve_one(HOSTILE) {}
        }
        net.drain();
        answers(&net.take_out(HOSTILE))
            .into_iter()
            .map(|a| {
                let r = Raw::decode(&a.desc);
                (r.op, r.tag, r.status, a.payload)
            })
            .collect::<Vec<_>>()
    };
    let want = run(net, [&stream, &[]]);
    assert_eq!(want.len(), frames.len());
    let statuses: Vec<u16> = want.iter().map(|a| a.2).collect();
    let inv = Errno::Invalid as u16;
    assert_eq!(statuses, [0, 0, inv, 0, inv, inv, 0]);
    assert_eq!(want[3].3[100..400], [0x33; 300]);
    for k in 0..=stream.len() {
        let (a, b) = stream.split_at(k);
        assert_eq!(run(net, [a, b]), want, "split at byte {k}");
    }
}
