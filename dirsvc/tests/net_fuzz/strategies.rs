//! Strategies: the pieces of a hostile node's stream and how it is cut
//! into chunks.

use super::*;

/// Argument words biased towards what decoders and the file server check.
pub(super) fn arg() -> impl Strategy<Value = u64> {
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
pub(super) fn offset() -> impl Strategy<Value = u64> {
    prop_oneof![2 => 0..20_000u64, 1 => arg()]
}

/// An opcode: mostly known ones, some unknown.
pub(super) fn opcode() -> impl Strategy<Value = u16> {
    let known = (0..Op::ALL.len()).prop_map(|i| Op::ALL[i] as u16);
    prop_oneof![4 => known, 1 => any::<u16>()]
}

/// Payloads: paths (good, bad, not UTF-8, too long) and data.
pub(super) fn payload() -> impl Strategy<Value = Vec<u8>> {
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
pub(super) enum Piece {
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

pub(super) fn raw_desc() -> impl Strategy<Value = Raw> {
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
pub(super) fn ino(known: [u64; 3]) -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => proptest::sample::select(known.to_vec()),
        1 => prop_oneof![Just(0u64), Just(1), 0..80u64, Just(u32::MAX as u64 + 1), Just(u64::MAX)],
    ]
}

/// Valid requests with hostile fields. `known`: inodes that exist (the
/// test's file, directory, and node 2's file).
pub(super) fn request(known: [u64; 3]) -> impl Strategy<Value = Request> {
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

pub(super) fn piece(known: [u64; 3]) -> impl Strategy<Value = Piece> {
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
pub(super) fn announced(raw: &Raw) -> usize {
    match Op::from_u16(raw.op) {
        Some(Op::Lookup | Op::Create | Op::Mkdir | Op::Unlink | Op::Rmdir) => raw.args[1] as usize,
        Some(Op::Write) => raw.args[3] as usize,
        _ => 0,
    }
}

impl Piece {
    pub(super) fn bytes(&self) -> Vec<u8> {
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
pub(super) enum Cuts {
    /// At these lengths (then the rest at once).
    At(Vec<usize>),
    /// One byte at a time: split at every byte boundary.
    Bytes,
}

pub(super) fn cuts() -> impl Strategy<Value = Cuts> {
    prop_oneof![
        4 => proptest::collection::vec(prop_oneof![1..4usize, 1..100usize, 1..80_000usize], 0..10)
            .prop_map(Cuts::At),
        1 => Just(Cuts::Bytes),
    ]
}

pub(super) fn chunks(stream: &[u8], cuts: &Cuts) -> Vec<Vec<u8>> {
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
