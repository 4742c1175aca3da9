//! Disk writes without blocking the loop: a page write-back or a
//! file-server write runs the file system in deferred mode
//! ([`flatfs::Fs::begin_deferred`]), its block writes go to the write
//! queue ([`crate::writeq`]) and out to the device as asynchronous
//! writes, and what must wait for them (the replies the page directory
//! put after a write-back, the file server's answer, an fsync) waits in
//! the queue while the loop serves everything else.
//!
//! Ordering: the file system's overlay makes every read of a block with a
//! write pending see the new bytes (file-server reads, and page fills,
//! which take the pending bytes instead of reading the device:
//! [`Directory::start_fill`]); an fsync is answered once no write of its
//! file (of any file, for a global one) waits or flies; a request served
//! synchronously that writes (namespace changes, truncation, `net` mode's
//! writes) first waits for every write in flight
//! ([`Directory::drain_writes`]), since it may write the same metadata
//! blocks. With `Config::fill_depth` 0 every write is synchronous, as
//! before.

use alloc::vec::Vec;

use crate::pagedir::Action;
use crate::writeq::{Finished, WriteStats, WRITE_ID};
use fabric::layout::Header;
use fabric::netwire::NetBulk;
use fabric::proto::{Desc, Errno, Op, Request, Response};
use fabric::shm::SharedMem;
use flatfs::{BlockDevice, Staged};

use super::reply::Via;
use super::Directory;

/// Completion ids of asynchronous device flushes (an fsync's); reads'
/// ids never carry it, writes' carry [`WRITE_ID`].
pub(super) const FLUSH_ID: u64 = 1 << 62;

/// What a write job does when its writes completed.
#[derive(Debug)]
pub(crate) enum Then {
    /// Run the page-directory actions held back behind a write-back.
    Actions(Vec<Action>),
    /// Answer a file-server request: `ok` if every write landed, else
    /// an I/O error.
    Respond {
        /// The requester.
        node: u32,
        /// Where the answer goes.
        via: Via,
        /// Its opcode.
        op: Op,
        /// Its tag.
        tag: u32,
        /// The answer when the writes landed.
        ok: Desc,
    },
    /// Answer a group of file-server writes of `node` (one or more:
    /// opcode, tag, the answer when the writes landed), in ring order.
    RespondAll {
        /// The requester.
        node: u32,
        /// Each write's opcode, tag and answer.
        answers: Vec<(Op, u32, Desc)>,
    },
}

/// File-server writes of one node to one file, served one after another
/// in one sweep of its ring, whose block writes go to the device as one
/// job: their checksum-table and inode-table blocks once, not once per
/// write ([`flatfs::Fs::coalesce_staged`]: the last bytes of a block hold
/// every earlier change). Each write was executed, and its answer (its
/// own version and size) encoded, in ring order, as alone; the answers go
/// out together once every write landed. The job keeps the file system's
/// phase order (checksums, data, records), so a crash never leaves a
/// record pointing at blocks whose checksums were not written.
#[derive(Debug)]
pub(crate) struct WriteGroup {
    node: u32,
    ino: u64,
    staged: Vec<Staged>,
    answers: Vec<(Op, u32, Desc)>,
}

/// The write-backs of the page requests of one node served in one sweep
/// (runs, INVs, WRITEBACKs): one job, so each checksum-table block and
/// inode record they share is written once, and contiguous data blocks
/// of several requests go together. The replies held behind them go out
/// when the job landed; it is queued before any other request is served
/// and at the end of the sweep, as [`WriteGroup`].
#[derive(Debug, Default)]
pub(crate) struct PageGroup {
    inos: Vec<u64>,
    staged: Vec<Staged>,
    replies: Vec<Action>,
}

/// Fsyncs waiting for their files' writes, and those whose device flush
/// is in flight. Owned here (the write path answers them); the disk
/// queue's pump asks how many flushes hold a slot of the device.
#[derive(Debug, Default)]
pub(super) struct Fsyncs {
    /// Fsyncs waiting for their files' writes.
    waiting: Vec<WaitingFsync>,
    /// Fsyncs whose device flush is in flight, by completion id.
    flushing: Vec<(u64, WaitingFsync)>,
    /// The next flush's id (below [`FLUSH_ID`]).
    next_flush: u64,
    /// Fsyncs answered after an asynchronous flush.
    flushes_async: u64,
}

impl Fsyncs {
    /// Device flushes in flight (each holds a slot of the device's queue).
    pub(super) fn flushes_in_flight(&self) -> usize {
        self.flushing.len()
    }

    /// No fsync waits for writes or for its flush.
    pub(super) fn is_idle(&self) -> bool {
        self.waiting.is_empty() && self.flushing.is_empty()
    }

    /// Fsyncs waiting, for writes or for their flush.
    pub(super) fn len(&self) -> usize {
        self.waiting.len() + self.flushing.len()
    }
}

/// The writes of the request being served and of this sweep, not queued
/// yet. Owned here; dispatch and the `net` path bracket a request whose
/// writes may be deferred ([`Batch::begin`], [`Batch::end`]), the file
/// server stages into it, the executor and runs mark a page request's
/// write-backs for the sweep's page group.
#[derive(Debug, Default)]
pub(super) struct Batch {
    /// Set while a request whose writes may be deferred runs
    /// ([`Directory::execute`] stages them in `staged`).
    defer: bool,
    /// Writes the last deferred request staged.
    staged: Vec<Staged>,
    /// Consecutive file-server writes of one node to one file in this
    /// sweep, not queued yet: they go to the device as one job.
    write_group: Option<WriteGroup>,
    /// The write-backs of this sweep's page requests, not queued yet:
    /// one job for the sweep.
    page_group: Option<PageGroup>,
    /// Set while a page request's actions run: their write-backs join
    /// `page_group`.
    group_pages: bool,
}

impl Batch {
    /// A request starts; its writes are staged if `defer`.
    pub(super) fn begin(&mut self, defer: bool) {
        self.defer = defer;
    }

    /// The request ended: what it staged.
    pub(super) fn end(&mut self) -> Vec<Staged> {
        self.defer = false;
        core::mem::take(&mut self.staged)
    }

    /// Are the running request's writes staged?
    pub(super) fn defers(&self) -> bool {
        self.defer
    }

    /// Stage block writes of the running request.
    pub(super) fn stage(&mut self, staged: Vec<Staged>) {
        self.staged.extend(staged);
    }

    /// The next action list run is a page request's: its write-backs
    /// join the sweep's page group.
    pub(super) fn group_next(&mut self) {
        self.group_pages = true;
    }

    /// Does the action list starting now group its write-backs (and no
    /// list it runs in turn)?
    pub(super) fn take_grouping(&mut self) -> bool {
        core::mem::take(&mut self.group_pages)
    }
}

/// An fsync waiting for its file's writes.
#[derive(Debug, Clone, Copy)]
pub(super) struct WaitingFsync {
    pub node: u32,
    pub via: Via,
    pub op: Op,
    pub tag: u32,
    pub ino: u64,
}

impl<D: BlockDevice> Directory<D> {
    /// Do writes go to the device asynchronously (an asynchronous device,
    /// and `Config::fill_depth` above 0)?
    pub fn async_writes(&self) -> bool {
        self.fill_depth() > 0
    }

    /// The write queue's counters.
    pub fn write_stats(&self) -> WriteStats {
        self.io.writes.stats()
    }

    /// Fsyncs whose device flush completed without blocking the loop.
    pub fn async_flushes(&self) -> u64 {
        self.io.fsyncs.flushes_async
    }

    /// The write queue and the sweep's open groups hold
    /// `Config::write_backlog_max` block writes or more: new requests wait
    /// (counted in the write statistics). The ring path checks it before
    /// each request it takes; `net` mode's links before they read more.
    pub fn write_backlogged(&mut self) -> bool {
        let full = self.write_queue_full();
        if full {
            self.io.writes.count_throttled();
        }
        full
    }

    /// Does the write queue, with the sweep's open groups, hold its limit
    /// of block writes (`Config::write_backlog_max`)?
    pub(super) fn write_queue_full(&self) -> bool {
        // The sweep's open groups count too: a sweep of 32 page runs of 32
        // pages is 1,024 writes before its group is queued.
        let b = &self.io.batch;
        let grouped = b.page_group.as_ref().map_or(0, |g| g.staged.len())
            + b.write_group.as_ref().map_or(0, |g| g.staged.len());
        let held = self.io.writes.held_blocks() + grouped;
        held >= self.cfg.write_backlog_max.max(1)
    }

    /// Write jobs waiting or in flight.
    pub fn writes_pending(&self) -> usize {
        self.io.writes.jobs()
    }

    /// Disk requests of any kind waiting or in flight (fills, writes,
    /// fsyncs waiting for writes or for their device flush).
    pub fn io_pending(&self) -> usize {
        self.fills_pending() + self.io.writes.jobs() + self.io.fsyncs.len()
    }

    /// Queue the deferred writes `staged` of files `inos`, and what to do
    /// when they completed; submit what the device has room for.
    pub(super) fn queue_writes(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        inos: Vec<u64>,
        staged: Vec<Staged>,
        then: Then,
    ) {
        self.queue_job(mem, inos, staged, then, false);
    }

    /// As [`Directory::queue_writes`], for a namespace change or a
    /// truncation: a barrier job, ordered against every other job (it
    /// allocates or frees blocks; see [`crate::writeq`]).
    pub(super) fn queue_barrier(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        inos: Vec<u64>,
        staged: Vec<Staged>,
        then: Then,
    ) {
        self.queue_job(mem, inos, staged, then, true);
    }

    fn queue_job(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        inos: Vec<u64>,
        staged: Vec<Staged>,
        then: Then,
        barrier: bool,
    ) {
        let Some(fs) = self.fs.as_mut() else {
            return;
        };
        let writes = fs
            .coalesce_staged(staged)
            .into_iter()
            .map(|s| (fs.write_phase(s.lba), s.lba, s.buf))
            .collect();
        if barrier {
            self.io.writes.push_barrier(inos, writes, then);
        } else {
            self.io.writes.push(inos, writes, then);
        }
        let mut acts = Vec::new();
        self.pump(mem, &mut acts);
        if !acts.is_empty() {
            self.run(mem, acts);
        }
    }

    /// A file-server write of `node` to `ino` staged `staged` and answers
    /// `ok` once they land: it joins the open group if that is of the
    /// same node and file (else the group goes to the queue and this
    /// write opens the next one). [`Directory::flush_write_group`] queues
    /// the group before anything else is served.
    pub(super) fn group_write(
        &mut self,
        node: u32,
        ino: u64,
        staged: Vec<Staged>,
        answer: (Op, u32, Desc),
        mem: &(impl SharedMem + ?Sized),
    ) {
        match self.io.batch.write_group.as_mut() {
            Some(g) if g.node == node && g.ino == ino => {
                g.staged.extend(staged);
                g.answers.push(answer);
                self.io.writes.count_grouped();
            }
            _ => {
                self.flush_write_group(mem);
                self.io.batch.write_group = Some(WriteGroup {
                    node,
                    ino,
                    staged,
                    answers: alloc::vec![answer],
                });
            }
        }
    }

    /// Write-backs of a page request (files `inos`, staged writes, the
    /// replies held behind them): into the sweep's page group if the
    /// request is served for it (`grouping`), else one job now.
    pub(super) fn held_write_backs(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        grouping: bool,
        (inos, staged, replies): (Vec<u64>, Vec<Staged>, Vec<Action>),
    ) {
        if !grouping {
            self.queue_writes(mem, inos, staged, Then::Actions(replies));
            return;
        }
        let g = self
            .io
            .batch
            .page_group
            .get_or_insert_with(PageGroup::default);
        for i in inos {
            if !g.inos.contains(&i) {
                g.inos.push(i);
            }
        }
        g.staged.extend(staged);
        g.replies.extend(replies);
    }

    /// May `req` of `node` be served with the open groups left open: a
    /// file-server write of the open write group's node and file, or a
    /// page request while no write group is open (the page group is
    /// the sweep's, of this node)?
    pub(super) fn extends_write_group(&self, node: u32, req: &Request) -> bool {
        if matches!(req, Request::Page(_) | Request::PageRun(_)) {
            return self.io.batch.write_group.is_none();
        }
        if self.io.batch.page_group.is_some() {
            return false;
        }
        match (self.io.batch.write_group.as_ref(), req) {
            (
                Some(g),
                Request::Data {
                    op: Op::Write, ino, ..
                },
            ) => g.node == node && g.ino == *ino,
            _ => false,
        }
    }

    /// Queue the open write group as one job (before any other request is
    /// served: a request served synchronously, an fsync or a read must
    /// find its writes in the queue).
    pub(super) fn flush_write_group(&mut self, mem: &(impl SharedMem + ?Sized)) {
        if let Some(g) = self.io.batch.page_group.take() {
            self.queue_writes(mem, g.inos, g.staged, Then::Actions(g.replies));
        }
        if let Some(g) = self.io.batch.write_group.take() {
            let then = Then::RespondAll {
                node: g.node,
                answers: g.answers,
            };
            self.queue_writes(mem, alloc::vec![g.ino], g.staged, then);
        }
    }

    /// A write completed: tell the file system, so reads go back to the
    /// device once the block's last pending write landed.
    pub(super) fn write_done(&mut self, id: u64, ok: bool) {
        let lbas = self.io.writes.complete_run(id, ok);
        let Some(fs) = self.fs.as_mut() else {
            return;
        };
        for lba in lbas {
            if ok {
                fs.write_landed(lba);
            } else {
                fs.write_failed(lba);
            }
        }
        for lba in self.io.writes.take_skipped() {
            fs.write_skipped(lba);
        }
    }

    /// Run what finished write jobs were holding, then the fsyncs whose
    /// writes are done.
    pub(super) fn after_writes(&mut self, mem: &(impl SharedMem + ?Sized)) {
        loop {
            let finished = self.io.writes.take_finished();
            if finished.is_empty() {
                break;
            }
            for Finished { inos, failed, then } in finished {
                if failed {
                    log::warn!("disk: a write of inode(s) {inos:?} failed");
                }
                match then {
                    Then::Actions(a) => self.run(mem, a),
                    Then::Respond {
                        node,
                        via,
                        op,
                        tag,
                        ok,
                    } => {
                        let d = if failed {
                            Response::Err(Errno::Io).encode(op, tag)
                        } else {
                            ok
                        };
                        self.answer_via(mem, node, via, d, Vec::new());
                    }
                    Then::RespondAll { node, answers } => {
                        for (op, tag, ok) in answers {
                            let d = if failed {
                                Response::Err(Errno::Io).encode(op, tag)
                            } else {
                                ok
                            };
                            self.respond(mem, node, d);
                        }
                    }
                }
            }
        }
        self.continue_settling(mem);
        let mut i = 0;
        while i < self.io.fsyncs.waiting.len() {
            let f = self.io.fsyncs.waiting[i];
            if self.fsync_busy(f.ino) {
                i += 1;
                continue;
            }
            self.io.fsyncs.waiting.remove(i);
            self.answer_fsync(mem, f);
        }
    }

    /// Answer an fsync (its writes are done): once its device flush, started
    /// now, completed; synchronously if it could not be started.
    fn answer_fsync(&mut self, mem: &(impl SharedMem + ?Sized), f: WaitingFsync) {
        if self.start_flush(f) {
            return;
        }
        // An fsync names no slot: no bulk data either way.
        let mut bulk = NetBulk::new();
        let resp = self
            .execute(mem, &mut bulk, Request::Fsync { ino: f.ino })
            .unwrap_or_else(Response::Err);
        self.answer_via(mem, f.node, f.via, resp.encode(f.op, f.tag), Vec::new());
    }

    /// An fsync (from the rings, or `net` mode's link): once no write of
    /// its file waits or flies, its device flush goes out without waiting
    /// and the answer follows the flush's completion by `via`
    /// ([`Directory::flush_done`]). True if it was deferred; false: the
    /// caller answers it synchronously (no asynchronous flush here).
    pub(super) fn defer_fsync(
        &mut self,
        node: u32,
        via: Via,
        op: Op,
        tag: u32,
        req: &Request,
    ) -> bool {
        let Request::Fsync { ino } = *req else {
            return false;
        };
        let f = WaitingFsync {
            node,
            via,
            op,
            tag,
            ino,
        };
        if !self.fsync_busy(ino) {
            return self.start_flush(f);
        }
        self.io.fsyncs.waiting.push(f);
        true
    }

    /// Must an fsync of `ino` (0: a sync) still wait: a write of its file
    /// (of any) waits or flies, or its size is still being settled?
    fn fsync_busy(&self, ino: u64) -> bool {
        self.io.writes.busy((ino != 0).then_some(ino)) || self.sizes.settling(ino)
    }

    /// Start fsync `f`'s device flush without waiting (it covers every
    /// write completed before it); false if the device has no room or no
    /// asynchronous flush (or the directory is synchronous).
    fn start_flush(&mut self, f: WaitingFsync) -> bool {
        if self.io.depth == 0 {
            return false;
        }
        let id = FLUSH_ID | (self.io.fsyncs.next_flush & !(WRITE_ID | FLUSH_ID));
        let Some(fs) = self.fs.as_mut() else {
            return false;
        };
        if fs.device_mut().submit_flush(id).is_err() {
            return false;
        }
        self.io.fsyncs.next_flush += 1;
        self.io.fsyncs.flushing.push((id, f));
        true
    }

    /// The device flush `id` completed: answer its fsync.
    pub(super) fn flush_done(&mut self, mem: &(impl SharedMem + ?Sized), id: u64, ok: bool) {
        let Some(i) = self.io.fsyncs.flushing.iter().position(|(x, _)| *x == id) else {
            return;
        };
        let (_, f) = self.io.fsyncs.flushing.remove(i);
        self.io.fsyncs.flushes_async += 1;
        let r = if ok {
            Response::Ok
        } else {
            log::warn!("disk: a flush failed (fsync of inode {})", f.ino);
            Response::Err(Errno::Io)
        };
        self.answer_via(mem, f.node, f.via, r.encode(f.op, f.tag), Vec::new());
    }

    /// Wait (bounded by the device's own timeout per request) until no
    /// write job of `ino` (`None`: of any file) waits or flies, running
    /// what the finished ones held. The wait covers what is queued now:
    /// files being settled start no new batch meanwhile (they go on
    /// after it), so a drain lasts at most the write queue's bound. The
    /// directory beats while it waits: it is alive, only busy.
    pub(super) fn drain_writes(&mut self, mem: &(impl SharedMem + ?Sized), ino: Option<u64>) {
        if !self.io.writes.busy(ino) {
            self.after_writes(mem);
            return;
        }
        self.io.writes.count_barrier();
        self.sizes.pause_settling();
        let mut rounds = 0usize;
        while self.io.writes.busy(ino) {
            rounds += 1;
            Header::new(mem, self.layout).beat_dir();
            let mut acts = Vec::new();
            self.pump(mem, &mut acts);
            if !acts.is_empty() {
                self.run(mem, acts);
            }
            let mut done = Vec::new();
            if let Some(fs) = self.fs.as_mut() {
                fs.device_mut().wait_reads(&mut done);
            }
            if done.is_empty() && rounds > 1_000_000 {
                log::error!("disk: writes in flight never complete; going on without them");
                break;
            }
            self.finish_io(mem, done);
        }
        self.sizes.resume_settling();
        self.after_writes(mem);
    }

    /// `node` failed or left: its waiting fsyncs are dropped (the writes
    /// themselves still land).
    pub(super) fn cancel_fsyncs(&mut self, node: u32) {
        self.io.fsyncs.waiting.retain(|f| f.node != node);
        // Its flushes in flight complete unanswered.
        for (_, f) in self
            .io
            .fsyncs
            .flushing
            .iter_mut()
            .filter(|(_, f)| f.node == node)
        {
            f.node = 0;
        }
    }
}
