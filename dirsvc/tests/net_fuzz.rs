//! Property-based fuzzing of the directory's side of `net` mode: the byte
//! stream a node sends over TCP, cut into frames by
//! [`fabric::netwire::FrameReader`], answered in request order through
//! [`fabric::netorder::AnswerOrder`] and served by
//! [`Directory::serve_net`], exactly as the kernel's directory link
//! (`kernel/src/net.rs`, `DirLink`) drives them. The node's side is fuzzed
//! by `tests/tests/net_fuzz.rs`, the rings by `dirsvc/fabric/tests/fuzz.rs`.
//!
//! A hostile node (node 1) sends arbitrary bytes, truncated and oversized
//! frames, and well-framed requests with hostile fields (huge lengths,
//! offsets near `u64::MAX`, bad inode numbers, bad opcodes, slots out of
//! range, payloads that do not match), interleaved with valid requests and
//! cut into chunks anywhere (down to single bytes). Asserted:
//!
//! * no panic, and no request makes the directory allocate more than
//!   [`BUDGET`] bytes beyond what it held before (the global allocator is
//!   capped around every call into the directory: an allocation past the
//!   cap aborts the test);
//! * every frame gets exactly one answer, in request order, with the
//!   request's opcode and tag, a status that decodes, and the payload its
//!   response announces (at most [`MAX_PAYLOAD`] bytes); an unknown opcode
//!   is answered `Invalid`; a framing error drops the connection, after
//!   which a new connection is served;
//! * a request answered with an error leaves the disk image byte for byte
//!   as it was (every disk request drained first);
//! * another node (node 2) is served correctly all along (its writes read
//!   back), a node that never joined is refused, and at the end the image
//!   mounts with flatfs, its data checksums verify, and node 2's file on
//!   it holds what the directory serves;
//! * a stream of valid and invalid frames split in two at every byte
//!   boundary gets the same answers.
//!
//! A host test (no QEMU), part of `cargo test --workspace` (`tests/run.sh
//! --unit`). Budget: `cases` below (override with `PROPTEST_CASES=N`);
//! failures are persisted in `dirsvc/proptest-regressions/net_fuzz.txt`
//! (committed) and replayed first on every run.

use std::alloc::System;

use cap::Cap;
use dirsvc::fakedisk::{Completion, FakeControl, FakeDisk};
use dirsvc::server::{Config as DirConfig, Directory};
use fabric::layout::{Header, Layout, NodeState};
use fabric::netorder::AnswerOrder;
use fabric::netwire::{answer_len, encode_frame, Frame, FrameReader, MAGIC, MAX_PAYLOAD};
use fabric::proto::{Errno, Op, Raw, Request, Response, MAX_PATH};
use fabric::shm::HeapShm;
use flatfs::{Fs, MemDisk};
use nodepath::netclient::NetClient;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

/// Every allocation of this test binary goes through the cap; around each
/// call into the directory the limit is what was allocated plus
/// [`BUDGET`].
#[global_allocator]
static ALLOC: Cap<System> = Cap::new(System, usize::MAX);

/// Most bytes one request may make the directory hold at once beyond
/// what it held before: a few copies of a full frame (the frame, the
/// staging slot, the file server's buffer and the answer) and the file
/// system's block buffers. A length taken from the stream unchecked
/// (`u32::MAX`, an offset as a size) needs far more.
const BUDGET: usize = 2 << 20;

const REGION: usize = 4 << 20;
/// Node 1 is hostile, node 2 honest, node 3 never joins.
const NODES: u32 = 3;
const HOSTILE: u32 = 1;
const HONEST: u32 = 2;
const STRANGER: u32 = 3;
/// Disk passes a request may take to be answered.
const STEPS: usize = 400;

fn cases(default: u32) -> Config {
    onecopy_fuzzcfg::config(default, "proptest-regressions/net_fuzz.txt")
}

/// Run `f` with the allocator capped at what is allocated now plus
/// [`BUDGET`].
fn budgeted<R>(f: impl FnOnce() -> R) -> R {
    let base = ALLOC.allocated();
    ALLOC
        .set_limit(base.saturating_add(BUDGET))
        .expect("limit above what is allocated");
    let r = f();
    ALLOC.set_limit(usize::MAX).expect("no limit");
    r
}

/// The directory's end of one node's connection, as the kernel's
/// `DirLink` keeps it.
#[derive(Default)]
struct Link {
    reader: FrameReader,
    order: AnswerOrder<Frame>,
    /// Answers released in order, not read by the node yet.
    out: Vec<u8>,
}

impl Link {
    /// The connection is dropped (a framing error), or a new one comes.
    fn reset(&mut self) {
        self.reader.reset();
        self.order.reset();
        self.out.clear();
    }

    fn release(&mut self) {
        for f in self.order.release() {
            encode_frame(&f.desc, &f.payload, &mut self.out);
        }
    }
}

/// What one turn of a link's reader gave.
enum Served {
    /// Nothing complete.
    Nothing,
    /// A request frame, served.
    Frame(Frame),
    /// A framing error: the connection was dropped.
    Dropped,
}

/// A directory over an asynchronous in-memory disk and its links.
struct Net {
    mem: HeapShm,
    layout: Layout,
    dir: Directory<FakeDisk>,
    disk: FakeControl,
    now: u64,
    links: Vec<Link>,
}

impl Net {
    fn new(seed: u64) -> Net {
        let mem = HeapShm::new(REGION);
        let layout = Layout::compute(REGION, NODES).unwrap();
        layout.format(&*mem, 0);
        let image = Fs::format(MemDisk::new(512), 64).unwrap().into_device();
        let (fake, disk) = FakeDisk::new(image, 4, Completion::Random, seed);
        let fs = Fs::mount(fake).unwrap();
        let mut dir = Directory::new(&*mem, layout, Some(fs), DirConfig::default());
        let h = Header::new(&*mem, layout);
        h.set_node_state(HOSTILE, NodeState::Joining);
        h.set_node_state(HONEST, NodeState::Joining);
        dir.membership(&*mem, 0);
        assert!(dir.is_member(HOSTILE) && dir.is_member(HONEST));
        assert!(!dir.is_member(STRANGER));
        Net {
            mem,
            layout,
            dir,
            disk,
            now: 0,
            links: (0..NODES).map(|_| Link::default()).collect(),
        }
    }

    fn link(&mut self, node: u32) -> &mut Link {
        &mut self.links[(node - 1) as usize]
    }

    /// One pass of the directory's loop: members beat, the disk
    /// completes some requests, answers that waited go to their links.
    fn step(&mut self) {
        self.now += 1_000;
        let h = Header::new(&*self.mem, self.layout);
        h.beat_node(HOSTILE);
        h.beat_node(HONEST);
        let (mem, now) = (&self.mem, self.now);
        let dir = &mut self.dir;
        let answers = budgeted(|| {
            dir.poll(&**mem, now);
            dir.take_net_answers()
        });
        for a in answers {
            assert!((1..=NODES).contains(&a.node), "answer for node {}", a.node);
            let l = self.link(a.node);
            if l.order.answer(a.token, a.frame) {
                l.release();
            }
        }
    }

    /// Bytes from `node` arrive on its connection.
    fn push(&mut self, node: u32, bytes: &[u8]) {
        self.link(node).reader.push(bytes);
    }

    /// Serve the next complete frame of `node`'s connection, if any.
    fn serve_one(&mut self, node: u32) -> Served {
        let l = &mut self.links[(node - 1) as usize];
        let next = budgeted(|| l.reader.next_frame());
        match next {
            Ok(None) => Served::Nothing,
            Err(e) => {
                log::info!("link to node {node}: {e}: connection dropped");
                l.reset();
                Served::Dropped
            }
            Ok(Some(f)) => {
                let token = l.order.push(None);
                let (dir, mem) = (&mut self.dir, &self.mem);
                let answer = budgeted(|| dir.serve_net(&**mem, node, &f, token));
                if let Some(a) = answer {
                    assert!(l.order.answer(token, a), "a fresh token");
                }
                l.release();
                Served::Frame(f)
            }
        }
    }

    /// Step until every request of every link is answered and the disk
    /// is idle.
    fn drain(&mut self) {
        for _ in 0..STEPS {
            if self.links.iter().all(|l| l.order.is_empty()) && self.dir.io_pending() == 0 {
                return;
            }
            self.step();
        }
        panic!(
            "requests still unanswered after {STEPS} passes: {:?}",
            self.links.iter().map(|l| l.order.len()).collect::<Vec<_>>()
        );
    }

    fn take_out(&mut self, node: u32) -> Vec<u8> {
        core::mem::take(&mut self.link(node).out)
    }

    fn image(&self) -> Vec<u8> {
        self.disk.with_disk(|d| d.blocks().to_vec())
    }
}

/// The answers in `bytes`, which must be whole frames.
fn answers(bytes: &[u8]) -> Vec<Frame> {
    let mut r = FrameReader::new();
    r.push(bytes);
    let mut out = Vec::new();
    while let Some(f) = r.next_frame().expect("the directory sends valid frames") {
        out.push(f);
    }
    assert_eq!(r.buffered(), 0, "the directory sends whole frames");
    out
}

/// Check `answer` against the request frame `req`: same opcode and tag,
/// a status that decodes, the payload its response announces. Its error,
/// if it is one.
fn check_answer(req: &Frame, answer: &Frame) -> Result<Option<Errno>, TestCaseError> {
    let (q, a) = (Raw::decode(&req.desc), Raw::decode(&answer.desc));
    prop_assert_eq!((a.op, a.tag), (q.op, q.tag), "opcode and tag echoed");
    prop_assert!(answer.payload.len() <= MAX_PAYLOAD);
    let Some(op) = Op::from_u16(q.op) else {
        prop_assert_eq!(a.status, Errno::Invalid as u16, "unknown opcode");
        prop_assert!(answer.payload.is_empty());
        return Ok(Some(Errno::Invalid));
    };
    let resp = Response::decode(&answer.desc, op).map(|(_, r)| r);
    prop_assert!(resp.is_ok(), "answer {:?} to {:?} decodes", a, q);
    let resp = resp.unwrap();
    prop_assert_eq!(answer.payload.len(), answer_len(op, &resp), "{:?}", resp);
    if let Ok((
        _,
        Request::Data {
            op: Op::Read, len, ..
        },
    )) = Request::decode(&req.desc)
    {
        prop_assert!(answer.payload.len() <= len as usize, "no more than asked");
    }
    let err = match resp {
        Response::Err(e) => Some(e),
        _ => None,
    };
    // The disk never fails here: `Io` would be the server's own
    // inconsistency, not a clear answer.
    prop_assert!(err != Some(Errno::Io), "{:?} answered Io", q);
    // Each request's data travels in its own frame: no sub-slot offsets.
    if let Ok((_, Request::Path { at, .. } | Request::Data { at, .. })) = Request::decode(&req.desc)
    {
        prop_assert!(
            at == 0 || err == Some(Errno::Invalid),
            "{:?} at {} answered {:?}",
            op,
            at,
            err
        );
    }
    OUTCOMES.with(|o| {
        let mut o = o.borrow_mut();
        let e = o.entry(format!("{op:?}")).or_insert((0, 0));
        if err.is_none() {
            e.0 += 1
        } else {
            e.1 += 1
        }
    });
    Ok(err)
}

/// Node 2: a well-behaved node with the same client as the kernel's, its
/// own file.
struct Honest {
    client: NetClient,
    ino: u64,
}

impl Honest {
    /// One round trip through the directory; the directory is drained
    /// (other links' answers wait in their links).
    fn call(&mut self, net: &mut Net, req: &Request) -> Result<Response, Errno> {
        let bytes = self.client.request(req);
        net.push(HONEST, &bytes);
        while let Served::Frame(_) = net.serve_one(HONEST) {}
        for _ in 0..STEPS {
            let out = net.take_out(HONEST);
            if let Some(r) = self.client.feed(&out).expect("a valid answer") {
                return match r {
                    Response::Err(e) => Err(e),
                    r => Ok(r),
                };
            }
            net.step();
        }
        panic!("node 2's {req:?} unanswered");
    }

    fn join(net: &mut Net) -> Honest {
        let mut h = Honest {
            client: NetClient::new(),
            ino: 0,
        };
        h.client.bulk_write(0, 0, b"/honest").unwrap();
        let create = Request::Path {
            op: Op::Create,
            slot: 0,
            at: 0,
            len: 7,
            exclusive: true,
        };
        match h.call(net, &create) {
            Ok(Response::Attr(a)) => h.ino = a.ino,
            r => panic!("create /honest: {r:?}"),
        }
        h
    }

    /// Write `len` bytes of `seed` at `offset` and read them back (the
    /// hostile node may change the file too, but not in between).
    fn write_and_read(
        &mut self,
        net: &mut Net,
        offset: u64,
        len: usize,
        seed: u8,
    ) -> Result<(), TestCaseError> {
        let data: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect();
        self.client.bulk_write(2, 0, &data).unwrap();
        let w = Request::Data {
            gen: 0,
            op: Op::Write,
            slot: 2,
            at: 0,
            ino: self.ino,
            offset,
            len: len as u32,
        };
        let r = self.call(net, &w);
        prop_assert!(
            matches!(r, Ok(Response::Data { bytes, .. }) if bytes as usize == len),
            "node 2's write: {:?}",
            r
        );
        let r = Request::Data {
            gen: 0,
            op: Op::Read,
            slot: 1,
            at: 0,
            ino: self.ino,
            offset,
            len: len as u32,
        };
        let got = self.call(net, &r);
        prop_assert!(
            matches!(got, Ok(Response::Data { bytes, .. }) if bytes as usize == len),
            "node 2's read: {:?}",
            got
        );
        let mut buf = vec![0u8; len];
        self.client.bulk_read(1, &mut buf).unwrap();
        prop_assert!(buf == data, "node 2 reads what it wrote");
        Ok(())
    }
}

/// Files the hostile node knows (and aims at): created before it starts.
struct Known {
    file: u64,
    dir: u64,
}

fn setup(seed: u64) -> (Net, Honest, Known) {
    let mut net = Net::new(seed);
    let mut honest = Honest::join(&mut net);
    // A directory with a file in it, with data, through node 2's client.
    let mut make = |op, p: &str| {
        honest.client.bulk_write(0, 0, p.as_bytes()).unwrap();
        let r = honest.call(
            &mut net,
            &Request::Path {
                op,
                slot: 0,
                at: 0,
                len: p.len() as u32,
                exclusive: false,
            },
        );
        match r {
            Ok(Response::Attr(a)) => a.ino,
            r => panic!("{op:?} {p}: {r:?}"),
        }
    };
    let dir = make(Op::Mkdir, "/d");
    let file = make(Op::Create, "/d/f");
    honest.client.bulk_write(2, 0, &[0x5a; 6000]).unwrap();
    let w = Request::Data {
        gen: 0,
        op: Op::Write,
        slot: 2,
        at: 0,
        ino: file,
        offset: 0,
        len: 6000,
    };
    assert!(honest.call(&mut net, &w).is_ok());
    net.drain();
    (net, honest, Known { file, dir })
}

// ------------------------------------------------------------ strategies

/// Argument words biased towards what decoders and the file server check.
fn arg() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1),
        0..8u64,
        0..70u64,
        Just(4),
        Just(u32::MAX as u64),
        Just(u32::MAX as u64 + 1),
        (0..5000u64).prop_map(|d| u64::MAX - d),
        Just(u64::MAX / 4096),
        (0..3u64).prop_map(|d| MAX_PAYLOAD as u64 - 1 + d),
        (0..3u64).prop_map(|d| MAX_PATH as u64 - 1 + d),
        0..100_000u64,
        any::<u64>(),
    ]
}

/// File offsets and sizes: mostly within a small file, else any
/// argument.
fn offset() -> impl Strategy<Value = u64> {
    prop_oneof![2 => 0..20_000u64, 1 => arg()]
}

/// An opcode: mostly known ones, some unknown.
fn opcode() -> impl Strategy<Value = u16> {
    let known = (0..Op::ALL.len()).prop_map(|i| Op::ALL[i] as u16);
    prop_oneof![4 => known, 1 => any::<u16>()]
}

/// Payloads: paths (good, bad, not UTF-8, too long) and data.
fn payload() -> impl Strategy<Value = Vec<u8>> {
    let path = prop_oneof![
        Just(b"/d/f".to_vec()),
        Just(b"/d".to_vec()),
        Just(b"/".to_vec()),
        Just(b"/new".to_vec()),
        Just(b"/d/new".to_vec()),
        Just(b"".to_vec()),
        Just(b"//d//f/".to_vec()),
        Just(b"/d/f/x".to_vec()),
        Just(b"/d/../d".to_vec()),
        Just(b"relative".to_vec()),
        Just(b"/\xff\xfe".to_vec()),
        Just(b"/a\0b".to_vec()),
        Just([b"/".as_slice(), &[b'n'; 80]].concat()),
        Just([b"/".as_slice(), &[b'n'; MAX_PATH]].concat()),
        proptest::collection::vec(prop_oneof![Just(b'/'), Just(b'a'), any::<u8>()], 0..40),
    ];
    prop_oneof![
        3 => path,
        1 => proptest::collection::vec(any::<u8>(), 0..300),
        2 => prop_oneof![
            Just(4096usize),
            8000..40_000usize,
            Just(MAX_PAYLOAD - 1),
            Just(MAX_PAYLOAD)
        ]
        .prop_map(|n| vec![0x11; n]),
    ]
}

/// One piece of the hostile node's stream.
#[derive(Debug, Clone)]
enum Piece {
    /// A well-framed descriptor from random fields; `fit`: the payload is
    /// cut or padded to the length the descriptor announces.
    Raw(Raw, Vec<u8>, bool),
    /// A valid request with edge-case fields, a tag, and a payload; `fit`:
    /// the request's length is the payload's (requests without data come
    /// without one).
    Req(Request, u32, Vec<u8>, bool),
    /// A valid frame cut short (the stream goes on with the next piece).
    Truncated(Raw, Vec<u8>, usize),
    /// A header announcing more than a frame may carry.
    Oversized(u32),
    /// A header with a bad magic.
    BadMagic(u32, u32),
    /// Noise.
    Noise(Vec<u8>),
}

fn raw_desc() -> impl Strategy<Value = Raw> {
    (
        opcode(),
        prop_oneof![3 => Just(0u16), 1 => any::<u16>()],
        any::<u32>(),
        proptest::array::uniform7(arg()),
    )
        .prop_map(|(op, status, tag, args)| Raw {
            op,
            status,
            tag,
            args,
        })
}

/// Inode numbers: the known ones, the root, 0, past the table, huge.
fn ino(known: [u64; 3]) -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => proptest::sample::select(known.to_vec()),
        1 => prop_oneof![Just(0u64), Just(1), 0..80u64, Just(u32::MAX as u64 + 1), Just(u64::MAX)],
    ]
}

/// Valid requests with hostile fields. `known`: inodes that exist (the
/// test's file, directory, and node 2's file).
fn request(known: [u64; 3]) -> impl Strategy<Value = Request> {
    let slot = prop_oneof![12 => 0..4u32, 1 => Just(4u32), 1 => Just(u32::MAX), 1 => any::<u32>()];
    let at = prop_oneof![12 => Just(0u32), 1 => 1..5u32, 1 => Just(MAX_PAYLOAD as u32), 1 => Just(u32::MAX)];
    let len = prop_oneof![
        0..20u32,
        0..5000u32,
        Just(4096u32),
        (0..3u32).prop_map(|d| MAX_PAYLOAD as u32 - 1 + d),
        Just(u32::MAX),
    ];
    let path_op = proptest::sample::select(vec![
        Op::Lookup,
        Op::Create,
        Op::Mkdir,
        Op::Unlink,
        Op::Rmdir,
    ]);
    let data_op = proptest::sample::select(vec![Op::Read, Op::Write]);
    prop_oneof![
        3 => (
            path_op,
            slot.clone(),
            at.clone(),
            0..(MAX_PATH as u32 + 1),
            any::<bool>()
        )
            .prop_map(|(op, slot, at, len, exclusive)| Request::Path {
                op,
                slot,
                at,
                len,
                exclusive
            }),
        4 => (data_op, slot.clone(), at, ino(known), offset(), len, arg()).prop_map(
            |(op, slot, at, ino, offset, len, gen)| Request::Data {
                gen,
                op,
                slot,
                at,
                ino,
                offset,
                len
            }
        ),
        2 => (ino(known), offset(), proptest::option::of(arg()), any::<bool>(), arg())
            .prop_map(|(ino, size, expect, locked, gen)| Request::Setattr { ino, size, expect, locked, gen }),
        1 => (slot.clone(), ino(known), arg()).prop_map(|(slot, ino, cookie)| Request::Readdir {
            slot,
            ino,
            cookie
        }),
        1 => (slot, ino(known), arg()).prop_map(|(slot, ino, first)| Request::Locality {
            slot,
            ino,
            first
        }),
        1 => ino(known).prop_map(|ino| Request::Getattr { ino }),
        2 => ino(known).prop_map(|ino| Request::Fsync { ino }),
        1 => Just(Request::Nop),
        1 => Just(Request::Stats),
        1 => Just(Request::PageStats),
    ]
}

fn piece(known: [u64; 3]) -> impl Strategy<Value = Piece> {
    prop_oneof![
        4 => (raw_desc(), payload(), any::<bool>()).prop_map(|(r, p, fit)| Piece::Raw(r, p, fit)),
        8 => (request(known), any::<u32>(), payload(), proptest::bool::weighted(0.8))
            .prop_map(|(r, t, p, fit)| Piece::Req(r, t, p, fit)),
        1 => (raw_desc(), payload(), any::<usize>()).prop_map(|(r, p, c)| Piece::Truncated(r, p, c)),
        1 => prop_oneof![Just(MAX_PAYLOAD as u32 + 1), Just(u32::MAX), any::<u32>()]
            .prop_map(Piece::Oversized),
        1 => (any::<u32>(), 0..100u32).prop_map(|(m, l)| Piece::BadMagic(m, l)),
        1 => proptest::collection::vec(any::<u8>(), 0..100).prop_map(Piece::Noise),
    ]
}

/// The length a descriptor's payload must have, if it names one.
fn announced(raw: &Raw) -> usize {
    match Op::from_u16(raw.op) {
        Some(Op::Lookup | Op::Create | Op::Mkdir | Op::Unlink | Op::Rmdir) => raw.args[1] as usize,
        Some(Op::Write) => raw.args[3] as usize,
        _ => 0,
    }
}

impl Piece {
    fn bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            Piece::Raw(raw, p, fit) => {
                let mut p = p.clone();
                if *fit {
                    p.resize(announced(raw).min(MAX_PAYLOAD), 0x61);
                }
                encode_frame(&raw.encode(), &p, &mut out);
            }
            Piece::Req(req, tag, p, fits) => {
                let mut p = p.clone();
                let mut req = *req;
                let fits = *fits;
                match &mut req {
                    Request::Path { len, .. }
                    | Request::Data {
                        op: Op::Write, len, ..
                    } if fits => *len = p.len() as u32,
                    Request::Path { .. } | Request::Data { op: Op::Write, .. } => {}
                    _ if fits => p.clear(),
                    _ => {}
                }
                encode_frame(&req.encode(*tag), &p, &mut out);
            }
            Piece::Truncated(raw, p, cut) => {
                encode_frame(&raw.encode(), p, &mut out);
                out.truncate(cut % out.len());
            }
            Piece::Oversized(n) => {
                out.extend_from_slice(&MAGIC.to_le_bytes());
                out.extend_from_slice(&n.max(&(MAX_PAYLOAD as u32 + 1)).to_le_bytes());
            }
            Piece::BadMagic(m, n) => {
                let m = if *m == MAGIC { m ^ 1 } else { *m };
                out.extend_from_slice(&m.to_le_bytes());
                out.extend_from_slice(&n.to_le_bytes());
                out.resize(out.len() + 64, 0);
            }
            Piece::Noise(b) => out.extend_from_slice(b),
        }
        out
    }
}

/// How a stream is cut into the chunks that arrive.
#[derive(Debug, Clone)]
enum Cuts {
    /// At these lengths (then the rest at once).
    At(Vec<usize>),
    /// One byte at a time: split at every byte boundary.
    Bytes,
}

fn cuts() -> impl Strategy<Value = Cuts> {
    prop_oneof![
        4 => proptest::collection::vec(prop_oneof![1..4usize, 1..100usize, 1..80_000usize], 0..10)
            .prop_map(Cuts::At),
        1 => Just(Cuts::Bytes),
    ]
}

fn chunks(stream: &[u8], cuts: &Cuts) -> Vec<Vec<u8>> {
    match cuts {
        Cuts::Bytes => stream.iter().map(|b| vec![*b]).collect(),
        Cuts::At(at) => {
            let mut out = Vec::new();
            let mut i = 0;
            for &n in at {
                let n = n.min(stream.len() - i);
                out.push(stream[i..i + n].to_vec());
                i += n;
            }
            out.push(stream[i..].to_vec());
            out
        }
    }
}

// ------------------------------------------------------------ properties

/// The hostile node's stream, one frame served and drained at a time: each
/// frame's answer is checked, and a refused one left the disk as it was.
/// Node 2 writes and reads back between pieces; a node that never joined
/// is refused; the image mounts and verifies at the end.
fn one_at_a_time(
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
fn pipelined(
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
fn verify_image(net: &mut Net, honest: &mut Honest) -> Result<(), TestCaseError> {
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

fn honest_ops() -> impl Strategy<Value = Vec<(u64, usize, u8)>> {
    proptest::collection::vec((0..20_000u64, 1..5000usize, any::<u8>()), 0..4)
}

fn known() -> [u64; 3] {
    // The inodes `setup` creates: node 2's file, /d and /d/f (a fresh
    // image numbers them in creation order after the root).
    [2, 3, 4]
}

thread_local! {
    /// Answers by opcode: (ok, error).
    static OUTCOMES: std::cell::RefCell<std::collections::BTreeMap<String, (usize, usize)>> = Default::default();
    /// Frames served, refused, connections dropped.
    static STATS: std::cell::RefCell<(usize, usize, usize)> = Default::default();
}

/// A stream of valid and invalid frames split in two at every byte
/// boundary: the same answers (opcode, tag, status, payload) each time.
fn every_split_point(net: &mut Net, known: &Known) {
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

/// The properties run one after the other in this one test (the
/// allocation cap is process-wide: no other test may allocate meanwhile).
#[test]
fn directory_side_of_net_takes_any_stream() {
    let (mut net, honest, k) = setup(1);
    assert_eq!([honest.ino, k.dir, k.file], known());
    // The cap is in force around the directory's calls: an allocation
    // past it fails (`vec!` and the like abort the test).
    assert!(budgeted(|| Vec::<u8>::new()
        .try_reserve(BUDGET + 1)
        .is_err()));
    assert!(Vec::<u8>::new().try_reserve(BUDGET + 1).is_ok());
    every_split_point(&mut net, &k);
    drop(net);
    let mut runner = TestRunner::new(cases(256));
    let strategy = (
        any::<u64>(),
        proptest::collection::vec(piece(known()), 1..16),
        cuts(),
        honest_ops(),
    );
    runner
        .run(&strategy, |(seed, pieces, cuts, ops)| {
            one_at_a_time(seed, pieces, cuts, ops)
        })
        .unwrap();
    let (served, refused, drops) = STATS.with(|s| *s.borrow());
    println!(
        "one at a time: {served} frames served, {refused} refused, {drops} connections dropped"
    );
    OUTCOMES.with(|o| println!("answers (ok, error) by opcode: {:?}", o.borrow()));
    let mut runner = TestRunner::new(cases(256));
    runner
        .run(&strategy, |(seed, pieces, cuts, ops)| {
            pipelined(seed, pieces, cuts, ops)
        })
        .unwrap();
}
