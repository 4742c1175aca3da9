//! SIGINT and SIGTERM in `onecopy-bench`: the first one stops every
//! cluster and script the runner started, at once, and tells the runner
//! to stop after the step it is in, so that it still writes its report
//! (marked partial) and exits 128 + the signal; a second one exits at
//! once (the watchdog processes then stop what is left).
//!
//! The signals are caught on a thread of their own (`signal-hook`), so
//! the handler may run processes: `qemu-run.sh stop` for each registered
//! run dir, SIGTERM to each registered process group.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// The first signal caught (0: none).
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// What the handler stops, each with its registration number.
static LIVE: Mutex<Vec<(u64, Target)>> = Mutex::new(Vec::new());

/// Registration numbers.
static NEXT: Mutex<u64> = Mutex::new(0);

#[derive(Debug, Clone)]
enum Target {
    /// A cluster: `qemu-run.sh stop --run-dir DIR` with this onecopy-ctl.
    RunDir { run_dir: PathBuf, ctl: PathBuf },
    /// A script's process group: SIGTERM.
    Group(u32),
}

/// Something the handler stops; dropping it (once the runner stopped
/// it itself) takes it off the list.
#[derive(Debug)]
pub struct Registration(u64);

impl Drop for Registration {
    fn drop(&mut self) {
        if let Ok(mut l) = LIVE.lock() {
            l.retain(|(id, _)| *id != self.0);
        }
    }
}

fn register(t: Target) -> Registration {
    let id = match NEXT.lock() {
        Ok(mut n) => {
            *n += 1;
            *n
        }
        Err(_) => 0,
    };
    if let Ok(mut l) = LIVE.lock() {
        l.push((id, t));
    }
    Registration(id)
}

/// The cluster in `run_dir` is to be stopped on a signal.
pub fn register_run_dir(run_dir: &Path, ctl: &Path) -> Registration {
    register(Target::RunDir {
        run_dir: run_dir.to_path_buf(),
        ctl: ctl.to_path_buf(),
    })
}

/// Process group `pgid` (a script and its clusters) is to get SIGTERM on
/// a signal.
pub fn register_group(pgid: u32) -> Registration {
    register(Target::Group(pgid))
}

/// The signal that interrupted the run, if one did.
pub fn interrupted() -> Option<i32> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// `SIGINT`, `SIGTERM` or `signal N`.
pub fn signal_name(sig: i32) -> String {
    match sig {
        SIGINT => "SIGINT".into(),
        SIGTERM => "SIGTERM".into(),
        n => format!("signal {n}"),
    }
}

/// The exit status after `sig`: 128 + its number, as a shell reports it.
pub fn exit_status(sig: i32) -> u8 {
    u8::try_from(128 + sig.clamp(0, 127)).unwrap_or(255)
}

/// Catches SIGINT and SIGTERM from now on (once per process).
pub fn install() -> Result<(), String> {
    let mut signals = Signals::new([SIGINT, SIGTERM]).map_err(|e| format!("signals: {e}"))?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                if SIGNAL
                    .compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst)
                    .is_err()
                {
                    eprintln!(
                        "onecopy-bench: {} again: exiting now (the watchdogs stop what is left)",
                        signal_name(sig)
                    );
                    std::process::exit(i32::from(exit_status(sig)));
                }
                eprintln!(
                    "onecopy-bench: {}: stopping every cluster, then writing the partial report \
                     (again to exit at once)",
                    signal_name(sig)
                );
                stop_all();
            }
        })
        .map_err(|e| format!("signal thread: {e}"))?;
    Ok(())
}

/// Stops everything registered now (the registrations stay: the runner
/// stops them again, which does nothing, and drops them).
fn stop_all() {
    let targets: Vec<Target> = match LIVE.lock() {
        Ok(l) => l.iter().map(|(_, t)| t.clone()).collect(),
        Err(_) => return,
    };
    for t in targets {
        match t {
            Target::Group(pgid) => {
                let _ = Command::new("kill")
                    .args(["-TERM", "--", &format!("-{pgid}")])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
            Target::RunDir { run_dir, ctl } => {
                let r = crate::qemu_run(
                    &["stop", "--run-dir", &run_dir.to_string_lossy()],
                    &ctl,
                    Duration::from_secs(60),
                );
                if let Err(e) = r {
                    eprintln!(
                        "onecopy-bench: stopping {}: {e} (its watchdog stops it when this \
                         process ends)",
                        run_dir.display()
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_status() {
        assert_eq!(signal_name(SIGINT), "SIGINT");
        assert_eq!(signal_name(SIGTERM), "SIGTERM");
        assert_eq!(exit_status(SIGINT), 130);
        assert_eq!(exit_status(SIGTERM), 143);
    }

    #[test]
    fn registrations_come_off_when_dropped() {
        let count = || LIVE.lock().unwrap().len();
        let before = count();
        let a = register_group(999_999);
        let b = register_run_dir(Path::new("/nonexistent"), Path::new("/nonexistent"));
        assert_eq!(count(), before + 2);
        drop(a);
        assert_eq!(count(), before + 1);
        drop(b);
        assert_eq!(count(), before);
    }
}
