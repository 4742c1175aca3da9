//! Property-based fuzzing of what fabric reads from untrusted places: the
//! descriptors and ring indices in the shared region, the region header,
//! and `net` mode's byte stream. Every input must give a value or an error,
//! never a panic, and whatever decodes must re-encode to the same meaning.
//!
//! Case budgets are fixed (see `cases`) so a plain `cargo test` stays fast;
//! `PROPTEST_CASES=N` overrides them for a longer run. A failing case is
//! shrunk, printed, and its seed is persisted under
//! `proptest-regressions/` (committed), where every later run replays it
//! first.

use fabric::layout::{Header, Layout, HEADER_BYTES, MIN_REGION};
use fabric::netwire::{encode_frame, FrameError, FrameReader, MAX_PAYLOAD};
use fabric::proto::{
    DelegList, DelegRange, Desc, Notice, Op, PageKey, Raw, Request, Response, DELEG_PAGES,
    DESC_SIZE,
};
use fabric::ring::{Consumer, Producer, RingError, RingLoc, RING_HEADER};
use fabric::shm::{HeapShm, SharedMem};
use proptest::prelude::*;
use proptest::test_runner::Config;

fn cases(default: u32) -> Config {
    onecopy_fuzzcfg::config(default, "proptest-regressions/fuzz.txt")
}

/// Argument words biased towards the edges decoders check.
fn arg() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1),
        0..16u64,
        Just(u32::MAX as u64),
        Just(u32::MAX as u64 + 1),
        Just(u64::MAX),
        0..70_000u64,
        any::<u64>(),
    ]
}

/// Descriptors: mostly known opcodes with edge-case fields, some pure noise.
fn desc() -> impl Strategy<Value = Desc> {
    let known = (0..Op::ALL.len()).prop_map(|i| Op::ALL[i] as u16);
    let fields = (
        prop_oneof![3 => known, 1 => any::<u16>()],
        prop_oneof![0..40u16, any::<u16>()],
        any::<u32>(),
        proptest::array::uniform7(arg()),
    )
        .prop_map(|(op, status, tag, args)| {
            Raw {
                op,
                status,
                tag,
                args,
            }
            .encode()
        });
    prop_oneof![4 => fields, 1 => proptest::array::uniform32(any::<u8>()).prop_map(|h| {
        let mut d = [0u8; DESC_SIZE];
        d[..32].copy_from_slice(&h);
        d[32..].copy_from_slice(&h);
        d
    })]
}

proptest! {
    #![proptest_config(cases(2000))]

    #[test]
    fn raw_round_trips_every_descriptor(d in desc()) {
        prop_assert_eq!(Raw::decode(&d).encode(), d);
        let inv = Raw::decode(&Raw::invalid_answer(&d));
        prop_assert_eq!(inv.op, Raw::decode(&d).op);
        prop_assert_eq!(inv.tag, Raw::decode(&d).tag);
    }

    #[test]
    fn request_decode_is_total_and_canonical(d in desc()) {
        if let Ok((tag, req)) = Request::decode(&d) {
            prop_assert_eq!(Request::decode(&req.encode(tag)), Ok((tag, req)));
        }
    }

    #[test]
    fn response_decode_is_total_and_canonical(d in desc(), i in 0..Op::ALL.len()) {
        let op = Op::ALL[i];
        if let Ok((tag, resp)) = Response::decode(&d, op) {
            prop_assert_eq!(Response::decode(&resp.encode(op, tag), op), Ok((tag, resp)));
        }
    }

    #[test]
    fn notice_decode_is_total_and_canonical(d in desc()) {
        if let Ok(n) = Notice::decode(&d) {
            prop_assert_eq!(Notice::decode(&n.encode()), Ok(n));
        }
    }
}

/// A delegation's list frame as a hostile holder may leave it: record
/// words biased towards the edges, mostly well-formed ones, a few too
/// short.
fn list_words() -> impl Strategy<Value = Vec<u64>> {
    let record = prop_oneof![
        100 => Just(0u64),
        100 => (any::<u32>(), any::<bool>())
            .prop_map(|(gfn, dirty)| DelegList::record(u64::from(gfn), dirty).unwrap_or(0)),
        1 => arg(),
    ];
    let n = DELEG_PAGES as usize;
    proptest::collection::vec(record, n - 8..=n + 8)
}

proptest! {
    #![proptest_config(cases(500))]

    #[test]
    fn delegation_list_decode_is_total_and_canonical(
        words in list_words(),
        ino in arg(),
        at in arg(),
    ) {
        let range = DelegRange::of(PageKey { ino, idx: at });
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        if let Ok(pages) = DelegList::decode(range, &bytes) {
            prop_assert!(pages.iter().all(|p| range.contains(&p.key) && p.gfn <= u64::from(u32::MAX)));
            let img = DelegList::encode(range, &pages).unwrap();
            prop_assert_eq!(DelegList::decode(range, &img), Ok(pages));
        }
    }
}

/// One step against a ring whose region a hostile peer also writes.
#[derive(Debug, Clone)]
enum RingStep {
    Push(u8),
    Pop,
    /// The peer stores an arbitrary head.
    Head(u32),
    /// The peer stores an arbitrary tail.
    Tail(u32),
    /// The peer scribbles over a slot.
    Slot(u32, u8),
}

fn ring_step() -> impl Strategy<Value = RingStep> {
    prop_oneof![
        4 => any::<u8>().prop_map(RingStep::Push),
        4 => Just(RingStep::Pop),
        1 => prop_oneof![any::<u32>(), 0..20u32].prop_map(RingStep::Head),
        1 => prop_oneof![any::<u32>(), 0..20u32].prop_map(RingStep::Tail),
        1 => (any::<u32>(), any::<u8>()).prop_map(|(s, v)| RingStep::Slot(s, v)),
    ]
}

proptest! {
    #![proptest_config(cases(500))]

    /// Producer and consumer over a region whose header and slots start as
    /// arbitrary bytes and get overwritten between steps: every call gives
    /// a value or `Full`/`Corrupt`, counts stay within the ring, and no
    /// access leaves the ring's bytes (HeapShm panics if one does).
    #[test]
    fn ring_survives_a_hostile_region(
        slots_log in 0u32..5,
        init in proptest::collection::vec(any::<u8>(), RingLoc::bytes(16)),
        steps in proptest::collection::vec(ring_step(), 0..64),
    ) {
        let slots = 1u32 << slots_log;
        let loc = RingLoc { off: 64, slots };
        // The ring sits between two guard areas that must stay untouched.
        let len = 64 + RingLoc::bytes(slots) + 64;
        let mem = HeapShm::new(len);
        mem.write(64, &init[..RingLoc::bytes(slots)]);
        mem.write(0, &[0xA5; 64]);
        mem.write(len - 64, &[0x5A; 64]);
        let mut p = Producer::new(loc);
        let mut c = Consumer::new(loc);
        for step in steps {
            match step {
                RingStep::Push(v) => match p.push(&mem, &[v; DESC_SIZE]) {
                    Ok(()) | Err(RingError::Full) | Err(RingError::Corrupt { .. }) => {}
                },
                RingStep::Pop => {
                    if let Ok(n) = c.pending(&mem) {
                        prop_assert!(n <= slots);
                    }
                    let _ = c.pop(&mem);
                }
                RingStep::Head(h) => mem.store_u32(64, h),
                RingStep::Tail(t) => mem.store_u32(128, t),
                RingStep::Slot(s, v) => {
                    let off = 64 + RING_HEADER + (s % slots) as usize * DESC_SIZE;
                    mem.write(off, &[v; DESC_SIZE]);
                }
            }
            if let Ok(f) = p.free(&mem) {
                prop_assert!(f <= slots);
            }
        }
        let mut guard = [0u8; 64];
        mem.read(0, &mut guard);
        prop_assert_eq!(guard, [0xA5; 64]);
        mem.read(len - 64, &mut guard);
        prop_assert_eq!(guard, [0x5A; 64]);
    }
}

/// Size of the region the header fuzzing runs on.
const REGION: usize = 4 * MIN_REGION;

/// A header field (offset in the region, width in bytes) and a new value.
fn header_edit() -> impl Strategy<Value = (usize, usize, u64)> {
    let fields = [
        (16usize, 8usize),
        (24, 4),
        (28, 4),
        (32, 8),
        (40, 8),
        (48, 8),
        (56, 8),
        (64, 4),
        (68, 4),
        (72, 8),
        (80, 8),
        (88, 8),
        (96, 8),
    ];
    (0..fields.len(), arg(), any::<bool>()).prop_map(move |(i, v, scale)| {
        let (off, width) = fields[i];
        // Page-sized and 64-aligned values pass more of the checks.
        let v = if scale { v.wrapping_mul(64) } else { v };
        (off, width, v)
    })
}

proptest! {
    #![proptest_config(cases(500))]

    /// A region header with arbitrary fields (checksum recomputed, so the
    /// geometry itself is what gets checked) is rejected, or every area it
    /// describes lies inside the region: every ring and bulk slot of every
    /// node can be used without an out-of-bounds access.
    #[test]
    fn region_header_is_validated(
        nodes in 1u32..5,
        edits in proptest::collection::vec(header_edit(), 0..4),
    ) {
        let mem = HeapShm::new(REGION);
        let good = Layout::compute(REGION, nodes).expect("a valid geometry");
        good.format(&mem, 1);
        for (off, width, v) in edits {
            mem.write(off, &v.to_le_bytes()[..width]);
        }
        let mut fixed = [0u8; 96];
        mem.read(8, &mut fixed);
        mem.store_u32(104, crc32fast::hash(&fixed));
        let Ok(l) = Layout::read(&mem) else { return Ok(()) };
        prop_assert!(l.region_size <= REGION);
        for node in 1..=l.max_nodes {
            for ring in l.channel(node).rings() {
                prop_assert!(ring.off >= HEADER_BYTES);
                prop_assert!(ring.off + RingLoc::bytes(ring.slots) <= l.region_size);
                let mut c = Consumer::new(ring);
                let _ = c.pop(&mem);
            }
            for slot in 0..l.bulk_slots.min(8) {
                let (off, len) = l.bulk_slot(node, slot).expect("slot in range");
                prop_assert!(off + len <= l.region_size);
            }
            let (first, end) = l.pool_gfns(node);
            prop_assert!(end as usize * fabric::PAGE_SIZE <= l.region_size);
            prop_assert_eq!(l.gfn_owner(first), Some(node).filter(|_| first < end));
            let h = Header::new(&mem, l);
            let _ = (h.node_state(node), h.node_epoch(node), h.join_nonce(node));
        }
    }
}

/// A frame: a descriptor and a payload length up to a few KiB.
fn frame() -> impl Strategy<Value = (Desc, Vec<u8>)> {
    (desc(), proptest::collection::vec(any::<u8>(), 0..3000))
}

/// Split `bytes` at the given cut points into chunks.
fn chunks(bytes: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    cuts.sort_unstable();
    let mut out = Vec::new();
    let mut at = 0;
    for c in cuts.into_iter().chain([bytes.len()]) {
        out.push(bytes[at..c].to_vec());
        at = c;
    }
    out
}

proptest! {
    #![proptest_config(cases(500))]

    /// Valid frames cut anywhere come out whole and in order.
    #[test]
    fn frames_survive_any_chunking(
        frames in proptest::collection::vec(frame(), 1..6),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
    ) {
        let mut stream = Vec::new();
        for (d, p) in &frames {
            encode_frame(d, p, &mut stream);
        }
        let mut r = FrameReader::new();
        let mut got = Vec::new();
        for chunk in chunks(&stream, &cuts) {
            r.push(&chunk);
            while let Some(f) = r.next_frame().expect("valid stream") {
                got.push((f.desc, f.payload));
            }
        }
        prop_assert_eq!(got, frames);
        prop_assert_eq!(r.buffered(), 0);
    }

    /// Arbitrary bytes (noise, or a valid stream with bytes overwritten)
    /// give frames, "incomplete", or a sticky framing error: never a panic,
    /// never a payload over the limit, and after an error the reader keeps
    /// nothing.
    #[test]
    fn arbitrary_stream_never_panics(
        frames in proptest::collection::vec(frame(), 0..3),
        noise in proptest::collection::vec(any::<u8>(), 0..200),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
    ) {
        let mut stream = Vec::new();
        for (d, p) in &frames {
            encode_frame(d, p, &mut stream);
        }
        stream.extend_from_slice(&noise);
        if !stream.is_empty() {
            let n = stream.len();
            for (at, v) in edits {
                stream[at % n] = v;
            }
        }
        let mut r = FrameReader::new();
        let mut failed: Option<FrameError> = None;
        for chunk in chunks(&stream, &cuts) {
            r.push(&chunk);
            loop {
                match r.next_frame() {
                    Ok(Some(f)) => {
                        prop_assert!(failed.is_none());
                        prop_assert!(f.payload.len() <= MAX_PAYLOAD);
                    }
                    Ok(None) => break,
                    Err(e) => {
                        prop_assert!(failed.is_none() || failed == Some(e));
                        failed = Some(e);
                        prop_assert_eq!(r.buffered(), 0);
                        break;
                    }
                }
            }
        }
    }
}
