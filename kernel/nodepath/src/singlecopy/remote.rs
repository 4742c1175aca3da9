//! DPC's Remote MM on the node: reading and storing into a peer's frame
//! in the shared region (with the emulated CXL latency), hot pages kept as
//! replicas, the store guard that revokes them, and the mmap windows that
//! map our frames or owners' frames ([`mmap`]).

use alloc::boxed::Box;

use fabric::layout::Header;
use fabric::proto::{Errno, PageKey, PageReply, PageReq};
use fabric::shm::SharedMem;

use super::ScState;
use crate::env::{Clock, Env};
use crate::link::Link;
use crate::pagecache::{Mode, PAGE};

pub(super) mod mmap;

/// Offset of frame `gfn` in the region (an impossible one is refused by
/// the region's bounds check).
pub(super) fn frame_off(gfn: u64) -> usize {
    fabric::layout::Layout::gfn_offset(gfn).unwrap_or(usize::MAX)
}

/// Spin for the emulated CXL latency `ns` (no-op at 0).
pub(super) fn cxl_delay(clock: &impl Clock, ns: u64) {
    if ns > 0 {
        let t0 = clock.now_ns();
        while clock.now_ns().saturating_sub(t0) < ns {}
    }
}

/// Replicas of hot pages, as this node sees them.
#[derive(Debug, Default)]
pub(super) struct Replicas {
    /// This node has read the header's `replicas_used` set and said so
    /// (its record's `sees_replicas`): every store is announced from then
    /// on (see `dirsvc::server::replicas`).
    pub(super) seen: bool,
    /// Strong mode: the page whose PROMOTE is in flight, and whether a
    /// REVOKE of it came meanwhile (the notify ring can overtake the
    /// grant on the response ring): then the grant is not used.
    pub(super) promoting: Option<(PageKey, bool)>,
}

impl ScState {
    /// Hot page `key`, mapped from a peer's frame `gfn`: keep a replica
    /// (one more copy of the whole frame from the peer, then local reads).
    /// Strong mode asks the directory first (PROMOTE); a refusal or a
    /// failed call only means no replica now.
    pub(super) fn promote<E: Env>(
        &mut self,
        link: &mut Link<E>,
        key: PageKey,
        gfn: u64,
        cxl_ns: u64,
    ) {
        if self.mode == Mode::Strong {
            if let Some(c) = self.coh.as_mut() {
                c.replicas.promoting = Some((key, false));
            }
            let r = self.page_calls(link, &[PageReq::Promote { key }]);
            // A REVOKE of the page that came while we waited: a writer
            // stored (or is storing) after the grant; the copy would miss
            // it, and the directory no longer counts us as a holder.
            let revoked = self
                .coh
                .as_mut()
                .and_then(|c| c.replicas.promoting.take())
                .is_some_and(|(_, revoked)| revoked);
            match r.as_deref() {
                Ok([PageReply::Done { .. }]) if !revoked => {}
                r => {
                    log::debug!("PROMOTE {key:?}: {r:?}");
                    if let Some(c) = self.cache() {
                        c.promote_refused(&key);
                    }
                    return;
                }
            }
        }
        let mut p = Box::new([0u8; PAGE]);
        cxl_delay(&link.env, cxl_ns);
        link.env.mem().read(frame_off(gfn), &mut p[..]);
        // False if the mapping went meanwhile (a DIR_INV while we asked):
        // the replica goes with it.
        if let Some(c) = self.cache() {
            c.set_replica(&key, p);
        }
    }

    /// Before a store into frame `gfn` (page `key`): once this node has
    /// seen replicas in use (`replicas_used`, which the first PROMOTE
    /// sets), announce the store in this node's `writing` word, fence,
    /// and read the frame's replica bit; before that, store at once.
    /// Clear: true, store now, then [`ScState::end_store`]. Set: have the
    /// directory revoke every replica of the page first (UNPROTECT, which
    /// answers once they are gone) and return false: the caller looks the
    /// page up again and retries. This node's own replica of the page goes
    /// first either way (see `dirsvc::server::replicas`).
    pub(super) fn begin_store<E: Env>(
        &mut self,
        link: &mut Link<E>,
        key: PageKey,
        gfn: u64,
    ) -> Result<bool, Errno> {
        let Some(layout) = self.coh.as_ref().map(|c| c.layout) else {
            return Ok(true);
        };
        let me = link.id();
        // Until this node reads `replicas_used` set, its stores are not
        // announced; the directory grants no replica before every member
        // said it saw the word (after its earlier stores).
        if !self
            .coh
            .as_mut()
            .is_some_and(|c| c.replicas_seen(&link.env))
        {
            return Ok(true);
        }
        if let Some(c) = self.cache() {
            c.revoke_replica(&key);
        }
        let h = Header::new(link.env.mem(), layout);
        h.set_writing(me, gfn.wrapping_add(1));
        link.env.fence();
        if !h.replicated(gfn) {
            return Ok(true);
        }
        h.set_writing(me, 0);
        match self
            .page_calls(link, &[PageReq::Unprotect { key }])?
            .as_slice()
        {
            [PageReply::Done { .. }] => Ok(false),
            other => {
                log::warn!("UNPROTECT {key:?}: {other:?}");
                Err(Errno::Io)
            }
        }
    }

    /// After a store that [`ScState::begin_store`] let through.
    pub(super) fn end_store<E: Env>(&self, link: &Link<E>) {
        if let Some(c) = self.coh.as_ref().filter(|c| c.replicas.seen) {
            Header::new(link.env.mem(), c.layout).set_writing(link.id(), 0);
        }
    }
}
