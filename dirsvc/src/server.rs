//! The directory's serving loop, by job:
//!
//! * membership: joins, heartbeats, failures, leaves and session epochs
//!   (`server/membership.rs`, see [below](#membership));
//! * dispatch: polling every member's ack and request rings, decoding,
//!   routing page requests to the page directory and the rest to the file
//!   server, and publishing answers (`server/dispatch.rs`);
//! * the action executor: running the page directory's actions (replies,
//!   fills from disk, write-backs, DIR_INVs, export bits;
//!   `server/executor.rs`);
//! * the file server: metadata and data requests against [`flatfs`]
//!   (`server/fileserver.rs`), shared with `net` mode
//!   ([`crate::netserve`]);
//! * invalidations taken from quietly sleeping sharers without waking them
//!   (`server/quiet.rs`);
//! * the disk: page fills (`server/fills.rs`), file-server reads
//!   (`server/fileread.rs`) and writes (`server/writes.rs`) in flight
//!   while the loop goes on serving.
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
//! [`Config::fencing`], `server/fencing.rs`): until then nothing reuses
//! its frames or the frames it mapped.

use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;
use core::hash::BuildHasherDefault;

use rustc_hash::FxHasher;

use crate::diskq::DiskQueue;
use crate::pagedir::PageDir;
use crate::writeq::WriteQueue;
use fabric::layout::{DirState, Header, Layout};
use fabric::proto::{DecodeError, Desc, DirStats, Op, PageDirStats};
use fabric::ring::{Consumer, Producer, RingError};
use fabric::shm::SharedMem;
use flatfs::{BlockDevice, Fs};

mod appendlock;
mod daxfill;
mod dispatch;
mod executor;
mod fencing;
mod fileread;
mod fileserver;
mod fills;
mod locality;
mod membership;
pub mod misstime;
mod netreq;
mod ordered;
mod quiet;
mod reply;
pub use daxfill::DaxStats;
pub use quiet::QuietStats;
pub use reply::NetAnswer;
mod replicas;
mod runs;
mod writes;

use misstime::MissTimer;

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
    /// it (`server/quiet.rs`; boot option `lazy_inv`).
    pub lazy_inv: bool,
    /// Fence a node declared failed before reusing its frames and the
    /// frames it mapped (`server/fencing.rs`, boot option `fence`); off:
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
        }
    }
}

/// Per-node state kept privately by the directory.
struct Peer {
    req: Consumer,
    resp: Producer,
    notify: Producer,
    ack: Consumer,
    /// Responses that did not fit in the response ring yet.
    backlog: VecDeque<Desc>,
    /// Invalidations that did not fit in the notify ring yet.
    notify_backlog: VecDeque<Desc>,
    member: bool,
    last_hb: u64,
    last_hb_change_ns: u64,
    /// Response and notify heads last reported in [`Poll::responded`] /
    /// [`Poll::noticed`].
    reported: (u32, u32),
    /// DIR_INVs and INV_RANGEs published on the notify ring whose ack is
    /// not in yet, in order (`server/quiet.rs`).
    invs_out: VecDeque<InvOut>,
    /// Invalidations taken as acknowledged while the node slept quietly:
    /// the node's own ack of each, when it comes, is dropped.
    lazy_acked: Vec<InvOut>,
    /// A notice other than a DIR_INV was published since the last report
    /// (the node must be woken for it).
    wake_notice: bool,
}

/// An invalidation notice awaiting its ack: a DIR_INV (its page, a span
/// of one) or an INV_RANGE (its span). Each is answered by its own kind
/// of ack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct InvOut {
    /// Pages.
    pub(crate) span: fabric::proto::PageSpan,
    /// An INV_RANGE (else a DIR_INV).
    pub(crate) range: bool,
}

impl Peer {
    /// Fresh endpoints of `node`'s channel, not a member.
    fn new(layout: &Layout, node: u32) -> Peer {
        let ch = layout.channel(node);
        Peer {
            req: Consumer::new(ch.request),
            resp: Producer::new(ch.response),
            notify: Producer::new(ch.notify),
            ack: Consumer::new(ch.ack),
            backlog: VecDeque::new(),
            notify_backlog: VecDeque::new(),
            member: false,
            last_hb: 0,
            last_hb_change_ns: 0,
            reported: (0, 0),
            invs_out: VecDeque::new(),
            lazy_acked: Vec::new(),
            wake_notice: false,
        }
    }
}

/// The directory service.
pub struct Directory<D: BlockDevice> {
    layout: Layout,
    /// `daxfs` mode's page cache (`server/daxfill.rs`).
    dax: Option<fabric::layout::DaxLayout>,
    dax_stats: daxfill::DaxStats,
    fs: Option<Fs<D>>,
    peers: Vec<Peer>,
    cfg: Config,
    requests: u64,
    ops: [u64; 32],
    /// The last malformed request seen, reported once per poll.
    last_bad: Option<Event>,
    /// The single-copy page directory.
    pages: PageDir,
    /// Opcode of every page request not answered yet, by (node, tag)
    /// (a hash map: one insert and one remove per page request, without
    /// the allocations of a B-tree that empties and fills).
    page_ops: hashbrown::HashMap<(u8, u32), Op, BuildHasherDefault<FxHasher>>,
    /// Runs of pages in one request, answered once every page is
    /// (`server/runs.rs`).
    runs: runs::Runs,
    /// Requests served per sweep (index = batch size, capped at 64).
    batches: [u64; 65],
    /// Page fills and file-read blocks waiting for the disk or in flight.
    disk: DiskQueue,
    /// File-server reads waiting for their blocks, by id
    /// (`server/fileread.rs`).
    reads: BTreeMap<u64, fileread::PendingRead>,
    /// The next file read's id.
    next_read: u64,
    /// Most requests in flight: `Config::fill_depth` bounded by the
    /// device's queue depth (0: synchronous fills and writes).
    fill_depth: usize,
    /// Deferred block writes in flight and what waits for them.
    writes: WriteQueue<writes::Then>,
    /// Fsyncs waiting for their files' writes.
    fsyncs: Vec<writes::WaitingFsync>,
    /// Fsyncs whose device flush is in flight, by completion id.
    flushing: Vec<(u64, writes::WaitingFsync)>,
    /// The next flush's id (below [`writes::FLUSH_ID`]).
    next_flush: u64,
    /// Fsyncs answered after an asynchronous flush.
    flushes_async: u64,
    /// Set while the ring path runs a request whose writes may be
    /// deferred ([`Directory::execute`] stages them in `staged`).
    defer_writes: bool,
    /// The node whose file request is being served on the rings (a
    /// delegation's holder cuts its own pages before it asks).
    requester: Option<u8>,
    /// Writes the last deferred request staged.
    staged: Vec<flatfs::Staged>,
    /// Consecutive file-server writes of one node to one file in this
    /// sweep, not queued yet: they go to the device as one job
    /// ([`writes::WriteGroup`]).
    write_group: Option<writes::WriteGroup>,
    /// The write-backs of this sweep's page requests, not queued yet: one
    /// job for the sweep ([`writes::PageGroup`]).
    page_group: Option<writes::PageGroup>,
    /// Set while the ring path runs a page request's actions: their
    /// write-backs join `page_group`.
    group_pages: bool,
    /// Files whose recorded size is held below cached data (`server/ordered.rs`).
    grown: BTreeMap<u64, ordered::Grown>,
    /// Per-phase service times of misses.
    miss: MissTimer,
    /// Strong-mode replicas granted and revocations in progress.
    replicas: replicas::Replicas,
    /// Invalidations taken from quiet sleepers, and their late acks.
    quiet: quiet::QuietStats,
    /// Answers to `net` mode requests served later, not yet taken by the
    /// kernel's links (`server/reply.rs`).
    net_answers: Vec<reply::NetAnswer>,
    /// `net` mode requests answered later, since boot.
    net_later: u64,
    /// Failed nodes waiting for their fence (`server/fencing.rs`).
    fences: fencing::Fences,
    /// Append locks, leases by inode (`crate::appendlock`).
    append_locks: crate::appendlock::AppendLocks,
    /// The clock of the last [`Directory::poll`] (append leases).
    now_ns: u64,
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
        let peers = (1..=layout.max_nodes)
            .map(|n| Peer::new(&layout, n))
            .collect();
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
            dax,
            dax_stats: daxfill::DaxStats::default(),
            fs,
            peers,
            cfg,
            requests: 0,
            ops: [0; 32],
            last_bad: None,
            pages: {
                let mut p = PageDir::for_nodes(layout.max_nodes);
                p.set_delegation(cfg.delegation);
                p
            },
            page_ops: Default::default(),
            runs: runs::Runs::default(),
            batches: [0; 65],
            disk: DiskQueue::new(fill_depth),
            reads: BTreeMap::new(),
            next_read: 0,
            fill_depth,
            writes: WriteQueue::new(),
            fsyncs: Vec::new(),
            flushing: Vec::new(),
            next_flush: 0,
            flushes_async: 0,
            defer_writes: false,
            requester: None,
            staged: Vec::new(),
            write_group: None,
            page_group: None,
            group_pages: false,
            grown: BTreeMap::new(),
            miss: MissTimer::new(cfg.clock),
            replicas: replicas::Replicas::default(),
            quiet: quiet::QuietStats::default(),
            net_answers: Vec::new(),
            net_later: 0,
            fences: fencing::Fences::default(),
            append_locks: crate::appendlock::AppendLocks::new(cfg.append_lease_ns),
            now_ns: 0,
        }
    }

    /// The layout being served.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Is `node` a member (joined, and not failed or left since)?
    pub fn is_member(&self, node: u32) -> bool {
        let i = (node as usize).wrapping_sub(1);
        self.peers.get(i).is_some_and(|p| p.member)
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
        self.peers
            .get((node as usize).wrapping_sub(1))
            .map_or((0, 0), |p| (p.backlog.len(), p.notify_backlog.len()))
    }

    /// Counters for `dir stats` and [`Op::Stats`].
    pub fn stats(&self) -> DirStats {
        let mut s = DirStats {
            requests: self.requests,
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
        &self.ops
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
        let max_batch = (1..=64).rev().find(|&b| self.batches[b] > 0).unwrap_or(0);
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

    /// Invalidation counters, for `dir stats` and [`Op::InvStats`].
    pub fn inv_stats(&self) -> fabric::proto::InvStats {
        let s = self.pages.stats();
        fabric::proto::InvStats {
            dir_invs: s.dir_invs,
            acks: s.acks,
            range_invs: s.range_invs,
            range_acks: s.range_acks,
            range_pages: s.range_pages,
            quiet_taken: self.quiet.taken,
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
        self.miss.stats(kind)
    }

    /// The page directory (for tests and `dir stats`).
    pub fn pages(&self) -> &PageDir {
        &self.pages
    }

    /// Requests served per sweep, by batch size.
    pub fn batches(&self) -> &[u64; 65] {
        &self.batches
    }

    /// Count one request with opcode `op` (`None`: undecodable) in the
    /// per-opcode counters and the total of [`Op::Stats`]. The ring path
    /// counts the total per sweep instead (see [`Directory::serve`]).
    pub(crate) fn count_request(&mut self, op: Option<Op>) {
        self.requests += 1;
        if let Some(op) = op {
            self.ops[(op as usize).min(31)] += 1;
        }
    }
}

#[cfg(test)]
mod tests;
