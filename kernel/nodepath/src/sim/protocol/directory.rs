//! The directory's side of the simulation: carrying out [`Action`]s, serving requests and acks, node crashes, and the disk queue's fills.

use super::*;

impl Sim {
    pub(super) fn run(&mut self, actions: Vec<Action>) -> Res {
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
                            dest: Dest::Frame(gfn),
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
                        self.node(node)
                            .notify
                            .push_back((PageSpan::page(key), false));
                    }
                }
                Action::InvalidateRange { node, span } => {
                    if !self.node(node).alive {
                        return Err(format!("INV_RANGE of {span:?} to failed node {node}"));
                    }
                    self.seen.range_invs += 1;
                    if self.issuing && self.rng.chance(self.p.loss_pm) {
                        self.seen.lost += 1;
                        self.node(node).doomed = true;
                    } else {
                        self.node(node).notify.push_back((span, true));
                    }
                }
                // The simulated nodes never ask for a delegation.
                Action::Recall { node, range } => {
                    return Err(format!(
                        "RECALL of {range:?} to node {node}, never delegated"
                    ));
                }
                Action::ReadList { node, range, .. } => {
                    return Err(format!("list of {range:?} of node {node}, never delegated"));
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

    pub(super) fn serve_request(&mut self, n: u8, tag: u32, req: PageReq) -> Res {
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

    pub(super) fn serve_ack(&mut self, n: u8, span: PageSpan, range: bool, dirty: bool) -> Res {
        let key = PageKey {
            ino: span.ino,
            idx: span.first,
        };
        let ack = |dir: &mut PageDir| {
            if range {
                dir.ack_range(n, span, dirty)
            } else {
                dir.ack(n, key, dirty)
            }
        };
        let actions = ack(&mut self.dir);
        self.run(actions)?;
        if self.sc.lossy && self.rng.chance(self.p.loss_pm) {
            // A duplicate right behind it: must change nothing.
            self.seen.dup_acks += 1;
            let before: Vec<_> = self.dir.entries().collect();
            let again = ack(&mut self.dir);
            let after: Vec<_> = self.dir.entries().collect();
            if !again.is_empty() || before != after {
                return Err(format!(
                    "duplicate ack of {span:?} from {n} acted: {again:?}"
                ));
            }
        }
        Ok(())
    }

    /// The directory declares `n` failed (heartbeat timeout): its rings and
    /// memory of the cache are gone.
    pub(super) fn crash(&mut self, n: u8) -> Res {
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
    pub(super) fn submit_fills(&mut self) {
        while let Some((id, _)) = self.fills.next_submit() {
            let ok = !self.rng.chance(self.p.fill_error_pm);
            let value = self.fill_keys.get(&id).map(|k| self.disk_val(k));
            self.fill_reads.insert(id, value.filter(|_| ok));
        }
    }

    /// One read in flight (picked at random) completes.
    pub(super) fn complete_fill(&mut self) -> Res {
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
            if let (Some(v), Dest::Frame(gfn)) = (value, f.dest) {
                self.mem.insert(gfn, v);
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
    pub(super) fn settle_tainted(&mut self) {
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
}
