//! Host side helpers: paths, run folders, host commands with a timeout,
//! `qemu-run.sh`, `mkfs` and `inspect`.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// The repository root: `$ONECOPY_ROOT`, else the parent of this crate.
pub fn repo_root() -> PathBuf {
    if let Some(root) = std::env::var_os("ONECOPY_ROOT") {
        return PathBuf::from(root);
    }
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let manifest = fs::canonicalize(&manifest).unwrap_or(manifest);
    manifest.parent().map(Path::to_path_buf).unwrap_or(manifest)
}

/// Cargo's target directory (`$CARGO_TARGET_DIR` or `<root>/target`).
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => {
            let d = PathBuf::from(d);
            if d.is_absolute() {
                d
            } else {
                repo_root().join(d)
            }
        }
        None => repo_root().join("target"),
    }
}

/// A release host tool (`mkfs`, `inspect`) built by `cargo build --release -p flatfs --bins`.
pub fn host_tool(name: &str) -> PathBuf {
    target_dir().join("release").join(name)
}

/// The `onecopy-ctl` helper: `$ONECOPY_CTL`, else the newest of
/// `target/{debug,release}/onecopy-ctl`.
pub fn default_ctl() -> PathBuf {
    if let Some(p) = std::env::var_os("ONECOPY_CTL") {
        return PathBuf::from(p);
    }
    let candidates = [
        target_dir().join("debug/onecopy-ctl"),
        target_dir().join("release/onecopy-ctl"),
    ];
    candidates
        .iter()
        .filter_map(|p| Some((fs::metadata(p).ok()?.modified().ok()?, p)))
        .max()
        .map(|(_, p)| p.clone())
        .unwrap_or_else(|| candidates[0].clone())
}

/// Serialises clusters within one test process: a test run with several
/// threads still boots one cluster at a time.
pub fn serial_guard() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Creates a fresh, unique run directory `target/test-runs/<name>-<pid>-<n>`
/// (under the temp dir if that path would be too long for unix sockets).
pub fn unique_run_dir(name: &str) -> Result<PathBuf> {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(24)
        .collect();
    let mut base = target_dir().join("test-runs");
    // Console sockets live in the run dir and a unix socket path is limited
    // to 107 bytes: fall back to the temp dir for very deep checkouts.
    if base.as_os_str().len() + clean.len() + 40 > 100 {
        base = std::env::temp_dir().join("onecopy-test-runs");
    }
    fs::create_dir_all(&base).map_err(|e| Error::io(format!("create {}", base.display()), e))?;
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("{clean}-{}-{n}", std::process::id()));
        match fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(Error::io(format!("create {}", dir.display()), e)),
        }
    }
}

/// Output of a host command run by the harness.
#[derive(Debug, Clone)]
pub struct HostOutput {
    /// Exit code (`None`: killed by a signal or by the timeout).
    pub code: Option<i32>,
    /// True if the timeout killed it.
    pub timed_out: bool,
    /// Standard output.
    pub stdout: Vec<u8>,
    /// Standard error.
    pub stderr: Vec<u8>,
}

impl HostOutput {
    /// Standard output as text.
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
    /// Standard error as text.
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
    /// Both, stdout first.
    pub fn text(&self) -> String {
        format!("{}{}", self.stdout_text(), self.stderr_text())
    }
}

/// Runs `cmd` with stdin closed, collecting stdout and stderr, killing it
/// after `timeout`. Output written after the process exited by children that
/// inherited its pipes is not waited for beyond two seconds.
pub fn run_with_timeout(mut cmd: Command, timeout: Duration) -> Result<HostOutput> {
    let desc = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::io(format!("spawn {desc}"), e))?;
    let collect = |r: Option<Box<dyn Read + Send>>| {
        let buf = Arc::new(Mutex::new((Vec::new(), false)));
        if let Some(mut r) = r {
            let b = Arc::clone(&buf);
            thread::spawn(move || {
                let mut tmp = [0u8; 8192];
                loop {
                    match r.read(&mut tmp) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => b
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .0
                            .extend_from_slice(&tmp[..n]),
                    }
                }
                b.lock().unwrap_or_else(|e| e.into_inner()).1 = true;
            });
        } else {
            buf.lock().unwrap_or_else(|e| e.into_inner()).1 = true;
        }
        buf
    };
    let out = collect(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let err = collect(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + timeout;
    let mut timed_out = false;
    let status: Option<ExitStatus> = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) if Instant::now() >= deadline => {
                timed_out = true;
                let _ = child.kill();
                break child.wait().ok();
            }
            Ok(None) => thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(Error::io(format!("wait for {desc}"), e)),
        }
    };
    let eof_deadline = Instant::now() + Duration::from_secs(2);
    let take = |b: &Arc<Mutex<(Vec<u8>, bool)>>| loop {
        let g = b.lock().unwrap_or_else(|e| e.into_inner());
        if g.1 || Instant::now() >= eof_deadline {
            return g.0.clone();
        }
        drop(g);
        thread::sleep(Duration::from_millis(10));
    };
    Ok(HostOutput {
        code: if timed_out {
            None
        } else {
            status.and_then(|s| s.code())
        },
        timed_out,
        stdout: take(&out),
        stderr: take(&err),
    })
}

/// Runs `./qemu-run.sh ARGS` from the repository root with `onecopy-ctl` at
/// `ctl`, with a timeout.
pub fn qemu_run(args: &[&str], ctl: &Path, timeout: Duration) -> Result<HostOutput> {
    let root = repo_root();
    let mut cmd = Command::new("bash");
    cmd.arg(root.join("qemu-run.sh"))
        .args(args)
        .current_dir(&root)
        .env("ONECOPY_CTL", ctl);
    run_with_timeout(cmd, timeout)
}

/// Builds a disk image with the host `mkfs` (`from`: a folder to copy in).
pub fn mkfs(image: &Path, size_mb: u32, from: Option<&Path>) -> Result<()> {
    let mut cmd = Command::new(host_tool("mkfs"));
    cmd.arg("--size-mb").arg(size_mb.to_string());
    if let Some(dir) = from {
        cmd.arg("--from").arg(dir);
    }
    cmd.arg(image);
    let out = run_with_timeout(cmd, Duration::from_secs(120))?;
    if out.code != Some(0) {
        return Err(Error::Usage(format!(
            "mkfs {} failed ({:?}): {}",
            image.display(),
            out.code,
            out.text()
        )));
    }
    Ok(())
}

/// Builds a disk image holding application datasets (`mkfs --dataset
/// SPEC` for each of `datasets`, e.g. `kv:4m`).
pub fn mkfs_datasets(image: &Path, datasets: &[&str]) -> Result<()> {
    let mut cmd = Command::new(host_tool("mkfs"));
    cmd.arg("--size-mb").arg("16");
    for d in datasets {
        cmd.arg("--dataset").arg(d);
    }
    cmd.arg(image);
    let out = run_with_timeout(cmd, Duration::from_secs(300))?;
    if out.code != Some(0) {
        return Err(Error::Usage(format!(
            "mkfs --dataset {} failed ({:?}): {}",
            image.display(),
            out.code,
            out.text()
        )));
    }
    Ok(())
}

/// Runs the host `inspect IMAGE ARGS...`.
pub fn inspect(image: &Path, args: &[&str]) -> Result<HostOutput> {
    let mut cmd = Command::new(host_tool("inspect"));
    cmd.arg(image).args(args);
    run_with_timeout(cmd, Duration::from_secs(120))
}

/// The last `n` lines of `text`.
pub fn tail_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
