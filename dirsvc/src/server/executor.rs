//! The action executor: runs the page directory's [`Action`]s (replies,
//! fills from disk, write-backs, DIR_INVs, export bits) against the shared
//! region and the file system.
//!
//! A write-back comes before the reply that follows it in the same action
//! list. With asynchronous writes, the write-back's block writes go to the
//! write queue and every reply after the first such write-back in the list
//! is held in the same job, sent when the writes landed (see
//! `server/writes.rs`); the other actions run at once (the frame's bytes
//! were copied when the writes were staged).

use alloc::collections::VecDeque;
use alloc::vec;
use alloc::vec::Vec;

use crate::pagedir::Action;
use fabric::layout::Header;
use fabric::proto::{DelegList, Errno, Notice, PageKey, Response};
use fabric::shm::SharedMem;
use fabric::PAGE_SIZE;
use flatfs::BlockDevice;

use super::{writeback, Directory};
use flatfs::Staged;

/// Staged writes of one action list's write-backs past which their
/// repeated checksum-table and record blocks are dropped as they come
/// (each page write-back stages its data block, the table block and the
/// record: three blocks held per page, where one is new).
const DEDUP_MIN: usize = 96;

impl<D: BlockDevice> Directory<D> {
    /// Execute page-directory actions (which may produce more).
    pub(super) fn run(&mut self, mem: &(impl SharedMem + ?Sized), actions: Vec<Action>) {
        // Only this call's own write-backs join the sweep's page group,
        // not those of actions it runs in turn.
        let grouping = self.io.batch.take_grouping();
        let mut queue: VecDeque<Action> = actions.into();
        let mut more = Vec::new();
        // Write-backs gone asynchronous in this list: their files, their
        // staged writes, and the replies held behind them.
        let mut held: Option<(Vec<u64>, Vec<Staged>, Vec<Action>)> = None;
        let mut dedup_at = DEDUP_MIN;
        loop {
            let Some(a) = queue.pop_front() else {
                // Fills that finished at once, or failed to start.
                self.pump(mem, &mut more);
                if more.is_empty() {
                    break;
                }
                queue.extend(more.drain(..));
                continue;
            };
            log::debug!("page action {a:?}");
            match a {
                Action::Reply { .. } if held.is_some() => {
                    if let Some(h) = held.as_mut() {
                        h.2.push(a);
                    }
                }
                Action::Reply { node, tag, reply } => self.reply(mem, node, tag, reply),
                Action::Fill { key, gfn } => {
                    self.start_fill(mem, key, gfn, &mut more);
                    queue.extend(more.drain(..));
                }
                Action::WriteBack { key, gfn } => {
                    // The write-backs of the next pages of the file that
                    // follow (replies between them) go as one write.
                    let (frames, between) = writeback::take_run(&mut queue, key, gfn);
                    let staged = self.write_back_run(mem, key, &frames);
                    if !staged.is_empty() {
                        let h = held.get_or_insert_with(Default::default);
                        if !h.0.contains(&key.ino) {
                            h.0.push(key.ino);
                        }
                        h.1.extend(staged);
                        if h.1.len() >= dedup_at {
                            // Many write-backs (a failed owner's pages):
                            // their shared checksum and record blocks once.
                            if let Some(fs) = self.fs.as_mut() {
                                h.1 = fs.dedup_staged(core::mem::take(&mut h.1));
                            }
                            dedup_at = h.1.len().saturating_mul(2).max(DEDUP_MIN);
                        }
                    }
                    // The replies between them are held behind the
                    // write, as each was behind its own page's; the
                    // export bits change after the frames were read.
                    for a in between.into_iter().rev() {
                        queue.push_front(a);
                    }
                }
                Action::Invalidate { node, key } => self.invalidate(node, key),
                Action::InvalidateRange { node, span } => self.invalidate_range(node, span),
                Action::Recall { node, range } => {
                    self.links
                        .notify(node.into(), Notice::Recall(range).encode());
                }
                Action::ReadList { node, range, gfn } => {
                    let pages = self.layout.frame_off(gfn).and_then(|off| {
                        let mut list = vec![0u8; PAGE_SIZE];
                        mem.read(off, &mut list);
                        DelegList::decode(range, &list).ok()
                    });
                    let a = self
                        .pages
                        .list_read(&self.layout, node, range, pages.as_deref());
                    queue.extend(a);
                }
                Action::Export { gfn, on } => {
                    Header::new(mem, self.layout).set_exported(gfn, on);
                    if !on {
                        self.frame_unexported(mem, gfn);
                    }
                }
            }
        }
        if let Some(h) = held {
            self.held_write_backs(mem, grouping, h);
        }
        // Deliver what was queued for every node right away.
        for n in 1..=self.layout.max_nodes {
            if self.members.is_member(n) {
                let _ = self.flush(mem, n);
            }
        }
    }

    /// Answer page request `tag` of `node` with `reply` (now, or behind
    /// its earlier answers).
    pub(super) fn reply(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        node: u8,
        tag: u32,
        reply: fabric::proto::PageReply,
    ) {
        if self.run_part_answered(mem, node, tag, reply) {
            return;
        }
        let op = self.requests.answered(node, tag);
        let d = Response::Page(reply).encode(op, tag);
        self.respond(mem, node as u32, d);
    }

    /// Fill pool frame `gfn` with page `key` from disk (zeros past the end
    /// of the file): a miss filled by the directory, or the owner's frame
    /// refreshed after a write through the storage server.
    pub(super) fn load_frame(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        key: PageKey,
        gfn: u64,
    ) -> Result<(), Errno> {
        let off = self.layout.frame_off(gfn).ok_or(Errno::Invalid)?;
        let fs = self.fs.as_mut().ok_or(Errno::Unavailable)?;
        // The page index comes from the region: never let it wrap.
        let start = key
            .idx
            .checked_mul(PAGE_SIZE as u64)
            .ok_or(Errno::Invalid)?;
        let mut page = vec![0u8; PAGE_SIZE];
        fs.read(key.ino, start, &mut page)?;
        mem.write(off, &page);
        Ok(())
    }

    /// Copy the part of `data` (written at file offset `at`) that falls in
    /// page `idx` into frame `gfn`, which holds that page.
    pub(super) fn patch_frame(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        gfn: u64,
        idx: u64,
        at: u64,
        data: &[u8],
    ) -> Result<(), Errno> {
        let off = self.layout.frame_off(gfn).ok_or(Errno::Invalid)?;
        let page = PAGE_SIZE as u64;
        let start = idx.checked_mul(page).ok_or(Errno::Invalid)?;
        let end = at.checked_add(data.len() as u64).ok_or(Errno::Invalid)?;
        let (lo, hi) = (at.max(start), end.min(start + page));
        if lo >= hi {
            return Ok(());
        }
        let src = data
            .get((lo - at) as usize..(hi - at) as usize)
            .ok_or(Errno::Invalid)?;
        mem.write(off + (lo - start) as usize, src);
        Ok(())
    }
}
