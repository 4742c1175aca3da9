//! An in-memory [`Os`] for host unit tests: a file tree, descriptors,
//! a console buffer and fault injection.

use alloc::collections::BTreeMap;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use crate::os::traits::*;
use crate::os::{
    Attr, BatchIo, CacheControls, CacheGroup, ClusterInfo, DirEntry, Errno, Fd, FileKind,
    GroupSettings, LocalityRange, MissCounters, MmapIo, NodeInfo, OpenFlags, RingSamples,
    TraceBench, DEFAULT_GROUP_NAME,
};
use fabric::proto::MissStats;

mod control;
mod files;
mod groups;
mod iostart;
mod meta;
mod paths;
use groups::mock_group;
pub use iostart::IoStartSplit;
pub use meta::MetaSplit;

#[derive(Debug, Clone)]
struct Node {
    ino: u64,
    kind: FileKind,
    data: Vec<u8>,
    version: u64,
}

#[derive(Debug, Clone)]
struct Open {
    path: String,
    pos: u64,
    append: bool,
}

/// A fault to inject: `op` succeeds `ok_calls` more times, then fails
/// with `errno` on every later call.
#[derive(Debug, Clone, Copy)]
struct Fault {
    ok_calls: u32,
    errno: Errno,
}

/// The in-memory OS.
#[derive(Debug, Clone)]
pub struct MockOs {
    /// Everything printed so far.
    pub out: String,
    /// What `uptime_ns` returns.
    pub now_ns: u64,
    /// Total bytes of file data the "disk" holds.
    pub capacity: u64,
    /// Most bytes moved by one `read` / `write` call (short I/O).
    pub max_io: usize,
    /// Most descriptors open at once.
    pub max_fds: usize,
    /// What `cluster` returns.
    pub cluster: ClusterInfo,
    /// What `bench_ring` returns (cycled to `count` samples); empty means
    /// "return no samples".
    pub ring_samples: Vec<u64>,
    /// `bench_doorbell` is supported (returns the ring samples).
    pub doorbells: bool,
    /// The atomics probe of `bench atomics`.
    pub atomic_probe: u64,
    /// Every path handed to the OS, in order.
    pub paths: Vec<String>,
    /// Number of `sync` / `fsync` calls.
    pub syncs: u32,
    /// Length of the buffer handed to every `write` call.
    pub write_sizes: Vec<usize>,
    /// I/Os of every `io_batch` / `mmap_batch` call, in order.
    pub batches: Vec<usize>,
    /// `seek` is supported (off: `NotSupported`, as for a shell that
    /// only streams).
    pub can_seek: bool,
    /// `mmap_io` is supported (off: `NotSupported`).
    pub can_mmap: bool,
    nodes: BTreeMap<String, Node>,
    fds: BTreeMap<u32, Open>,
    next_fd: u32,
    next_ino: u64,
    faults: BTreeMap<&'static str, Fault>,
    /// The eviction controls (`None`: the mode has none, NotSupported).
    pub controls: Option<CacheControls>,
    /// What `locality` answers, by path (other paths: `NotFound`).
    pub locality: BTreeMap<String, Vec<LocalityRange>>,
    /// `bench miss` support: what every `read` call adds to the miss
    /// counters (and it moves the clock by [`MOCK_READ_NS`]); `cache drop`
    /// succeeds. `None`: both `NotSupported`.
    pub miss_per_read: Option<MissCounters>,
    /// `read` calls so far.
    pub reads: u64,
    /// Task groups (`default` first); only with `controls`.
    pub groups: Vec<CacheGroup>,
    /// Every `set_task_group` name, in order.
    pub task_groups: Vec<String>,
    /// Split metadata calls (off: every call finishes at once).
    pub meta: MetaSplit,
    /// Reads that wait for their pages (off: `io_start` is not
    /// supported).
    pub io_start: IoStartSplit,
}

/// How far the clock moves per `read` with [`MockOs::miss_per_read`].
pub const MOCK_READ_NS: u64 = 100_000;

impl Default for MockOs {
    fn default() -> Self {
        MockOs::new()
    }
}

impl MockOs {
    /// An empty file system with only `/`, node 1 of a two-node cluster.
    pub fn new() -> MockOs {
        let mut nodes = BTreeMap::new();
        nodes.insert(
            "/".to_string(),
            Node {
                ino: 1,
                kind: FileKind::Dir,
                data: Vec::new(),
                version: 1,
            },
        );
        MockOs {
            out: String::new(),
            now_ns: 0,
            capacity: 4 << 20,
            max_io: usize::MAX,
            max_fds: 16,
            cluster: ClusterInfo {
                epoch: 3,
                self_id: 1,
                nodes: alloc::vec![
                    NodeInfo {
                        id: 0,
                        state: "up".to_string(),
                        heartbeat: 1000,
                        epoch: 3,
                    },
                    NodeInfo {
                        id: 1,
                        state: "up".to_string(),
                        heartbeat: 420,
                        epoch: 3,
                    },
                    NodeInfo {
                        id: 2,
                        state: "joining".to_string(),
                        heartbeat: 7,
                        epoch: 0,
                    },
                ],
            },
            ring_samples: alloc::vec![250, 230, 240, 900, 235],
            doorbells: false,
            atomic_probe: 0,
            paths: Vec::new(),
            syncs: 0,
            write_sizes: Vec::new(),
            batches: Vec::new(),
            can_seek: false,
            can_mmap: false,
            nodes,
            fds: BTreeMap::new(),
            next_fd: 3,
            next_ino: 2,
            faults: BTreeMap::new(),
            controls: Some(CacheControls::default()),
            locality: BTreeMap::new(),
            miss_per_read: None,
            reads: 0,
            groups: alloc::vec![mock_group(DEFAULT_GROUP_NAME)],
            task_groups: Vec::new(),
            meta: MetaSplit::default(),
            io_start: IoStartSplit::default(),
        }
    }

    /// Make `op` (a method name such as `"read"`) fail with `errno` after
    /// `ok_calls` more successful calls.
    pub fn fail(&mut self, op: &'static str, ok_calls: u32, errno: Errno) {
        self.faults.insert(op, Fault { ok_calls, errno });
    }

    /// Take what was printed so far.
    pub fn take_out(&mut self) -> String {
        core::mem::take(&mut self.out)
    }

    /// Number of descriptors currently open.
    pub fn open_fds(&self) -> usize {
        self.fds.len()
    }

    /// Contents of a file, if it exists.
    pub fn file(&self, path: &str) -> Option<&[u8]> {
        self.nodes
            .get(path)
            .filter(|n| n.kind == FileKind::File)
            .map(|n| n.data.as_slice())
    }

    /// Create (or replace) a file with `data`, creating parent directories.
    pub fn put(&mut self, path: &str, data: &[u8]) {
        let mut prefix = String::new();
        let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
        for (i, c) in comps.iter().enumerate() {
            prefix.push('/');
            prefix.push_str(c);
            let kind = if i + 1 == comps.len() {
                FileKind::File
            } else {
                FileKind::Dir
            };
            if !self.nodes.contains_key(&prefix) {
                let ino = self.alloc_ino();
                self.nodes.insert(
                    prefix.clone(),
                    Node {
                        ino,
                        kind,
                        data: Vec::new(),
                        version: 1,
                    },
                );
            }
        }
        if let Some(n) = self.nodes.get_mut(path) {
            n.data = data.to_vec();
        }
    }

    fn alloc_ino(&mut self) -> u64 {
        let i = self.next_ino;
        self.next_ino += 1;
        i
    }

    fn check(&mut self, op: &'static str) -> Result<(), Errno> {
        match self.faults.get_mut(op) {
            Some(f) if f.ok_calls == 0 => Err(f.errno),
            Some(f) => {
                f.ok_calls -= 1;
                Ok(())
            }
            None => Ok(()),
        }
    }

    fn used(&self) -> u64 {
        self.nodes.values().map(|n| n.data.len() as u64).sum()
    }

    fn open_file(&mut self, fd: Fd) -> Result<(Open, &mut Node), Errno> {
        let o = self.fds.get(&fd.0).cloned().ok_or(Errno::BadFd)?;
        let n = self.nodes.get_mut(&o.path).ok_or(Errno::BadFd)?;
        Ok((o, n))
    }
}

impl Console for MockOs {
    fn print(&mut self, s: &str) {
        self.out.push_str(s);
    }

    fn uptime_ns(&self) -> u64 {
        self.now_ns
    }
}

impl AsyncIo for MockOs {
    /// Logged in `batches`; fault `"io_batch"` fails the call as a whole.
    fn io_batch(&mut self, ios: &mut [BatchIo<'_>]) -> Result<(), Errno> {
        self.batches.push(ios.len());
        self.meta
            .events
            .push(alloc::format!("io_batch {}", ios.len()));
        self.check("io_batch")?;
        for io in ios.iter_mut() {
            io.done = crate::os::positioned_io(self, io.fd, io.offset, io.write, io.buf);
        }
        Ok(())
    }

    /// Logged in `batches`; fault `"mmap_batch"` fails the call as a
    /// whole.
    fn mmap_batch(&mut self, ios: &mut [MmapIo<'_>]) -> Result<(), Errno> {
        self.batches.push(ios.len());
        self.check("mmap_batch")?;
        for io in ios.iter_mut() {
            let len = io.buf.len();
            io.done = self
                .mmap_io(io.path, io.offset, len, io.write, io.buf)
                .map(|()| len);
        }
        Ok(())
    }

    /// Copies to or from the file's bytes (a "mapping" without pages).
    fn mmap_io(
        &mut self,
        path: &str,
        offset: u64,
        len: usize,
        write: bool,
        buf: &mut [u8],
    ) -> Result<(), Errno> {
        if !self.can_mmap {
            return Err(Errno::NotSupported);
        }
        if len == 0 {
            return Ok(()); // probe
        }
        self.check("mmap_io")?;
        let n = self.nodes.get_mut(path).ok_or(Errno::NotFound)?;
        if n.kind != FileKind::File {
            return Err(Errno::IsDir);
        }
        let o = usize::try_from(offset).map_err(|_| Errno::Invalid)?;
        let end = o.checked_add(len).ok_or(Errno::Invalid)?;
        let (Some(file), Some(b)) = (n.data.get_mut(o..end), buf.get_mut(..len)) else {
            return Err(Errno::Invalid);
        };
        if write {
            file.copy_from_slice(b);
        } else {
            b.copy_from_slice(file);
        }
        Ok(())
    }

    fn meta_start(&mut self, call: crate::meta::MetaCall) -> crate::meta::MetaStart {
        self.split_start(call)
    }

    fn meta_poll(
        &mut self,
        ticket: crate::meta::MetaTicket,
    ) -> Option<Result<crate::meta::MetaDone, Errno>> {
        self.split_poll(ticket)
    }

    fn meta_wait(&mut self) {
        self.split_wait();
    }

    fn io_start(&mut self, ios: &[crate::os::IoSpan]) -> Result<Vec<Option<u64>>, Errno> {
        self.split_io_start(ios)
    }

    fn mmap_start(&mut self, ios: &[crate::os::MapSpan<'_>]) -> Result<Vec<Option<u64>>, Errno> {
        self.split_mmap_start(ios)
    }

    fn io_progress(&mut self) -> bool {
        self.split_io_progress()
    }

    fn io_poll(&mut self, ticket: u64) -> Option<Result<(), Errno>> {
        self.split_io_poll(ticket)
    }

    fn io_cancel(&mut self, ticket: u64) {
        self.split_io_cancel(ticket);
    }
}
