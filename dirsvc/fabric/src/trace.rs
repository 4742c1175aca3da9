//! The protocol timeline: every instance records protocol events (a
//! request sent, taken, answered; a fill's disk read; an invalidation and
//! its ack; doorbells; sleeps; eviction sweeps; task switches) with a
//! timestamp of its own clock (the TSC in the kernel) into a fixed-size
//! ring in its own, private memory.
//!
//! Off (the default), [`record`] costs one relaxed load and one
//! predictable branch. On, one clock read and four relaxed stores into
//! the ring; the oldest events are overwritten once it is full (the dump
//! says how many). The ring is a static of atomics, so interrupt handlers
//! may record too (each event gets its own slot; a dump taken while an
//! event is written may show that one slot half-written, never another's).
//!
//! Dump format ([`dump_lines`]), one line per event, parsed by the host's
//! merge (`onecopy_tests::trace`):
//!
//! ```text
//! TRACE-BEGIN inst=I hz=H now=T events=N lost=L
//! TRACE T KIND PEER TAG OP ARG
//! TRACE-END inst=I
//! ```
//!
//! `I` is the instance (0 = the directory, K = node K), `H` the clock's
//! ticks per second, `T` timestamps in ticks, `KIND` a [`Kind`] name,
//! `PEER` the other instance of the event (the requesting node on the
//! directory; 0 on a node: the directory), `TAG` the request tag, `OP`
//! the request's opcode (0: none), `ARG` the page key's number
//! ([`key_arg`]) of a page request, fill, invalidation or install (0:
//! none).

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write as _;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// Events the ring holds (the newest ones).
pub const CAPACITY: usize = 8192;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Node: a request published on its request ring.
    ReqSent = 1,
    /// Node: its answer taken from the response ring.
    RespTaken = 2,
    /// Node: a page the answer granted installed in the page cache.
    Install = 3,
    /// Directory: a request taken from a node's ring.
    Serve = 4,
    /// Directory: an answer published (or queued) for a node.
    Reply = 5,
    /// Directory: a page fill's disk read queued.
    DiskStart = 6,
    /// Directory: that read finished.
    DiskDone = 7,
    /// Directory: a DIR_INV published to a sharer.
    InvSent = 8,
    /// Node: a DIR_INV taken from its notify ring.
    InvTaken = 9,
    /// Node: an invalidation's ack published.
    AckSent = 10,
    /// Directory: an invalidation's ack taken.
    AckTaken = 11,
    /// Directory: a DIR_INV taken as acknowledged while its node slept.
    LazyAck = 12,
    /// A doorbell rung (`OP`: the vector, `ARG`: the doorbell peer id).
    BellRung = 13,
    /// A doorbell interrupt taken (`OP`: the vector).
    BellTaken = 14,
    /// Going to sleep (halt) until an interrupt.
    Sleep = 15,
    /// Woken.
    Wake = 16,
    /// Node: an eviction sweep started (`ARG`: the victims it took).
    EvictStart = 17,
    /// Node: that sweep ended (`ARG`: the pages freed).
    EvictEnd = 18,
    /// Node: the task executor runs another task (`ARG`: its index).
    TaskSwitch = 19,
}

impl Kind {
    /// Every kind, in code order.
    pub const ALL: [Kind; 19] = [
        Kind::ReqSent,
        Kind::RespTaken,
        Kind::Install,
        Kind::Serve,
        Kind::Reply,
        Kind::DiskStart,
        Kind::DiskDone,
        Kind::InvSent,
        Kind::InvTaken,
        Kind::AckSent,
        Kind::AckTaken,
        Kind::LazyAck,
        Kind::BellRung,
        Kind::BellTaken,
        Kind::Sleep,
        Kind::Wake,
        Kind::EvictStart,
        Kind::EvictEnd,
        Kind::TaskSwitch,
    ];

    /// The name in a dump.
    pub fn name(self) -> &'static str {
        match self {
            Kind::ReqSent => "req_sent",
            Kind::RespTaken => "resp_taken",
            Kind::Install => "install",
            Kind::Serve => "serve",
            Kind::Reply => "reply",
            Kind::DiskStart => "disk_start",
            Kind::DiskDone => "disk_done",
            Kind::InvSent => "inv_sent",
            Kind::InvTaken => "inv_taken",
            Kind::AckSent => "ack_sent",
            Kind::AckTaken => "ack_taken",
            Kind::LazyAck => "lazy_ack",
            Kind::BellRung => "bell_rung",
            Kind::BellTaken => "bell_taken",
            Kind::Sleep => "sleep",
            Kind::Wake => "wake",
            Kind::EvictStart => "evict_start",
            Kind::EvictEnd => "evict_end",
            Kind::TaskSwitch => "task_switch",
        }
    }

    /// The kind named `s` in a dump.
    pub fn from_name(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == s)
    }

    fn from_code(c: u8) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| *k as u8 == c)
    }
}

/// One recorded event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// Clock ticks ([`set_clock`]).
    pub ts: u64,
    /// What happened.
    pub kind: Kind,
    /// The other instance (0 = the directory).
    pub peer: u32,
    /// The request tag (0: none).
    pub tag: u32,
    /// The request's opcode (0: none).
    pub op: u8,
    /// Kind-specific.
    pub arg: u64,
}

struct Slot {
    ts: AtomicU64,
    /// kind (8 bits) | op (8 bits) << 8 | peer (16 bits) << 16 | tag << 32.
    meta: AtomicU64,
    arg: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)] // a template for the array
const EMPTY: Slot = Slot {
    ts: AtomicU64::new(0),
    meta: AtomicU64::new(0),
    arg: AtomicU64::new(0),
};

static RING: [Slot; CAPACITY] = [EMPTY; CAPACITY];
/// Events recorded since the last [`clear`] (the next slot, modulo).
static HEAD: AtomicU64 = AtomicU64::new(0);
static ON: AtomicBool = AtomicBool::new(false);
static CLOCK: spin::Once<fn() -> u64> = spin::Once::new();

/// The clock of the timestamps (set once; the kernel's is the TSC).
/// Without one, events are not recorded.
pub fn set_clock(clock: fn() -> u64) {
    CLOCK.call_once(|| clock);
}

/// Turn recording on or off.
pub fn set_enabled(on: bool) {
    ON.store(on, Relaxed);
}

/// Is recording on?
pub fn enabled() -> bool {
    ON.load(Relaxed)
}

/// Forget every recorded event.
pub fn clear() {
    HEAD.store(0, Relaxed);
}

/// Record one event if recording is on.
#[inline(always)]
pub fn record(kind: Kind, peer: u32, tag: u32, op: u8, arg: u64) {
    if ON.load(Relaxed) {
        record_on(kind, peer, tag, op, arg);
    }
}

#[inline(never)]
#[cold]
fn record_on(kind: Kind, peer: u32, tag: u32, op: u8, arg: u64) {
    let Some(clock) = CLOCK.get() else {
        return;
    };
    let ts = clock();
    let n = HEAD.fetch_add(1, Relaxed);
    let s = &RING[(n % CAPACITY as u64) as usize];
    s.ts.store(ts, Relaxed);
    let meta =
        kind as u64 | u64::from(op) << 8 | u64::from(peer & 0xffff) << 16 | u64::from(tag) << 32;
    s.meta.store(meta, Relaxed);
    s.arg.store(arg, Relaxed);
}

/// A page key's number in `ARG`: the file and page index mixed (for
/// telling pages apart on a timeline, not unique).
pub fn key_arg(ino: u64, idx: u64) -> u64 {
    ino << 40 ^ idx
}

/// The opcode and [`key_arg`] of a request (a page request's key; 0 for
/// the others).
pub fn req_args(req: &crate::proto::Request) -> (u8, u64) {
    let op = crate::proto::op_of(req) as u8;
    match req {
        crate::proto::Request::Page(p) => {
            let k = p.key();
            (op, key_arg(k.ino, k.idx))
        }
        _ => (op, 0),
    }
}

/// The recorded events, oldest first, and how many older ones were
/// overwritten.
pub fn snapshot() -> (Vec<Event>, u64) {
    let head = HEAD.load(Relaxed);
    let cap = CAPACITY as u64;
    let first = head.saturating_sub(cap);
    let mut out = Vec::with_capacity((head - first) as usize);
    for n in first..head {
        let s = &RING[(n % cap) as usize];
        let meta = s.meta.load(Relaxed);
        let Some(kind) = Kind::from_code(meta as u8) else {
            continue; // being written
        };
        out.push(Event {
            ts: s.ts.load(Relaxed),
            kind,
            peer: (meta >> 16) as u32 & 0xffff,
            tag: (meta >> 32) as u32,
            op: (meta >> 8) as u8,
            arg: s.arg.load(Relaxed),
        });
    }
    (out, first)
}

/// The dump of instance `inst` (clock at `hz` ticks per second, now
/// `now`), line by line (see the module's doc).
pub fn dump_lines(inst: u32, hz: u64, now: u64, mut line: impl FnMut(&str)) {
    let (events, lost) = snapshot();
    let mut s = String::new();
    let _ = write!(
        s,
        "TRACE-BEGIN inst={inst} hz={hz} now={now} events={} lost={lost}",
        events.len()
    );
    line(&s);
    for e in &events {
        s.clear();
        let _ = write!(
            s,
            "TRACE {} {} {} {} {} {}",
            e.ts,
            e.kind.name(),
            e.peer,
            e.tag,
            e.op,
            e.arg
        );
        line(&s);
    }
    s.clear();
    let _ = write!(s, "TRACE-END inst={inst}");
    line(&s);
}

/// `trace on|off|clear|dump` of a console (the node's shell, the
/// directory's console): turns recording on or off, or dumps. `print`
/// gets each output line. Err: the usage.
pub fn command(
    arg: &str,
    inst: u32,
    hz: u64,
    now: u64,
    mut print: impl FnMut(&str),
) -> Result<(), &'static str> {
    match arg {
        "on" => {
            set_enabled(true);
            print("trace on");
        }
        "off" => {
            set_enabled(false);
            print("trace off");
        }
        "clear" => {
            clear();
            print("trace cleared");
        }
        "dump" => dump_lines(inst, hz, now, print),
        _ => return Err("usage: trace on|off|clear|dump"),
    }
    Ok(())
}

/// Calls of `record` per loop of one [`bench`] by default.
pub const BENCH_DEFAULT: u64 = 100_000;
/// Most calls per loop of one [`bench`].
pub const BENCH_MAX: u64 = 10_000_000;
/// Rounds of [`bench`]: each runs the three loops once, so a drift of the
/// clock or of the host's load falls on all three alike.
pub const BENCH_ROUNDS: u32 = 5;

/// What [`bench`] measured: clock ticks spent by each loop, summed over
/// the rounds, for `calls` calls (iterations) each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BenchTicks {
    /// Calls (iterations) of each loop over all rounds.
    pub calls: u64,
    /// The empty loop: the same arguments made opaque, no `record`.
    pub base: u64,
    /// `record` with recording off.
    pub off: u64,
    /// `record` with recording on (into the ring).
    pub on: u64,
}

/// The loop of [`bench`]'s off and on phases: `count` calls of [`record`]
/// with a constant kind, peer and opcode and the tag and argument taken
/// from the loop counter (as at a real call site, where they are at hand
/// in registers), never inlined into the timing code so each phase runs
/// the same machine code.
#[inline(never)]
fn bench_record_loop(count: u64) {
    for i in 0..count {
        core::hint::black_box(i);
        record(Kind::TaskSwitch, 0, i as u32, 0, i);
    }
}

/// The baseline: [`bench_record_loop`] without the call (the opaque use of
/// the counter keeps the compiler from removing the empty loop).
#[inline(never)]
fn bench_base_loop(count: u64) {
    for i in 0..count {
        core::hint::black_box(i);
    }
}

/// `bench trace`: time `count` calls of [`record`] with recording off,
/// `count` with it on, and `count` iterations of the same loop without
/// the call (the baseline), interleaved in `rounds` rounds, after a short
/// warm-up. Recording is left on or off as found; the ring is cleared
/// (it holds the benchmark's events). `None` without a clock
/// ([`set_clock`]): `record` would record nothing.
pub fn bench(count: u64, rounds: u32) -> Option<BenchTicks> {
    let clock = *CLOCK.get()?;
    let was = enabled();
    let mut t = BenchTicks {
        calls: count.checked_mul(u64::from(rounds))?,
        base: 0,
        off: 0,
        on: 0,
    };
    let timed = |f: fn(u64), n: u64| {
        let t0 = clock();
        f(n);
        clock().saturating_sub(t0)
    };
    // Warm-up: caches, branch predictors, and under TCG the translation
    // of the loops' code.
    let warm = count.min(1000);
    bench_base_loop(warm);
    set_enabled(false);
    bench_record_loop(warm);
    set_enabled(true);
    bench_record_loop(warm);
    for _ in 0..rounds {
        t.base = t.base.saturating_add(timed(bench_base_loop, count));
        set_enabled(false);
        t.off = t.off.saturating_add(timed(bench_record_loop, count));
        set_enabled(true);
        t.on = t.on.saturating_add(timed(bench_record_loop, count));
    }
    set_enabled(was);
    clear();
    Some(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// The ring is global: the tests that use it run one at a time.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn clock() -> u64 {
        static T: AtomicU64 = AtomicU64::new(100);
        T.fetch_add(10, Relaxed)
    }

    #[test]
    fn off_records_nothing_on_records_in_order_and_dumps() {
        let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        set_clock(clock);
        set_enabled(false);
        clear();
        record(Kind::ReqSent, 0, 7, 2, 3);
        assert!(snapshot().0.is_empty());
        set_enabled(true);
        record(Kind::ReqSent, 0, 7, 2, 3);
        record(Kind::RespTaken, 0, 7, 0, 0);
        set_enabled(false);
        let (ev, lost) = snapshot();
        assert_eq!(lost, 0);
        assert_eq!(ev.len(), 2);
        assert_eq!(
            (ev[0].kind, ev[0].tag, ev[0].op, ev[0].arg),
            (Kind::ReqSent, 7, 2, 3)
        );
        assert!(ev[0].ts < ev[1].ts);
        let mut lines = Vec::new();
        dump_lines(2, 1000, 5, |l| lines.push(l.to_string()));
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[0], "TRACE-BEGIN inst=2 hz=1000 now=5 events=2 lost=0");
        assert!(lines[1].starts_with("TRACE ") && lines[1].ends_with(" req_sent 0 7 2 3"));
        assert_eq!(lines[3], "TRACE-END inst=2");
        clear();
    }

    #[test]
    fn a_full_ring_keeps_the_newest() {
        let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        set_clock(clock);
        clear();
        set_enabled(true);
        for i in 0..(CAPACITY as u32 + 5) {
            record(Kind::Serve, 1, i, 0, 0);
        }
        set_enabled(false);
        let (ev, lost) = snapshot();
        assert_eq!(lost, 5);
        assert_eq!(ev.len(), CAPACITY);
        assert_eq!(ev[0].tag, 5);
        assert_eq!(ev[CAPACITY - 1].tag, CAPACITY as u32 + 4);
        clear();
    }

    #[test]
    fn bench_times_three_loops_restores_the_state_and_clears() {
        let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        set_clock(clock);
        for was in [false, true] {
            set_enabled(was);
            record(Kind::Wake, 0, 0, 0, 0);
            let t = bench(100, 3).expect("a clock is set");
            assert_eq!(t.calls, 300);
            // The test clock advances 10 ticks a read: the timing reads
            // one per loop, and every recorded event reads one more. Off
            // records nothing, on records every call.
            assert_eq!(t.base, 3 * 10);
            assert_eq!(t.off, 3 * 10);
            assert_eq!(t.on, 3 * 10 + 300 * 10);
            assert_eq!(enabled(), was);
            assert!(snapshot().0.is_empty());
        }
        set_enabled(false);
        assert_eq!(bench(u64::MAX, 2), None);
    }

    #[test]
    fn kinds_round_trip_by_name_and_code() {
        for k in Kind::ALL {
            assert_eq!(Kind::from_name(k.name()), Some(k));
            assert_eq!(Kind::from_code(k as u8), Some(k));
        }
        assert_eq!(Kind::from_code(0), None);
        assert!(command("bogus", 0, 1, 0, |_| {}).is_err());
    }
}
