//! SIEVE (Zhang et al., "SIEVE is simpler than LRU", NSDI '24): one FIFO
//! list, a visited bit per page and a hand that persists between
//! evictions. The hand walks from the oldest page towards the newest
//! (wrapping around); a visited page has its bit cleared and stays where it
//! is (unlike CLOCK, nothing moves), the first unvisited one is evicted.
//! New pages go in at the newest end, behind the hand's usual path.

use fabric::proto::PageKey;

use super::{EvictCtx, Folio, ListId, Lists, Policy, PolicyName};

/// SIEVE.
#[derive(Debug, Default)]
pub struct Sieve {
    list: ListId,
    hand: Option<PageKey>,
}

impl Policy for Sieve {
    fn name(&self) -> PolicyName {
        PolicyName::Sieve
    }

    fn policy_init(&mut self, lists: &mut Lists) {
        self.list = lists.list_create();
        self.hand = None;
    }

    fn folio_added(&mut self, lists: &mut Lists, folio: &Folio) {
        let _ = lists.list_add(self.list, folio.key, true);
    }

    fn folio_accessed(&mut self, lists: &mut Lists, folio: &Folio) {
        lists.set_meta(&folio.key, 1);
    }

    fn folio_removed(&mut self, lists: &mut Lists, key: &PageKey) {
        if self.hand == Some(*key) {
            self.hand = lists.next(key);
        }
    }

    fn evict_folios(&mut self, lists: &mut Lists, ctx: &mut EvictCtx) {
        let list = self.list;
        let mut cur = self
            .hand
            .filter(|k| lists.list_of(k) == Some(list))
            .or_else(|| lists.front(list));
        // Two turns at most: the first clears every bit.
        let mut steps = lists.len(list).saturating_mul(2);
        while !ctx.full() && steps > 0 {
            steps -= 1;
            let Some(k) = cur else { break };
            if lists.meta(&k) != 0 {
                lists.set_meta(&k, 0);
            } else {
                ctx.propose(k);
            }
            cur = lists.next(&k).or_else(|| lists.front(list));
        }
        self.hand = cur;
    }
}

#[cfg(test)]
mod tests {
    use crate::policy::testkit::{run, skewed, Op::*};
    use crate::policy::PolicyName;

    #[test]
    fn a_visited_page_stays_in_place_and_the_hand_moves_on() {
        // CLOCK would move 1 to the tail and evict it third; SIEVE leaves
        // it at the head, behind the hand, and evicts 2, 3, 4.
        let ops = [A(1), A(2), A(3), H(1), A(4), A(5), A(6)];
        assert_eq!(run(PolicyName::Sieve, 3, &ops).victims, [2, 3, 4]);
        assert_eq!(run(PolicyName::Clock, 3, &ops).victims, [2, 3, 1]);
    }

    #[test]
    fn the_hand_wraps_around() {
        let t = run(
            PolicyName::Sieve,
            3,
            &[A(1), A(2), A(3), H(1), H(2), H(3), A(4), A(5)],
        );
        // Every bit set: one turn clears them, the hand is back at 1.
        assert_eq!(t.victims, [1, 2]);
    }

    #[test]
    fn beats_fifo_on_a_skewed_trace() {
        let ops = skewed(400, 6000, 13);
        let s = run(PolicyName::Sieve, 50, &ops);
        let fifo = run(PolicyName::Fifo, 50, &ops);
        assert!(s.hits > fifo.hits, "sieve {} fifo {}", s.hits, fifo.hits);
    }
}
