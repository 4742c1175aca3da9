//! The nodes' side of the simulation: operations (reads, writes, fsync), reclaim and drops, and what a node does with a response or a notice.

use super::*;

impl Sim {
    /// Start a new operation.
    pub(super) fn new_op(&mut self, n: u8) -> Op {
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

    pub(super) fn advance(&mut self, n: u8) -> Res {
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
                Hit::Local(g) | Hit::Remote(g) | Hit::Replica(g) => {
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
    pub(super) fn access(
        &mut self,
        n: u8,
        i: usize,
        key: PageKey,
        gfn: u64,
        write: bool,
        v: u64,
    ) -> Res {
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

    pub(super) fn set_item(&mut self, n: u8, i: usize, st: St) {
        if let Some(op) = self.node(n).op.as_mut() {
            op.items[i].st = st;
        }
    }

    pub(super) fn finish_op(&mut self, n: u8) {
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
    pub(super) fn reclaim(&mut self, n: u8, max: usize) {
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

    pub(super) fn drop_remote(&mut self, n: u8, all: bool) {
        let keys = if all {
            self.node(n).cache.all_remote()
        } else {
            self.node(n).cache.over_limit()
        };
        for (key, dirty) in keys {
            self.send(n, PageReq::Drop { key, dirty }, Call::Drop { key });
        }
    }

    pub(super) fn housekeeping(&mut self, n: u8) {
        let r = self.rng.below(100);
        if r < 60 {
            self.drop_remote(n, false);
        } else if r < 70 {
            self.drop_remote(n, true);
        } else if r < 90 {
            self.reclaim(n, 4);
        }
    }

    pub(super) fn on_response(&mut self, n: u8, tag: u32, reply: PageReply) -> Res {
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

    pub(super) fn on_notice(&mut self, n: u8, span: PageSpan, range: bool) {
        if range {
            let runs = self.node(n).cache.range_inv(&span);
            let acked: u64 = runs.iter().map(|(r, _)| r.count).sum();
            // The pages left out have a miss in flight: each is acked
            // alone once its answer is applied.
            self.seen.deferred_invs += span.count - acked;
            for (run, dirty) in runs {
                self.seen.range_acks += 1;
                self.send_ack(n, run, true, dirty);
            }
            return;
        }
        let key = PageKey {
            ino: span.ino,
            idx: span.first,
        };
        match self.node(n).cache.dir_inv(&key) {
            Some(dirty) => self.send_ack(n, span, false, dirty),
            None => self.seen.deferred_invs += 1,
        }
    }

    // ---- directory side --------------------------------------------------

    pub(super) fn new_fsync(&mut self, n: u8) -> Op {
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
}
