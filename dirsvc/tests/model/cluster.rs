//! The cluster model: the real [`PageDir`] as the directory's page state,
//! the serving loop's glue around it (ack rings, request rings, fills,
//! write-backs, the lazy take of quiet sleepers' DIR_INVs, membership)
//! modelled step by step, and nodes modelled as the node data path
//! behaves (`nodepath`'s page cache and single-copy paths).
//!
//! Every step is atomic; everything else interleaves freely. The shared
//! region's frames hold `(page, version)`: a write stores a new version,
//! a fill loads the disk's, a write-back stores the frame's on disk.
//!
//! Steps, per node (awake, unless said):
//! * `ReadMiss` / `WriteMiss`: READ / LOOKUP_LOCK of a page it does not
//!   hold, offering a free frame of its pool;
//! * `Reply`: take the next answer on its response ring (a DIR_INV met
//!   while the page's READ / LOOKUP_LOCK was unanswered is acked after the
//!   answer is applied);
//! * `Install`: write the whole page into a frame it holds in E, UNLOCK;
//! * `Write`: store into its own frame or (strong) the owner's frame it
//!   maps; relaxed: a private copy instead of a mapped frame (DROP sent);
//! * `Evict`: INV of a page it owns, DROP of one it maps;
//! * `Sync`: WRITEBACK of a page it dirtied, or (relaxed) its private
//!   copy written through the storage server;
//! * `Service`: the next DIR_INV on its notify ring: unmap, ack (with the
//!   dirty bit) on its ack ring;
//! * `Sleep`: halt (rings empty); quietly (`SLEEP_QUIET`) only when
//!   nothing is in flight an invalidation could race: no READ /
//!   LOOKUP_LOCK unanswered, no deferred ack, no dirty DROP unanswered, no
//!   dirty mapping of a peer's frame;
//! * `Wake`: (for any reason) service the whole notify ring first;
//! * `Fail`: declared failed (bounded number): fenced, so it stops at once
//!   and its mappings are gone; the directory drops it (`node_failed`);
//! * `Rejoin`: once no entry holds its frames, with an empty cache;
//! * (strong, `delegation`) `Delegate`: DELEGATE of the file's range with
//!   a free frame as its list frame; `DelegWrite`: under the delegation,
//!   a full-page write of a page it does not hold into a free frame of
//!   its own, no request (its list record first, then the store);
//!   `GiveBack`: DELEG_RETURN on its own; a RECALL on its notify ring is
//!   answered by DELEG_RETURN (its delegated pages become owned ones).
//!
//! and of the directory (one at a time):
//! * `DirAck`: pop one ack of a member's ack ring (dropped if its DIR_INV
//!   was taken while the node slept, else `PageDir::ack`);
//! * `DirReq`: pop one request of a member's request ring and handle it;
//! * `DirFill`: a fill from disk finishes (`PageDir::filled`);
//! * `QuietRead`: (lazy invalidation) read the sleep word of a member
//!   that owes acks: it sleeps quietly;
//! * `QuietTake`: take that member's DIR_INVs as acknowledged (clean);
//!   with [`QuietOrder::DrainFirst`] its ack ring is drained first.
//!
//! A RECALL is sent, and a delegation's list frame read
//! (`PageDir::list_read`), within the directory step that asks for it.

use std::collections::VecDeque;
use std::hash::Hash;

use dirsvc::pagedir::{Action, FrameOwner, PageDir, Phase};
use fabric::proto::{DelegPage, DelegRange, PageKey, PageReply, PageReq};

use crate::explore::{Fp, Model};

/// The file whose pages are modelled.
const INO: u64 = 7;
/// Frame numbers: node `n`'s frame `f` is `n * STRIDE + f`.
const STRIDE: u64 = 16;

fn key(p: u8) -> PageKey {
    PageKey {
        ino: INO,
        idx: u64::from(p),
    }
}

/// A node has at most one request per page in flight: the page names it.
fn tag(p: u8) -> u32 {
    u32::from(p) + 1
}

/// The "page" of a node's delegation messages (DELEGATE, DELEG_RETURN,
/// RECALL): past every modelled page.
const DP: u8 = 200;

/// The one delegated range: every modelled page is in it.
const RANGE: DelegRange = DelegRange { ino: INO, base: 0 };

/// Consistency mode of the nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Writes store into the single copy (own or mapped frame).
    Strong,
    /// A write to a mapped page makes a private copy, written back at sync.
    Relaxed,
}

/// Order of the lazy take of a quiet sleeper's DIR_INVs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuietOrder {
    /// Read the sleep word, drain the node's ack ring, then take what is
    /// still outstanding (the node pushes all its acks before it announces
    /// a quiet sleep).
    DrainFirst,
    /// Read the sleep word and take at once: acks pushed after the ring
    /// was last drained are taken as clean.
    TakeFirst,
}

/// What is explored.
#[derive(Debug, Clone)]
pub struct Config {
    /// Nodes 1..=nodes.
    pub nodes: u8,
    /// Pages 0..pages of one file.
    pub pages: u8,
    /// Frames per node's pool.
    pub frames: u8,
    /// New versions per page that `Write` / `WriteMiss` may start.
    pub writes: u8,
    /// Requests the nodes may start in all (READ, LOOKUP_LOCK, INV, DROP,
    /// WRITEBACK, private write-backs): bounds the depth.
    pub ops: u8,
    /// Node failures (each may rejoin).
    pub failures: u8,
    /// Node mode.
    pub mode: Mode,
    /// Lazy invalidation of quiet sleepers.
    pub lazy_inv: bool,
    /// Its order.
    pub order: QuietOrder,
    /// Check in every state that a completion path exists (every
    /// invalidation, fill and request finishes once nodes wake and serve).
    pub liveness: bool,
    /// Strong mode: nodes take delegations (directory `delegation` on).
    pub delegation: bool,
}

/// The nodes' pools, for the directory's frame check.
struct Pools {
    nodes: u8,
    frames: u8,
}

impl FrameOwner for Pools {
    fn owner_of(&self, gfn: u64) -> Option<u8> {
        let n = gfn / STRIDE;
        (n >= 1 && n <= u64::from(self.nodes) && gfn % STRIDE < u64::from(self.frames))
            .then_some(n as u8)
    }
}

/// A node's hold on a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Map {
    None,
    /// Owner: its own frame.
    Local {
        gfn: u64,
        dirty: bool,
    },
    /// Sharer: the owner's frame.
    Remote {
        gfn: u64,
        dirty: bool,
    },
    /// E granted: it installs the page in its frame.
    Reserved {
        gfn: u64,
    },
    /// Its INV is unanswered: it neither reads nor reuses the frame.
    Reclaiming {
        gfn: u64,
    },
    /// Relaxed private copy.
    Private {
        ver: u8,
    },
    /// Held under its delegation in its own frame (listed, dirty); the
    /// directory does not know it.
    Delegated {
        gfn: u64,
    },
}

/// A node's delegation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Deleg {
    None,
    /// DELEGATE unanswered; `recalled`: a RECALL came first.
    Asking {
        list: u64,
        recalled: bool,
    },
    Held {
        list: u64,
    },
    /// DELEG_RETURN unanswered.
    Returning {
        list: u64,
    },
}

/// A request on a node's request ring (and, per page, the one in flight).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Req {
    Read {
        frame: u64,
    },
    Lookup {
        frame: u64,
    },
    Unlock,
    Inv {
        dirty: bool,
    },
    Drop {
        dirty: bool,
    },
    Writeback {
        dirty: bool,
    },
    /// A file write of a private copy through the storage server.
    Data {
        ver: u8,
    },
    Delegate {
        list: u64,
    },
    Return,
}

/// An answer on a node's response ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Reply {
    Owner { gfn: u64 },
    Exclusive { gfn: u64 },
    Shared { gfn: u64 },
    Retry,
    Done,
    Refused,
    IoError,
    DataOk,
    Delegated { granted: bool },
}

impl From<PageReply> for Reply {
    fn from(r: PageReply) -> Reply {
        match r {
            PageReply::Owner { gfn } => Reply::Owner { gfn },
            PageReply::Exclusive { gfn } => Reply::Exclusive { gfn },
            PageReply::Shared { gfn, .. } => Reply::Shared { gfn },
            PageReply::Retry => Reply::Retry,
            PageReply::Done { .. } => Reply::Done,
            PageReply::Refused => Reply::Refused,
            PageReply::IoError => Reply::IoError,
            PageReply::Delegated { granted } => Reply::Delegated { granted },
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct PageSlot {
    map: Map,
    /// This node's request for the page not yet answered.
    req: Option<Req>,
    /// A DIR_INV met while the page's READ / LOOKUP_LOCK was unanswered.
    deferred: bool,
    /// The dirty bit of a mapping dropped with its DROP unanswered.
    drop_dirty: bool,
}

const EMPTY: PageSlot = PageSlot {
    map: Map::None,
    req: None,
    deferred: false,
    drop_dirty: false,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Life {
    Awake,
    Asleep { quiet: bool },
    Failed,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Node {
    life: Life,
    pages: Vec<PageSlot>,
    /// Bit `f`: frame `f` of the pool is free.
    free: u16,
    req: VecDeque<(u8, Req)>,
    resp: VecDeque<(u8, Reply)>,
    notify: VecDeque<u8>,
    acks: VecDeque<(u8, bool)>,
    deleg: Deleg,
}

impl Node {
    fn new(c: &Config) -> Node {
        Node {
            life: Life::Awake,
            pages: vec![EMPTY; c.pages as usize],
            free: (1u16 << c.frames) - 1,
            req: VecDeque::new(),
            resp: VecDeque::new(),
            notify: VecDeque::new(),
            acks: VecDeque::new(),
            deleg: Deleg::None,
        }
    }

    /// Take a free frame of the pool.
    fn take_frame(&mut self) -> u32 {
        let f = self.free.trailing_zeros();
        self.free &= !(1 << f);
        f
    }

    fn free_frame(&mut self, gfn: u64) {
        self.free |= 1 << (gfn % STRIDE);
    }

    /// SLEEP_QUIET allowed (`NodeCache::quiet`).
    fn may_sleep_quietly(&self) -> bool {
        self.pages.iter().all(|s| {
            !matches!(s.req, Some(Req::Read { .. } | Req::Lookup { .. }))
                && !s.deferred
                && !s.drop_dirty
                && !matches!(s.map, Map::Remote { dirty: true, .. })
        })
    }
}

/// The directory's view of a member (`server::Peer`, the parts modelled).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Peer {
    member: bool,
    /// DIR_INVs published whose ack has not been read.
    invs_out: Vec<u8>,
    /// DIR_INVs taken as acknowledged while the node slept quietly.
    lazy_acked: Vec<u8>,
}

/// A frame of the shared region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Frame {
    page: Option<u8>,
    ver: u8,
    /// Holds a completed write that is not on disk.
    unsaved: bool,
}

/// A state of the cluster.
#[derive(Clone)]
pub struct State {
    dir: PageDir,
    peers: Vec<Peer>,
    /// The member whose quiet sleep word the directory just read.
    quiet_seen: Option<u8>,
    /// Pages whose fill from disk is in flight.
    fills: Vec<u8>,
    disk: Vec<u8>,
    /// Latest completed write of each page.
    latest: Vec<u8>,
    /// Versions started per page.
    started: Vec<u8>,
    frames: Vec<Frame>,
    /// The delegation list a frame of the region holds (written by its
    /// node, read by the directory): (page, frame) records.
    lists: Vec<Option<Vec<(u8, u64)>>>,
    nodes: Vec<Node>,
    ops_left: u8,
    failures_left: u8,
}

/// One atomic step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    ReadMiss { n: u8, p: u8 },
    WriteMiss { n: u8, p: u8 },
    Reply { n: u8 },
    Install { n: u8, p: u8 },
    Write { n: u8, p: u8 },
    Evict { n: u8, p: u8 },
    Sync { n: u8, p: u8 },
    Service { n: u8 },
    Sleep { n: u8, quiet: bool },
    Wake { n: u8 },
    Fail { n: u8 },
    Rejoin { n: u8 },
    DirAck { n: u8 },
    DirReq { n: u8 },
    DirFill { p: u8 },
    QuietRead { n: u8 },
    QuietTake { n: u8 },
    Delegate { n: u8 },
    DelegWrite { n: u8, p: u8 },
    GiveBack { n: u8 },
}

/// The model of a configuration.
pub struct Cluster {
    pub cfg: Config,
    pools: Pools,
}

type Res = Result<(), String>;

impl Cluster {
    pub fn new(cfg: Config) -> Cluster {
        assert!(cfg.frames >= 1 && u64::from(cfg.frames) < STRIDE && cfg.nodes <= 32);
        let pools = Pools {
            nodes: cfg.nodes,
            frames: cfg.frames,
        };
        Cluster { cfg, pools }
    }

    fn frame_ix(&self, gfn: u64) -> usize {
        let n = gfn / STRIDE;
        ((n - 1) * u64::from(self.cfg.frames) + gfn % STRIDE) as usize
    }

    fn gfn(&self, n: u8, f: u32) -> u64 {
        u64::from(n) * STRIDE + u64::from(f)
    }

    fn node<'a>(&self, s: &'a mut State, n: u8) -> &'a mut Node {
        &mut s.nodes[n as usize - 1]
    }

    // ---- the directory's glue (what `server/*` does with `Action`s) ----

    /// Execute the directory's actions (`server/executor.rs`).
    fn run(&self, s: &mut State, actions: Vec<Action>) -> Res {
        for a in actions {
            match a {
                Action::Reply { node, tag, reply } => {
                    if s.peers[node as usize - 1].member {
                        let p = (tag - 1) as u8;
                        s.nodes[node as usize - 1].resp.push_back((p, reply.into()));
                    }
                }
                Action::Fill { key, .. } => {
                    let p = key.idx as u8;
                    if !s.fills.contains(&p) {
                        s.fills.push(p);
                        s.fills.sort_unstable();
                    }
                }
                Action::WriteBack { key, gfn } => {
                    let p = key.idx as u8;
                    let ix = self.frame_ix(gfn);
                    let f = s.frames[ix];
                    if f.page != Some(p) {
                        return Err(format!(
                            "write-back of page {p} from frame {gfn}, which holds page {:?}",
                            f.page
                        ));
                    }
                    s.disk[p as usize] = f.ver;
                    s.frames[ix].unsaved = false;
                }
                Action::Invalidate { node, key } => {
                    let i = node as usize - 1;
                    if s.peers[i].member {
                        let p = key.idx as u8;
                        s.nodes[i].notify.push_back(p);
                        s.peers[i].invs_out.push(p);
                    }
                }
                // Only a file's teardown sends these; the model has none.
                Action::InvalidateRange { node, span } => {
                    return Err(format!(
                        "INV_RANGE {span:?} to node {node} without a teardown"
                    ));
                }
                Action::Recall { node, range } => {
                    if range != RANGE {
                        return Err(format!("RECALL of {range:?}"));
                    }
                    let i = node as usize - 1;
                    if s.peers[i].member {
                        s.nodes[i].notify.push_back(DP);
                    }
                }
                Action::ReadList { node, range, gfn } => {
                    // The region's bytes, whoever wrote them last.
                    let pages = s.lists[self.frame_ix(gfn)].as_ref().map(|l| {
                        l.iter()
                            .map(|&(p, gfn)| DelegPage {
                                key: key(p),
                                gfn,
                                dirty: true,
                            })
                            .collect::<Vec<_>>()
                    });
                    let a = s.dir.list_read(&self.pools, node, range, pages.as_deref());
                    self.run(s, a)?;
                }
                Action::Export { .. } => {}
            }
        }
        Ok(())
    }

    /// One ack from `n`'s ack ring (`server/inval/acks.rs`, with
    /// `Invalidations::absorb`).
    fn dir_ack(&self, s: &mut State, n: u8) -> Res {
        let i = n as usize - 1;
        let Some((p, dirty)) = s.nodes[i].acks.pop_front() else {
            return Ok(());
        };
        let peer = &mut s.peers[i];
        if let Some(j) = peer.lazy_acked.iter().position(|x| *x == p) {
            peer.lazy_acked.remove(j);
            return Ok(());
        }
        if let Some(j) = peer.invs_out.iter().position(|x| *x == p) {
            peer.invs_out.remove(j);
        }
        let a = s.dir.ack(n, key(p), dirty);
        self.run(s, a)
    }

    fn dir_req(&self, s: &mut State, n: u8) -> Res {
        let i = n as usize - 1;
        let Some((p, r)) = s.nodes[i].req.pop_front() else {
            return Ok(());
        };
        let k = key(p);
        let req = match r {
            Req::Delegate { list } => PageReq::Delegate { range: RANGE, list },
            Req::Return => PageReq::DelegReturn { range: RANGE },
            Req::Read { frame } => PageReq::Read { key: k, frame },
            Req::Lookup { frame } => PageReq::LookupLock { key: k, frame },
            Req::Unlock => PageReq::Unlock { key: k },
            Req::Inv { dirty } => PageReq::Inv { key: k, dirty },
            Req::Drop { dirty } => PageReq::Drop { key: k, dirty },
            Req::Writeback { dirty } => PageReq::Writeback { key: k, dirty },
            Req::Data { ver } => {
                // A file write (`fileserver.rs`): fills in flight are
                // stale, the disk takes the bytes, the owner's frame of a
                // settled page is refreshed from it.
                s.dir.stale_fills(INO, k.idx, k.idx);
                s.disk[p as usize] = ver;
                if let Some(e) = s.dir.entry(&k).filter(|e| e.phase == Phase::Owned) {
                    let ix = self.frame_ix(e.gfn);
                    s.frames[ix] = Frame {
                        page: Some(p),
                        ver,
                        unsaved: false,
                    };
                }
                s.latest[p as usize] = s.latest[p as usize].max(ver);
                s.nodes[i].resp.push_back((p, Reply::DataOk));
                return Ok(());
            }
        };
        let a = s.dir.handle(&self.pools, n, tag(p), req);
        if r == Req::Unlock
            && a.iter().any(|x| {
                matches!(
                    x,
                    Action::Reply {
                        reply: PageReply::Done { .. },
                        ..
                    }
                )
            })
        {
            // The full-page write commits when the directory takes it.
            if let Some(e) = s.dir.entry(&k) {
                let ix = self.frame_ix(e.gfn);
                s.frames[ix].unsaved = true;
                s.latest[p as usize] = s.frames[ix].ver;
            }
        }
        self.run(s, a)
    }

    fn dir_fill(&self, s: &mut State, p: u8) -> Res {
        s.fills.retain(|x| *x != p);
        let k = key(p);
        let Some(e) = s.dir.entry(&k) else {
            return Ok(());
        };
        if !matches!(e.phase, Phase::Exclusive { by_dir: true, .. }) {
            return Ok(());
        }
        let ix = self.frame_ix(e.gfn);
        if s.frames[ix].unsaved {
            return Err(format!(
                "fill of page {p} overwrites frame {} holding an unsaved write of page {:?}",
                e.gfn, s.frames[ix].page
            ));
        }
        s.frames[ix] = Frame {
            page: Some(p),
            ver: s.disk[p as usize],
            unsaved: false,
        };
        let a = s.dir.filled(k, true);
        self.run(s, a)
    }

    /// `server/inval/quiet.rs`'s `take_quiet_acks` for one member whose
    /// word read quiet.
    fn quiet_take(&self, s: &mut State, n: u8) -> Res {
        s.quiet_seen = None;
        let i = n as usize - 1;
        if self.cfg.order == QuietOrder::DrainFirst {
            while !s.nodes[i].acks.is_empty() {
                self.dir_ack(s, n)?;
            }
        }
        let out = std::mem::take(&mut s.peers[i].invs_out);
        for p in out {
            match s.dir.awaits_ack(n, &key(p)) {
                Some(true) => {
                    s.peers[i].lazy_acked.push(p);
                    let a = s.dir.ack(n, key(p), false);
                    self.run(s, a)?;
                }
                Some(false) => s.peers[i].invs_out.push(p),
                None => {}
            }
        }
        Ok(())
    }

    /// The directory loses `n` (`membership.rs`'s `lose`).
    fn lose(&self, s: &mut State, n: u8) -> Res {
        let i = n as usize - 1;
        s.peers[i] = Peer {
            member: false,
            invs_out: Vec::new(),
            lazy_acked: Vec::new(),
        };
        let a = s.dir.node_failed(n);
        // Its fills are cancelled (`cancel_fills`).
        let dir = &s.dir;
        s.fills.retain(|p| dir.entry(&key(*p)).is_some());
        self.run(s, a)
    }

    /// Frames the directory will learn hold page `p` from a delegation's
    /// list: that of a delegation it has not read the list of yet.
    fn listed(&self, s: &State, p: u8) -> Vec<u64> {
        let Some(d) = s.dir.delegation(&RANGE).filter(|d| !d.returned) else {
            return Vec::new();
        };
        s.lists[self.frame_ix(d.list)]
            .iter()
            .flatten()
            .filter(|(q, _)| *q == p)
            .map(|(_, gfn)| *gfn)
            .collect()
    }

    // ---- nodes ----

    /// A DIR_INV of `p` reaches node `n`: unmap and ack, or defer the ack
    /// behind the page's unanswered READ / LOOKUP_LOCK.
    fn service_one(&self, s: &mut State, n: u8, p: u8) {
        let node = &mut s.nodes[n as usize - 1];
        if p == DP {
            match node.deleg {
                Deleg::Asking { list, .. } => {
                    node.deleg = Deleg::Asking {
                        list,
                        recalled: true,
                    }
                }
                Deleg::Held { .. } => Self::give_back(node),
                // Given back already.
                Deleg::None | Deleg::Returning { .. } => {}
            }
            return;
        }
        let slot = &mut node.pages[p as usize];
        if matches!(slot.req, Some(Req::Read { .. } | Req::Lookup { .. })) {
            slot.deferred = true;
            return;
        }
        let dirty = self.teardown(node, p);
        node.acks.push_back((p, dirty));
    }

    /// DELEG_RETURN: from now on the delegated pages are owned ones (its
    /// list, kept up to date, is what the directory reads).
    fn give_back(node: &mut Node) {
        let Deleg::Held { list } = node.deleg else {
            return;
        };
        for slot in node.pages.iter_mut() {
            if let Map::Delegated { gfn } = slot.map {
                slot.map = Map::Local { gfn, dirty: true };
            }
        }
        node.deleg = Deleg::Returning { list };
        node.req.push_back((DP, Req::Return));
    }

    /// `NodeCache::invalidate`: drop the page here; was it dirtied?
    fn teardown(&self, node: &mut Node, p: u8) -> bool {
        let slot = &mut node.pages[p as usize];
        let dropped = std::mem::take(&mut slot.drop_dirty);
        let dirty = match slot.map {
            Map::Remote { dirty, .. } => {
                slot.map = Map::None;
                dirty
            }
            Map::Local { gfn, .. }
            | Map::Reserved { gfn }
            | Map::Reclaiming { gfn }
            | Map::Delegated { gfn } => {
                slot.map = Map::None;
                node.free_frame(gfn);
                false
            }
            Map::None | Map::Private { .. } => false,
        };
        dirty || dropped
    }

    fn reply(&self, s: &mut State, n: u8) -> Res {
        let i = n as usize - 1;
        let Some((p, r)) = s.nodes[i].resp.pop_front() else {
            return Ok(());
        };
        let node = &mut s.nodes[i];
        if p == DP {
            match (node.deleg, r) {
                (Deleg::Asking { list, recalled }, Reply::Delegated { granted: true }) => {
                    node.deleg = Deleg::Held { list };
                    if recalled {
                        Self::give_back(node);
                    }
                }
                (Deleg::Asking { list, .. }, Reply::Delegated { granted: false })
                | (Deleg::Returning { list }, Reply::Done) => {
                    node.free_frame(list);
                    node.deleg = Deleg::None;
                }
                (d, r) => return Err(format!("node {n}: answer {r:?} to its delegation {d:?}")),
            }
            return Ok(());
        }
        let slot = &mut node.pages[p as usize];
        let Some(req) = slot.req.take() else {
            return Err(format!(
                "node {n}: answer {r:?} for page {p} it did not ask"
            ));
        };
        match (req, r) {
            (Req::Read { frame } | Req::Lookup { frame }, r) => {
                match r {
                    Reply::Owner { gfn } | Reply::Exclusive { gfn } if gfn != frame => {
                        return Err(format!("node {n}: granted frame {gfn}, offered {frame}"));
                    }
                    Reply::Owner { gfn } => slot.map = Map::Local { gfn, dirty: false },
                    Reply::Exclusive { gfn } => slot.map = Map::Reserved { gfn },
                    Reply::Shared { gfn } => {
                        slot.map = Map::Remote { gfn, dirty: false };
                        node.free_frame(frame);
                    }
                    _ => node.free_frame(frame),
                }
                let slot = &mut node.pages[p as usize];
                if std::mem::take(&mut slot.deferred) {
                    let dirty = self.teardown(node, p);
                    node.acks.push_back((p, dirty));
                }
            }
            (Req::Unlock, Reply::Done) => {
                if let Map::Reserved { gfn } = slot.map {
                    slot.map = Map::Local { gfn, dirty: true };
                }
            }
            (Req::Unlock, _) => {
                if let Map::Reserved { gfn } = slot.map {
                    slot.map = Map::None;
                    node.free_frame(gfn);
                }
            }
            (Req::Inv { .. }, Reply::Done) => {
                if let Map::Reclaiming { gfn } = slot.map {
                    slot.map = Map::None;
                    node.free_frame(gfn);
                }
            }
            (Req::Inv { dirty }, _) => {
                // Refused: the page stays ours, dirty as it was.
                if let Map::Reclaiming { gfn } = slot.map {
                    slot.map = Map::Local { gfn, dirty };
                }
            }
            (Req::Drop { .. }, _) => slot.drop_dirty = false,
            (Req::Writeback { .. }, Reply::Done) => match &mut slot.map {
                Map::Local { dirty, .. } | Map::Remote { dirty, .. } => *dirty = false,
                _ => {}
            },
            (Req::Writeback { .. }, _) => {}
            (Req::Data { .. }, _) => {
                if matches!(slot.map, Map::Private { .. }) {
                    slot.map = Map::None;
                }
            }
            (Req::Delegate { .. } | Req::Return, _) => unreachable!("answered above"),
        }
        Ok(())
    }

    fn next_version(&self, s: &mut State, p: u8) -> u8 {
        s.started[p as usize] += 1;
        s.started[p as usize]
    }

    /// Store a new version of `p` into frame `gfn` (a completed write).
    fn store(&self, s: &mut State, n: u8, p: u8, gfn: u64) -> Res {
        let ix = self.frame_ix(gfn);
        if s.frames[ix].page != Some(p) {
            return Err(format!(
                "node {n} stores page {p} into frame {gfn}, which holds page {:?}",
                s.frames[ix].page
            ));
        }
        let v = self.next_version(s, p);
        s.frames[ix] = Frame {
            page: Some(p),
            ver: v,
            unsaved: true,
        };
        s.latest[p as usize] = v;
        Ok(())
    }

    fn step(&self, s: &mut State, st: Step) -> Res {
        match st {
            Step::ReadMiss { n, p } | Step::WriteMiss { n, p } => {
                s.ops_left -= 1;
                let f = self.node(s, n).take_frame();
                let frame = self.gfn(n, f);
                let ix = self.frame_ix(frame);
                s.lists[ix] = None;
                let r = if matches!(st, Step::ReadMiss { .. }) {
                    Req::Read { frame }
                } else {
                    Req::Lookup { frame }
                };
                let node = self.node(s, n);
                node.pages[p as usize].req = Some(r);
                node.req.push_back((p, r));
            }
            Step::Reply { n } => self.reply(s, n)?,
            Step::Install { n, p } => {
                let Map::Reserved { gfn } = s.nodes[n as usize - 1].pages[p as usize].map else {
                    unreachable!()
                };
                // The whole page: nothing of the frame's old bytes counts;
                // committed when the UNLOCK is taken.
                let v = self.next_version(s, p);
                let ix = self.frame_ix(gfn);
                if s.frames[ix].unsaved {
                    return Err(format!(
                        "node {n} installs page {p} in frame {gfn}, holding an unsaved write of page {:?}",
                        s.frames[ix].page
                    ));
                }
                s.frames[ix] = Frame {
                    page: Some(p),
                    ver: v,
                    unsaved: false,
                };
                let node = self.node(s, n);
                node.pages[p as usize].req = Some(Req::Unlock);
                node.req.push_back((p, Req::Unlock));
            }
            Step::Delegate { n } => {
                s.ops_left -= 1;
                let f = self.node(s, n).take_frame();
                let list = self.gfn(n, f);
                let ix = self.frame_ix(list);
                s.lists[ix] = Some(Vec::new());
                let node = self.node(s, n);
                node.deleg = Deleg::Asking {
                    list,
                    recalled: false,
                };
                node.req.push_back((DP, Req::Delegate { list }));
            }
            Step::DelegWrite { n, p } => {
                let Deleg::Held { list } = s.nodes[n as usize - 1].deleg else {
                    unreachable!()
                };
                let f = self.node(s, n).take_frame();
                let gfn = self.gfn(n, f);
                let ix = self.frame_ix(gfn);
                if s.frames[ix].unsaved {
                    return Err(format!(
                        "node {n} writes page {p} into frame {gfn} under its delegation, holding an unsaved write of page {:?}",
                        s.frames[ix].page
                    ));
                }
                // The list record before the store: a list read after a
                // failure names every frame it may have stored into.
                s.lists[ix] = None;
                let lx = self.frame_ix(list);
                if let Some(l) = s.lists[lx].as_mut() {
                    l.push((p, gfn));
                }
                s.frames[ix] = Frame {
                    page: Some(p),
                    ver: 0,
                    unsaved: false,
                };
                self.store(s, n, p, gfn)?;
                self.node(s, n).pages[p as usize].map = Map::Delegated { gfn };
            }
            Step::GiveBack { n } => {
                s.ops_left -= 1;
                Self::give_back(self.node(s, n));
            }
            Step::Write { n, p } => {
                let map = s.nodes[n as usize - 1].pages[p as usize].map;
                match (map, self.cfg.mode) {
                    (Map::Delegated { gfn }, _) => self.store(s, n, p, gfn)?,
                    (Map::Local { gfn, .. }, _) | (Map::Remote { gfn, .. }, Mode::Strong) => {
                        self.store(s, n, p, gfn)?;
                        match &mut self.node(s, n).pages[p as usize].map {
                            Map::Local { dirty, .. } | Map::Remote { dirty, .. } => *dirty = true,
                            _ => {}
                        }
                    }
                    (Map::Remote { dirty, .. }, Mode::Relaxed) => {
                        s.ops_left -= 1;
                        let ver = self.next_version(s, p);
                        let node = self.node(s, n);
                        let slot = &mut node.pages[p as usize];
                        slot.map = Map::Private { ver };
                        slot.req = Some(Req::Drop { dirty });
                        slot.drop_dirty = dirty;
                        node.req.push_back((p, Req::Drop { dirty }));
                    }
                    (Map::Private { .. } | Map::None, Mode::Relaxed) => {
                        if map == Map::None {
                            s.ops_left -= 1;
                        }
                        let ver = self.next_version(s, p);
                        self.node(s, n).pages[p as usize].map = Map::Private { ver };
                    }
                    _ => unreachable!("{st:?} in {map:?}"),
                }
            }
            Step::Evict { n, p } => {
                s.ops_left -= 1;
                let node = self.node(s, n);
                let slot = &mut node.pages[p as usize];
                let r = match slot.map {
                    Map::Local { gfn, dirty } => {
                        slot.map = Map::Reclaiming { gfn };
                        Req::Inv { dirty }
                    }
                    Map::Remote { dirty, .. } => {
                        slot.map = Map::None;
                        slot.drop_dirty = dirty;
                        Req::Drop { dirty }
                    }
                    _ => unreachable!(),
                };
                slot.req = Some(r);
                node.req.push_back((p, r));
            }
            Step::Sync { n, p } => {
                s.ops_left -= 1;
                let node = self.node(s, n);
                let slot = &mut node.pages[p as usize];
                let r = match slot.map {
                    Map::Local { .. } | Map::Remote { .. } => Req::Writeback { dirty: true },
                    Map::Private { ver } => Req::Data { ver },
                    _ => unreachable!(),
                };
                slot.req = Some(r);
                node.req.push_back((p, r));
            }
            Step::Service { n } => {
                if let Some(p) = self.node(s, n).notify.pop_front() {
                    self.service_one(s, n, p);
                }
            }
            Step::Sleep { n, quiet } => self.node(s, n).life = Life::Asleep { quiet },
            Step::Wake { n } => {
                self.node(s, n).life = Life::Awake;
                while let Some(p) = self.node(s, n).notify.pop_front() {
                    self.service_one(s, n, p);
                }
            }
            Step::Fail { n } => {
                s.failures_left -= 1;
                let mut fresh = Node::new(&self.cfg);
                fresh.life = Life::Failed;
                s.nodes[n as usize - 1] = fresh;
                self.lose(s, n)?;
            }
            Step::Rejoin { n } => {
                s.nodes[n as usize - 1] = Node::new(&self.cfg);
                s.peers[n as usize - 1].member = true;
            }
            Step::DirAck { n } => self.dir_ack(s, n)?,
            Step::DirReq { n } => self.dir_req(s, n)?,
            Step::DirFill { p } => self.dir_fill(s, p)?,
            Step::QuietRead { n } => s.quiet_seen = Some(n),
            Step::QuietTake { n } => self.quiet_take(s, n)?,
        }
        Ok(())
    }

    /// Steps that finish what is under way (no new request, no sleep, no
    /// failure): the completion check runs only these.
    fn progress_steps(&self, s: &State, out: &mut Vec<Step>) {
        if let Some(n) = s.quiet_seen {
            out.push(Step::QuietTake { n });
            return;
        }
        for n in 1..=self.cfg.nodes {
            let node = &s.nodes[n as usize - 1];
            let peer = &s.peers[n as usize - 1];
            match node.life {
                Life::Failed => continue,
                Life::Asleep { .. } => out.push(Step::Wake { n }),
                Life::Awake => {
                    if !node.resp.is_empty() {
                        out.push(Step::Reply { n });
                    }
                    if !node.notify.is_empty() {
                        out.push(Step::Service { n });
                    }
                    for p in 0..self.cfg.pages {
                        let slot = &node.pages[p as usize];
                        if slot.req.is_none() && matches!(slot.map, Map::Reserved { .. }) {
                            out.push(Step::Install { n, p });
                        }
                    }
                }
            }
            if peer.member {
                if !node.acks.is_empty() {
                    out.push(Step::DirAck { n });
                }
                if !node.req.is_empty() {
                    out.push(Step::DirReq { n });
                }
            }
        }
        for &p in &s.fills {
            out.push(Step::DirFill { p });
        }
    }

    /// From `s`, with every node awake and serving, does everything under
    /// way finish: no page left in E or TBI, no request unanswered?
    fn completes(&self, s: &State) -> Res {
        let mut s = s.clone();
        let mut steps = Vec::new();
        for _ in 0..10_000 {
            steps.clear();
            self.progress_steps(&s, &mut steps);
            let Some(&st) = steps.first() else {
                break;
            };
            self.step(&mut s, st)
                .map_err(|e| format!("while completing, {st:?}: {e}"))?;
        }
        if let Some((k, e)) = s.dir.entries().find(|(_, e)| e.phase != Phase::Owned) {
            return Err(format!(
                "page {} stays {:?} (owner {}, sharers {:#b}) with every node serving",
                k.idx, e.phase, e.owner, e.sharers
            ));
        }
        for (i, node) in s.nodes.iter().enumerate() {
            if let Some((p, slot)) = node
                .pages
                .iter()
                .enumerate()
                .find(|(_, x)| x.req.is_some() || x.deferred)
            {
                return Err(format!(
                    "node {}: page {p} request {:?} never answered (deferred ack: {})",
                    i + 1,
                    slot.req,
                    slot.deferred
                ));
            }
            if node.life != Life::Failed
                && matches!(node.deleg, Deleg::Asking { .. } | Deleg::Returning { .. })
            {
                return Err(format!(
                    "node {}: delegation {:?} never answered",
                    i + 1,
                    node.deleg
                ));
            }
        }
        if let Some(d) = s.dir.delegation(&RANGE).filter(|d| !d.parked.is_empty()) {
            return Err(format!("parked requests never served: {d:?}"));
        }
        Ok(())
    }
}

impl Model for Cluster {
    type State = State;
    type Step = Step;

    fn init(&self) -> State {
        let c = &self.cfg;
        let pages = c.pages as usize;
        let mut dir = PageDir::for_nodes(u32::from(c.nodes));
        dir.set_delegation(c.delegation);
        State {
            dir,
            peers: vec![
                Peer {
                    member: true,
                    invs_out: Vec::new(),
                    lazy_acked: Vec::new(),
                };
                c.nodes as usize
            ],
            quiet_seen: None,
            fills: Vec::new(),
            disk: vec![0; pages],
            latest: vec![0; pages],
            started: vec![0; pages],
            frames: vec![
                Frame {
                    page: None,
                    ver: 0,
                    unsaved: false,
                };
                c.nodes as usize * c.frames as usize
            ],
            lists: vec![None; c.nodes as usize * c.frames as usize],
            nodes: (0..c.nodes).map(|_| Node::new(c)).collect(),
            ops_left: c.ops,
            failures_left: c.failures,
        }
    }

    fn steps(&self, s: &State, out: &mut Vec<Step>) {
        let c = &self.cfg;
        // Nodes run concurrently with the directory, always.
        for n in 1..=c.nodes {
            let node = &s.nodes[n as usize - 1];
            match node.life {
                Life::Failed => {
                    if s.quiet_seen.is_none() && !s.dir.holds_frames_of(n) {
                        out.push(Step::Rejoin { n });
                    }
                    continue;
                }
                Life::Asleep { .. } => {
                    out.push(Step::Wake { n });
                }
                Life::Awake => {
                    if !node.resp.is_empty() {
                        out.push(Step::Reply { n });
                    }
                    if !node.notify.is_empty() {
                        out.push(Step::Service { n });
                    }
                    // Only a quiet sleep changes what the directory does: a
                    // node halted otherwise is an awake node that waits.
                    if c.lazy_inv
                        && node.notify.is_empty()
                        && node.resp.is_empty()
                        && node.may_sleep_quietly()
                    {
                        out.push(Step::Sleep { n, quiet: true });
                    }
                    if c.delegation && s.ops_left > 0 {
                        match node.deleg {
                            Deleg::None if node.free != 0 => out.push(Step::Delegate { n }),
                            Deleg::Held { .. } => out.push(Step::GiveBack { n }),
                            _ => {}
                        }
                    }
                    for p in 0..c.pages {
                        let slot = &node.pages[p as usize];
                        if slot.req.is_some() {
                            continue;
                        }
                        let may_write = s.started[p as usize] < c.writes;
                        let may_ask = s.ops_left > 0;
                        match slot.map {
                            Map::None => {
                                if may_write
                                    && node.free != 0
                                    && !slot.drop_dirty
                                    && matches!(node.deleg, Deleg::Held { .. })
                                {
                                    out.push(Step::DelegWrite { n, p });
                                }
                                if may_ask && node.free != 0 && !slot.drop_dirty {
                                    out.push(Step::ReadMiss { n, p });
                                    if may_write {
                                        out.push(Step::WriteMiss { n, p });
                                    }
                                }
                                if may_write && may_ask && c.mode == Mode::Relaxed {
                                    out.push(Step::Write { n, p });
                                }
                            }
                            Map::Reserved { .. } => out.push(Step::Install { n, p }),
                            Map::Reclaiming { .. } => {}
                            Map::Delegated { .. } => {
                                if may_write {
                                    out.push(Step::Write { n, p });
                                }
                            }
                            Map::Local { dirty, .. } | Map::Remote { dirty, .. } => {
                                if may_write && (may_ask || c.mode == Mode::Strong) {
                                    out.push(Step::Write { n, p });
                                }
                                if may_ask {
                                    out.push(Step::Evict { n, p });
                                    if dirty {
                                        out.push(Step::Sync { n, p });
                                    }
                                }
                            }
                            Map::Private { .. } => {
                                if may_write {
                                    out.push(Step::Write { n, p });
                                }
                                if may_ask {
                                    out.push(Step::Sync { n, p });
                                }
                            }
                        }
                    }
                }
            }
            if s.failures_left > 0 && s.quiet_seen.is_none() {
                out.push(Step::Fail { n });
            }
        }
        // The directory: one thing at a time.
        if let Some(n) = s.quiet_seen {
            out.push(Step::QuietTake { n });
            return;
        }
        for n in 1..=c.nodes {
            let i = n as usize - 1;
            if !s.peers[i].member {
                continue;
            }
            if !s.nodes[i].acks.is_empty() {
                out.push(Step::DirAck { n });
            }
            if !s.nodes[i].req.is_empty() {
                out.push(Step::DirReq { n });
            }
            if c.lazy_inv
                && !s.peers[i].invs_out.is_empty()
                && s.nodes[i].life == (Life::Asleep { quiet: true })
            {
                out.push(Step::QuietRead { n });
            }
        }
        for &p in &s.fills {
            out.push(Step::DirFill { p });
        }
    }

    fn apply(&self, s: &State, st: &Step) -> Result<State, String> {
        let mut n = s.clone();
        self.step(&mut n, *st)?;
        Ok(n)
    }

    fn fingerprint(&self, s: &State) -> u128 {
        let mut used = vec![false; s.frames.len()];
        for (_, e) in s.dir.entries() {
            used[self.frame_ix(e.gfn)] = true;
        }
        for node in &s.nodes {
            for slot in &node.pages {
                if let Map::Local { gfn, .. }
                | Map::Remote { gfn, .. }
                | Map::Reserved { gfn }
                | Map::Reclaiming { gfn }
                | Map::Delegated { gfn } = slot.map
                {
                    used[self.frame_ix(gfn)] = true;
                }
            }
        }
        for (_, d) in s.dir.delegations() {
            for (_, gfn) in s.lists[self.frame_ix(d.list)].iter().flatten() {
                used[self.frame_ix(*gfn)] = true;
            }
        }
        let mut h = Fp::default();
        let h = &mut h;
        for (k, e) in s.dir.entries() {
            k.idx.hash(h);
            (e.owner, e.gfn, e.sharers, e.dirty).hash(h);
            match e.phase {
                Phase::Owned => 0u8.hash(h),
                Phase::Exclusive { by_dir, tag } => (1u8, by_dir, tag).hash(h),
                Phase::Invalidating { pending, tag } => (2u8, pending, tag).hash(h),
            }
            s.dir.fill_is_stale(&k).hash(h);
        }
        s.dir.len().hash(h);
        for (r, d) in s.dir.delegations() {
            (r.base, d.holder, d.list, d.recalled, d.returning).hash(h);
            (d.returned, d.failed, d.gone, d.floor, d.cuts.len()).hash(h);
            for p in &d.parked {
                let read = matches!(p.req, PageReq::Read { .. });
                (p.node, p.tag, p.req.key().idx, read).hash(h);
            }
        }
        s.lists.hash(h);
        s.peers.hash(h);
        s.quiet_seen.hash(h);
        s.fills.hash(h);
        s.disk.hash(h);
        s.latest.hash(h);
        s.started.hash(h);
        // A frame nobody uses or maps: its stale bytes cannot matter.
        for (ix, f) in s.frames.iter().enumerate() {
            if used[ix] {
                f.hash(h);
            } else {
                0u8.hash(h);
            }
        }
        s.nodes.hash(h);
        s.ops_left.hash(h);
        s.failures_left.hash(h);
        h.value()
    }

    fn check(&self, s: &State) -> Res {
        s.dir.check().map_err(|e| format!("directory: {e}"))?;
        for p in 0..self.cfg.pages {
            // One owner: at most one node holds the page in its own frame.
            let owners: Vec<usize> = s
                .nodes
                .iter()
                .enumerate()
                .filter(|(_, x)| {
                    matches!(
                        x.pages[p as usize].map,
                        Map::Local { .. } | Map::Reserved { .. } | Map::Delegated { .. }
                    )
                })
                .map(|(i, _)| i + 1)
                .collect();
            if owners.len() > 1 {
                return Err(format!("page {p}: owners {owners:?}"));
            }
            // No lost data (strong): the latest completed write is on disk
            // or in the page's frame.
            let pu = p as usize;
            if self.cfg.mode == Mode::Strong && s.latest[pu] != s.disk[pu] {
                let held = s
                    .dir
                    .entry(&key(p))
                    .map(|e| e.gfn)
                    .into_iter()
                    .chain(self.listed(s, p))
                    .any(|gfn| {
                        let f = s.frames[self.frame_ix(gfn)];
                        f.page == Some(p) && f.ver == s.latest[pu]
                    });
                if !held {
                    return Err(format!(
                        "page {p}: latest write v{} lost (disk has v{}, no frame of the directory holds it)",
                        s.latest[pu], s.disk[pu]
                    ));
                }
            }
        }
        // No lost dirty data: a frame's unsaved write stays the page's
        // copy in the directory until written back.
        for (ix, f) in s.frames.iter().enumerate() {
            if let (true, Some(p)) = (f.unsaved, f.page) {
                let gfn = self.gfn(
                    (ix / self.cfg.frames as usize) as u8 + 1,
                    (ix % self.cfg.frames as usize) as u32,
                );
                if s.dir.entry(&key(p)).is_none_or(|e| e.gfn != gfn)
                    && !self.listed(s, p).contains(&gfn)
                {
                    return Err(format!(
                        "page {p}: write v{} in frame {gfn} dropped unsaved (disk has v{})",
                        f.ver, s.disk[p as usize]
                    ));
                }
            }
        }
        // Reads: what an awake node would read through each mapping.
        for (i, node) in s.nodes.iter().enumerate() {
            if node.life != Life::Awake {
                continue; // a waking node serves its DIR_INVs first
            }
            for (p, slot) in node.pages.iter().enumerate() {
                let (Map::Local { gfn, .. } | Map::Remote { gfn, .. } | Map::Delegated { gfn }) =
                    slot.map
                else {
                    continue;
                };
                let f = s.frames[self.frame_ix(gfn)];
                if f.page != Some(p as u8) {
                    return Err(format!(
                        "node {}: a read of page {p} through frame {gfn} gets page {:?}",
                        i + 1,
                        f.page
                    ));
                }
                if self.cfg.mode == Mode::Strong && f.ver != s.latest[p] {
                    return Err(format!(
                        "node {}: a read of page {p} gets v{}, the latest completed write is v{}",
                        i + 1,
                        f.ver,
                        s.latest[p]
                    ));
                }
            }
        }
        if self.cfg.liveness {
            self.completes(s)?;
        }
        Ok(())
    }

    fn show(&self, s: &State) -> String {
        let mut out = String::new();
        if let Some(d) = s.dir.delegation(&RANGE) {
            out += &format!("deleg{{{d:?} list {:?}}} ", s.lists[self.frame_ix(d.list)]);
        }
        for (k, e) in s.dir.entries() {
            out += &format!(
                "p{}:{{o{} g{} sh{:#b} d{} {:?}}} ",
                k.idx, e.owner, e.gfn, e.sharers, e.dirty as u8, e.phase
            );
        }
        out += &format!("disk{:?} latest{:?} ", s.disk, s.latest);
        for (i, n) in s.nodes.iter().enumerate() {
            out += &format!("| n{} {:?}", i + 1, n.life);
            for (p, sl) in n.pages.iter().enumerate() {
                if *sl != EMPTY {
                    out += &format!(" p{p}:{:?}", sl.map);
                    if let Some(r) = sl.req {
                        out += &format!("/{r:?}");
                    }
                }
            }
            if n.deleg != Deleg::None {
                out += &format!(" {:?}", n.deleg);
            }
            if !n.notify.is_empty() {
                out += &format!(" notify{:?}", n.notify);
            }
            if !n.acks.is_empty() {
                out += &format!(" acks{:?}", n.acks);
            }
            let peer = &s.peers[i];
            if !peer.invs_out.is_empty() || !peer.lazy_acked.is_empty() {
                out += &format!(" out{:?} lazy{:?}", peer.invs_out, peer.lazy_acked);
            }
        }
        out
    }
}
