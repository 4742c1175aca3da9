//! Membership as one node sees it (the shell's `nodes`).

use alloc::string::String;
use alloc::vec::Vec;

/// Membership as one node sees it (`nodes`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// Node id (0 is the directory).
    pub id: u16,
    /// "up", "joining", "failed", "down", "left", ...
    pub state: String,
    /// Heartbeat counter as read from the shared region.
    pub heartbeat: u64,
    /// Session epoch of this node (0 if never joined).
    pub epoch: u64,
}

/// The cluster as one node sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterInfo {
    /// Cluster epoch (bumped by every join).
    pub epoch: u64,
    /// This node's id.
    pub self_id: u16,
    /// Directory first (id 0), then every node slot.
    pub nodes: Vec<NodeInfo>,
}
