//! The directory's invariants, checked by tests and the simulation.

use alloc::collections::BTreeMap;

use fabric::proto::PageKey;

use super::{bit, PageDir, Phase};

impl PageDir {
    /// Check the entry-level invariants; `Err` names the first violation.
    pub fn check(&self) -> Result<(), alloc::string::String> {
        use alloc::format;
        // Frame -> page, for frames still in use: an evicted page's owner
        // may reuse its frame once told (it is then the only one left).
        let mut frames: BTreeMap<u64, PageKey> = BTreeMap::new();
        for (k, e) in self.table.iter() {
            let k = &k;
            if e.owner == 0 || e.owner > self.max_nodes() {
                return Err(format!("{k:?}: owner {} out of range", e.owner));
            }
            let evicting = self.evicting.get(k).copied();
            if evicting.is_some() && !matches!(e.phase, Phase::Invalidating { tag: 0, .. }) {
                return Err(format!("{k:?}: evicted but {:?}", e.phase));
            }
            if e.sharers & bit(e.owner) != 0 && evicting.is_none() {
                return Err(format!("{k:?}: owner {} is also a sharer", e.owner));
            }
            match e.phase {
                Phase::Exclusive { .. } if e.sharers != 0 => {
                    return Err(format!("{k:?}: sharers while in E"));
                }
                Phase::Invalidating { pending, .. } if pending & !e.sharers != 0 => {
                    return Err(format!("{k:?}: waiting for acks of non-sharers"));
                }
                Phase::Invalidating { pending, .. }
                    if evicting == Some(true) && pending != bit(e.owner) =>
                {
                    return Err(format!("{k:?}: owner told before the sharers acked"));
                }
                _ => {}
            }
            if evicting != Some(true) {
                if let Some(other) = frames.insert(e.gfn, *k) {
                    return Err(format!("{k:?}: frame {} also holds {other:?}", e.gfn));
                }
            }
        }
        if let Some(k) = self.evicting.keys().find(|k| !self.table.contains(k)) {
            return Err(format!("{k:?}: evicted but not cached"));
        }
        if let Some(k) = self.stale.iter().find(|k| {
            !self
                .table
                .get(k)
                .is_some_and(|e| matches!(e.phase, Phase::Exclusive { by_dir: true, .. }))
        }) {
            return Err(format!("{k:?}: a stale fill that is not a fill"));
        }
        self.check_delegations()?;
        self.table.check()
    }
}
