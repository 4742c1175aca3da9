//! Typed access to the dynamic header words: epoch, directory state and
//! heartbeat, ping/pong, and each node's record in the node table.

use super::{
    DirState, Layout, NodeState, OFF_ATOMIC_PROBE, OFF_DIR_HEARTBEAT, OFF_DIR_STATE, OFF_EPOCH,
    OFF_META_EPOCH, OFF_PING, OFF_PONG, OFF_REPLICAS_USED,
};
use crate::shm::SharedMem;

/// Typed access to the dynamic header words of a validated region.
pub struct Header<'a, M: SharedMem + ?Sized> {
    pub(super) mem: &'a M,
    pub(super) layout: Layout,
}

impl<'a, M: SharedMem + ?Sized> Header<'a, M> {
    /// Wrap a region whose layout was validated (or just formatted).
    pub fn new(mem: &'a M, layout: Layout) -> Self {
        Header { mem, layout }
    }
    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }
    /// Cluster epoch counter.
    pub fn epoch(&self) -> u64 {
        self.mem.load_u64(OFF_EPOCH)
    }
    /// Bump the cluster epoch; returns the new value.
    pub fn next_epoch(&self) -> u64 {
        self.mem.fetch_add_u64(OFF_EPOCH, 1) + 1
    }
    /// Directory state (`None` if the word holds garbage).
    pub fn dir_state(&self) -> Option<DirState> {
        DirState::from_u32(self.mem.load_u32(OFF_DIR_STATE))
    }
    /// Set the directory state.
    pub fn set_dir_state(&self, s: DirState) {
        self.mem.store_u32(OFF_DIR_STATE, s as u32)
    }
    /// Directory heartbeat counter.
    pub fn dir_heartbeat(&self) -> u64 {
        self.mem.load_u64(OFF_DIR_HEARTBEAT)
    }
    /// Bump the directory heartbeat.
    pub fn beat_dir(&self) {
        self.mem.fetch_add_u64(OFF_DIR_HEARTBEAT, 1);
    }
    /// The metadata epoch: it moves before any file's version or size
    /// can change. A node that validated a file's version at epoch `e`
    /// and still reads `e` knows no file changed since.
    pub fn meta_epoch(&self) -> u64 {
        self.mem.load_u64(OFF_META_EPOCH)
    }
    /// Bump the metadata epoch (the directory only: a plain store, so it
    /// must stay single-writer).
    pub fn bump_meta_epoch(&self) {
        let e = self.mem.load_u64(OFF_META_EPOCH);
        self.mem.store_u64(OFF_META_EPOCH, e.wrapping_add(1));
    }
    /// The atomics probe (`bench atomics`): the only word that several
    /// instances read-modify-write, to measure whether `lock xadd` is
    /// atomic across QEMU instances (under single-threaded TCG it is not).
    pub fn atomic_probe(&self) -> u64 {
        self.mem.load_u64(OFF_ATOMIC_PROBE)
    }
    /// One `lock xadd` of 1 on the atomics probe; the previous value.
    pub fn atomic_probe_add(&self) -> u64 {
        self.mem.fetch_add_u64(OFF_ATOMIC_PROBE, 1)
    }
    /// Set the atomics probe (to 0 before a measurement).
    pub fn set_atomic_probe(&self, v: u64) {
        self.mem.store_u64(OFF_ATOMIC_PROBE, v)
    }
    /// Has any node asked for a strong-mode replica in this region (the
    /// first PROMOTE sets it; see [`Header::replicated`])?
    pub fn replicas_used(&self) -> bool {
        self.mem.load_u64(OFF_REPLICAS_USED) != 0
    }
    /// Note that a replica was granted (the directory only).
    pub fn set_replicas_used(&self) {
        self.mem.store_u64(OFF_REPLICAS_USED, 1)
    }
    /// The frame node `node` is storing into, plus one (0: none); see
    /// [`Header::set_writing`].
    pub fn writing(&self, node: u32) -> u64 {
        if !self.layout.valid_node(node) {
            return 0;
        }
        self.mem.load_u64(self.layout.node_rec(node) + 32)
    }
    /// Announce (`gfn + 1`) or end (0) a store of node `node` into a
    /// frame (that node only): the directory does not grant a replica of
    /// a frame while a store into it is announced.
    pub fn set_writing(&self, node: u32, v: u64) {
        if self.layout.valid_node(node) {
            self.mem.store_u64(self.layout.node_rec(node) + 32, v)
        }
    }
    /// Has node `node` seen `replicas_used` set (so every store it makes
    /// from then on is announced in its `writing` word)?
    pub fn sees_replicas(&self, node: u32) -> bool {
        self.layout.valid_node(node) && self.mem.load_u64(self.layout.node_rec(node) + 40) != 0
    }
    /// Node `node` says it has (`true`) or has not yet (`false`, at join)
    /// seen `replicas_used` set (that node only).
    pub fn set_sees_replicas(&self, node: u32, on: bool) {
        if self.layout.valid_node(node) {
            self.mem
                .store_u64(self.layout.node_rec(node) + 40, u64::from(on))
        }
    }
    /// The session epoch of node `node` the directory asks to have fenced
    /// (0: none). Written by the directory only; see [`crate::fence`].
    pub fn fence_request(&self, node: u32) -> u64 {
        if !self.layout.valid_node(node) {
            return 0;
        }
        self.mem.load_u64(self.layout.node_rec(node) + 48)
    }
    /// Ask for node `node`'s session `epoch` to be fenced, or (0) withdraw
    /// the request (the directory only).
    pub fn set_fence_request(&self, node: u32, epoch: u64) {
        if self.layout.valid_node(node) {
            self.mem.store_u64(self.layout.node_rec(node) + 48, epoch)
        }
    }
    /// The last session epoch of node `node` the host's fencer confirmed
    /// fenced (its instance can no longer touch the region). Written by the
    /// fencer only.
    pub fn fence_done(&self, node: u32) -> u64 {
        if !self.layout.valid_node(node) {
            return 0;
        }
        self.mem.load_u64(self.layout.node_rec(node) + 56)
    }
    /// Confirm that node `node`'s session `epoch` is fenced (the fencer
    /// only).
    pub fn set_fence_done(&self, node: u32, epoch: u64) {
        if self.layout.valid_node(node) {
            self.mem.store_u64(self.layout.node_rec(node) + 56, epoch)
        }
    }
    /// The ping word (`bench pingpong`).
    pub fn ping(&self) -> u64 {
        self.mem.load_u64(OFF_PING)
    }
    /// Write the ping word.
    pub fn set_ping(&self, v: u64) {
        self.mem.store_u64(OFF_PING, v)
    }
    /// The pong word (the directory's echo).
    pub fn pong(&self) -> u64 {
        self.mem.load_u64(OFF_PONG)
    }
    /// Write the pong word.
    pub fn set_pong(&self, v: u64) {
        self.mem.store_u64(OFF_PONG, v)
    }
    /// State of node `node` (`None` if invalid id or garbage).
    pub fn node_state(&self, node: u32) -> Option<NodeState> {
        if !self.layout.valid_node(node) {
            return None;
        }
        NodeState::from_u32(self.mem.load_u32(self.layout.node_rec(node)))
    }
    /// Set node `node`'s state (ignored for an invalid id).
    pub fn set_node_state(&self, node: u32, s: NodeState) {
        if self.layout.valid_node(node) {
            self.mem.store_u32(self.layout.node_rec(node), s as u32)
        }
    }
    /// Session epoch of node `node`.
    pub fn node_epoch(&self, node: u32) -> u64 {
        if !self.layout.valid_node(node) {
            return 0;
        }
        self.mem.load_u64(self.layout.node_rec(node) + 8)
    }
    /// Set node `node`'s session epoch.
    pub fn set_node_epoch(&self, node: u32, epoch: u64) {
        if self.layout.valid_node(node) {
            self.mem.store_u64(self.layout.node_rec(node) + 8, epoch)
        }
    }
    /// Heartbeat counter of node `node`.
    pub fn node_heartbeat(&self, node: u32) -> u64 {
        if !self.layout.valid_node(node) {
            return 0;
        }
        self.mem.load_u64(self.layout.node_rec(node) + 16)
    }
    /// Bump node `node`'s heartbeat.
    pub fn beat_node(&self, node: u32) {
        if self.layout.valid_node(node) {
            self.mem.fetch_add_u64(self.layout.node_rec(node) + 16, 1);
        }
    }
    /// Join nonce of node `node`.
    pub fn join_nonce(&self, node: u32) -> u64 {
        if !self.layout.valid_node(node) {
            return 0;
        }
        self.mem.load_u64(self.layout.node_rec(node) + 24)
    }
    /// Set node `node`'s join nonce.
    pub fn set_join_nonce(&self, node: u32, nonce: u64) {
        if self.layout.valid_node(node) {
            self.mem.store_u64(self.layout.node_rec(node) + 24, nonce)
        }
    }
    /// Zero both indices of every ring of `node`'s channel.
    pub fn reset_channel(&self, node: u32) {
        if self.layout.valid_node(node) {
            for r in self.layout.channel(node).rings() {
                r.reset(self.mem);
            }
        }
    }
}
