//! CLOCK (second chance, Corbató 1968; the approximation of LRU Linux and
//! most kernels build on): one list in install order and a reference bit
//! per page. An access sets the bit; eviction walks from the head, giving
//! a referenced page a second chance (bit cleared, moved to the tail) and
//! proposing the first unreferenced one. The list walk stands for the
//! clock hand.

use fabric::proto::PageKey;

use super::{EvictCtx, Folio, From, Iter, ListId, Lists, Policy, PolicyName};

/// CLOCK.
#[derive(Debug, Default)]
pub struct Clock {
    list: ListId,
}

impl Policy for Clock {
    fn name(&self) -> PolicyName {
        PolicyName::Clock
    }

    fn policy_init(&mut self, lists: &mut Lists) {
        self.list = lists.list_create();
    }

    fn folio_added(&mut self, lists: &mut Lists, folio: &Folio) {
        let _ = lists.list_add(self.list, folio.key, true);
    }

    fn folio_accessed(&mut self, lists: &mut Lists, folio: &Folio) {
        lists.set_meta(&folio.key, 1);
    }

    fn folio_removed(&mut self, _: &mut Lists, _: &PageKey) {}

    fn evict_folios(&mut self, lists: &mut Lists, ctx: &mut EvictCtx) {
        lists.iterate(self.list, From::Head, ctx, |v| {
            if *v.meta != 0 {
                *v.meta = 0;
                Iter::MoveTail
            } else {
                Iter::Evict
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use crate::policy::testkit::{run, Op::*};
    use crate::policy::PolicyName;

    #[test]
    fn a_referenced_page_gets_a_second_chance() {
        // 1 2 3, 1 referenced: 4 evicts 2 (1 gets its second chance), 5
        // evicts 3, 6 evicts 1 (its bit was cleared when it was passed).
        let t = run(
            PolicyName::Clock,
            3,
            &[A(1), A(2), A(3), H(1), A(4), A(5), A(6)],
        );
        assert_eq!(t.victims, [2, 3, 1]);
    }

    #[test]
    fn all_referenced_degrades_to_fifo() {
        let t = run(
            PolicyName::Clock,
            3,
            &[A(1), A(2), A(3), H(1), H(2), H(3), A(4), A(5)],
        );
        assert_eq!(t.victims, [1, 2]);
    }
}
