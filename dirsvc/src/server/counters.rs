//! The directory's statistics: requests served (in all and per opcode),
//! requests per sweep, the per-phase service times of misses
//! ([`MissTimer`]), and the last malformed request, reported once per
//! poll.
//!
//! [`Counters`] owns them; dispatch and the `net` path count, the disk
//! paths time misses (through [`Counters::miss`]), and the statistics
//! requests and `dir stats` read them.

use super::misstime::MissTimer;
use super::Event;
use fabric::proto::Op;

/// Request counters, the miss timer and the last malformed request:
/// owned here; counted by dispatch and the `net` path, read by the
/// statistics requests.
pub(super) struct Counters {
    requests: u64,
    ops: [u64; 32],
    /// Requests served per sweep (index = batch size, capped at 64).
    batches: [u64; 65],
    /// The last malformed request seen, reported once per poll.
    last_bad: Option<Event>,
    /// Per-phase service times of misses.
    pub(super) miss: MissTimer,
}

impl Counters {
    /// Nothing counted; misses timed on `clock`.
    pub(super) fn new(clock: fn() -> u64) -> Counters {
        Counters {
            requests: 0,
            ops: [0; 32],
            batches: [0; 65],
            last_bad: None,
            miss: MissTimer::new(clock),
        }
    }

    /// Count one request with opcode `op` in the per-opcode counters.
    pub(super) fn count_op(&mut self, op: Op) {
        self.ops[(op as usize).min(31)] += 1;
    }

    /// Count `n` requests in the total.
    pub(super) fn count_requests(&mut self, n: u64) {
        self.requests += n;
    }

    /// A sweep served `served` requests of one node.
    pub(super) fn count_batch(&mut self, served: usize) {
        if served > 0 {
            self.batches[served.min(64)] += 1;
        }
    }

    /// Requests served in all.
    pub(super) fn requests(&self) -> u64 {
        self.requests
    }

    /// Requests served per opcode number.
    pub(super) fn ops(&self) -> &[u64; 32] {
        &self.ops
    }

    /// Requests served per sweep, by batch size.
    pub(super) fn batches(&self) -> &[u64; 65] {
        &self.batches
    }

    /// A malformed request (reported by the next [`Counters::take_bad`]).
    pub(super) fn bad(&mut self, e: Event) {
        self.last_bad = Some(e);
    }

    /// The last malformed request since the last call.
    pub(super) fn take_bad(&mut self) -> Option<Event> {
        self.last_bad.take()
    }
}
