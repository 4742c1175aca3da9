use super::*;
use crate::server::Config;
use fabric::bulk::Bulk;
use fabric::layout::{Header, Layout, NodeState};
use fabric::netwire::*;
use fabric::proto::{Desc, Op, DESC_SIZE, DIRENT_SIZE};
use fabric::proto::{DirEntry, FileKind};
use fabric::proto::{PageKey, PageReq};
use fabric::rng::SplitMix64;
use fabric::shm::HeapShm;
use flatfs::{Fs, MemDisk};
use nodepath::netclient::{NetClient, MAX_BATCH};

const REGION: usize = 4 << 20;

/// Every opcode, notifications included, and a few unknown ones.
const FUZZ_OPS: [u16; 26] = [
    0, 1, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 30, 31, 32, 33, 34, 35, 40, 41, 42, 2,
    99, 0xFFFF,
];

/// A directory with storage, one node's client, and the two ends of a
/// stream that delivers bytes in random chunks.
struct Rig {
    mem: HeapShm,
    dir: Directory<MemDisk>,
    client: NetClient,
    server_rx: FrameReader,
    rng: SplitMix64,
}

impl Rig {
    fn new(seed: u64) -> Rig {
        let mem = HeapShm::new(REGION);
        let layout = Layout::compute(REGION, 2).unwrap();
        layout.format(&*mem, 0);
        let fs = Fs::format(MemDisk::new(2048), 64).unwrap();
        let mut dir = Directory::new(&*mem, layout, Some(fs), Config::default());
        // The links are served for members only: node 1 joins.
        Header::new(&*mem, layout).set_node_state(1, NodeState::Joining);
        dir.membership(&*mem, 0);
        assert!(dir.is_member(1));
        Rig {
            mem,
            dir,
            client: NetClient::new(),
            server_rx: FrameReader::new(),
            rng: SplitMix64::new(seed),
        }
    }

    /// Split `bytes` into random chunks (sometimes empty, sometimes
    /// single bytes, sometimes large).
    fn chunks(&mut self, bytes: &[u8]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            let n = match self.rng.below(4) {
                0 => 0,
                1 => 1,
                2 => self.rng.range(1, 100),
                _ => self.rng.range(1, 20_000),
            } as usize;
            let n = n.min(bytes.len() - i);
            out.push(bytes[i..i + n].to_vec());
            i += n;
        }
        out.push(Vec::new());
        out
    }

    /// Deliver `bytes` to the server's reader; the frames it yields.
    fn deliver_to_server(&mut self, bytes: &[u8]) -> Result<Vec<Frame>, FrameError> {
        let mut frames = Vec::new();
        for c in self.chunks(bytes) {
            self.server_rx.push(&c);
            while let Some(f) = self.server_rx.next_frame()? {
                frames.push(f);
            }
        }
        Ok(frames)
    }

    /// Deliver `bytes` to the client; the response it completes.
    fn deliver_to_client(&mut self, bytes: &[u8]) -> Result<Option<Response>, Errno> {
        let mut got = None;
        for c in self.chunks(bytes) {
            if let Some(r) = self.client.feed(&c)? {
                assert!(got.is_none(), "one response per request");
                got = Some(r);
            }
        }
        Ok(got)
    }

    /// Serve a request frame the way the kernel's server loop does.
    fn serve(&mut self, f: &Frame) -> Vec<u8> {
        self.now(1, f).to_bytes()
    }

    /// `node`'s request frame `f`, answered at once (the in-memory disk
    /// is synchronous: nothing waits for the device).
    fn now(&mut self, node: u32, f: &Frame) -> Frame {
        self.dir
            .serve_net(&*self.mem, node, f, 0)
            .expect("a synchronous disk answers at once")
    }

    /// One round trip; transport errors are test failures, errors of
    /// the file server come back as `Err`.
    fn call(&mut self, req: &Request) -> Result<Response, Errno> {
        let bytes = self.client.request(req);
        let frames = self.deliver_to_server(&bytes).unwrap();
        assert_eq!(frames.len(), 1);
        let answer = self.serve(&frames[0]);
        match self.deliver_to_client(&answer).unwrap() {
            Some(Response::Err(e)) => Err(e),
            Some(r) => Ok(r),
            None => panic!("no response"),
        }
    }

    fn path(&mut self, op: Op, p: &str) -> Result<Response, Errno> {
        self.client.bulk_write(0, 0, p.as_bytes()).unwrap();
        self.call(&Request::Path {
            op,
            slot: 0,
            at: 0,
            len: p.len() as u32,
            exclusive: false,
        })
    }

    fn create(&mut self, p: &str) -> u64 {
        match self.path(Op::Create, p) {
            Ok(Response::Attr(a)) => a.ino,
            r => panic!("create {p}: {r:?}"),
        }
    }

    fn write(&mut self, ino: u64, offset: u64, data: &[u8]) -> Result<Response, Errno> {
        self.client.bulk_write(2, 0, data).unwrap();
        self.call(&Request::Data {
            gen: 0,
            op: Op::Write,
            slot: 2,
            at: 0,
            ino,
            offset,
            len: data.len() as u32,
        })
    }

    fn read(&mut self, ino: u64, offset: u64, len: u32) -> Result<Vec<u8>, Errno> {
        let r = self.call(&Request::Data {
            gen: 0,
            op: Op::Read,
            slot: 1,
            at: 0,
            ino,
            offset,
            len,
        })?;
        let Response::Data { bytes, .. } = r else {
            panic!("read answered {r:?}")
        };
        let mut buf = vec![0u8; bytes as usize];
        self.client.bulk_read(1, &mut buf).unwrap();
        Ok(buf)
    }

    /// Send a hand-made frame to the server and decode the answer for
    /// `op` without a client.
    fn raw(&mut self, desc: Desc, payload: &[u8], op: Op) -> (u32, Response, Vec<u8>) {
        let answer = self.now(
            1,
            &Frame {
                desc,
                payload: payload.to_vec(),
            },
        );
        let (tag, r) = Response::decode(&answer.desc, op).unwrap();
        (tag, r, answer.payload)
    }
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8 ^ seed).collect()
}

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

#[test]
fn round_trip_create_write_read_getattr_readdir_unlink() {
    let mut rig = Rig::new(1);
    assert_eq!(rig.call(&Request::Nop), Ok(Response::Ok));
    let Ok(Response::Attr(d)) = rig.path(Op::Mkdir, "/d") else {
        panic!("mkdir")
    };
    let ino = rig.create("/d/f");
    let data = pattern(10_000, 0x5a);
    let Ok(Response::Data { bytes, attr }) = rig.write(ino, 0, &data) else {
        panic!("write")
    };
    assert_eq!((bytes, attr.size), (10_000, 10_000));
    // Read back in full, in a short read past the end and at an offset.
    assert_eq!(rig.read(ino, 0, 16384).unwrap(), data);
    assert_eq!(rig.read(ino, 9_000, 4096).unwrap(), data[9_000..]);
    assert_eq!(rig.read(ino, 20_000, 100).unwrap(), Vec::<u8>::new());
    let Ok(Response::Attr(a)) = rig.call(&Request::Getattr { ino }) else {
        panic!("getattr")
    };
    assert_eq!((a.ino, a.kind, a.size), (ino, FileKind::File, 10_000));
    // Readdir of /d: records land in the slot the request named.
    rig.create("/d/g");
    let Ok(Response::Entries { count, next_cookie }) = rig.call(&Request::Readdir {
        slot: 3,
        ino: d.ino,
        cookie: 0,
    }) else {
        panic!("readdir")
    };
    assert_eq!((count, next_cookie), (2, 0));
    let mut names = Vec::new();
    for k in 0..count as usize {
        let mut rec = [0u8; DIRENT_SIZE];
        let mut all = vec![0u8; (k + 1) * DIRENT_SIZE];
        rig.client.bulk_read(3, &mut all).unwrap();
        rec.copy_from_slice(&all[k * DIRENT_SIZE..]);
        names.push(DirEntry::decode(&rec).unwrap().name);
    }
    names.sort();
    assert_eq!(names, ["f", "g"]);
    // Unlink, then the file is gone; errors come back typed.
    assert_eq!(rig.path(Op::Unlink, "/d/f"), Ok(Response::Ok));
    assert_eq!(rig.path(Op::Lookup, "/d/f"), Err(Errno::NotFound));
    assert_eq!(rig.path(Op::Rmdir, "/d"), Err(Errno::NotEmpty));
    assert_eq!(rig.call(&Request::Getattr { ino }), Err(Errno::NotFound));
    let Ok(Response::Stats(s)) = rig.call(&Request::Stats) else {
        panic!("stats")
    };
    assert_eq!(s.requests, 15, "every frame counted");
    assert_eq!(rig.dir.ops()[Op::Read as usize], 3);
    assert_eq!(rig.call(&Request::Fsync { ino: 0 }), Ok(Response::Ok));
}

#[test]
fn a_full_slot_is_written_and_read_in_one_frame() {
    let mut rig = Rig::new(2);
    let ino = rig.create("/big");
    let data = pattern(MAX_PAYLOAD, 3);
    let bytes = {
        rig.client.bulk_write(2, 0, &data).unwrap();
        rig.client.request(&Request::Data {
            gen: 0,
            op: Op::Write,
            slot: 2,
            at: 0,
            ino,
            offset: 4096,
            len: MAX_PAYLOAD as u32,
        })
    };
    assert_eq!(bytes.len(), FRAME_OVERHEAD + MAX_PAYLOAD);
    let f = rig.deliver_to_server(&bytes).unwrap();
    let answer = rig.serve(&f[0]);
    assert_eq!(
        answer.len(),
        FRAME_OVERHEAD,
        "a write answer has no payload"
    );
    assert!(matches!(
        rig.deliver_to_client(&answer),
        Ok(Some(Response::Data { bytes: 65536, .. }))
    ));
    let got = rig.read(ino, 4096, MAX_PAYLOAD as u32).unwrap();
    assert_eq!(got, data);
    // One byte more than a slot is refused on both sides of the wire.
    assert_eq!(
        rig.call(&Request::Data {
            gen: 0,
            op: Op::Read,
            slot: 1,
            at: 0,
            ino,
            offset: 0,
            len: MAX_PAYLOAD as u32 + 1,
        }),
        Err(Errno::Invalid)
    );
    assert_eq!(
        rig.call(&Request::Data {
            gen: 0,
            op: Op::Write,
            slot: 2,
            at: 0,
            ino,
            offset: 0,
            len: MAX_PAYLOAD as u32 + 1,
        }),
        Err(Errno::Invalid)
    );
    assert_eq!(rig.read(ino, 0, 4096).unwrap(), vec![0; 4096], "unchanged");
}

#[test]
fn bad_requests_get_clear_errors() {
    let mut rig = Rig::new(3);
    let ino = rig.create("/f");
    // Bad slots.
    for slot in [SLOTS, 99, u32::MAX] {
        let bad = [
            Request::Path {
                op: Op::Lookup,
                slot,
                at: 0,
                len: 2,
                exclusive: false,
            },
            Request::Data {
                gen: 0,
                op: Op::Write,
                slot,
                at: 0,
                ino,
                offset: 0,
                len: 10,
            },
            Request::Data {
                gen: 0,
                op: Op::Read,
                slot,
                at: 0,
                ino,
                offset: 0,
                len: 10,
            },
            Request::Readdir {
                slot,
                ino: 1,
                cookie: 0,
            },
        ];
        for r in bad {
            assert_eq!(rig.call(&r), Err(Errno::Invalid), "{r:?}");
        }
    }
    // Payload lengths that disagree with the request.
    let lookup = |len| Request::Path {
        op: Op::Lookup,
        slot: 0,
        at: 0,
        len,
        exclusive: false,
    };
    let write = |len| Request::Data {
        gen: 0,
        op: Op::Write,
        slot: 2,
        at: 0,
        ino,
        offset: 0,
        len,
    };
    let cases: [(Request, usize); 6] = [
        (lookup(2), 1),
        (lookup(2), 3),
        (write(100), 0),
        (write(100), 101),
        (Request::Getattr { ino }, 1),
        (
            Request::Data {
                gen: 0,
                op: Op::Read,
                slot: 1,
                at: 0,
                ino,
                offset: 0,
                len: 10,
            },
            10,
        ),
    ];
    for (i, (r, n)) in cases.into_iter().enumerate() {
        let tag = 1000 + i as u32;
        let (t, resp, payload) = rig.raw(r.encode(tag), &vec![b'/'; n], op_of(&r));
        assert_eq!((t, resp), (tag, Response::Err(Errno::Invalid)), "{r:?}");
        assert!(payload.is_empty());
    }
    // Invalid UTF-8 path.
    rig.client.bulk_write(0, 0, &[0xff, 0xfe]).unwrap();
    assert_eq!(rig.call(&lookup(2)), Err(Errno::Invalid));
    // Garbage descriptors: Invalid with their own opcode and tag.
    let mut garbage = Raw {
        op: 0xEEEE,
        status: 0,
        tag: 77,
        args: [u64::MAX; 7],
    };
    let answer = rig.now(
        1,
        &Frame {
            desc: garbage.encode(),
            payload: vec![1, 2, 3],
        },
    );
    let raw = Raw::decode(&answer.desc);
    assert_eq!(
        (raw.op, raw.status, raw.tag),
        (0xEEEE, Errno::Invalid as u16, 77)
    );
    assert!(answer.payload.is_empty());
    garbage.op = Op::Lookup as u16; // path length out of range
    let (t, resp, _) = rig.raw(garbage.encode(), &[], Op::Lookup);
    assert_eq!((t, resp), (77, Response::Err(Errno::Invalid)));
    // The file is untouched by all this.
    assert_eq!(rig.read(ino, 0, 10).unwrap(), Vec::<u8>::new());
    // A request naming a bad slot or length goes out without payload.
    let f = rig.client.request(&write(MAX_PAYLOAD as u32 + 1));
    assert_eq!(f.len(), FRAME_OVERHEAD);
    rig.client.reset();
}

#[test]
fn page_requests_are_refused_over_the_network() {
    let mut rig = Rig::new(4);
    let ino = rig.create("/p");
    let key = PageKey { ino, idx: 0 };
    let (gfn, _) = rig.dir.layout().pool_gfns(1);
    for p in [
        PageReq::Read { key, frame: gfn },
        PageReq::LookupLock { key, frame: gfn },
        PageReq::Unlock { key },
        PageReq::Inv { key, dirty: true },
        PageReq::Drop { key, dirty: false },
        PageReq::Writeback { key, dirty: true },
    ] {
        assert_eq!(rig.call(&Request::Page(p)), Err(Errno::Invalid));
    }
    assert_eq!(rig.call(&Request::PageStats), Err(Errno::Invalid));
    // Page locality too, for a file with pages (its records would come in
    // a payload the answer does not announce: it was answered `Io`).
    rig.write(ino, 0, &pattern(6000, 1)).unwrap();
    for slot in [0, 3] {
        assert_eq!(
            rig.call(&Request::Locality {
                slot,
                ino,
                first: 0
            }),
            Err(Errno::Invalid)
        );
    }
    assert!(rig.dir.pages().is_empty());
    assert!(matches!(rig.call(&Request::Stats), Ok(Response::Stats(_))));
    assert_eq!(rig.call(&Request::Nop), Ok(Response::Ok));
}

#[test]
fn only_members_are_served() {
    let mut rig = Rig::new(3);
    let ino = rig.create("/a");
    let layout = *rig.dir.layout();
    // Node 1 leaves: its requests are refused, nothing runs.
    Header::new(&*rig.mem, layout).set_node_state(1, NodeState::Left);
    rig.dir.membership(&*rig.mem, 1);
    assert!(!rig.dir.is_member(1));
    let before = rig.dir.stats();
    assert_eq!(rig.path(Op::Create, "/b"), Err(Errno::Unavailable));
    assert_eq!(rig.read(ino, 0, 10), Err(Errno::Unavailable));
    assert_eq!(rig.dir.stats(), before, "nothing was served");
    // Never-joined nodes are refused too.
    let f = Frame {
        desc: Request::Getattr { ino }.encode(7),
        payload: Vec::new(),
    };
    let r = rig.now(2, &f);
    assert_eq!(
        Response::decode(&r.desc, Op::Getattr).unwrap().1,
        Response::Err(Errno::Unavailable)
    );
    // Rejoined (a new epoch): served again.
    Header::new(&*rig.mem, layout).set_node_state(1, NodeState::Joining);
    rig.dir.membership(&*rig.mem, 2);
    assert!(rig.dir.is_member(1));
    assert!(rig.path(Op::Create, "/b").is_ok());
}

mod malformed;
mod pipeline;
