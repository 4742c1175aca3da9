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
//! (`evict_file` on a second inode whose values are not checked), and lost
//! DIR_INVs / acks (healed by declaring the node failed) with duplicated
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
use dirsvc::diskq::{DiskQueue, Fill};
use dirsvc::pagedir::{Action, Entry, PageDir, PageState, Phase};
use fabric::layout::Layout;
use fabric::proto::{PageKey, PageReply, PageReq};

use fabric::rng::SplitMix64 as Rng;

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
    notify: VecDeque<PageKey>,
    ack: VecDeque<(PageKey, bool)>,
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
    DirAck(u8, PageKey, bool),
    Resp(u8, u32, PageReply),
    Notice(u8, PageKey),
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
    async_fills: u64,
    stale_fills: u64,
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
        self.async_fills += o.async_fills;
        self.stale_fills += o.stale_fills;
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

    fn send_ack(&mut self, n: u8, key: PageKey, dirty: bool) {
        if self.issuing && self.rng.chance(self.p.loss_pm) {
            // Lost: the directory waits, then times the node out.
            self.seen.lost += 1;
            self.node(n).doomed = true;
            return;
        }
        self.node(n).ack.push_back((key, dirty));
    }

    fn flush_acks(&mut self, n: u8) {
        for (key, dirty) in self.node(n).cache.take_acks() {
            self.send_ack(n, key, dirty);
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

    /// Start a new operation.
    fn new_op(&mut self, n: u8) -> Op {
        let pages = self.p.pages;
        let evict = self.sc.evict;
        let pick = |rng: &mut Rng| {
            if evict && rng.chance(250) {
                PageKey {
                    ino: SCRATCH,
                    idx: rng.below(SCRATCH_PAGES),
                }
            } else {
                PageKey {
                    ino: DATA,
                    idx: rng.below(pages),
                }
            }
        };
        let r = self.rng.below(100);
        let (kind, count) = if r < 50 {
            (OpKind::Read, self.rng.range(1, 3))
        } else if r < 92 {
            (OpKind::Write, self.rng.range(1, 2))
        } else {
            return self.new_fsync(n);
        };
        let mut items: Vec<Item> = Vec::new();
        for _ in 0..count {
            let key = pick(&mut self.rng);
            if items.iter().any(|i| i.key == key) {
                continue;
            }
            let value = if kind == OpKind::Write {
                self.fresh_value()
            } else {
                0
            };
            items.push(Item {
                key,
                value,
                st: St::Todo,
            });
        }
        Op { kind, items }
    }

    fn advance(&mut self, n: u8) -> Res {
        if self.node(n).op.is_none() {
            if !self.issuing {
                return Ok(());
            }
            let op = self.new_op(n);
            self.node(n).op = Some(op);
        }
        let kind = self.node(n).op.as_ref().map(|o| o.kind);
        let count = self.node(n).op.as_ref().map_or(0, |o| o.items.len());
        let mut need_frames = false;
        for i in 0..count {
            let Some(item) = self.node(n).op.as_ref().map(|o| o.items[i]) else {
                break;
            };
            if item.st != St::Todo {
                continue;
            }
            let key = item.key;
            if kind == Some(OpKind::Fsync) {
                let dirty = matches!(
                    self.node(n).cache.slot(&key),
                    Some(Slot::Local { dirty: true, .. } | Slot::Remote { dirty: true, .. })
                );
                if dirty {
                    self.send(
                        n,
                        PageReq::Writeback { key, dirty: true },
                        Call::Writeback { key, item: i },
                    );
                    self.set_item(n, i, St::Wait);
                } else {
                    self.set_item(n, i, St::Done);
                }
                continue;
            }
            let write = kind == Some(OpKind::Write);
            let busy = matches!(
                self.node(n).cache.slot(&key),
                Some(Slot::Reserved { .. } | Slot::Reclaiming { .. })
            ) || self.node(n).missing(&key);
            if busy {
                continue;
            }
            match self.node(n).cache.lookup(&key) {
                Hit::Local(g) | Hit::Remote(g) => {
                    self.access(n, i, key, g, write, item.value)?;
                }
                Hit::Private => return Err(format!("node {n}: private copy in strong mode")),
                Hit::Miss => match self.node(n).cache.start_miss(key, write) {
                    Some(req) => {
                        self.send(n, req, Call::Miss { key, item: i });
                        self.set_item(n, i, St::Wait);
                    }
                    None => need_frames = true,
                },
            }
        }
        if need_frames {
            self.reclaim(n, 4);
        }
        self.finish_op(n);
        Ok(())
    }

    /// A resident or mapped page: read it or write it in place.
    fn access(&mut self, n: u8, i: usize, key: PageKey, gfn: u64, write: bool, v: u64) -> Res {
        if write {
            self.mem.insert(gfn, v);
            self.node(n).cache.mark_dirty(&key);
            self.wrote(key, v);
        } else {
            let got = self.mem_val(gfn);
            self.check_read(n, key, got)?;
        }
        self.set_item(n, i, St::Done);
        Ok(())
    }

    fn set_item(&mut self, n: u8, i: usize, st: St) {
        if let Some(op) = self.node(n).op.as_mut() {
            op.items[i].st = st;
        }
    }

    fn finish_op(&mut self, n: u8) {
        let node = self.node(n);
        if node
            .op
            .as_ref()
            .is_some_and(|o| o.items.iter().all(|i| i.st == St::Done))
        {
            node.op = None;
        }
    }

    /// Send one BATCH_INV of up to `max` victims (one batch at a time).
    fn reclaim(&mut self, n: u8, max: usize) {
        if self.node(n).invs_out > 0 {
            return;
        }
        let count = 1 + self.rng.below(max as u64) as usize;
        let victims = self.node(n).cache.pick_victims(count);
        for (key, dirty) in victims {
            self.send(n, PageReq::Inv { key, dirty }, Call::Inv { key });
            self.node(n).invs_out += 1;
        }
    }

    fn drop_remote(&mut self, n: u8, all: bool) {
        let keys = if all {
            self.node(n).cache.all_remote()
        } else {
            self.node(n).cache.over_limit()
        };
        for (key, dirty) in keys {
            self.send(n, PageReq::Drop { key, dirty }, Call::Drop { key });
        }
    }

    fn housekeeping(&mut self, n: u8) {
        let r = self.rng.below(100);
        if r < 60 {
            self.drop_remote(n, false);
        } else if r < 70 {
            self.drop_remote(n, true);
        } else if r < 90 {
            self.reclaim(n, 4);
        }
    }

    fn on_response(&mut self, n: u8, tag: u32, reply: PageReply) -> Res {
        let Some(call) = self.node(n).calls.remove(&tag) else {
            return Err(format!(
                "node {n}: response to unknown tag {tag}: {reply:?}"
            ));
        };
        match call {
            Call::Miss { key, item } => {
                let export = &self.export;
                let got = self.nodes[usize::from(n) - 1]
                    .cache
                    .complete_miss(key, reply, |g| export.contains(&g));
                self.flush_acks(n);
                let Some(it) = self.node(n).op.as_ref().map(|o| o.items[item]) else {
                    return Err(format!("node {n}: miss answered without an operation"));
                };
                let write = self.node(n).op.as_ref().map(|o| o.kind) == Some(OpKind::Write);
                match got {
                    Installed::Local(g) | Installed::Remote(g) => {
                        self.access(n, item, key, g, write, it.value)?;
                    }
                    Installed::Reserved(g) => {
                        if !write {
                            return Err(format!("node {n}: E granted to a READ of {key:?}"));
                        }
                        // The full-page write into our own frame, then commit.
                        self.mem.insert(g, it.value);
                        let t = self.send(n, PageReq::Unlock { key }, Call::Unlock { key, item });
                        self.unlocks.insert((n, t), it.value);
                    }
                    Installed::Retry | Installed::Failed => {
                        self.seen.retries += 1;
                        self.set_item(n, item, St::Todo);
                    }
                }
            }
            Call::Unlock { key, item } => {
                if reply != (PageReply::Done { written: false }) {
                    return Err(format!("node {n}: UNLOCK of {key:?} answered {reply:?}"));
                }
                self.node(n).cache.unlocked(key);
                self.set_item(n, item, St::Done);
            }
            Call::Inv { key } => {
                self.node(n).invs_out -= 1;
                match reply {
                    PageReply::Done { .. } => self.node(n).cache.reclaimed(&key),
                    _ => self.node(n).cache.reclaim_failed(&key),
                }
            }
            Call::Drop { key } => {
                // Refused when our ack of a racing DIR_INV got there first.
                if !matches!(
                    reply,
                    PageReply::Done { written: false } | PageReply::Refused
                ) {
                    return Err(format!("node {n}: DROP answered {reply:?}"));
                }
                if reply == PageReply::Refused {
                    self.seen.refused_drops += 1;
                }
                self.node(n).cache.drop_done(&key);
            }
            Call::Writeback { key, item } => {
                if let PageReply::Done { .. } = reply {
                    self.node(n).cache.cleaned(&key);
                    self.node(n).cache.count_writeback();
                }
                self.set_item(n, item, St::Done);
            }
        }
        self.finish_op(n);
        Ok(())
    }

    fn on_notice(&mut self, n: u8, key: PageKey) {
        match self.node(n).cache.dir_inv(&key) {
            Some(dirty) => self.send_ack(n, key, dirty),
            None => self.seen.deferred_invs += 1,
        }
    }

    // ---- directory side --------------------------------------------------

    fn run(&mut self, actions: Vec<Action>) -> Res {
        let mut queue: VecDeque<Action> = actions.into();
        while let Some(a) = queue.pop_front() {
            match a {
                Action::Reply { node, tag, reply } => {
                    if !self.node(node).alive {
                        return Err(format!("reply {reply:?} to failed node {node}"));
                    }
                    self.node(node).resp.push_back((tag, reply));
                }
                Action::Fill { key, gfn } => {
                    if self.layout.gfn_owner(gfn).is_none() {
                        return Err(format!("fill of {key:?} into non-pool frame {gfn}"));
                    }
                    if self.p.fill_depth > 0 {
                        let Some(Entry {
                            owner,
                            phase: Phase::Exclusive { by_dir: true, tag },
                            ..
                        }) = self.dir.entry(&key)
                        else {
                            return Err(format!("fill of {key:?} without a reservation"));
                        };
                        let id = self.fills.push(Fill {
                            key,
                            gfn,
                            node: owner,
                            tag,
                            lba: key.idx,
                            len: 4096,
                        });
                        self.fill_keys.insert(id, key);
                        self.submit_fills();
                        continue;
                    }
                    let ok = !self.rng.chance(self.p.fill_error_pm);
                    if ok {
                        let v = self.disk_val(&key);
                        self.mem.insert(gfn, v);
                    }
                    queue.extend(self.dir.filled(key, ok));
                }
                Action::WriteBack { key, gfn } => {
                    let v = self.mem_val(gfn);
                    self.disk.insert(key, v);
                }
                Action::Invalidate { node, key } => {
                    if !self.node(node).alive {
                        return Err(format!("DIR_INV of {key:?} to failed node {node}"));
                    }
                    if self.issuing && self.rng.chance(self.p.loss_pm) {
                        self.seen.lost += 1;
                        self.node(node).doomed = true;
                    } else {
                        self.node(node).notify.push_back(key);
                    }
                }
                Action::Export { gfn, on } => {
                    if on {
                        self.export.insert(gfn);
                    } else {
                        self.export.remove(&gfn);
                    }
                }
            }
        }
        Ok(())
    }

    fn serve_request(&mut self, n: u8, tag: u32, req: PageReq) -> Res {
        let actions = self.dir.handle(&self.layout, n, tag, req);
        if let PageReq::Unlock { key } = req {
            let v = self.unlocks.remove(&(n, tag));
            let done = actions.iter().any(|a| {
                matches!(a, Action::Reply { node, tag: t, reply: PageReply::Done { .. } }
                    if *node == n && *t == tag)
            });
            if let (true, Some(v)) = (done, v) {
                // The commit makes the write visible: it is complete.
                self.wrote(key, v);
            }
        }
        self.run(actions)
    }

    fn serve_ack(&mut self, n: u8, key: PageKey, dirty: bool) -> Res {
        let actions = self.dir.ack(n, key, dirty);
        self.run(actions)?;
        if self.sc.lossy && self.rng.chance(self.p.loss_pm) {
            // A duplicate right behind it: must change nothing.
            self.seen.dup_acks += 1;
            let before: Vec<_> = self.dir.entries().collect();
            let again = self.dir.ack(n, key, dirty);
            let after: Vec<_> = self.dir.entries().collect();
            if !again.is_empty() || before != after {
                return Err(format!(
                    "duplicate ack of {key:?} from {n} acted: {again:?}"
                ));
            }
        }
        Ok(())
    }

    /// The directory declares `n` failed (heartbeat timeout): its rings and
    /// memory of the cache are gone.
    fn crash(&mut self, n: u8) -> Res {
        // Which of its pages' latest writes are owed to the disk: those the
        // directory or a live node knows to be dirty. The others may die
        // with the node (unsynced writes in its own frames).
        let mut lost = Vec::new();
        for (k, e) in self.dir.entries() {
            let (k, e) = (&k, &e);
            if e.owner != n || matches!(e.phase, Phase::Exclusive { .. }) {
                continue;
            }
            let owed = e.dirty
                || self
                    .nodes
                    .iter()
                    .any(|m| m.id != n && m.alive && m.reports_dirty(k, e));
            if !owed {
                lost.push(*k);
            }
        }
        for k in lost {
            if k.ino == DATA {
                self.model.insert(k, Val::Unknown);
                self.tainted.insert(k);
            }
        }
        self.seen.crashes += 1;
        let node = self.node(n);
        node.alive = false;
        node.doomed = false;
        node.req.clear();
        node.resp.clear();
        node.notify.clear();
        node.ack.clear();
        node.calls.clear();
        node.op = None;
        node.invs_out = 0;
        node.cache.forget_all();
        self.unlocks.retain(|(m, _), _| *m != n);
        self.fills.cancel_node(n);
        let actions = self.dir.node_failed(n);
        self.run(actions)
    }

    /// Start the fills the disk queue lets go (the read's outcome is fixed
    /// now: the page's disk value, or a failure).
    fn submit_fills(&mut self) {
        while let Some((id, _)) = self.fills.next_submit() {
            let ok = !self.rng.chance(self.p.fill_error_pm);
            let value = self.fill_keys.get(&id).map(|k| self.disk_val(k));
            self.fill_reads.insert(id, value.filter(|_| ok));
        }
    }

    /// One read in flight (picked at random) completes.
    fn complete_fill(&mut self) -> Res {
        let ids: Vec<u64> = self.fill_reads.keys().copied().collect();
        let id = ids[self.rng.below(ids.len() as u64) as usize];
        let value = self.fill_reads.remove(&id).flatten();
        self.fill_keys.remove(&id);
        let Some(f) = self.fills.complete(id) else {
            self.seen.stale_fills += 1;
            self.submit_fills();
            return Ok(());
        };
        self.log(Ev::FillDone(f.key, f.node, value.is_some()));
        self.seen.async_fills += 1;
        let mut actions = Vec::new();
        if f.wanted(self.dir.entry(&f.key)) {
            if let Some(v) = value {
                self.mem.insert(f.gfn, v);
            }
            actions = self.dir.filled(f.key, value.is_some());
        } else {
            self.seen.stale_fills += 1;
        }
        self.submit_fills();
        self.run(actions)
    }

    /// Pages whose crashed owner's data may be lost are settled when the
    /// directory forgets them: what reached the disk is the page now.
    fn settle_tainted(&mut self) {
        let gone: Vec<PageKey> = self
            .tainted
            .iter()
            .filter(|k| self.dir.entry(k).is_none())
            .copied()
            .collect();
        for k in gone {
            self.tainted.remove(&k);
            if self.expected(&k) == Val::Unknown {
                let v = self.disk_val(&k);
                self.model.insert(k, Val::Known(v));
            }
        }
    }

    // ---- scheduler -------------------------------------------------------

    fn frozen(&self, q: usize, n: u8) -> bool {
        matches!(self.frozen, Some((fq, fn_, until)) if fq == q && fn_ == n && self.step < until)
    }

    /// One step: pick an event at random and run it.
    fn step_once(&mut self) -> Res {
        self.step += 1;
        if self.frozen.is_some_and(|(_, _, until)| self.step >= until) {
            self.frozen = None;
        }
        // Rare events first.
        let nodes = self.p.nodes;
        if self.issuing && self.frozen.is_none() && self.rng.chance(3) {
            let q = self.rng.below(QUEUES as u64) as usize;
            let n = self.rng.range(1, u64::from(nodes)) as u8;
            let until = self.step + self.rng.range(20, 300);
            self.frozen = Some((q, n, until));
            self.log(Ev::Freeze(q, n, until));
        }
        if self.issuing && self.rng.chance(self.p.crash_pm) {
            let n = self.rng.range(1, u64::from(nodes)) as u8;
            if self.node(n).alive {
                self.log(Ev::Crash(n));
                return self.crash(n);
            }
        }
        if let Some(n) = (1..=nodes).find(|&n| self.node(n).doomed) {
            if !self.issuing || self.rng.chance(30) {
                self.log(Ev::Crash(n));
                return self.crash(n);
            }
        }
        if self.issuing && self.rng.chance(self.p.evict_pm) {
            let from = self.rng.below(SCRATCH_PAGES);
            self.log(Ev::Evict(from));
            self.seen.evictions += 1;
            let actions = self.dir.evict_file(SCRATCH, from);
            return self.run(actions);
        }
        // Weighted choice among the ready events.
        let mut cands: Vec<(u64, u8, u8)> = Vec::new();
        for n in 1..=nodes {
            let node = &self.nodes[usize::from(n) - 1];
            if !node.alive {
                if !self.dir.holds_frames_of(n) {
                    cands.push((4, 6, n));
                }
                continue;
            }
            let ready = [
                !node.req.is_empty() && !self.frozen(0, n),
                !node.ack.is_empty() && !self.frozen(1, n),
                !node.resp.is_empty() && !self.frozen(2, n),
                !node.notify.is_empty() && !self.frozen(3, n),
                node.op.is_some() || self.issuing,
                true,
            ];
            for (kind, r) in ready.iter().enumerate() {
                if *r {
                    cands.push((self.p.w[kind], kind as u8, n));
                }
            }
        }
        if !self.fill_reads.is_empty() {
            // The disk finishes a read (kind 7).
            cands.push((self.p.w[0], 7, 0));
        }
        let total: u64 = cands.iter().map(|c| c.0).sum();
        if total == 0 {
            return Ok(());
        }
        let mut x = self.rng.below(total);
        let mut pick = cands[0];
        for c in &cands {
            if x < c.0 {
                pick = *c;
                break;
            }
            x -= c.0;
        }
        let (_, kind, n) = pick;
        match kind {
            0 => {
                let Some((tag, req)) = self.node(n).req.pop_front() else {
                    return Ok(());
                };
                self.log(Ev::DirReq(n, tag, req));
                self.serve_request(n, tag, req)
            }
            1 => {
                let Some((key, dirty)) = self.node(n).ack.pop_front() else {
                    return Ok(());
                };
                self.log(Ev::DirAck(n, key, dirty));
                self.serve_ack(n, key, dirty)
            }
            2 => {
                let Some((tag, reply)) = self.node(n).resp.pop_front() else {
                    return Ok(());
                };
                self.log(Ev::Resp(n, tag, reply));
                self.on_response(n, tag, reply)
            }
            3 => {
                let Some(key) = self.node(n).notify.pop_front() else {
                    return Ok(());
                };
                self.log(Ev::Notice(n, key));
                self.on_notice(n, key);
                Ok(())
            }
            4 => {
                self.log(Ev::Advance(n));
                self.advance(n)
            }
            5 => {
                self.log(Ev::House(n));
                self.housekeeping(n);
                Ok(())
            }
            7 => self.complete_fill(),
            _ => {
                self.log(Ev::Restart(n));
                self.node(n).alive = true;
                Ok(())
            }
        }
    }

    fn log(&mut self, ev: Ev) {
        if self.trace.len() == self.trace_len {
            self.trace.pop_front();
        }
        self.trace.push_back((self.step, ev));
    }

    // ---- invariants ------------------------------------------------------

    /// The page node `n` holds frame `gfn` for, if any (resident, reserved,
    /// reclaiming or handed out with a miss).
    fn holder(&self, n: u8, gfn: u64) -> Option<PageKey> {
        let node = &self.nodes[usize::from(n) - 1];
        let (_, inflight) = node.cache.frames_debug();
        for (k, s) in node.cache.slots() {
            match s {
                Slot::Local { gfn: g, .. }
                | Slot::Reserved { gfn: g }
                | Slot::Reclaiming { gfn: g }
                    if *g == gfn =>
                {
                    return Some(*k);
                }
                _ => {}
            }
        }
        inflight.iter().find(|(_, g)| *g == gfn).map(|(k, _)| *k)
    }

    fn check(&self) -> Res {
        self.dir.check()?;
        // Directory side.
        for (k, e) in self.dir.entries() {
            let (k, e) = (&k, &e);
            if e.owner == 0 || e.owner > self.p.nodes {
                return Err(format!("{k:?}: owner {} is no node", e.owner));
            }
            if self.layout.gfn_owner(e.gfn) != Some(u32::from(e.owner)) {
                return Err(format!(
                    "{k:?}: frame {} not in node {}'s pool",
                    e.gfn, e.owner
                ));
            }
            let others = e.sharers & !bit(e.owner);
            let tbi = matches!(e.phase, Phase::Invalidating { .. });
            if others != 0 && !self.export.contains(&e.gfn) {
                return Err(format!(
                    "{k:?}: sharers {others:#x} but frame {} not exported",
                    e.gfn
                ));
            }
            // The owner still holds the frame for this page, unless it was
            // told to free it (file eviction) or died.
            let owner_told = match e.phase {
                Phase::Invalidating { pending, .. } => pending & bit(e.owner) != 0,
                _ => false,
            };
            if self.nodes[usize::from(e.owner) - 1].alive && !owner_told {
                let h = self.holder(e.owner, e.gfn);
                if h != Some(*k) {
                    return Err(format!(
                        "{k:?}: directory says node {} frame {} ({:?}), it holds it for {h:?}",
                        e.owner, e.gfn, e.phase
                    ));
                }
            }
            let mut excl = 0;
            for n in 1..=self.p.nodes {
                match self.dir.state_of(k, n) {
                    PageState::O | PageState::E => excl += 1,
                    PageState::S if e.sharers & bit(n) == 0 => {
                        return Err(format!("{k:?}: S on {n} without the sharer bit"));
                    }
                    PageState::Tbi if !tbi => return Err(format!("{k:?}: TBI outside TBI")),
                    _ => {}
                }
            }
            if excl > 1 {
                return Err(format!("{k:?}: {excl} nodes in O or E"));
            }
        }
        for g in &self.export {
            let used = self
                .dir
                .entries()
                .any(|(_, e)| e.gfn == *g && !matches!(e.phase, Phase::Exclusive { .. }));
            if !used {
                return Err(format!("frame {g} exported but caches no page"));
            }
        }
        // Node side.
        let mut exclusive: BTreeMap<PageKey, u8> = BTreeMap::new();
        for node in self.nodes.iter().filter(|n| n.alive) {
            let n = node.id;
            let c = &node.cache;
            let (free, inflight) = c.frames_debug();
            let (first, end) = self.layout.pool_gfns(u32::from(n));
            let end = end.min(first + self.p.frames);
            let mut seen = BTreeSet::new();
            let resident = c.slots().filter_map(|(_, s)| match s {
                Slot::Local { gfn, .. } | Slot::Reserved { gfn } | Slot::Reclaiming { gfn } => {
                    Some(*gfn)
                }
                _ => None,
            });
            for g in free
                .iter()
                .copied()
                .chain(inflight.iter().map(|(_, g)| *g))
                .chain(resident)
            {
                if g < first || g >= end {
                    return Err(format!("node {n}: frame {g} outside its pool"));
                }
                if !seen.insert(g) {
                    return Err(format!(
                        "node {n}: frame {g} held twice (free/in flight/resident)"
                    ));
                }
            }
            if seen.len() as u64 != self.p.frames {
                return Err(format!(
                    "node {n}: {} of {} frames accounted",
                    seen.len(),
                    self.p.frames
                ));
            }
            for (k, s) in c.slots() {
                let e = self.dir.entry(k);
                match s {
                    Slot::Local { gfn, .. } | Slot::Reserved { gfn } => {
                        if let Some(m) = exclusive.insert(*k, n) {
                            return Err(format!("{k:?}: own copies on nodes {m} and {n}"));
                        }
                        let ok = e.is_some_and(|e| {
                            e.owner == n
                                && e.gfn == *gfn
                                && (matches!(s, Slot::Reserved { .. })
                                    || !matches!(e.phase, Phase::Exclusive { .. }))
                        });
                        if !ok {
                            return Err(format!("node {n}: {s:?} for {k:?}, directory has {e:?}"));
                        }
                    }
                    Slot::Reclaiming { gfn } => {
                        if e.is_some_and(|e| e.owner == n && e.gfn != *gfn) {
                            return Err(format!("node {n}: {s:?} for {k:?}, directory has {e:?}"));
                        }
                    }
                    Slot::Remote { owner, gfn, .. } => {
                        let ok = e.is_some_and(|e| {
                            e.owner == *owner
                                && e.gfn == *gfn
                                && e.sharers & bit(n) != 0
                                && !matches!(e.phase, Phase::Exclusive { .. })
                        });
                        if !ok {
                            return Err(format!("node {n}: {s:?} for {k:?}, directory has {e:?}"));
                        }
                        if !self.export.contains(gfn) {
                            return Err(format!("node {n}: maps unexported frame {gfn} for {k:?}"));
                        }
                        let o = &self.nodes[usize::from(*owner) - 1];
                        let h = self.holder(*owner, *gfn);
                        if o.alive && h != Some(*k) {
                            return Err(format!(
                                "node {n}: maps {gfn} for {k:?}, owner {owner} holds it for {h:?}"
                            ));
                        }
                    }
                    Slot::Private(_) => return Err(format!("node {n}: private copy")),
                }
            }
        }
        Ok(())
    }

    // ---- runs ------------------------------------------------------------

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

    fn new_fsync(&mut self, n: u8) -> Op {
        let cache = &self.node(n).cache;
        let mut keys = Vec::new();
        for ino in cache.dirty_inodes() {
            keys.extend(cache.dirty_pages(ino));
        }
        Op {
            kind: OpKind::Fsync,
            items: keys
                .into_iter()
                .map(|key| Item {
                    key,
                    value: 0,
                    st: St::Todo,
                })
                .collect(),
        }
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
        let acking = self.ack.iter().any(|(k, d)| *d && k == key);
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
