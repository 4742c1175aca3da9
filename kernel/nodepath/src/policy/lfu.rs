//! LFU: evict the page read least often. cache_ext's LFU example (its
//! YCSB win, up to +37%): one list, a frequency per page (here the list
//! entry's word), and eviction in batch-scoring mode: score a sample of
//! pages from the head by frequency and propose the lowest; the pages
//! scored but kept move to the tail so the next call samples others.

use fabric::proto::PageKey;

use super::{EvictCtx, Folio, ListId, Lists, Policy, PolicyName};

/// Pages scored per `evict_folios` call.
pub const SAMPLE: usize = 512;

/// LFU.
#[derive(Debug, Default)]
pub struct Lfu {
    list: ListId,
}

impl Policy for Lfu {
    fn name(&self) -> PolicyName {
        PolicyName::Lfu
    }

    fn policy_init(&mut self, lists: &mut Lists) {
        self.list = lists.list_create();
    }

    fn folio_added(&mut self, lists: &mut Lists, folio: &Folio) {
        let _ = lists.list_add(self.list, folio.key, true);
        lists.set_meta(&folio.key, 1);
    }

    fn folio_accessed(&mut self, lists: &mut Lists, folio: &Folio) {
        let f = lists.meta(&folio.key);
        lists.set_meta(&folio.key, f.saturating_add(1));
    }

    fn folio_removed(&mut self, _: &mut Lists, _: &PageKey) {}

    fn evict_folios(&mut self, lists: &mut Lists, ctx: &mut EvictCtx) {
        lists.score(self.list, SAMPLE, true, ctx, |v| {
            i64::try_from(*v.meta).unwrap_or(i64::MAX)
        });
    }
}

#[cfg(test)]
mod tests {
    use crate::policy::testkit::{run, skewed, Op::*};
    use crate::policy::PolicyName;

    #[test]
    fn evicts_the_least_frequently_read() {
        // 1 read 3 times, 2 once, 3 twice: 4 evicts 2, then 5 evicts 4
        // (frequency 1, nearer the head than nothing else of frequency 1).
        let t = run(
            PolicyName::Lfu,
            3,
            &[
                A(1),
                A(2),
                A(3),
                H(1),
                H(1),
                H(1),
                H(2),
                H(3),
                H(3),
                A(4),
                A(5),
            ],
        );
        assert_eq!(t.victims, [2, 4]);
    }

    #[test]
    fn a_scan_does_not_flush_frequent_pages() {
        let mut ops = vec![A(1), A(2), A(3), H(1), H(2), H(3), H(1), H(2), H(3)];
        ops.extend((100..110).map(R));
        ops.extend([R(1), R(2), R(3)]);
        let t = run(PolicyName::Lfu, 4, &ops);
        assert_eq!(t.hits, 3, "the hot pages survive the scan");
    }

    #[test]
    fn beats_fifo_on_a_skewed_trace() {
        let ops = skewed(400, 6000, 7);
        let lfu = run(PolicyName::Lfu, 50, &ops);
        let fifo = run(PolicyName::Fifo, 50, &ops);
        assert!(lfu.hits > fifo.hits, "lfu {} fifo {}", lfu.hits, fifo.hits);
    }
}
