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
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use fabric::config::Mode;
use fabric::proto::PageKey;

use super::history::{
    append_line, fold, hist_digest, History, APPEND_FILE, LINE, STRICT_DIR_CRASH,
};
use super::regress::{whole_read, whole_write};
use crate::node::Node;
use crate::pagecache::Slot;
use crate::rig::{HostEnv, Rig, RigConfig};

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

/// Record that node `k` starts writing `file` whole with new content of
/// `len` bytes: the bytes and the write's index in the history.
fn begin_whole_write(w: &RefCell<World>, k: u32, file: &str, len: usize) -> (Vec<u8>, usize) {
    let mut w = w.borrow_mut();
    w.seq += 1;
    w.writes += 1;
    let d = content(w.seq, k, len);
    let i = w.begin_write(file, k, d.clone());
    (d, i)
}

/// Node `k` writes `file` whole (recorded first: readers may see it while
/// it is under way).
fn do_write(w: &RefCell<World>, n: &mut Node<HostEnv>, k: u32, file: &str, len: usize) {
    let (data, i) = begin_whole_write(w, k, file, len);
    let r = whole_write(n, file, &data);
    w.borrow_mut().end_write(file, i, r.is_ok());
}

/// Node `k` rewrites `file` whole in place: open (a missing file is left
/// alone), write at 0, close, with no truncate first (every write of a
/// file has its length, so the result is this write's bytes).
fn do_write_in_place(w: &RefCell<World>, n: &mut Node<HostEnv>, k: u32, file: &str, len: usize) {
    let Ok(fd) = n.open(file, osapi::io::OpenFlags::default()) else {
        return;
    };
    let (data, i) = begin_whole_write(w, k, file, len);
    let r = n.write(fd, &data);
    let c = n.close(fd);
    let ok = r == Ok(data.len()) && c.is_ok();
    w.borrow_mut().end_write(file, i, ok);
}

/// Node `k` appends one line to [`APPEND_FILE`] (`O_APPEND`, created if
/// missing): open, one write, close.
fn do_append(w: &RefCell<World>, n: &mut Node<HostEnv>, k: u32) {
    let (line, i) = {
        let mut w = w.borrow_mut();
        w.seq += 1;
        w.appends += 1;
        let line = append_line(w.seq, k);
        let i = w.begin_write(APPEND_FILE, k, line.clone());
        (line, i)
    };
    let flags = osapi::io::OpenFlags {
        create: true,
        append: true,
        ..osapi::io::OpenFlags::default()
    };
    let ok = match n.open(APPEND_FILE, flags) {
        Ok(fd) => {
            let r = n.write(fd, &line);
            let c = n.close(fd);
            r == Ok(LINE) && c.is_ok()
        }
        Err(_) => false,
    };
    if trace() {
        eprintln!("  node {k} appended #{i}: ok {ok}");
    }
    let mut w = w.borrow_mut();
    w.appends_ok += u64::from(ok);
    w.end_write(APPEND_FILE, i, ok);
}

/// Node `k` removes `file` (recorded as a write of nothing).
fn do_unlink(w: &RefCell<World>, n: &mut Node<HostEnv>, k: u32, file: &str) {
    let i = w.borrow_mut().begin_write(file, k, Vec::new());
    let r = n.unlink(file);
    // A missing file: nothing was removed, nothing changes.
    w.borrow_mut().end_write(
        file,
        i,
        r.is_ok() || r == Err(fabric::proto::Errno::NotFound),
    );
}

/// Node `k` fsyncs `file`.
fn do_fsync(w: &RefCell<World>, n: &mut Node<HostEnv>, k: u32, file: &str) {
    let t0 = w.borrow_mut().tick();
    if let Ok(fd) = n.open(file, osapi::io::OpenFlags::default()) {
        let r = n.fsync(fd);
        let c = n.close(fd);
        if r.is_ok() && c.is_ok() {
            w.borrow_mut().synced(k, Some(file), t0);
        }
    }
}

/// Node `k` syncs.
fn do_sync(w: &RefCell<World>, n: &mut Node<HostEnv>, k: u32) {
    let t0 = w.borrow_mut().tick();
    if n.sync().is_ok() {
        w.borrow_mut().synced(k, None, t0);
    }
}

/// Node `k` removes its file `file` and writes a scratch file `/x<k>` in
/// its place (the file system hands the freed inode number out again, so
/// page keys of the old file come back for the new one): `k` and `other`
/// read it, which must show only bytes written to `/x<k>`, never a page
/// of the removed file; then the scratch file goes and `file` is written
/// anew. Other nodes may meanwhile find `file` missing or empty.
fn recreate(
    w: &RefCell<World>,
    n: &RefCell<Node<HostEnv>>,
    (other, other_id): (&RefCell<Node<HostEnv>>, u32),
    k: u32,
    file: &str,
    len: usize,
) {
    let scratch = format!("/x{k}");
    do_unlink(w, &mut n.borrow_mut(), k, file);
    // A different length from `file`'s: a stale page would show.
    do_write(w, &mut n.borrow_mut(), k, &scratch, len / 2 + 1);
    do_read(w, &mut n.borrow_mut(), k, &scratch);
    let other_alive = !w.borrow().dead.contains_key(&other_id);
    if let (true, Ok(mut o)) = (other_alive, other.try_borrow_mut()) {
        do_read(w, &mut o, other_id, &scratch);
    }
    do_unlink(w, &mut n.borrow_mut(), k, &scratch);
    do_write(w, &mut n.borrow_mut(), k, file, len);
}

/// Node `n` reads `file` whole and checks it against the history.
fn do_read(w: &RefCell<World>, n: &mut Node<HostEnv>, k: u32, file: &str) {
    let rs = w.borrow_mut().tick();
    let r = whole_read(n, file, 1 << 17);
    let mut w = w.borrow_mut();
    w.reads += 1;
    let Ok(got) = r else { return };
    w.reads_ok += 1;
    w.check_read(k, file, rs, &got, false);
}

/// The cache slots of every joined node.
/// A node's id, whether its session is active, and its cache slots.
type NodeSlots = (u32, bool, Vec<(PageKey, Slot)>);

fn slots(nodes: &Nodes, dead: &[u32]) -> Vec<NodeSlots> {
    let mut out = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        if dead.contains(&(i as u32 + 1)) {
            // Declared failed and silent: its frames are the directory's
            // again, and it touches nothing until it rejoins.
            continue;
        }
        let Ok(mut n) = n.try_borrow_mut() else {
            continue;
        };
        let Some(st) = n.vfs.data_path().single_copy() else {
            continue;
        };
        let Some(c) = st.coherence() else { continue };
        let mut s: Vec<(PageKey, Slot)> = c.cache.slots().map(|(k, s)| (*k, s.clone())).collect();
        // A frame set aside for a page (not reused until the directory
        // lets go of it) is still held for that page.
        s.extend(
            c.cache
                .orphans()
                .map(|(gfn, k)| (k, Slot::Reclaiming { gfn })),
        );
        out.push((i as u32 + 1, c.active(), s));
    }
    out
}

/// The single-copy invariants over the directory and the node caches.
fn check_single_copy(rig: &Rig, nodes: &Nodes, dead: &[u32]) -> Result<(), String> {
    rig.sh.dir.borrow().pages().check()?;
    let all = slots(nodes, dead);
    // Readable copies in a node's own frame (`Reclaiming` is not readable:
    // being torn down).
    let mut local: BTreeMap<PageKey, (u32, u64)> = BTreeMap::new();
    // A node may hold two frames for one page: its copy, and a frame set
    // aside for it (an orphan of a cancelled miss).
    let mut held: BTreeSet<(PageKey, u32, u64)> = BTreeSet::new();
    for (id, active, s) in &all {
        if !active {
            continue;
        }
        for (key, slot) in s {
            if let Slot::Local { gfn, .. } | Slot::Reclaiming { gfn } = slot {
                held.insert((*key, *id, *gfn));
            }
            if let Slot::Local { gfn, .. } = slot {
                if let Some((other, g2)) = local.insert(*key, (*id, *gfn)) {
                    let d = rig.sh.dir.borrow();
                    let h = fabric::layout::Header::new(&*rig.sh.mem, rig.sh.layout);
                    return Err(format!(
                        "{key:?} in the frames of nodes {other} ({g2}) and {id} ({gfn}); directory: {:?} / {:?}, states {:?} {:?}, slots {:?}",
                        d.pages().state_of(key, other as u8),
                        d.pages().state_of(key, *id as u8),
                        h.node_state(other),
                        h.node_state(*id),
                        all.iter().map(|(i, a, s)| (i, a, s.iter().find(|(k, _)| k == key).map(|x| x.1.clone()))).collect::<Vec<_>>()
                    ));
                }
            }
        }
    }
    for (id, active, s) in &all {
        if !active {
            continue;
        }
        for (key, slot) in s {
            let Slot::Remote { owner, gfn, .. } = slot else {
                continue;
            };
            let owner = u32::from(*owner);
            let owner_active = all.iter().any(|(o, a, _)| *o == owner && *a);
            if owner_active && !held.contains(&(*key, owner, *gfn)) {
                return Err(format!(
                    "node {id} maps {key:?} at frame {gfn} of node {owner}, which no longer holds it there ({:?})",
                    local.get(key)
                ));
            }
        }
    }
    Ok(())
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
    let nodes: Nodes = (1..=nnodes).map(|k| rig.node_rc(k)).collect();
    // Seeds with bit 10 set promote hot pages: replicas of peers' pages
    // (single-copy modes), read often, revoked by stores and reclaim.
    if seed & 0x400 != 0 && matches!(mode, Mode::Strong | Mode::Relaxed) {
        for n in &nodes {
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
    let files = files(nnodes);
    let world = Rc::new(RefCell::new(World {
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
    }));
    world.borrow_mut().mode = Some(mode);
    let appends = appends_on();
    // Inside other operations' wait steps: whole reads and writes.
    let hook_pct = 2 + world.borrow_mut().rng.below(10);
    {
        let (w, nodes, files) = (world.clone(), nodes.clone(), files.clone());
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
    let mut faults = 0;
    let mut failures = 0;
    for step in 0..steps + extra {
        let phase2 = step >= steps;
        let (k, f, action, arg, x) = {
            let mut w = world.borrow_mut();
            w.phase2 = phase2;
            let k = 1 + w.rng.below(nnodes as u64) as u32;
            let f = w.rng.below(files.len() as u64) as usize;
            let (action, arg) = (w.rng.below(100), w.rng.below(8));
            // Drawn only in the second phase: the first replays as before.
            let x = if phase2 { w.rng.below(100) } else { 100 };
            (k, f, action, arg, x)
        };
        // Failed nodes whose time has come are back: they find themselves
        // declared failed at their first membership check and rejoin.
        let back: Vec<u32> = {
            let w = world.borrow();
            w.dead
                .iter()
                .filter(|(_, &t)| t <= step)
                .map(|(&k, _)| k)
                .collect()
        };
        for d in back {
            revive(&rig, &nodes, &world, d);
        }
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
        // Idle loops: membership checks now and then.
        for (i, n) in nodes.iter().enumerate() {
            let dead = world.borrow().dead.contains_key(&(i as u32 + 1));
            if world.borrow_mut().rng.pct(30) && !dead {
                n.borrow_mut().check();
            }
        }
        if let Some(b) = world.borrow_mut().bad.take() {
            return Err(format!("step {step}: {b}"));
        }
        let dead: Vec<u32> = world.borrow().dead.keys().copied().collect();
        check_single_copy(&rig, &nodes, &dead).map_err(|e| format!("step {step}: {e}"))?;
    }
    finish(
        seed,
        &rig,
        &nodes,
        &world,
        &files,
        steps + extra,
        (faults, failures),
    )
}

/// What one step's action works on.
type Ctx<'a> = (
    &'a Rig,
    &'a Nodes,
    &'a Rc<RefCell<World>>,
    &'a [(String, usize, Option<u32>)],
);

/// One step's action of the first phase's mix: node `k` on file `f`.
fn step_action(
    (rig, nodes, world, files): Ctx<'_>,
    (step, k, f, action, arg): (u64, u32, usize, u64, u64),
    faults: &mut u64,
    failures: &mut u64,
) {
    let nnodes = nodes.len() as u32;
    let mode = world.borrow().mode.expect("set at the start");
    let doorbells = rig.sh.doorbells.get();
    let (name, len, writer) = &files[f];
    let n = &nodes[k as usize - 1];
    {
        match action {
            0..=34 if writer.is_none_or(|o| o == k) => {
                do_write(world, &mut n.borrow_mut(), k, name, *len)
            }
            35..=39 if *writer == Some(k) => {
                let o = (k % nnodes) + 1;
                let other = &nodes[o as usize - 1];
                recreate(world, n, (other, o), k, name, *len);
            }
            0..=79 => do_read(world, &mut n.borrow_mut(), k, name),
            80..=84 => {
                if arg == 7 {
                    do_sync(world, &mut n.borrow_mut(), k);
                } else {
                    do_fsync(world, &mut n.borrow_mut(), k, name);
                }
            }
            85..=87 if doorbells && arg < 6 => {
                // Idle at the prompt: sleeps on the doorbell (quietly if
                // nothing is in flight) while the hook runs other nodes.
                let mut n = n.borrow_mut();
                do_sync(world, &mut n, k); // a node that wrote is not quiet
                world.borrow_mut().sleeper = true;
                for _ in 0..=arg {
                    let now = rig.sh.now();
                    n.idle_sleep(now + 1_000_000, &mut || false);
                }
                world.borrow_mut().sleeper = false;
            }
            85..=87 => {
                let _ = n.borrow_mut().cache_drop();
            }
            88..=90 => {
                *faults += 1;
                rig.corrupt_notify_ring(k, 0xdead_0000 | arg as u32);
            }
            91..=94 => {
                *faults += 1;
                rig.sh.fail_read_in.set(Some(arg));
            }
            95..=97 => {
                // Frozen longer than the RPC timeout for one operation.
                *faults += 1;
                rig.set_dir_up(false);
                // `net` mode's calls wait for a silent server in fine
                // steps, each of which would start another node's call.
                let hook = (mode == Mode::Net).then(|| rig.sh.hook.borrow_mut().take());
                do_read(world, &mut n.borrow_mut(), k, name);
                if let Some(h) = hook {
                    *rig.sh.hook.borrow_mut() = h;
                }
                rig.set_dir_up(true);
            }
            98..=99 if arg >= 3 && writer.is_none_or(|o| o == k) => {
                do_write_in_place(world, &mut n.borrow_mut(), k, name, *len)
            }
            _ if arg == 0 => {
                // Directory crash: what was not fsync'd or synced may be
                // lost; what was must be on the disk. The cluster comes
                // back over the same disk (every node rejoins) and the run
                // goes on.
                *faults += 1;
                rig.restart_dir();
                world.borrow_mut().may_lose(!STRICT_DIR_CRASH, |_| true);
                let hook = rig.sh.hook.borrow_mut().take();
                let dead: Vec<u32> = world.borrow().dead.keys().copied().collect();
                for d in dead {
                    revive(rig, nodes, world, d);
                }
                rejoin_all(rig, nodes);
                *rig.sh.hook.borrow_mut() = hook;
            }
            _ if arg <= 2 && world.borrow().dead.len() + 1 < nodes.len() => {
                // Node failure: `k` falls silent (between its operations)
                // for longer than the heartbeat timeout, while the others
                // go on; it comes back `arg * 5` steps later.
                *faults += 1;
                *failures += 1;
                fail_node(rig, world, k, step + 5 * arg);
            }
            _ => {}
        }
    }
}

/// Node `k` falls silent until the directory declares it failed. It may
/// lose no completed write, in any mode: in strong mode its dirty pages
/// live in frames of the shared region, which survived it, and the
/// directory writes them back when it fails the node; in the other modes
/// a completed write (its close) wrote its pages back. Only its failed
/// writes may be lost, and they stay open (concurrent with every read)
/// until it writes back or rejoins.
fn fail_node(rig: &Rig, world: &RefCell<World>, k: u32, until: u64) {
    rig.freeze(k);
    world.borrow_mut().dead.insert(k, until);
    // Past the heartbeat timeout (3 s) in long idle steps (the others'
    // idle loops run; their operations wait for the silent node in steps
    // of microseconds, so they run once it is declared failed).
    let hook = rig.sh.hook.borrow_mut().take();
    let t_end = rig.sh.now() + 3_500_000_000;
    while rig.sh.now() < t_end {
        rig.sh.step(0, 50_000_000);
    }
    *rig.sh.hook.borrow_mut() = hook;
}

/// Failed node `k` runs again: its membership check finds it declared
/// failed and rejoins (writing back what it kept dirty first).
fn revive(rig: &Rig, nodes: &Nodes, world: &RefCell<World>, k: u32) {
    rig.thaw(k);
    world.borrow_mut().dead.remove(&k);
    nodes[k as usize - 1].borrow_mut().check();
    // Its dirty pages, written back or dropped: either way, over.
    let t = world.borrow_mut().tick();
    world.borrow_mut().wrote_back(k, None, t);
}

/// Let every node rejoin (membership checks over idle time).
fn rejoin_all(rig: &Rig, nodes: &Nodes) {
    for _ in 0..3 {
        for n in nodes {
            n.borrow_mut().check();
        }
        rig.idle(100);
    }
}

/// Faults off: every node writes back what it kept dirty, reads every
/// file, and they agree.
fn finish(
    seed: u64,
    rig: &Rig,
    nodes: &Nodes,
    world: &Rc<RefCell<World>>,
    files: &[(String, usize, Option<u32>)],
    steps: u64,
    (faults, failures): (u64, u64),
) -> Result<RunStats, String> {
    rig.set_hook(None);
    rig.sh.fail_read_in.set(None);
    let dead: Vec<u32> = world.borrow().dead.keys().copied().collect();
    for d in dead {
        revive(rig, nodes, world, d);
    }
    rejoin_all(rig, nodes);
    // What a failed sync or a reclaim's failed write-back left dirty
    // (a failed close or fsync dropped its file's) goes back now.
    for n in nodes {
        let _ = n.borrow_mut().sync();
    }
    let names = files
        .iter()
        .map(|(name, ..)| name.as_str())
        .chain([APPEND_FILE]);
    for name in names {
        let mut first: Option<Vec<u8>> = None;
        for (i, n) in nodes.iter().enumerate() {
            // Never written (or its creation lost in a crash): empty.
            let read = whole_read(&mut n.borrow_mut(), name, 1 << 17);
            let got = match read {
                Err(fabric::proto::Errno::NotFound) => Ok(Vec::new()),
                r => r,
            }
            .map_err(|e| {
                let dir = rig.sh.dir.borrow();
                let entries: Vec<String> = dir
                    .pages()
                    .entries()
                    .map(|(k, e)| format!("{k:?}: {e:?}"))
                    .collect();
                let slots: Vec<String> = n
                    .borrow_mut()
                    .vfs
                    .data_path()
                    .single_copy()
                    .and_then(|st| st.coherence().map(|c| {
                        c.cache.slots().map(|(k, s)| format!("{k:?}: {s:?}")).collect()
                    }))
                    .unwrap_or_default();
                let members: Vec<(u32, (usize, usize), [u32; 4])> = (1..=nodes.len() as u32)
                    .filter(|k| dir.is_member(*k))
                    .map(|k| {
                        let ch = rig.sh.layout.channel(k);
                        let m = &*rig.sh.mem;
                        let idx = |off: usize| fabric::shm::SharedMem::load_u32(m, off);
                        (
                            k,
                            dir.backlogs(k),
                            [
                                idx(ch.request.off),
                                idx(ch.request.off + 64),
                                idx(ch.response.off),
                                idx(ch.response.off + 64),
                            ],
                        )
                    })
                    .collect();
                let h = fabric::layout::Header::new(&*rig.sh.mem, rig.sh.layout);
                let states: Vec<(u32, Option<fabric::layout::NodeState>, u64)> = (1..=nodes.len()
                    as u32)
                    .map(|k| (k, h.node_state(k), h.node_epoch(k)))
                    .collect();
                format!(
                    "seed {seed:#x}: at the end node {} cannot read {name}: {e}\nmembers (backlogs): {members:?}, directory up: {}\nnode records (state, epoch): {states:?}\ndirectory: {entries:#?}\nnode slots: {slots:#?}",
                    i + 1,
                    rig.dir_is_up()
                )
            })?;
            let mut w = world.borrow_mut();
            let rs = w.tick();
            w.check_read(i as u32 + 1, name, rs, &got, true);
            if let Some(b) = w.bad.take() {
                return Err(b);
            }
            match &first {
                None => first = Some(got),
                Some(f) if *f != got => {
                    return Err(format!(
                        "at the end nodes 1 and {} disagree on {name}{}{}",
                        i + 1,
                        w.append_lines(f),
                        w.append_lines(&got)
                    ));
                }
                _ => {}
            }
        }
    }
    check_single_copy(rig, nodes, &[])?;
    let w = world.borrow();
    Ok(RunStats {
        steps,
        reads: w.reads,
        reads_ok: w.reads_ok,
        writes: w.writes,
        hooked: w.hooked,
        faults,
        failures,
        quiet_taken: rig.sh.dir.borrow().quiet_stats().taken,
        appends: w.appends,
        appends_ok: w.appends_ok,
        passes: rig.sh.passes.get(),
        digest: hist_digest(&w.h),
    })
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

/// Every mode, or those `ONECOPY_SIM_MODE` names (strong, relaxed,
/// private, net; several separated by commas).
fn modes() -> Vec<Mode> {
    let all = vec![Mode::Strong, Mode::Relaxed, Mode::Private, Mode::Net];
    match std::env::var("ONECOPY_SIM_MODE") {
        Ok(m) => all
            .into_iter()
            .filter(|x| {
                m.split(',')
                    .any(|n| mode_name(*x).eq_ignore_ascii_case(n.trim()))
            })
            .collect(),
        Err(_) => all,
    }
}

fn mode_name(m: Mode) -> String {
    format!("{m:?}").to_lowercase()
}

/// Run `seeds` in `mode`, `steps` each; the failures, each with its
/// replay command.
fn sweep(mode: Mode, seeds: &[u64], steps: u64) -> (RunStats, Vec<String>) {
    let mut total = RunStats::default();
    let mut failed = Vec::new();
    for &seed in seeds {
        match run(seed, steps, mode) {
            Ok(s) => {
                total.steps += s.steps;
                total.reads += s.reads;
                total.reads_ok += s.reads_ok;
                total.writes += s.writes;
                total.hooked += s.hooked;
                total.faults += s.faults;
                total.failures += s.failures;
                total.quiet_taken += s.quiet_taken;
                total.appends += s.appends;
                total.appends_ok += s.appends_ok;
                total.passes += s.passes;
                total.digest = fold(total.digest, &[s.digest]);
                if std::env::var_os("ONECOPY_SIM_PERSEED").is_some() {
                    eprintln!("seed {seed:#x}: {s:?}");
                }
            }
            Err(e) => failed.push(format!(
                "seed {seed:#x}: {e}\nreplay: ONECOPY_SIM_MODE={} ONECOPY_SIM_SEED={seed:#x} cargo test -p nodepath sim_drives",
                mode_name(mode)
            )),
        }
    }
    (total, failed)
}

/// The sweep's `i`-th seed: its bits 8 (doorbells, lazy invalidation),
/// 9 (small private caches) and 10 (hot-page replicas) vary.
fn sweep_seed(i: u64) -> u64 {
    0x5eed_0000_0000 | (fabric::rng::mix64(i) & 0xFFFF_FFFF)
}

/// `ONECOPY_SIM_SEED` in every mode (or `ONECOPY_SIM_MODE`), else the
/// regression seeds (every mode) and sweep seeds (`ONECOPY_SIM_SEEDS`,
/// else 16 strong and 24 relaxed; private and net when
/// `ONECOPY_SIM_MODE` names them), 120 steps each. A debug build is too
/// slow for hundreds (20 seeds: about 2 minutes in private or net mode, 4
/// in strong, on a loaded 2-core machine), so `tests/run.sh` (`--unit`
/// and the full run) also runs [`sim_sweep`] in release over 300 seeds
/// per mode.
#[test]
fn sim_drives_the_real_data_path() {
    super::init_log();
    let steps = env_u64("ONECOPY_SIM_STEPS").unwrap_or(120);
    let t0 = std::time::Instant::now();
    let mut failed = Vec::new();
    if let Some(s) = env_u64("ONECOPY_SIM_SEED") {
        for m in modes() {
            failed.extend(sweep(m, &[s], steps).1);
        }
    } else {
        // 0x5eed001d, 0x5eed0049 and 0x5eed004a ended in liveness defects
        // fixed since (see `sim_sweep`): kept as regressions.
        let regress = [
            1, 2, 3, 4, 5, 6, 0x1d, 0x49, 0x4a, 0x101, 0x102, 0x103, 0x104,
        ]
        .map(|i| 0x5eed_0000 + i);
        let (total, f) = sweep(Mode::Strong, &regress, steps);
        failed.extend(f);
        // Ended in a `net` node's I/O error on a missing file (the rig's
        // transport handed a refusal on as an answer): kept as regressions.
        failed.extend(sweep(Mode::Net, &[0x5eed_d721_3bbc, 0x5eed_4af1_28d0], steps).1);
        // A strong node failure loses no completed write: these read zeros
        // nobody wrote when the directory dropped a failed owner's frames
        // instead of writing them back.
        if modes().contains(&Mode::Strong) {
            let strong = [0x5eed_f53a_bb6d, 0x5eed_3473_faff, 0x5eed_c160_6730];
            failed.extend(sweep(Mode::Strong, &strong, steps).1);
        }
        assert!(
            total.reads_ok > 0 && total.writes > 0,
            "the simulation did work"
        );
        // Relaxed mode's strict findings fixed since (see `sim_sweep`).
        if modes().contains(&Mode::Relaxed) {
            let relaxed = [
                0x5eed_3a2b_148a,
                0x5eed_ef76_0e18,
                0x5eed_a932_0579,
                0x5eed_f6aa_8871,
                0x5eed_5264_0af2,
                0x5eed_f2a6_f456,
                0x5eed_3473_faff,
                0x5eed_9c88_cb8f,
                0x5eed_86ea_dd13,
                0x5eed_1fdb_3325,
                0x5eed_f4c4_901f,
                0x5eed_bef1_af4e,
                0x5eed_492a_68b6,
                0x5eed_2c45_c7dc,
                0x5eed_c801_0cd8,
                0x5eed_ea30_b4db,
                0x5eed_4d19_7a96,
                0x5eed_4a51_3957,
            ];
            failed.extend(sweep(Mode::Relaxed, &relaxed, steps).1);
        }
        // Appends read zeros under a size other nodes' appends grew, or
        // another node's line as the failed one, while a failed close kept
        // its node's unwritten pages (see `sim_sweep`).
        let appends = [
            (Mode::Relaxed, &[0x5eed_c160_6730, 0x5eed_a864_283c][..]),
            (
                Mode::Private,
                &[
                    0x5eed_bebb_45dc,
                    0x5eed_47dd_02c6,
                    0x5eed_3f65_c50a,
                    0x5eed_718a_1d5d,
                ][..],
            ),
            (Mode::Net, &[0x5eed_da84_3f55, 0x5eed_e41b_3ae0][..]),
        ];
        for (m, seeds) in appends {
            if modes().contains(&m) {
                failed.extend(sweep(m, seeds, steps).1);
            }
        }
        for m in modes() {
            // Per mode, as many seeds as fit in about 20 s of a debug
            // build on a busy machine. Private and net mode run only when
            // `ONECOPY_SIM_MODE` names them, or in the long sweep, while
            // their strict findings are open (see `sim_sweep`); relaxed
            // runs seeds its open findings (`sim_sweep`) are not among.
            let chosen = std::env::var_os("ONECOPY_SIM_MODE").is_some();
            let n = match m {
                Mode::Strong => 16,
                Mode::Relaxed => 24,
                _ if !chosen => continue,
                Mode::Private => 200,
                _ => 48,
            };
            let n = env_u64("ONECOPY_SIM_SEEDS").unwrap_or(n);
            let seeds: Vec<u64> = (1..=n).map(sweep_seed).collect();
            let (total, f) = sweep(m, &seeds, steps);
            eprintln!("sim {}: {total:?}", mode_name(m));
            assert!(
                total.reads_ok > 0 && total.failures > 0,
                "the simulation did work"
            );
            failed.extend(f);
        }
    }
    eprintln!("sim: in {:?}", t0.elapsed());
    assert!(
        failed.is_empty(),
        "{} runs failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

/// Seed 0x5eed0006 at 300 steps, once an open liveness finding; it
/// passes since the schedule gained deferred DROPs and reads without a
/// validation round trip. Kept: a longer run.
#[test]
fn sim_seed_0x5eed0006_long_run() {
    super::init_log();
    if let Err(e) = run(0x5eed_0006, 300, Mode::Strong) {
        panic!("{e}");
    }
}

/// A sweep of seeds `1..=ONECOPY_SIM_SWEEP` (default 200), 120 steps each,
/// and the same numbers with bit 8 set (doorbells and quiet sleeps):
/// every seed must pass. `cargo test --release -p nodepath sim_sweep --
/// --ignored` (a few minutes).
///
/// What sweeps found (none returned a wrong read): first about one seed
/// in ten failed, in two classes: a liveness ending (a node "directory
/// unavailable" at the end) and a safety check stricter than the protocol
/// (a node mapping an orphan frame its owner's timed-out READ filled
/// late). With the recreation step, three liveness defects were found and
/// fixed, each seed now in the default run as a regression:
///
/// * 0x5eed001d: a rejoin the directory admitted only after the node's
///   wait gave up (it waits for other nodes to let go of the joiner's
///   frames) left the node out for good: membership checks only rejoined
///   a node that still had a session, and a read served from cached
///   metadata never asked the directory (also host test
///   `a_rejoin_admitted_after_its_wait_gave_up_is_taken_at_the_next_check`);
/// * 0x5eed0049: an eviction (INV) given up on its timeout and answered
///   late left its page `Reclaiming` for good (the directory had forgotten
///   it, so no DIR_INV would come); the late answer now frees the frame
///   (`ScState::late_answer`);
/// * 0x5eed004a: the link's wait for page answers kept the clock of a wait
///   an earlier exchange had left behind (its caller stopped for another
///   reason), so the next exchange, much later, gave up at its first step
///   ("directory unavailable"); a request sent now starts a new wait
///   (`Link::send`).
///
/// After these, seeds 1..=200 all pass (under the old checker, which took
/// any older version as a legal read).
///
/// The checker is strict now (see [`candidates`] and [`legal`]; a node
/// failure may lose no completed write in any mode, see [`fail_node`])
/// and the sweep runs every mode (`ONECOPY_SIM_MODE` picks one) with node
/// failures and rejoins; `ONECOPY_SIM_FROM` starts the seed range
/// elsewhere. Its first runs (40 seeds per mode, debug) found:
///
/// * relaxed, 0x5eed3a2b148a and 0x5eedef760e18: a read concurrent with
///   another node's truncate-and-rewrite of a multi-page file returned the
///   new size over zeros (a size published before the data under it).
///   Fixed: a write whose pages all end in private copies keeps its size
///   local until they are written back (the seeds fail with that
///   publication put back);
/// * relaxed, 0x5eeda9320579: a read that opened after another node's
///   write of the file closed returned the write before it. Two defects:
///   the size publication above, and a session whose notify ring was
///   found corrupt during the open (invalidations lost) went on serving
///   the read from its cache; it now refuses reads and stores until the
///   membership check rejoins (host test
///   `a_ring_found_corrupt_during_an_open_serves_nothing_stale`);
/// * relaxed, 0x5eedf6aa8871 and 0x5eed52640af2 (and in a 500-seed
///   release sweep 0x5eedf2a6f456, 0x5eed3473faff, 0x5eed9c88cb8f,
///   0x5eed86eadd13 among others): a node mapped a page at a frame its
///   owner no longer held for it, or two pages shared a frame. A relaxed
///   write over a page of the writer's own frame being torn down (a
///   truncate waits for the sharers' acks before the frame may go)
///   replaced it with a private copy and freed the frame at once; the
///   frame is now set aside until the directory lets go of it (host test
///   `a_relaxed_rewrite_keeps_a_frame_being_torn_down_until_the_directory_frees_it`,
///   where the reader got another file's bytes);
/// * relaxed (of sweep seeds 1..=500, 34 failed before these fixes, 9
///   after them): a read returned an older completed write after a newer
///   one completed (0x5eed1fdb3325, 0x5eedf4c4901f, 0x5eedbef1af4e,
///   0x5eed492a68b6, 0x5eed2c45c7dc, 0x5eedc8010cd8, and at the end
///   0x5eedea30b4db), or bytes no write produced (0x5eed4d197a96,
///   0x5eed4a513957: pages of an earlier file that had the recycled inode
///   number, or of older versions, mixed). One defect: a page a truncate
///   or unlink tears down stays readable in its owner's frame until every
///   sharer acked (only then is the owner told), and a write through the
///   file server (a relaxed close writing back its private copies)
///   patched only settled frames, so the owner went on reading the cut
///   bytes after the rewrite completed. Fixed: such a write patches every
///   frame the directory still holds for the page, and in an evicted page
///   a gap between the old end and the write reads as zeros (host tests
///   `tests::evicted`). 0x5eedc8010cd8 then showed a checker
///   defect: a node holding a page in its frame and an orphan frame for
///   the same page counted only one (`check_single_copy`). All nine are
///   in the default run's relaxed list;
/// * net, 0x5eedd7213bbc and 0x5eed4af128d0: at the end a node's read
///   of a file never written (or lost in a directory crash) fails with
///   "I/O error": a defect of the host rig, not of the node: its `net`
///   transport returned a refused call (`NotFound`) as an answer, which
///   the node takes for a malformed one; the kernel's connection returns
///   the error (host test `a_refused_call_is_its_error_in_every_mode`,
///   the seeds in the default run). Private mode's reported endings did
///   not reproduce on this code (seeds 1..=1000 pass).
///
/// * strong, once a node failure may lose no completed write (the
///   directory writes a failed owner's frames back): seeds 1..=300 pass.
///   With that write-back disabled, 17 of seeds 1..=100 read zeros nobody
///   wrote; three of them (0x5eedf53abb6d, 0x5eed3473faff,
///   0x5eedc1606730) are in the default run.
///
/// * appends (the second phase, since the run goes on after a directory
///   crash): strong passed; in relaxed (0x5eedc1606730) a node whose
///   append's write-back failed (an injected disk error) read its own
///   stale private page under the newer size other nodes' appends
///   published, so a line read as zeros; relaxed 0x5eeda864283c and
///   private 0x5eedbebb45dc ended with a node still showing its failed
///   append where another node's completed append landed. Those three no
///   longer reached the defect once the code under them moved; on this
///   code, of seeds 1..=1000, 11 private (0x5eed47dd02c6, 0x5eed3f65c50a:
///   zeros; 0x5eed718a1d5d: a completed append missing) and 9 net
///   (0x5eedda843f55: zeros; 0x5eede41b3ae0: missing) failed, relaxed
///   none. Fixed: a close or fsync whose write-back fails drops the
///   node's unwritten copies or pages and the size they extended the file
///   to (host tests `tests::unwritten`, which fail without it); every
///   mode appends now (`ONECOPY_SIM_APPENDS=0` turns it off), and those
///   seeds are in the default run.
///
/// `tests/run.sh --long` runs 10,000 seeds per mode.
#[test]
#[ignore = "a sweep of many seeds: minutes; run on demand (tests/run.sh --long)"]
fn sim_sweep() {
    super::init_log();
    let n = env_u64("ONECOPY_SIM_SWEEP").unwrap_or(200);
    let steps = env_u64("ONECOPY_SIM_STEPS").unwrap_or(120);
    let from = env_u64("ONECOPY_SIM_FROM").unwrap_or(1);
    let seeds: Vec<u64> = (from..from + n).map(sweep_seed).collect();
    let t0 = std::time::Instant::now();
    let mut failed = Vec::new();
    for m in modes() {
        let (total, f) = sweep(m, &seeds, steps);
        eprintln!(
            "sim_sweep {}: {total:?}, {} failed, {:?}",
            mode_name(m),
            f.len(),
            t0.elapsed()
        );
        failed.extend(f);
    }
    assert!(
        failed.is_empty(),
        "{} runs of {n} seeds x {} modes failed:\n{}",
        failed.len(),
        modes().len(),
        failed.join("\n")
    );
}
