//! Model checking of the directory protocol: the real `PageDir` with the
//! serving loop's glue and a model of nodes (`cluster.rs`), and the real
//! append locks with timed nodes (`appendlock.rs`), every interleaving
//! explored breadth-first (`explore.rs`).
//!
//! Invariants, in every state reached:
//! * the directory's own ([`dirsvc::pagedir::PageDir::check`]);
//! * one owner: at most one node holds a page in its own frame;
//! * no read of a frame reused for another page: every mapping of an
//!   awake node reads the page it maps (and, in strong mode, the latest
//!   completed write);
//! * no lost dirty data: a frame's write not yet on disk stays the page's
//!   copy in the directory until written back; in strong mode the latest
//!   completed write is on disk or in the page's frame;
//! * every invalidation completes: from the state, with every node awake
//!   and serving, no page stays in E or TBI and every request is answered.
//!
//! The small configurations run in the default `cargo test`; the full ones
//! (3 nodes x 2 pages, node failure and rejoin) are `#[ignore]`d and run
//! in release by `tests/run.sh`:
//! `cargo test --release -p dirsvc --test model -- --ignored --nocapture`.

mod appendlock;
mod cluster;
mod explore;

use cluster::{Cluster, Config, Mode, QuietOrder};
use explore::{explore, Report};

fn config(mode: Mode, order: QuietOrder) -> Config {
    Config {
        nodes: 3,
        pages: 2,
        frames: 1,
        writes: 1,
        ops: 4,
        failures: 0,
        mode,
        lazy_inv: true,
        order,
        liveness: true,
        delegation: false,
    }
}

fn run(name: &str, cfg: Config, max_states: usize) -> Report {
    let m = Cluster::new(cfg.clone());
    let r = explore(&m, max_states);
    println!(
        "model {name}: {cfg:?}\n  {} states, {} transitions, depth {}, {:.2?}",
        r.states, r.transitions, r.depth, r.elapsed
    );
    r
}

fn assert_holds(name: &str, cfg: Config, max_states: usize) {
    let r = run(name, cfg, max_states);
    if let Some(v) = r.violation {
        panic!(
            "model {name}: {}\ntrace ({} steps):\n  {}",
            v.what,
            v.trace.len() - 1,
            v.trace.join("\n  ")
        );
    }
}

#[test]
fn strong_two_nodes_two_pages_with_failure() {
    let cfg = Config {
        nodes: 2,
        ops: 3,
        failures: 1,
        ..config(Mode::Strong, QuietOrder::DrainFirst)
    };
    assert_holds("strong 2x2 failure", cfg, 1_000_000);
}

#[test]
fn relaxed_two_nodes_two_pages_with_failure() {
    let cfg = Config {
        nodes: 2,
        ops: 3,
        failures: 1,
        ..config(Mode::Relaxed, QuietOrder::DrainFirst)
    };
    assert_holds("relaxed 2x2 failure", cfg, 1_000_000);
}

/// The lazy take of a quiet sleeper's DIR_INVs without draining its ack
/// ring first: a sharer woken by the DIR_INV acks dirty and sleeps
/// quietly again between the directory's last drain of its ack ring and
/// its read of the sleep word; the invalidation is taken as clean and the
/// dirty page is never written back.
#[test]
fn taking_quiet_acks_before_draining_the_ack_ring_loses_dirty_data() {
    let cfg = config(Mode::Strong, QuietOrder::TakeFirst);
    let r = run("strong 3x2, take before drain", cfg, 1_000_000);
    let v = r.violation.expect("the take-first ordering must be caught");
    println!("  found: {}\n  {}", v.what, v.trace.join("\n  "));
    assert!(
        v.what.contains("lost") || v.what.contains("dropped unsaved"),
        "{}",
        v.what
    );
    assert!(
        v.trace.iter().any(|s| s.contains("QuietTake")),
        "the counterexample goes through the lazy take"
    );
}

/// Delegated ownership: a node takes the file's range, writes pages
/// under it without requests, and another node's read or write recalls
/// it; the holder may fail (its list is read from the region) and give
/// the range back on its own. Two frames each: a list frame and a page.
#[test]
fn strong_delegation_two_nodes_two_pages_with_failure() {
    let cfg = Config {
        nodes: 2,
        frames: 2,
        ops: 3,
        failures: 1,
        delegation: true,
        ..config(Mode::Strong, QuietOrder::DrainFirst)
    };
    assert_holds("strong delegation 2x2 failure", cfg, 2_000_000);
}

#[test]
#[ignore = "release: tests/run.sh runs it"]
fn strong_delegation_three_nodes_two_pages_with_failure() {
    let cfg = Config {
        frames: 2,
        ops: 3,
        failures: 1,
        delegation: true,
        ..config(Mode::Strong, QuietOrder::DrainFirst)
    };
    assert_holds("strong delegation 3x2 failure", cfg, 10_000_000);
}

#[test]
#[ignore = "release: tests/run.sh runs it"]
fn strong_three_nodes_two_pages_with_failure() {
    let cfg = Config {
        failures: 1,
        ..config(Mode::Strong, QuietOrder::DrainFirst)
    };
    assert_holds("strong 3x2 failure", cfg, 10_000_000);
}

#[test]
#[ignore = "release: tests/run.sh runs it"]
fn relaxed_three_nodes_two_pages_with_failure() {
    let cfg = Config {
        failures: 1,
        ..config(Mode::Relaxed, QuietOrder::DrainFirst)
    };
    assert_holds("relaxed 3x2 failure", cfg, 10_000_000);
}

/// Explore a configuration given by the environment (N nodes, P pages,
/// F frames per node, W writes per page, O requests, X failures, R=1
/// relaxed, L=0 no completion check, T=1 take before drain, D=1
/// delegation), e.g.
/// `N=3 P=2 O=5 cargo test --release -p dirsvc --test model from_env -- --ignored --nocapture`.
#[test]
#[ignore = "a tool: the configuration comes from the environment"]
fn from_env() {
    let e = |k: &str, d: u8| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let cfg = Config {
        nodes: e("N", 2),
        pages: e("P", 2),
        frames: e("F", 1),
        writes: e("W", 1),
        ops: e("O", 4),
        failures: e("X", 0),
        liveness: e("L", 1) == 1,
        delegation: e("D", 0) == 1,
        mode: if e("R", 0) == 1 {
            Mode::Relaxed
        } else {
            Mode::Strong
        },
        ..config(
            Mode::Strong,
            if e("T", 0) == 1 {
                QuietOrder::TakeFirst
            } else {
                QuietOrder::DrainFirst
            },
        )
    };
    assert_holds("from_env", cfg, 100_000_000);
}

fn append_config() -> appendlock::Config {
    let (budget, hb) = (2, 1);
    appendlock::Config {
        nodes: 2,
        appends: 1,
        chunks: 2,
        budget,
        hb,
        // The product's lease: `dirsvc::server::append_lease_ns`.
        lease: 2 * budget + hb,
        max_t: 6,
        pauses: 1,
    }
}

fn run_appends(name: &str, cfg: appendlock::Config, max_states: usize) -> Report {
    let r = explore(&appendlock::AppendModel::new(cfg.clone()), max_states);
    println!(
        "model {name}: {cfg:?}\n  {} states, {} transitions, depth {}, {:.2?}",
        r.states, r.transitions, r.depth, r.elapsed
    );
    r
}

fn assert_appends_hold(name: &str, cfg: appendlock::Config, max_states: usize) {
    let r = run_appends(name, cfg, max_states);
    if let Some(v) = r.violation {
        panic!("model {name}: {}\n  {}", v.what, v.trace.join("\n  "));
    }
}

/// The append lock's lease: two nodes append two chunks each (a renewal
/// between), either may pause once, past the heartbeat timeout or not.
#[test]
fn append_lock_two_nodes_with_a_pause() {
    assert_appends_hold("append lock 2 nodes", append_config(), 5_000_000);
}

#[test]
#[ignore = "release: tests/run.sh runs it"]
fn append_lock_three_nodes_with_pauses() {
    let cfg = appendlock::Config {
        nodes: 3,
        chunks: 1,
        ..append_config()
    };
    assert_appends_hold("append lock 3 nodes", cfg, 50_000_000);
}

/// A lease no longer than the budget plus the heartbeat timeout lets a
/// holder paused between its budget check and its store (not long
/// enough to be declared failed) store after its lease lapsed and another
/// node appended at the same end of file: the model finds it.
#[test]
fn a_lease_within_budget_plus_heartbeat_is_caught() {
    let base = append_config();
    let cfg = appendlock::Config {
        lease: base.budget + base.hb - 1,
        max_t: 5,
        ..base
    };
    let r = run_appends("append lock, lease too short", cfg, 5_000_000);
    let v = r.violation.expect("a lease too short must be caught");
    println!("  found: {}\n  {}", v.what, v.trace.join("\n  "));
    assert!(v.what.contains("two holders"), "{}", v.what);
}

/// The append-lock model with a configuration from the environment
/// (N nodes, A appends each, C chunks, B budget, H heartbeat timeout,
/// L lease (default 2B+H), T time bound, P pauses), e.g.
/// `N=3 T=10 cargo test --release -p dirsvc --test model append_from_env -- --ignored --nocapture`.
#[test]
#[ignore = "a tool: the configuration comes from the environment"]
fn append_from_env() {
    let e = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let (budget, hb) = (e("B", 2), e("H", 1));
    let cfg = appendlock::Config {
        nodes: e("N", 2) as u8,
        appends: e("A", 1) as u8,
        chunks: e("C", 2) as u8,
        budget,
        hb,
        lease: e("L", 2 * budget + hb),
        max_t: e("T", 6),
        pauses: e("P", 1) as u8,
    };
    assert_appends_hold("append from_env", cfg, 200_000_000);
}
