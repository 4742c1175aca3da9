//! Cluster-aware LRU: onecopy's own policy (no anchor
//! system has it). In a single-copy cache, evicting a page on its owner takes it
//! away from every node mapping it: a page mapped by 3 nodes costs 3
//! invalidations now and 3 misses later. The directory reports to the
//! owner how many nodes map each page (a `Sharers` notice when the count
//! changes); this policy keeps an LRU list (a local read, or a new remote
//! mapping, moves the page to the tail) and evicts in batch-scoring mode:
//! of the least recently used pages it scores the sharer count and evicts
//! the least shared first (ties: least recent first).

use fabric::proto::PageKey;

use super::recency::RecencyList;
use super::{EvictCtx, Folio, Lists, Policy, PolicyName};

/// Least recently used pages scored per call.
pub const SAMPLE: usize = 64;

/// Cluster-aware LRU.
#[derive(Debug, Default)]
pub struct Cluster {
    order: RecencyList,
}

impl Policy for Cluster {
    fn name(&self) -> PolicyName {
        PolicyName::Cluster
    }

    fn policy_init(&mut self, lists: &mut Lists) {
        self.order.init(lists);
    }

    fn folio_added(&mut self, lists: &mut Lists, folio: &Folio) {
        self.order.add(lists, folio.key);
    }

    fn folio_accessed(&mut self, lists: &mut Lists, folio: &Folio) {
        self.order.touch(lists, &folio.key);
    }

    fn folio_removed(&mut self, _: &mut Lists, _: &PageKey) {}

    fn evict_folios(&mut self, lists: &mut Lists, ctx: &mut EvictCtx) {
        lists.score(self.order.id(), SAMPLE, false, ctx, |v| {
            i64::from(v.sharers)
        });
    }
}

#[cfg(test)]
mod tests {
    use crate::policy::testkit::{run, Op::*};
    use crate::policy::PolicyName;

    #[test]
    fn widely_shared_pages_are_evicted_last() {
        // 1 is the least recently used but mapped by 3 nodes: 2 and 3 go
        // first, 1 only when nothing less shared is left.
        let t = run(
            PolicyName::Cluster,
            3,
            &[A(1), A(2), A(3), S(1, 3), S(1, 2), A(4), A(5), A(6)],
        );
        assert_eq!(t.victims, [2, 3, 4]);
        let lru = run(
            PolicyName::Lru,
            3,
            &[A(1), A(2), A(3), S(1, 3), S(1, 2), A(4), A(5), A(6)],
        );
        // For LRU the new mapping is an access too, but the count is not
        // looked at: 1 goes once it is the oldest again.
        assert_eq!(lru.victims, [2, 3, 1]);
    }

    #[test]
    fn unshared_pages_go_in_lru_order() {
        let t = run(
            PolicyName::Cluster,
            3,
            &[A(1), A(2), A(3), H(1), A(4), A(5)],
        );
        assert_eq!(t.victims, [2, 3]);
    }
}
