//! What `--policies` runs: the three scripts (bench-promote.sh twice, in
//! relaxed and in strong mode), their arguments and time limits, for a
//! quick or a full run. Pure.

use std::time::Duration;

/// Which script a step is (and so how its output is read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `tools/bench-policy-apps.sh`: cache_ext's three workloads.
    Apps,
    /// `tools/bench-cluster-policy.sh`: webserver on N nodes.
    Cluster,
    /// `tools/bench-promote.sh --mode M`: CH-R latency, promotion off /
    /// on, in mode M.
    Promote(TierMode),
}

/// The cluster mode of a tiering run (bench-promote.sh's `--mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TierMode {
    /// Relaxed: a node keeps its replicas on its own.
    Relaxed,
    /// Strong: the directory grants each replica and revokes it before
    /// any write to the page.
    Strong,
}

impl TierMode {
    /// Its name, as `--mode` and the RESULT's `mode` spell it.
    pub fn name(self) -> &'static str {
        match self {
            TierMode::Relaxed => "relaxed",
            TierMode::Strong => "strong",
        }
    }
}

impl Kind {
    /// The script's file name under tools/.
    pub fn script(self) -> &'static str {
        match self {
            Kind::Apps => "bench-policy-apps.sh",
            Kind::Cluster => "bench-cluster-policy.sh",
            Kind::Promote(_) => "bench-promote.sh",
        }
    }

    /// The script's name, with the mode where it runs more than once
    /// (`bench-promote.sh (strong mode)`): for logs, problems, the report.
    pub fn label(self) -> String {
        match self {
            Kind::Promote(m) => format!("{} ({} mode)", self.script(), m.name()),
            _ => self.script().to_string(),
        }
    }

    /// The name of its log under DIR/policies/, one per step
    /// (`bench-promote-strong.log`).
    pub fn log_name(self) -> String {
        let stem = self.script().trim_end_matches(".sh");
        match self {
            Kind::Promote(m) => format!("{stem}-{}.log", m.name()),
            _ => format!("{stem}.log"),
        }
    }

    /// What it measures, for the report.
    pub fn title(self) -> &'static str {
        match self {
            Kind::Apps => "cache_ext's workloads, every policy (1 node)",
            Kind::Cluster => "multi-node: webserver, cluster-aware vs LRU",
            Kind::Promote(TierMode::Relaxed) => {
                "tiering, relaxed mode: CH-R latency, promotion off / on"
            }
            Kind::Promote(TierMode::Strong) => {
                "tiering, strong mode: CH-R latency, promotion off / on"
            }
        }
    }
}

/// One script run.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Which script.
    pub kind: Kind,
    /// Its arguments (`--no-build` first: bench-report.sh built
    /// everything).
    pub args: Vec<String>,
    /// Its limit: the script's process group is sent SIGTERM then.
    pub timeout: Duration,
}

impl Step {
    /// `tools/NAME ARGS`, quoted where an argument has a space.
    pub fn command_line(&self) -> String {
        let mut s = format!("tools/{}", self.kind.script());
        for a in &self.args {
            if a.contains(' ') || a.is_empty() {
                s.push_str(&format!(" \"{a}\""));
            } else {
                s.push(' ');
                s.push_str(a);
            }
        }
        s
    }
}

/// The policies of a quick run (fifo first: the baseline).
pub const QUICK_POLICIES: &str = "fifo lru lfu mru get-scan cluster";

/// The emulated CXL latency of the tiering run: 250 ns, inside the
/// CXL-pools slides' 278-363 ns less a DDR access.
pub const CXL_LATENCY_NS: u32 = 250;

/// Grace between SIGTERM and SIGKILL of a script's process group: its
/// EXIT trap stops its cluster (`qemu-run.sh stop`) meanwhile.
pub const KILL_GRACE: Duration = Duration::from_secs(60);

fn args(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// bench-promote.sh in `mode` (`--mode` always given, though relaxed is
/// its default): quick, one 1 s round; full, the script's defaults.
fn promote_step(mode: TierMode, quick: bool) -> Step {
    let cxl = CXL_LATENCY_NS.to_string();
    let mut a = args(&[
        "--no-build",
        "--mode",
        mode.name(),
        "--cxl-latency-ns",
        &cxl,
    ]);
    if quick {
        a.extend(args(&["--runtime", "1", "--rounds", "1"]));
    }
    Step {
        kind: Kind::Promote(mode),
        args: a,
        timeout: Duration::from_secs(if quick { 10 } else { 20 } * 60),
    }
}

/// The four steps, in the order they run: policy-apps, cluster-policy,
/// then promote in relaxed and in strong mode. The limits are many times
/// what the runs take on the 2-core TCG host (quick: 60 s, 12 s and 6 s
/// per promote run; full: policy-apps about 6 minutes, the others a few),
/// so only a hung run meets them.
pub fn steps(quick: bool) -> Vec<Step> {
    if quick {
        vec![
            Step {
                kind: Kind::Apps,
                args: args(&[
                    "--no-build",
                    "--runtime",
                    "1",
                    "--passes",
                    "1",
                    "--policies",
                    QUICK_POLICIES,
                ]),
                timeout: Duration::from_secs(20 * 60),
            },
            Step {
                kind: Kind::Cluster,
                args: args(&[
                    "--no-build",
                    "--nodes",
                    "2",
                    "--runtime",
                    "2",
                    "--rounds",
                    "1",
                    "--size",
                    "8m",
                    "--limit",
                    "512",
                ]),
                timeout: Duration::from_secs(15 * 60),
            },
            promote_step(TierMode::Relaxed, true),
            promote_step(TierMode::Strong, true),
        ]
    } else {
        vec![
            Step {
                kind: Kind::Apps,
                args: args(&["--no-build"]),
                timeout: Duration::from_secs(60 * 60),
            },
            Step {
                kind: Kind::Cluster,
                args: args(&["--no-build"]),
                timeout: Duration::from_secs(40 * 60),
            },
            promote_step(TierMode::Relaxed, false),
            promote_step(TierMode::Strong, false),
        ]
    }
}
