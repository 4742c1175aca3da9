//! Simulations and regression tests of the node data path.
//!
//! * [`protocol`]: the older model simulation of the protocol over
//!   [`crate::pagecache::NodeCache`] and the real page directory.
//! * [`regress`]: focused tests of fixed defects over the host rig.

mod protocol;
mod regress;
