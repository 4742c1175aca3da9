//! Simulations and regression tests of the node data path.
//!
//! * [`datapath`]: a seeded simulation of the real data path (nodes over
//!   the host rig) with faults, checking single-copy and read invariants.
//! * [`protocol`]: the older model simulation of the protocol over
//!   [`crate::pagecache::NodeCache`] and the real page directory.
//! * [`regress`]: focused tests of fixed defects over the host rig.

mod datapath;
mod protocol;
mod regress;
