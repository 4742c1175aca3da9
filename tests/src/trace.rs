//! The protocol timeline on the host: parse every instance's `trace dump`
//! (see `fabric::trace` for the format), put all events on one time axis,
//! and write them as Chrome trace-event JSON (what Perfetto's UI and
//! chrome://tracing open).
//!
//! One time axis: every instance stamps its events with its own TSC. The
//! instances of a cluster read the same host counter (QEMU's TCG and KVM
//! give a guest the host's TSC plus an offset fixed at the VM's start), so
//! each instance's clock is the directory's plus a constant offset. The
//! offset is measured from the events themselves, as NTP does: a request
//! sent at `t1` (node) and taken at `t2` (directory) bounds the offset
//! (directory minus node) from above by `t2 - t1`, an answer published at
//! `t3` and taken at `t4` from below by `t3 - t4` (and DIR_INVs and acks
//! likewise); the intersection over every message of the dump is the
//! window of offsets that keeps every message after its sending, and its
//! middle is used. An empty window means the clocks do not differ by a
//! constant (skew or drift): reported, and the middle of the crossed
//! bounds used. A node with messages one way only, or none, is placed by
//! the dumps' own clock readings taken when the host asked for them
//! (milliseconds of uncertainty), kept within the bounds it has.
//!
//! The JSON: one process per instance (pid K for node K, [`DIR_PID`] for
//! the directory), one thread (track) per queue: a node's requests, its
//! invalidations, its eviction sweeps, the task its executor runs, its
//! doorbell and sleeps; the directory's serving, disk, invalidations and
//! doorbell. An eviction sweep is a complete event from its start to its
//! end (the victims taken and the pages freed in its args), a task one
//! from its switch to the next switch or sleep. A request is a complete event (`X`) from
//! its sending to its answer on the node, its serving is one from the
//! take to the reply on the directory, a fill's disk read one from queue
//! to completion; flow arrows (`s`/`f`, one id per hop) go from the
//! request to its serving, to its disk read and back, and from the reply
//! to the node's answer.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{json, Value};

/// The pid of the directory's process in the JSON.
pub const DIR_PID: u32 = 1000;

/// One event of one instance, in that instance's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceEvent {
    pub ts: u64,
    pub kind: String,
    pub peer: u32,
    pub tag: u32,
    pub op: u32,
    pub arg: u64,
}

/// One instance's dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dump {
    /// 0 = the directory, K = node K.
    pub inst: u32,
    /// Clock ticks per second.
    pub hz: u64,
    /// The clock when the dump was taken.
    pub now: u64,
    /// Events overwritten before the dump.
    pub lost: u64,
    /// Oldest first.
    pub events: Vec<TraceEvent>,
    /// Host time (ns since the epoch) when the dump was asked for, if
    /// known: the fallback alignment.
    pub host_ns: Option<u64>,
}

fn kv<'a>(words: &[&'a str], key: &str) -> Option<&'a str> {
    words
        .iter()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

/// Parse every dump in `text` (other lines, e.g. log lines or prompts,
/// are skipped). Err: a malformed `TRACE` line, or a dump without its end.
pub fn parse_dumps(text: &str) -> Result<Vec<Dump>, String> {
    let mut out = Vec::new();
    let mut cur: Option<Dump> = None;
    for (no, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let Some(at) = line.find("TRACE") else {
            continue;
        };
        let line = &line[at..];
        let words: Vec<&str> = line.split_whitespace().collect();
        let bad = |what: &str| format!("line {}: {what}: {raw:?}", no + 1);
        match words[0] {
            "TRACE-BEGIN" => {
                let num = |k: &str| -> Result<u64, String> {
                    kv(&words, k)
                        .and_then(|v| v.parse().ok())
                        .ok_or_else(|| bad(&format!("no {k}=")))
                };
                cur = Some(Dump {
                    inst: num("inst")? as u32,
                    hz: num("hz")?.max(1),
                    now: num("now")?,
                    lost: num("lost")?,
                    events: Vec::new(),
                    host_ns: None,
                });
            }
            "TRACE" => {
                let d = cur.as_mut().ok_or_else(|| bad("an event outside a dump"))?;
                if words.len() != 7 {
                    return Err(bad("expected TRACE TS KIND PEER TAG OP ARG"));
                }
                let n = |i: usize| -> Result<u64, String> {
                    words[i].parse().map_err(|_| bad("not a number"))
                };
                d.events.push(TraceEvent {
                    ts: n(1)?,
                    kind: words[2].to_string(),
                    peer: n(3)? as u32,
                    tag: n(4)? as u32,
                    op: n(5)? as u32,
                    arg: n(6)?,
                });
            }
            "TRACE-END" => {
                out.push(cur.take().ok_or_else(|| bad("an end without a begin"))?);
            }
            _ => {}
        }
    }
    if cur.is_some() {
        return Err("a dump without its TRACE-END (cut short?)".into());
    }
    Ok(out)
}

/// Ask every instance of the cluster in `run` (the directory, then nodes
/// 1..=`nodes`) for its dump over its console. The dumps that came, and
/// one line per instance that failed.
pub fn collect(
    run: &crate::RunDir,
    nodes: u8,
    timeout: std::time::Duration,
) -> (Vec<Dump>, Vec<String>) {
    let mut dumps = Vec::new();
    let mut errors = Vec::new();
    for inst in crate::Instance::all(nodes) {
        let k = match inst {
            crate::Instance::Dir => 0,
            crate::Instance::Node(k) => k,
        };
        let host_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .ok();
        let got = crate::Console::connect(&run.socket_path(inst), k, timeout)
            .and_then(|mut c| c.exec("trace dump", timeout))
            .map_err(|e| e.to_string())
            .and_then(|out| {
                if !out.is_ok() {
                    return Err(out.error_message().unwrap_or("error").to_string());
                }
                parse_dumps(&out.lines.join("\n"))
            });
        match got {
            Ok(mut ds) if ds.len() == 1 => {
                let mut d = ds.remove(0);
                d.host_ns = host_ns;
                dumps.push(d);
            }
            Ok(ds) => errors.push(format!(
                "{}: {} dumps in one answer",
                inst.label(),
                ds.len()
            )),
            Err(e) => errors.push(format!("{}: {e}", inst.label())),
        }
    }
    (dumps, errors)
}

/// How one instance's clock was put on the directory's.
#[derive(Debug, Clone, PartialEq)]
pub struct Alignment {
    pub inst: u32,
    /// Directory clock minus this instance's clock, in ticks.
    pub offset: i128,
    /// Half the width of the consistent window (ticks): the offset's
    /// uncertainty.
    pub error: u128,
    /// Messages it was measured from (0: the dumps' readings).
    pub round_trips: usize,
    /// The round trips' windows did not intersect: the clocks are not
    /// one counter plus a constant.
    pub inconsistent: bool,
}

impl Alignment {
    /// One line for the skew check, in microseconds at `hz`.
    pub fn describe(&self, hz: u64) -> String {
        let us = |t: i128| t as f64 * 1e6 / hz as f64;
        let how = if self.inst == 0 {
            "reference".to_string()
        } else if self.round_trips == 0 {
            "from the dumps' clock readings (no messages both ways recorded)".to_string()
        } else if self.inconsistent {
            format!(
                "INCONSISTENT over {} messages (skew or drift: the middle of the crossed bounds used)",
                self.round_trips
            )
        } else {
            format!("from {} messages", self.round_trips)
        };
        format!(
            "{}: TSC offset to the directory {:+.3} us +- {:.3} us, {how}",
            if self.inst == 0 {
                "dir".to_string()
            } else {
                format!("n{}", self.inst)
            },
            us(self.offset),
            us(self.error as i128)
        )
    }
}

/// The bounds on node `d.inst`'s offset (directory clock minus node
/// clock) that its messages with the directory set: a message from the
/// node is taken after it was sent (offset <= t_dir - t_node), and one to
/// the node likewise (offset >= t_dir - t_node). (lower, upper, how many
/// messages.) A message is matched by its tag (requests and answers) or
/// its page (DIR_INVs and acks) when that appears once on each side.
fn bounds(dir: &Dump, d: &Dump) -> (Option<i128>, Option<i128>, usize) {
    let node = d.inst;
    let times = |dump: &Dump, kind: &str, peer: Option<u32>, by_key: bool| {
        let mut m: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for e in &dump.events {
            let id = if by_key { e.arg } else { u64::from(e.tag) };
            if e.kind == kind && id != 0 && peer.is_none_or(|p| e.peer == p) {
                m.entry(id).or_default().push(e.ts);
            }
        }
        m
    };
    let (mut lo, mut hi, mut n) = (None::<i128>, None::<i128>, 0);
    // (node's kind, directory's kind, from the node?, matched by page?)
    let pairs = [
        ("req_sent", "serve", true, false),
        ("resp_taken", "reply", false, false),
        ("ack_sent", "ack_taken", true, true),
        ("inv_taken", "inv_sent", false, true),
    ];
    for (nk, dk, from_node, by_key) in pairs {
        let on_node = times(d, nk, None, by_key);
        let on_dir = times(dir, dk, Some(node), by_key);
        for (id, tn) in &on_node {
            // Tags restart when a node rejoins, pages are invalidated
            // again: an ambiguous one is not used.
            let (Some([td]), [tn]) = (on_dir.get(id).map(|v| &v[..]), &tn[..]) else {
                continue;
            };
            let b = *td as i128 - *tn as i128;
            n += 1;
            if from_node {
                hi = Some(hi.map_or(b, |h| h.min(b)));
            } else {
                lo = Some(lo.map_or(b, |l| l.max(b)));
            }
        }
    }
    (lo, hi, n)
}

/// Put every dump's clock on the directory's (see the module's doc).
/// Without a directory's dump, the first dump is the reference.
pub fn align(dumps: &[Dump]) -> Vec<Alignment> {
    let Some(reference) = dumps.iter().find(|d| d.inst == 0).or(dumps.first()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for d in dumps {
        if d.inst == reference.inst {
            out.push(Alignment {
                inst: d.inst,
                offset: 0,
                error: 0,
                round_trips: 0,
                inconsistent: false,
            });
            continue;
        }
        // The two readings of `now` were taken when the host asked, a few
        // milliseconds apart at most.
        let host = match (reference.host_ns, d.host_ns) {
            (Some(r), Some(x)) => (r as i128 - x as i128) * reference.hz as i128 / 1_000_000_000,
            _ => 0,
        };
        let anchor = reference.now as i128 - d.now as i128 - host;
        let (lo, hi, n) = if reference.inst == 0 {
            bounds(reference, d)
        } else {
            (None, None, 0)
        };
        let a = match (lo, hi) {
            (Some(lo), Some(hi)) if lo <= hi => Alignment {
                inst: d.inst,
                offset: lo + (hi - lo) / 2,
                error: ((hi - lo) / 2) as u128,
                round_trips: n,
                inconsistent: false,
            },
            (Some(lo), Some(hi)) => Alignment {
                inst: d.inst,
                offset: hi + (lo - hi) / 2,
                error: ((lo - hi) / 2) as u128,
                round_trips: n,
                inconsistent: true,
            },
            // One side only: the readings' estimate, kept within it.
            (lo, hi) => Alignment {
                inst: d.inst,
                offset: anchor
                    .max(lo.unwrap_or(i128::MIN))
                    .min(hi.unwrap_or(i128::MAX)),
                error: reference.hz as u128 / 100,
                round_trips: 0,
                inconsistent: false,
            },
        };
        out.push(a);
    }
    out
}

fn pid_of(inst: u32) -> u32 {
    if inst == 0 {
        DIR_PID
    } else {
        inst
    }
}

/// The track of an event: (tid, name).
fn track(inst: u32, kind: &str) -> (u32, &'static str) {
    match (inst == 0, kind) {
        (false, "req_sent" | "resp_taken" | "install") => (1, "requests"),
        (false, "inv_taken" | "ack_sent") => (2, "invalidations"),
        (false, "evict_start" | "evict_end") => (3, "eviction"),
        (false, "task_switch") => (5, "tasks"),
        (true, "serve" | "reply") => (1, "serving"),
        (true, "disk_start" | "disk_done") => (2, "disk"),
        (true, "inv_sent" | "ack_taken" | "lazy_ack") => (3, "invalidations"),
        _ => (4, "doorbell and sleep"),
    }
}

/// Flow ids: one per hop of one request of one node.
fn flow_id(node: u32, tag: u32, hop: u64) -> u64 {
    (u64::from(node) << 40 | u64::from(tag) << 3) + hop
}

/// The merged timeline as Chrome trace-event JSON (an object with
/// `traceEvents` and `displayTimeUnit`), and the alignment of every
/// instance.
pub fn merge(dumps: &[Dump]) -> (Value, Vec<Alignment>) {
    let aligns = align(dumps);
    let hz = dumps
        .iter()
        .find(|d| d.inst == 0)
        .or(dumps.first())
        .map(|d| d.hz)
        .unwrap_or(1);
    let offset: BTreeMap<u32, i128> = aligns.iter().map(|a| (a.inst, a.offset)).collect();
    let at = |inst: u32, ts: u64| ts as i128 + offset.get(&inst).copied().unwrap_or(0);
    let t0 = dumps
        .iter()
        .flat_map(|d| d.events.iter().map(move |e| at(d.inst, e.ts)))
        .min()
        .unwrap_or(0);
    let us = |inst: u32, ts: u64| (at(inst, ts) - t0) as f64 * 1e6 / hz as f64;
    let mut ev: Vec<Value> = Vec::new();
    for d in dumps {
        let pid = pid_of(d.inst);
        let name = if d.inst == 0 {
            "directory".to_string()
        } else {
            format!("node {}", d.inst)
        };
        ev.push(json!({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}));
        ev.push(json!({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": if d.inst == 0 { 0 } else { d.inst }}}));
        let mut tracks: BTreeMap<u32, &str> = BTreeMap::new();
        for e in &d.events {
            let (tid, tname) = track(d.inst, &e.kind);
            tracks.insert(tid, tname);
        }
        for (tid, tname) in tracks {
            ev.push(json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": tname}}));
        }
        // Spans: the opening event by (what, peer, tag, key).
        let mut open: BTreeMap<(&str, u32, u32, u64), &TraceEvent> = BTreeMap::new();
        let span = |ev: &mut Vec<Value>,
                    name: String,
                    tid: u32,
                    t_start: u64,
                    t_end: u64,
                    args: Value| {
            let ts = us(d.inst, t_start);
            let dur = (us(d.inst, t_end) - ts).max(0.001);
            ev.push(json!({"ph": "X", "name": name, "cat": "onecopy", "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}));
        };
        let mut sleep_at: Option<u64> = None;
        let mut sweep_at: Option<&TraceEvent> = None;
        // The task running since when: its span ends at the next switch
        // or sleep.
        let mut task_at: Option<&TraceEvent> = None;
        for e in &d.events {
            if matches!(e.kind.as_str(), "task_switch" | "sleep") {
                if let Some(t) = task_at.take() {
                    let (tid, _) = track(d.inst, &t.kind);
                    let args = json!({"task": t.arg});
                    span(&mut ev, format!("task {}", t.arg), tid, t.ts, e.ts, args);
                }
            }
            let (tid, _) = track(d.inst, &e.kind);
            let args = json!({"peer": e.peer, "tag": e.tag, "op": e.op, "key": e.arg});
            match e.kind.as_str() {
                "req_sent" => {
                    open.insert(("req", 0, e.tag, 0), e);
                }
                "resp_taken" => {
                    let s = open.remove(&("req", 0, e.tag, 0)).unwrap_or(e);
                    let args = json!({"tag": e.tag, "op": s.op, "key": s.arg});
                    span(
                        &mut ev,
                        format!("request tag {}", e.tag),
                        tid,
                        s.ts,
                        e.ts,
                        args,
                    );
                }
                "serve" => {
                    open.insert(("serve", e.peer, e.tag, 0), e);
                }
                "reply" => {
                    let s = open.remove(&("serve", e.peer, e.tag, 0)).unwrap_or(e);
                    let args = json!({"peer": e.peer, "tag": e.tag, "op": s.op, "key": s.arg});
                    let name = format!("serve n{} tag {}", e.peer, e.tag);
                    span(&mut ev, name, tid, s.ts, e.ts, args);
                }
                "disk_start" => {
                    open.insert(("disk", e.peer, e.tag, e.arg), e);
                }
                "disk_done" => {
                    let s = open.remove(&("disk", e.peer, e.tag, e.arg)).unwrap_or(e);
                    let name = format!("disk read n{} tag {}", e.peer, e.tag);
                    span(&mut ev, name, tid, s.ts, e.ts, args);
                }
                "evict_start" => sweep_at = Some(e),
                "evict_end" => {
                    let s = sweep_at.take().unwrap_or(e);
                    let args = json!({"victims": s.arg, "freed": e.arg});
                    let name = format!("eviction sweep ({} freed)", e.arg);
                    span(&mut ev, name, tid, s.ts, e.ts, args);
                }
                "task_switch" => task_at = Some(e),
                "sleep" => sleep_at = Some(e.ts),
                "wake" => {
                    let start = sleep_at.take().unwrap_or(e.ts);
                    span(&mut ev, "sleep".to_string(), tid, start, e.ts, args);
                }
                _ => {
                    ev.push(json!({"ph": "i", "s": "t", "name": e.kind, "cat": "onecopy", "pid": pid, "tid": tid, "ts": us(d.inst, e.ts), "args": args}));
                }
            }
        }
        if let Some(t) = task_at {
            let end = d.events.last().map_or(t.ts, |e| e.ts);
            let (tid, _) = track(d.inst, &t.kind);
            span(
                &mut ev,
                format!("task {}", t.arg),
                tid,
                t.ts,
                end,
                json!({"task": t.arg}),
            );
        }
        // Requests never answered within the dump: a span to its end.
        for ((what, peer, tag, _), s) in open {
            let start = s.ts;
            let end = d.events.last().map(|e| e.ts).unwrap_or(start);
            let (tid, name) = match what {
                "req" => (1, format!("request tag {tag} (unanswered)")),
                "serve" => (1, format!("serve n{peer} tag {tag} (unanswered)")),
                _ => (2, format!("disk read n{peer} tag {tag} (unfinished)")),
            };
            span(
                &mut ev,
                name,
                tid,
                start,
                end,
                json!({"peer": peer, "tag": tag}),
            );
        }
    }
    // Flow arrows: node request -> directory serve -> disk -> directory
    // reply -> node answer, each hop its own id.
    let find = |inst: u32, kind: &str, peer: Option<u32>, tag: u32| {
        dumps.iter().find(|d| d.inst == inst).and_then(|d| {
            d.events
                .iter()
                .find(|e| e.kind == kind && e.tag == tag && peer.is_none_or(|p| e.peer == p))
                .map(|e| e.ts)
        })
    };
    let mut flows = Vec::new();
    for d in dumps.iter().filter(|d| d.inst != 0) {
        let node = d.inst;
        for e in d
            .events
            .iter()
            .filter(|e| e.kind == "req_sent" && e.tag != 0)
        {
            let tag = e.tag;
            let mut hops = vec![(node, 1u32, e.ts)];
            if let Some(t) = find(0, "serve", Some(node), tag) {
                hops.push((0, 1, t));
            }
            if let Some(t) = find(0, "disk_start", Some(node), tag) {
                hops.push((0, 2, t));
            }
            if let Some(t) = find(0, "disk_done", Some(node), tag) {
                hops.push((0, 2, t));
            }
            if let Some(t) = find(0, "reply", Some(node), tag) {
                // The serving span ends at the reply: bind just inside it.
                hops.push((0, 1, t));
            }
            if let Some(t) = find(node, "resp_taken", None, tag) {
                hops.push((node, 1, t));
            }
            for (i, w) in hops.windows(2).enumerate() {
                let id = flow_id(node, tag, i as u64);
                let (fi, ftid, fts) = w[0];
                let (ti, ttid, tts) = w[1];
                flows.push(json!({"ph": "s", "id": id, "name": "request", "cat": "flow", "pid": pid_of(fi), "tid": ftid, "ts": us(fi, fts)}));
                flows.push(json!({"ph": "f", "bp": "e", "id": id, "name": "request", "cat": "flow", "pid": pid_of(ti), "tid": ttid, "ts": us(ti, tts)}));
            }
        }
    }
    ev.extend(flows);
    let mut skew = String::new();
    for a in &aligns {
        let _ = writeln!(skew, "{}", a.describe(hz));
    }
    let v = json!({
        "traceEvents": ev,
        "displayTimeUnit": "ns",
        "otherData": {"tsc_hz": hz, "alignment": skew},
    });
    (v, aligns)
}

/// Check that `v` is trace-event JSON as Perfetto's and Chrome's importers
/// read it: the fields each phase needs, with their types. Err: the first
/// violation.
pub fn check_schema(v: &Value) -> Result<(), String> {
    let events = v
        .get("traceEvents")
        .and_then(Value::as_array)
        .ok_or("no traceEvents array")?;
    let mut starts = BTreeMap::new();
    let mut finishes = BTreeMap::new();
    for (i, e) in events.iter().enumerate() {
        let bad = |what: &str| format!("event {i}: {what}: {e}");
        let ph = e
            .get("ph")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("no ph"))?;
        e.get("pid")
            .and_then(Value::as_u64)
            .ok_or_else(|| bad("no integer pid"))?;
        e.get("tid")
            .and_then(Value::as_u64)
            .ok_or_else(|| bad("no integer tid"))?;
        e.get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("no name"))?;
        if ph == "M" {
            e.get("args")
                .and_then(|a| a.get("name").or(a.get("sort_index")))
                .ok_or_else(|| bad("metadata without args"))?;
            continue;
        }
        let ts = e
            .get("ts")
            .and_then(Value::as_f64)
            .ok_or_else(|| bad("no numeric ts"))?;
        if ts < 0.0 || !ts.is_finite() {
            return Err(bad("negative ts"));
        }
        match ph {
            "X" => {
                let d = e
                    .get("dur")
                    .and_then(Value::as_f64)
                    .ok_or_else(|| bad("X without dur"))?;
                if d < 0.0 {
                    return Err(bad("negative dur"));
                }
            }
            "i" => {
                let s = e
                    .get("s")
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad("i without s"))?;
                if !["t", "p", "g"].contains(&s) {
                    return Err(bad("bad scope"));
                }
            }
            "s" | "f" => {
                let id = e
                    .get("id")
                    .and_then(Value::as_u64)
                    .ok_or_else(|| bad("flow without id"))?;
                let m = if ph == "s" {
                    &mut starts
                } else {
                    &mut finishes
                };
                if m.insert(id, ts).is_some() {
                    return Err(bad("flow id used twice"));
                }
            }
            _ => return Err(bad("unexpected phase")),
        }
    }
    for (id, ts) in &starts {
        let f = finishes.get(id).ok_or(format!("flow {id} has no finish"))?;
        if f < ts {
            return Err(format!(
                "flow {id} finishes ({f} us) before it starts ({ts} us)"
            ));
        }
    }
    if finishes.len() != starts.len() {
        return Err("a flow finish without its start".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests;
