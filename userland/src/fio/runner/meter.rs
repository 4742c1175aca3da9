//! Result accounting: the clock side of a run (ramp, runtime, a stuck
//! clock) and the latency samples of what is measured.

use alloc::string::String;

use super::{FioError, Limits};
use crate::fio::offsets::Ddir;
use crate::fio::options::JobSpec;
use crate::fio::report::Samples;

/// The clock side of a run: ramp, runtime, a stuck clock, and what is
/// measured.
pub(super) struct Meter {
    /// Latency samples: reads, writes.
    pub(super) samples: [Samples; 2],
    /// fsync calls while measuring.
    pub(super) fsyncs: u64,
    /// The ramp is over.
    pub(super) measuring: bool,
    ramp_end: u64,
    /// When measuring started.
    pub(super) measure_start: u64,
    /// When the runtime is over (`u64::MAX`: never).
    deadline: u64,
    /// The last measured completion.
    pub(super) last_done: u64,
    pub(super) hit_runtime: bool,
    last_clock: u64,
    /// I/Os issued without the clock moving.
    stuck: u64,
    stuck_limit: u64,
    runtime_ns: u64,
    time_based: bool,
}

impl Meter {
    pub(super) fn new(spec: &JobSpec, limits: Limits, start: u64, budget: u64) -> Meter {
        let expect = budget.saturating_mul(u64::from(spec.numjobs));
        let cap = |used: bool| if used { limits.reservoir } else { 1 };
        Meter {
            samples: [
                Samples::new(cap(spec.rw.reads()), expect),
                Samples::new(cap(spec.rw.writes()), expect),
            ],
            fsyncs: 0,
            measuring: spec.ramp_ns == 0,
            ramp_end: start.saturating_add(spec.ramp_ns),
            measure_start: start,
            deadline: deadline_after(start, spec.runtime_ns),
            last_done: start,
            hit_runtime: false,
            last_clock: start,
            stuck: 0,
            stuck_limit: limits.stuck_ios,
            runtime_ns: spec.runtime_ns,
            time_based: spec.time_based,
        }
    }

    /// `ios` I/Os are about to be issued at `now`: fail if the clock has
    /// not moved for too many of them and the end of the run depends on
    /// it.
    pub(super) fn check_clock(&mut self, now: u64, ios: u64) -> Result<(), FioError> {
        if now != self.last_clock {
            self.last_clock = now;
            self.stuck = 0;
        } else if !self.measuring || self.time_based {
            self.stuck = self.stuck.saturating_add(ios);
            if self.stuck > self.stuck_limit {
                return Err(FioError::new(String::from(
                    "the clock does not advance (uptime_ns is stuck)",
                )));
            }
        }
        Ok(())
    }

    /// At `now`, before issuing I/O: start measuring if the ramp is over;
    /// `true` if the runtime has passed (the run ends).
    pub(super) fn expired(&mut self, now: u64) -> bool {
        if !self.measuring && now >= self.ramp_end {
            self.measuring = true;
            self.measure_start = now;
            self.last_done = now;
            self.deadline = deadline_after(now, self.runtime_ns);
        }
        if self.measuring && now >= self.deadline {
            self.hit_runtime = true;
            return true;
        }
        false
    }

    /// Record one completed I/O of `dir` that took `lat` (while
    /// measuring).
    pub(super) fn record(&mut self, dir: Ddir, lat: u64) {
        if let Some(s) = self.samples.get_mut(dir.index()) {
            s.push(lat);
        }
    }
}

fn deadline_after(t: u64, runtime_ns: u64) -> u64 {
    if runtime_ns == 0 {
        u64::MAX
    } else {
        t.saturating_add(runtime_ns)
    }
}
