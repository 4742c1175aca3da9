//! The Invalidation Manager, the directory's side: DIR_INVs and INV_RANGEs
//! published to nodes whose acks are not in yet, and those taken as
//! acknowledged from quietly sleeping sharers whose own late acks are
//! dropped when they come.
//!
//! [`Invalidations`] owns that per-node bookkeeping; it learns of every
//! invalidation published from [`super::links::Links::flush`] and of
//! every ack from the ack path.

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use fabric::proto::{Desc, Notice, PageSpan};

use super::QuietStats;

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
/// counters of the lazy path.
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
