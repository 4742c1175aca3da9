//! What a workload measures while it runs: a latency histogram per
//! operation kind, bytes moved, and the run control every thread asks
//! before each operation (`--runtime`, `--ops`, a stuck clock, the first
//! error stops everyone).

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::{Cell, RefCell};

use super::AppError;

/// Log-linear buckets: values below 16 exactly, then 8 buckets per
/// power of two (12.5% resolution), up to 2^64.
const SUB: u32 = 8;
const BUCKETS: usize = 16 + 60 * SUB as usize;

/// A latency histogram in nanoseconds (fixed memory, deterministic).
#[derive(Debug, Clone)]
pub struct Hist {
    counts: Vec<u64>,
    n: u64,
    sum: u128,
    max: u64,
}

impl Default for Hist {
    fn default() -> Hist {
        Hist {
            counts: vec![0; BUCKETS],
            n: 0,
            sum: 0,
            max: 0,
        }
    }
}

fn bucket(v: u64) -> usize {
    if v < 16 {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // >= 4
    let sub = ((v >> (e - 3)) & u64::from(SUB - 1)) as usize;
    (16 + (e as usize - 4) * SUB as usize + sub).min(BUCKETS - 1)
}

/// The largest value of bucket `b`.
fn bucket_top(b: usize) -> u64 {
    if b < 16 {
        return b as u64;
    }
    let e = (b - 16) / SUB as usize + 4;
    let sub = ((b - 16) % SUB as usize) as u64;
    let lo = (1u64 << e) | (sub << (e - 3));
    lo.saturating_add((1u64 << (e - 3)) - 1)
}

impl Hist {
    /// Count one sample.
    pub fn add(&mut self, v: u64) {
        if let Some(c) = self.counts.get_mut(bucket(v)) {
            *c += 1;
        }
        self.n += 1;
        self.sum += u128::from(v);
        self.max = self.max.max(v);
    }

    /// Samples counted.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// Mean, rounded down (0 without samples).
    pub fn mean(&self) -> u64 {
        u64::try_from(self.sum.checked_div(u128::from(self.n)).unwrap_or(0)).unwrap_or(u64::MAX)
    }

    /// Largest sample.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The `per_mille` percentile by nearest rank, as the top of its
    /// bucket (never above the largest sample); 0 without samples.
    pub fn percentile(&self, per_mille: u32) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let rank = (u128::from(per_mille.min(1000)) * u128::from(self.n))
            .div_ceil(1000)
            .max(1);
        let mut seen = 0u128;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += u128::from(c);
            if seen >= rank {
                return bucket_top(b).min(self.max);
            }
        }
        self.max
    }
}

/// One operation kind's figures.
#[derive(Debug, Clone, Default)]
pub struct OpStat {
    /// Latencies (ns).
    pub lat: Hist,
    /// Bytes read by these operations.
    pub read: u64,
    /// Bytes written by these operations.
    pub written: u64,
}

/// The run control and the figures, shared by a run's tasks through
/// `&` (never borrowed across an `.await`).
///
/// With a warm-up, the first operation begun or recorded at or after the
/// warm-up's end starts the measured phase, which runs from the warm-up's
/// end: every figure counted so far is cleared and
/// [`Meter::take_measuring`] says so once (the caller then takes its
/// counters' baseline). Operations begun in the warm-up that end after it
/// are counted in the measured phase, as Filebench's statistics cleared
/// mid-run count them.
pub struct Meter {
    names: &'static [&'static str],
    ops: RefCell<Vec<OpStat>>,
    start_ns: Cell<u64>,
    /// The warm-up's end (None: no warm-up, or it ended).
    warm_until: Cell<Option<u64>>,
    warmup_ns: u64,
    measuring: Cell<bool>,
    deadline_ns: u64,
    ops_limit: u64,
    started: Cell<u64>,
    stop: Cell<bool>,
    error: RefCell<Option<AppError>>,
    last_ns: Cell<u64>,
    same_clock: Cell<u64>,
    end_ns: Cell<u64>,
}

/// A run whose end depends on the clock fails after this many operations
/// without the clock moving.
pub const STUCK_OPS: u64 = 1_000_000;

impl Meter {
    /// A meter for the operation kinds `names`, starting at `start_ns`,
    /// running `runtime_ns` or `ops_limit` top-level operations (0: no
    /// limit), whichever comes first.
    pub fn new(
        names: &'static [&'static str],
        start_ns: u64,
        runtime_ns: u64,
        ops_limit: u64,
    ) -> Meter {
        Meter::with_warmup(names, start_ns, 0, runtime_ns, ops_limit)
    }

    /// As [`Meter::new`], after a warm-up of `warmup_ns` (0: none) whose
    /// operations are not counted: the measured phase runs `runtime_ns`
    /// or `ops_limit` operations from the warm-up's end.
    pub fn with_warmup(
        names: &'static [&'static str],
        start_ns: u64,
        warmup_ns: u64,
        runtime_ns: u64,
        ops_limit: u64,
    ) -> Meter {
        let warm_end = start_ns.saturating_add(warmup_ns);
        Meter {
            names,
            ops: RefCell::new(vec![OpStat::default(); names.len()]),
            start_ns: Cell::new(start_ns),
            warm_until: Cell::new((warmup_ns > 0).then_some(warm_end)),
            warmup_ns,
            measuring: Cell::new(false),
            deadline_ns: warm_end.saturating_add(runtime_ns),
            ops_limit,
            started: Cell::new(0),
            stop: Cell::new(false),
            error: RefCell::new(None),
            last_ns: Cell::new(start_ns),
            same_clock: Cell::new(0),
            end_ns: Cell::new(start_ns),
        }
    }

    /// May a thread start another top-level operation (a flowop loop, a
    /// lookup, a token, a query) at time `now`? Counts it if so.
    pub fn begin(&self, now: u64) -> bool {
        if self.stop.get() {
            return false;
        }
        if let Some(end) = self.warm_until.get() {
            if now < end {
                return self.warm_op(now);
            }
            self.start_measuring(end);
        }
        if self.ops_limit > 0 && self.started.get() >= self.ops_limit {
            self.stop.set(true);
            return false;
        }
        if now >= self.deadline_ns {
            self.stop.set(true);
            return false;
        }
        if now == self.last_ns.get() {
            let same = self.same_clock.get() + 1;
            self.same_clock.set(same);
            if self.ops_limit == 0 && same >= STUCK_OPS {
                self.fail(AppError::new(format!(
                    "the clock did not move in {STUCK_OPS} operations (stopping)"
                )));
                return false;
            }
        } else {
            self.last_ns.set(now);
            self.same_clock.set(0);
        }
        self.started.set(self.started.get() + 1);
        true
    }

    /// An operation of the warm-up: allowed unless the clock is stuck
    /// (not counted against `--ops`).
    fn warm_op(&self, now: u64) -> bool {
        if now == self.last_ns.get() {
            let same = self.same_clock.get() + 1;
            self.same_clock.set(same);
            if same >= STUCK_OPS {
                self.fail(AppError::new(format!(
                    "the clock did not move in {STUCK_OPS} operations of the warm-up (stopping)"
                )));
                return false;
            }
        } else {
            self.last_ns.set(now);
            self.same_clock.set(0);
        }
        true
    }

    /// The warm-up ended at `end`: clear what it counted; the measured
    /// phase runs from there.
    fn start_measuring(&self, end: u64) {
        self.warm_until.set(None);
        for s in self.ops.borrow_mut().iter_mut() {
            *s = OpStat::default();
        }
        self.started.set(0);
        self.start_ns.set(end);
        self.end_ns.set(end);
        self.measuring.set(true);
    }

    /// True once, when the measured phase of a run with a warm-up has just
    /// begun (the counters' baselines are to be taken now).
    pub fn take_measuring(&self) -> bool {
        self.measuring.replace(false)
    }

    /// Length of the warm-up asked for (ns).
    pub fn warmup_ns(&self) -> u64 {
        self.warmup_ns
    }

    /// Is the warm-up still on?
    pub fn warming(&self) -> bool {
        self.warm_until.get().is_some()
    }

    /// Stop every thread with `e` (the first error is kept).
    pub fn fail(&self, e: AppError) {
        self.stop.set(true);
        let mut slot = self.error.borrow_mut();
        if slot.is_none() {
            *slot = Some(e);
        }
    }

    /// The first error, if any.
    pub fn take_error(&self) -> Option<AppError> {
        self.error.borrow_mut().take()
    }

    /// Top-level operations started.
    pub fn started(&self) -> u64 {
        self.started.get()
    }

    /// Record one operation of kind `op` (an index into the names) that
    /// took `lat_ns`, moved `read` / `written` bytes and ended at
    /// `end_ns`.
    pub fn record(&self, op: usize, lat_ns: u64, read: u64, written: u64, end_ns: u64) {
        // An operation ending past the warm-up starts the measured phase
        // too: a workload whose top-level operations are long (a
        // sequence of tokens) may begin none for a while.
        if let Some(end) = self.warm_until.get() {
            if end_ns >= end {
                self.start_measuring(end);
            }
        }
        if let Some(s) = self.ops.borrow_mut().get_mut(op) {
            s.lat.add(lat_ns);
            s.read += read;
            s.written += written;
        }
        self.end_ns.set(self.end_ns.get().max(end_ns));
    }

    /// From the start to the last recorded operation's end (ns).
    pub fn elapsed_ns(&self) -> u64 {
        self.end_ns.get().saturating_sub(self.start_ns.get())
    }

    /// The operation kinds' names.
    pub fn names(&self) -> &'static [&'static str] {
        self.names
    }

    /// The figures so far, in name order.
    pub fn stats(&self) -> Vec<OpStat> {
        self.ops.borrow().clone()
    }
}

/// Operations per second of `count` operations in `elapsed_ns`, in
/// thousandths (0 for no time).
pub fn per_s_milli(count: u64, elapsed_ns: u64) -> u64 {
    let v = u128::from(count) * 1_000_000_000_000 / u128::from(elapsed_ns.max(1));
    if elapsed_ns == 0 {
        return 0;
    }
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// The geometric mean of values in thousandths (zeros skipped; 0 if all
/// are zero), in thousandths.
pub fn geomean_milli(values: &[u64]) -> u64 {
    let logs: Vec<f64> = values
        .iter()
        .filter(|&&v| v > 0)
        .map(|&v| datasets::fmath::ln(v as f64))
        .collect();
    if logs.is_empty() {
        return 0;
    }
    let mean = logs.iter().sum::<f64>() / logs.len() as f64;
    (datasets::fmath::exp(mean) + 0.5) as u64
}

/// `x.yyy` for a value in thousandths.
pub fn milli_text(v: u64) -> String {
    format!("{}.{:03}", v / 1000, v % 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_values_and_tops_bound_them() {
        for v in [0u64, 1, 15, 16, 17, 100, 1000, 12345, 1 << 40, u64::MAX] {
            let b = bucket(v);
            assert!(b < BUCKETS);
            assert!(bucket_top(b) >= v, "{v}");
            if b > 0 {
                assert!(bucket_top(b - 1) < v, "{v}");
            }
        }
    }

    #[test]
    fn percentiles_within_an_eighth() {
        let mut h = Hist::default();
        for v in 1..=1000u64 {
            h.add(v * 1000);
        }
        assert_eq!(h.count(), 1000);
        assert_eq!(h.mean(), 500_500);
        let p50 = h.percentile(500);
        assert!((500_000..=500_000 + 500_000 / 8).contains(&p50), "{p50}");
        assert_eq!(h.percentile(1000), 1_000_000);
        assert_eq!(Hist::default().percentile(500), 0);
    }

    #[test]
    fn meter_stops_at_the_op_limit_and_the_deadline() {
        let m = Meter::new(&["a"], 100, 50, 3);
        assert!(m.begin(100) && m.begin(101) && m.begin(102));
        assert!(!m.begin(103));
        let m = Meter::new(&["a"], 100, 50, 0);
        assert!(m.begin(149));
        assert!(!m.begin(150));
        assert!(!m.begin(120), "stays stopped");
    }

    #[test]
    fn a_warm_up_is_not_counted() {
        let m = Meter::with_warmup(&["a"], 100, 50, 30, 0);
        assert!(m.warming());
        assert!(m.begin(100) && m.begin(120));
        m.record(0, 7, 4096, 0, 140);
        assert_eq!((m.started(), m.stats()[0].lat.count()), (0, 1));
        assert!(!m.take_measuring(), "still warming up");
        // The first operation at the warm-up's end starts the measured
        // phase, with nothing of the warm-up left in it.
        assert!(m.begin(150));
        assert!(!m.warming());
        assert!(m.take_measuring());
        assert!(!m.take_measuring(), "said once");
        assert_eq!(m.started(), 1);
        assert_eq!(m.stats()[0].lat.count(), 0);
        assert_eq!(m.stats()[0].read, 0);
        m.record(0, 5, 0, 0, 170);
        assert_eq!(m.elapsed_ns(), 20, "from the warm-up's end");
        // The measured phase runs the runtime after the warm-up.
        assert!(m.begin(179));
        assert!(!m.begin(180));
    }

    #[test]
    fn an_operation_ending_after_the_warm_up_starts_the_measured_phase() {
        let m = Meter::with_warmup(&["token"], 0, 100, 1000, 0);
        assert!(m.begin(10), "one long operation, begun in the warm-up");
        m.record(0, 50, 1, 0, 60);
        assert!(m.warming());
        m.record(0, 50, 1, 0, 130);
        assert!(!m.warming());
        assert!(m.take_measuring());
        assert_eq!(m.stats()[0].lat.count(), 1, "only the one after it");
        assert_eq!(m.elapsed_ns(), 30, "from the warm-up's end");
        assert_eq!(m.started(), 0);
    }

    #[test]
    fn the_op_limit_counts_measured_operations_only() {
        let m = Meter::with_warmup(&["a"], 0, 10, 1000, 2);
        assert!(m.begin(1) && m.begin(2) && m.begin(3));
        assert!(m.begin(10) && m.begin(11));
        assert!(!m.begin(12));
        assert_eq!(m.started(), 2);
    }

    #[test]
    fn a_stuck_clock_fails_a_warm_up() {
        let m = Meter::with_warmup(&["a"], 0, 1000, 1000, 0);
        let mut n = 0u64;
        while m.begin(5) {
            n += 1;
        }
        assert_eq!(n, STUCK_OPS);
        assert!(m.take_error().unwrap().message().contains("warm-up"));
    }

    #[test]
    fn a_stuck_clock_fails_a_runtime_run() {
        let m = Meter::new(&["a"], 0, 1000, 0);
        let mut n = 0u64;
        while m.begin(5) {
            n += 1;
        }
        assert_eq!(
            n, STUCK_OPS,
            "the first call moved the clock from the start"
        );
        assert!(m.take_error().unwrap().message().contains("clock"));
    }

    #[test]
    fn geomean_and_rates() {
        assert_eq!(geomean_milli(&[2000, 8000]), 4000);
        assert_eq!(geomean_milli(&[0, 0]), 0);
        assert_eq!(per_s_milli(10, 1_000_000_000), 10_000);
        assert_eq!(per_s_milli(10, 0), 0);
        assert_eq!(milli_text(12_345), "12.345");
    }
}
