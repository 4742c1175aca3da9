//! The Invalidation Manager, the directory's side: all of DPC's
//! invalidation traffic between the page directory and the rings.
//!
//! * Out: the page directory's [`Action::Invalidate`](crate::pagedir::Action::Invalidate) (one page: a
//!   DIR_INV) and [`Action::InvalidateRange`](crate::pagedir::Action::InvalidateRange) (a file's teardown: an
//!   INV_RANGE) become notices on the node's notify ring
//!   ([`Directory::invalidate`]); each one published is recorded as
//!   owed ([`Invalidations::published`]).
//! * In: INV_ACKs and INV_RANGE acks from the ack ring (`acks.rs`) go to
//!   the page directory ([`crate::pagedir::PageDir::ack`],
//!   [`crate::pagedir::PageDir::ack_range`]), whose actions run at once.
//! * Lazy: the DIR_INVs owed by a quietly sleeping sharer are taken as
//!   acknowledged without waking it, and its late acks dropped
//!   (`quiet.rs`).
//!
//! [`Invalidations`] owns the per-node bookkeeping (what is owed, what
//! was taken lazily, the lazy path's counters). Called by dispatch (acks
//! first in every sweep, the quiet sleepers after it), the executor
//! (the page directory's invalidation actions) and the rings' flush.

mod acks;
mod quiet;

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use fabric::proto::{Desc, InvStats, Notice, PageKey, PageSpan};
use flatfs::BlockDevice;

use super::Directory;
pub use quiet::QuietStats;

/// An invalidation notice awaiting its ack: a DIR_INV (its page, a span
/// of one) or an INV_RANGE (its span). Each is answered by its own kind
/// of ack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct InvOut {
    /// Pages.
    pub(crate) span: PageSpan,
    /// An INV_RANGE (else a DIR_INV).
    pub(crate) range: bool,
}

/// One node's invalidations.
#[derive(Default)]
struct Owed {
    /// Published on the notify ring, ack not in yet, in order.
    out: VecDeque<InvOut>,
    /// Taken as acknowledged while the node slept quietly: the node's
    /// own ack of each, when it comes, is dropped.
    lazy_acked: Vec<InvOut>,
}

/// Invalidations in flight, per node (index `node - 1`), and the
/// counters of the lazy path: owned here; told of every notice published
/// by the rings' flush, of acks by `acks.rs`, of lazy takings by
/// `quiet.rs`; asked by dispatch which nodes owe acks (who to wake).
pub(super) struct Invalidations {
    nodes: Vec<Owed>,
    stats: QuietStats,
}

impl Invalidations {
    /// Nothing outstanding for nodes `1..=max_nodes`.
    pub(super) fn new(max_nodes: u32) -> Invalidations {
        Invalidations {
            nodes: (0..max_nodes).map(|_| Owed::default()).collect(),
            stats: QuietStats::default(),
        }
    }

    fn get_mut(&mut self, node: u32) -> Option<&mut Owed> {
        self.nodes.get_mut((node as usize).wrapping_sub(1))
    }

    /// `node` joined afresh: it owes nothing.
    pub(super) fn reset(&mut self, node: u32) {
        if let Some(o) = self.get_mut(node) {
            *o = Owed::default();
        }
    }

    /// Notice `d` was published to `node`: true if it is an invalidation
    /// (its ack is awaited from now on).
    pub(super) fn published(&mut self, node: u32, d: &Desc) -> bool {
        let inv = match Notice::decode(d) {
            Ok(Notice::DirInv(key)) => InvOut {
                span: PageSpan::page(key),
                range: false,
            },
            Ok(Notice::InvRange(span)) => InvOut { span, range: true },
            _ => return false,
        };
        let arg = fabric::trace::key_arg(inv.span.ino, inv.span.first);
        fabric::trace::record(fabric::trace::Kind::InvSent, node, 0, 0, arg);
        if let Some(o) = self.get_mut(node) {
            o.out.push_back(inv);
        }
        true
    }

    /// Does `node` owe an ack?
    pub(super) fn owes(&self, node: u32) -> bool {
        self.nodes
            .get((node as usize).wrapping_sub(1))
            .is_some_and(|o| !o.out.is_empty())
    }

    /// The nodes (bit `node - 1`, the first 64) that owe an ack and pass
    /// `member`.
    pub(super) fn owing(&self, member: impl Fn(u32) -> bool) -> u64 {
        self.nodes
            .iter()
            .enumerate()
            .take(64)
            .filter(|(i, o)| !o.out.is_empty() && member(*i as u32 + 1))
            .fold(0, |m, (i, _)| m | 1 << i)
    }

    /// The invalidations `node` owes acks of, in order.
    pub(super) fn owed(&self, node: u32) -> Vec<InvOut> {
        self.nodes
            .get((node as usize).wrapping_sub(1))
            .map(|o| o.out.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Take `node`'s outstanding invalidations out (each goes back with
    /// [`Invalidations::still_owed`] or is taken with
    /// [`Invalidations::taken_lazily`]).
    pub(super) fn take_owed(&mut self, node: u32) -> VecDeque<InvOut> {
        self.get_mut(node)
            .map(|o| core::mem::take(&mut o.out))
            .unwrap_or_default()
    }

    /// `inv` is still owed by `node` (after [`Invalidations::take_owed`]).
    pub(super) fn still_owed(&mut self, node: u32, inv: InvOut) {
        if let Some(o) = self.get_mut(node) {
            o.out.push_back(inv);
        }
    }

    /// `inv` is taken as acknowledged while `node` sleeps quietly.
    pub(super) fn taken_lazily(&mut self, node: u32, inv: InvOut) {
        if let Some(o) = self.get_mut(node) {
            o.lazy_acked.push(inv);
            self.stats.taken += 1;
        }
    }

    /// `node` acked `key`: true if the ack is of an invalidation already
    /// taken as acknowledged (then it is dropped); else it is no longer
    /// outstanding.
    ///
    /// A node acks an INV_RANGE in parts when misses of some of its pages
    /// are in flight (each run without one at once, each such page alone
    /// once its answer is in): an ack of a part of an outstanding span
    /// leaves the rest of the span outstanding.
    pub(super) fn absorb(&mut self, node: u32, key: InvOut) -> bool {
        let Some(p) = self.nodes.get_mut((node as usize).wrapping_sub(1)) else {
            return false;
        };
        if let Some(i) = find_ack(p.lazy_acked.iter(), &key) {
            let rest = carve(p.lazy_acked.remove(i), &key);
            for (j, r) in rest.into_iter().flatten().enumerate() {
                p.lazy_acked.insert(i + j, r);
            }
            self.stats.absorbed += 1;
            return true;
        }
        if let Some(i) = find_ack(p.out.iter(), &key) {
            if let Some(out) = p.out.remove(i) {
                for (j, r) in carve(out, &key).into_iter().flatten().enumerate() {
                    p.out.insert(i + j, r);
                }
            }
        }
        false
    }

    /// Invalidations not yet acknowledged, and those taken from quiet
    /// sleepers whose late acks have not come, over every node.
    pub(super) fn lengths(&self) -> (usize, usize) {
        self.nodes.iter().fold((0, 0), |(o, l), n| {
            (o + n.out.len(), l + n.lazy_acked.len())
        })
    }

    /// The lazy path's counters.
    pub(super) fn stats(&self) -> QuietStats {
        self.stats
    }

    /// How many invalidations `node` owes acks of.
    #[cfg(test)]
    pub(super) fn outstanding(&self, node: u32) -> usize {
        self.nodes
            .get((node as usize).wrapping_sub(1))
            .map_or(0, |o| o.out.len())
    }
}

impl<D: BlockDevice> Directory<D> {
    /// [`Action::Invalidate`](crate::pagedir::Action::Invalidate): a DIR_INV of `key` to `node`.
    pub(super) fn invalidate(&mut self, node: u8, key: PageKey) {
        self.links.notify(node.into(), Notice::DirInv(key).encode());
    }

    /// [`Action::InvalidateRange`](crate::pagedir::Action::InvalidateRange): an INV_RANGE of `span` to `node`.
    pub(super) fn invalidate_range(&mut self, node: u8, span: PageSpan) {
        self.links
            .notify(node.into(), Notice::InvRange(span).encode());
    }

    /// Invalidation counters, for `dir stats` and
    /// [`fabric::proto::Op::InvStats`].
    pub fn inv_stats(&self) -> InvStats {
        let s = self.pages.stats();
        InvStats {
            dir_invs: s.dir_invs,
            acks: s.acks,
            range_invs: s.range_invs,
            range_acks: s.range_acks,
            range_pages: s.range_pages,
            quiet_taken: self.inval.stats().taken,
        }
    }

    /// Invalidations taken from quiet sleepers so far.
    pub fn quiet_stats(&self) -> QuietStats {
        self.inval.stats()
    }
}

/// Which of `outs` the ack `ack` answers: the notice itself, else the
/// INV_RANGE whose span holds the acked pages.
fn find_ack<'a>(outs: impl Iterator<Item = &'a InvOut> + Clone, ack: &InvOut) -> Option<usize> {
    outs.clone().position(|o| o == ack).or_else(|| {
        outs.into_iter().position(|o| {
            o.range
                && o.span.ino == ack.span.ino
                && o.span.first <= ack.span.first
                && ack.span.last() <= o.span.last()
        })
    })
}

/// What of `out` is still unacknowledged once `ack` (the whole of it, or
/// a part of its span) came: the pages before and after the part.
fn carve(out: InvOut, ack: &InvOut) -> [Option<InvOut>; 2] {
    if out == *ack {
        return [None, None];
    }
    let (o, a) = (out.span, ack.span);
    let piece = |first: u64, end: u64| {
        let count = end.checked_sub(first).filter(|c| *c > 0)?;
        let span = PageSpan::new(o.ino, first, count)?;
        Some(InvOut { span, range: true })
    };
    [
        piece(o.first, a.first),
        piece(a.last().saturating_add(1), o.last().saturating_add(1)),
    ]
}
