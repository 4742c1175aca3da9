//! The small OS interface the shell is written against. The kernel
//! implements it over its VFS and the shared region; unit tests implement it
//! in memory on the host.

use alloc::string::String;
use alloc::vec::Vec;

pub use fabric::config::PolicyName;
pub use fabric::proto::{Attr, DirEntry, Errno, FileKind, LocalityRange, MissStats};

pub use osapi::cache::*;
pub use osapi::cluster::*;
pub use osapi::io::*;
pub use osapi::meta::{MetaCall, MetaDone, MetaStart, MetaTicket};

/// The console: text out, and the clock.
pub trait Console {
    /// Write text to the console (no newline added).
    fn print(&mut self, s: &str);

    /// Nanoseconds since boot.
    fn uptime_ns(&self) -> u64;
}

/// Files and directories, one call at a time (POSIX-like).
pub trait Files {
    /// Open a file (never a directory).
    fn open(&mut self, path: &str, flags: OpenFlags) -> Result<Fd, Errno>;

    /// Read at the descriptor's position, advancing it; 0 at end of file.
    fn read(&mut self, fd: Fd, buf: &mut [u8]) -> Result<usize, Errno>;

    /// Write at the descriptor's position (or the end with `append`).
    fn write(&mut self, fd: Fd, data: &[u8]) -> Result<usize, Errno>;

    /// Set the size of an open file.
    fn truncate(&mut self, fd: Fd, size: u64) -> Result<(), Errno>;

    /// Flush an open file to stable storage.
    fn fsync(&mut self, fd: Fd) -> Result<(), Errno>;

    /// Close a descriptor.
    fn close(&mut self, fd: Fd) -> Result<(), Errno>;

    /// Attributes of a path.
    fn stat(&mut self, path: &str) -> Result<Attr, Errno>;

    /// Entries of a directory, sorted by name.
    fn readdir(&mut self, path: &str) -> Result<Vec<DirEntry>, Errno>;

    /// Create a directory.
    fn mkdir(&mut self, path: &str) -> Result<(), Errno>;

    /// Remove an empty directory.
    fn rmdir(&mut self, path: &str) -> Result<(), Errno>;

    /// Remove a file.
    fn unlink(&mut self, path: &str) -> Result<(), Errno>;

    /// Flush everything this node holds to stable storage.
    fn sync(&mut self) -> Result<(), Errno>;

    /// Move the descriptor's position to `pos` (an absolute offset, like
    /// `lseek(fd, pos, SEEK_SET)`; past the end is allowed). `fio` uses it
    /// for positioned (pread/pwrite-like) I/O.
    fn seek(&mut self, _fd: Fd, _pos: u64) -> Result<(), Errno> {
        Err(Errno::NotSupported)
    }
}

/// I/O without waiting and in batches (aio-like), mapped I/O, and metadata
/// calls started without waiting; the defaults run them one at a time
/// through [`Files`].
pub trait AsyncIo: Files {
    /// Perform every I/O of `ios` (all in flight at once, like
    /// `io_submit` of the whole array followed by `io_getevents` for all of
    /// them) and fill in each one's [`BatchIo::done`]. Returns when all are
    /// complete. The I/Os are independent: one failing does not stop the
    /// others, and their order of completion is not specified (the same
    /// block twice in one batch is the caller's problem, as with aio).
    /// `Err` means the batch as a whole was not attempted (then `done` is
    /// meaningless); a per-I/O problem goes into its `done`. An I/O with an
    /// empty `buf` moves nothing and should complete `Ok(0)`: `fio` sends
    /// one (a read at offset 0) as a probe before the run, and takes
    /// `NotSupported` (from the call or the I/O) as "no batches here".
    ///
    /// The default performs them one by one, in order, with
    /// [`Files::seek`] and then [`Files::read`] / [`Files::write`] (continuing short
    /// transfers), so every OS that can seek supports it; without `seek`
    /// every I/O fails with `NotSupported`. The kernel overrides it to
    /// resolve all pages of all I/Os in one batch of directory requests,
    /// then copy.
    fn io_batch(&mut self, ios: &mut [BatchIo<'_>]) -> Result<(), Errno> {
        for io in ios.iter_mut() {
            io.done = positioned_io(self, io.fd, io.offset, io.write, io.buf);
        }
        Ok(())
    }

    /// Start what the positioned I/Os `ios` wait for (their reads'
    /// page misses) without waiting, so each can run as soon as its own
    /// pages are in instead of when the slowest of the batch is (tasks,
    /// see [`crate::task`]). Per I/O: `None` if it can run now (then
    /// through [`AsyncIo::io_batch`]), or a ticket for [`AsyncIo::io_poll`]. The
    /// misses of all the I/Os go out together. `Err(NotSupported)` (the
    /// default): this OS has no such path, the caller runs the whole batch
    /// through [`AsyncIo::io_batch`].
    fn io_start(&mut self, _ios: &[IoSpan]) -> Result<Vec<Option<u64>>, Errno> {
        Err(Errno::NotSupported)
    }

    /// [`AsyncIo::io_start`] for mapped I/Os: start the page misses of each
    /// load without waiting; per I/O, `None` if it can run now (then
    /// through [`AsyncIo::mmap_batch`]) or a ticket for [`AsyncIo::io_poll`] (the
    /// same tickets as [`AsyncIo::io_start`]'s, run through
    /// [`AsyncIo::mmap_batch`] once done). `Err(NotSupported)` (the default):
    /// every flush of mapped I/Os is one [`AsyncIo::mmap_batch`].
    fn mmap_start(&mut self, _ios: &[MapSpan<'_>]) -> Result<Vec<Option<u64>>, Errno> {
        Err(Errno::NotSupported)
    }

    /// Can the I/O of `ticket` run (as of the last [`AsyncIo::io_progress`])?
    /// `Some(Ok(()))` once its pages are in
    /// (run it through [`AsyncIo::io_batch`], or [`AsyncIo::mmap_batch`] for a
    /// ticket of [`AsyncIo::mmap_start`]: it is a hit, unless the page was
    /// evicted meanwhile, which its own read then fetches again);
    /// `Some(Err(e))`: it fails with `e`; `None`: not yet. `Some` once
    /// (the ticket is then forgotten); an unknown ticket is
    /// `Some(Err(Invalid))`.
    fn io_poll(&mut self, _ticket: u64) -> Option<Result<(), Errno>> {
        Some(Err(Errno::Invalid))
    }

    /// Take in the answers that came for the I/Os started with
    /// [`AsyncIo::io_start`] (once per round of [`AsyncIo::io_poll`] calls, which
    /// then only look at their tickets). False: no ticket can have become
    /// done since the last call (by this or any other path), so the round
    /// of polls is skipped; true when unsure.
    fn io_progress(&mut self) -> bool {
        true
    }

    /// Forget `ticket` (its I/O was withdrawn); what it started finishes
    /// on its own.
    fn io_cancel(&mut self, _ticket: u64) {}

    /// Nothing else can run: wait one step for the answers of the I/Os
    /// started with [`AsyncIo::io_start`] and of the metadata calls in flight
    /// (as [`AsyncIo::meta_wait`]). Returns at once when none is in flight.
    fn io_wait(&mut self) {
        self.meta_wait()
    }

    /// One memory-mapped I/O (`fio --ioengine=mmap`): map `path` (or reuse
    /// a mapping), then copy `len` bytes at `offset` through the mapping
    /// into `buf` (`write == false`) or from `buf` into the file
    /// (`write == true`); `buf` is at least `len` bytes. The range lies
    /// within the file. `len == 0` is a probe: return `Ok(())` if the
    /// mode supports it at all.
    fn mmap_io(
        &mut self,
        _path: &str,
        _offset: u64,
        _len: usize,
        _write: bool,
        _buf: &mut [u8],
    ) -> Result<(), Errno> {
        Err(Errno::NotSupported)
    }

    /// Perform every mapped I/O of `ios` (all in flight at once, like
    /// [`AsyncIo::io_batch`] for [`AsyncIo::mmap_io`]) and fill in each one's
    /// [`MmapIo::done`]. `Err` means the batch as a whole was not
    /// attempted. The default performs them one by one with
    /// [`AsyncIo::mmap_io`]; the kernel overrides it to resolve the pages of
    /// every load first, the misses in flight together, so the window
    /// accesses that follow are hits.
    fn mmap_batch(&mut self, ios: &mut [MmapIo<'_>]) -> Result<(), Errno> {
        for io in ios.iter_mut() {
            let len = io.buf.len();
            io.done = self
                .mmap_io(io.path, io.offset, len, io.write, io.buf)
                .map(|()| len);
        }
        Ok(())
    }

    /// Start a metadata call without waiting for its answer (tasks, see
    /// [`crate::meta`]): `Pending` with a ticket for [`AsyncIo::meta_poll`], or
    /// `Done` when it finished at once. The default performs it
    /// synchronously ([`run_meta`]). The calls a task starts
    /// one after the other take effect in that order; calls of different
    /// tasks in flight together are independent.
    fn meta_start(&mut self, call: MetaCall) -> MetaStart {
        MetaStart::Done(run_meta(self, call))
    }

    /// Is the call of `ticket` finished? `Some` once (the ticket is then
    /// forgotten); a call whose answer does not come within the OS's call
    /// timeout finishes with `Unavailable`. An unknown ticket is
    /// `Some(Err(Invalid))`.
    fn meta_poll(&mut self, _ticket: MetaTicket) -> Option<Result<MetaDone, Errno>> {
        Some(Err(Errno::Invalid))
    }

    /// Nothing else can run: wait a little for answers to the calls in
    /// flight (one wait step: spin, or sleep until a doorbell or a short
    /// deadline; notices are serviced meanwhile). Returns at once when
    /// none is in flight.
    fn meta_wait(&mut self) {}
}

/// The page cache's controls and counters, and the cluster's membership.
pub trait CacheControl {
    /// Membership, heartbeats, epoch.
    fn cluster(&mut self) -> ClusterInfo;

    /// Page-cache counters of this node as `(name, value)` lines
    /// (`cache stats`).
    fn cache_stats(&mut self) -> Result<Vec<(String, String)>, Errno> {
        Err(Errno::NotSupported)
    }

    /// Give back every cached page through the protocol (`cache drop`);
    /// returns a one-line summary.
    fn cache_drop(&mut self) -> Result<String, Errno> {
        Err(Errno::NotSupported)
    }

    /// `cache hold PATH PAGE claim|pin` (`daxfs` mode, failure tests):
    /// claim page `page` of `path` in the shared slot cache without asking
    /// for its fill (`pin` false), or pin it, and keep it until this node
    /// fails; returns a one-line summary.
    fn cache_hold(&mut self, _path: &str, _page: u64, _pin: bool) -> Result<String, Errno> {
        Err(Errno::NotSupported)
    }

    /// The node cache's eviction controls (`cache policy`, `cache config`).
    fn cache_controls(&mut self) -> Result<CacheControls, Errno> {
        Err(Errno::NotSupported)
    }

    /// Set the eviction controls at run time (pages now over the limit or
    /// idle past the TTL are evicted at once).
    fn set_cache_controls(&mut self, _controls: CacheControls) -> Result<(), Errno> {
        Err(Errno::NotSupported)
    }

    /// The largest readahead window and the mmap fault-around block, KiB
    /// (`cache readahead`; 0: off).
    fn readahead_kb(&mut self) -> Result<(u32, u32), Errno> {
        Err(Errno::NotSupported)
    }

    /// Set them at run time (boot options `readahead_kb`, `faultaround_kb`
    /// until then); open files' readahead starts over at their next read.
    fn set_readahead_kb(&mut self, _readahead_kb: u32, _faultaround_kb: u32) -> Result<(), Errno> {
        Err(Errno::NotSupported)
    }

    /// Every task group of this node's cache (`cache groups`), `default`
    /// first.
    fn cache_groups(&mut self) -> Result<Vec<CacheGroup>, Errno> {
        Err(Errno::NotSupported)
    }

    /// Make a task group or replace its settings (its pages move to lists
    /// of its own once it has a policy or a limit; pages over a lowered
    /// limit are evicted at once).
    fn set_cache_group(&mut self, _settings: &GroupSettings) -> Result<(), Errno> {
        Err(Errno::NotSupported)
    }

    /// The group of the tasks doing I/O from now on (`app`/`fio
    /// --group NAME`; made, with the node's policy and no limit, if
    /// missing): their misses are charged to it.
    fn set_task_group(&mut self, _name: &str) -> Result<(), Errno> {
        Err(Errno::NotSupported)
    }

    /// Where the pages of `path` live, as the directory says: runs of
    /// pages with their owner node and sharer count, or on disk only
    /// (`locality`).
    fn locality(&mut self, _path: &str) -> Result<Vec<LocalityRange>, Errno> {
        Err(Errno::NotSupported)
    }

    /// Map a whole file and read it through the mapping: `(crc32, size)`.
    fn mmap_read(&mut self, _path: &str) -> Result<(u32, u64), Errno> {
        Err(Errno::NotSupported)
    }

    /// This node's and the directory's miss timing counters (`bench
    /// miss`).
    fn miss_counters(&mut self) -> Result<MissCounters, Errno> {
        Err(Errno::NotSupported)
    }

    /// The protocol timeline's clock (`trace`): this instance's number
    /// (0 = the directory, K = node K), the clock's ticks per second and
    /// its reading now. None: no timeline here.
    fn trace_clock(&mut self) -> Option<(u32, u64, u64)> {
        None
    }

    /// Directory counters as `(name, value)` lines (`dir stats`).
    fn dir_stats(&mut self) -> Result<Vec<(String, String)>, Errno> {
        Err(Errno::NotSupported)
    }

    /// Where a benchmark runs, for its report: `(node id, cache mode name,
    /// instances kept busy by a run here)`. The default takes the node id
    /// from [`CacheControl::cluster`], the mode from the `mode` line of
    /// [`CacheControl::cache_stats`] (`"unknown"` without it), and counts this node
    /// plus the directory if the directory is up.
    fn run_env(&mut self) -> (u16, String, u32) {
        let info = self.cluster();
        let dir_up = info.nodes.iter().any(|n| n.id == 0 && n.state == "up");
        let mode = self
            .cache_stats()
            .ok()
            .and_then(|v| {
                v.into_iter()
                    .find(|(k, _)| k == osapi::keys::cache::MODE)
                    .map(|(_, m)| m)
            })
            .unwrap_or_else(|| String::from("unknown"));
        (info.self_id, mode, 1 + u32::from(dir_up))
    }
}

/// What `bench trace` measured: nanoseconds spent by each of its loops,
/// summed over its rounds, for `calls` calls (iterations) each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceBench {
    /// Calls (iterations) of each loop over all rounds.
    pub calls: u64,
    /// The empty loop (the same opaque arguments, no call).
    pub base_ns: u64,
    /// The protocol timeline's `record` with recording off.
    pub off_ns: u64,
    /// `record` with recording on (into the ring).
    pub on_ns: u64,
}

/// Microbenchmarks of the fabric and the directory (`bench`).
pub trait Benches {
    /// `count` empty round trips to the directory.
    fn bench_ring(&mut self, count: usize) -> Result<RingSamples, Errno>;

    /// `count` bare cache-line round trips with the directory through the
    /// shared region (no rings, no protocol), in nanoseconds.
    fn bench_pingpong(&mut self, _count: usize) -> Result<RingSamples, Errno> {
        Err(Errno::NotSupported)
    }

    /// `bench atomics`: `count` atomic increments (`lock xadd`) of the
    /// region's atomics probe, or with `count` 0 a reset of it to 0;
    /// (probe before, probe after, nanoseconds spent).
    fn bench_atomics(&mut self, _count: u64) -> Result<(u64, u64, u64), Errno> {
        Err(Errno::NotSupported)
    }

    /// `bench trace`: `count` calls of the protocol timeline's `record`
    /// with recording off, `count` with it on and `count` iterations of an
    /// empty loop of the same shape, interleaved in rounds; recording is
    /// left on or off as found and the timeline cleared.
    fn bench_trace(&mut self, _count: u64) -> Result<TraceBench, Errno> {
        Err(Errno::NotSupported)
    }

    /// `count` doorbell round trips with the directory (ring it, it
    /// answers through the region; it is halted and woken only by the
    /// doorbell), in nanoseconds. `NotSupported` without doorbells.
    fn bench_doorbell(&mut self, _count: usize) -> Result<RingSamples, Errno> {
        Err(Errno::NotSupported)
    }

    /// `count` empty requests to the file server over this mode's file
    /// transport: the transport's name (`ring` or `tcp`) and the round
    /// trips in nanoseconds.
    fn bench_rpc(&mut self, _count: usize) -> Result<(&'static str, RingSamples), Errno> {
        Err(Errno::NotSupported)
    }

    /// Time a 4 KiB read of every page of `path` once, in order: one
    /// sample per page, in nanoseconds (`bench read`).
    fn bench_read(&mut self, _path: &str) -> Result<RingSamples, Errno> {
        Err(Errno::NotSupported)
    }

    /// Time a synchronous invalidation of every page of `path` this node
    /// owns, one page at a time (`bench inv`).
    fn bench_inv(&mut self, _path: &str) -> Result<RingSamples, Errno> {
        Err(Errno::NotSupported)
    }

    /// Directory throughput: map and drop every page of `path` (owned by
    /// another node) `rounds` times, `batch` page requests published
    /// together (1..=[`MAX_DIR_BATCH`]); returns (page operations, elapsed
    /// nanoseconds) (`bench dir`).
    fn bench_dir(&mut self, _path: &str, _rounds: u32, _batch: usize) -> Result<(u64, u64), Errno> {
        Err(Errno::NotSupported)
    }
}

/// What the shell needs from the kernel: every concern above. Applications,
/// fio and the task executor take the narrower traits they use.
pub trait Os: Console + Files + AsyncIo + CacheControl + Benches {}

impl<T: Console + Files + AsyncIo + CacheControl + Benches + ?Sized> Os for T {}

/// Every trait of the interface, for callers that use methods of several
/// on a concrete type (`use userland::os::traits::*`).
pub mod traits {
    pub use super::{AsyncIo, Benches, CacheControl, Console, Files, Os};
}

/// Run `f` with this node's tasks in group `name` (`app`/`fio --group`),
/// then back in `default`, whatever `f` returned. `Err` if the group
/// cannot be entered (nothing ran): a bad name, too many groups, or a
/// mode without a single-copy cache.
pub fn in_group<O: CacheControl + ?Sized, T>(
    os: &mut O,
    name: &str,
    f: impl FnOnce(&mut O) -> T,
) -> Result<T, String> {
    os.set_task_group(name).map_err(|e| match e {
        Errno::NotSupported => {
            String::from("task groups need a single-copy mode (strong or relaxed): not supported")
        }
        Errno::NoSpace => alloc::format!("too many groups (at most {MAX_GROUPS})"),
        e => alloc::format!("{e}"),
    })?;
    let out = f(os);
    // `default` always exists, and the mode took `name`: this cannot fail.
    let _ = os.set_task_group(DEFAULT_GROUP_NAME);
    Ok(out)
}

/// One positioned I/O through [`Files::seek`] and [`Files::read`] /
/// [`Files::write`]: all of `buf`, or less when a read reaches the end of the
/// file. The building block of [`AsyncIo::io_batch`] for implementations that
/// move bytes one I/O at a time.
pub fn positioned_io<O: Files + ?Sized>(
    os: &mut O,
    fd: Fd,
    offset: u64,
    write: bool,
    buf: &mut [u8],
) -> Result<usize, Errno> {
    os.seek(fd, offset)?;
    let mut n = 0usize;
    loop {
        let rest = match buf.get_mut(n..) {
            Some(r) if !r.is_empty() => r,
            _ => return Ok(n),
        };
        let k = if write {
            os.write(fd, rest)?
        } else {
            os.read(fd, rest)?
        };
        if k == 0 {
            return Ok(n);
        }
        n = n.saturating_add(k);
    }
}

/// Perform `call` synchronously with the [`Os`] methods (what
/// [`AsyncIo::meta_start`] does by default, and the fallback of an OS that
/// cannot split a call).
pub fn run_meta<O: Files + ?Sized>(os: &mut O, call: MetaCall) -> Result<MetaDone, Errno> {
    match call {
        MetaCall::Open { path, flags } => os.open(&path, flags).map(MetaDone::Fd),
        MetaCall::Stat { path } => os.stat(&path).map(MetaDone::Attr),
        MetaCall::Close { fd } => os.close(fd).map(|()| MetaDone::Ok),
        MetaCall::Fsync { fd } => os.fsync(fd).map(|()| MetaDone::Ok),
        MetaCall::Truncate { fd, size } => os.truncate(fd, size).map(|()| MetaDone::Ok),
        MetaCall::Unlink { path } => os.unlink(&path).map(|()| MetaDone::Ok),
        MetaCall::Mkdir { path } => os.mkdir(&path).map(|()| MetaDone::Ok),
        MetaCall::Rmdir { path } => os.rmdir(&path).map(|()| MetaDone::Ok),
        MetaCall::Readdir { path } => os.readdir(&path).map(MetaDone::Entries),
    }
}
