//! The mock's split metadata calls: a call kind given a delay answers
//! only after that many [`crate::os::Os::meta_wait`] steps, and takes
//! effect when it answers (as a directory serves a request when it gets
//! to it); every start, answer and data batch is logged in order.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::MockOs;
use crate::meta::{MetaCall, MetaDone, MetaStart, MetaTicket};
use crate::os::run_meta;
use crate::os::Errno;

/// Split metadata calls of a [`MockOs`].
#[derive(Debug, Clone, Default)]
pub struct MetaSplit {
    /// Wait steps before a call of this kind (`"open"`, `"fsync"`, ...)
    /// answers; kinds not listed finish at once.
    pub delay: BTreeMap<&'static str, u32>,
    /// What happened, in order: `start KIND`, `done KIND`, `io_batch N`.
    pub events: Vec<String>,
    /// Wait steps so far.
    pub waits: u32,
    /// Most calls in flight at once.
    pub max_in_flight: usize,
    pending: BTreeMap<u64, (MetaCall, u32)>,
    next: u64,
}

/// The kind of `call`, as [`MetaSplit::delay`] names it.
pub fn kind(call: &MetaCall) -> &'static str {
    match call {
        MetaCall::Open { .. } => "open",
        MetaCall::Stat { .. } => "stat",
        MetaCall::Close { .. } => "close",
        MetaCall::Fsync { .. } => "fsync",
        MetaCall::Truncate { .. } => "truncate",
        MetaCall::Unlink { .. } => "unlink",
        MetaCall::Mkdir { .. } => "mkdir",
        MetaCall::Rmdir { .. } => "rmdir",
        MetaCall::Readdir { .. } => "readdir",
    }
}

impl MockOs {
    pub(super) fn split_start(&mut self, call: MetaCall) -> MetaStart {
        let k = kind(&call);
        let Some(&d) = self.meta.delay.get(k) else {
            return MetaStart::Done(run_meta(self, call));
        };
        let m = &mut self.meta;
        m.next += 1;
        m.pending.insert(m.next, (call, m.waits + d));
        m.max_in_flight = m.max_in_flight.max(m.pending.len());
        m.events.push(format!("start {k}"));
        MetaStart::Pending(MetaTicket(m.next))
    }

    pub(super) fn split_poll(&mut self, t: MetaTicket) -> Option<Result<MetaDone, Errno>> {
        let Some((_, due)) = self.meta.pending.get(&t.0) else {
            return Some(Err(Errno::Invalid));
        };
        if *due > self.meta.waits {
            return None;
        }
        let (call, _) = self.meta.pending.remove(&t.0)?;
        let k = kind(&call);
        let r = run_meta(self, call);
        self.meta.events.push(format!("done {k}"));
        Some(r)
    }

    pub(super) fn split_wait(&mut self) {
        self.meta.waits += 1;
        self.now_ns += 1000;
    }
}
