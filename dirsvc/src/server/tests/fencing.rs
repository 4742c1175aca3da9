//! Fencing of failed nodes: the directory drops a failed node from the
//! page directory (so its frames and the frames it mapped may be reused)
//! only once the fencer confirmed its session fenced or it rejoined.

use super::super::*;
use core::cell::{Cell, RefCell};
use fabric::layout::NodeState;
use fabric::proto::{Notice, PageKey, PageReq, Request, Response};
use fabric::shm::HeapShm;
use flatfs::MemDisk;
use nodepath::client::{Client, Notifier};

const REGION: usize = 4 << 20;
const FENCE_TIMEOUT_NS: u64 = 50_000_000;

struct Rig {
    mem: HeapShm,
    layout: Layout,
    dir: RefCell<Directory<MemDisk>>,
    now: Cell<u64>,
}

impl Rig {
    fn new(nodes: u32) -> Rig {
        let mem = HeapShm::new(REGION);
        let layout = Layout::compute(REGION, nodes).unwrap();
        layout.format(&*mem, 0);
        let fs = Fs::format(MemDisk::new(2048), 64).unwrap();
        let dir = Directory::new(
            &*mem,
            layout,
            Some(fs),
            Config {
                heartbeat_timeout_ns: 1_000_000,
                fencing: true,
                fence_timeout_ns: FENCE_TIMEOUT_NS,
                ..Config::default()
            },
        );
        Rig {
            mem,
            layout,
            dir: RefCell::new(dir),
            now: Cell::new(0),
        }
    }

    fn h(&self) -> Header<'_, fabric::shm::RawShm> {
        Header::new(&*self.mem, self.layout)
    }

    /// One pass, `alive` beating; its events.
    fn step(&self, alive: &[u32]) -> Vec<Event> {
        for n in alive {
            self.h().beat_node(*n);
        }
        self.now.set(self.now.get() + 1000);
        self.dir
            .borrow_mut()
            .poll(&*self.mem, self.now.get())
            .events
    }

    fn join(&self, node: u32) -> Client {
        let mut w = || {
            self.step(&[]);
            true
        };
        Client::join(&*self.mem, self.layout, node, 1, &mut w).unwrap()
    }

    fn call(&self, c: &mut Client, req: &Request) -> Response {
        let mut budget = 100;
        let mut w = || {
            self.step(&[]);
            budget -= 1;
            budget > 0
        };
        c.call(&*self.mem, req, &mut w).unwrap()
    }

    /// Node 1 owns page 0 of a new file in its first frame and node 2
    /// maps it; then node 1 falls silent until it is declared failed.
    /// Node 2's notifier, the page, node 1's failed epoch and the events.
    fn owner_fails(&self) -> (Notifier, PageKey, u64, Vec<Event>) {
        let mut a = self.join(1);
        let mut b = self.join(2);
        let nb = Notifier::new(&self.layout, 2);
        let (off, _) = a.bulk(0).unwrap();
        self.mem.write(off, b"/g");
        let req = Request::Path {
            op: Op::Create,
            slot: 0,
            at: 0,
            len: 2,
            exclusive: false,
        };
        let Response::Attr(f) = self.call(&mut a, &req) else {
            panic!("create")
        };
        let key = PageKey { ino: f.ino, idx: 0 };
        let (a0, _) = self.layout.pool_gfns(1);
        let (b0, _) = self.layout.pool_gfns(2);
        self.call(&mut a, &Request::Page(PageReq::Read { key, frame: a0 }));
        self.call(&mut b, &Request::Page(PageReq::Read { key, frame: b0 }));
        for _ in 0..5000 {
            let ev = self.step(&[2]);
            if ev
                .iter()
                .any(|e| matches!(e, Event::Failed { node: 1, .. }))
            {
                return (nb, key, a.epoch(), ev);
            }
        }
        panic!("node 1 was never declared failed");
    }
}

#[test]
fn a_failed_node_is_torn_down_only_once_the_fencer_confirms() {
    let rig = Rig::new(2);
    let (mut nb, key, epoch, ev) = rig.owner_fails();
    assert!(ev.contains(&Event::FenceAsked { node: 1, epoch }), "{ev:?}");
    let h = rig.h();
    assert_eq!(h.node_state(1), Some(NodeState::Failed));
    assert_eq!(h.fence_request(1), epoch);
    assert_eq!(fabric::fence::pending(&h), vec![(1, epoch)]);
    // Unconfirmed: node 1's frame stays in use (node 2 is not told to
    // drop its mapping, so nothing can reuse it), past the fence timeout
    // too, which is reported once.
    let mut overdue = 0;
    for _ in 0..(2 * FENCE_TIMEOUT_NS / 1000) {
        for e in rig.step(&[2]) {
            match e {
                Event::FenceOverdue { node: 1, .. } => overdue += 1,
                e => panic!("unexpected event before the fence: {e:?}"),
            }
        }
    }
    assert_eq!(overdue, 1);
    assert_eq!(nb.poll(&*rig.mem), Ok(None), "torn down without a fence");
    assert!(rig.dir.borrow().fence_pending(1));
    // An older session's confirmation is not this one's.
    h.set_fence_done(1, epoch - 1);
    assert!(rig.step(&[2]).is_empty());
    assert_eq!(nb.poll(&*rig.mem), Ok(None));
    // The fencer confirms: the request is withdrawn, node 1 torn down.
    h.set_fence_done(1, epoch);
    let ev = rig.step(&[2]);
    assert!(
        ev.iter().any(|e| matches!(
            e,
            Event::Fenced {
                node: 1,
                by_rejoin: false,
                ..
            }
        )),
        "{ev:?}"
    );
    assert_eq!(h.fence_request(1), 0);
    assert!(fabric::fence::pending(&h).is_empty());
    assert!(!rig.dir.borrow().fence_pending(1));
    assert_eq!(nb.poll(&*rig.mem), Ok(Some(Notice::DirInv(key))));
}

#[test]
fn a_failed_node_that_rejoins_answers_its_own_fence() {
    let rig = Rig::new(2);
    let (mut nb, key, epoch, _) = rig.owner_fails();
    let h = rig.h();
    assert_eq!(h.fence_request(1), epoch);
    // Node 1 comes back, finds itself failed, drops its mappings and
    // asks to rejoin: that is its fence.
    h.set_node_state(1, NodeState::Joining);
    let ev = rig.step(&[2]);
    assert!(
        ev.iter().any(|e| matches!(
            e,
            Event::Fenced {
                node: 1,
                by_rejoin: true,
                ..
            }
        )),
        "{ev:?}"
    );
    assert_eq!(h.fence_request(1), 0);
    // Torn down now; admitted once node 2 let go of its frame.
    assert_eq!(nb.poll(&*rig.mem), Ok(Some(Notice::DirInv(key))));
    assert_eq!(h.node_state(1), Some(NodeState::Joining));
    nb.ack(&*rig.mem, key, false, &mut || true).unwrap();
    rig.step(&[2]);
    rig.step(&[2]);
    assert_eq!(h.node_state(1), Some(NodeState::Up));
    assert!(h.node_epoch(1) > epoch);
}

#[test]
fn without_fencing_a_failed_node_is_torn_down_at_once() {
    let rig = Rig::new(2);
    rig.dir.borrow_mut().cfg.fencing = false;
    let (mut nb, key, _, ev) = rig.owner_fails();
    assert!(!ev.iter().any(|e| matches!(e, Event::FenceAsked { .. })));
    assert_eq!(rig.h().fence_request(1), 0);
    assert_eq!(nb.poll(&*rig.mem), Ok(Some(Notice::DirInv(key))));
}
