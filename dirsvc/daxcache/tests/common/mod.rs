//! The exhaustive interleaving explorer the `interleave*` tests share:
//! every order in which two or three participants' shared-memory
//! operations can happen (sequential consistency; one step = one shared
//! operation of the protocol under test, while the test's own bookkeeping
//! steps run as one step each). Visited states (shared words + every
//! participant's local state) are memoized, so the search is complete and
//! finite; a state where every unfinished participant can only wait
//! without changing anything is a deadlock and fails the test.

use std::collections::HashSet;
use std::fmt::Debug;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

pub const MAX_STATES: usize = 5_000_000;

/// A second, differently seeded hasher (FNV-1a over the hashed bytes).
struct RandomStateFixed;

struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
        }
    }
}

impl std::hash::BuildHasher for RandomStateFixed {
    type Hasher = Fnv;
    fn build_hasher(&self) -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

/// What one step of a participant did.
pub enum Moved {
    Yes,
    /// Waited (a `Blocked` step).
    Waited,
}

/// Explores every interleaving from `threads` over `mem`, tracking the
/// shared words `tracked` (the only ones the scenario writes). `step` runs
/// one step of a participant; `done` says it finished; `check` judges each
/// final state. Returns the number of states visited.
pub fn explore<T: Clone + Eq + Hash + Debug>(
    mem: &[AtomicU64],
    tracked: &[usize],
    threads: Vec<T>,
    step: impl Fn(&mut T, &[AtomicU64]) -> Moved,
    done: impl Fn(&T) -> bool,
    check: impl Fn(&[T], &[AtomicU64]),
) -> usize {
    explore_with(mem, tracked, threads, step, done, |_, _| {}, check)
}

/// [`explore`], judging every state reached with `invariant` as well
/// (called with the state's words in `mem`).
#[allow(dead_code)] // not every test file judges intermediate states
pub fn explore_with<T: Clone + Eq + Hash + Debug>(
    mem: &[AtomicU64],
    tracked: &[usize],
    threads: Vec<T>,
    step: impl Fn(&mut T, &[AtomicU64]) -> Moved,
    done: impl Fn(&T) -> bool,
    invariant: impl Fn(&[T], &[AtomicU64]),
    check: impl Fn(&[T], &[AtomicU64]),
) -> usize {
    let snap = |m: &[AtomicU64]| -> Vec<u64> {
        tracked
            .iter()
            .map(|&i| m[i].load(Ordering::SeqCst))
            .collect()
    };
    let restore = |m: &[AtomicU64], s: &[u64]| {
        for (k, &i) in tracked.iter().enumerate() {
            m[i].store(s[k], Ordering::SeqCst);
        }
    };
    let untracked: Vec<u64> = mem.iter().map(|w| w.load(Ordering::SeqCst)).collect();
    let start = (snap(mem), threads);
    // States are remembered by a 128-bit digest (two independent hashes):
    // a collision, which would prune a state unexplored, is negligible.
    let digest = |s: &(Vec<u64>, Vec<T>)| -> (u64, u64) {
        let mut a = std::collections::hash_map::DefaultHasher::new();
        s.hash(&mut a);
        let mut b = std::hash::BuildHasher::build_hasher(&RandomStateFixed);
        s.hash(&mut b);
        (a.finish(), b.finish())
    };
    let mut seen = HashSet::new();
    seen.insert(digest(&start));
    let mut stack = vec![start];
    let mut finals = 0;
    while let Some((words, ts)) = stack.pop() {
        assert!(seen.len() < MAX_STATES, "state space too large");
        let mut any_moved = false;
        let mut all_done = true;
        for t in 0..ts.len() {
            if done(&ts[t]) {
                continue;
            }
            all_done = false;
            restore(mem, &words);
            let mut next = ts.clone();
            let how = step(&mut next[t], mem);
            let nw = snap(mem);
            let changed = nw != words || next != ts;
            if matches!(how, Moved::Yes) || changed {
                any_moved |= changed;
            }
            if !changed {
                continue;
            }
            invariant(&next, mem);
            let s = (nw, next);
            if seen.insert(digest(&s)) {
                stack.push(s);
            }
        }
        if all_done {
            restore(mem, &words);
            check(&ts, mem);
            finals += 1;
        } else {
            assert!(any_moved, "deadlock: every participant waits: {ts:?}");
        }
    }
    // The untracked words were never written.
    for (i, w) in mem.iter().enumerate() {
        if !tracked.contains(&i) {
            assert_eq!(w.load(Ordering::SeqCst), untracked[i], "untracked word {i}");
        }
    }
    assert!(finals > 0);
    seen.len()
}
