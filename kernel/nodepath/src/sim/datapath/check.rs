//! The single-copy invariants, checked after every step: the directory's
//! page directory is consistent, at most one node holds a page in its own
//! frame, and every remote mapping is of a frame its owner still holds.

use std::collections::{BTreeMap, BTreeSet};

use fabric::proto::PageKey;

use super::Nodes;
use crate::pagecache::Slot;
use crate::rig::Rig;

/// A node's id, whether its session is active, and its cache slots.
type NodeSlots = (u32, bool, Vec<(PageKey, Slot)>);

/// The cache slots of every joined node.
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
pub(super) fn check_single_copy(rig: &Rig, nodes: &Nodes, dead: &[u32]) -> Result<(), String> {
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
