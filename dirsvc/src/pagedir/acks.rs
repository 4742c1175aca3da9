//! Acks of invalidations: a sharer's INV_ACK (one page) or a node's
//! ack of an INV_RANGE (a file's teardown), and what the last ack of an
//! invalidation completes (the write-back, the unexport, the owner's
//! answer); a file's teardown's DIR_INVs coalesced into INV_RANGEs.

use alloc::vec::Vec;

use fabric::proto::{PageKey, PageReply, PageSpan, MAX_SPAN};

use super::{bit, Action, PageDir, Phase};

impl PageDir {
    /// Does an invalidation of `key` wait for `node`'s ack? `Some(true)`:
    /// as a sharer (the ack only says the mapping is gone); `Some(false)`:
    /// as the owner (a file eviction's last step: the owner frees its
    /// frame); `None`: no.
    pub fn awaits_ack(&self, node: u8, key: &PageKey) -> Option<bool> {
        let e = self.table.get(key)?;
        match e.phase {
            Phase::Invalidating { pending, .. } if pending & bit(node) != 0 => {
                Some(e.owner != node)
            }
            _ => None,
        }
    }

    /// An INV_ACK from sharer `node` for `key`, with the dirty bit it saw.
    pub fn ack(&mut self, node: u8, key: PageKey, dirty: bool) -> Vec<Action> {
        let mut out = Vec::new();
        if !self.node_ok(node) {
            return out;
        }
        self.stats.acks += 1;
        self.ack_page(node, key, dirty, &mut out);
        self.coalesce(&mut out);
        out
    }

    /// The one ack of an INV_RANGE from `node`: every page of `span` that
    /// awaits `node`'s ack is acknowledged (`dirty` counts for each; a
    /// file's teardown writes nothing back anyway). Pages that await no
    /// ack of `node` are left alone, so a duplicate changes nothing.
    pub fn ack_range(&mut self, node: u8, span: PageSpan, dirty: bool) -> Vec<Action> {
        let mut out = Vec::new();
        if !self.node_ok(node) {
            return out;
        }
        self.stats.range_acks += 1;
        for key in self.table.keys_between(span.ino, span.first, span.last()) {
            self.ack_page(node, key, dirty, &mut out);
        }
        if !self.delegs.is_empty() {
            self.cut_acked(node, span, &mut out);
        }
        self.coalesce(&mut out);
        out
    }

    /// Does every cached page of `span` that awaits an ack of `node` await
    /// it as a sharer's (see [`PageDir::awaits_ack`])? `None` if no page
    /// awaits one. A delegation's cut awaits its holder's ack as an
    /// owner's (`Some(false)`: the holder frees its pages).
    pub fn awaits_range_ack(&self, node: u8, span: &PageSpan) -> Option<bool> {
        if self.awaits_cut_ack(node, span) {
            return Some(false);
        }
        let mut any = None;
        for key in self.table.keys_between(span.ino, span.first, span.last()) {
            match self.awaits_ack(node, &key) {
                Some(false) => return Some(false),
                Some(true) => any = Some(true),
                None => {}
            }
        }
        any
    }

    /// The DIR_INVs of a file's teardown (pages in `evicting`) travel as
    /// INV_RANGEs: one per node per run of contiguous pages, after every
    /// other action of the step (an owner's is preceded by its frame's
    /// unexport, which stays before it).
    pub(super) fn coalesce(&mut self, out: &mut Vec<Action>) {
        if self.evicting.is_empty() {
            return;
        }
        let mut pages: Vec<(u8, PageKey)> = Vec::new();
        out.retain(|a| match *a {
            Action::Invalidate { node, key } if self.evicting.contains_key(&key) => {
                pages.push((node, key));
                false
            }
            _ => true,
        });
        if pages.is_empty() {
            return;
        }
        self.stats.dir_invs -= pages.len() as u64;
        self.stats.range_pages += pages.len() as u64;
        pages.sort_unstable();
        pages.dedup();
        let mut run: Option<(u8, PageSpan)> = None;
        for (node, key) in pages {
            if let Some((n, s)) = run.as_mut() {
                if *n == node
                    && s.ino == key.ino
                    && s.count < MAX_SPAN
                    && s.first.checked_add(s.count) == Some(key.idx)
                {
                    s.count += 1;
                    continue;
                }
                out.push(Action::InvalidateRange { node: *n, span: *s });
                self.stats.range_invs += 1;
            }
            run = Some((node, PageSpan::page(key)));
        }
        if let Some((node, span)) = run {
            out.push(Action::InvalidateRange { node, span });
            self.stats.range_invs += 1;
        }
    }

    /// One page's share of an ack.
    fn ack_page(&mut self, node: u8, key: PageKey, dirty: bool, out: &mut Vec<Action>) {
        if let Some(mut e) = self.table.get(&key) {
            if let Phase::Invalidating { pending, tag } = e.phase {
                if pending & bit(node) != 0 {
                    e.phase = Phase::Invalidating {
                        pending: pending & !bit(node),
                        tag,
                    };
                    e.sharers &= !bit(node);
                    e.dirty |= dirty;
                    self.store(key, &e);
                    self.settle(key, out);
                }
            }
        }
    }

    /// An invalidation may have received its last ack: move on. A file
    /// eviction whose sharers are all gone unexports the frame and only
    /// then tells the owner to free it (the owner's ack completes it); any
    /// other invalidation completes.
    pub(super) fn settle(&mut self, key: PageKey, out: &mut Vec<Action>) {
        let Some(mut e) = self.table.get(&key) else {
            return;
        };
        let Phase::Invalidating { pending: 0, tag } = e.phase else {
            return;
        };
        if e.sharers & bit(e.owner) != 0 {
            if let Some(told) = self.evicting.get_mut(&key) {
                *told = true;
                e.phase = Phase::Invalidating {
                    pending: bit(e.owner),
                    tag,
                };
                self.store(key, &e);
                self.stats.dir_invs += 1;
                out.push(Action::Export {
                    gfn: e.gfn,
                    on: false,
                });
                out.push(Action::Invalidate { node: e.owner, key });
                return;
            }
        }
        self.complete(key, out);
    }

    /// Every sharer acked: write back if dirty (unless the file's data is
    /// gone), unexport, answer the owner and forget the page (all nodes
    /// back to I).
    fn complete(&mut self, key: PageKey, out: &mut Vec<Action>) {
        let Some(e) = self.table.remove(&key) else {
            return;
        };
        let evicted = self.evicting.remove(&key);
        let written = e.dirty && evicted.is_none();
        if written {
            self.stats.writebacks += 1;
            out.push(Action::WriteBack { key, gfn: e.gfn });
        }
        // An evicted page's owner was told after the frame was unexported
        // and may have reused the frame since: leave its bit alone.
        if evicted != Some(true) {
            out.push(Action::Export {
                gfn: e.gfn,
                on: false,
            });
        }
        if let Phase::Invalidating { tag, .. } = e.phase {
            if tag != 0 {
                out.push(Action::Reply {
                    node: e.owner,
                    tag,
                    reply: PageReply::Done { written },
                });
            }
        }
    }
}
