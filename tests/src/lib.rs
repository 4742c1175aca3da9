//! Host-side test harness for onecopy clusters.
//!
//! A [`Cluster`] is booted through `qemu-run.sh --detach --no-build` in a
//! fresh run directory under `target/test-runs/`; its nodes' shells are
//! driven over their serial consoles (QEMU unix-socket chardevs) with
//! [`Cluster::exec`], and its serial logs are examined with
//! [`Cluster::wait_log`]. Dropping a cluster always stops it; a failing
//! test (a panicking thread) also gets every instance's log on stderr.
//!
//! ```no_run
//! use onecopy_tests::{Cluster, ClusterOpts};
//! let mut c = Cluster::start(ClusterOpts::new("doc").nodes(2))?;
//! c.exec_ok(1, "write /hello hi")?;
//! assert_eq!(c.exec_ok(2, "cat /hello")?.lines, vec!["hi"]);
//! # Ok::<(), onecopy_tests::Error>(())
//! ```
//!
//! The `onecopy-ctl` binary (`src/bin/onecopy-ctl.rs`) exposes the same
//! machinery to `qemu-run.sh`: `wait-ready`, `exec` and `attach`.
#![forbid(unsafe_code)]

pub mod bench;
pub mod cluster;
pub mod console;
pub mod error;
pub mod importcheck;
pub mod peers;
pub mod ready;
pub mod run;
pub mod shell;
pub mod trace;

pub use cluster::{
    default_ctl, host_tool, inspect, mkfs, mkfs_datasets, qemu_run, repo_root, run_with_timeout,
    serial_guard, target_dir, unique_run_dir, with_cluster, Cluster, ClusterOpts, HostOutput,
};
pub use console::{CmdOutput, Console, Status};
pub use error::{Error, Result};
pub use run::{Instance, RunDir};

/// Parses an exec spec `K: command` (K = node number, 1..=`nodes`).
pub fn parse_exec_spec(spec: &str, nodes: u8) -> std::result::Result<(u8, String), String> {
    let Some((k, cmd)) = spec.split_once(':') else {
        return Err(format!("expected 'K: command', got {spec:?}"));
    };
    let k = k.trim();
    if k.is_empty() || k.len() > 3 || !k.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("expected a node number before ':' in {spec:?}"));
    }
    let k: u8 = k
        .parse()
        .map_err(|_| format!("node number out of range in {spec:?}"))?;
    if k == 0 || k > nodes {
        return Err(format!("node {k} out of range 1..{nodes} in {spec:?}"));
    }
    let cmd = cmd.trim();
    if cmd.is_empty() {
        return Err(format!("empty command in {spec:?}"));
    }
    if cmd.contains(['\r', '\n']) {
        return Err(format!("a command may not contain a line break: {spec:?}"));
    }
    Ok((k, cmd.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_specs() {
        assert_eq!(parse_exec_spec("1: ls /", 2), Ok((1, "ls /".into())));
        assert_eq!(parse_exec_spec("2:cat /x", 2), Ok((2, "cat /x".into())));
        assert_eq!(
            parse_exec_spec(" 2 :  write /a b:c ", 2),
            Ok((2, "write /a b:c".into()))
        );
        assert!(parse_exec_spec("nonsense", 2).is_err());
        assert!(parse_exec_spec("3: ls", 2).is_err());
        assert!(parse_exec_spec("0: ls", 2).is_err());
        assert!(parse_exec_spec("x: ls", 2).is_err());
        assert!(parse_exec_spec("1:   ", 2).is_err());
        assert!(parse_exec_spec("1: a\nb", 2).is_err());
        assert!(parse_exec_spec("999: ls", 2).is_err());
        assert!(parse_exec_spec("1000: ls", 2).is_err());
    }
}
