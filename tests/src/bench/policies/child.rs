//! Runs one script in its own process group with a time limit, its
//! stdout and stderr into one log file. On expiry the group gets SIGTERM
//! (the scripts' EXIT traps and qemu-run.sh stop their clusters on it),
//! then SIGKILL after a grace period. A watchdog process sends the same
//! SIGTERM if onecopy-bench itself goes away first (Ctrl-C, kill), since
//! a terminal's signals do not reach the script's own group.

use std::fs::{self, File};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::plan::{Step, KILL_GRACE};

/// How a script run ended.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// Exit code (None: not started, or ended by a signal).
    pub code: Option<i32>,
    /// It met its time limit and was killed.
    pub timed_out: bool,
    /// Wall time, seconds.
    pub seconds: f64,
    /// Why it could not be started (or its log not read).
    pub error: Option<String>,
    /// Its log: stdout and stderr as they came.
    pub text: String,
}

impl Outcome {
    /// Exit 0 within its limit.
    pub fn ok(&self) -> bool {
        self.error.is_none() && !self.timed_out && self.code == Some(0)
    }

    /// One line on what went wrong (None when it went right).
    pub fn failure(&self) -> Option<String> {
        if let Some(e) = &self.error {
            return Some(e.clone());
        }
        if self.timed_out {
            return Some(format!(
                "timed out after {:.0} s (process group killed)",
                self.seconds
            ));
        }
        match self.code {
            Some(0) => None,
            Some(c) => Some(format!("exit status {c}")),
            None => Some("ended by a signal".into()),
        }
    }
}

/// Sends `sig` (`TERM`, `KILL`, `0`) to process group `pgid`; true when
/// some process got it (for `0`: the group still exists).
fn signal_group(pgid: u32, sig: &str) -> bool {
    Command::new("kill")
        .arg(format!("-{sig}"))
        .arg("--")
        .arg(format!("-{pgid}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// The watchdog: while this process and the group live, wait; if this
/// process is gone first, SIGTERM the group, SIGKILL it after the grace.
fn spawn_watchdog(pgid: u32) -> Option<Child> {
    let script = r#"while kill -0 "$1" 2>/dev/null && kill -0 -- "-$2" 2>/dev/null; do sleep 1; done
kill -0 "$1" 2>/dev/null && exit 0
kill -TERM -- "-$2" 2>/dev/null || exit 0
sleep "$3"
kill -KILL -- "-$2" 2>/dev/null || true"#;
    Command::new("bash")
        .arg("-c")
        .arg(script)
        .arg("onecopy-bench-policies-guard")
        .arg(std::process::id().to_string())
        .arg(pgid.to_string())
        .arg(KILL_GRACE.as_secs().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .ok()
}

/// Waits up to `limit` for `child`; its exit code, or None on expiry.
fn wait_for(child: &mut Child, limit: Duration) -> Result<Option<Option<i32>>, String> {
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(st)) => return Ok(Some(st.code())),
            Ok(None) if Instant::now() >= deadline => return Ok(None),
            Ok(None) => thread::sleep(Duration::from_millis(200)),
            Err(e) => return Err(format!("waiting for the script: {e}")),
        }
    }
}

/// Runs `step` from the repository root `root`, its output into `log`.
pub fn run_step(root: &Path, step: &Step, log: &Path) -> Outcome {
    let t0 = Instant::now();
    let mut out = Outcome::default();
    let files = File::create(log).and_then(|f| Ok((f.try_clone()?, f)));
    let (stdout, stderr) = match files {
        Ok(f) => f,
        Err(e) => {
            out.error = Some(format!("cannot create {}: {e}", log.display()));
            return out;
        }
    };
    let spawned = Command::new(root.join("tools").join(step.kind.script()))
        .args(&step.args)
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr))
        .process_group(0)
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            out.error = Some(format!("cannot start tools/{}: {e}", step.kind.script()));
            return out;
        }
    };
    let pgid = child.id();
    let mut guard = spawn_watchdog(pgid);
    // SIGINT / SIGTERM to onecopy-bench: SIGTERM to the script's group
    // at once (its EXIT trap stops its clusters).
    let _registration = crate::bench::interrupt::register_group(pgid);
    let mut epilogue = String::new();
    match wait_for(&mut child, step.timeout) {
        Ok(Some(code)) => out.code = code,
        Ok(None) => {
            out.timed_out = true;
            signal_group(pgid, "TERM");
            let t = Instant::now();
            // The leader first, then whatever else of the group is left.
            let code = wait_for(&mut child, KILL_GRACE).ok().flatten();
            while signal_group(pgid, "0") && t.elapsed() < KILL_GRACE {
                thread::sleep(Duration::from_millis(500));
            }
            let killed = signal_group(pgid, "KILL");
            if code.is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
            epilogue = format!(
                "\n[onecopy-bench] time limit of {} s reached: SIGTERM to the script's process group{}\n",
                step.timeout.as_secs(),
                if killed {
                    format!(", SIGKILL {} s later", KILL_GRACE.as_secs())
                } else {
                    String::new()
                }
            );
        }
        Err(e) => {
            signal_group(pgid, "TERM");
            out.error = Some(e);
            let _ = child.wait();
        }
    }
    if let Some(g) = guard.as_mut() {
        signal_group(g.id(), "KILL");
        let _ = g.wait();
    }
    out.seconds = t0.elapsed().as_secs_f64();
    match fs::read(log) {
        Ok(b) => out.text = String::from_utf8_lossy(&b).into_owned(),
        Err(e) => {
            if out.error.is_none() {
                out.error = Some(format!("cannot read {}: {e}", log.display()));
            }
        }
    }
    if !epilogue.is_empty() {
        out.text.push_str(&epilogue);
        let _ = fs::write(log, &out.text);
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::run_step;
    use crate::bench::policies::plan::{Kind, Step, TierMode};

    /// A script that outlives its limit is killed with its whole process
    /// group (here a background `sleep` it started); one that fails keeps
    /// its output and exit status.
    #[test]
    fn child_time_limit_kills_the_group() {
        use std::os::unix::fs::PermissionsExt;
        let root =
            std::env::temp_dir().join(format!("onecopy-policies-test-{}", std::process::id()));
        let tools = root.join("tools");
        std::fs::create_dir_all(&tools).unwrap();
        let script = tools.join(Kind::Promote(TierMode::Relaxed).script());
        let marker = format!("onecopy-policies-test-sleep-{}", std::process::id());
        std::fs::write(&script, format!("#!/bin/bash\necho ROW '{{}}'\necho oops >&2\nbash -c 'exec -a {marker} sleep 300' &\nsleep 300\n")).unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let step = Step {
            kind: Kind::Promote(TierMode::Relaxed),
            args: vec![],
            timeout: Duration::from_secs(1),
        };
        let log = root.join("p.log");
        let o = run_step(&root, &step, &log);
        assert!(o.timed_out && !o.ok(), "{o:?}");
        assert!(
            o.text.contains("ROW {}")
                && o.text.contains("oops")
                && o.text.contains("time limit of 1 s"),
            "{}",
            o.text
        );
        assert!(o.seconds < 30.0, "{}", o.seconds);
        let left = std::process::Command::new("pgrep")
            .arg("-f")
            .arg(&marker)
            .output()
            .unwrap();
        assert!(
            left.stdout.is_empty(),
            "left running: {}",
            String::from_utf8_lossy(&left.stdout)
        );
        std::fs::write(&script, "#!/bin/bash\necho hello\nexit 3\n").unwrap();
        let o = run_step(
            &root,
            &Step {
                timeout: Duration::from_secs(30),
                ..step
            },
            &log,
        );
        assert_eq!(
            (o.code, o.timed_out, o.text.as_str()),
            (Some(3), false, "hello\n")
        );
        assert_eq!(o.failure().as_deref(), Some("exit status 3"));
        let _ = std::fs::remove_dir_all(&root);
    }
}
