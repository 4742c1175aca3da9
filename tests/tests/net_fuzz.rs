//! Property-based fuzzing of the node's `net` mode client
//! (`nodepath::netclient::NetClient`): after any request, bytes from the
//! server (a well-formed answer, one with a wrong tag or payload, or
//! noise, cut into any chunks) give an answer, "incomplete" or `Io`, never
//! a panic or another error; an answer returned is exactly what the frame
//! said, for the pending request's tag and opcode. A host test (no QEMU),
//! part of a plain `cargo test`.
//!
//! Budget: `cases` below (override with `PROPTEST_CASES=N`); failures are
//! persisted in `tests/proptest-regressions/net_fuzz.txt` (committed) and
//! replayed first on every run.

use fabric::netwire::encode_frame;
use fabric::proto::{op_of, Errno, Op, Raw, Request, Response};
use nodepath::netclient::NetClient;
use proptest::prelude::*;
use proptest::test_runner::Config;

fn cases(default: u32) -> Config {
    onecopy_fuzzcfg::config(default, "proptest-regressions/net_fuzz.txt")
}

fn arg() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1),
        0..16u64,
        0..5000u64,
        Just(u64::MAX),
        any::<u64>()
    ]
}

fn raw() -> impl Strategy<Value = Raw> {
    let known = (0..Op::ALL.len()).prop_map(|i| Op::ALL[i] as u16);
    (
        prop_oneof![3 => known, 1 => any::<u16>()],
        prop_oneof![3 => Just(0u16), 1 => 0..40u16],
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

/// Requests: whatever a random descriptor decodes to.
fn request() -> impl Strategy<Value = Request> {
    raw().prop_filter_map("not a request", |r| {
        Request::decode(&r.encode()).ok().map(|(_, req)| req)
    })
}

/// What the server sends back.
#[derive(Debug, Clone)]
enum Reply {
    /// A frame with the pending tag and opcode (fields otherwise random).
    Answer(Raw, usize),
    /// A frame as given.
    Frame(Raw, usize),
    /// Raw bytes.
    Noise(Vec<u8>),
}

fn reply() -> impl Strategy<Value = Reply> {
    let len = prop_oneof![Just(0usize), 0..300usize, Just(96), Just(4096)];
    prop_oneof![
        4 => (raw(), len.clone()).prop_map(|(r, l)| Reply::Answer(r, l)),
        1 => (raw(), len).prop_map(|(r, l)| Reply::Frame(r, l)),
        1 => proptest::collection::vec(any::<u8>(), 0..100).prop_map(Reply::Noise),
    ]
}

proptest! {
    #![proptest_config(cases(3000))]

    #[test]
    fn net_client_takes_any_answer(
        req in request(),
        replies in proptest::collection::vec(reply(), 1..4),
        cuts in proptest::collection::vec(1..200usize, 0..8),
    ) {
        let mut c = NetClient::new();
        let _ = c.bulk_write(0, 0, b"/some/path");
        let _ = c.request(&req);
        let tag = c.pending_tag().expect("pending");
        let op = op_of(&req);
        let mut stream = Vec::new();
        for r in &replies {
            match r {
                Reply::Answer(raw, len) => {
                    let raw = Raw { op: op as u16, tag, ..*raw };
                    encode_frame(&raw.encode(), &vec![0xAB; *len], &mut stream);
                }
                Reply::Frame(raw, len) => encode_frame(&raw.encode(), &vec![0xCD; *len], &mut stream),
                Reply::Noise(b) => stream.extend_from_slice(b),
            }
        }
        // The reply that starts the stream (empty noise adds no bytes).
        let first = match replies.iter().find(|r| !matches!(r, Reply::Noise(b) if b.is_empty())) {
            Some(Reply::Answer(raw, len)) => Some((Raw { op: op as u16, tag, ..*raw }, *len)),
            _ => None,
        };
        let mut at = 0;
        let mut cuts = cuts.into_iter();
        let mut answered = false;
        while at < stream.len() {
            let n = cuts.next().unwrap_or(stream.len() - at).min(stream.len() - at);
            let got = c.feed(&stream[at..at + n]);
            at += n;
            match got {
                Ok(None) => {}
                Ok(Some(resp)) => {
                    prop_assert!(!answered, "two answers to one request");
                    answered = true;
                    prop_assert_eq!(c.pending_tag(), None);
                    // Only a frame carrying the pending tag can answer.
                    let (raw, _) = first.expect("a noise or foreign frame answered");
                    let want = Response::decode(&raw.encode(), op).map(|(_, r)| r);
                    prop_assert_eq!(Ok(resp), want);
                }
                Err(e) => {
                    prop_assert_eq!(e, Errno::Io);
                    break;
                }
            }
        }
        // Whatever happened, the client can start over.
        c.reset();
        let _ = c.request(&Request::Nop);
        prop_assert!(c.pending_tag().is_some());
    }
}
