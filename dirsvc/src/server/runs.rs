//! Runs of a file's pages in one request ([`PageRun`]): a reclaim sweep's
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
use fabric::proto::{Op, PageReply, PageReq, PageRun, Response, RunKind, RunReply, DIR_TAG};
use fabric::shm::SharedMem;
use flatfs::BlockDevice;

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

/// Runs in progress and their parts.
#[derive(Debug, Default)]
pub(super) struct Runs {
    pub(super) open: BTreeMap<u64, Open>,
    /// (node, part tag) -> (run, page index in the run).
    pub(super) parts: BTreeMap<(u8, u32), (u64, u64)>,
    next_run: u64,
    next_part: u32,
    /// Run requests served.
    pub requests: u64,
    /// Pages they covered (the per-page requests they stand for).
    pub pages: u64,
}

impl Runs {
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

    /// Forget every run of `node` (it failed or left: nobody takes the
    /// answer).
    pub(super) fn forget_node(&mut self, node: u8) {
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
        let id = self.runs.next_run;
        self.runs.next_run += 1;
        self.runs.requests += 1;
        self.runs.pages += run.span.count;
        self.runs.open.insert(
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
            let part = self.runs.part_tag(node);
            self.runs.parts.insert((node, part), (id, i as u64));
            let req = match run.kind {
                RunKind::Inv => PageReq::Inv { key, dirty },
                RunKind::Writeback => PageReq::Writeback { key, dirty },
            };
            actions.extend(self.pages.handle(&self.layout, node, part, req));
        }
        self.group_pages = true;
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
        let Some((id, i)) = self.runs.parts.remove(&(node, tag)) else {
            return false;
        };
        let Some(r) = self.runs.open.get_mut(&id) else {
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
        if let Some(r) = self.runs.open.remove(&id) {
            let d = Response::Run(r.reply).encode(r.op, r.tag);
            self.respond(mem, u32::from(r.node), d);
        }
        true
    }

    /// Run requests served and the pages they covered.
    pub fn run_stats(&self) -> (u64, u64) {
        (self.runs.requests, self.runs.pages)
    }
}
