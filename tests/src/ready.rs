//! Deciding from the serial logs whether a cluster is up (used by
//! `onecopy-ctl wait-ready`, hence by `qemu-run.sh`).

use std::time::{Duration, Instant};

use crate::run::{Instance, RunDir};

/// Printed by any instance on a kernel panic or CPU exception.
pub const PANIC_SENTINEL: &str = "!!! ONECOPY PANIC !!!";
/// Printed by the directory once it serves requests.
pub const DIR_READY: &str = "directory ready:";
/// Printed by the directory when the disk image is refused.
pub const DIR_MOUNT_FAILED: &str = "directory: mount failed:";
/// Printed by a node that cannot reach the directory.
pub const DIR_UNAVAILABLE: &str = "directory unavailable";

/// How far a cluster got, as read from its logs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Progress {
    /// The directory printed `directory ready:`.
    pub dir_ready: bool,
    /// `joined[k-1]`: node k printed `node k joined cluster epoch E`.
    pub joined: Vec<bool>,
    /// The first failure seen, if any.
    pub failure: Option<String>,
}

impl Progress {
    /// Directory ready and every node joined.
    pub fn is_ready(&self) -> bool {
        self.dir_ready && self.joined.iter().all(|&j| j)
    }

    /// A one-line summary such as `directory ready; joined: n1; waiting: n2`.
    pub fn summary(&self) -> String {
        let mut s = String::from(if self.dir_ready {
            "directory ready"
        } else {
            "directory not ready"
        });
        let (joined, waiting): (Vec<_>, Vec<_>) =
            (1..=self.joined.len()).partition(|&k| self.joined[k - 1]);
        let fmt = |v: &[usize]| {
            v.iter()
                .map(|k| format!("n{k}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        if !joined.is_empty() {
            s.push_str(&format!("; joined: {}", fmt(&joined)));
        }
        if !waiting.is_empty() {
            s.push_str(&format!("; not joined: {}", fmt(&waiting)));
        }
        s
    }
}

/// The line of `log` containing `needle`, without its line ending.
fn find_line<'a>(log: &'a str, needle: &str) -> Option<&'a str> {
    log.lines()
        .find(|l| l.contains(needle))
        .map(|l| l.trim_end_matches('\r'))
}

/// True if `log` contains `node K joined cluster epoch E` for node `k`.
pub fn node_joined(log: &str, k: u8) -> bool {
    let needle = format!("node {k} joined cluster epoch ");
    log.lines().any(|l| {
        l.find(&needle).is_some_and(|i| {
            l[i + needle.len()..]
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_digit())
        })
    })
}

/// Evaluates the logs: `dir_log` of the directory, `node_logs[k-1]` of node k.
pub fn evaluate(dir_log: &str, node_logs: &[String]) -> Progress {
    let mut p = Progress {
        dir_ready: dir_log.contains(DIR_READY),
        joined: Vec::with_capacity(node_logs.len()),
        failure: None,
    };
    if let Some(l) = find_line(dir_log, DIR_MOUNT_FAILED) {
        p.failure = Some(format!("dir: {}", l.trim()));
    } else if find_line(dir_log, PANIC_SENTINEL).is_some() {
        p.failure = Some("dir: kernel panic (see dir.log)".to_string());
    }
    for (i, log) in node_logs.iter().enumerate() {
        let k = u8::try_from(i + 1).unwrap_or(u8::MAX);
        p.joined.push(node_joined(log, k));
        if p.failure.is_some() {
            continue;
        }
        if find_line(log, PANIC_SENTINEL).is_some() {
            p.failure = Some(format!("node{k}: kernel panic (see node{k}.log)"));
        } else if let Some(l) = find_line(log, DIR_UNAVAILABLE) {
            p.failure = Some(format!("node{k}: {}", l.trim()));
        }
    }
    p
}

/// Outcome of [`wait_ready`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitOutcome {
    /// Everything up.
    Ready(Progress),
    /// A failure was seen (a log line or an instance that exited).
    Failed(String, Progress),
    /// Out of time.
    TimedOut(Progress),
}

/// Polls the logs and processes of a run directory until the directory is
/// ready and all `nodes` joined, a failure shows, or `timeout` passes.
pub fn wait_ready(run: &RunDir, nodes: u8, timeout: Duration) -> WaitOutcome {
    let deadline = Instant::now() + timeout;
    loop {
        let node_logs: Vec<String> = (1..=nodes).map(|k| run.log(Instance::Node(k))).collect();
        let p = evaluate(&run.log(Instance::Dir), &node_logs);
        if let Some(f) = p.failure.clone() {
            return WaitOutcome::Failed(f, p);
        }
        if p.is_ready() {
            return WaitOutcome::Ready(p);
        }
        // An instance that exited: re-read once (its last words may have
        // just reached the log), then report.
        if let Some(reason) = Instance::all(nodes)
            .into_iter()
            .find_map(|i| run.exit_reason(i))
        {
            let node_logs: Vec<String> = (1..=nodes).map(|k| run.log(Instance::Node(k))).collect();
            let p = evaluate(&run.log(Instance::Dir), &node_logs);
            if let Some(f) = p.failure.clone() {
                return WaitOutcome::Failed(f, p);
            }
            if p.is_ready() {
                return WaitOutcome::Ready(p);
            }
            return WaitOutcome::Failed(reason, p);
        }
        if Instant::now() >= deadline {
            return WaitOutcome::TimedOut(p);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joined_lines() {
        let log = "[    0.1] n2 INFO  node 2 joined cluster epoch 7\r\n";
        assert!(node_joined(log, 2));
        assert!(!node_joined(log, 1));
        assert!(!node_joined("node 12 joined cluster epoch 1", 1));
        assert!(node_joined("node 12 joined cluster epoch 1", 12));
        assert!(!node_joined("node 2 joined cluster epoch x", 2));
    }

    #[test]
    fn progress() {
        let dir = "[ 0.1] dir INFO  directory ready: 64 MiB disk\r\n".to_string();
        let n1 = "node 1 joined cluster epoch 1\r\nn1> ".to_string();
        let p = evaluate(&dir, &[n1.clone(), String::new()]);
        assert!(p.dir_ready);
        assert_eq!(p.joined, vec![true, false]);
        assert!(!p.is_ready());
        assert_eq!(p.failure, None);
        assert_eq!(p.summary(), "directory ready; joined: n1; not joined: n2");
        let p = evaluate(&dir, &[n1.clone(), "node 2 joined cluster epoch 1".into()]);
        assert!(p.is_ready());
        let p = evaluate("", &[]);
        assert!(!p.is_ready());
        assert_eq!(p.summary(), "directory not ready");
    }

    #[test]
    fn failures() {
        let p = evaluate(
            "[ 0.1] dir ERROR directory: mount failed: bad magic\r\n",
            &[String::new()],
        );
        assert_eq!(
            p.failure.as_deref(),
            Some("dir: [ 0.1] dir ERROR directory: mount failed: bad magic")
        );
        let p = evaluate(
            "directory ready: x",
            &[
                String::new(),
                "!!! ONECOPY PANIC !!!\r\npanicked at x".into(),
            ],
        );
        assert_eq!(
            p.failure.as_deref(),
            Some("node2: kernel panic (see node2.log)")
        );
        let p = evaluate(
            "directory ready: x",
            &["n1 WARN directory unavailable (timeout)".into()],
        );
        assert_eq!(
            p.failure.as_deref(),
            Some("node1: n1 WARN directory unavailable (timeout)")
        );
    }
}
