//! FIFO: evict in install order. The node cache's behaviour before
//! policies existed (`pick_victims` over an install-order queue), and
//! cache_ext's simplest example policy (`cache_ext_fifo`): one list, pages
//! added at the tail, accesses ignored, eviction from the head.

use fabric::proto::PageKey;

use super::recency::RecencyList;
use super::{EvictCtx, Folio, From, Lists, Policy, PolicyName};

/// FIFO.
#[derive(Debug, Default)]
pub struct Fifo {
    order: RecencyList,
}

impl Policy for Fifo {
    fn name(&self) -> PolicyName {
        PolicyName::Fifo
    }

    fn policy_init(&mut self, lists: &mut Lists) {
        self.order.init(lists);
    }

    fn folio_added(&mut self, lists: &mut Lists, folio: &Folio) {
        self.order.add(lists, folio.key);
    }

    fn folio_accessed(&mut self, _: &mut Lists, _: &Folio) {}

    fn folio_removed(&mut self, _: &mut Lists, _: &PageKey) {}

    fn evict_folios(&mut self, lists: &mut Lists, ctx: &mut EvictCtx) {
        self.order.take(lists, From::Head, ctx);
    }
}

#[cfg(test)]
mod tests {
    use crate::policy::testkit::{run, Op::*};
    use crate::policy::PolicyName;

    #[test]
    fn evicts_in_install_order_whatever_is_read() {
        // Cache of 3: 1 2 3, read 1 twice, then 4 and 5 evict 1 and 2.
        let t = run(
            PolicyName::Fifo,
            3,
            &[A(1), A(2), A(3), H(1), H(1), A(4), A(5)],
        );
        assert_eq!(t.victims, [1, 2]);
    }

    #[test]
    fn a_loop_one_page_bigger_than_the_cache_misses_every_time() {
        let ops: Vec<_> = (0..5).cycle().take(20).map(R).collect();
        let t = run(PolicyName::Fifo, 4, &ops);
        assert_eq!(t.hits, 0);
    }
}
