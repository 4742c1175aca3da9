//! GET-SCAN, after cache_ext's application-informed policy (seed 004: +70%
//! GET throughput with 1% scans): two lists chosen by the group of the
//! task touching the page. Group 0 (the default: key-value GETs) feeds an
//! LRU list; any other group (a scan) feeds a FIFO list that is evicted
//! first, so a scan cannot flush the GET working set. A page a GET touches
//! moves to the GET list.
//!
//! In the guest the group is the task group of the command doing the I/O
//! (`app`/`fio --group`; `app kv --scan-group` puts only the scans' reads
//! in another group), seen as 0 when it is the group owning the lists:
//! with every access from that group this behaves as LRU.
//! The host tests tag accesses with groups through the cache's
//! `set_group`.

use fabric::proto::PageKey;

use super::{EvictCtx, Folio, From, ListId, Lists, Policy, PolicyName};

/// GET-SCAN.
#[derive(Debug, Default)]
pub struct GetScan {
    get: ListId,
    scan: ListId,
}

impl Policy for GetScan {
    fn name(&self) -> PolicyName {
        PolicyName::GetScan
    }

    fn policy_init(&mut self, lists: &mut Lists) {
        self.get = lists.list_create();
        self.scan = lists.list_create();
    }

    fn folio_added(&mut self, lists: &mut Lists, folio: &Folio) {
        let to = if folio.group == 0 {
            self.get
        } else {
            self.scan
        };
        let _ = lists.list_add(to, folio.key, true);
    }

    fn folio_accessed(&mut self, lists: &mut Lists, folio: &Folio) {
        if folio.group == 0 || lists.list_of(&folio.key) == Some(self.get) {
            let _ = lists.list_move(self.get, &folio.key, true);
        }
    }

    fn folio_removed(&mut self, _: &mut Lists, _: &PageKey) {}

    fn evict_folios(&mut self, lists: &mut Lists, ctx: &mut EvictCtx) {
        lists.take_in_order(self.scan, From::Head, ctx);
        lists.take_in_order(self.get, From::Head, ctx);
    }
}

#[cfg(test)]
mod tests {
    use crate::policy::testkit::{run, Op::*};
    use crate::policy::PolicyName;

    fn get_then_scan() -> Vec<crate::policy::testkit::Op> {
        // GETs of 1..=3 (group 0), a scan of 20 pages (group 1), GETs again.
        let mut ops: Vec<_> = (1..=3).map(R).collect();
        ops.extend((1..=3).map(R));
        ops.extend((100..120).map(|p| G(p, 1)));
        ops.extend((1..=3).map(R));
        ops
    }

    #[test]
    fn a_scan_does_not_flush_the_get_set() {
        let t = run(PolicyName::GetScan, 5, &get_then_scan());
        assert_eq!(t.hits, 6);
        let lru = run(PolicyName::Lru, 5, &get_then_scan());
        assert_eq!(lru.hits, 3);
    }

    #[test]
    fn a_get_of_a_scanned_page_keeps_it() {
        let t = run(
            PolicyName::GetScan,
            3,
            &[G(1, 1), G(2, 1), R(1), G(3, 1), G(4, 1), G(5, 1)],
        );
        assert_eq!(t.victims, [2, 3]);
    }
}
