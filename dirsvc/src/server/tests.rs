//! The serving loop against a heap region, an in-memory disk and real
//! node clients.

use super::*;
use core::cell::{Cell, RefCell};
use fabric::layout::NodeState;
use fabric::proto::{DirEntry, Errno, FileKind, Notice, Request, Response, DIRENT_SIZE};
use fabric::shm::HeapShm;
use flatfs::MemDisk;
use nodepath::client::Client;

const REGION: usize = 4 << 20;

struct Rig {
    mem: HeapShm,
    layout: Layout,
    dir: RefCell<Directory<MemDisk>>,
    now: Cell<u64>,
}

impl Rig {
    fn new(nodes: u32, storage: bool) -> Rig {
        let mem = HeapShm::new(REGION);
        let layout = Layout::compute(REGION, nodes).unwrap();
        layout.format(&*mem, 0);
        let fs = storage.then(|| Fs::format(MemDisk::new(2048), 64).unwrap());
        let dir = Directory::new(
            &*mem,
            layout,
            fs,
            Config {
                heartbeat_timeout_ns: 1_000_000,
                batch: 32,
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

    /// One directory pass, as the wait closure of a client.
    fn step(&self) -> Poll {
        self.now.set(self.now.get() + 1000);
        self.dir.borrow_mut().poll(&*self.mem, self.now.get())
    }

    fn join(&self, node: u32) -> Client {
        let mut w = || {
            self.step();
            true
        };
        Client::join(&*self.mem, self.layout, node, 1, &mut w).unwrap()
    }

    fn call(&self, c: &mut Client, req: &Request) -> Result<Response, Errno> {
        let mut budget = 100;
        let mut w = || {
            self.step();
            budget -= 1;
            budget > 0
        };
        c.call(&*self.mem, req, &mut w)
    }

    /// Step the directory (beating the hearts of `alive`) until it
    /// reports `node` failed; false if it did not within `steps`.
    fn step_until_failed(&self, node: u32, alive: &[u32], steps: usize) -> bool {
        let h = Header::new(&*self.mem, self.layout);
        (0..steps).any(|_| {
            for n in alive {
                h.beat_node(*n);
            }
            self.step()
                .events
                .iter()
                .any(|e| matches!(e, Event::Failed { node: x, .. } if *x == node))
        })
    }

    fn path(&self, c: &mut Client, op: Op, p: &str) -> Result<Response, Errno> {
        let (off, _) = c.bulk(0).unwrap();
        self.mem.write(off, p.as_bytes());
        self.call(
            c,
            &Request::Path {
                op,
                slot: 0,
                at: 0,
                len: p.len() as u32,
                exclusive: false,
            },
        )
    }
}

mod appendlock;
mod daxfill;
mod deleg;
mod deliveries;
mod fencing;
mod fileinv;
mod fileread;
mod fileserver;
mod fills;
mod membership;
mod netreq;
mod ordered;
mod pages;
mod quiet;
mod runs;
mod writes;
