//! ARC (Megiddo and Modha, "ARC: a self-tuning, low overhead replacement
//! cache", FAST '03; offered by the DAOS global cache, seed 003): T1 holds
//! pages seen once recently, T2 pages seen at least twice; ghosts B1 and
//! B2 remember keys evicted from each. A miss that hits B1 means T1 was too
//! small (the target `p` for T1 grows), one that hits B2 means T2 was (it
//! shrinks); eviction takes T1's head while T1 is above `p`, else T2's.
//! The capacity `c` is the most pages this node held at once.

use fabric::proto::PageKey;

use super::{EvictCtx, Folio, From, Ghost, Iter, ListId, Lists, Policy, PolicyName};

/// ARC.
#[derive(Debug, Default)]
pub struct Arc {
    t1: ListId,
    t2: ListId,
    b1: Ghost,
    b2: Ghost,
    p: usize,
    c: usize,
}

impl Policy for Arc {
    fn name(&self) -> PolicyName {
        PolicyName::Arc
    }

    fn policy_init(&mut self, lists: &mut Lists) {
        self.t1 = lists.list_create();
        self.t2 = lists.list_create();
        self.b1.clear();
        self.b2.clear();
        self.p = 0;
        self.c = 0;
    }

    fn folio_added(&mut self, lists: &mut Lists, folio: &Folio) {
        self.c = self.c.max(lists.total() + 1);
        let k = folio.key;
        let to = if self.b1.contains(&k) {
            let delta = (self.b2.len() / self.b1.len().max(1)).max(1);
            self.p = (self.p + delta).min(self.c);
            self.b1.remove(&k);
            self.t2
        } else if self.b2.contains(&k) {
            let delta = (self.b1.len() / self.b2.len().max(1)).max(1);
            self.p = self.p.saturating_sub(delta);
            self.b2.remove(&k);
            self.t2
        } else {
            self.t1
        };
        let _ = lists.list_add(to, k, true);
    }

    fn folio_accessed(&mut self, lists: &mut Lists, folio: &Folio) {
        let _ = lists.list_move(self.t2, &folio.key, true);
    }

    fn folio_removed(&mut self, lists: &mut Lists, key: &PageKey) {
        if lists.list_of(key) == Some(self.t1) {
            self.b1.insert(*key, self.c.max(1));
        } else {
            self.b2.insert(*key, self.c.max(1));
        }
    }

    fn evict_folios(&mut self, lists: &mut Lists, ctx: &mut EvictCtx) {
        let mut quota = if lists.len(self.t2) == 0 {
            usize::MAX
        } else {
            lists.len(self.t1).saturating_sub(self.p)
        };
        lists.iterate(self.t1, From::Head, ctx, |_| {
            if quota == 0 {
                return Iter::Stop;
            }
            quota -= 1;
            Iter::Evict
        });
        lists.take_in_order(self.t2, From::Head, ctx);
        lists.take_in_order(self.t1, From::Head, ctx);
    }
}

#[cfg(test)]
mod tests {
    use crate::policy::testkit::{run, skewed, Op::*};
    use crate::policy::PolicyName;

    #[test]
    fn a_ghost_hit_in_b1_promotes_the_page_and_grows_t1s_target() {
        // 1 evicted from T1 (ghost in B1), back at once: it goes to T2 and
        // outlives the pages seen once.
        let t = run(
            PolicyName::Arc,
            3,
            &[A(1), A(2), A(3), A(4), A(1), A(5), A(6)],
        );
        assert_eq!(t.victims, [1, 2, 3, 4]);
    }

    #[test]
    fn a_scan_bigger_than_the_cache_keeps_the_pages_read_twice() {
        let mut ops = vec![A(1), A(2), A(3), H(1), H(2), H(3)];
        ops.extend((100..110).map(R));
        ops.extend([R(1), R(2), R(3)]);
        let t = run(PolicyName::Arc, 4, &ops);
        assert_eq!(t.hits, 3);
    }

    #[test]
    fn beats_fifo_on_a_skewed_trace() {
        let ops = skewed(400, 6000, 17);
        let a = run(PolicyName::Arc, 50, &ops);
        let fifo = run(PolicyName::Fifo, 50, &ops);
        assert!(a.hits > fifo.hits, "arc {} fifo {}", a.hits, fifo.hits);
    }
}
