//! Page fills from disk without blocking the loop: a READ miss's fill goes
//! to the disk queue ([`crate::diskq`]) and out to the device as an
//! asynchronous read; [`Directory::poll_disk`] (called at the start of every
//! [`Directory::serve`]) takes the completions, checks each block against
//! its checksum, copies it into the requester's frame and commits the page.
//! With a synchronous device (queue depth 0) or `Config::fill_depth` 0 the
//! fill is done on the spot, as before.
//!
//! Ordering (see [`crate::diskq`]): a file-server request that changes a
//! file's blocks first waits for the fills of that file in flight
//! ([`Directory::order_before`]); a fill of a block with a write pending
//! takes the write's bytes instead of reading the device (see
//! `server/writes.rs`). Fills and writes share the device's queue:
//! [`Directory::pump`] submits them alternately while there is room.

use alloc::boxed::Box;
use alloc::vec::Vec;

use crate::diskq::{Dest, Fill};
use crate::pagedir::{Action, Phase};
use crate::writeq::WRITE_ID;
use fabric::proto::{MissKind, Op, PageKey, Request};
use fabric::shm::SharedMem;
use fabric::PAGE_SIZE;
use flatfs::{BlockDevice, BlockSource, IoError, ReadDone, BLOCK_SIZE};

use super::Directory;

impl<D: BlockDevice> Directory<D> {
    /// Reads the device keeps in flight for fills (0: fills are
    /// synchronous).
    pub fn fill_depth(&self) -> usize {
        if self.fs.is_some() {
            self.io.depth
        } else {
            0
        }
    }

    /// Fills (and file-read blocks) waiting for the device or in flight.
    pub fn fills_pending(&self) -> usize {
        self.io.disk.in_flight() + self.io.disk.waiting()
    }

    /// The disk queue's counters.
    pub fn disk_queue_stats(&self) -> crate::diskq::QueueStats {
        self.io.disk.stats()
    }

    /// Start the fill of `key` into `gfn` (an [`Action::Fill`]); actions it
    /// finishes at once (a synchronous fill, a page past the end of the
    /// file, an error) go to `out`.
    pub(super) fn start_fill(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        key: PageKey,
        gfn: u64,
        out: &mut Vec<Action>,
    ) {
        if self.fill_depth() == 0 {
            let ok = self.load_frame(mem, key, gfn).is_ok();
            out.extend(self.pages.filled(key, ok));
            return;
        }
        let Some(e) = self.pages.entry(&key) else {
            return;
        };
        let Phase::Exclusive { by_dir: true, tag } = e.phase else {
            return;
        };
        let (Some(fs), Some(off)) = (self.fs.as_ref(), self.layout.frame_off(gfn)) else {
            out.extend(self.pages.filled(key, false));
            return;
        };
        match fs.block_source(key.ino, key.idx) {
            Ok(BlockSource::Zeros) => {
                mem.write(off, &[0u8; PAGE_SIZE]);
                out.extend(self.pages.filled(key, true));
            }
            // A block with a write pending is filled from its bytes.
            Ok(BlockSource::Disk { lba, len }) => match self.pending_page(lba, len) {
                Some(page) => {
                    mem.write(off, &page);
                    out.extend(self.pages.filled(key, true));
                }
                None => {
                    self.counters
                        .miss
                        .fill_queued(MissKind::PageFill, e.owner, tag);
                    let arg = fabric::trace::key_arg(key.ino, key.idx);
                    fabric::trace::record(
                        fabric::trace::Kind::DiskStart,
                        e.owner.into(),
                        tag,
                        0,
                        arg,
                    );
                    self.io.disk.push(Fill {
                        key,
                        dest: Dest::Frame(gfn),
                        node: e.owner,
                        tag,
                        lba,
                        len,
                    });
                }
            },
            Err(e) => {
                // The reader is told `IoError` (a removed file: NotFound).
                log::info!("fill of {key:?}: {e:?}");
                out.extend(self.pages.filled(key, false));
            }
        }
    }

    /// The bytes of device block `lba` (`len` of them file data, zeros
    /// after) if a write of it is pending: they are the file's, the
    /// device may still hold older ones. Counted as a fill from pending.
    pub(super) fn pending_page(&mut self, lba: u64, len: usize) -> Option<[u8; PAGE_SIZE]> {
        let mut page = *self.fs.as_ref()?.pending_block(lba)?;
        page[len.min(PAGE_SIZE)..].fill(0);
        self.io.writes.count_fill_from_pending();
        Some(page)
    }

    /// The completed read `result` of fill `f` (a page fill's or a
    /// file read's block): its bytes checked against the block's checksum,
    /// zeros past the file's data; `None` for a device error (logged) or
    /// a mismatch (logged by the file system).
    pub(super) fn checked_block(
        &mut self,
        f: &Fill,
        result: Result<Box<[u8; BLOCK_SIZE]>, IoError>,
    ) -> Option<Box<[u8; BLOCK_SIZE]>> {
        let Ok(mut blk) = result else {
            let what = match f.dest {
                Dest::Frame(_) => "page fill",
                Dest::Read(_) => "file read",
            };
            log::warn!("{what} of {:?}: disk read of block {} failed", f.key, f.lba);
            return None;
        };
        let fs = self.fs.as_mut()?;
        fs.check_block(f.key.ino, f.key.idx, f.lba, &mut blk).ok()?;
        blk[f.len.min(PAGE_SIZE)..].fill(0);
        Some(blk)
    }

    /// Submit waiting fills and writes, one of each in turn, while fewer
    /// than `fill_depth` requests are in flight (device flushes, an
    /// fsync's, included: each holds a slot of the device's queue too); a
    /// read the device refuses fails its page fill (actions to `out`) or
    /// its file read (answered `Io` once its other blocks are in), a
    /// refused write fails its job.
    pub(super) fn pump(&mut self, mem: &(impl SharedMem + ?Sized), out: &mut Vec<Action>) {
        let room = |d: &Self| {
            d.io.disk.in_flight() + d.io.writes.in_flight() + d.io.fsyncs.flushes_in_flight()
                < d.io.depth
        };
        loop {
            let mut moved = false;
            if room(self) {
                if let Some((id, lba)) = self.io.disk.next_submit() {
                    moved = true;
                    let ok = self
                        .fs
                        .as_mut()
                        .is_some_and(|fs| fs.device_mut().submit_read(id, lba).is_ok());
                    if !ok {
                        match self.io.disk.submit_failed(id) {
                            Some(
                                f @ Fill {
                                    dest: Dest::Read(_),
                                    ..
                                },
                            ) => {
                                log::warn!(
                                    "file read of ino {} block {}: the disk refused the read",
                                    f.key.ino,
                                    f.key.idx
                                );
                                let seen = self.counters.miss.now();
                                self.read_block_done(mem, &f, Err(IoError), seen);
                            }
                            Some(f) => {
                                log::warn!("page fill of {:?}: the disk refused the read", f.key);
                                out.extend(self.pages.filled(f.key, false));
                            }
                            None => {}
                        }
                    }
                }
            }
            if room(self) {
                // Contiguous blocks ready together go as one request, as
                // long as the device takes.
                let max = self
                    .fs
                    .as_mut()
                    .map_or(1, |fs| fs.device_mut().max_write_run());
                if let Some((id, lba, bufs)) = self.io.writes.next_submit_run(max) {
                    moved = true;
                    let n = bufs.len();
                    let ok = self
                        .fs
                        .as_mut()
                        .is_some_and(|fs| fs.device_mut().submit_write_run(id, lba, bufs).is_ok());
                    if !ok {
                        log::warn!("disk: the device refused the write of {n} block(s) from {lba}");
                        self.write_done(id, false);
                    }
                }
            }
            if !moved {
                return;
            }
        }
    }

    /// Take the fills the device finished and commit them (answers go out
    /// with the next flush). Returns how many completions were taken.
    pub fn poll_disk(&mut self, mem: &(impl SharedMem + ?Sized)) -> usize {
        if self.io.disk.is_idle() && self.io.writes.is_idle() && self.io.fsyncs.is_idle() {
            return 0;
        }
        let mut done = Vec::new();
        if let Some(fs) = self.fs.as_mut() {
            fs.device_mut().poll_reads(&mut done);
        }
        let n = done.len();
        self.finish_io(mem, done);
        n
    }

    /// Take completed requests: writes to the write queue (and what their
    /// jobs held), reads to their fills; then refill the device.
    pub(super) fn finish_io(&mut self, mem: &(impl SharedMem + ?Sized), done: Vec<ReadDone>) {
        let (writes, reads): (Vec<ReadDone>, Vec<ReadDone>) =
            done.into_iter().partition(|d| d.id & WRITE_ID != 0);
        let (flushes, reads): (Vec<ReadDone>, Vec<ReadDone>) = reads
            .into_iter()
            .partition(|d| d.id & super::writes::FLUSH_ID != 0);
        for w in writes {
            self.write_done(w.id, w.result.is_ok());
        }
        for f in flushes {
            self.flush_done(mem, f.id, f.result.is_ok());
        }
        self.finish_reads(mem, reads);
        self.after_writes(mem);
    }

    /// Commit completed reads, then refill the device.
    fn finish_reads(&mut self, mem: &(impl SharedMem + ?Sized), done: Vec<ReadDone>) {
        let seen = self.counters.miss.now();
        let mut acts = Vec::new();
        let mut filled = Vec::new();
        for d in done {
            let Some(f) = self.io.disk.complete(d.id) else {
                continue; // cancelled: the requester failed meanwhile
            };
            let arg = fabric::trace::key_arg(f.key.ino, f.key.idx);
            fabric::trace::record(fabric::trace::Kind::DiskDone, f.node.into(), f.tag, 0, arg);
            let Dest::Frame(gfn) = f.dest else {
                self.read_block_done(mem, &f, d.result, seen);
                continue;
            };
            if !f.wanted(self.pages.entry(&f.key)) {
                self.counters.miss.fill_done(f.node, f.tag, seen, false);
                continue;
            }
            let ok = if self.pages.fill_is_stale(&f.key) {
                // Its block changed while it flew: not checked, not
                // copied; the reader is told to retry (`filled`).
                self.io.disk.count_stale();
                false
            } else {
                match self.layout.frame_off(gfn) {
                    Some(off) => self
                        .checked_block(&f, d.result)
                        .map(|blk| mem.write(off, &blk[..]))
                        .is_some(),
                    None => false,
                }
            };
            self.counters.miss.fill_done(f.node, f.tag, seen, ok);
            // The commit's reply goes out at once (nothing it answers
            // waits behind a write-back), not through `run`.
            for a in self.pages.filled(f.key, ok) {
                match a {
                    Action::Reply { node, tag, reply } => self.reply(mem, node, tag, reply),
                    a => acts.push(a),
                }
            }
            filled.push(f.key);
        }
        self.pump(mem, &mut acts);
        if !acts.is_empty() {
            self.run(mem, acts);
        }
        self.counters.miss.fills_answered();
        // Requests that waited for a fill may now map the page: its new
        // owner learns the sharer count (it started at 0).
        // One page lookup each: most filled pages have no sharer yet.
        for key in filled {
            if let Some((owner, count)) = self.sharer_view(&key).filter(|v| v.1 != 0) {
                self.notify_sharers(mem, owner, key, count);
            }
        }
    }

    /// Wait (bounded by the device's own timeout per read) until no fill
    /// of `ino` (`None`: of any file) waits or flies.
    pub(super) fn drain_fills(&mut self, mem: &(impl SharedMem + ?Sized), ino: Option<u64>) {
        self.drain_reads_while(mem, |d: &Self| match ino {
            Some(i) => d.io.disk.busy_ino(i),
            None => !d.io.disk.is_idle(),
        });
    }

    /// Wait (bounded as [`Directory::drain_fills`]) until no file-read
    /// block of `ino` (`private` mode's asynchronous file-server reads)
    /// waits or flies; page fills go on (a change of their blocks makes
    /// them stale instead: [`crate::pagedir::PageDir::stale_fills`]).
    pub(super) fn drain_file_reads(&mut self, mem: &(impl SharedMem + ?Sized), ino: u64) {
        self.drain_reads_while(mem, |d: &Self| d.io.disk.busy_ino_reads(ino));
    }

    fn drain_reads_while(&mut self, mem: &(impl SharedMem + ?Sized), busy: impl Fn(&Self) -> bool) {
        if !busy(self) {
            return;
        }
        self.io.disk.count_barrier();
        // Each round completes at least one read in flight (the device
        // answers or times out) or starts one, so this ends.
        let mut rounds = 0usize;
        while busy(self) {
            rounds += 1;
            // Alive, only busy (as in `drain_writes`).
            fabric::layout::Header::new(mem, self.layout).beat_dir();
            let mut acts = Vec::new();
            self.pump(mem, &mut acts);
            if !acts.is_empty() {
                self.run(mem, acts);
            }
            if self.io.disk.in_flight() == 0 {
                if self.io.disk.waiting() == 0 {
                    break;
                }
                continue;
            }
            let mut done = Vec::new();
            if let Some(fs) = self.fs.as_mut() {
                fs.device_mut().wait_reads(&mut done);
            }
            if done.is_empty() && rounds > 1_000_000 {
                // A device that neither answers nor times out: give up the
                // ordering rather than the whole directory.
                log::error!("disk: reads in flight never complete; going on without them");
                break;
            }
            self.finish_io(mem, done);
        }
    }

    /// Order a file-server request after the disk requests it must not
    /// overtake: a write or truncate of a file waits for that file's
    /// file-server reads in flight (`private` mode; an unlink too, in
    /// [`Directory::execute`]), while its page fills go on and are marked
    /// stale there (their readers retry). A request that will write synchronously (`deferred`
    /// false: `net` mode's changes, a creation raising the sequence floor)
    /// or flush first waits for every write in flight (they may write the
    /// same metadata blocks), an fsync of a file for that file's writes; a
    /// deferred one is ordered by the write queue (a namespace change or
    /// truncation is a barrier job there).
    pub(super) fn order_before(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        req: &Request,
        deferred: bool,
    ) {
        if !self.io.writes.is_idle() {
            match *req {
                Request::Fsync { ino } => self.drain_writes(mem, (ino != 0).then_some(ino)),
                // Staged: the write queue orders it.
                _ if deferred => {}
                ref r if r.may_change_files() => self.drain_writes(mem, None),
                _ => {}
            }
        }
        if self.io.disk.is_idle() {
            return;
        }
        match *req {
            // Page fills of the file go on: the change marks them stale
            // (`execute`), and their readers retry. A file-server read's
            // blocks (`private` mode) are waited for.
            Request::Data {
                op: Op::Write, ino, ..
            }
            | Request::Setattr { ino, .. } => self.drain_file_reads(mem, ino),
            // An unlink does the same in `execute`, which knows the
            // inode; creations and directories hold no blocks a fill
            // reads, and an fsync orders writes, not reads.
            _ => {}
        }
    }

    /// `node` failed or left: its fills will not be committed.
    pub(super) fn cancel_fills(&mut self, node: u32) {
        self.counters.miss.forget_node(node as u8);
        let n = self.io.disk.cancel_node(node as u8);
        if n > 0 {
            log::debug!("node {node}: {n} page fills cancelled");
        }
    }
}
