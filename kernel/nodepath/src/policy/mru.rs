//! MRU: evict the page read most recently. One list, accesses move to the
//! tail, eviction takes the tail. cache_ext's file-search example (about
//! 2x over Linux's default): a loop over more data than fits keeps the
//! part it already holds instead of cycling everything through.

use fabric::proto::PageKey;

use super::{EvictCtx, Folio, From, Iter, ListId, Lists, Policy, PolicyName};

/// MRU.
#[derive(Debug, Default)]
pub struct Mru {
    list: ListId,
}

impl Policy for Mru {
    fn name(&self) -> PolicyName {
        PolicyName::Mru
    }

    fn policy_init(&mut self, lists: &mut Lists) {
        self.list = lists.list_create();
    }

    fn folio_added(&mut self, lists: &mut Lists, folio: &Folio) {
        let _ = lists.list_add(self.list, folio.key, true);
    }

    fn folio_accessed(&mut self, lists: &mut Lists, folio: &Folio) {
        let _ = lists.list_move(self.list, &folio.key, true);
    }

    fn folio_removed(&mut self, _: &mut Lists, _: &PageKey) {}

    fn evict_folios(&mut self, lists: &mut Lists, ctx: &mut EvictCtx) {
        lists.iterate(self.list, From::Tail, ctx, |_| Iter::Evict);
    }
}

#[cfg(test)]
mod tests {
    use crate::policy::testkit::{run, Op::*};
    use crate::policy::PolicyName;

    #[test]
    fn evicts_the_most_recently_read() {
        let t = run(PolicyName::Mru, 3, &[A(1), A(2), A(3), H(1), A(4)]);
        assert_eq!(t.victims, [1]);
    }

    #[test]
    fn a_loop_one_page_bigger_than_the_cache_keeps_hitting() {
        // 5 pages looped over a cache of 4: FIFO and LRU never hit; MRU
        // keeps 3 of the loop's pages resident.
        let ops: Vec<_> = (0..5).cycle().take(25).map(R).collect();
        let t = run(PolicyName::Mru, 4, &ops);
        assert!(t.hits >= 12, "hits {}", t.hits);
        let lru = run(PolicyName::Lru, 4, &ops);
        assert_eq!(lru.hits, 0);
    }
}
