//! The invariants checked after every step (see the module comment of [`super`]).

use super::*;

impl Sim {
    /// The page node `n` holds frame `gfn` for, if any (resident, reserved,
    /// reclaiming or handed out with a miss).
    pub(super) fn holder(&self, n: u8, gfn: u64) -> Option<PageKey> {
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

    pub(super) fn check(&self) -> Res {
        self.dir.check()?;
        for (k, e) in self.dir.entries() {
            self.check_entry(&k, &e)?;
        }
        self.check_exports()?;
        let mut exclusive: BTreeMap<PageKey, u8> = BTreeMap::new();
        for node in self.nodes.iter().filter(|n| n.alive) {
            self.check_frames(node)?;
            self.check_slots(node, &mut exclusive)?;
        }
        Ok(())
    }

    /// The directory's entry for `k`: its owner, frame, export, and the
    /// per-node states it implies.
    fn check_entry(&self, k: &PageKey, e: &Entry) -> Res {
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
        Ok(())
    }

    /// Every exported frame caches a shared page.
    fn check_exports(&self) -> Res {
        for g in &self.export {
            let used = self
                .dir
                .entries()
                .any(|(_, e)| e.gfn == *g && !matches!(e.phase, Phase::Exclusive { .. }));
            if !used {
                return Err(format!("frame {g} exported but caches no page"));
            }
        }
        Ok(())
    }

    /// Node `node`'s frames: each in its pool, held once (free, in flight
    /// or resident), all accounted for.
    fn check_frames(&self, node: &Node) -> Res {
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
        Ok(())
    }

    /// Node `node`'s slots agree with the directory; no page has own
    /// copies on two nodes (`exclusive` collects them across nodes).
    fn check_slots(&self, node: &Node, exclusive: &mut BTreeMap<PageKey, u8>) -> Res {
        let n = node.id;
        let c = &node.cache;
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
        Ok(())
    }

    // ---- runs ------------------------------------------------------------
}
