//! The protocol timeline on the node: an eviction sweep records its start
//! (the victims taken) and its end (the pages freed).

use super::*;
use crate::watermark::Watermarks;
use fabric::trace::{self, Kind};

fn clock() -> u64 {
    static T: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    T.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Reading a file twice the pool evicts: sweeps start and end, and free
/// pages.
#[test]
fn a_file_larger_than_the_pool_records_eviction_sweeps() {
    let mut cfg = RigConfig::new(1, Mode::Strong);
    cfg.region = 2 << 20;
    cfg.reclaim = Watermarks::OFF;
    let _one = TRACE_TESTS.lock().unwrap_or_else(|e| e.into_inner());
    let rig = Rig::new(cfg);
    let pool = rig.sh.layout.pool_frames as usize;
    let data = pattern(2 * pool * 4096, 5);
    write_file(&mut rig.node(1), "/big", &data);
    rig.node(1).sync().unwrap();
    rig.node(1).cache_drop().unwrap();
    trace::set_clock(clock);
    trace::clear();
    trace::set_enabled(true);
    assert_eq!(read_file(&mut rig.node(1), "/big"), data);
    trace::set_enabled(false);
    // Tests running alongside record into the same ring while this one
    // has it on (their own sweeps among them, and the oldest events may be
    // overwritten), so the check is on counts, not on strict pairing.
    let (events, _) = trace::snapshot();
    let (mut started, mut sweeps, mut freed) = (0u64, 0u64, 0u64);
    for e in events {
        match e.kind {
            Kind::EvictStart => {
                assert!(e.arg > 0, "a sweep with no victim recorded");
                started += 1;
            }
            Kind::EvictEnd => {
                assert!(sweeps < started, "a sweep ended that never started");
                sweeps += 1;
                freed += e.arg;
            }
            _ => {}
        }
    }
    assert!(sweeps > 0, "no eviction sweep recorded");
    assert!(
        freed > 0,
        "{sweeps} sweeps freed nothing (pool {pool}, file {} pages)",
        2 * pool
    );
}
