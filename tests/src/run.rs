//! The run directory of one cluster, as `qemu-run.sh` lays it out:
//!
//! | file | content |
//! | --- | --- |
//! | `cluster.env` | `KEY='value'` lines: NODES, ACCEL, SHM_PATH, DISK, START_MS, STATE, ... |
//! | `NAME.log` | everything the instance wrote to its serial port |
//! | `NAME.sock` | the serial console (QEMU unix-socket chardev, one client at a time) |
//! | `NAME.pid` | pid of the instance's QEMU process |
//! | `NAME.pgid` | process group (session) of its wrapper, which also holds QEMU |
//! | `NAME.exit` | QEMU's exit status once it exited (1 = clean shutdown, 3 = panic, 135 = SIGBUS: the shared region shrank, 128+N = signal N) |
//! | `NAME.stderr` | QEMU's own messages (errors), and the wrapper's note when a signal killed QEMU |
//! | `cluster.lock` | held (flock) by the launcher, every wrapper and QEMU while the cluster lives |
//!
//! NAME is `dir` for the directory and `nodeK` for node K.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// One instance of a cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Instance {
    /// The directory instance.
    Dir,
    /// Node K (1-based).
    Node(u8),
}

impl Instance {
    /// `0` means the directory, K > 0 node K.
    pub fn from_number(k: u8) -> Instance {
        if k == 0 {
            Instance::Dir
        } else {
            Instance::Node(k)
        }
    }

    /// Parses `dir`, `nodeK`, `nK` or `K` (0 = dir).
    pub fn parse(s: &str) -> Option<Instance> {
        let s = s.trim();
        if s == "dir" {
            return Some(Instance::Dir);
        }
        let digits = s
            .strip_prefix("node")
            .or_else(|| s.strip_prefix('n'))
            .unwrap_or(s);
        if digits.is_empty() || digits.len() > 3 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse::<u8>().ok().map(Instance::from_number)
    }

    /// File-name stem: `dir` or `nodeK`.
    pub fn name(self) -> String {
        match self {
            Instance::Dir => "dir".to_string(),
            Instance::Node(k) => format!("node{k}"),
        }
    }

    /// Short label used in prefixes: `dir` or `nK`.
    pub fn label(self) -> String {
        match self {
            Instance::Dir => "dir".to_string(),
            Instance::Node(k) => format!("n{k}"),
        }
    }

    /// The directory followed by nodes 1..=n.
    pub fn all(nodes: u8) -> Vec<Instance> {
        std::iter::once(Instance::Dir)
            .chain((1..=nodes).map(Instance::Node))
            .collect()
    }
}

impl std::fmt::Display for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

/// What an exit status of an instance's QEMU means.
pub fn describe_exit(status: i32) -> &'static str {
    match status {
        0 => "QEMU stopped (signal or quit)",
        1 => "clean shutdown, or a QEMU error",
        3 => "kernel panic or CPU exception",
        135 => "SIGBUS: the shared region shrank or vanished",
        129..=191 => "killed by a signal: status 128 + its number",
        _ => "QEMU error",
    }
}

/// Parses `cluster.env` text: `KEY=value` or `KEY='value'` lines; `#`
/// comments and blank lines are skipped.
pub fn parse_env(text: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let v = v.trim();
        let v = v
            .strip_prefix('\'')
            .and_then(|v| v.strip_suffix('\''))
            .or_else(|| v.strip_prefix('"').and_then(|v| v.strip_suffix('"')))
            .unwrap_or(v);
        map.insert(k.trim().to_string(), v.to_string());
    }
    map
}

/// True if process `pid` exists and is not a zombie.
pub fn pid_alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => match stat.rsplit_once(')') {
            Some((_, rest)) => !matches!(rest.trim_start().chars().next(), Some('Z' | 'X') | None),
            None => false,
        },
        Err(_) => false,
    }
}

/// A cluster's run directory.
#[derive(Debug, Clone)]
pub struct RunDir {
    path: PathBuf,
}

impl RunDir {
    /// Wraps a run directory path.
    pub fn new(path: impl Into<PathBuf>) -> RunDir {
        RunDir { path: path.into() }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `NAME<suffix>` inside the run directory.
    pub fn file(&self, inst: Instance, suffix: &str) -> PathBuf {
        self.path.join(format!("{}{suffix}", inst.name()))
    }

    /// Serial log of an instance.
    pub fn log_path(&self, inst: Instance) -> PathBuf {
        self.file(inst, ".log")
    }

    /// Console socket of an instance.
    pub fn socket_path(&self, inst: Instance) -> PathBuf {
        self.file(inst, ".sock")
    }

    /// The serial log so far (lossy UTF-8; empty if there is none).
    pub fn log(&self, inst: Instance) -> String {
        fs::read(self.log_path(inst))
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// QEMU's own stderr output (empty if none).
    pub fn stderr(&self, inst: Instance) -> String {
        fs::read(self.file(inst, ".stderr"))
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// `cluster.env` as a map (empty if missing).
    pub fn env(&self) -> BTreeMap<String, String> {
        fs::read_to_string(self.path.join("cluster.env"))
            .map(|t| parse_env(&t))
            .unwrap_or_default()
    }

    /// Number of nodes from `cluster.env`.
    pub fn nodes(&self) -> Option<u8> {
        self.env().get("NODES").and_then(|n| n.parse().ok())
    }

    fn read_number(&self, inst: Instance, suffix: &str) -> Option<i64> {
        fs::read_to_string(self.file(inst, suffix))
            .ok()
            .and_then(|s| s.trim().parse().ok())
    }

    /// Pid of the instance's QEMU, if recorded.
    pub fn pid(&self, inst: Instance) -> Option<u32> {
        self.read_number(inst, ".pid")
            .and_then(|p| u32::try_from(p).ok())
            .filter(|&p| p > 1)
    }

    /// QEMU's exit status, once the instance exited.
    pub fn exit_status(&self, inst: Instance) -> Option<i32> {
        self.read_number(inst, ".exit")
            .and_then(|s| i32::try_from(s).ok())
    }

    /// True if the instance's QEMU is running.
    pub fn alive(&self, inst: Instance) -> bool {
        self.pid(inst).is_some_and(pid_alive)
    }

    /// Live processes (QEMU, the wrappers, a launcher or helper still
    /// running) whose command line mentions this run directory.
    pub fn processes(&self) -> Vec<u32> {
        let needle = format!("{}/", self.path.display());
        let me = std::process::id();
        let Ok(rd) = fs::read_dir("/proc") else {
            return Vec::new();
        };
        let mut pids: Vec<u32> = rd
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|&pid| pid != me && pid_alive(pid))
            .filter(|pid| {
                fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&needle))
            })
            .collect();
        pids.sort_unstable();
        pids
    }

    /// Shared regions of this run directory's cluster: `SHM_PATH` of
    /// `cluster.env` and every `mem-path=` in the command line of one of
    /// [`RunDir::processes`] (all of them, even if cluster.env lost track).
    pub fn shm_paths(&self) -> BTreeSet<PathBuf> {
        let mut paths: BTreeSet<PathBuf> = self
            .env()
            .get("SHM_PATH")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .into_iter()
            .collect();
        for pid in self.processes() {
            let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else {
                continue;
            };
            for arg in String::from_utf8_lossy(&cmdline).split('\0') {
                for opt in arg.split(',') {
                    if let Some(p) = opt.strip_prefix("mem-path=") {
                        paths.insert(PathBuf::from(p));
                    }
                }
            }
        }
        paths
    }

    /// A one-line description of why an instance is not running, or `None`
    /// if it runs (or was never started).
    pub fn exit_reason(&self, inst: Instance) -> Option<String> {
        let pid = self.pid(inst)?;
        if pid_alive(pid) {
            return None;
        }
        let mut s = match self.exit_status(inst) {
            Some(st) => format!("{inst} exited with status {st} ({})", describe_exit(st)),
            None => format!("{inst} (pid {pid}) is gone"),
        };
        if let Some(first) = self.stderr(inst).lines().find(|l| !l.trim().is_empty()) {
            s.push_str(": ");
            s.push_str(first.trim());
        }
        Some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instances() {
        assert_eq!(Instance::parse("dir"), Some(Instance::Dir));
        assert_eq!(Instance::parse("0"), Some(Instance::Dir));
        assert_eq!(Instance::parse("node3"), Some(Instance::Node(3)));
        assert_eq!(Instance::parse("n12"), Some(Instance::Node(12)));
        assert_eq!(Instance::parse("7"), Some(Instance::Node(7)));
        assert_eq!(Instance::parse("x"), None);
        assert_eq!(Instance::parse("n"), None);
        assert_eq!(Instance::parse("node-1"), None);
        assert_eq!(Instance::parse("9999"), None);
        assert_eq!(Instance::Node(2).name(), "node2");
        assert_eq!(Instance::Node(2).label(), "n2");
        assert_eq!(Instance::Dir.label(), "dir");
        assert_eq!(
            Instance::all(2),
            vec![Instance::Dir, Instance::Node(1), Instance::Node(2)]
        );
    }

    #[test]
    fn env_file() {
        let env =
            parse_env("# c\nNODES=2\nSHM_PATH='/dev/shm/onecopy-x'\n\nPIDS=\"1 2\"\nbad line\n");
        assert_eq!(env.get("NODES").map(String::as_str), Some("2"));
        assert_eq!(
            env.get("SHM_PATH").map(String::as_str),
            Some("/dev/shm/onecopy-x")
        );
        assert_eq!(env.get("PIDS").map(String::as_str), Some("1 2"));
        assert_eq!(env.len(), 3);
    }

    #[test]
    fn liveness() {
        assert!(pid_alive(std::process::id()));
        assert!(!pid_alive(u32::MAX - 1));
    }

    #[test]
    fn run_dir_files() {
        let dir = std::env::temp_dir().join(format!("onecopy-rundir-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let run = RunDir::new(&dir);
        fs::write(dir.join("node1.pid"), "4294967294\n").unwrap();
        fs::write(dir.join("node1.exit"), "3\n").unwrap();
        fs::write(dir.join("node1.stderr"), "\nqemu: boom\n").unwrap();
        fs::write(dir.join("cluster.env"), "NODES='4'\n").unwrap();
        assert_eq!(run.nodes(), Some(4));
        assert_eq!(run.pid(Instance::Node(1)), Some(4294967294));
        assert!(!run.alive(Instance::Node(1)));
        assert_eq!(
            run.exit_reason(Instance::Node(1)).as_deref(),
            Some("node1 exited with status 3 (kernel panic or CPU exception): qemu: boom")
        );
        assert_eq!(run.exit_reason(Instance::Node(2)), None);
        assert_eq!(run.log(Instance::Dir), "");
        fs::remove_dir_all(&dir).unwrap();
    }
}
