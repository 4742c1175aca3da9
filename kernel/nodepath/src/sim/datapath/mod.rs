//! A seeded, deterministic simulation of the REAL node data path: 2..=4
//! nodes ([`crate::node::Node`], strong mode) over the host rig (real ring
//! client, real [`dirsvc::server::Directory`], real flatfs on a
//! [`crate::rig::FaultDisk`]), with faults injected between and inside
//! operations.
//!
//! Every step picks an action with the seed's random generator: a
//! whole-file write (truncate + write + close, as the shell's `write`), an
//! in-place rewrite (open, write at 0, close: no truncate first, so it
//! races other nodes' truncates while their cut pages are torn down), a
//! whole-file read (one read call with a buffer larger than the file), a
//! recreation (a node removes its file, writes and reads a scratch file
//! that takes the freed inode number, removes it and writes its file
//! anew: a page of a removed file must never show in its successor), an
//! fsync, a `cache drop`, or a fault: a corrupt notify ring (garbage head
//! index), a disk read that fails (I/O error in the middle of a batch of
//! fills), a directory frozen for longer than the RPC timeout (a batch
//! times out), a directory that crashes and restarts over the same disk
//! (nodes rejoin, the run goes on). Membership checks run at random, and
//! idle nodes check every 100 ms of the rig's clock, as the kernel's idle
//! loop does. After these steps a second phase (`ONECOPY_SIM_PHASE2`
//! steps, default 40) fails a node in a quarter of its steps (it rejoins
//! 1..=8 steps later) and appends lines to `/a` from every node (also
//! inside other operations' waits), checked by the append rule of
//! [`super::history`]. A step hook runs whole reads and writes of other nodes inside
//! the wait steps of the current operation, so interleavings happen inside
//! operations (the torn-state case: writers truncating while a third node
//! reads).
//!
//! Files: `/c0`, `/c1` are one page each and written by every node (the
//! concurrent-writer case); `/m<k>` spans several pages and only node `k`
//! writes it (several writers of a multi-page file may legitimately mix
//! their pages, as on Linux). Every write of a file has the file's fixed
//! length, so a write redone in place never leaves another's tail.
//!
//! Checked after every step and inside every hooked read: every successful
//! read returns (size, bytes) of some write of that file (or the empty
//! file a truncate left); the directory's [`dirsvc::pagedir::PageDir`]
//! invariants; at most one node holds a page in its own frame; every
//! remote mapping is of a frame its owner still holds for that page (or
//! the owner has left the shared cache and cannot reuse it). At the end,
//! with faults off, every node reads every file and they agree.
//!
//! A failure panics with its seed; `ONECOPY_SIM_SEED=0x... cargo test -p
//! nodepath sim` replays one seed (with `ONECOPY_SIM_STEPS` steps).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use fabric::config::Mode;

use super::history::{History, APPEND_FILE};
use crate::node::Node;
use crate::rig::{HostEnv, Rig, RigConfig};

mod actions;
mod check;
mod finish;
mod tests;

use actions::{do_append, do_read, do_write, fail_node, revive, step_action};
use check::check_single_copy;

/// xorshift64*: small, seedable, deterministic.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn pct(&mut self, p: u64) -> bool {
        self.below(100) < p
    }
}

/// What the simulation shares with its step hook (its history and
/// checker through [`std::ops::Deref`]).
struct World {
    h: History,
    rng: Rng,
    /// Nodes declared failed and not yet back (frozen: nobody drives
    /// them), with the step at which they come back.
    dead: BTreeMap<u32, u64>,
    /// Sequence number of the next write.
    seq: u64,
    reads: u64,
    reads_ok: u64,
    writes: u64,
    hooked: u64,
    /// A node idles asleep: the hook runs at every step, and sometimes
    /// drops another node's cache (its evictions invalidate the sleeper).
    sleeper: bool,
    /// In the second phase (see [`run_phases`]).
    phase2: bool,
    appends: u64,
    appends_ok: u64,
    /// Delegations granted and recalled by directories restarted since.
    deleg: (u64, u64),
}

impl World {
    fn new(rng: Rng) -> World {
        World {
            h: History::default(),
            rng,
            dead: BTreeMap::new(),
            seq: 0,
            reads: 0,
            reads_ok: 0,
            writes: 0,
            hooked: 0,
            sleeper: false,
            phase2: false,
            appends: 0,
            appends_ok: 0,
            deleg: (0, 0),
        }
    }
}

impl std::ops::Deref for World {
    type Target = History;
    fn deref(&self) -> &History {
        &self.h
    }
}

impl std::ops::DerefMut for World {
    fn deref_mut(&mut self) -> &mut History {
        &mut self.h
    }
}

type Nodes = Vec<Rc<RefCell<Node<HostEnv>>>>;

fn files(nodes: u32) -> Vec<(String, usize, Option<u32>)> {
    let mut v = vec![
        ("/c0".to_string(), 4087, None),
        ("/c1".to_string(), 3000, None),
    ];
    for k in 1..=nodes {
        v.push((format!("/m{k}"), (k as usize * 2 + 1) * 4096 - 123, Some(k)));
    }
    v
}

fn content(seq: u64, writer: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seq as u8).wrapping_mul(31) ^ (writer as u8) ^ (i as u8) | 1)
        .collect()
}

/// Outcome of one run.
#[derive(Debug, Default)]
pub(super) struct RunStats {
    pub steps: u64,
    pub reads: u64,
    pub reads_ok: u64,
    pub writes: u64,
    pub hooked: u64,
    pub faults: u64,
    /// Node failures (and rejoins).
    pub failures: u64,
    /// DIR_INVs the directory took from quietly sleeping nodes.
    pub quiet_taken: u64,
    /// Appends (second phase), and those that succeeded.
    pub appends: u64,
    pub appends_ok: u64,
    /// Rig steps (directory passes while it was up): the run's cost.
    pub passes: u64,
    /// Delegations granted, and recalled (`ONECOPY_SIM_DELEG=1`).
    pub delegations: u64,
    pub recalls: u64,
    /// A digest of every checked read (node, file, time span, bytes) and
    /// of the final history: two builds replay a seed alike iff their
    /// digests agree.
    pub digest: u64,
}

/// Run `steps` steps of seed `seed` in `mode`; `Err` names the broken
/// invariant.
pub(super) fn run(seed: u64, steps: u64, mode: Mode) -> Result<RunStats, String> {
    run_phases(seed, (steps, phase2_steps()), mode)
}

/// Whether the second phase appends: in every mode, unless
/// `ONECOPY_SIM_APPENDS=0`.
fn appends_on() -> bool {
    std::env::var("ONECOPY_SIM_APPENDS").map_or(true, |v| v.trim() != "0")
}

/// Whether strong mode delegates ranges of files (whole-page writes
/// placed with no request, recalls, returns before reclaim, fsync and
/// cuts, a failed holder's list written back): `ONECOPY_SIM_DELEG=1`.
pub(super) fn deleg_on() -> bool {
    std::env::var("ONECOPY_SIM_DELEG").is_ok_and(|v| v.trim() == "1")
}

/// Steps of the second phase (`ONECOPY_SIM_PHASE2`, default 40).
fn phase2_steps() -> u64 {
    env_u64("ONECOPY_SIM_PHASE2").unwrap_or(40)
}

/// [`run`] with `steps.0` steps of the first phase (the schedule seeds
/// were found with: a seed replays as it did) and then `steps.1` of the
/// second, where node failures (and rejoins) are frequent and nodes
/// append to [`APPEND_FILE`] (also inside other operations' waits).
pub(super) fn run_phases(seed: u64, steps: (u64, u64), mode: Mode) -> Result<RunStats, String> {
    let (steps, extra) = steps;
    let mut rng = Rng::new(seed);
    let (rig, nnodes) = rig_for(seed, mode, &mut rng);
    let nodes: Nodes = (1..=nnodes).map(|k| rig.node_rc(k)).collect();
    // Seeds with bit 10 set promote hot pages: replicas of peers' pages
    // (single-copy modes), read often, revoked by stores and reclaim.
    if seed & 0x400 != 0 && matches!(mode, Mode::Strong | Mode::Relaxed) {
        promote_hot_pages(&nodes);
    }
    let files = files(nnodes);
    let world = Rc::new(RefCell::new(World::new(rng)));
    world.borrow_mut().mode = Some(mode);
    let appends = appends_on();
    // Inside other operations' wait steps: whole reads and writes.
    let hook_pct = 2 + world.borrow_mut().rng.below(10);
    set_hook(&rig, &world, &nodes, &files, hook_pct, appends);
    let mut faults = 0;
    let mut failures = 0;
    for step in 0..steps + extra {
        let phase2 = step >= steps;
        let (k, f, action, arg, x) = draw_step(&world, phase2, nnodes, files.len());
        // Failed nodes whose time has come are back: they find themselves
        // declared failed at their first membership check and rejoin.
        revive_due(&rig, &nodes, &world, step);
        let name = &files[f].0;
        let n = &nodes[k as usize - 1];
        if trace() {
            eprintln!(
                "step {step}: node {k} action {action} arg {arg} x {x} file {name} passes {} now {}",
                rig.sh.passes.get(),
                rig.sh.now()
            );
        }
        if world.borrow().dead.contains_key(&k) {
            continue;
        }
        let can_fail = world.borrow().dead.len() + 1 < nodes.len();
        match x {
            // Node failure: back after 1..=8 steps.
            0..=24 if can_fail => {
                faults += 1;
                failures += 1;
                fail_node(&rig, &world, k, step + 1 + arg);
            }
            0..=49 if appends => do_append(&world, &mut n.borrow_mut(), k),
            50..=59 if appends => do_read(&world, &mut n.borrow_mut(), k, APPEND_FILE),
            _ => step_action(
                (&rig, &nodes, &world, &files),
                (step, k, f, action, arg),
                &mut faults,
                &mut failures,
            ),
        }
        idle_checks(&nodes, &world);
        checked(&rig, &nodes, &world).map_err(|e| format!("step {step}: {e}"))?;
    }
    finish::finish(
        seed,
        &rig,
        &nodes,
        &world,
        &files,
        steps + extra,
        (faults, failures),
    )
}

/// The rig of seed `seed`: 2..=4 nodes, a short RPC timeout, and by the
/// seed's draws and bits a small pool, small private caches, doorbells;
/// and its number of nodes.
fn rig_for(seed: u64, mode: Mode, rng: &mut Rng) -> (Rig, u32) {
    let nnodes = 2 + rng.below(3) as u32;
    let mut cfg = RigConfig::new(nnodes, mode);
    cfg.rpc_timeout_ns = 20_000_000;
    if rng.pct(50) {
        cfg.region = (nnodes as usize) << 20; // a small pool: reclaim all the time
    }
    if mode != Mode::Strong && seed & 0x200 != 0 {
        // Small private caches: relaxed copies and buffered pages go back
        // at the bound, between the writes' closes.
        cfg.cache_pages = 64;
    }
    cfg.delegation = deleg_on();
    let rig = Rig::new(cfg);
    // Seeds with bit 8 set run with doorbells: waits sleep (quietly when
    // nothing is in flight), so the directory takes DIR_INVs of sleeping
    // sharers as acknowledged (`lazy_inv`). Decided without the generator,
    // so the older seeds replay as before.
    let doorbells = seed & 0x100 != 0;
    rig.sh.doorbells.set(doorbells);
    // Idle nodes check membership as the kernel's idle loop does: a
    // node whose session broke rejoins while others wait on it.
    rig.sh.idle_checks.set(Some(crate::rig::IDLE_CHECK_NS));
    (rig, nnodes)
}

/// Every node keeps a replica of a peer's page at its first read.
fn promote_hot_pages(nodes: &Nodes) {
    for n in nodes {
        let mut n = n.borrow_mut();
        if let Ok(mut c) = n.cache_controls() {
            c.promotion = crate::pagecache::Promotion {
                threshold: 1,
                window_ns: 3_600_000_000_000,
            };
            let _ = n.set_cache_controls(c);
        }
    }
}

/// The step hook: inside other operations' wait steps, now and then (at
/// every step while a node sleeps) a random node reads or writes a random
/// file whole, or drops its cache (only while a node sleeps); in the
/// second phase it appends and reads the appended file.
fn set_hook(
    rig: &Rig,
    world: &Rc<RefCell<World>>,
    nodes: &Nodes,
    files: &[(String, usize, Option<u32>)],
    hook_pct: u64,
    appends: bool,
) {
    let (w, nodes, files) = (world.clone(), nodes.clone(), files.to_vec());
    rig.set_hook(Some(Box::new(move |_me| {
        let (go, k, f, write, drop, phase2) = {
            let mut w = w.borrow_mut();
            let go = w.sleeper || w.rng.pct(hook_pct);
            let k = 1 + w.rng.below(nodes.len() as u64) as u32;
            let f = w.rng.below(files.len() as u64) as usize;
            let drop = w.sleeper && w.rng.pct(30);
            let write = w.rng.pct(40);
            (
                go && !w.dead.contains_key(&k),
                k,
                f,
                write,
                drop,
                w.phase2 && appends,
            )
        };
        if !go {
            return;
        }
        let Ok(mut n) = nodes[k as usize - 1].try_borrow_mut() else {
            return;
        };
        w.borrow_mut().hooked += 1;
        if drop {
            let _ = n.cache_drop();
            return;
        }
        let (name, len, writer) = &files[f];
        if trace() {
            eprintln!(
                "  hook: node {k} {} {name}",
                if write { "write" } else { "read" }
            );
        }
        // Second phase: the first file's writes append, the second
        // file's reads read the appended file.
        if phase2 && f == 0 && write {
            do_append(&w, &mut n, k);
        } else if phase2 && f == 1 && !write {
            do_read(&w, &mut n, k, APPEND_FILE);
        } else if write && writer.is_none_or(|o| o == k) {
            do_write(&w, &mut n, k, name, *len);
        } else {
            do_read(&w, &mut n, k, name);
        }
    })));
}

/// Draw step `step`'s node, file, action and argument (and in the
/// second phase its phase-two choice, else 100).
fn draw_step(
    world: &RefCell<World>,
    phase2: bool,
    nnodes: u32,
    nfiles: usize,
) -> (u32, usize, u64, u64, u64) {
    let mut w = world.borrow_mut();
    w.phase2 = phase2;
    let k = 1 + w.rng.below(nnodes as u64) as u32;
    let f = w.rng.below(nfiles as u64) as usize;
    let (action, arg) = (w.rng.below(100), w.rng.below(8));
    // Drawn only in the second phase: the first replays as before.
    let x = if phase2 { w.rng.below(100) } else { 100 };
    (k, f, action, arg, x)
}

/// Failed nodes whose time came by `step` run again.
fn revive_due(rig: &Rig, nodes: &Nodes, world: &RefCell<World>, step: u64) {
    let back: Vec<u32> = {
        let w = world.borrow();
        w.dead
            .iter()
            .filter(|(_, &t)| t <= step)
            .map(|(&k, _)| k)
            .collect()
    };
    for d in back {
        revive(rig, nodes, world, d);
    }
}

/// Idle loops: membership checks now and then.
fn idle_checks(nodes: &Nodes, world: &RefCell<World>) {
    for (i, n) in nodes.iter().enumerate() {
        let dead = world.borrow().dead.contains_key(&(i as u32 + 1));
        if world.borrow_mut().rng.pct(30) && !dead {
            n.borrow_mut().check();
        }
    }
}

/// After a step: no illegal read recorded, the single-copy invariants
/// hold.
fn checked(rig: &Rig, nodes: &Nodes, world: &RefCell<World>) -> Result<(), String> {
    if let Some(b) = world.borrow_mut().bad.take() {
        return Err(b);
    }
    let dead: Vec<u32> = world.borrow().dead.keys().copied().collect();
    check_single_copy(rig, nodes, &dead)
}

/// `ONECOPY_SIM_TRACE=1`: print every action.
fn trace() -> bool {
    std::env::var_os("ONECOPY_SIM_TRACE").is_some()
}

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    }
}
