//! The directory's disk side as one sub-state: what waits for the device
//! or flies (page fills and file-read blocks, block writes, fsyncs'
//! flushes), the file-server reads waiting for their blocks, and the
//! staging of this sweep's writes.
//!
//! [`Io`] owns its parts; each is an owned type with its own interface,
//! used by the file that runs it: the disk queue by `fills.rs`
//! ([`crate::diskq`]), the write queue, the fsyncs and the staging by
//! `writes.rs` ([`crate::writeq`]), the pending reads by `fileread.rs`.

use crate::diskq::DiskQueue;
use crate::writeq::WriteQueue;

use super::fileread::FileReads;
use super::writes::{Batch, Fsyncs, Then};

/// Disk requests waiting or in flight, and the sweep's write staging:
/// each part owned by its own type (see the module comment for which
/// file uses which); dispatch and the `net` path only bracket a request
/// ([`Batch`]) and count answers given while the disk was busy.
pub(super) struct Io {
    /// Page fills and file-read blocks waiting for the disk or in flight.
    pub(super) disk: DiskQueue,
    /// Deferred block writes in flight and what waits for them.
    pub(super) writes: WriteQueue<Then>,
    /// Most requests in flight: `Config::fill_depth` bounded by the
    /// device's queue depth (0: synchronous fills and writes).
    pub(super) depth: usize,
    /// File-server reads waiting for their blocks.
    pub(super) reads: FileReads,
    /// Fsyncs waiting for their files' writes or for their flush.
    pub(super) fsyncs: Fsyncs,
    /// Writes of the request being served and of this sweep, not queued
    /// yet.
    pub(super) batch: Batch,
}

impl Io {
    /// Nothing in flight; at most `depth` requests at once.
    pub(super) fn new(depth: usize) -> Io {
        Io {
            disk: DiskQueue::new(depth),
            writes: WriteQueue::new(),
            depth,
            reads: FileReads::default(),
            fsyncs: Fsyncs::default(),
            batch: Batch::default(),
        }
    }
}
