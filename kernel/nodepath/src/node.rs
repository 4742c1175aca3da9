//! One node: the link to the directory and the VFS over the data path
//! chosen at join, with the shell-facing operations that are logic (the
//! kernel adds timing, window loads/stores and printing).

use alloc::boxed::Box;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::ops::Range;
use osapi::keys;

use fabric::config::{BaselineWrites, Mode};
use fabric::proto::{Attr, DirEntry, Errno, MissKind, Request, Response};
use osapi::cache::MissCounters;
use osapi::io::{BatchIo, Fd, IoSpan, OpenFlags};

use crate::env::Env;
use crate::link::{self, Link};
use crate::private::Private;
use crate::singlecopy::SingleCopy;
use crate::vfs::{DataPath, Vfs};

mod io;
mod meta;
mod mmap;

pub use meta::MetaJobs;

/// Loads (`false`) or stores (`true`) of the bytes at a window address:
/// the kernel's volatile window accesses, or a host test's fake.
pub type WindowAccess<'a> = dyn FnMut(u64, &mut [u8], bool) -> Result<(), Errno> + 'a;

/// How a node is set up.
#[derive(Debug, Clone, Copy)]
pub struct NodeConfig {
    /// This node's id (1..).
    pub id: u32,
    /// The page-cache mode.
    pub mode: Mode,
    /// Give up one directory call after this long.
    pub rpc_timeout_ns: u64,
    /// Remote mappings kept at most (single copy).
    pub remote_limit: usize,
    /// `private` mode: file-server reads of one batch in flight together
    /// over the rings (1..=32).
    pub ring_reads: usize,
    /// Emulated CXL latency of every copy from a peer's frame.
    pub cxl_ns: u64,
    /// Private-cache modes: write back (buffered) or write through.
    pub baseline_writes: BaselineWrites,
    /// Most pages the node's own caches hold (private-cache pages, relaxed
    /// private copies); 0: the mode's default.
    pub cache_pages: usize,
    /// Eviction policy of the single-copy cache's owned pages at boot.
    pub policy: fabric::config::PolicyName,
    /// Tasks' read misses in flight one by one ([`Node::io_start`];
    /// `strong`, `relaxed` and `private`); false: every flush is one batch.
    pub task_reads_each: bool,
    /// Largest readahead window, KiB (boot option `readahead_kb`; 0: off).
    pub readahead_kb: u32,
    /// mmap fault-around block, KiB (boot option `faultaround_kb`; 0: off).
    pub faultaround_kb: u32,
    /// Free frames kept between these marks by reclaim ahead of need
    /// (boot options `reclaim_low` / `reclaim_high`).
    pub reclaim: crate::watermark::Watermarks,
    /// Strong mode: ask for delegations of file ranges (boot option
    /// `delegation`).
    pub delegation: bool,
}

/// How long [`Node::io_wait`] keeps waiting for the next answer once
/// answers came (about two directory service times of a cached page here).
pub const TASK_LINGER_NS: u64 = 15_000;

/// The pages a node's own caches may hold (`private`/`net` page cache,
/// `relaxed` private copies) on a kernel heap of `heap` bytes: a third of
/// it, the same in every mode (the smallest heap, 24 MiB, gives 2048).
pub fn cache_pages_for_heap(heap: usize) -> usize {
    (heap / 3 / fabric::PAGE_SIZE).max(1)
}

/// The data path for `mode`: where the mode picks the node's read, write
/// and write-back code (single copy or private cache). The mode is also
/// asked elsewhere, for what is not the data path: the transport (rings or
/// TCP, `link.rs`, and the kernel's device setup in `kernel/src/main.rs`
/// and `kernel/src/node/mod.rs`), strong and relaxed mode's write rules
/// inside the single-copy path (`singlecopy/`, `pagecache.rs`), and the
/// mode-specific lines of `cache stats` (below).
pub fn data_path<E: Env + 'static>(cfg: &NodeConfig) -> Box<dyn DataPath<E>> {
    let mut dp = mode_path(cfg);
    dp.set_watermarks(cfg.reclaim);
    dp
}

fn mode_path<E: Env + 'static>(cfg: &NodeConfig) -> Box<dyn DataPath<E>> {
    match cfg.mode {
        Mode::Strong | Mode::Relaxed => {
            let mut sc = SingleCopy::new(cfg.mode, cfg.remote_limit, cfg.cxl_ns, cfg.cache_pages);
            sc.set_default_policy(cfg.policy);
            sc.set_delegation(cfg.delegation);
            Box::new(sc)
        }
        Mode::Private | Mode::Net => {
            Box::new(Private::new(cfg.mode, cfg.baseline_writes, cfg.cache_pages))
        }
        // DaxFS's reads come from the shared slot cache; its writes, until
        // the hash overlay is in, go through to the file server.
        Mode::Daxfs => Box::new(Private::new(
            cfg.mode,
            fabric::config::BaselineWrites::Through,
            cfg.cache_pages,
        )),
    }
}

/// A node.
pub struct Node<E: Env> {
    /// The link to the directory (and the host environment).
    pub link: Link<E>,
    /// Descriptors, sizes and the data path.
    pub vfs: Vfs<E>,
    /// The files `mmap_io` works on: path, inode, size (looked up once,
    /// forgotten at the next open).
    mmap_files: Vec<(String, u64, u64)>,
    /// Tasks' metadata calls in flight.
    meta: MetaJobs,
    /// See [`NodeConfig::task_reads_each`].
    task_reads_each: bool,
    /// Largest readahead window and the mmap fault-around block, KiB
    /// (the boot options, or `cache readahead`).
    readahead_kb: (u32, u32),
}

impl<E: Env + 'static> Node<E> {
    /// A node that has not joined yet. `net`: `net` mode's transport.
    pub fn new(env: E, cfg: NodeConfig, net: Option<E::Net>) -> Node<E> {
        let mut link = Link::new(env, cfg.id, cfg.mode, cfg.rpc_timeout_ns, net);
        link.ring_reads = cfg.ring_reads.clamp(1, link::MAX_RING_READS);
        let vfs = Vfs::new(data_path(&cfg));
        let mut n = Node {
            link,
            vfs,
            mmap_files: Vec::new(),
            meta: MetaJobs::default(),
            task_reads_each: cfg.task_reads_each,
            readahead_kb: (0, 0),
        };
        n.set_readahead_kb(cfg.readahead_kb, cfg.faultaround_kb);
        n
    }
}

impl<E: Env + 'static> Node<E> {
    /// Readahead windows of at most `readahead_kb` and mmap fault-around
    /// blocks of `faultaround_kb` (0: off) from now on; open files'
    /// readahead starts over at their next read.
    pub fn set_readahead_kb(&mut self, readahead_kb: u32, faultaround_kb: u32) {
        self.vfs
            .set_readahead(crate::readahead::pages_for_kb(readahead_kb));
        if let Some(st) = self.vfs.data_path().single_copy() {
            st.set_faultaround(crate::readahead::pages_for_kb(faultaround_kb));
        }
        self.readahead_kb = (readahead_kb, faultaround_kb);
    }

    /// The readahead window and the fault-around block, KiB.
    pub fn readahead_kb(&self) -> (u32, u32) {
        self.readahead_kb
    }
}

impl<E: Env> Node<E> {
    /// The mode.
    pub fn mode(&self) -> Mode {
        self.vfs.mode()
    }

    /// Join (or rejoin), waiting up to `wait_ns` for the region.
    pub fn join(&mut self, wait_ns: u64) -> Result<(), Errno> {
        self.link.join(wait_ns, self.vfs.session())
    }

    /// Before every I/O: stop here if this node was declared failed (every
    /// mapping dropped first) or the directory is dead (see
    /// [`Link::guard`]).
    pub fn guard(&mut self) -> Result<(), Errno> {
        self.link.guard(self.vfs.session())?;
        if self.link.any_in_doubt() {
            self.vfs.settle_doubts(&mut self.link)?;
        }
        // Between operations: free frames ahead of need.
        self.reclaim_ahead(false);
        Ok(())
    }

    /// Reclaim ahead of need (`crate::watermark`): if free frames are
    /// under the low mark, reclaim up to the high mark in the background;
    /// `settle` (idle): wait until it is done. Errors are logged: the
    /// next miss reclaims for itself. Returns the pages whose reclaim
    /// started.
    pub fn reclaim_ahead(&mut self, settle: bool) -> usize {
        let (dp, meta) = self.vfs.parts();
        match dp.reclaim_ahead(&mut self.link, meta, settle) {
            Ok(n) => n,
            Err(e) => {
                log::debug!("reclaim ahead of need: {e}");
                0
            }
        }
    }

    /// Periodic membership check (rejoin if declared failed, leave the
    /// shared cache if the directory fell silent).
    pub fn check(&mut self) {
        if self.link.any_in_doubt() {
            // Nothing goes out before the doubt is settled, which the next
            // I/O does (`Node::guard`): not here, where a call to a
            // directory that is away would hold the idle loop.
            log::debug!("unanswered write-backs not settled yet: no write-back before rejoining");
        } else if self.vfs.session().broken() {
            // The rejoin drops what this node owns: write its dirty pages
            // back first (the rings still work; only notices were lost).
            self.link.recovering = true;
            if let Err(e) = self.vfs.sync(&mut self.link) {
                log::warn!("write-back before rejoining: {e}");
            }
            self.link.recovering = false;
        }
        self.link.check(self.vfs.session());
        self.release_late();
    }

    /// Between operations (the membership check): answers that came after
    /// their call was given up are looked at, and a late E grant is given
    /// back at once, so no other node's request for that page is told to
    /// retry until this node's next page request.
    fn release_late(&mut self) {
        self.link.drain_late();
        if let Some(st) = self.vfs.data_path().single_copy() {
            // READs of tasks that are gone: install what came.
            st.reads_poll(&mut self.link);
            if let Err(e) = st.release_late(&mut self.link) {
                log::debug!("giving back late grants: {e}");
            }
        }
    }

    /// Service pending notices (idle loop).
    pub fn service(&mut self) -> usize {
        let n = self.link.service(self.vfs.session());
        self.answer_recalls();
        n
    }

    /// Idle: sleep until a doorbell, an interrupt or `deadline_ns`, unless
    /// a notice is waiting or `other_work` finds some. False: no doorbells.
    pub fn idle_sleep(&mut self, deadline_ns: u64, other_work: &mut dyn FnMut() -> bool) -> bool {
        self.answer_recalls();
        let slept = self
            .link
            .idle_sleep(deadline_ns, other_work, self.vfs.session());
        self.answer_recalls();
        slept
    }

    /// Strong mode: RECALLs serviced while waiting or asleep are answered
    /// (see `singlecopy/deleg.rs`).
    fn answer_recalls(&mut self) {
        if let Some(st) = self.vfs.data_path().single_copy() {
            st.answer_recalls(&mut self.link);
        }
    }

    /// A page fault at `va` in an mmap window: map what the page is (our
    /// frame, the owner's, or the zero page). False: not a window page we
    /// serve.
    pub fn window_fault(&mut self, va: u64) -> bool {
        match self.vfs.data_path().single_copy() {
            Some(st) => st.window_fault(&self.link.env, va),
            None => false,
        }
    }

    /// One call on the rings (`bench ring`, `dir stats`).
    pub fn ring_call(&mut self, req: &Request) -> Result<Response, Errno> {
        self.link.call(req, self.vfs.session())
    }

    /// `bench miss`'s counters: this node's [`crate::link::Probe`] and the
    /// directory's service times of both kinds of miss. The two calls
    /// asking for them are not counted in the probe.
    pub fn miss_counters(&mut self) -> Result<MissCounters, Errno> {
        let probe = self.link.probe;
        let mut kind = |kind| match self.ring_call(&Request::MissStats { kind }) {
            Ok(Response::MissStats(s)) => Ok(s),
            Ok(Response::Err(e)) | Err(e) => Err(e),
            Ok(_) => Err(Errno::Io),
        };
        let page_fills = kind(MissKind::PageFill);
        let file_reads = kind(MissKind::FileRead);
        self.link.probe = probe;
        Ok(MissCounters {
            round_trip_ns: probe.round_trip_ns,
            fill_ns: probe.fill_ns,
            page_fills: page_fills?,
            file_reads: file_reads?,
        })
    }

    /// One file-server request over this mode's transport (`bench rpc`).
    pub fn fs_call(&mut self, req: &Request) -> Result<Response, Errno> {
        self.link.fs_call(req, self.vfs.session())
    }

    /// Open a file.
    pub fn open(&mut self, path: &str, flags: OpenFlags) -> Result<Fd, Errno> {
        self.guard()?;
        self.mmap_files.clear(); // sizes may change: look files up again
        self.vfs.open(&mut self.link, path, flags)
    }
    /// Read at the descriptor's position.
    pub fn read(&mut self, fd: Fd, buf: &mut [u8]) -> Result<usize, Errno> {
        self.guard()?;
        self.vfs.read(&mut self.link, fd, buf)
    }
    /// Write at the descriptor's position.
    pub fn write(&mut self, fd: Fd, data: &[u8]) -> Result<usize, Errno> {
        self.guard()?;
        self.vfs.write(&mut self.link, fd, data)
    }
    /// Set the size of an open file.
    pub fn truncate(&mut self, fd: Fd, size: u64) -> Result<(), Errno> {
        self.guard()?;
        self.vfs.truncate(&mut self.link, fd, size)
    }
    /// Flush an open file.
    pub fn fsync(&mut self, fd: Fd) -> Result<(), Errno> {
        self.guard()?;
        self.vfs.fsync(&mut self.link, fd)
    }
    /// Close a descriptor.
    pub fn close(&mut self, fd: Fd) -> Result<(), Errno> {
        self.vfs.close(&mut self.link, fd)
    }
    /// Attributes of a path.
    pub fn stat(&mut self, path: &str) -> Result<Attr, Errno> {
        self.vfs.stat(&mut self.link, path)
    }
    /// List a directory.
    pub fn readdir(&mut self, path: &str) -> Result<Vec<DirEntry>, Errno> {
        self.vfs.readdir(&mut self.link, path)
    }
    /// Create a directory.
    pub fn mkdir(&mut self, path: &str) -> Result<(), Errno> {
        self.vfs.mkdir(&mut self.link, path)
    }
    /// Remove an empty directory.
    pub fn rmdir(&mut self, path: &str) -> Result<(), Errno> {
        self.vfs.rmdir(&mut self.link, path)
    }
    /// Remove a file.
    pub fn unlink(&mut self, path: &str) -> Result<(), Errno> {
        self.vfs.unlink(&mut self.link, path)
    }
    /// Write back everything, flush the disk.
    pub fn sync(&mut self) -> Result<(), Errno> {
        self.guard()?;
        self.vfs.sync(&mut self.link)
    }
    /// Set the position of an open file.
    pub fn seek(&mut self, fd: Fd, pos: u64) -> Result<(), Errno> {
        self.vfs.seek(fd, pos)
    }
    /// The inode and size of an open file.
    pub fn fd_info(&self, fd: Fd) -> Result<(u64, u64), Errno> {
        self.vfs.fd_info(fd)
    }

    /// `cache stats`: mode, the given storage profile and CXL latency, then
    /// the data path's counters.
    pub fn cache_stats(&self, storage: &str, cxl_ns: u64) -> Result<Vec<(String, String)>, Errno> {
        let mut v: Vec<(String, String)> = alloc::vec![
            (
                keys::cache::MODE.to_string(),
                self.mode().as_str().to_string()
            ),
            (
                keys::cache::STORAGE_PROFILE.to_string(),
                storage.to_string()
            ),
            (keys::cache::CXL_LATENCY_NS.to_string(), format!("{cxl_ns}")),
        ];
        v.extend(self.vfs.data_path_ref().stats()?);
        let ra = self.vfs.ra_stats();
        v.push((
            keys::cache::READAHEAD_PAGES.to_string(),
            format!("{}", ra.pages),
        ));
        v.push((
            keys::cache::READAHEAD_HITS.to_string(),
            format!("{}", ra.hits),
        ));
        v.push((
            keys::cache::READAHEAD_WASTED.to_string(),
            format!("{}", ra.wasted),
        ));
        if let Some(l) = self.link.layout().filter(|_| self.mode() == Mode::Daxfs) {
            let fills = crate::private::dax::dir_fills(self.link.env.mem(), &l);
            v.push((
                keys::cache::DAXFS_FILLS.to_string(),
                fills.map_or_else(|| "-".to_string(), |f| format!("{f}")),
            ));
        }
        if self.mode() == Mode::Private {
            let (groups, reads, max) = self.link.ring_read_stats;
            v.push((
                keys::cache::RING_READ_GROUPS.to_string(),
                format!("{groups}/{reads}"),
            ));
            v.push((keys::cache::RING_READS_MAX.to_string(), format!("{max}")));
        }
        if matches!(self.mode(), Mode::Private | Mode::Relaxed) {
            let (groups, writes, max) = self.link.ring_write_stats;
            v.push((
                keys::cache::RING_WRITE_GROUPS.to_string(),
                format!("{groups}/{writes}"),
            ));
            v.push((keys::cache::RING_WRITES_MAX.to_string(), format!("{max}")));
        }
        Ok(v)
    }

    /// `cache drop`: give back every page; what was done.
    pub fn cache_drop(&mut self) -> Result<String, Errno> {
        let (dp, meta) = self.vfs.parts();
        dp.drop_cache(&mut self.link, meta)
    }

    /// `cache hold`: keep a claim (`pin` false) or a pin of page `idx` of
    /// `ino` in `daxfs` mode's slot cache until this node fails.
    pub fn cache_hold(&mut self, ino: u64, idx: u64, pin: bool) -> Result<String, Errno> {
        self.guard()?;
        self.vfs.data_path().dax_hold(&mut self.link, ino, idx, pin)
    }

    /// `bench inv`: invalidate page `idx` of `ino` if held here (true).
    pub fn invalidate_page(&mut self, ino: u64, idx: u64) -> Result<bool, Errno> {
        self.vfs
            .data_path()
            .invalidate_page(&mut self.link, ino, idx)
    }

    /// `bench dir`: map and drop every page of `ino` (`size` bytes, owned
    /// by another node) `rounds` times, `batch` page requests published
    /// together; the page operations done (the caller times it).
    pub fn bench_dir(
        &mut self,
        ino: u64,
        size: u64,
        rounds: u32,
        batch: usize,
    ) -> Result<u64, Errno> {
        let st = self
            .vfs
            .data_path()
            .single_copy()
            .ok_or(Errno::NotSupported)?;
        st.bench_dir(&mut self.link, ino, size.div_ceil(4096), rounds, batch)
    }

    /// `mmap-read`, first half: resolve every page of the open file `fd`
    /// and open its window; (window address, pages, size). The caller
    /// reads through the window (faults map the pages, see
    /// [`Node::window_fault`]) without holding the node, then calls
    /// [`Node::munmap`].
    pub fn mmap_lazy(&mut self, fd: Fd) -> Result<(u64, u64, u64), Errno> {
        self.guard()?;
        let (ino, size) = self.vfs.fd_info(fd)?;
        let pages = size.div_ceil(4096);
        let st = self
            .vfs
            .data_path()
            .single_copy()
            .ok_or(Errno::NotSupported)?;
        let base = st.mmap_lazy(&mut self.link, ino, pages)?;
        Ok((base, pages, size))
    }

    /// Unmap the whole mmap window.
    pub fn munmap(&mut self) {
        if let Some(st) = self.vfs.data_path().single_copy() {
            st.munmap(&self.link.env);
        }
    }

    /// (window faults served, faults on pages no longer resident).
    pub fn fault_counts(&mut self) -> (u64, u64) {
        self.vfs
            .data_path()
            .single_copy()
            .map(|st| st.fault_counts())
            .unwrap_or((0, 0))
    }

    /// Does this mode have mmap windows?
    pub fn has_windows(&mut self) -> bool {
        self.vfs.data_path().single_copy().is_some()
    }

    /// Write back and leave the cluster.
    pub fn shutdown(&mut self) {
        let _ = self.sync();
        self.link.leave();
    }
}
