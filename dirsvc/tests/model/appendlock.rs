//! The strong-mode append lock as a timed model: the real
//! [`dirsvc::appendlock::AppendLocks`] on the directory's side; nodes
//! that take the lock, check their budget, store a chunk at the end of
//! file, publish the new size, renew between chunks and give the lock
//! back, over requests and answers that take any time to travel; nodes
//! that pause (stop beating) and resume; a directory that declares a node
//! silent past the heartbeat timeout failed (within the tick it notices:
//! time does not advance past a declaration due), then fences it (the
//! node never runs again) and drops its locks. Time is discrete and every
//! clock runs at the directory's rate (the lease's stated assumption); a
//! running node stores right after its budget check, so time passes
//! between the two only while the node is stopped (and not beating).
//!
//! Invariants: no chunk is stored over bytes of an append whose size the
//! directory accepted (two holders at once); a publication is accepted
//! only over the publisher's own bytes; and none shrinks the file below
//! an append published before it. (A chunk stored and not published, its
//! publication refused because its lease lapsed, may be overwritten by
//! the next holder: that append failed "busy", nobody was told it
//! landed.)

use std::hash::Hash;

use dirsvc::appendlock::AppendLocks;

use crate::explore::{Fp, Model};

/// The one file's inode.
const INO: u64 = 1;
/// Bytes of the file modelled (one per chunk).
const LEN: usize = 8;

/// What is explored.
#[derive(Debug, Clone)]
pub struct Config {
    /// Nodes (1..=4).
    pub nodes: u8,
    /// Appends each node makes.
    pub appends: u8,
    /// Chunks per append (a renewal between two).
    pub chunks: u8,
    /// A holder stores only within this many ticks of sending its take.
    pub budget: u64,
    /// The heartbeat timeout, ticks.
    pub hb: u64,
    /// The lease, ticks (the product: `2 * budget + hb`).
    pub lease: u64,
    /// Time bound, ticks.
    pub max_t: u64,
    /// Pauses, in all.
    pub pauses: u8,
}

/// A node's append, where it stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Phase {
    Idle,
    /// A take (or a renewal) sent at `sent`, for the chunk at `at` with
    /// `left` chunks to go (a renewal: of this append).
    Taking {
        sent: u64,
        renew: bool,
        at: u8,
        left: u8,
    },
    /// Holding, with the budget running from `since`.
    Holding {
        since: u64,
        at: u8,
        left: u8,
    },
    /// The budget check passed; the store is next (a pause may come
    /// between the two).
    Checked {
        since: u64,
        at: u8,
        left: u8,
    },
    /// Stored; the size `at + 1` published, its answer awaited.
    Publishing {
        since: u64,
        at: u8,
        left: u8,
    },
    /// The give-back sent.
    Giving,
}

/// A request in flight to the directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Req {
    Take { renew: bool },
    Publish { size: u8, tag: u8 },
    Give,
}

/// An answer in flight to the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Ans {
    Granted { size: u8 },
    Busy,
    Published,
    Refused,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Node {
    phase: Phase,
    req: Option<Req>,
    ans: Option<Ans>,
    /// Appends finished (or given up).
    done: u8,
    paused: bool,
    /// Its last heartbeat.
    beat: u64,
    /// Declared failed (no longer a member: its lease never lapses).
    declared: bool,
    /// Fenced: it never runs again.
    fenced: bool,
}

/// A state of the model.
#[derive(Debug, Clone)]
pub struct State {
    now: u64,
    locks: AppendLocks,
    /// The published size.
    size: u8,
    /// Who stored each byte: 0 none, else `node << 4 | append`.
    data: [u8; LEN],
    /// Bytes under an accepted publication.
    acked: [bool; LEN],
    nodes: Vec<Node>,
    pauses_left: u8,
}

/// One step.
#[derive(Debug, Clone, Copy)]
pub enum Step {
    Tick,
    Start(usize),
    Serve(usize),
    Receive(usize),
    Check(usize),
    Store(usize),
    Pause(usize),
    Resume(usize),
    Declare(usize),
    Fence(usize),
}

/// The model.
pub struct AppendModel {
    cfg: Config,
}

impl AppendModel {
    pub fn new(cfg: Config) -> AppendModel {
        assert!((1..=4).contains(&cfg.nodes));
        AppendModel { cfg }
    }

    fn runs(n: &Node) -> bool {
        !n.paused && !n.fenced
    }

    /// A declaration is due: time waits for it.
    fn declaration_due(&self, s: &State) -> bool {
        s.nodes
            .iter()
            .any(|n| !n.declared && s.now.saturating_sub(n.beat) > self.cfg.hb)
    }

    fn serve(&self, s: &mut State, k: usize) -> Result<(), String> {
        let node = (k + 1) as u8;
        let Some(req) = s.nodes[k].req.take() else {
            return Ok(());
        };
        let now = s.now;
        let ans = match req {
            Req::Take { renew: true } => match s.locks.renew(INO, node, now) {
                Ok(()) => Some(Ans::Granted { size: s.size }),
                Err(_) => Some(Ans::Busy),
            },
            Req::Take { renew: false } => {
                let declared: Vec<bool> = s.nodes.iter().map(|n| n.declared).collect();
                let live = |n: u8| !declared[usize::from(n) - 1];
                match s.locks.take(INO, node, now, live) {
                    Ok(()) => Some(Ans::Granted { size: s.size }),
                    Err(_) => Some(Ans::Busy),
                }
            }
            Req::Publish { size, tag } => {
                if s.locks.holds(INO, node, now) {
                    let at = usize::from(size) - 1;
                    if s.data[at] != tag {
                        return Err(format!(
                            "node {node}'s publication accepted over byte {at}, which node {} overwrote (two holders at once)",
                            s.data[at] >> 4
                        ));
                    }
                    s.acked[at] = true;
                    if size < s.size {
                        return Err(format!(
                            "node {node}'s publication of size {size} shrank the file from {}",
                            s.size
                        ));
                    }
                    s.size = size;
                    Some(Ans::Published)
                } else {
                    Some(Ans::Refused)
                }
            }
            Req::Give => {
                s.locks.give(INO, node);
                s.nodes[k].phase = Phase::Idle;
                None
            }
        };
        s.nodes[k].ans = ans;
        Ok(())
    }

    /// The append ends (done or given up): give the lock back.
    fn finish(n: &mut Node) {
        n.done += 1;
        n.phase = Phase::Giving;
        n.req = Some(Req::Give);
    }

    fn receive(&self, s: &mut State, k: usize) {
        let n = &mut s.nodes[k];
        let Some(ans) = n.ans.take() else { return };
        match (n.phase, ans) {
            (
                Phase::Taking {
                    sent,
                    at,
                    left,
                    renew,
                },
                Ans::Granted { size },
            ) => {
                // A first take learns the end of file under the lock.
                let at = if renew { at } else { size };
                n.phase = Phase::Holding {
                    since: sent,
                    at,
                    left,
                };
            }
            (Phase::Taking { renew: false, .. }, Ans::Busy) => n.phase = Phase::Idle,
            (Phase::Taking { renew: true, .. }, Ans::Busy) => Self::finish(n),
            (Phase::Publishing { at, left, .. }, Ans::Published) if left > 1 => {
                n.phase = Phase::Taking {
                    sent: s.now,
                    renew: true,
                    at: at + 1,
                    left: left - 1,
                };
                n.req = Some(Req::Take { renew: true });
            }
            (Phase::Publishing { .. }, Ans::Published | Ans::Refused) => Self::finish(n),
            (p, a) => panic!("model: answer {a:?} in phase {p:?}"),
        }
    }

    fn store(&self, s: &mut State, k: usize) -> Result<(), String> {
        let Phase::Checked { since, at, left } = s.nodes[k].phase else {
            return Ok(());
        };
        let i = usize::from(at);
        if i >= LEN {
            return Err(format!(
                "model bound: a chunk at {at} past the {LEN} bytes modelled"
            ));
        }
        let tag = ((k as u8 + 1) << 4) | s.nodes[k].done;
        if s.acked[i] {
            return Err(format!(
                "node {} stored over byte {at}, published by node {} (two holders at once)",
                k + 1,
                s.data[i] >> 4
            ));
        }
        s.data[i] = tag;
        let n = &mut s.nodes[k];
        n.phase = Phase::Publishing { since, at, left };
        n.req = Some(Req::Publish { size: at + 1, tag });
        Ok(())
    }
}

impl Model for AppendModel {
    type State = State;
    type Step = Step;

    fn init(&self) -> State {
        let node = Node {
            phase: Phase::Idle,
            req: None,
            ans: None,
            done: 0,
            paused: false,
            beat: 0,
            declared: false,
            fenced: false,
        };
        State {
            now: 0,
            locks: AppendLocks::new(self.cfg.lease),
            size: 0,
            data: [0; LEN],
            acked: [false; LEN],
            nodes: vec![node; usize::from(self.cfg.nodes)],
            pauses_left: self.cfg.pauses,
        }
    }

    fn steps(&self, s: &State, out: &mut Vec<Step>) {
        // A node stores right after its check (no other code runs
        // between): time passes there only while the node is stopped as
        // a whole, and then it does not beat.
        let storing = s
            .nodes
            .iter()
            .any(|n| Self::runs(n) && matches!(n.phase, Phase::Checked { .. }));
        if s.now < self.cfg.max_t && !self.declaration_due(s) && !storing {
            out.push(Step::Tick);
        }
        for (k, n) in s.nodes.iter().enumerate() {
            let runs = Self::runs(n);
            if runs && n.phase == Phase::Idle && n.req.is_none() && n.done < self.cfg.appends {
                out.push(Step::Start(k));
            }
            if n.req.is_some() && !n.fenced {
                out.push(Step::Serve(k));
            }
            if runs && n.ans.is_some() {
                out.push(Step::Receive(k));
            }
            if runs && matches!(n.phase, Phase::Holding { .. }) {
                out.push(Step::Check(k));
            }
            if runs && matches!(n.phase, Phase::Checked { .. }) {
                out.push(Step::Store(k));
            }
            if runs && s.pauses_left > 0 {
                out.push(Step::Pause(k));
            }
            if n.paused && !n.fenced {
                out.push(Step::Resume(k));
            }
            if !n.declared && s.now.saturating_sub(n.beat) > self.cfg.hb {
                out.push(Step::Declare(k));
            }
            if n.declared && !n.fenced {
                out.push(Step::Fence(k));
            }
        }
    }

    fn apply(&self, s: &State, step: &Step) -> Result<State, String> {
        let mut s = s.clone();
        match *step {
            Step::Tick => {
                s.now += 1;
                let now = s.now;
                for n in s.nodes.iter_mut().filter(|n| Self::runs(n)) {
                    n.beat = now;
                }
            }
            Step::Start(k) => {
                let n = &mut s.nodes[k];
                n.phase = Phase::Taking {
                    sent: s.now,
                    renew: false,
                    at: 0,
                    left: self.cfg.chunks,
                };
                n.req = Some(Req::Take { renew: false });
            }
            Step::Serve(k) => self.serve(&mut s, k)?,
            Step::Receive(k) => self.receive(&mut s, k),
            Step::Check(k) => {
                let now = s.now;
                let budget = self.cfg.budget;
                let n = &mut s.nodes[k];
                if let Phase::Holding { since, at, left } = n.phase {
                    if now.saturating_sub(since) < budget {
                        n.phase = Phase::Checked { since, at, left };
                    } else {
                        Self::finish(n); // past its budget: the rest fails "busy"
                    }
                }
            }
            Step::Store(k) => self.store(&mut s, k)?,
            Step::Pause(k) => {
                s.nodes[k].paused = true;
                s.pauses_left -= 1;
            }
            Step::Resume(k) => {
                s.nodes[k].paused = false;
                s.nodes[k].beat = s.now;
            }
            Step::Declare(k) => s.nodes[k].declared = true,
            Step::Fence(k) => {
                let n = &mut s.nodes[k];
                n.fenced = true;
                n.req = None;
                n.ans = None;
                s.locks.drop_node(k as u8 + 1);
            }
        }
        Ok(s)
    }

    fn fingerprint(&self, s: &State) -> u128 {
        let mut h = Fp::default();
        s.now.hash(&mut h);
        s.locks.lease(INO).hash(&mut h);
        s.size.hash(&mut h);
        s.data.hash(&mut h);
        s.acked.hash(&mut h);
        s.nodes.hash(&mut h);
        s.pauses_left.hash(&mut h);
        h.value()
    }

    fn check(&self, _s: &State) -> Result<(), String> {
        Ok(()) // the invariants are checked by the steps that could break them
    }

    fn show(&self, s: &State) -> String {
        let nodes: Vec<String> = s
            .nodes
            .iter()
            .enumerate()
            .map(|(k, n)| {
                format!(
                    "n{}:{:?}{}{}{}",
                    k + 1,
                    n.phase,
                    if n.paused { " paused" } else { "" },
                    if n.declared { " declared" } else { "" },
                    if n.fenced { " fenced" } else { "" }
                )
            })
            .collect();
        format!(
            "t={} size={} lease={:?} data={:?} {}",
            s.now,
            s.size,
            s.locks.lease(INO),
            s.data,
            nodes.join(" ")
        )
    }
}
