//! The directory's serving loop. [`Directory`] holds the page directory
//! and the file system, and sub-states that own the rest, each in the
//! file that runs it:
//!
//! * membership: joins, heartbeats, failures, leaves, session epochs and
//!   fencing (`membership::Members`, `server/membership/`, see
//!   [below](#membership));
//! * the rings: every node's four rings and backlogs, and publishing
//!   answers and notices (`links::Links`, `server/links.rs`);
//! * dispatch: polling every member's request rings (acks first),
//!   decoding, routing page requests to the page directory and the rest
//!   to the file server (`server/dispatch.rs`);
//! * the action executor: running the page directory's actions (replies,
//!   fills from disk, write-backs, DIR_INVs, export bits;
//!   `server/executor.rs`);
//! * invalidations in flight, and those taken from quietly sleeping
//!   sharers without waking them: the Invalidation Manager
//!   (`inval::Invalidations`, `server/inval/`);
//! * page requests not answered yet and runs (`runs::PageRequests`,
//!   `server/runs.rs`);
//! * the file server: metadata and data requests against [`flatfs`]
//!   (`server/fileserver.rs`), shared with `net` mode
//!   ([`crate::netserve`], `server/netreq.rs`, answers in
//!   `server/reply.rs`);
//! * the disk (`io::Io`, `server/io.rs`): page fills
//!   (`server/fills.rs`), file-server reads (`server/fileread.rs`) and
//!   writes and fsyncs (`server/writes.rs`) in flight while the loop goes
//!   on serving; ordered sizes (`server/ordered.rs`);
//! * replicas (`server/replicas.rs`), append locks
//!   (`server/appendlock.rs`), `daxfs` fills (`server/daxfill.rs`),
//!   locality (`server/locality.rs`);
//! * statistics (`counters::Counters`, `server/counters.rs`, with the
//!   miss timer of `server/misstime.rs`).
//!
//! [`Directory::poll`] does one pass over every node and returns what it
//! did; the kernel calls it in its loop on the directory's dedicated core
//! and logs the [`Event`]s. Everything here is pure logic over
//! [`SharedMem`] and [`BlockDevice`], so the host tests drive it with a heap
//! region and an in-memory disk.
//!
//! # Membership
//!
//! A node asks to join by writing `Joining` in its node record; the
//! directory admits it (fresh rings, new epoch, `Up`) once no page of the
//! cluster still uses its frames. A member whose heartbeat stops for
//! [`Config::heartbeat_timeout_ns`], that says goodbye, that restarts or
//! whose rings are corrupt is dropped from the page directory. A node
//! failed on its heartbeat is dropped only once it is fenced (with
//! [`Config::fencing`], `server/membership/fencing.rs`): until then
//! nothing reuses its frames or the frames it mapped.

use alloc::vec::Vec;

use crate::pagedir::PageDir;
use fabric::layout::{DirState, Header, Layout};
use fabric::proto::{DecodeError, DirStats, Op, PageDirStats};
use fabric::ring::RingError;
use fabric::shm::SharedMem;
use flatfs::{BlockDevice, Fs};

mod appendlock;
mod counters;
mod daxfill;
mod dispatch;
mod executor;
mod fileread;
mod fileserver;
mod fills;
mod inval;
mod io;
mod links;
mod locality;
mod membership;
pub mod misstime;
mod netreq;
mod ordered;
mod replicas;
mod reply;
mod runs;
mod writeback;
mod writes;

pub use daxfill::DaxStats;
pub use inval::QuietStats;
pub use reply::NetAnswer;

/// Something worth a log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A node joined (or rejoined) with a new session epoch.
    Joined {
        /// Node id.
        node: u32,
        /// Its session epoch.
        epoch: u64,
    },
    /// A node's heartbeat stopped for longer than the timeout.
    Failed {
        /// Node id.
        node: u32,
        /// Milliseconds since its heartbeat last changed.
        silent_ms: u64,
    },
    /// A node said goodbye.
    Left {
        /// Node id.
        node: u32,
    },
    /// A node's rings hold impossible indices; the node is failed.
    Corrupt {
        /// Node id.
        node: u32,
        /// What was wrong.
        error: RingError,
    },
    /// A failed node must be fenced before its frames, and the frames it
    /// mapped, are reused: asked of the host's fencer (`fabric::fence`).
    FenceAsked {
        /// Node id.
        node: u32,
        /// The failed session's epoch.
        epoch: u64,
    },
    /// A failed node is fenced (its frames may be reused now).
    Fenced {
        /// Node id.
        node: u32,
        /// Milliseconds since the fence was asked for.
        after_ms: u64,
        /// The node rejoined (it dropped its mappings itself) rather than
        /// the fencer confirming.
        by_rejoin: bool,
    },
    /// No fencer confirmed within [`Config::fence_timeout_ns`]: the node's
    /// frames and the frames it mapped stay out of use until one does or
    /// the node rejoins.
    FenceOverdue {
        /// Node id.
        node: u32,
        /// Milliseconds since the fence was asked for.
        waited_ms: u64,
    },
    /// A request could not be decoded; it was answered with `Invalid`.
    BadRequest {
        /// Node id.
        node: u32,
        /// Why.
        error: DecodeError,
    },
}

/// Entries of the directory's growing collections
/// ([`Directory::queue_lengths`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueLengths {
    /// Page-directory entries.
    pub pages: usize,
    /// Page requests whose answer is pending, by (node, tag).
    pub page_ops: usize,
    /// File-server reads waiting for the disk.
    pub reads: usize,
    /// Fsyncs waiting for writes or for their flush.
    pub fsyncs: usize,
    /// Files whose grown size waits for its data (ordered sizes).
    pub grown: usize,
    /// `net` answers waiting to be handed over.
    pub net_answers: usize,
    /// Write jobs and the block writes they hold.
    pub write_jobs: usize,
    pub write_blocks: usize,
    /// Page fills waiting or in flight.
    pub fills: usize,
    /// Blocks whose newest bytes the file system keeps until their
    /// deferred writes landed (`flatfs::Fs::pending_blocks`).
    pub fs_pending: usize,
    /// Answers and notices waiting for room in the nodes' rings.
    pub backlog: usize,
    /// Invalidations not yet acknowledged, and those taken from quiet
    /// sleepers whose late acks have not come.
    pub invs_out: usize,
    pub lazy_acked: usize,
}

/// The default [`Config::write_backlog_max`]: 1,024 block writes, 8 MiB
/// of copies (each block is held by its job and by the file system's
/// overlay until it landed; the directory's heap is at least 24 MiB). The
/// disk drains this many in about a second and a half under TCG, well
/// within a node's RPC timeout.
pub const WRITE_BACKLOG_MAX: usize = 1024;

/// Directory configuration.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// A member whose heartbeat does not change for this long is failed.
    pub heartbeat_timeout_ns: u64,
    /// Most requests taken from one node per poll (fairness).
    pub batch: usize,
    /// Most disk requests (page fills and writes) in flight at once
    /// (bounded by the device's queue depth); 0: every fill and every
    /// write is synchronous and the loop waits for it (the behaviour
    /// before the asynchronous directory).
    pub fill_depth: usize,
    /// Nanoseconds on the directory's clock, for the per-phase service
    /// times of misses ([`Directory::miss_stats`]); [`misstime::no_clock`]
    /// times nothing.
    pub clock: fn() -> u64,
    /// A full memory fence between this instance and the others (the
    /// kernel's is a port read: QEMU drops a guest `mfence` under
    /// single-threaded TCG); orders a replica bit's store before the loads
    /// of the nodes' `writing` words (`server/replicas.rs`).
    pub fence: fn(),
    /// Take a DIR_INV published to a sharer that sleeps quietly
    /// (`fabric::doorbell::SLEEP_QUIET`) as acknowledged, without waking
    /// it (`server/inval/quiet.rs`; boot option `lazy_inv`).
    pub lazy_inv: bool,
    /// Fence a node declared failed before reusing its frames and the
    /// frames it mapped (`server/membership/fencing.rs`, boot option
    /// `fence`); off:
    /// they are reused at once, which is safe only if a failed node can
    /// never run again (host tests and simulations).
    pub fencing: bool,
    /// How long the directory waits for a fencer before it logs that none
    /// answered ([`Event::FenceOverdue`]); it keeps waiting.
    pub fence_timeout_ns: u64,
    /// An append lock's lease ([`crate::appendlock`]): a lock neither
    /// renewed nor given back for this long goes to the next taker. Keep
    /// it above [`fabric::proto::APPEND_BUDGET_NS`] plus the heartbeat
    /// timeout ([`append_lease_ns`]), so it never lapses while its
    /// holder may still store under it.
    pub append_lease_ns: u64,
    /// `daxfs` mode: format DaxFS's page cache in the region and serve
    /// its fills (`server/daxfill.rs`).
    pub daxfs: bool,
    /// Strong mode: grant delegations of file ranges
    /// (`pagedir/deleg.rs`; boot option `delegation`).
    pub delegation: bool,
    /// Backpressure: while the write queue and the sweep's open groups
    /// hold this many block writes (each two 4 KiB copies on the heap) or
    /// more, no node's new requests are taken; acks, disk completions and the heartbeat go on. Without it
    /// nodes writing faster than the disk grow the queue until the
    /// directory's heap is exhausted.
    pub write_backlog_max: usize,
}

/// The append lease for a heartbeat timeout of `heartbeat_timeout_ns`:
/// twice the nodes' budget under the lock plus the heartbeat timeout.
pub fn append_lease_ns(heartbeat_timeout_ns: u64) -> u64 {
    fabric::proto::APPEND_BUDGET_NS
        .saturating_mul(2)
        .saturating_add(heartbeat_timeout_ns)
}

fn seq_cst_fence() {
    core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
}

impl Default for Config {
    fn default() -> Self {
        Config {
            heartbeat_timeout_ns: 3_000_000_000,
            batch: 32,
            fill_depth: 32,
            clock: misstime::no_clock,
            fence: seq_cst_fence,
            lazy_inv: true,
            fencing: false,
            fence_timeout_ns: 5_000_000_000,
            append_lease_ns: append_lease_ns(3_000_000_000),
            daxfs: false,
            delegation: false,
            write_backlog_max: WRITE_BACKLOG_MAX,
        }
    }
}

/// The directory service: the page directory and the file system it
/// serves, and the sub-states that own the rest (each with its own
/// interface, used by the files that need it).
pub struct Directory<D: BlockDevice> {
    layout: Layout,
    cfg: Config,
    fs: Option<Fs<D>>,
    /// The single-copy page directory.
    pages: PageDir,
    /// Who is a member, heartbeats, fences (`server/membership/`).
    members: membership::Members,
    /// Every node's rings and backlogs (`server/links.rs`).
    links: links::Links,
    /// Invalidations in flight and the lazy acks (`server/inval/`).
    inval: inval::Invalidations,
    /// Page requests not answered yet, and runs (`server/runs.rs`).
    requests: runs::PageRequests,
    /// Disk requests waiting or in flight, and the sweep's write staging
    /// (`server/io.rs`).
    io: io::Io,
    /// Files whose recorded size is held below cached data
    /// (`server/ordered.rs`).
    sizes: ordered::Sizes,
    /// The node whose file request is being served on the rings (a
    /// delegation's holder cuts its own pages before it asks).
    requester: Option<u8>,
    /// Strong-mode replicas granted and revocations in progress.
    replicas: replicas::Replicas,
    /// Append locks, leases by inode (`crate::appendlock`).
    append_locks: crate::appendlock::AppendLocks,
    /// `daxfs` mode's page cache (`server/daxfill.rs`).
    dax: daxfill::Dax,
    /// Answers to `net` mode requests served later (`server/reply.rs`).
    net: reply::NetAnswers,
    /// Request counters, miss times, the last malformed request
    /// (`server/counters.rs`).
    counters: counters::Counters,
}

/// Result of one [`Directory::poll`].
#[derive(Debug, Default)]
pub struct Poll {
    /// Requests served in this pass.
    pub served: usize,
    /// Membership and error events.
    pub events: Vec<Event>,
    /// Nodes that got responses since the last pass (bit `node - 1`): the
    /// kernel rings those that sleep (doorbells, vector "response").
    pub responded: u64,
    /// Nodes that got notices (DIR_INV) since the last pass (bit `node - 1`).
    pub noticed: u64,
    /// Disk requests (page fills and writes) that completed in this pass.
    pub completed: usize,
}

impl Poll {
    /// Nodes that got anything, each with whether it got a notice (in
    /// node order). Visits only the set bits: the directory's loop calls
    /// this after every pass, nearly always with nothing set.
    pub fn deliveries(&self) -> impl Iterator<Item = (u32, bool)> + '_ {
        let mut left = self.responded | self.noticed;
        core::iter::from_fn(move || {
            if left == 0 {
                return None;
            }
            let b = left.trailing_zeros();
            left &= left - 1;
            Some((b + 1, self.noticed >> b & 1 != 0))
        })
    }
}

impl<D: BlockDevice> Directory<D> {
    /// Start serving a region that `layout.format` just wrote. Without a
    /// file system (`None`: no disk, or the mount was refused) every request
    /// is answered with `Unavailable` and the header says `NoStorage`.
    pub fn new(
        mem: &(impl SharedMem + ?Sized),
        layout: Layout,
        fs: Option<Fs<D>>,
        cfg: Config,
    ) -> Directory<D> {
        let h = Header::new(mem, layout);
        h.set_dir_state(if fs.is_some() {
            DirState::Up
        } else {
            DirState::NoStorage
        });
        let fill_depth = fs
            .as_ref()
            .map_or(0, |f| cfg.fill_depth.min(f.device().queue_depth()));
        let dax = cfg.daxfs.then(|| layout.dax()).flatten();
        match dax {
            Some(d) if Self::dax_format(mem, &d) => log::info!(
                "daxfs: page cache of {} slots at {:#x}, frames at {:#x}",
                d.slots,
                d.meta_off,
                d.data_off
            ),
            _ if cfg.daxfs => log::error!("daxfs: the region has no room for the page cache"),
            _ => {}
        }
        Directory {
            layout,
            cfg,
            fs,
            pages: {
                let mut p = PageDir::for_nodes(layout.max_nodes);
                p.set_delegation(cfg.delegation);
                p
            },
            requester: None,
            members: membership::Members::new(layout.max_nodes),
            links: links::Links::new(&layout),
            inval: inval::Invalidations::new(layout.max_nodes),
            requests: runs::PageRequests::default(),
            io: io::Io::new(fill_depth),
            sizes: ordered::Sizes::default(),
            replicas: replicas::Replicas::default(),
            append_locks: crate::appendlock::AppendLocks::new(cfg.append_lease_ns),
            dax: daxfill::Dax::new(dax),
            net: reply::NetAnswers::default(),
            counters: counters::Counters::new(cfg.clock),
        }
    }

    /// The layout being served.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Is `node` a member (joined, and not failed or left since)?
    pub fn is_member(&self, node: u32) -> bool {
        self.members.is_member(node)
    }

    /// Does the directory have storage?
    pub fn has_storage(&self) -> bool {
        self.fs.is_some()
    }

    /// The file system, if mounted.
    pub fn fs(&self) -> Option<&Fs<D>> {
        self.fs.as_ref()
    }

    /// The device under the file system, if mounted (the kernel arms its
    /// completion interrupt before halting for it).
    pub fn device_mut(&mut self) -> Option<&mut D> {
        self.fs.as_mut().map(|f| f.device_mut())
    }

    /// Flush and give the file system back (shutdown).
    pub fn shutdown(&mut self, mem: &(impl SharedMem + ?Sized)) -> Option<Fs<D>> {
        Header::new(mem, self.layout).set_dir_state(DirState::Down);
        self.drain_fills(mem, None);
        self.drain_writes(mem, None);
        let mut fs = self.fs.take();
        if let Some(f) = fs.as_mut() {
            let _ = f.sync();
        }
        fs
    }

    /// Responses and invalidations of `node` waiting for room in its
    /// rings (a node that stopped draining them).
    pub fn backlogs(&self, node: u32) -> (usize, usize) {
        self.links.backlogs(node)
    }

    /// How many entries the directory's growing collections hold (its
    /// heap use is about proportional to these; logged with the heap's
    /// high marks).
    pub fn queue_lengths(&self) -> QueueLengths {
        let (invs_out, lazy_acked) = self.inval.lengths();
        QueueLengths {
            pages: self.pages.len(),
            page_ops: self.requests.unanswered(),
            reads: self.reads_pending(),
            fsyncs: self.io.fsyncs.len(),
            grown: self.sizes.len(),
            net_answers: self.net.len(),
            write_jobs: self.io.writes.jobs(),
            write_blocks: self.io.writes.held_blocks(),
            fills: self.fills_pending(),
            fs_pending: self.fs.as_ref().map_or(0, |f| f.pending_blocks()),
            backlog: self.links.backlogged(),
            invs_out,
            lazy_acked,
        }
    }

    /// Counters for `dir stats` and [`Op::Stats`].
    pub fn stats(&self) -> DirStats {
        let mut s = DirStats {
            requests: self.counters.requests(),
            ..DirStats::default()
        };
        if let Some(fs) = &self.fs {
            let f = fs.stats();
            s.disk_reads = f.disk_reads;
            s.disk_writes = f.disk_writes;
            s.inodes_used = f.inodes_used;
            s.inodes_total = f.inodes_total;
            s.blocks_used = f.blocks_used;
            s.blocks_total = f.blocks_total;
        }
        s
    }

    /// Requests served per opcode number (index = opcode, capped at 31).
    pub fn ops(&self) -> &[u64; 32] {
        self.counters.ops()
    }

    /// One full pass: [`Directory::membership`] then [`Directory::serve`].
    pub fn poll(&mut self, mem: &(impl SharedMem + ?Sized), now_ns: u64) -> Poll {
        let mut p = self.membership(mem, now_ns);
        let s = self.serve(mem);
        p.served = s.served;
        p.events.extend(s.events);
        p.responded = s.responded;
        p.noticed = s.noticed;
        p.completed = s.completed;
        p
    }

    /// Page-directory counters, for `dir stats` and [`Op::PageStats`].
    pub fn page_stats(&self) -> PageDirStats {
        let s = self.pages.stats();
        let batches = self.counters.batches();
        let max_batch = (1..=64).rev().find(|&b| batches[b] > 0).unwrap_or(0);
        PageDirStats {
            entries: self.pages.len() as u64,
            page_requests: s.reads + s.lookup_locks + s.unlocks + s.invs + s.drops,
            fills: s.fills,
            remote_maps: s.remote_maps,
            dir_invs: s.dir_invs,
            writebacks: s.writebacks,
            max_batch: max_batch as u64,
        }
    }

    /// Delegation counters, for `dir stats` and [`Op::DelegStats`].
    pub fn deleg_stats(&self) -> fabric::proto::DelegStats {
        let s = self.pages.stats();
        fabric::proto::DelegStats {
            granted: s.delegations,
            denied: s.deleg_denied,
            recalled: s.recalls,
            returned: s.returns,
            pages: s.deleg_pages,
            parked: s.parked,
        }
    }

    /// The directory's service times of `kind` of miss, phase by phase
    /// (`bench miss`, [`Op::MissStats`]).
    pub fn miss_stats(&self, kind: fabric::proto::MissKind) -> fabric::proto::MissStats {
        self.counters.miss.stats(kind)
    }

    /// The page directory (for tests and `dir stats`).
    pub fn pages(&self) -> &PageDir {
        &self.pages
    }

    /// Requests served per sweep, by batch size.
    pub fn batches(&self) -> &[u64; 65] {
        self.counters.batches()
    }

    /// Count one request with opcode `op` (`None`: undecodable) in the
    /// per-opcode counters and the total of [`Op::Stats`]. The ring path
    /// counts the total per sweep instead (see [`Directory::serve`]).
    pub(crate) fn count_request(&mut self, op: Option<Op>) {
        self.counters.count_requests(1);
        if let Some(op) = op {
            self.counters.count_op(op);
        }
    }
}

#[cfg(test)]
mod tests;
