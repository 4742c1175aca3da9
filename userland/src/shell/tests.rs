//! Shell tests over the in-memory [`MockOs`].

use super::node::format_uptime;
use super::*;
use crate::mock::MockOs;
use crate::os::{LocalityRange, PolicyName};
use crate::pattern;
use alloc::string::ToString;

/// Run one line on node 1, return everything printed.
fn run(os: &mut MockOs, line: &str) -> String {
    let outcome = Shell::new(1).execute(os, line);
    assert_eq!(outcome, Outcome::Continue, "{line:?}");
    assert_eq!(os.open_fds(), 0, "descriptor leaked by {line:?}");
    os.take_out()
}

/// Run a line that must succeed; return its output without the status.
fn ok(os: &mut MockOs, line: &str) -> String {
    let out = run(os, line);
    let body = out
        .strip_suffix("ok\n")
        .unwrap_or_else(|| panic!("{line:?} did not succeed: {out:?}"));
    assert!(body.is_empty() || body.ends_with('\n'), "{out:?}");
    body.to_string()
}

/// Run a line that must fail; return the message after `error: `.
fn err(os: &mut MockOs, line: &str) -> String {
    let out = run(os, line);
    let body = out
        .strip_suffix('\n')
        .unwrap_or_else(|| panic!("{line:?}: no newline: {out:?}"));
    let last = body.rsplit('\n').next().unwrap_or(body);
    let msg = last
        .strip_prefix("error: ")
        .unwrap_or_else(|| panic!("{line:?} did not fail: {out:?}"));
    msg.to_string()
}

fn os_with(files: &[(&str, &[u8])]) -> MockOs {
    let mut os = MockOs::new();
    for (p, d) in files {
        os.put(p, d);
    }
    os
}

mod control;
mod files;
mod framing;
mod groups;
mod node;
mod robustness;
