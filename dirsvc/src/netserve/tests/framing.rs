//! Framing on the wire: frames through any chunking, framing errors,
//! and the network bulk's bounds.

use super::*;

#[test]
fn frames_round_trip_through_any_chunking() {
    let mut rng = SplitMix64::new(7);
    let frames: Vec<Frame> = (0..50u32)
        .map(|i| Frame {
            desc: Request::Getattr { ino: i as u64 }.encode(i),
            payload: pattern(
                match i % 4 {
                    0 => 0,
                    1 => 1,
                    2 => MAX_PAYLOAD,
                    _ => rng.below(5000) as usize,
                },
                i as u8,
            ),
        })
        .collect();
    let mut stream = Vec::new();
    for f in &frames {
        encode_frame(&f.desc, &f.payload, &mut stream);
    }
    assert_eq!(
        stream.len(),
        frames
            .iter()
            .map(|f| FRAME_OVERHEAD + f.payload.len())
            .sum::<usize>()
    );
    assert_eq!(&stream[..4], b"OCNF");
    for seed in 0..5 {
        let mut rng = SplitMix64::new(seed);
        let mut rd = FrameReader::new();
        let mut got = Vec::new();
        let mut i = 0;
        while i < stream.len() {
            let n = (rng.range(1, 3 * MAX_PAYLOAD as u64 / 2) as usize).min(stream.len() - i);
            let n = if rng.chance(300) { n.min(3) } else { n };
            rd.push(&stream[i..i + n]);
            i += n;
            while let Some(f) = rd.next_frame().unwrap() {
                got.push(f);
            }
            assert!(rd.buffered() < n + FRAME_OVERHEAD + MAX_PAYLOAD);
        }
        assert_eq!(got, frames);
        assert_eq!(rd.buffered(), 0);
        assert_eq!(rd.next_frame(), Ok(None));
    }
}

#[test]
fn framing_errors_are_reported_and_sticky() {
    // Bad magic, found as soon as the header is in.
    let mut rd = FrameReader::new();
    rd.push(b"GET / HT");
    let m = u32::from_le_bytes(*b"GET ");
    assert_eq!(rd.next_frame(), Err(FrameError::BadMagic(m)));
    rd.push(
        &Frame {
            desc: [0; DESC_SIZE],
            payload: Vec::new(),
        }
        .to_bytes(),
    );
    assert_eq!(rd.next_frame(), Err(FrameError::BadMagic(m)), "sticky");
    assert_eq!(rd.buffered(), 0, "input dropped after an error");
    rd.reset();
    rd.push(
        &Frame {
            desc: [1; DESC_SIZE],
            payload: vec![9; 3],
        }
        .to_bytes(),
    );
    assert_eq!(rd.next_frame().unwrap().unwrap().payload, vec![9; 3]);
    // Oversize: reported from the header alone, nothing allocated.
    for len in [MAX_PAYLOAD as u32 + 1, u32::MAX] {
        let mut rd = FrameReader::new();
        let mut h = MAGIC.to_le_bytes().to_vec();
        h.extend_from_slice(&len.to_le_bytes());
        rd.push(&h);
        assert_eq!(rd.next_frame(), Err(FrameError::TooLong(len)));
    }
    // Exactly MAX_PAYLOAD is fine; an incomplete frame is just pending.
    let mut rd = FrameReader::new();
    let big = Frame {
        desc: [3; DESC_SIZE],
        payload: vec![5; MAX_PAYLOAD],
    }
    .to_bytes();
    rd.push(&big[..big.len() - 1]);
    assert_eq!(rd.next_frame(), Ok(None));
    rd.push(&big[big.len() - 1..]);
    assert_eq!(rd.next_frame().unwrap().unwrap().payload.len(), MAX_PAYLOAD);
    // Errors read well.
    assert!(FrameError::TooLong(70000).to_string().contains("70000"));
    assert!(FrameError::BadMagic(1).to_string().contains("magic"));
}

#[test]
fn net_bulk_checks_bounds_and_tracks_writes() {
    let mut b = NetBulk::new();
    assert_eq!(b.cap(0), Some(MAX_PAYLOAD));
    assert_eq!(b.cap(SLOTS - 1), Some(MAX_PAYLOAD));
    assert_eq!(b.cap(SLOTS), None);
    assert_eq!(b.written(), None);
    b.write(3, 10, b"abc").unwrap();
    b.write(3, 0, b"xy").unwrap();
    assert_eq!(b.written(), Some((3, 13)));
    let mut buf = [0xffu8; 16];
    b.read(3, &mut buf).unwrap();
    assert_eq!(&buf, b"xy\0\0\0\0\0\0\0\0abc\0\0\0");
    assert_eq!(b.bytes(3, 13).unwrap(), buf[..13].to_vec());
    b.write(1, 0, b"q").unwrap();
    assert_eq!(b.written(), Some((1, 1)));
    b.clear_written();
    assert_eq!(b.written(), None);
    // Out of range: errors, no panic, nothing recorded.
    assert_eq!(b.write(4, 0, b"a"), Err(Errno::Invalid));
    assert_eq!(b.write(u32::MAX, 0, b"a"), Err(Errno::Invalid));
    assert_eq!(b.write(0, MAX_PAYLOAD, b"a"), Err(Errno::Invalid));
    assert_eq!(b.write(0, usize::MAX, b"a"), Err(Errno::Invalid));
    assert_eq!(b.read(9, &mut buf), Err(Errno::Invalid));
    assert_eq!(
        b.read(0, &mut vec![0; MAX_PAYLOAD + 1]),
        Err(Errno::Invalid)
    );
    assert_eq!(b.bytes(0, MAX_PAYLOAD + 1), Err(Errno::Invalid));
    assert_eq!(b.written(), None);
    b.write(0, MAX_PAYLOAD - 1, b"z").unwrap();
    assert_eq!(b.written(), Some((0, MAX_PAYLOAD)));
    assert_eq!(b.take_written().len(), MAX_PAYLOAD);
}
