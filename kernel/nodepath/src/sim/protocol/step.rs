//! One random step of the simulation: which queue or actor moves next.

use super::*;

impl Sim {
    pub(super) fn frozen(&self, q: usize, n: u8) -> bool {
        matches!(self.frozen, Some((fq, fn_, until)) if fq == q && fn_ == n && self.step < until)
    }

    /// One step: pick an event at random and run it.
    pub(super) fn step_once(&mut self) -> Res {
        self.step += 1;
        if self.frozen.is_some_and(|(_, _, until)| self.step >= until) {
            self.frozen = None;
        }
        if let Some(done) = self.rare_event() {
            return done;
        }
        let cands = self.ready_events();
        match self.pick(&cands) {
            Some((kind, n)) => self.run_event(kind, n),
            None => Ok(()),
        }
    }

    /// Freezes a queue, crashes a node or evicts the scratch file, each
    /// with its small chance; `Some` when one ran (it is the step).
    fn rare_event(&mut self) -> Option<Res> {
        let nodes = self.p.nodes;
        if self.issuing && self.frozen.is_none() && self.rng.chance(3) {
            let q = self.rng.below(QUEUES as u64) as usize;
            let n = self.rng.range(1, u64::from(nodes)) as u8;
            let until = self.step + self.rng.range(20, 300);
            self.frozen = Some((q, n, until));
            self.log(Ev::Freeze(q, n, until));
        }
        if self.issuing && self.rng.chance(self.p.crash_pm) {
            let n = self.rng.range(1, u64::from(nodes)) as u8;
            if self.node(n).alive {
                self.log(Ev::Crash(n));
                return Some(self.crash(n));
            }
        }
        if let Some(n) = (1..=nodes).find(|&n| self.node(n).doomed) {
            if !self.issuing || self.rng.chance(30) {
                self.log(Ev::Crash(n));
                return Some(self.crash(n));
            }
        }
        if self.issuing && self.rng.chance(self.p.evict_pm) {
            let from = self.rng.below(SCRATCH_PAGES);
            self.log(Ev::Evict(from));
            self.seen.evictions += 1;
            // As a truncation does: fills of the cut pages in flight are
            // stale (their readers retry), the cached ones torn down.
            self.seen.stale_marked += self.dir.stale_fills(SCRATCH, from, u64::MAX) as u64;
            let actions = self.dir.evict_file(SCRATCH, from);
            return Some(self.run(actions));
        }
        None
    }

    /// The events ready to run, as (weight, kind, node).
    fn ready_events(&self) -> Vec<(u64, u8, u8)> {
        let nodes = self.p.nodes;
        let mut cands: Vec<(u64, u8, u8)> = Vec::new();
        for n in 1..=nodes {
            let node = &self.nodes[usize::from(n) - 1];
            if !node.alive {
                if !self.dir.holds_frames_of(n) {
                    cands.push((4, 6, n));
                }
                continue;
            }
            let ready = [
                !node.req.is_empty() && !self.frozen(0, n),
                !node.ack.is_empty() && !self.frozen(1, n),
                !node.resp.is_empty() && !self.frozen(2, n),
                !node.notify.is_empty() && !self.frozen(3, n),
                node.op.is_some() || self.issuing,
                true,
            ];
            for (kind, r) in ready.iter().enumerate() {
                if *r {
                    cands.push((self.p.w[kind], kind as u8, n));
                }
            }
        }
        if !self.fill_reads.is_empty() {
            // The disk finishes a read (kind 7).
            cands.push((self.p.w[0], 7, 0));
        }
        cands
    }

    /// A weighted random choice among `cands`: (kind, node).
    fn pick(&mut self, cands: &[(u64, u8, u8)]) -> Option<(u8, u8)> {
        let total: u64 = cands.iter().map(|c| c.0).sum();
        if total == 0 {
            return None;
        }
        let mut x = self.rng.below(total);
        let mut pick = cands[0];
        for c in cands {
            if x < c.0 {
                pick = *c;
                break;
            }
            x -= c.0;
        }
        let (_, kind, n) = pick;
        Some((kind, n))
    }

    /// Runs one event of `kind` on node `n`.
    fn run_event(&mut self, kind: u8, n: u8) -> Res {
        match kind {
            0 => {
                let Some((tag, req)) = self.node(n).req.pop_front() else {
                    return Ok(());
                };
                self.log(Ev::DirReq(n, tag, req));
                self.serve_request(n, tag, req)
            }
            1 => {
                let Some((span, range, dirty)) = self.node(n).ack.pop_front() else {
                    return Ok(());
                };
                self.log(Ev::DirAck(n, span, range, dirty));
                self.serve_ack(n, span, range, dirty)
            }
            2 => {
                let Some((tag, reply)) = self.node(n).resp.pop_front() else {
                    return Ok(());
                };
                self.log(Ev::Resp(n, tag, reply));
                self.on_response(n, tag, reply)
            }
            3 => {
                let Some((span, range)) = self.node(n).notify.pop_front() else {
                    return Ok(());
                };
                self.log(Ev::Notice(n, span, range));
                self.on_notice(n, span, range);
                Ok(())
            }
            4 => {
                self.log(Ev::Advance(n));
                self.advance(n)
            }
            5 => {
                self.log(Ev::House(n));
                self.housekeeping(n);
                Ok(())
            }
            7 => self.complete_fill(),
            _ => {
                self.log(Ev::Restart(n));
                self.node(n).alive = true;
                Ok(())
            }
        }
    }

    pub(super) fn log(&mut self, ev: Ev) {
        if self.trace.len() == self.trace_len {
            self.trace.pop_front();
        }
        self.trace.push_back((self.step, ev));
    }

    // ---- invariants ------------------------------------------------------
}
