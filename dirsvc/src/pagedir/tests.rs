use super::*;
use alloc::vec;
use fabric::layout::Layout;
use fabric::proto::{PageReply, PageReq, PageSpan};

const K: PageKey = PageKey { ino: 7, idx: 3 };

/// Store a hand-made entry as is.
fn put(d: &mut PageDir, key: PageKey, e: Entry) {
    d.table.put(key, &e).unwrap();
}

fn reply(node: u8, tag: u32, reply: PageReply) -> Action {
    Action::Reply { node, tag, reply }
}

fn export(gfn: u64, on: bool) -> Action {
    Action::Export { gfn, on }
}

fn inv(node: u8) -> Action {
    Action::Invalidate { node, key: K }
}

/// The INV_RANGE of `K` alone (a file teardown's notice of one page).
fn rinv(node: u8) -> Action {
    Action::InvalidateRange {
        node,
        span: PageSpan::page(K),
    }
}

const DONE: PageReply = PageReply::Done { written: false };
const WRITTEN: PageReply = PageReply::Done { written: true };

/// A directory over a 4-node layout, with helpers for page `K`.
struct T {
    l: Layout,
    d: PageDir,
}

impl T {
    fn new() -> T {
        T {
            l: Layout::compute(8 << 20, 4).unwrap(),
            d: PageDir::for_nodes(4),
        }
    }

    /// Frame `i` of `node`'s pool.
    fn f(&self, node: u8, i: u64) -> u64 {
        self.l.pool_gfns(u32::from(node)).0 + i
    }

    fn req(&mut self, node: u8, tag: u32, req: PageReq) -> Vec<Action> {
        let out = self.d.handle(&self.l, node, tag, req);
        self.d.check().unwrap();
        out
    }

    fn read(&mut self, node: u8, tag: u32) -> Vec<Action> {
        let frame = self.f(node, 0);
        self.req(node, tag, PageReq::Read { key: K, frame })
    }

    fn lock(&mut self, node: u8, tag: u32) -> Vec<Action> {
        let frame = self.f(node, 0);
        self.req(node, tag, PageReq::LookupLock { key: K, frame })
    }

    /// `node` reads `K` from disk and owns it; returns its frame.
    fn own(&mut self, node: u8) -> u64 {
        let g = self.f(node, 0);
        assert_eq!(self.read(node, 1), vec![Action::Fill { key: K, gfn: g }]);
        assert_eq!(
            self.d.filled(K, true),
            vec![reply(node, 1, PageReply::Owner { gfn: g })]
        );
        g
    }

    /// `node` maps the owned page `K`.
    fn share(&mut self, node: u8) {
        let out = self.read(node, 2);
        assert!(
            matches!(
                out.last(),
                Some(Action::Reply {
                    reply: PageReply::Shared { .. },
                    ..
                })
            ),
            "{out:?}"
        );
    }

    fn entry(&self) -> Option<Entry> {
        self.d.entry(&K)
    }

    fn ack(&mut self, node: u8, dirty: bool) -> Vec<Action> {
        let out = self.d.ack(node, K, dirty);
        self.d.check().unwrap();
        out
    }

    /// `req` from `node` is refused and changes nothing.
    fn refused(&mut self, node: u8, req: PageReq) {
        let before: Vec<(PageKey, Entry)> = self.d.entries().collect();
        let n = self.d.stats().refused;
        assert_eq!(
            self.req(node, 9, req),
            vec![reply(node, 9, PageReply::Refused)],
            "{req:?} from {node}"
        );
        let after: Vec<(PageKey, Entry)> = self.d.entries().collect();
        assert_eq!(before, after, "{req:?} from {node} changed the directory");
        assert_eq!(self.d.stats().refused, n + 1);
    }

    /// `req` from `node` is answered Retry and changes nothing.
    fn retried(&mut self, node: u8, req: PageReq) {
        let before = self.entry();
        assert_eq!(
            self.req(node, 8, req),
            vec![reply(node, 8, PageReply::Retry)],
            "{req:?} from {node}"
        );
        assert_eq!(self.entry(), before);
    }

    /// Every request kind for `K`, with `node`'s own frame.
    fn all_reqs(&self, node: u8) -> [PageReq; 6] {
        let frame = self.f(node.clamp(1, 4), 1);
        [
            PageReq::Read { key: K, frame },
            PageReq::LookupLock { key: K, frame },
            PageReq::Unlock { key: K },
            PageReq::Inv {
                key: K,
                dirty: true,
            },
            PageReq::Drop {
                key: K,
                dirty: true,
            },
            PageReq::Writeback {
                key: K,
                dirty: true,
            },
        ]
    }
}

mod deleg;
mod evict;
mod failures;
mod invalidation;
mod locks;
mod memory;
mod reads;
mod state;
mod writeback;
