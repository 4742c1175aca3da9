//! Deterministic multi-node simulation of the single-copy protocol (DPC
//! §3.1, §4.3) on the host, driving the real [`PageDir`] and [`NodeCache`].
//!
//! Model: one directory (a [`PageDir`], a model disk `page -> u64`, the
//! export bits) and 2..=4 nodes, each with a [`NodeCache`] over a pool of
//! 3..=6 frames (so reclaim runs all the time), sharing a model memory
//! `frame -> u64` (a frame's value stands for the page's contents). Every
//! node has the four rings of the real channel as FIFO queues: request
//! (node -> dir), response (dir -> node), notify (dir -> node) and ack
//! (node -> dir). FIFO holds within one queue; which queue (or which
//! actor) moves next is picked at random with per-seed weights, and whole
//! queues are frozen now and then, so messages on different rings overtake
//! each other and delays are arbitrary.
//!
//! Nodes run strong mode: reads of 1..=3 pages (misses batched as several
//! READs in flight), full-page writes of 1..=2 pages (LOOKUP_LOCK -> E ->
//! write own frame -> UNLOCK, or S -> write the owner's frame; hits write
//! in place), fsync (WRITEBACK of dirty pages), reclaim in BATCH_INVs of up
//! to 4 pages when the pool is empty (and at random), DROPs of remote
//! mappings over a small limit, and DIR_INVs served from the notify queue
//! at any time. Scenarios add node crashes (queues lost, `node_failed`,
//! `forget_all`, rejoin only once `!holds_frames_of`), file eviction
//! (`evict_file` on a second inode whose values are not checked: its
//! INV_RANGEs are served with `NodeCache::range_inv`: one ack per run of
//! the span with no miss in flight, and a page's own ack behind its miss), and lost notices / acks (healed by declaring the node failed) with duplicated
//! acks (applied twice; the second must be a no-op).
//!
//! Checked after every step: [`PageDir::check`]; directory entries use
//! frames of their owner's pool that the owner still holds for that page;
//! exported frames belong to a cached page and frames with sharers are
//! exported; per page at most one node in O or E (from
//! [`PageDir::state_of`] and from the nodes' slots); every `Local` /
//! `Reserved` slot is the directory's owner with that frame; every `Remote`
//! slot maps the current owner's frame, is a recorded sharer, the frame is
//! exported and its owner still holds it for that page (no mapping of a
//! freed or reassigned frame); every pool is exactly partitioned into free,
//! in-flight and resident frames. Every completed read returns the value
//! of the last completed write (writes complete when they land in the
//! single copy: in place, or at the directory's UNLOCK commit; a crashed
//! owner's unsynced writes may be lost, and are only dropped from the
//! model when nobody reported the page dirty). After quiescing (no new
//! operations, everything delivered, every node fsyncs, drops its
//! mappings and reclaims everything) the directory is empty, every frame
//! is free and unexported, and the disk holds the last written value of
//! every page.
//!
//! Fills: in a quarter of the seeds the directory fills pages
//! synchronously (the fill completes inside the step that asked for it);
//! in the others they go through the real disk queue
//! ([`dirsvc::diskq::DiskQueue`], 1..=3 reads in flight) and complete later,
//! one random read in flight per "fill completes" event, out of order,
//! while everything else goes on: requests for other pages are served,
//! requesters crash (their fills are cancelled and a late completion must
//! not touch the frame, checked through [`Fill::wanted`]), files are
//! evicted.
//!
//! `ONECOPY_SIM_SEED=0x...` replays one seed (in every scenario test;
//! the failure message names the test); `ONECOPY_SIM_STEPS` overrides the
//! steps per seed. Release builds run ten times as many seeds.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::pagecache::{Hit, Installed, Mode, NodeCache, Slot};
use dirsvc::diskq::{Dest, DiskQueue, Fill};
use dirsvc::pagedir::{Action, Entry, PageDir, PageState, Phase};
use fabric::layout::Layout;
use fabric::proto::{PageKey, PageReply, PageReq, PageSpan};

use fabric::rng::SplitMix64 as Rng;

mod check;
mod directory;
mod node;
mod step;

/// The inode whose values are checked.
const DATA: u64 = 1;
/// The inode `evict_file` tears down (values unchecked: the data is gone).
const SCRATCH: u64 = 2;
/// Pages of [`SCRATCH`].
const SCRATCH_PAGES: u64 = 3;

/// What a scenario adds to plain message reordering.
#[derive(Debug, Clone, Copy)]
struct Scenario {
    name: &'static str,
    crashes: bool,
    evict: bool,
    lossy: bool,
}

/// Per-seed parameters.
#[derive(Debug, Clone, Copy)]
struct Params {
    nodes: u8,
    frames: u64,
    pages: u64,
    remote_limit: usize,
    /// Weights: directory serves a request / an ack, node takes a
    /// response / a notice, node advances its operation / housekeeping.
    w: [u64; 6],
    crash_pm: u64,
    evict_pm: u64,
    loss_pm: u64,
    fill_error_pm: u64,
    /// Page fills in flight (0: synchronous fills).
    fill_depth: usize,
}

impl Params {
    fn draw(rng: &mut Rng, sc: &Scenario) -> Params {
        let mut w = [0; 6];
        for x in &mut w {
            *x = rng.range(1, 8);
        }
        Params {
            nodes: rng.range(2, 4) as u8,
            frames: rng.range(3, 6),
            pages: rng.range(4, 10),
            remote_limit: rng.range(1, 4) as usize,
            w,
            crash_pm: if sc.crashes { rng.range(1, 4) } else { 0 },
            evict_pm: if sc.evict { rng.range(2, 10) } else { 0 },
            loss_pm: if sc.lossy { rng.range(10, 60) } else { 0 },
            fill_error_pm: rng.range(0, 10),
            fill_depth: 0,
        }
    }
}

/// What the model expects a page to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Val {
    Known(u64),
    /// A crashed owner's unsynced writes may or may not survive.
    Unknown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpKind {
    Read,
    Write,
    Fsync,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    Todo,
    Wait,
    Done,
}

#[derive(Debug, Clone, Copy)]
struct Item {
    key: PageKey,
    value: u64,
    st: St,
}

#[derive(Debug)]
struct Op {
    kind: OpKind,
    items: Vec<Item>,
}

/// An outstanding request of a node, by tag.
#[derive(Debug, Clone, Copy)]
enum Call {
    Miss { key: PageKey, item: usize },
    Unlock { key: PageKey, item: usize },
    Inv { key: PageKey },
    Drop { key: PageKey },
    Writeback { key: PageKey, item: usize },
}

struct Node {
    id: u8,
    alive: bool,
    /// Lost a notice or an ack: the directory will declare it failed.
    doomed: bool,
    cache: NodeCache,
    req: VecDeque<(u32, PageReq)>,
    resp: VecDeque<(u32, PageReply)>,
    /// DIR_INVs (a span of one page, `false`) and INV_RANGEs (`true`).
    notify: VecDeque<(PageSpan, bool)>,
    /// Acks: (pages, of an INV_RANGE, dirty).
    ack: VecDeque<(PageSpan, bool, bool)>,
    next_tag: u32,
    calls: BTreeMap<u32, Call>,
    op: Option<Op>,
    invs_out: usize,
}

impl Node {
    fn missing(&self, key: &PageKey) -> bool {
        self.calls
            .values()
            .any(|c| matches!(c, Call::Miss { key: k, .. } if k == key))
    }

    fn idle(&self) -> bool {
        self.op.is_none() && self.calls.is_empty()
    }
}

/// One scheduler event (kept for the failure trace).
#[derive(Debug, Clone, Copy)]
#[allow(dead_code)] // read through `Debug` only
enum Ev {
    DirReq(u8, u32, PageReq),
    DirAck(u8, PageSpan, bool, bool),
    Resp(u8, u32, PageReply),
    Notice(u8, PageSpan, bool),
    Advance(u8),
    House(u8),
    Crash(u8),
    Restart(u8),
    Evict(u64),
    Freeze(usize, u8, u64),
    FillDone(PageKey, u8, bool),
}

/// Which queue a freeze stalls: 0 request, 1 ack, 2 response, 3 notify.
const QUEUES: usize = 4;

struct Sim {
    sc: Scenario,
    p: Params,
    rng: Rng,
    layout: Layout,
    dir: PageDir,
    disk: BTreeMap<PageKey, u64>,
    mem: BTreeMap<u64, u64>,
    export: BTreeSet<u64>,
    nodes: Vec<Node>,
    model: BTreeMap<PageKey, Val>,
    tainted: BTreeSet<PageKey>,
    /// Value written before each UNLOCK, by (node, tag).
    unlocks: BTreeMap<(u8, u32), u64>,
    next_value: u64,
    issuing: bool,
    frozen: Option<(usize, u8, u64)>,
    step: u64,
    trace: VecDeque<(u64, Ev)>,
    /// Events kept for the failure message (more when replaying a seed).
    trace_len: usize,
    seen: Seen,
    /// Page fills waiting and in flight (asynchronous seeds).
    fills: DiskQueue,
    /// What each read in flight returns: the page's disk value when it was
    /// submitted, or `None` for a failed read.
    fill_reads: BTreeMap<u64, Option<u64>>,
    /// The page of every fill pushed (by id).
    fill_keys: BTreeMap<u64, PageKey>,
}

type Res = Result<(), String>;

/// How often the interesting paths ran (printed per test).
#[derive(Debug, Default, Clone, Copy)]
struct Seen {
    steps: u64,
    reads_checked: u64,
    writes: u64,
    deferred_invs: u64,
    refused_drops: u64,
    retries: u64,
    crashes: u64,
    evictions: u64,
    lost: u64,
    dup_acks: u64,
    /// INV_RANGE notices the directory sent, and their acks.
    range_invs: u64,
    range_acks: u64,
    async_fills: u64,
    stale_fills: u64,
    /// Fills marked stale by a truncation of the scratch file.
    stale_marked: u64,
}

impl Seen {
    fn add(&mut self, o: &Seen) {
        self.steps += o.steps;
        self.reads_checked += o.reads_checked;
        self.writes += o.writes;
        self.deferred_invs += o.deferred_invs;
        self.refused_drops += o.refused_drops;
        self.retries += o.retries;
        self.crashes += o.crashes;
        self.evictions += o.evictions;
        self.lost += o.lost;
        self.dup_acks += o.dup_acks;
        self.range_invs += o.range_invs;
        self.range_acks += o.range_acks;
        self.async_fills += o.async_fills;
        self.stale_fills += o.stale_fills;
        self.stale_marked += o.stale_marked;
    }
}

fn initial(key: &PageKey) -> u64 {
    (key.ino << 32) | key.idx | 0x5EED_0000_0000_0000
}

fn bit(node: u8) -> u64 {
    1u64 << (node - 1)
}

impl Sim {
    fn new(sc: Scenario, seed: u64) -> Sim {
        let mut rng = Rng::new(seed);
        let mut p = Params::draw(&mut rng, &sc);
        // From the seed, not the stream: synchronous seeds run as before.
        p.fill_depth = (fabric::rng::mix64(seed ^ 0xF111) % 4) as usize;
        let layout = Layout::compute(8 << 20, u32::from(p.nodes)).expect("layout");
        let nodes = (1..=p.nodes)
            .map(|id| {
                let (first, _) = layout.pool_gfns(u32::from(id));
                Node {
                    id,
                    alive: true,
                    doomed: false,
                    cache: NodeCache::new(Mode::Strong, (first, first + p.frames), p.remote_limit),
                    req: VecDeque::new(),
                    resp: VecDeque::new(),
                    notify: VecDeque::new(),
                    ack: VecDeque::new(),
                    next_tag: 1,
                    calls: BTreeMap::new(),
                    op: None,
                    invs_out: 0,
                }
            })
            .collect();
        Sim {
            sc,
            p,
            rng,
            layout,
            dir: PageDir::for_nodes(layout.max_nodes),
            disk: BTreeMap::new(),
            mem: BTreeMap::new(),
            export: BTreeSet::new(),
            nodes,
            model: BTreeMap::new(),
            tainted: BTreeSet::new(),
            unlocks: BTreeMap::new(),
            next_value: 1,
            issuing: true,
            frozen: None,
            step: 0,
            trace: VecDeque::new(),
            trace_len: if env_u64("ONECOPY_SIM_SEED").is_some() {
                400
            } else {
                40
            },
            seen: Seen::default(),
            fills: DiskQueue::new(p.fill_depth),
            fill_reads: BTreeMap::new(),
            fill_keys: BTreeMap::new(),
        }
    }

    fn node(&mut self, n: u8) -> &mut Node {
        &mut self.nodes[usize::from(n) - 1]
    }

    fn disk_val(&self, key: &PageKey) -> u64 {
        self.disk.get(key).copied().unwrap_or_else(|| initial(key))
    }

    fn mem_val(&self, gfn: u64) -> u64 {
        // Never written: garbage that no page ever holds.
        self.mem
            .get(&gfn)
            .copied()
            .unwrap_or(0xBAD0_0000_0000_0000 | gfn)
    }

    fn expected(&self, key: &PageKey) -> Val {
        self.model
            .get(key)
            .copied()
            .unwrap_or(Val::Known(initial(key)))
    }

    fn fresh_value(&mut self) -> u64 {
        self.next_value += 1;
        self.next_value
    }

    // ---- node side -------------------------------------------------------

    fn send(&mut self, n: u8, req: PageReq, call: Call) -> u32 {
        let node = self.node(n);
        let tag = node.next_tag;
        node.next_tag = node.next_tag.wrapping_add(1).max(1);
        node.req.push_back((tag, req));
        node.calls.insert(tag, call);
        tag
    }

    fn send_ack(&mut self, n: u8, span: PageSpan, range: bool, dirty: bool) {
        if self.issuing && self.rng.chance(self.p.loss_pm) {
            // Lost: the directory waits, then times the node out.
            self.seen.lost += 1;
            self.node(n).doomed = true;
            return;
        }
        self.node(n).ack.push_back((span, range, dirty));
    }

    fn flush_acks(&mut self, n: u8) {
        for (key, dirty) in self.node(n).cache.take_acks() {
            self.send_ack(n, PageSpan::page(key), false, dirty);
        }
    }

    fn check_read(&mut self, n: u8, key: PageKey, got: u64) -> Res {
        if key.ino != DATA {
            return Ok(());
        }
        match self.expected(&key) {
            Val::Known(want) if want != got => Err(format!(
                "node {n} read {key:?} = {got:#x}, the last completed write was {want:#x}"
            )),
            Val::Known(_) => {
                self.seen.reads_checked += 1;
                Ok(())
            }
            Val::Unknown => Ok(()),
        }
    }

    fn wrote(&mut self, key: PageKey, value: u64) {
        self.seen.writes += 1;
        self.model.insert(key, Val::Known(value));
    }

    fn fail(&self, seed: u64, msg: &str) -> String {
        let mut s = format!(
            "sim failed: scenario={} seed={seed:#x} step={} : {msg}\nparams: {:?}\nlast events:",
            self.sc.name, self.step, self.p
        );
        for (step, ev) in &self.trace {
            s.push_str(&format!("\n  {step}: {ev:?}"));
        }
        s.push_str(&format!(
            "\nreplay: ONECOPY_SIM_SEED={seed:#x} cargo test -p nodepath sim::"
        ));
        s
    }

    fn checked_step(&mut self) -> Res {
        self.step_once()?;
        self.settle_tainted();
        self.check()
    }

    /// Stop issuing, let everything drain, then give every page back.
    fn quiesce(&mut self) -> Res {
        self.issuing = false;
        self.frozen = None;
        let budget = self.step + 200_000;
        loop {
            if self.step > budget {
                return Err("no progress while quiescing (liveness)".into());
            }
            let quiet = self.nodes.iter().all(|n| {
                n.alive
                    && n.idle()
                    && n.req.is_empty()
                    && n.resp.is_empty()
                    && n.notify.is_empty()
                    && n.ack.is_empty()
            });
            if quiet && self.fills.is_idle() {
                if self.dir.is_empty()
                    && self.nodes.iter().all(|n| n.cache.slots().next().is_none())
                {
                    break;
                }
                // Every node: fsync, drop its mappings, reclaim all it owns.
                for n in 1..=self.p.nodes {
                    let op = self.new_fsync(n);
                    self.node(n).op = Some(op);
                    self.drop_remote(n, true);
                    let victims = self.node(n).cache.all_owned();
                    for (key, dirty) in victims {
                        self.send(n, PageReq::Inv { key, dirty }, Call::Inv { key });
                        self.node(n).invs_out += 1;
                    }
                    self.finish_op(n);
                }
            }
            self.checked_step()?;
        }
        // Everything is back: frames free and unexported, data on disk.
        if !self.export.is_empty() {
            return Err(format!("exported after quiescing: {:?}", self.export));
        }
        for node in &self.nodes {
            if node.cache.free_frames() as u64 != self.p.frames {
                return Err(format!("node {}: frames missing after quiescing", node.id));
            }
        }
        for idx in 0..self.p.pages {
            let k = PageKey { ino: DATA, idx };
            match self.expected(&k) {
                Val::Known(v) if self.disk_val(&k) == v => {}
                want => {
                    return Err(format!(
                        "disk has {k:?} = {:#x}, last write {want:?}",
                        self.disk_val(&k)
                    ))
                }
            }
        }
        Ok(())
    }

    fn run_seed(sc: Scenario, seed: u64, steps: u64) -> Result<Seen, String> {
        let mut sim = Sim::new(sc, seed);
        let r = (|| {
            for _ in 0..steps {
                sim.checked_step()?;
            }
            sim.quiesce()
        })();
        match r {
            Ok(()) => Ok(Seen {
                steps: sim.step,
                ..sim.seen
            }),
            Err(e) => Err(sim.fail(seed, &e)),
        }
    }
}

impl Node {
    /// Will this (live) node's dirty bit for `key` reach the directory
    /// entry `e`: its dirty mapping (unless a WRITEBACK already served will
    /// clean it) or a DROP on its way while it is a sharer of `e`, or an
    /// ack on its way while `e` waits for it? (A DROP or ack of an older
    /// copy of the page does not count: it is refused or ignored.)
    fn reports_dirty(&self, key: &PageKey, e: &Entry) -> bool {
        let b = bit(self.id);
        let cleaning = self.calls.iter().any(|(tag, c)| {
            matches!(c, Call::Writeback { key: k, .. } if k == key)
                && !self.req.iter().any(|(t, _)| t == tag)
        });
        let slot = matches!(self.cache.slot(key), Some(Slot::Remote { dirty: true, .. }));
        let dropping = self
            .req
            .iter()
            .any(|(_, r)| matches!(r, PageReq::Drop { key: k, dirty: true } if k == key));
        let acking = self.ack.iter().any(|(s, _, d)| *d && s.contains(key));
        let pending = matches!(e.phase, Phase::Invalidating { pending, .. } if pending & b != 0);
        (e.sharers & b != 0 && ((slot && !cleaning) || dropping)) || (pending && acking)
    }
}

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    }
}

/// Run `seeds` seeds of `steps` steps each (or the one seed of
/// `ONECOPY_SIM_SEED`); panic with the seed and step on a violation.
fn run(sc: Scenario, salt: u64, seeds: u64, steps: u64) {
    let steps = env_u64("ONECOPY_SIM_STEPS").unwrap_or(steps);
    let replay = env_u64("ONECOPY_SIM_SEED");
    let list: Vec<u64> = match replay {
        Some(s) => vec![s],
        None => {
            let seeds = if cfg!(debug_assertions) {
                seeds
            } else {
                seeds * 10
            };
            let mut r = Rng::new(salt);
            (0..seeds).map(|_| r.next_u64()).collect()
        }
    };
    let seeds = list.len();
    let mut seen = Seen::default();
    for seed in list {
        match Sim::run_seed(sc, seed, steps) {
            Ok(s) => seen.add(&s),
            Err(e) => panic!("{e}"),
        }
    }
    println!("sim {}: {seeds} seeds, {seen:?}", sc.name);
    if replay.is_none() {
        // The interesting paths did run.
        assert!(seen.reads_checked > 0 && seen.writes > 0 && seen.retries > 0);
        assert!(seen.deferred_invs > 0 && seen.refused_drops > 0);
        assert_eq!(seen.crashes > 0, sc.crashes || sc.lossy);
        assert_eq!(seen.evictions > 0, sc.evict);
        assert_eq!(seen.range_invs > 0 && seen.range_acks > 0, sc.evict);
        assert_eq!(seen.lost > 0 && seen.dup_acks > 0, sc.lossy);
    }
}

#[test]
fn sim_reorder() {
    let sc = Scenario {
        name: "reorder",
        crashes: false,
        evict: false,
        lossy: false,
    };
    run(sc, 0x0C0F_FEE0, 300, 4000);
}

#[test]
fn sim_crash() {
    let sc = Scenario {
        name: "crash",
        crashes: true,
        evict: false,
        lossy: false,
    };
    run(sc, 0xC4A5_4000, 300, 4000);
}

#[test]
fn sim_evict() {
    let sc = Scenario {
        name: "evict",
        crashes: true,
        evict: true,
        lossy: false,
    };
    run(sc, 0xE71C_7000, 200, 4000);
}

#[test]
fn sim_lossy() {
    let sc = Scenario {
        name: "lossy",
        crashes: false,
        evict: false,
        lossy: true,
    };
    run(sc, 0x1055_0000, 200, 4000);
}
