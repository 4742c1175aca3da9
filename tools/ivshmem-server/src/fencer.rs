//! The fencer (`--fence-run-dir DIR`): the host's half of
//! `fabric::fence`. The directory writes a failed node's session epoch into
//! that node's fence request word; the fencer, which has the region's file
//! open, sees it, SIGKILLs the QEMU of that node (its pid from the
//! launcher's `DIR/nodeK.pid`), waits until the process is gone, and
//! writes the epoch into the node's fence confirmation word. Only then
//! does the directory reuse the node's frames and the frames it mapped.
//!
//! The region is read and written through the file (`pread`/`pwrite`, no
//! mapping, no `unsafe`): a request is acted on only if two reads agree,
//! and the directory takes only a confirmation equal to its request (see
//! `fabric::fence`).

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use fabric::fence;
use fabric::layout::{Header, Layout};
use fabric::shm::SharedMem;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::log::Log;

/// How often the fencer looks at the region.
pub const POLL: Duration = Duration::from_millis(10);

/// The region through its file. Word accesses are `pread`/`pwrite` of the
/// word's bytes; an access out of range reads zeros and writes nothing
/// (the region is untrusted, and so is its size).
pub struct FileShm {
    file: File,
    size: usize,
}

impl FileShm {
    pub fn new(file: File) -> std::io::Result<FileShm> {
        let size = usize::try_from(file.metadata()?.len()).unwrap_or(usize::MAX);
        Ok(FileShm { file, size })
    }

    fn get<const N: usize>(&self, off: usize) -> [u8; N] {
        let mut b = [0u8; N];
        if off.checked_add(N).is_some_and(|e| e <= self.size) {
            let _ = self.file.read_exact_at(&mut b, off as u64);
        }
        b
    }

    fn put(&self, off: usize, b: &[u8]) {
        if off.checked_add(b.len()).is_some_and(|e| e <= self.size) {
            let _ = self.file.write_all_at(b, off as u64);
        }
    }
}

impl SharedMem for FileShm {
    fn size(&self) -> usize {
        self.size
    }
    fn load_u32(&self, off: usize) -> u32 {
        u32::from_le_bytes(self.get(off))
    }
    fn store_u32(&self, off: usize, v: u32) {
        self.put(off, &v.to_le_bytes())
    }
    fn load_u64(&self, off: usize) -> u64 {
        u64::from_le_bytes(self.get(off))
    }
    fn store_u64(&self, off: usize, v: u64) {
        self.put(off, &v.to_le_bytes())
    }
    fn fetch_add_u64(&self, off: usize, v: u64) -> u64 {
        // Not atomic; the fencer never adds to a shared word.
        let old = self.load_u64(off);
        self.store_u64(off, old.wrapping_add(v));
        old
    }
    fn cas_u64(&self, off: usize, old: u64, new: u64) -> Result<u64, u64> {
        // Not atomic; the fencer never updates a shared word by CAS.
        let cur = self.load_u64(off);
        if cur != old {
            return Err(cur);
        }
        self.store_u64(off, new);
        Ok(old)
    }
    fn fetch_or_u64(&self, off: usize, bits: u64) -> u64 {
        // Not atomic, as above.
        let old = self.load_u64(off);
        self.store_u64(off, old | bits);
        old
    }
    fn fetch_and_u64(&self, off: usize, bits: u64) -> u64 {
        // Not atomic, as above.
        let old = self.load_u64(off);
        self.store_u64(off, old & bits);
        old
    }
    fn read(&self, off: usize, buf: &mut [u8]) {
        buf.fill(0);
        if off.checked_add(buf.len()).is_some_and(|e| e <= self.size) {
            let _ = self.file.read_exact_at(buf, off as u64);
        }
    }
    fn write(&self, off: usize, data: &[u8]) {
        self.put(off, data)
    }
    fn zero(&self, off: usize, len: usize) {
        self.put(off, &vec![0u8; len])
    }
}

/// What became of a node's QEMU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It cannot run any more (why, for the log).
    Gone(String),
    /// SIGKILL sent, not reaped yet.
    Dying,
}

/// The state of process `pid` from `/proc/PID/stat` (`None`: no such
/// process).
fn proc_state(pid: u32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.trim_start().chars().next()
}

/// Is `pid` the QEMU of node `node` of the cluster in `run_dir` (its
/// command line names the instance and that run dir's console socket)?
fn is_node_qemu(pid: u32, node: u32, run_dir: &Path) -> bool {
    let Ok(cmd) = fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let cmd = String::from_utf8_lossy(&cmd);
    let sock = run_dir.join(format!("node{node}.sock"));
    cmd.split('\0').any(|a| a == format!("onecopy-node{node}"))
        && cmd.contains(&*sock.to_string_lossy())
}

/// The fencer of one cluster.
pub struct Fencer {
    mem: FileShm,
    run_dir: PathBuf,
    log: Log,
    /// Nodes whose QEMU was sent SIGKILL: (epoch, pid).
    killed: BTreeMap<u32, (u64, u32)>,
}

impl Fencer {
    pub fn new(file: File, run_dir: PathBuf, log: Log) -> std::io::Result<Fencer> {
        Ok(Fencer {
            mem: FileShm::new(file)?,
            run_dir,
            log,
            killed: BTreeMap::new(),
        })
    }

    /// Look at the region once: fence what is asked for, confirm what is
    /// fenced.
    pub fn poll(&mut self) {
        let Ok(layout) = Layout::read(&self.mem) else {
            return; // not formatted (yet), or reformatting
        };
        let first = fence::pending(&Header::new(&self.mem, layout));
        if first.is_empty() {
            self.killed.clear();
            return;
        }
        let again = fence::pending(&Header::new(&self.mem, layout));
        for (node, epoch) in first.into_iter().filter(|p| again.contains(p)) {
            match self.fence(node, epoch) {
                Outcome::Dying => {}
                Outcome::Gone(why) => {
                    Header::new(&self.mem, layout).set_fence_done(node, epoch);
                    self.killed.remove(&node);
                    self.log.info(format_args!(
                        "fence: node {node} session {epoch} fenced ({why}); confirmed in the region"
                    ));
                }
            }
        }
    }

    /// Make sure node `node`'s QEMU cannot run again.
    fn fence(&mut self, node: u32, epoch: u64) -> Outcome {
        let pidfile = self.run_dir.join(format!("node{node}.pid"));
        let pid = match self.killed.get(&node) {
            Some(&(e, pid)) if e == epoch => pid,
            _ => match fs::read_to_string(&pidfile)
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok())
            {
                Some(p) if p > 1 => p,
                _ => return Outcome::Gone(format!("no QEMU recorded in {}", pidfile.display())),
            },
        };
        match proc_state(pid) {
            None => return Outcome::Gone(format!("QEMU pid {pid} has exited")),
            Some('Z' | 'X') => return Outcome::Gone(format!("QEMU pid {pid} has exited")),
            Some(_) => {}
        }
        if !is_node_qemu(pid, node, &self.run_dir) {
            return Outcome::Gone(format!(
                "pid {pid} is no longer node {node}'s QEMU (it exited)"
            ));
        }
        if self.killed.get(&node) != Some(&(epoch, pid)) {
            self.log.info(format_args!(
                "fence: node {node} session {epoch} declared failed; killing its QEMU (pid {pid})"
            ));
            if let Err(e) = kill(Pid::from_raw(pid as i32), Signal::SIGKILL) {
                self.log
                    .warn(format_args!("fence: kill -KILL {pid} (node {node}): {e}"));
            }
            self.killed.insert(node, (epoch, pid));
        }
        Outcome::Dying
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fabric::layout::NodeState;
    use std::process::Command;

    fn region(name: &str) -> (PathBuf, FileShm, Layout) {
        let dir = std::env::temp_dir().join(format!("fencer-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("shm");
        let f = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        f.set_len(4 << 20).unwrap();
        let mem = FileShm::new(f).unwrap();
        let l = Layout::compute(mem.size(), 3).unwrap();
        l.format(&mem, 0);
        (dir, mem, l)
    }

    fn fencer(dir: &Path) -> Fencer {
        let f = File::options()
            .read(true)
            .write(true)
            .open(dir.join("shm"))
            .unwrap();
        Fencer::new(f, dir.to_path_buf(), Log::new(false)).unwrap()
    }

    #[test]
    fn a_request_without_a_running_qemu_is_confirmed_at_once() {
        let (dir, mem, l) = region("none");
        let mut f = fencer(&dir);
        f.poll(); // nothing asked
        let h = Header::new(&mem, l);
        assert_eq!(h.fence_done(2), 0);
        h.set_node_state(2, NodeState::Failed);
        h.set_fence_request(2, 9);
        f.poll(); // no node2.pid
        assert_eq!(h.fence_done(2), 9);
        // A pid file naming a process that is not node 2's QEMU.
        fs::write(dir.join("node3.pid"), format!("{}\n", std::process::id())).unwrap();
        h.set_fence_request(3, 11);
        f.poll();
        assert_eq!(h.fence_done(3), 11);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_running_node_process_is_killed_before_the_confirmation() {
        let (dir, mem, l) = region("kill");
        // A stand-in for node 1's QEMU: its command line names the
        // instance and the run dir's console socket.
        let sock = dir.join("node1.sock");
        let mut child = Command::new("sh")
            .args([
                "-c",
                "sleep 30; : \"$0\" \"$1\"",
                "onecopy-node1",
                &sock.to_string_lossy(),
            ])
            .spawn()
            .unwrap();
        // `sh -c` keeps its own argv: $0 and $1 are in /proc/PID/cmdline,
        // once the child has exec'd (until then it is this test's).
        let cmdline = format!("/proc/{}/cmdline", child.id());
        let t0 = std::time::Instant::now();
        while !fs::read(&cmdline)
            .map(|c| String::from_utf8_lossy(&c).contains("onecopy-node1"))
            .unwrap_or(false)
        {
            assert!(t0.elapsed().as_secs() < 10, "the stand-in never started");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        fs::write(dir.join("node1.pid"), format!("{}\n", child.id())).unwrap();
        let h = Header::new(&mem, l);
        h.set_fence_request(1, 5);
        let mut f = fencer(&dir);
        f.poll();
        // Killed (and not yet confirmed unless already reaped).
        let status = child.wait().unwrap();
        assert!(!status.success(), "the stand-in was killed");
        f.poll();
        assert_eq!(h.fence_done(1), 5);
        let _ = fs::remove_dir_all(&dir);
    }
}
