//! Start-up and tear-down: the shm file, the socket path, the pid file,
//! the signals.

use std::fs::{self, OpenOptions};
use std::io::{self, ErrorKind};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

use crate::cli::Options;
use crate::log::Log;
use crate::server::Server;

/// Open (or with --create-size, create) the shared-memory file read-write.
/// Never truncates an existing file. Returns the fd and its size.
pub fn open_shm(path: &Path, create_size_mib: Option<u64>) -> Result<(OwnedFd, u64), String> {
    let shown = path.display();
    let mut opts = OpenOptions::new();
    opts.read(true).write(true);
    let (file, created) = match opts.open(path) {
        Ok(f) => (f, false),
        Err(e) if e.kind() == ErrorKind::NotFound => match create_size_mib {
            None => {
                return Err(format!(
                    "shm file {shown} does not exist (create it, or give --create-size MiB)"
                ))
            }
            Some(mib) => {
                let f = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .open(path)
                    .map_err(|e| format!("cannot create shm file {shown}: {e}"))?;
                f.set_len(mib << 20)
                    .map_err(|e| format!("cannot size shm file {shown} to {mib} MiB: {e}"))?;
                (f, true)
            }
        },
        Err(e) => return Err(format!("cannot open shm file {shown} read-write: {e}")),
    };
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot stat shm file {shown}: {e}"))?;
    let size = meta.len();
    if meta.is_dir() {
        return Err(format!("shm path {shown} is a directory"));
    }
    if meta.is_file() && size == 0 {
        return Err(format!("shm file {shown} is empty (QEMU cannot map it)"));
    }
    if let (Some(mib), false) = (create_size_mib, created) {
        if meta.is_file() && size != mib << 20 {
            return Err(format!(
                "shm file {shown} exists with {size} bytes, not the {mib} MiB of --create-size \
                 (it is never resized)"
            ));
        }
    }
    Ok((OwnedFd::from(file), size))
}

/// The path made absolute (as `/proc/net/unix` shows our own sockets).
fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    }
}

/// Is a listening unix socket bound to `path`, per `/proc/net/unix`?
/// `None` if that file cannot be read.
fn listed_as_listening(path: &Path) -> Option<bool> {
    const SO_ACCEPTCON: u32 = 0x0001_0000;
    let table = fs::read_to_string("/proc/net/unix").ok()?;
    let want = path.to_str()?;
    Some(table.lines().skip(1).any(|line| {
        let cols: Vec<&str> = line.split_whitespace().collect();
        cols.len() >= 8
            && cols[7] == want
            && u32::from_str_radix(cols[3], 16).is_ok_and(|f| f & SO_ACCEPTCON != 0)
    }))
}

/// Bind the socket. A stale socket file (no server behind it) is replaced;
/// a live one, or anything that is not a socket, is refused.
pub fn claim_socket(path: &Path, log: Log) -> Result<UnixListener, String> {
    let shown = path.display();
    let abs = absolute(path);
    match fs::symlink_metadata(&abs) {
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot stat socket path {shown}: {e}")),
        Ok(m) if !m.file_type().is_socket() => {
            return Err(format!(
                "socket path {shown} exists and is not a socket (not touching it)"
            ))
        }
        Ok(_) => {
            let live = listed_as_listening(&abs) == Some(true)
                || match UnixStream::connect(&abs) {
                    Ok(_) => true,
                    Err(e) if e.kind() == ErrorKind::ConnectionRefused => false,
                    Err(e) => return Err(format!("cannot probe socket {shown}: {e}")),
                };
            if live {
                return Err(format!("socket {shown} is in use by a live server"));
            }
            fs::remove_file(&abs)
                .map_err(|e| format!("cannot remove stale socket {shown}: {e}"))?;
            log.info(format_args!("removed stale socket {shown}"));
        }
    }
    UnixListener::bind(&abs).map_err(|e| format!("cannot listen on {shown}: {e}"))
}

/// Removes the socket (if it is still ours) and the pid file on drop.
struct Cleanup {
    socket: PathBuf,
    socket_id: Option<(u64, u64)>,
    pid_file: Option<PathBuf>,
}

fn file_id(path: &Path) -> Option<(u64, u64)> {
    fs::symlink_metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if self.socket_id.is_some() && file_id(&self.socket) == self.socket_id {
            let _ = fs::remove_file(&self.socket);
        }
        if let Some(p) = &self.pid_file {
            let _ = fs::remove_file(p);
        }
    }
}

fn block_signals() -> io::Result<SignalFd> {
    let mut mask = SigSet::empty();
    for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        mask.add(s);
    }
    mask.thread_block().map_err(io::Error::from)?;
    SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
        .map_err(io::Error::from)
}

/// Start and serve until a signal.
pub fn run(opts: &Options, log: Log) -> Result<(), String> {
    // Block the signals first: from here on SIGTERM is an event, never a
    // death that would leave the socket behind.
    let signals = block_signals().map_err(|e| format!("cannot set up signals: {e}"))?;
    let (shm, size) = open_shm(&opts.shm_path, opts.create_size_mib)?;
    let listener = claim_socket(&opts.socket, log)?;
    let mut cleanup = Cleanup {
        socket: absolute(&opts.socket),
        socket_id: None,
        pid_file: None,
    };
    cleanup.socket_id = file_id(&cleanup.socket);
    if let Some(p) = &opts.pid_file {
        fs::write(p, format!("{}\n", std::process::id()))
            .map_err(|e| format!("cannot write pid file {}: {e}", p.display()))?;
        cleanup.pid_file = Some(p.clone());
    }
    let fencer = match &opts.fence_run_dir {
        None => None,
        Some(dir) => {
            let f = fs::File::options()
                .read(true)
                .write(true)
                .open(&opts.shm_path)
                .and_then(|f| crate::fencer::Fencer::new(f, dir.clone(), log))
                .map_err(|e| format!("fencer: cannot open {}: {e}", opts.shm_path.display()))?;
            log.info(format_args!(
                "fencing failed nodes of the cluster in {}",
                dir.display()
            ));
            Some(f)
        }
    };
    let mut server = Server::new(
        listener,
        signals,
        shm,
        opts.vectors,
        opts.stall_timeout,
        log,
    )
    .map_err(|e| format!("cannot start: {e}"))?;
    server.set_fencer(fencer);
    log.info(format_args!(
        "listening on {} (shm {}, {} bytes, {} vectors, pid {})",
        opts.socket.display(),
        opts.shm_path.display(),
        size,
        opts.vectors,
        std::process::id()
    ));
    let sig = server
        .run()
        .map_err(|e| format!("event loop failed: {e}"))?;
    log.info(format_args!("stopped by {sig}"));
    drop(cleanup);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "onecopy-ivserver-start-{}-{name}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn shm_is_never_created_or_truncated_without_asking() {
        let d = tmp("shm");
        let f = d.join("region");
        let err = open_shm(&f, None).unwrap_err();
        assert!(err.contains("does not exist"), "{err}");
        assert!(!f.exists());
        let (_, size) = open_shm(&f, Some(2)).unwrap();
        assert_eq!(size, 2 << 20);
        // Existing file: used as is.
        let (_, size) = open_shm(&f, None).unwrap();
        assert_eq!(size, 2 << 20);
        let err = open_shm(&f, Some(4)).unwrap_err();
        assert!(err.contains("never resized"), "{err}");
        assert_eq!(fs::metadata(&f).unwrap().len(), 2 << 20);
        fs::write(d.join("empty"), b"").unwrap();
        assert!(open_shm(&d.join("empty"), None)
            .unwrap_err()
            .contains("empty"));
        assert!(open_shm(&d, None).is_err());
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn socket_path_rules() {
        let d = tmp("sock");
        let log = Log::new(false);
        let plain = d.join("file");
        fs::write(&plain, b"x").unwrap();
        let err = claim_socket(&plain, log).unwrap_err();
        assert!(err.contains("not a socket"), "{err}");
        let s = d.join("s");
        let live = claim_socket(&s, log).unwrap();
        let err = claim_socket(&s, log).unwrap_err();
        assert!(err.contains("in use by a live server"), "{err}");
        drop(live); // the file stays: now stale
        assert!(s.exists());
        let _again = claim_socket(&s, log).unwrap();
        fs::remove_dir_all(&d).unwrap();
    }
}
