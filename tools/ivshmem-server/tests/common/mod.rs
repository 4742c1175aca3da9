//! Test helpers: a server process guard and a fake ivshmem client.
#![allow(dead_code)]

use std::fs;
use std::io::{ErrorKind, IoSliceMut, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread::sleep;
use std::time::{Duration, Instant};

use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};

pub const BIN: &str = env!("CARGO_BIN_EXE_onecopy-ivshmem-server");
pub const WAIT: Duration = Duration::from_secs(10);

/// A fresh directory under the temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "oc-ivs-{}-{}-{tag}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A running server; killed (SIGTERM, then SIGKILL) on drop.
pub struct Server {
    pub child: Option<Child>,
    pub socket: PathBuf,
    pub shm: PathBuf,
    pub log: PathBuf,
    pub dir: TempDir,
}

impl Server {
    /// A server on a fresh 1 MiB shm file with `vectors` vectors.
    pub fn start(tag: &str, vectors: u16, extra: &[&str]) -> Server {
        let dir = TempDir::new(tag);
        let shm = dir.path("shm");
        let mut content = vec![0u8; 1 << 20];
        content[..8].copy_from_slice(b"onecopy!");
        fs::write(&shm, content).unwrap();
        let socket = dir.path("iv.sock");
        let log = dir.path("server.log");
        let mut cmd = Command::new(BIN);
        cmd.arg("--socket")
            .arg(&socket)
            .arg("--shm-path")
            .arg(&shm)
            .arg("--vectors")
            .arg(vectors.to_string())
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(&log).unwrap());
        let child = cmd.spawn().expect("spawn server");
        let s = Server {
            child: Some(child),
            socket,
            shm,
            log,
            dir,
        };
        s.wait_log("listening on");
        s
    }

    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Wait until the server log contains `needle`; panics with the log on
    /// timeout.
    pub fn wait_log(&self, needle: &str) {
        let end = Instant::now() + WAIT;
        while Instant::now() < end {
            if self.log_text().contains(needle) {
                return;
            }
            sleep(Duration::from_millis(10));
        }
        panic!("server log never said {needle:?}:\n{}", self.log_text());
    }

    pub fn connect(&self) -> Client {
        Client::connect(&self.socket)
    }

    /// Send a signal and wait (bounded) for the exit status.
    pub fn stop(&mut self, sig: nix::sys::signal::Signal) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        nix::sys::signal::kill(pid, sig).unwrap();
        wait_exit(&mut child, WAIT).unwrap_or_else(|| {
            let _ = child.kill();
            let _ = child.wait();
            panic!("server ignored {sig}:\n{}", self.log_text())
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let pid = nix::unistd::Pid::from_raw(child.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            if wait_exit(&mut child, Duration::from_secs(3)).is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// Poll `child` for up to `limit`.
pub fn wait_exit(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let end = Instant::now() + limit;
    loop {
        if let Ok(Some(st)) = child.try_wait() {
            return Some(st);
        }
        if Instant::now() >= end {
            return None;
        }
        sleep(Duration::from_millis(10));
    }
}

/// A fake ivshmem client (what QEMU's device does on its chardev).
pub struct Client {
    pub stream: UnixStream,
}

/// One message: the value and the fd it carried.
pub type Message = (i64, Option<OwnedFd>);

impl Client {
    /// Connect, retrying while the server is not listening yet.
    pub fn connect(path: &Path) -> Client {
        let end = Instant::now() + WAIT;
        loop {
            match UnixStream::connect(path) {
                Ok(stream) => return Client { stream },
                Err(e) if Instant::now() < end => {
                    let _ = e;
                    sleep(Duration::from_millis(10));
                }
                Err(e) => panic!("cannot connect to {}: {e}", path.display()),
            }
        }
    }

    /// The next message, or `None` if nothing comes within `limit` (or the
    /// server closed the connection: see [`Client::closed`]).
    pub fn try_recv(&mut self, limit: Duration) -> Option<Message> {
        self.stream.set_read_timeout(Some(limit)).unwrap();
        let mut buf = [0u8; 8];
        let mut got = 0;
        let mut fd = None;
        while got < 8 {
            let mut cmsg = nix::cmsg_space!([RawFd; 1]);
            let mut iov = [IoSliceMut::new(&mut buf[got..])];
            let msg = match recvmsg::<()>(
                self.stream.as_raw_fd(),
                &mut iov,
                Some(&mut cmsg),
                MsgFlags::MSG_CMSG_CLOEXEC,
            ) {
                Ok(m) => m,
                Err(nix::errno::Errno::EAGAIN) if got == 0 => return None,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => panic!("recvmsg: {e}"),
            };
            if msg.bytes == 0 {
                assert_eq!(got, 0, "server closed mid-message");
                return None;
            }
            for c in msg.cmsgs().unwrap() {
                if let ControlMessageOwned::ScmRights(fds) = c {
                    for raw in fds {
                        // SAFETY: SCM_RIGHTS just installed `raw` in this
                        // process; nothing else owns it.
                        let owned = unsafe { OwnedFd::from_raw_fd(raw) };
                        assert!(fd.is_none(), "more than one fd in a message");
                        fd = Some(owned);
                    }
                }
            }
            got += msg.bytes;
        }
        Some((i64::from_le_bytes(buf), fd))
    }

    pub fn recv(&mut self) -> Message {
        self.try_recv(WAIT).expect("a message from the server")
    }

    /// A message with no fd.
    pub fn recv_plain(&mut self) -> i64 {
        let (v, fd) = self.recv();
        assert!(fd.is_none(), "message {v} carried an fd");
        v
    }

    /// A message with an fd.
    pub fn recv_fd(&mut self) -> (i64, OwnedFd) {
        let (v, fd) = self.recv();
        (v, fd.unwrap_or_else(|| panic!("message {v} without fd")))
    }

    /// Nothing arrives within `limit`.
    pub fn expect_quiet(&mut self, limit: Duration) {
        if let Some((v, fd)) = self.try_recv(limit) {
            panic!("unexpected message {v} (fd: {})", fd.is_some());
        }
    }

    /// The whole setup sequence: (own id, shm fd, own eventfds, peers'
    /// eventfds by peer id), checking the order of the spec.
    pub fn setup(&mut self, vectors: u16) -> Setup {
        assert_eq!(self.recv_plain(), 0, "protocol version");
        let id = self.recv_plain();
        let (minus1, shm) = self.recv_fd();
        assert_eq!(minus1, -1);
        let mut peers: Vec<(i64, Vec<OwnedFd>)> = Vec::new();
        loop {
            let mut fds = Vec::new();
            let (pid, fd) = self.recv_fd();
            fds.push(fd);
            for _ in 1..vectors {
                let (again, fd) = self.recv_fd();
                assert_eq!(again, pid, "peer {pid}'s vectors must be consecutive");
                fds.push(fd);
            }
            if pid == id {
                return Setup {
                    id,
                    shm,
                    own: fds,
                    peers,
                };
            }
            assert!(peers.iter().all(|(p, _)| *p < pid), "peers in id order");
            peers.push((pid, fds));
        }
    }

    /// "Peer added": `vectors` messages with the id and an fd.
    pub fn added(&mut self, vectors: u16) -> (i64, Vec<OwnedFd>) {
        let (id, first) = self.recv_fd();
        let mut fds = vec![first];
        for _ in 1..vectors {
            let (again, fd) = self.recv_fd();
            assert_eq!(again, id);
            fds.push(fd);
        }
        (id, fds)
    }

    /// The server closed our connection (EOF within `limit`).
    pub fn closed(&mut self, limit: Duration) -> bool {
        let end = Instant::now() + limit;
        self.stream.set_read_timeout(Some(limit)).unwrap();
        let mut b = [0u8; 64];
        loop {
            match std::io::Read::read(&mut self.stream, &mut b) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
            if Instant::now() >= end {
                return false;
            }
        }
    }

    pub fn send_byte(&mut self) {
        self.stream.write_all(b"x").unwrap();
    }
}

pub struct Setup {
    pub id: i64,
    pub shm: OwnedFd,
    pub own: Vec<OwnedFd>,
    pub peers: Vec<(i64, Vec<OwnedFd>)>,
}

/// `/proc/self/fd` says what an fd is.
pub fn fd_kind(fd: &OwnedFd) -> String {
    fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

/// Signal an eventfd (what a doorbell write does).
pub fn ring(fd: &OwnedFd) {
    nix::unistd::write(fd, &1u64.to_ne_bytes()).unwrap();
}

/// Read an eventfd's counter (non-blocking: `None` if it was not signalled).
pub fn take(fd: &OwnedFd) -> Option<u64> {
    let mut b = [0u8; 8];
    match nix::unistd::read(fd, &mut b) {
        Ok(8) => Some(u64::from_ne_bytes(b)),
        Ok(n) => panic!("short eventfd read {n}"),
        Err(nix::errno::Errno::EAGAIN) => None,
        Err(e) => panic!("eventfd read: {e}"),
    }
}

/// A child process killed (SIGTERM, then SIGKILL) on drop.
pub struct KillOnDrop(pub Child);

impl KillOnDrop {
    pub fn signal(&self, sig: nix::sys::signal::Signal) {
        let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        nix::sys::signal::kill(pid, sig).unwrap();
    }

    pub fn wait(&mut self, limit: Duration) -> Option<ExitStatus> {
        wait_exit(&mut self.0, limit)
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            self.signal(nix::sys::signal::Signal::SIGTERM);
            if self.wait(Duration::from_secs(3)).is_none() {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
    }
}
