//! Malformed bytes on either end: the client's checks of answers, and
//! random frames through the reader, the server and the client.

use super::*;

#[test]
fn client_rejects_bad_answers() {
    let mut rig = Rig::new(5);
    let ino = rig.create("/c");
    rig.write(ino, 0, &pattern(500, 1)).unwrap();
    let read = Request::Data {
        gen: 0,
        op: Op::Read,
        slot: 1,
        at: 0,
        ino,
        offset: 0,
        len: 100,
    };
    let ok = Response::Data {
        bytes: 100,
        attr: fabric::proto::Attr {
            ino,
            kind: FileKind::File,
            size: 500,
            version: 1,
        },
    };
    let tag = |c: &NetClient| c.pending_tag().unwrap();
    // Unsolicited answer.
    let mut c = NetClient::new();
    let f = Frame {
        desc: Response::Ok.encode(Op::Nop, 1),
        payload: Vec::new(),
    };
    assert_eq!(c.feed(&f.to_bytes()), Err(Errno::Io));
    // Wrong tag, wrong opcode, payload not matching the response,
    // more bytes than were asked for, bad magic.
    let cases: [(u32, Desc, usize); 5] = [
        (1, ok.encode(Op::Read, 0), 100),
        (0, ok.encode(Op::Write, 0), 100),
        (0, ok.encode(Op::Read, 0), 99),
        (0, Response::Ok.encode(Op::Read, 0), 0),
        (0, ok.encode(Op::Read, 0), 100),
    ];
    for (k, (dtag, desc, n)) in cases.into_iter().enumerate() {
        c.reset();
        let _ = c.request(&read);
        let mut raw = Raw::decode(&desc);
        raw.tag = tag(&c).wrapping_add(dtag);
        let mut bytes = Frame {
            desc: raw.encode(),
            payload: vec![7; n],
        }
        .to_bytes();
        if k == 4 {
            bytes[0] ^= 1;
        }
        assert_eq!(c.feed(&bytes), Err(Errno::Io), "case {k}");
    }
    // More data than the read asked for.
    c.reset();
    let _ = c.request(&read);
    let mut raw = Raw::decode(&ok.encode(Op::Read, 0));
    raw.tag = tag(&c);
    raw.args[4] = 101;
    let f = Frame {
        desc: raw.encode(),
        payload: vec![7; 101],
    };
    assert_eq!(c.feed(&f.to_bytes()), Err(Errno::Io));
    // After a reset the client works again, and errors travel as
    // responses, not transport failures.
    rig.client.reset();
    assert_eq!(rig.read(ino, 0, 500).unwrap(), pattern(500, 1));
    assert_eq!(rig.read(9999, 0, 5), Err(Errno::NotFound));
}

#[test]
fn fuzz_reader_server_and_client() {
    let mut rig = Rig::new(6);
    let ino = rig.create("/z");
    let gen = match rig.call(&Request::Getattr { ino }) {
        Ok(Response::Attr(a)) => a.gen(),
        r => panic!("getattr: {r:?}"),
    };
    rig.write(ino, 0, &pattern(3000, 9)).unwrap();
    let mut rng = SplitMix64::new(0xF00D);
    // Random bytes into a reader, sometimes behind a valid magic.
    for _ in 0..2000 {
        let mut rd = FrameReader::new();
        let mut bytes: Vec<u8> = (0..rng.below(300)).map(|_| rng.next_u64() as u8).collect();
        if rng.chance(500) {
            let mut h = MAGIC.to_le_bytes().to_vec();
            h.extend_from_slice(&(rng.below(200) as u32).to_le_bytes());
            h.extend_from_slice(&bytes);
            bytes = h;
        }
        let mut i = 0;
        while i < bytes.len() {
            let n = (rng.range(1, 64) as usize).min(bytes.len() - i);
            rd.push(&bytes[i..i + n]);
            i += n;
            while let Ok(Some(_)) = rd.next_frame() {}
        }
        assert!(rd.buffered() <= bytes.len());
    }
    // Random frames into the server: every one is answered with its
    // tag, a payload matching the response, and the op it came with.
    let (mut served_ok, mut with_payload) = (0, 0);
    for _ in 0..5000 {
        let mut raw = Raw {
            op: FUZZ_OPS[rng.below(FUZZ_OPS.len() as u64) as usize],
            status: rng.below(3) as u16,
            tag: rng.next_u64() as u32,
            args: [0; 7],
        };
        for a in raw.args.iter_mut() {
            *a = match rng.below(5) {
                0 => 0,
                1 => rng.below(5),
                2 => ino,
                3 => rng.below(70_000),
                _ => rng.next_u64(),
            };
        }
        if rng.chance(500) {
            // Plausible: [slot, ino, offset or cookie, len].
            raw.args[0] = rng.below(5);
            raw.args[1] = if rng.chance(800) { ino } else { 1 };
            raw.args[2] = rng.below(5000);
            raw.args[3] = rng.below(70_000);
        }
        // The generation of `Read`/`Write`/`Setattr`: mostly unchecked or
        // the file's (fuzzed paths may remove and re-create it), else the
        // random argument above, a wrong one.
        if rng.chance(800) {
            raw.args[5] = if rng.chance(500) { 0 } else { gen };
        }
        let n = match rng.below(3) {
            0 => 0,
            1 => raw.args[if raw.op == Op::Write as u16 { 3 } else { 1 }] as usize,
            _ => rng.below(100) as usize,
        }
        .min(MAX_PAYLOAD);
        let payload: Vec<u8> = (0..n).map(|_| b"/abz\xff"[rng.below(5) as usize]).collect();
        let req = Frame {
            desc: raw.encode(),
            payload,
        };
        let answer = rig.now(1, &req);
        let a = Raw::decode(&answer.desc);
        assert_eq!((a.op, a.tag), (raw.op, raw.tag));
        if let Some(op) = Op::from_u16(raw.op) {
            if let Ok((_, resp)) = Response::decode(&answer.desc, op) {
                assert_eq!(answer.payload.len(), answer_len(op, &resp));
                if !matches!(resp, Response::Err(_)) {
                    served_ok += 1;
                }
            }
        }
        with_payload += usize::from(!answer.payload.is_empty());
        assert!(answer.payload.len() <= MAX_PAYLOAD);
        // And the answer, mangled or not, into a client waiting for
        // something: an answer or an error, never a panic.
        let mut c = NetClient::new();
        if let Ok((_, r)) = Request::decode(&raw.encode()) {
            let _ = c.request(&r);
        }
        let mut bytes = answer.to_bytes();
        if rng.chance(300) && !bytes.is_empty() {
            let i = rng.below(bytes.len() as u64) as usize;
            bytes[i] ^= 1 << rng.below(8);
        }
        let _ = c.feed(&bytes);
    }
    assert!(served_ok > 200, "fuzz reaches the file system: {served_ok}");
    assert!(with_payload >= 5, "and reads data back: {with_payload}");
    // The server survived all of it.
    assert_eq!(rig.call(&Request::Nop), Ok(Response::Ok));
    assert!(matches!(rig.path(Op::Lookup, "/"), Ok(Response::Attr(_))));
}
