//! Requests from nodes: READ and LOOKUP_LOCK (a miss takes the page, an
//! owned page is mapped), UNLOCK, INV (the owner reclaims), DROP and
//! WRITEBACK. Each takes one request and returns the actions it causes.

use alloc::vec::Vec;

use fabric::proto::{PageKey, PageReply, PageReq};

use super::{bit, invalidate_all, Action, Entry, FrameOwner, PageDir, Phase};

impl PageDir {
    /// Handle one page request from `node` (1..=64) with `tag`.
    pub fn handle(
        &mut self,
        frames: &impl FrameOwner,
        node: u8,
        tag: u32,
        req: PageReq,
    ) -> Vec<Action> {
        let mut out = Vec::new();
        let to = Requester { node, tag };
        if !self.node_ok(node) {
            self.stats.refused += 1;
            to.reply(&mut out, PageReply::Refused);
            return out;
        }
        match req {
            PageReq::Read { key, frame } => self.lookup(frames, to, key, frame, true, &mut out),
            PageReq::LookupLock { key, frame } => {
                self.lookup(frames, to, key, frame, false, &mut out)
            }
            PageReq::Unlock { key } => self.unlock(to, key, &mut out),
            PageReq::Inv { key, dirty } => self.inv(to, key, dirty, &mut out),
            PageReq::Drop { key, dirty } => self.drop_copy(to, key, dirty, &mut out),
            PageReq::Writeback { key, dirty } => self.write_back(to, key, dirty, &mut out),
            PageReq::Delegate { range, list } => self.delegate(frames, to, range, list, &mut out),
            PageReq::DelegReturn { range } => self.deleg_return(to, range, &mut out),
            // Replicas are the server's (`server/replicas.rs`): the page's
            // state here does not change. A directory that routes them
            // here refuses them.
            PageReq::Promote { .. } | PageReq::Unprotect { .. } => {
                self.stats.refused += 1;
                to.reply(&mut out, PageReply::Refused);
            }
        }
        out
    }

    /// READ or LOOKUP_LOCK (`read` false): a miss takes the page (a fill
    /// for a READ, E for a LOOKUP_LOCK), an owned page is mapped.
    fn lookup(
        &mut self,
        frames: &impl FrameOwner,
        to: Requester,
        key: PageKey,
        frame: u64,
        read: bool,
        out: &mut Vec<Action>,
    ) {
        if read {
            self.stats.reads += 1;
        } else {
            self.stats.lookup_locks += 1;
        }
        if frames.owner_of(frame) != Some(to.node) {
            self.stats.refused += 1;
            to.reply(out, PageReply::Refused);
            return;
        }
        let req = if read {
            PageReq::Read { key, frame }
        } else {
            PageReq::LookupLock { key, frame }
        };
        if !self.delegs.is_empty() && self.park_if_delegated(to, req, out) {
            return;
        }
        self.lookup_checked(to, key, frame, read, out);
    }

    /// A lookup whose frame is the requester's and whose page is not
    /// delegated to another node.
    pub(super) fn lookup_checked(
        &mut self,
        to: Requester,
        key: PageKey,
        frame: u64,
        read: bool,
        out: &mut Vec<Action>,
    ) {
        match self.table.get(&key) {
            None => {
                let e = Entry {
                    owner: to.node,
                    gfn: frame,
                    sharers: 0,
                    dirty: false,
                    phase: Phase::Exclusive {
                        by_dir: read,
                        tag: to.tag,
                    },
                };
                if self.table.put(key, &e).is_err() {
                    // A frame beyond 32 bits of frame number.
                    self.stats.refused += 1;
                    to.reply(out, PageReply::Refused);
                } else if read {
                    // The reply follows in `filled`.
                    self.stats.fills += 1;
                    out.push(Action::Fill { key, gfn: frame });
                } else {
                    to.reply(out, PageReply::Exclusive { gfn: frame });
                }
            }
            Some(mut e) => match e.phase {
                Phase::Owned if e.owner == to.node => {
                    to.reply(out, PageReply::Owner { gfn: e.gfn })
                }
                Phase::Owned => {
                    if e.sharers == 0 {
                        out.push(Action::Export {
                            gfn: e.gfn,
                            on: true,
                        });
                    }
                    if e.sharers & bit(to.node) == 0 {
                        e.sharers |= bit(to.node);
                        self.store(key, &e);
                    }
                    self.stats.remote_maps += 1;
                    to.reply(
                        out,
                        PageReply::Shared {
                            owner: e.owner,
                            gfn: e.gfn,
                        },
                    );
                }
                Phase::Exclusive { .. } | Phase::Invalidating { .. } => {
                    self.stats.retries += 1;
                    to.reply(out, PageReply::Retry);
                }
            },
        }
    }

    /// UNLOCK: the writer of an E page publishes it as owned and dirty.
    fn unlock(&mut self, to: Requester, key: PageKey, out: &mut Vec<Action>) {
        self.stats.unlocks += 1;
        match self.table.get(&key) {
            Some(mut e)
                if e.owner == to.node
                    && matches!(e.phase, Phase::Exclusive { by_dir: false, .. }) =>
            {
                e.phase = Phase::Owned;
                e.dirty = true;
                self.store(key, &e);
                to.reply(out, PageReply::Done { written: false });
            }
            _ => {
                self.stats.refused += 1;
                to.reply(out, PageReply::Refused);
            }
        }
    }

    /// INV: the owner asks for its page's sharers to be invalidated.
    fn inv(&mut self, to: Requester, key: PageKey, dirty: bool, out: &mut Vec<Action>) {
        self.stats.invs += 1;
        match self.table.get(&key) {
            Some(mut e) if e.owner == to.node && e.phase == Phase::Owned => {
                e.dirty |= dirty;
                let pending = e.sharers;
                e.phase = Phase::Invalidating {
                    pending,
                    tag: to.tag,
                };
                self.store(key, &e);
                invalidate_all(&mut self.stats, key, pending, out);
                self.settle(key, out);
            }
            _ => {
                self.stats.refused += 1;
                to.reply(out, PageReply::Refused);
            }
        }
    }

    /// DROP: a sharer gives up its mapping (or the reserving node its E).
    fn drop_copy(&mut self, to: Requester, key: PageKey, dirty: bool, out: &mut Vec<Action>) {
        self.stats.drops += 1;
        match self.table.get(&key) {
            // The reserving node gives back an E it will not fill
            // (its LOOKUP_LOCK timed out and the grant came late):
            // no copy exists anywhere, so the page returns to I.
            Some(e)
                if e.owner == to.node
                    && matches!(e.phase, Phase::Exclusive { by_dir: false, .. }) =>
            {
                self.table.remove(&key);
                to.reply(out, PageReply::Done { written: false });
            }
            Some(mut e) if e.owner != to.node && e.sharers & bit(to.node) != 0 => {
                e.dirty |= dirty;
                match e.phase {
                    // A drop racing an invalidation: the dirty bit
                    // counts, but the DIR_INV already sent to this
                    // node is still on its way and its ack (which
                    // always follows) is what releases the entry.
                    // Were the drop taken as the ack, the entry
                    // could go, the node get a new copy of the page,
                    // and the late DIR_INV tear that copy down.
                    Phase::Invalidating { .. } => {}
                    _ => {
                        e.sharers &= !bit(to.node);
                        if e.sharers == 0 {
                            out.push(Action::Export {
                                gfn: e.gfn,
                                on: false,
                            });
                        }
                    }
                }
                self.store(key, &e);
                to.reply(out, PageReply::Done { written: false });
            }
            _ => {
                self.stats.refused += 1;
                to.reply(out, PageReply::Refused);
            }
        }
    }

    /// WRITEBACK: the owner or a sharer asks for the page on the disk.
    fn write_back(&mut self, to: Requester, key: PageKey, dirty: bool, out: &mut Vec<Action>) {
        match self.table.get(&key) {
            Some(mut e)
                if e.phase == Phase::Owned
                    && (e.owner == to.node || e.sharers & bit(to.node) != 0) =>
            {
                let written = e.dirty || dirty;
                if written {
                    if e.dirty {
                        e.dirty = false;
                        self.store(key, &e);
                    }
                    self.stats.writebacks += 1;
                    out.push(Action::WriteBack { key, gfn: e.gfn });
                }
                to.reply(out, PageReply::Done { written });
            }
            _ => {
                self.stats.refused += 1;
                to.reply(out, PageReply::Refused);
            }
        }
    }
}

/// Who sent a request: its answer goes back to `node` under `tag`.
#[derive(Clone, Copy)]
pub(super) struct Requester {
    pub(super) node: u8,
    pub(super) tag: u32,
}

impl Requester {
    pub(super) fn reply(self, out: &mut Vec<Action>, reply: PageReply) {
        out.push(Action::Reply {
            node: self.node,
            tag: self.tag,
            reply,
        });
    }
}
