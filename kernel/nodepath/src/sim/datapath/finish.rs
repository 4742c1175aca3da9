//! The end of a run: faults off, every node back and written back, every
//! node reads every file and they agree.

use std::cell::RefCell;
use std::rc::Rc;

use super::super::history::{hist_digest, APPEND_FILE};
use super::super::regress::whole_read;
use super::actions::{rejoin_all, revive};
use super::check::check_single_copy;
use super::{Nodes, RunStats, World};
use crate::node::Node;
use crate::rig::{HostEnv, Rig};

/// Faults off: every node writes back what it kept dirty, reads every
/// file, and they agree.
pub(super) fn finish(
    seed: u64,
    rig: &Rig,
    nodes: &Nodes,
    world: &Rc<RefCell<World>>,
    files: &[(String, usize, Option<u32>)],
    steps: u64,
    (faults, failures): (u64, u64),
) -> Result<RunStats, String> {
    settle(rig, nodes, world);
    let names = files
        .iter()
        .map(|(name, ..)| name.as_str())
        .chain([APPEND_FILE]);
    for name in names {
        every_node_reads_alike(seed, rig, nodes, world, name)?;
    }
    check_single_copy(rig, nodes, &[])?;
    let w = world.borrow();
    let d = rig.sh.dir.borrow().deleg_stats();
    Ok(RunStats {
        delegations: w.deleg.0 + d.granted,
        recalls: w.deleg.1 + d.recalled,
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

/// Faults and the hook off, every failed node back, every node a member
/// again and written back.
fn settle(rig: &Rig, nodes: &Nodes, world: &Rc<RefCell<World>>) {
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
}

/// Every node reads `name` whole: each read is legal by the history, and
/// all nodes read the same bytes.
fn every_node_reads_alike(
    seed: u64,
    rig: &Rig,
    nodes: &Nodes,
    world: &Rc<RefCell<World>>,
    name: &str,
) -> Result<(), String> {
    let mut first: Option<Vec<u8>> = None;
    for (i, n) in nodes.iter().enumerate() {
        // Never written (or its creation lost in a crash): empty.
        let read = whole_read(&mut n.borrow_mut(), name, 1 << 17);
        let got = match read {
            Err(fabric::proto::Errno::NotFound) => Ok(Vec::new()),
            r => r,
        }
        .map_err(|e| {
            let why = format!("at the end node {} cannot read {name}: {e}", i + 1);
            unreadable_at_end(seed, rig, nodes, n, &why)
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
    Ok(())
}

/// The failure of a final read (`why`) with what explains it: the
/// members and their ring indexes, the node records, the directory's
/// entries and the reader's cache slots.
fn unreadable_at_end(
    seed: u64,
    rig: &Rig,
    nodes: &Nodes,
    n: &RefCell<Node<HostEnv>>,
    why: &str,
) -> String {
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
        .and_then(|st| {
            st.coherence().map(|c| {
                c.cache
                    .slots()
                    .map(|(k, s)| format!("{k:?}: {s:?}"))
                    .collect()
            })
        })
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
    let states: Vec<(u32, Option<fabric::layout::NodeState>, u64)> = (1..=nodes.len() as u32)
        .map(|k| (k, h.node_state(k), h.node_epoch(k)))
        .collect();
    format!(
        "seed {seed:#x}: {why}\nmembers (backlogs): {members:?}, directory up: {}\nnode records (state, epoch): {states:?}\ndirectory: {entries:#?}\nnode slots: {slots:#?}",
        rig.dir_is_up()
    )
}
