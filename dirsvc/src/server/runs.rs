//! Page requests in progress: the opcode each unanswered page request is
//! answered with, and runs of a file's pages in one request ([`PageRun`]):
//! a reclaim sweep's
//! INVs and an fsync's WRITEBACKs, one entry per contiguous run instead of
//! one per page.
//!
//! The page directory stays per page: each page of a run is one INV or
//! WRITEBACK handed to it under a part tag of the directory's own
//! ([`DIR_TAG`]: a node's client never uses those), and every action of
//! the run's pages is executed as one list, so the write-backs of the run
//! go to the disk as one job (its data blocks as contiguous writes, each
//! checksum-table block and inode record once: `server/writes.rs`). The
//! parts' answers come as the page directory gives them (at once, or when
//! the sharers acked and the write-back landed); the run is answered once,
//! page by page ([`RunReply`]), when its last part is.

use alloc::vec::Vec;

use alloc::collections::BTreeMap;
use core::hash::BuildHasherDefault;
use fabric::proto::{Op, PageReply, PageReq, PageRun, Response, RunKind, RunReply, DIR_TAG};
use fabric::shm::SharedMem;
use flatfs::BlockDevice;
use rustc_hash::FxHasher;

use super::Directory;

/// A run whose parts are not all answered.
#[derive(Debug)]
pub(super) struct Open {
    node: u8,
    tag: u32,
    op: Op,
    left: u64,
    reply: RunReply,
}

/// Page requests not answered yet: their opcodes, and the runs in
/// progress with their parts. Owned here; dispatch records a request
/// ([`PageRequests::asked`]), the executor's replies take its opcode
/// ([`PageRequests::answered`]), membership forgets a lost node's.
#[derive(Debug, Default)]
pub(super) struct PageRequests {
    /// Opcode of every page request not answered yet, by (node, tag)
    /// (a hash map: one insert and one remove per page request, without
    /// the allocations of a B-tree that empties and fills).
    ops: hashbrown::HashMap<(u8, u32), Op, BuildHasherDefault<FxHasher>>,
    pub(super) open: BTreeMap<u64, Open>,
    /// (node, part tag) -> (run, page index in the run).
    pub(super) parts: BTreeMap<(u8, u32), (u64, u64)>,
    next_run: u64,
    next_part: u32,
    /// Run requests served.
    served: u64,
    /// Pages they covered (the per-page requests they stand for).
    pages: u64,
}

impl PageRequests {
    /// Page requests whose answer is pending.
    pub(super) fn unanswered(&self) -> usize {
        self.ops.len()
    }

    /// `node` asked `tag` with opcode `op`.
    pub(super) fn asked(&mut self, node: u8, tag: u32, op: Op) {
        self.ops.insert((node, tag), op);
    }

    /// The opcode of `node`'s request `tag`, answered now (a page read
    /// if it is unknown).
    pub(super) fn answered(&mut self, node: u8, tag: u32) -> Op {
        self.ops.remove(&(node, tag)).unwrap_or(Op::PageRead)
    }

    /// A part tag not in use by `node`.
    fn part_tag(&mut self, node: u8) -> u32 {
        loop {
            self.next_part = self.next_part.wrapping_add(1);
            let t = DIR_TAG | self.next_part;
            if !self.parts.contains_key(&(node, t)) {
                return t;
            }
        }
    }

    /// Forget every request and run of `node` (it failed or left: nobody
    /// takes the answer).
    pub(super) fn forget_node(&mut self, node: u8) {
        self.ops.retain(|(n, _), _| *n != node);
        self.open.retain(|_, r| r.node != node);
        self.parts.retain(|(n, _), _| *n != node);
    }
}

impl<D: BlockDevice> Directory<D> {
    /// Serve run `run` of `node`'s request `tag`: every page through the
    /// page directory, their actions as one list.
    pub(super) fn page_run(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        node: u8,
        tag: u32,
        run: PageRun,
    ) {
        let id = self.requests.next_run;
        self.requests.next_run += 1;
        self.requests.served += 1;
        self.requests.pages += run.span.count;
        self.requests.open.insert(
            id,
            Open {
                node,
                tag,
                op: run.kind.op(),
                left: run.span.count,
                reply: RunReply::default(),
            },
        );
        let mut actions = Vec::new();
        for (i, (key, dirty)) in run.pages().enumerate() {
            let part = self.requests.part_tag(node);
            self.requests.parts.insert((node, part), (id, i as u64));
            let req = match run.kind {
                RunKind::Inv => PageReq::Inv { key, dirty },
                RunKind::Writeback => PageReq::Writeback { key, dirty },
            };
            actions.extend(self.pages.handle(&self.layout, node, part, req));
        }
        self.io.batch.group_next();
        self.run(mem, actions);
    }

    /// If `(node, tag)` is a part of a run, take its answer (and answer
    /// the run when it was the last); false if it is not.
    pub(super) fn run_part_answered(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        node: u8,
        tag: u32,
        reply: PageReply,
    ) -> bool {
        if tag & DIR_TAG == 0 {
            return false;
        }
        let Some((id, i)) = self.requests.parts.remove(&(node, tag)) else {
            return false;
        };
        let Some(r) = self.requests.open.get_mut(&id) else {
            return true;
        };
        if let PageReply::Done { written } = reply {
            r.reply.done |= 1 << i;
            if written {
                r.reply.written |= 1 << i;
            }
        }
        r.left = r.left.saturating_sub(1);
        if r.left > 0 {
            return true;
        }
        if let Some(r) = self.requests.open.remove(&id) {
            let d = Response::Run(r.reply).encode(r.op, r.tag);
            self.respond(mem, u32::from(r.node), d);
        }
        true
    }

    /// Run requests served and the pages they covered.
    pub fn run_stats(&self) -> (u64, u64) {
        (self.requests.served, self.requests.pages)
    }
}
