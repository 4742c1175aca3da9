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
//! ([`Directory::order_before`]); writes are synchronous.

use alloc::vec::Vec;

use crate::diskq::Fill;
use crate::pagedir::{Action, Phase};
use fabric::proto::{Op, PageKey, Request};
use fabric::shm::SharedMem;
use fabric::PAGE_SIZE;
use flatfs::{BlockDevice, BlockSource, ReadDone};

use super::Directory;

impl<D: BlockDevice> Directory<D> {
    /// Reads the device keeps in flight for fills (0: fills are
    /// synchronous).
    pub fn fill_depth(&self) -> usize {
        if self.fs.is_some() {
            self.fill_depth
        } else {
            0
        }
    }

    /// Fills waiting for the device or in flight.
    pub fn fills_pending(&self) -> usize {
        self.disk.in_flight() + self.disk.waiting()
    }

    /// The disk queue's counters.
    pub fn disk_queue_stats(&self) -> crate::diskq::QueueStats {
        self.disk.stats()
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
            Ok(BlockSource::Disk { lba, len }) => {
                self.miss.fill_queued(e.owner, tag);
                self.disk.push(Fill {
                    key,
                    gfn,
                    node: e.owner,
                    tag,
                    lba,
                    len,
                });
            }
            Err(_) => out.extend(self.pages.filled(key, false)),
        }
    }

    /// Submit waiting fills while the device has room; a read the device
    /// refuses fails its fill (actions to `out`).
    pub(super) fn pump(&mut self, out: &mut Vec<Action>) {
        while let Some((id, lba)) = self.disk.next_submit() {
            let Some(fs) = self.fs.as_mut() else {
                let _ = self.disk.submit_failed(id);
                continue;
            };
            if fs.device_mut().submit_read(id, lba).is_err() {
                if let Some(f) = self.disk.submit_failed(id) {
                    log::warn!("page fill of {:?}: the disk refused the read", f.key);
                    out.extend(self.pages.filled(f.key, false));
                }
            }
        }
    }

    /// Take the fills the device finished and commit them (answers go out
    /// with the next flush). Returns how many completions were taken.
    pub fn poll_disk(&mut self, mem: &(impl SharedMem + ?Sized)) -> usize {
        if self.disk.is_idle() {
            return 0;
        }
        let mut done = Vec::new();
        if let Some(fs) = self.fs.as_mut() {
            fs.device_mut().poll_reads(&mut done);
        }
        let n = done.len();
        self.finish_reads(mem, done);
        n
    }

    /// Commit completed reads, then refill the device.
    fn finish_reads(&mut self, mem: &(impl SharedMem + ?Sized), done: Vec<ReadDone>) {
        let seen = self.miss.now();
        let mut acts = Vec::new();
        let mut filled = Vec::new();
        for d in done {
            let Some(f) = self.disk.complete(d.id) else {
                continue; // cancelled: the requester failed meanwhile
            };
            if !f.wanted(self.pages.entry(&f.key)) {
                self.miss.fill_done(f.node, f.tag, seen, false);
                continue;
            }
            let ok = match (d.result, self.fs.as_mut(), self.layout.frame_off(f.gfn)) {
                (Ok(mut blk), Some(fs), Some(off)) => {
                    match fs.check_block(f.key.ino, f.key.idx, f.lba, &blk) {
                        Ok(()) => {
                            blk[f.len.min(PAGE_SIZE)..].fill(0);
                            mem.write(off, &blk[..]);
                            true
                        }
                        Err(_) => false,
                    }
                }
                (Err(_), ..) => {
                    log::warn!(
                        "page fill of {:?}: disk read of block {} failed",
                        f.key,
                        f.lba
                    );
                    false
                }
                _ => false,
            };
            self.miss.fill_done(f.node, f.tag, seen, ok);
            acts.extend(self.pages.filled(f.key, ok));
            filled.push(f.key);
        }
        self.pump(&mut acts);
        if !acts.is_empty() {
            self.run(mem, acts);
        }
        self.miss.fills_answered();
        // Requests that waited for a fill may now map the page: its new
        // owner learns the sharer count (it started at 0).
        for key in filled {
            if let Some((owner, _)) = self.sharer_view(&key) {
                self.report_sharers(mem, key, Some((owner, 0)));
            }
        }
    }

    /// Wait (bounded by the device's own timeout per read) until no fill
    /// of `ino` (`None`: of any file) waits or flies.
    pub(super) fn drain_fills(&mut self, mem: &(impl SharedMem + ?Sized), ino: Option<u64>) {
        let busy = |d: &Self| match ino {
            Some(i) => d.disk.busy_ino(i),
            None => !d.disk.is_idle(),
        };
        if !busy(self) {
            return;
        }
        self.disk.count_barrier();
        // Each round completes at least one read in flight (the device
        // answers or times out) or starts one, so this ends.
        let mut rounds = 0usize;
        while busy(self) {
            rounds += 1;
            let mut acts = Vec::new();
            self.pump(&mut acts);
            if !acts.is_empty() {
                self.run(mem, acts);
            }
            if self.disk.in_flight() == 0 {
                if self.disk.waiting() == 0 {
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
            self.finish_reads(mem, done);
        }
    }

    /// Order a file-server request after the fills it must not overtake:
    /// a write, truncate or fsync of a file waits for that file's fills;
    /// namespace changes (create, unlink, mkdir, rmdir) and a global fsync
    /// for every fill (an unlink frees blocks a fill may be reading).
    pub(super) fn order_before(&mut self, mem: &(impl SharedMem + ?Sized), req: &Request) {
        if self.disk.is_idle() {
            return;
        }
        match *req {
            Request::Data {
                op: Op::Write, ino, ..
            }
            | Request::Setattr { ino, .. } => self.drain_fills(mem, Some(ino)),
            Request::Fsync { ino } => self.drain_fills(mem, (ino != 0).then_some(ino)),
            Request::Path { op, .. } if op != Op::Lookup => self.drain_fills(mem, None),
            _ => {}
        }
    }

    /// `node` failed or left: its fills will not be committed.
    pub(super) fn cancel_fills(&mut self, node: u32) {
        self.miss.forget_node(node as u8);
        let n = self.disk.cancel_node(node as u8);
        if n > 0 {
            log::debug!("node {node}: {n} page fills cancelled");
        }
    }
}
