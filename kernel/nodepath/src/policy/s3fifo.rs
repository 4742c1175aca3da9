//! S3-FIFO (Yang et al., "FIFO queues are all you need for cache
//! eviction", SOSP '23; one of cache_ext's example policies): a small FIFO
//! S (10% of the pages), a main FIFO M (90%) and a ghost FIFO G of keys
//! recently evicted from S, with a 2-bit frequency per page (0..=3).
//!
//! * A new page enters S, or M directly if its key is a ghost.
//! * An access raises its frequency (saturating at 3).
//! * Eviction from S (when S holds more than 10%, or M is empty): a page
//!   read since it entered moves to M; one that was not is evicted and
//!   its key becomes a ghost. Eviction from M: a page with frequency > 0
//!   has it lowered and goes back to M's tail; one at 0 is evicted.
//!
//! Most pages read once (a scan) leave from S without touching M.

use fabric::proto::PageKey;

use super::{EvictCtx, Folio, From, Ghost, Iter, ListId, Lists, Policy, PolicyName};

/// Most the frequency counter reaches (2 bits).
const MAX_FREQ: u64 = 3;

/// S3-FIFO.
#[derive(Debug, Default)]
pub struct S3Fifo {
    small: ListId,
    main: ListId,
    ghost: Ghost,
}

impl Policy for S3Fifo {
    fn name(&self) -> PolicyName {
        PolicyName::S3Fifo
    }

    fn policy_init(&mut self, lists: &mut Lists) {
        self.small = lists.list_create();
        self.main = lists.list_create();
        self.ghost.clear();
    }

    fn folio_added(&mut self, lists: &mut Lists, folio: &Folio) {
        let to = if self.ghost.remove(&folio.key) {
            self.main
        } else {
            self.small
        };
        let _ = lists.list_add(to, folio.key, true);
    }

    fn folio_accessed(&mut self, lists: &mut Lists, folio: &Folio) {
        let f = lists.meta(&folio.key);
        lists.set_meta(&folio.key, (f + 1).min(MAX_FREQ));
    }

    fn folio_removed(&mut self, lists: &mut Lists, key: &PageKey) {
        if lists.list_of(key) == Some(self.small) {
            // The ghost queue remembers as many keys as M is meant to hold.
            let cap = (lists.total() * 9 / 10).max(1);
            self.ghost.insert(*key, cap);
        }
    }

    fn evict_folios(&mut self, lists: &mut Lists, ctx: &mut EvictCtx) {
        let main = self.main;
        let target = lists.total().div_ceil(10);
        let mut small_len = lists.len(self.small);
        let mut main_len = lists.len(main);
        if small_len > target || main_len == 0 {
            lists.iterate(self.small, From::Head, ctx, |v| {
                if small_len <= target && main_len > 0 {
                    return Iter::Stop;
                }
                small_len -= 1;
                if *v.meta > 0 {
                    *v.meta = 0;
                    main_len += 1;
                    Iter::MoveTo(main)
                } else {
                    Iter::Evict
                }
            });
        }
        if ctx.full() {
            return;
        }
        lists.iterate(main, From::Head, ctx, |v| {
            if *v.meta > 0 {
                *v.meta -= 1;
                Iter::MoveTail
            } else {
                Iter::Evict
            }
        });
        if !ctx.full() {
            // Everything in M still had frequency left: S pages go next.
            lists.take_in_order(self.small, From::Head, ctx);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::policy::testkit::{run, skewed, Op::*};
    use crate::policy::PolicyName;

    #[test]
    fn pages_read_once_leave_from_the_small_queue() {
        // 10 pages: S target is 1. 1..=3 are read again and promoted to M
        // when they reach S's head; the one-time pages are evicted.
        let mut ops: Vec<_> = (1..=10).map(A).collect();
        ops.extend([H(1), H(2), H(3)]);
        ops.extend((11..=14).map(A));
        let t = run(PolicyName::S3Fifo, 10, &ops);
        assert_eq!(t.victims, [4, 5, 6, 7]);
    }

    #[test]
    fn a_ghost_hit_goes_straight_to_main() {
        let mut ops: Vec<_> = (1..=10).map(A).collect();
        ops.push(A(11)); // evicts 1 (S, never read): 1 becomes a ghost
        ops.push(A(1)); // evicts 2; 1 comes back into M
        ops.extend((20..=27).map(A)); // S keeps churning; 1 stays in M
        let t = run(PolicyName::S3Fifo, 10, &ops);
        assert_eq!(&t.victims[..2], [1, 2]);
        assert!(!t.victims[2..].contains(&1), "{:?}", t.victims);
    }

    #[test]
    fn a_scan_bigger_than_the_cache_keeps_the_hot_set() {
        let mut ops: Vec<_> = (1..=8).map(R).collect();
        for _ in 0..3 {
            ops.extend((1..=8).map(R));
        }
        ops.extend((100..140).map(R));
        ops.extend((1..=8).map(R));
        let s3 = run(PolicyName::S3Fifo, 10, &ops);
        let lru = run(PolicyName::Lru, 10, &ops);
        assert!(
            s3.hits >= lru.hits + 6,
            "s3fifo {} lru {}",
            s3.hits,
            lru.hits
        );
    }

    #[test]
    fn beats_fifo_on_a_skewed_trace() {
        let ops = skewed(400, 6000, 11);
        let s3 = run(PolicyName::S3Fifo, 50, &ops);
        let fifo = run(PolicyName::Fifo, 50, &ops);
        assert!(s3.hits > fifo.hits, "s3fifo {} fifo {}", s3.hits, fifo.hits);
    }
}
