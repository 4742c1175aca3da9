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
//! By topic: the directory and its links (`rig.rs`), the strategies
//! that make hostile streams (`strategies.rs`), the properties
//! (`properties.rs`).
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

mod properties;
mod rig;
mod strategies;

use properties::*;
use rig::*;
use strategies::*;

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
