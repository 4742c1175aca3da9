//! A seeded, deterministic simulation of the REAL node data path: 2..=4
//! nodes ([`crate::node::Node`], strong mode) over the host rig (real ring
//! client, real [`dirsvc::server::Directory`], real flatfs on a
//! [`crate::rig::FaultDisk`]), with faults injected between and inside
//! operations.
//!
//! Every step picks an action with the seed's random generator: a
//! whole-file write (truncate + write + close, as the shell's `write`), a
//! whole-file read (one read call with a buffer larger than the file), a
//! recreation (a node removes its file, writes and reads a scratch file
//! that takes the freed inode number, removes it and writes its file
//! anew: a page of a removed file must never show in its successor), an
//! fsync, a `cache drop`, or a fault: a corrupt notify ring (garbage head
//! index), a disk read that fails (I/O error in the middle of a batch of
//! fills), a directory frozen for longer than the RPC timeout (a batch
//! times out), a directory that crashes and restarts over the same disk
//! (nodes rejoin). Membership checks run at random, as the nodes' idle
//! loops do. A step hook runs whole reads and writes of other nodes inside
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
use fabric::proto::PageKey;

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

/// What the simulation shares with its step hook.
struct World {
    rng: Rng,
    /// Every content ever written (or being written) per file.
    hist: BTreeMap<String, Vec<Vec<u8>>>,
    /// Sequence number of the next write.
    seq: u64,
    /// The first invariant broken.
    bad: Option<String>,
    reads: u64,
    reads_ok: u64,
    writes: u64,
    hooked: u64,
    /// A node idles asleep: the hook runs at every step, and sometimes
    /// drops another node's cache (its evictions invalidate the sleeper).
    sleeper: bool,
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

/// Node `k` writes `file` whole (recorded first: readers may see it while
/// it is under way).
fn do_write(w: &RefCell<World>, n: &mut Node<HostEnv>, k: u32, file: &str, len: usize) {
    let data = {
        let mut w = w.borrow_mut();
        w.seq += 1;
        w.writes += 1;
        let d = content(w.seq, k, len);
        w.hist.entry(file.to_string()).or_default().push(d.clone());
        d
    };
    let _ = whole_write(n, file, &data);
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
    other: &RefCell<Node<HostEnv>>,
    k: u32,
    file: &str,
    len: usize,
) {
    let scratch = format!("/x{k}");
    let _ = n.borrow_mut().unlink(file);
    // A different length from `file`'s: a stale page would show.
    do_write(w, &mut n.borrow_mut(), k, &scratch, len / 2 + 1);
    do_read(w, &mut n.borrow_mut(), k, &scratch);
    if let Ok(mut o) = other.try_borrow_mut() {
        do_read(w, &mut o, k, &scratch);
    }
    let _ = n.borrow_mut().unlink(&scratch);
    do_write(w, &mut n.borrow_mut(), k, file, len);
}

/// Node `n` reads `file` whole and checks it against the history.
fn do_read(w: &RefCell<World>, n: &mut Node<HostEnv>, k: u32, file: &str) {
    let r = whole_read(n, file, 1 << 17);
    let mut w = w.borrow_mut();
    w.reads += 1;
    let Ok(got) = r else { return };
    w.reads_ok += 1;
    let known = got.is_empty() || w.hist.get(file).is_some_and(|h| h.contains(&got));
    if !known && w.bad.is_none() {
        let zeros = got.iter().filter(|&&b| b == 0).count();
        w.bad = Some(format!(
            "node {k} read {file}: {} bytes ({zeros} zero) that no write produced",
            got.len()
        ));
    }
}

/// The cache slots of every joined node.
/// A node's id, whether its session is active, and its cache slots.
type NodeSlots = (u32, bool, Vec<(PageKey, Slot)>);

fn slots(nodes: &Nodes) -> Vec<NodeSlots> {
    let mut out = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        let Ok(mut n) = n.try_borrow_mut() else {
            continue;
        };
        let Some(st) = n.vfs.data_path().single_copy() else {
            continue;
        };
        let Some(c) = st.coherence() else { continue };
        let s = c.cache.slots().map(|(k, s)| (*k, s.clone())).collect();
        out.push((i as u32 + 1, c.active(), s));
    }
    out
}

/// The single-copy invariants over the directory and the node caches.
fn check_single_copy(rig: &Rig, nodes: &Nodes) -> Result<(), String> {
    rig.sh.dir.borrow().pages().check()?;
    let all = slots(nodes);
    // Readable copies in a node's own frame (`Reclaiming` is not readable:
    // being torn down).
    let mut local: BTreeMap<PageKey, (u32, u64)> = BTreeMap::new();
    let mut held: BTreeMap<(PageKey, u32), u64> = BTreeMap::new();
    for (id, active, s) in &all {
        if !active {
            continue;
        }
        for (key, slot) in s {
            if let Slot::Local { gfn, .. } | Slot::Reclaiming { gfn } = slot {
                held.insert((*key, *id), *gfn);
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
            if owner_active && held.get(&(*key, owner)) != Some(gfn) {
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
    /// DIR_INVs the directory took from quietly sleeping nodes.
    pub quiet_taken: u64,
}

/// Run `steps` steps of seed `seed`; `Err` names the broken invariant.
pub(super) fn run(seed: u64, steps: u64) -> Result<RunStats, String> {
    let mut rng = Rng::new(seed);
    let nnodes = 2 + rng.below(3) as u32;
    let mut cfg = RigConfig::new(nnodes, Mode::Strong);
    cfg.rpc_timeout_ns = 20_000_000;
    if rng.pct(50) {
        cfg.region = (nnodes as usize) << 20; // a small pool: reclaim all the time
    }
    let rig = Rig::new(cfg);
    // Seeds with bit 8 set run with doorbells: waits sleep (quietly when
    // nothing is in flight), so the directory takes DIR_INVs of sleeping
    // sharers as acknowledged (`lazy_inv`). Decided without the generator,
    // so the older seeds replay as before.
    let doorbells = seed & 0x100 != 0;
    rig.sh.doorbells.set(doorbells);
    let nodes: Nodes = (1..=nnodes).map(|k| rig.node_rc(k)).collect();
    let files = files(nnodes);
    let world = Rc::new(RefCell::new(World {
        rng,
        hist: BTreeMap::new(),
        seq: 0,
        bad: None,
        reads: 0,
        reads_ok: 0,
        writes: 0,
        hooked: 0,
        sleeper: false,
    }));
    // Inside other operations' wait steps: whole reads and writes.
    let hook_pct = 2 + world.borrow_mut().rng.below(10);
    {
        let (w, nodes, files) = (world.clone(), nodes.clone(), files.clone());
        rig.set_hook(Some(Box::new(move |_me| {
            let (go, k, f, write, drop) = {
                let mut w = w.borrow_mut();
                let go = w.sleeper || w.rng.pct(hook_pct);
                let k = 1 + w.rng.below(nodes.len() as u64) as u32;
                let f = w.rng.below(files.len() as u64) as usize;
                let drop = w.sleeper && w.rng.pct(30);
                (go, k, f, w.rng.pct(40), drop)
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
            if write && writer.is_none_or(|o| o == k) {
                do_write(&w, &mut n, k, name, *len);
            } else {
                do_read(&w, &mut n, k, name);
            }
        })));
    }
    let mut faults = 0;
    for step in 0..steps {
        let (k, f, action, arg) = {
            let mut w = world.borrow_mut();
            let k = 1 + w.rng.below(nnodes as u64) as u32;
            let f = w.rng.below(files.len() as u64) as usize;
            (k, f, w.rng.below(100), w.rng.below(8))
        };
        let (name, len, writer) = &files[f];
        let n = &nodes[k as usize - 1];
        if trace() {
            eprintln!("step {step}: node {k} action {action} arg {arg} file {name}");
        }
        match action {
            0..=34 if writer.is_none_or(|o| o == k) => {
                do_write(&world, &mut n.borrow_mut(), k, name, *len)
            }
            35..=39 if *writer == Some(k) => {
                let other = &nodes[(k as usize) % nodes.len()];
                recreate(&world, n, other, k, name, *len);
            }
            0..=79 => do_read(&world, &mut n.borrow_mut(), k, name),
            80..=84 => {
                let mut n = n.borrow_mut();
                if let Ok(fd) = n.open(name, userland::os::OpenFlags::default()) {
                    let _ = n.fsync(fd);
                    let _ = n.close(fd);
                }
            }
            85..=87 if doorbells && arg < 6 => {
                // Idle at the prompt: sleeps on the doorbell (quietly if
                // nothing is in flight) while the hook runs other nodes.
                let mut n = n.borrow_mut();
                let _ = n.sync(); // a node that wrote is not quiet
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
                faults += 1;
                rig.corrupt_notify_ring(k, 0xdead_0000 | arg as u32);
            }
            91..=94 => {
                faults += 1;
                rig.sh.fail_read_in.set(Some(arg));
            }
            95..=97 => {
                // Frozen longer than the RPC timeout for one operation.
                faults += 1;
                rig.set_dir_up(false);
                do_read(&world, &mut n.borrow_mut(), k, name);
                rig.set_dir_up(true);
            }
            _ => {
                if arg == 0 {
                    // Crash: what was not written back is lost, so any
                    // content the disk holds now is accepted once.
                    faults += 1;
                    rig.restart_dir();
                    rig.set_hook(None);
                    rejoin_all(&rig, &nodes);
                    let mut w = world.borrow_mut();
                    for (name, ..) in &files {
                        w.hist.remove(name.as_str());
                    }
                    drop(w);
                    let mut n1 = nodes[0].borrow_mut();
                    for (name, ..) in &files {
                        if let Ok(got) = whole_read(&mut n1, name, 1 << 17) {
                            world
                                .borrow_mut()
                                .hist
                                .entry(name.clone())
                                .or_default()
                                .push(got);
                        }
                    }
                    drop(n1);
                    let _ = step;
                    return finish(seed, &rig, &nodes, &world, &files, steps, faults);
                }
            }
        }
        // Idle loops: membership checks now and then.
        for n in &nodes {
            if world.borrow_mut().rng.pct(30) {
                n.borrow_mut().check();
            }
        }
        if let Some(b) = world.borrow_mut().bad.take() {
            return Err(format!("step {step}: {b}"));
        }
        check_single_copy(&rig, &nodes).map_err(|e| format!("step {step}: {e}"))?;
    }
    finish(seed, &rig, &nodes, &world, &files, steps, faults)
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

/// Faults off: every node reads every file, and they agree.
fn finish(
    seed: u64,
    rig: &Rig,
    nodes: &Nodes,
    world: &Rc<RefCell<World>>,
    files: &[(String, usize, Option<u32>)],
    steps: u64,
    faults: u64,
) -> Result<RunStats, String> {
    rig.set_hook(None);
    rig.sh.fail_read_in.set(None);
    rejoin_all(rig, nodes);
    for (name, ..) in files {
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
            let w = world.borrow();
            if !got.is_empty() && !w.hist.get(name).is_some_and(|h| h.contains(&got)) {
                return Err(format!(
                    "at the end node {} read {name} that no write produced",
                    i + 1
                ));
            }
            match &first {
                None => first = Some(got),
                Some(f) if *f != got => {
                    return Err(format!(
                        "at the end nodes 1 and {} disagree on {name}",
                        i + 1
                    ))
                }
                _ => {}
            }
        }
    }
    check_single_copy(rig, nodes)?;
    let w = world.borrow();
    Ok(RunStats {
        steps,
        reads: w.reads,
        reads_ok: w.reads_ok,
        writes: w.writes,
        hooked: w.hooked,
        faults,
        quiet_taken: rig.sh.dir.borrow().quiet_stats().taken,
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

/// The default run: a few seeds (or `ONECOPY_SIM_SEED`), each a few
/// hundred steps.
#[test]
fn sim_drives_the_real_data_path() {
    super::init_log();
    let steps = env_u64("ONECOPY_SIM_STEPS").unwrap_or(120);
    let seeds: Vec<u64> = match env_u64("ONECOPY_SIM_SEED") {
        Some(s) => vec![s],
        // 0x5eed001d, 0x5eed0049 and 0x5eed004a ended in liveness defects
        // fixed since (see `sim_sweep`): kept as regressions.
        None => [
            1, 2, 3, 4, 5, 6, 0x1d, 0x49, 0x4a, 0x101, 0x102, 0x103, 0x104,
        ]
        .map(|i| 0x5eed_0000 + i)
        .to_vec(),
    };
    let t0 = std::time::Instant::now();
    let mut total = RunStats::default();
    for seed in seeds {
        match run(seed, steps) {
            Ok(s) => {
                total.steps += s.steps;
                total.reads += s.reads;
                total.reads_ok += s.reads_ok;
                total.writes += s.writes;
                total.hooked += s.hooked;
                total.faults += s.faults;
                total.quiet_taken += s.quiet_taken;
            }
            Err(e) => panic!(
                "simulation failed, seed {seed:#x}: {e}\nreplay: ONECOPY_SIM_SEED={seed:#x} cargo test -p nodepath sim"
            ),
        }
    }
    eprintln!("sim: {total:?} in {:?}", t0.elapsed());
    assert!(
        total.reads_ok > 0 && total.writes > 0,
        "the simulation did work"
    );
}

/// Seed 0x5eed0006 at 300 steps, once an open liveness finding; it
/// passes since the schedule gained deferred DROPs and reads without a
/// validation round trip. Kept: a longer run.
#[test]
fn sim_seed_0x5eed0006_long_run() {
    super::init_log();
    if let Err(e) = run(0x5eed_0006, 300) {
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
/// After these, seeds 1..=200 all pass.
#[test]
#[ignore = "a sweep of many seeds: minutes; run on demand"]
fn sim_sweep() {
    super::init_log();
    let n = env_u64("ONECOPY_SIM_SWEEP").unwrap_or(200);
    let failed: Vec<String> = (1..=n)
        .flat_map(|i| [0x5eed_0000 + i, 0x5eed_0100 + i])
        .filter_map(|seed| run(seed, 120).err().map(|e| format!("{seed:#x}: {e}")))
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {n} seeds failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}
