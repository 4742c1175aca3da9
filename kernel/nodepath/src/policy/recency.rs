//! Recency order, the one list several policies keep: pages added at the
//! tail, an access moves a page to the tail ([`RecencyList`]); FIFO uses
//! it without the move, the cluster-aware policy scores its head.
//!
//! [`Recency`] is LRU and MRU, one policy parameterised by the end it
//! evicts from:
//! * `lru`: evict the page read least recently (the head). The classic
//!   baseline cache_ext compares against (Linux's active/inactive lists
//!   approximate it).
//! * `mru`: evict the page read most recently (the tail). cache_ext's
//!   file-search example (about 2x over Linux's default): a loop over more
//!   data than fits keeps the part it already holds instead of cycling
//!   everything through.

use fabric::proto::PageKey;

use super::{EvictCtx, Folio, From, ListId, Lists, Policy, PolicyName};

/// One list in install (or recency) order.
#[derive(Debug, Default, Clone, Copy)]
pub struct RecencyList {
    list: ListId,
}

impl RecencyList {
    /// Create the list (`policy_init`).
    pub fn init(&mut self, lists: &mut Lists) {
        self.list = lists.list_create();
    }

    /// The list.
    pub fn id(&self) -> ListId {
        self.list
    }

    /// A new page goes to the tail (`folio_added`).
    pub fn add(&self, lists: &mut Lists, key: PageKey) {
        let _ = lists.list_add(self.list, key, true);
    }

    /// An accessed page moves to the tail (`folio_accessed`).
    pub fn touch(&self, lists: &mut Lists, key: &PageKey) {
        let _ = lists.list_move(self.list, key, true);
    }

    /// Propose pages in list order from `end` (`evict_folios`).
    pub fn take(&self, lists: &mut Lists, end: From, ctx: &mut EvictCtx) {
        lists.take_in_order(self.list, end, ctx);
    }
}

/// LRU (evicts from the head) or MRU (from the tail).
#[derive(Debug)]
pub struct Recency {
    order: RecencyList,
    end: From,
}

impl Recency {
    /// LRU.
    pub fn lru() -> Recency {
        Recency {
            order: RecencyList::default(),
            end: From::Head,
        }
    }

    /// MRU.
    pub fn mru() -> Recency {
        Recency {
            order: RecencyList::default(),
            end: From::Tail,
        }
    }
}

impl Policy for Recency {
    fn name(&self) -> PolicyName {
        match self.end {
            From::Head => PolicyName::Lru,
            From::Tail => PolicyName::Mru,
        }
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
        self.order.take(lists, self.end, ctx);
    }
}

#[cfg(test)]
mod lru_tests {
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

#[cfg(test)]
mod mru_tests {
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
