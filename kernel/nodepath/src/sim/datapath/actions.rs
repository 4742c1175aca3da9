//! The simulation's operations (whole writes and reads, appends,
//! recreations, fsync, sync), recorded in the history as they start and
//! end, and the first phase's mix of them with faults, node failures and
//! directory crashes.

use std::cell::RefCell;
use std::rc::Rc;

use fabric::config::Mode;

use super::super::history::{append_line, APPEND_FILE, LINE, STRICT_DIR_CRASH};
use super::super::regress::{whole_read, whole_write};
use super::{content, trace, Nodes, World};
use crate::node::Node;
use crate::rig::{HostEnv, Rig};

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
pub(super) fn do_write(w: &RefCell<World>, n: &mut Node<HostEnv>, k: u32, file: &str, len: usize) {
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

/// [`do_write_in_place`] with the directory frozen for its close, longer
/// than the RPC timeout: the write-back (or the size) goes unanswered and
/// lands when the directory thaws, or never. The node must not send it
/// again over what others write after it.
fn do_write_in_place_unanswered(
    w: &RefCell<World>,
    rig: &Rig,
    n: &mut Node<HostEnv>,
    k: u32,
    file: &str,
    len: usize,
) {
    let Ok(fd) = n.open(file, osapi::io::OpenFlags::default()) else {
        return;
    };
    let (data, i) = begin_whole_write(w, k, file, len);
    let r = n.write(fd, &data);
    rig.set_dir_up(false);
    // `net` mode's calls wait for a silent server in fine steps, each of
    // which would start another node's call.
    let net = w.borrow().mode == Some(Mode::Net);
    let hook = net.then(|| rig.sh.hook.borrow_mut().take());
    let c = n.close(fd);
    if let Some(h) = hook {
        *rig.sh.hook.borrow_mut() = h;
    }
    rig.set_dir_up(true);
    let ok = r == Ok(data.len()) && c.is_ok();
    w.borrow_mut().end_write(file, i, ok);
}

/// Node `k` appends one line to [`APPEND_FILE`] (`O_APPEND`, created if
/// missing): open, one write, close.
pub(super) fn do_append(w: &RefCell<World>, n: &mut Node<HostEnv>, k: u32) {
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
pub(super) fn do_read(w: &RefCell<World>, n: &mut Node<HostEnv>, k: u32, file: &str) {
    let rs = w.borrow_mut().tick();
    let r = whole_read(n, file, 1 << 17);
    let mut w = w.borrow_mut();
    w.reads += 1;
    let Ok(got) = r else { return };
    w.reads_ok += 1;
    w.check_read(k, file, rs, &got, false);
}

/// What one step's action works on.
pub(super) type Ctx<'a> = (
    &'a Rig,
    &'a Nodes,
    &'a Rc<RefCell<World>>,
    &'a [(String, usize, Option<u32>)],
);

/// One step's action of the first phase's mix: node `k` on file `f`.
pub(super) fn step_action(
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
            95..=97 if arg >= 6 && writer.is_none_or(|o| o == k) => {
                *faults += 1;
                do_write_in_place_unanswered(world, rig, &mut n.borrow_mut(), k, name, *len);
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
                let d = rig.sh.dir.borrow().deleg_stats();
                let mut w = world.borrow_mut();
                w.deleg = (w.deleg.0 + d.granted, w.deleg.1 + d.recalled);
                drop(w);
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
pub(super) fn fail_node(rig: &Rig, world: &RefCell<World>, k: u32, until: u64) {
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
pub(super) fn revive(rig: &Rig, nodes: &Nodes, world: &RefCell<World>, k: u32) {
    rig.thaw(k);
    world.borrow_mut().dead.remove(&k);
    nodes[k as usize - 1].borrow_mut().check();
    // Its dirty pages, written back or dropped: either way, over.
    let t = world.borrow_mut().tick();
    world.borrow_mut().wrote_back(k, None, t);
}

/// Let every node rejoin (membership checks over idle time).
pub(super) fn rejoin_all(rig: &Rig, nodes: &Nodes) {
    for _ in 0..3 {
        for n in nodes {
            n.borrow_mut().check();
        }
        rig.idle(100);
    }
}
