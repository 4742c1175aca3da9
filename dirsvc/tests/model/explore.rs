//! A small exhaustive explorer: breadth-first over every interleaving of
//! a model's steps, states deduplicated by a 128-bit fingerprint, the
//! invariants checked in every state reached. Breadth-first, so the first
//! violation found comes with a shortest trace (rebuilt by replaying the
//! steps from the initial state along the recorded parents).

use std::collections::hash_map::Entry as Slot;
use std::collections::{HashMap, VecDeque};
use std::fmt::Debug;
use std::hash::{BuildHasherDefault, Hasher};
use std::time::{Duration, Instant};

/// A fast 128-bit fingerprint hasher: two 64-bit multiply-rotate lanes
/// over the words written (not cryptographic; a collision would merge two
/// states, at odds of about `states^2 / 2^128`).
#[derive(Debug, Clone, Copy)]
pub struct Fp {
    a: u64,
    b: u64,
}

impl Default for Fp {
    fn default() -> Fp {
        Fp {
            a: 0x243f_6a88_85a3_08d3,
            b: 0x1319_8a2e_0370_7344,
        }
    }
}

impl Fp {
    fn mix(&mut self, w: u64) {
        self.a = (self.a ^ w)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(31);
        self.b = (self.b ^ w.rotate_left(17))
            .wrapping_mul(0xc2b2_ae3d_27d4_eb4f)
            .rotate_left(29)
            .wrapping_add(self.a);
    }

    /// The fingerprint (finalised so every input bit reaches every bit).
    pub fn value(&self) -> u128 {
        let fin = |mut x: u64| {
            x ^= x >> 33;
            x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
            x ^= x >> 33;
            x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
            x ^ (x >> 33)
        };
        (u128::from(fin(self.a)) << 64) | u128::from(fin(self.b ^ self.a.rotate_left(7)))
    }
}

impl Hasher for Fp {
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            self.mix(u64::from_le_bytes(w) ^ ((c.len() as u64) << 56));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.mix(u64::from(i) | 1 << 60);
    }
    fn write_u32(&mut self, i: u32) {
        self.mix(u64::from(i) | 2 << 60);
    }
    fn write_u64(&mut self, i: u64) {
        self.mix(i);
        self.mix(3 << 60);
    }
    fn write_usize(&mut self, i: usize) {
        self.mix(i as u64 | 4 << 60);
    }
    fn finish(&self) -> u64 {
        self.value() as u64
    }
}

/// The visited set's hasher: its keys are fingerprints already.
#[derive(Default)]
struct Id(u64);

impl Hasher for Id {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u128(&mut self, i: u128) {
        self.0 = i as u64;
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type Seen = HashMap<u128, u128, BuildHasherDefault<Id>>;

/// A transition system to explore.
pub trait Model {
    /// A state (everything that decides what can happen next).
    type State: Clone;
    /// One atomic step.
    type Step: Clone + Debug;
    /// The initial state.
    fn init(&self) -> Self::State;
    /// Every step enabled in `s`.
    fn steps(&self, s: &Self::State, out: &mut Vec<Self::Step>);
    /// Take `step` in `s`; `Err` names an invariant the step itself broke.
    fn apply(&self, s: &Self::State, step: &Self::Step) -> Result<Self::State, String>;
    /// Equal for states that behave alike.
    fn fingerprint(&self, s: &Self::State) -> u128;
    /// The invariants of a state; `Err` names the first one broken.
    fn check(&self, s: &Self::State) -> Result<(), String>;
    /// A short description of `s` for traces.
    fn show(&self, s: &Self::State) -> String;
}

/// An invariant broken, with the steps that lead there.
#[derive(Debug)]
pub struct Violation {
    /// What broke.
    pub what: String,
    /// The steps from the initial state, each with the state it leads to.
    pub trace: Vec<String>,
}

/// What an exploration found.
#[derive(Debug)]
pub struct Report {
    /// Distinct states reached.
    pub states: usize,
    /// Steps taken (edges, duplicates included).
    pub transitions: u64,
    /// Longest shortest path from the initial state.
    pub depth: usize,
    /// Wall time.
    pub elapsed: Duration,
    /// The first violation found (exploration stops there).
    pub violation: Option<Violation>,
}

/// Explore every state reachable from `m.init()`, up to `max_states`
/// (panics past it: the bound is part of the configuration).
pub fn explore<M: Model>(m: &M, max_states: usize) -> Report {
    let start = Instant::now();
    let init = m.init();
    let root = m.fingerprint(&init);
    // Fingerprint -> parent's fingerprint (the root is its own parent).
    let mut parent = Seen::default();
    parent.insert(root, root);
    let mut queue: VecDeque<(M::State, u128, usize)> = VecDeque::new();
    let mut transitions = 0u64;
    let mut depth = 0;
    let mut steps = Vec::new();
    let fail = |what: String, at: u128, parent: &Seen, transitions, depth| Report {
        states: parent.len(),
        transitions,
        depth,
        elapsed: start.elapsed(),
        violation: Some(Violation {
            trace: trace(m, parent, root, at),
            what,
        }),
    };
    if let Err(what) = m.check(&init) {
        return fail(what, root, &parent, 0, 0);
    }
    queue.push_back((init, root, 0));
    while let Some((s, fp, d)) = queue.pop_front() {
        depth = depth.max(d);
        steps.clear();
        m.steps(&s, &mut steps);
        for step in &steps {
            transitions += 1;
            let next = match m.apply(&s, step) {
                Ok(n) => n,
                Err(what) => {
                    let mut r = fail(what, fp, &parent, transitions, depth);
                    if let Some(v) = r.violation.as_mut() {
                        v.trace.push(format!("{step:?}  => broken"));
                    }
                    return r;
                }
            };
            let nfp = m.fingerprint(&next);
            if let Slot::Vacant(v) = parent.entry(nfp) {
                v.insert(fp);
                if let Err(what) = m.check(&next) {
                    return fail(what, nfp, &parent, transitions, depth + 1);
                }
                assert!(
                    parent.len() <= max_states,
                    "more than {max_states} states: tighten the configuration"
                );
                queue.push_back((next, nfp, d + 1));
            }
        }
    }
    Report {
        states: parent.len(),
        transitions,
        depth,
        elapsed: start.elapsed(),
        violation: None,
    }
}

/// The steps from the root to `at`, replayed.
fn trace<M: Model>(m: &M, parent: &Seen, root: u128, at: u128) -> Vec<String> {
    let mut path = vec![at];
    let mut cur = at;
    while cur != root {
        cur = parent[&cur];
        path.push(cur);
    }
    path.reverse();
    let mut s = m.init();
    let mut out = vec![format!("init  => {}", m.show(&s))];
    let mut steps = Vec::new();
    for want in &path[1..] {
        steps.clear();
        m.steps(&s, &mut steps);
        let found = steps.iter().find_map(|st| {
            let n = m.apply(&s, st).ok()?;
            (m.fingerprint(&n) == *want).then_some((st.clone(), n))
        });
        let Some((st, n)) = found else {
            out.push("(trace lost: fingerprint not reproduced)".into());
            break;
        };
        out.push(format!("{st:?}  => {}", m.show(&n)));
        s = n;
    }
    out
}
