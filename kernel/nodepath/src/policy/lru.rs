//! LRU: evict the page read least recently. One list; an access moves the
//! page to the tail, eviction takes the head. The classic baseline
//! cache_ext compares against (Linux's active/inactive lists approximate
//! it).

use fabric::proto::PageKey;

use super::{EvictCtx, Folio, From, Iter, ListId, Lists, Policy, PolicyName};

/// LRU.
#[derive(Debug, Default)]
pub struct Lru {
    list: ListId,
}

impl Policy for Lru {
    fn name(&self) -> PolicyName {
        PolicyName::Lru
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
        lists.iterate(self.list, From::Head, ctx, |_| Iter::Evict);
    }
}

#[cfg(test)]
mod tests {
    use crate::policy::testkit::{run, Op::*};
    use crate::policy::PolicyName;

    #[test]
    fn evicts_the_least_recently_read() {
        let t = run(
            PolicyName::Lru,
            3,
            &[A(1), A(2), A(3), H(1), A(4), H(3), A(5)],
        );
        assert_eq!(t.victims, [2, 1]);
    }

    #[test]
    fn a_scan_bigger_than_the_cache_flushes_it() {
        // Hot pages 1..=3 read often, then a scan of 10 pages: LRU loses them.
        let mut ops = vec![A(1), A(2), A(3), H(1), H(2), H(3)];
        ops.extend((100..110).map(R));
        ops.extend([R(1), R(2), R(3)]);
        let t = run(PolicyName::Lru, 4, &ops);
        assert_eq!(t.hits, 0, "the scan flushed the hot pages");
    }
}
