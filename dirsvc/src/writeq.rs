//! The directory's write queue: deferred block writes ([`flatfs::Staged`])
//! grouped in jobs, what each job answers when its writes landed, and the
//! order they may reach the device in. Pure bookkeeping; the serving loop
//! ([`crate::server`]) moves the bytes.
//!
//! A job is one operation's writes (a page write-back, a file-server
//! write) and what to do when all of them completed (the replies the page
//! directory put after the write-back, the file server's answer). Two
//! orders hold:
//!
//! * within a job, phase by phase ([`flatfs::Fs::write_phase`]:
//!   checksum-table blocks, then the data blocks they cover, then
//!   inode-table blocks), as the synchronous path writes them, so a crash
//!   never leaves a data block that matches no checksum nor a record that
//!   points at blocks whose checksums were not written;
//! * per device block, in staging order, one write in flight at a time:
//!   two writes of one block in flight could land in either order. Jobs
//!   are staged in order, so the oldest job is at the head of every block
//!   it writes, and the queue always makes progress;
//! * a job's first phase (its checksum-table blocks) only once every
//!   earlier write of its data blocks completed: the table entry it writes
//!   keeps the checksum of the bytes the previous job left in each block
//!   as the one "before" ([`flatfs::DATA_PHASE`], `flatfs` `sums`), so
//!   those bytes must be on the device before the entry lands;
//! * around a barrier job ([`WriteQueue::push_barrier`]: a namespace
//!   change or a truncation, which allocates or frees blocks and rewrites
//!   records other jobs share), job by job: a barrier's writes go out
//!   only once every earlier job completed, and no later job's writes
//!   before the barrier completed, so the device sees these changes in
//!   the order a synchronous file system would make them (a block a
//!   truncation freed is never rewritten by a later job before the
//!   truncation's record landed).
//!
//! Write ids carry [`WRITE_ID`] so the loop tells their completions from
//! page fills' on the device's one completion stream.

use alloc::boxed::Box;
use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::vec::Vec;

use flatfs::{BLOCK_SIZE, DATA_PHASE};

/// One device write request: (id, first block, the blocks' bytes).
pub type WriteRun = (u64, u64, Vec<Box<[u8; BLOCK_SIZE]>>);

/// The bit set in every write id (fills' ids are small counters).
pub const WRITE_ID: u64 = 1 << 63;

/// Where one write of a job stands.
#[derive(Debug)]
enum State {
    /// Waiting for its phase and for its block's earlier writes; holds
    /// the bytes.
    Waiting(Box<[u8; BLOCK_SIZE]>),
    /// On the device.
    Flying,
    /// Completed (landed or failed).
    Done,
}

#[derive(Debug)]
struct Write {
    lba: u64,
    phase: u8,
    state: State,
}

#[derive(Debug)]
struct Job<T> {
    inos: Vec<u64>,
    writes: Vec<Write>,
    failed: bool,
    /// Ordered against every other job (see the module doc).
    barrier: bool,
    then: T,
}

impl<T> Job<T> {
    /// The lowest phase with a write not done.
    fn phase(&self) -> Option<u8> {
        self.writes
            .iter()
            .filter(|w| !matches!(w.state, State::Done))
            .map(|w| w.phase)
            .min()
    }
}

/// A job whose writes all completed.
#[derive(Debug)]
pub struct Finished<T> {
    /// The files it wrote.
    pub inos: Vec<u64>,
    /// Did any of its writes fail?
    pub failed: bool,
    /// What to do now.
    pub then: T,
}

/// Counters of the queue.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct WriteStats {
    /// Jobs pushed.
    pub jobs: u64,
    /// Block writes submitted to the device.
    pub submitted: u64,
    /// Device write requests they went in (a run of contiguous blocks is
    /// one).
    pub write_ios: u64,
    /// Block writes that failed.
    pub failed: u64,
    /// Most block writes in flight at once.
    pub max_in_flight: u64,
    /// Most jobs waiting or in flight at once.
    pub max_jobs: u64,
    /// Page requests answered at once while writes were in flight.
    pub answered_while_busy: u64,
    /// Page fills served from a pending write's bytes.
    pub fills_from_pending: u64,
    /// Times a request waited for writes in flight (ordering).
    pub barriers: u64,
    /// File-server writes that joined the job of the write before them
    /// (same node, same file, one sweep: one job for the group).
    pub grouped: u64,
    /// Barrier jobs pushed (namespace changes and truncations queued
    /// instead of written synchronously).
    pub barrier_jobs: u64,
    /// Most block writes held (queued or in flight) at once.
    pub max_held: u64,
    /// Times the loop took no new request from a node because the queue
    /// held its limit of block writes (backpressure).
    pub throttled: u64,
}

/// Jobs waiting and in flight.
#[derive(Debug)]
pub struct WriteQueue<T> {
    next_job: u64,
    next_io: u64,
    jobs: BTreeMap<u64, Job<T>>,
    /// Per device block, its writes in staging order: (job, index).
    blocks: BTreeMap<u64, VecDeque<(u64, usize)>>,
    /// By write id: its writes (job, index), one or a run of blocks.
    in_flight: BTreeMap<u64, Vec<(u64, usize)>>,
    /// Writes that may go out now (their job's phase, first of their
    /// block), oldest job first: kept up to date on every push and
    /// completion, so a submission does not scan the queue.
    ready: BTreeSet<(u64, usize)>,
    /// Barrier jobs waiting or in flight.
    barriers: BTreeSet<u64>,
    finished: Vec<Finished<T>>,
    /// Blocks of writes dropped with their failed job.
    skipped: Vec<u64>,
    /// Writes not completed: each holds (or, in flight, held until it was
    /// submitted) one block's bytes.
    held: usize,
    stats: WriteStats,
}

impl<T> Default for WriteQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> WriteQueue<T> {
    /// An empty queue.
    pub fn new() -> WriteQueue<T> {
        WriteQueue {
            next_job: 1,
            next_io: 1,
            jobs: BTreeMap::new(),
            blocks: BTreeMap::new(),
            in_flight: BTreeMap::new(),
            ready: BTreeSet::new(),
            barriers: BTreeSet::new(),
            finished: Vec::new(),
            skipped: Vec::new(),
            held: 0,
            stats: WriteStats::default(),
        }
    }

    /// Queue the writes (phase, device block, bytes) of one operation on
    /// files `inos`, and what to do when they all completed. A job without
    /// writes is finished at once.
    pub fn push(&mut self, inos: Vec<u64>, writes: Vec<(u8, u64, Box<[u8; BLOCK_SIZE]>)>, then: T) {
        self.push_job(inos, writes, then, false);
    }

    /// As [`WriteQueue::push`], for a job ordered against every other
    /// one: its writes go out once every earlier job completed, and later
    /// jobs' once it completed (see the module doc).
    pub fn push_barrier(
        &mut self,
        inos: Vec<u64>,
        writes: Vec<(u8, u64, Box<[u8; BLOCK_SIZE]>)>,
        then: T,
    ) {
        self.push_job(inos, writes, then, true);
    }

    fn push_job(
        &mut self,
        inos: Vec<u64>,
        writes: Vec<(u8, u64, Box<[u8; BLOCK_SIZE]>)>,
        then: T,
        barrier: bool,
    ) {
        self.stats.jobs += 1;
        if barrier {
            self.stats.barrier_jobs += 1;
        }
        if writes.is_empty() {
            self.finished.push(Finished {
                inos,
                failed: false,
                then,
            });
            return;
        }
        let id = self.next_job;
        self.next_job += 1;
        let writes: Vec<Write> = writes
            .into_iter()
            .map(|(phase, lba, buf)| Write {
                lba,
                phase,
                state: State::Waiting(buf),
            })
            .collect();
        for (i, w) in writes.iter().enumerate() {
            self.blocks.entry(w.lba).or_default().push_back((id, i));
        }
        let n = writes.len();
        self.held += n;
        self.stats.max_held = self.stats.max_held.max(self.held as u64);
        self.jobs.insert(
            id,
            Job {
                inos,
                writes,
                failed: false,
                barrier,
                then,
            },
        );
        if barrier {
            self.barriers.insert(id);
        }
        for i in 0..n {
            self.consider(id, i);
        }
        self.stats.max_jobs = self.stats.max_jobs.max(self.jobs.len() as u64);
    }

    /// Mark write `i` of job `jid` ready if it may go out now.
    fn consider(&mut self, jid: u64, i: usize) {
        let Some(job) = self.jobs.get(&jid) else {
            return;
        };
        let Some(w) = job.writes.get(i) else {
            return;
        };
        let after_barrier = self.barriers.first().is_some_and(|&b| b < jid);
        let barrier_not_oldest = job.barrier && self.jobs.keys().next() != Some(&jid);
        // The cheap checks first: `phase` and `data_first` walk the job.
        if matches!(w.state, State::Waiting(_))
            && self.is_first(w.lba, (jid, i))
            && !after_barrier
            && !barrier_not_oldest
            && job.phase() == Some(w.phase)
            && (w.phase >= DATA_PHASE || self.data_first(jid, job))
        {
            self.ready.insert((jid, i));
        }
    }

    /// Is write `at` the first of block `lba`'s order?
    fn is_first(&self, lba: u64, at: (u64, usize)) -> bool {
        self.blocks.get(&lba).and_then(|q| q.front()) == Some(&at)
    }

    /// Is every data write of job `jid` first in its block's order (every
    /// earlier write of its data blocks completed)?
    fn data_first(&self, jid: u64, job: &Job<T>) -> bool {
        job.writes
            .iter()
            .enumerate()
            .filter(|(_, w)| w.phase == DATA_PHASE)
            .all(|(i, w)| self.is_first(w.lba, (jid, i)))
    }

    /// The next write that may go to the device (id, block, bytes): of a
    /// job's current phase and first in its block's order. It counts as in
    /// flight from now.
    pub fn next_submit(&mut self) -> Option<(u64, u64, Box<[u8; BLOCK_SIZE]>)> {
        let (id, lba, mut bufs) = self.next_submit_run(1)?;
        Some((id, lba, bufs.pop()?))
    }

    /// The next writes that may go to the device as one request: the
    /// oldest ready write and the ready writes of the blocks right after
    /// it (each of its job's current phase and first in its block's
    /// order, so a run keeps every order a single write keeps), up to
    /// `max` blocks: (id, first block, the blocks' bytes). They count as
    /// in flight from now, and complete together.
    pub fn next_submit_run(&mut self, max: usize) -> Option<WriteRun> {
        let first = self.ready.pop_first()?;
        let mut parts = alloc::vec![first];
        let lba = self.jobs.get(&first.0)?.writes.get(first.1)?.lba;
        while parts.len() < max.max(1) {
            let Some(next) = lba.checked_add(parts.len() as u64) else {
                break;
            };
            let Some(&w) = self.blocks.get(&next).and_then(|q| q.front()) else {
                break;
            };
            if !self.ready.remove(&w) {
                break;
            }
            parts.push(w);
        }
        let mut bufs = Vec::with_capacity(parts.len());
        for &(jid, i) in &parts {
            let w = self.jobs.get_mut(&jid)?.writes.get_mut(i)?;
            let State::Waiting(buf) = core::mem::replace(&mut w.state, State::Flying) else {
                return None;
            };
            bufs.push(buf);
        }
        let id = WRITE_ID | self.next_io;
        self.next_io += 1;
        self.stats.submitted += parts.len() as u64;
        self.stats.write_ios += 1;
        self.in_flight.insert(id, parts);
        let flying: usize = self.in_flight.values().map(Vec::len).sum();
        self.stats.max_in_flight = self.stats.max_in_flight.max(flying as u64);
        Some((id, lba, bufs))
    }

    /// Write `id` completed (`ok`: it landed). Returns its (first) device
    /// block; `None` for an id that is not in flight (ignored).
    pub fn complete(&mut self, id: u64, ok: bool) -> Option<u64> {
        self.complete_run(id, ok).first().copied()
    }

    /// Write request `id` (one block, or a run of them) completed (`ok`:
    /// every block landed). Returns its device blocks, in order; none for
    /// an id that is not in flight (ignored).
    pub fn complete_run(&mut self, id: u64, ok: bool) -> Vec<u64> {
        let Some(parts) = self.in_flight.remove(&id) else {
            return Vec::new();
        };
        parts
            .into_iter()
            .filter_map(|(jid, i)| self.complete_one(jid, i, ok))
            .collect()
    }

    /// Write `i` of job `jid` completed; its device block.
    fn complete_one(&mut self, jid: u64, i: usize, ok: bool) -> Option<u64> {
        let job = self.jobs.get_mut(&jid)?;
        let phase_before = job.phase();
        let w = job.writes.get_mut(i)?;
        if !matches!(w.state, State::Done) {
            self.held = self.held.saturating_sub(1);
        }
        w.state = State::Done;
        let lba = w.lba;
        if !ok {
            job.failed = true;
            self.stats.failed += 1;
        }
        let mut phase_after = job.phase();
        if job.failed && phase_after.is_some() && phase_after != phase_before {
            // A failed job sends none of its later phases: its data
            // without its checksums, or its record without its data,
            // would leave the device worse than the old bytes do.
            self.skip_rest(jid);
            phase_after = None;
        }
        self.release_block(lba, (jid, i));
        if phase_after.is_some() && phase_after != phase_before {
            // The job moved on to its next phase.
            let n = self.jobs.get(&jid).map_or(0, |j| j.writes.len());
            for k in 0..n {
                self.consider(jid, k);
            }
        }
        if phase_after.is_none() {
            self.finish(jid);
        }
        Some(lba)
    }

    /// Write `at` of block `lba` is done: the block's next write may go.
    fn release_block(&mut self, lba: u64, at: (u64, usize)) {
        let mut next = None;
        if let Some(q) = self.blocks.get_mut(&lba) {
            q.retain(|&x| x != at);
            next = q.front().copied();
            if q.is_empty() {
                self.blocks.remove(&lba);
            }
        }
        if let Some((j2, i2)) = next {
            self.consider(j2, i2);
            let data = self
                .jobs
                .get(&j2)
                .and_then(|j| j.writes.get(i2))
                .is_some_and(|w| w.phase == DATA_PHASE);
            if data {
                self.consider_first_phase(j2);
            }
        }
    }

    /// Drop the writes of failed job `jid` not sent yet (see
    /// [`WriteQueue::take_skipped`]).
    fn skip_rest(&mut self, jid: u64) {
        let Some(job) = self.jobs.get_mut(&jid) else {
            return;
        };
        let mut dropped = Vec::new();
        for (k, w) in job.writes.iter_mut().enumerate() {
            if matches!(w.state, State::Waiting(_)) {
                w.state = State::Done;
                dropped.push((w.lba, k));
            }
        }
        self.held = self.held.saturating_sub(dropped.len());
        for (lba, k) in dropped {
            self.ready.remove(&(jid, k));
            self.skipped.push(lba);
            self.release_block(lba, (jid, k));
        }
    }

    /// Job `jid` completed: to the finished list.
    fn finish(&mut self, jid: u64) {
        let Some(job) = self.jobs.remove(&jid) else {
            return;
        };
        self.barriers.remove(&jid);
        self.finished.push(Finished {
            inos: job.inos,
            failed: job.failed,
            then: job.then,
        });
        if job.barrier || !self.barriers.is_empty() {
            // A barrier completed (the jobs behind it may go on) or one
            // may now be the oldest job.
            self.reconsider_all();
        }
    }

    /// Device blocks whose writes were dropped, never sent, because an
    /// earlier phase of their job failed (the device keeps their older
    /// bytes), since the last call.
    pub fn take_skipped(&mut self) -> Vec<u64> {
        core::mem::take(&mut self.skipped)
    }

    /// A data write of job `jid` became first of its block: if the job has
    /// not reached its data phase, its first phase may now go out.
    fn consider_first_phase(&mut self, jid: u64) {
        let Some(job) = self.jobs.get(&jid) else {
            return;
        };
        let Some(p) = job.phase().filter(|&p| p < DATA_PHASE) else {
            return;
        };
        if !self.data_first(jid, job) {
            return;
        }
        let first: Vec<usize> = job
            .writes
            .iter()
            .enumerate()
            .filter(|(_, w)| w.phase == p)
            .map(|(k, _)| k)
            .collect();
        for k in first {
            self.consider(jid, k);
        }
    }

    /// Consider every waiting write again (rare: when a barrier job
    /// completes or may have become the oldest).
    fn reconsider_all(&mut self) {
        let all: Vec<(u64, usize)> = self
            .jobs
            .iter()
            .flat_map(|(&j, job)| (0..job.writes.len()).map(move |i| (j, i)))
            .collect();
        for (j, i) in all {
            self.consider(j, i);
        }
    }

    /// Jobs that finished since the last call, in completion order.
    pub fn take_finished(&mut self) -> Vec<Finished<T>> {
        core::mem::take(&mut self.finished)
    }

    /// Does a job of file `ino` (`None`: any job) wait or fly?
    pub fn busy(&self, ino: Option<u64>) -> bool {
        match ino {
            None => !self.jobs.is_empty(),
            Some(i) => self.jobs.values().any(|j| j.inos.contains(&i)),
        }
    }

    /// Nothing waits, flies or is finished and not yet taken.
    pub fn is_idle(&self) -> bool {
        self.jobs.is_empty() && self.finished.is_empty()
    }

    /// Write requests on the device (each one slot of its queue).
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Block writes queued or in flight (not completed): what the queue
    /// holds in memory is about this many blocks.
    pub fn held_blocks(&self) -> usize {
        self.held
    }

    /// Jobs waiting or in flight.
    pub fn jobs(&self) -> usize {
        self.jobs.len()
    }

    /// Count one page request answered at once while writes were in flight.
    pub fn count_answered_while_busy(&mut self) {
        self.stats.answered_while_busy += 1;
    }

    /// Count one page fill served from a pending write's bytes.
    pub fn count_fill_from_pending(&mut self) {
        self.stats.fills_from_pending += 1;
    }

    /// Count one file-server write that joined its predecessor's job.
    pub fn count_grouped(&mut self) {
        self.stats.grouped += 1;
    }

    /// Count one request that waited for writes in flight.
    pub fn count_barrier(&mut self) {
        self.stats.barriers += 1;
    }

    /// A node's requests waited for the queue to drain.
    pub fn count_throttled(&mut self) {
        self.stats.throttled += 1;
    }

    /// Counters.
    pub fn stats(&self) -> WriteStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blk(v: u8) -> Box<[u8; BLOCK_SIZE]> {
        Box::new([v; BLOCK_SIZE])
    }

    /// Submit everything submittable; (id, lba, first byte).
    fn drain(q: &mut WriteQueue<&'static str>) -> Vec<(u64, u64, u8)> {
        let mut v = Vec::new();
        while let Some((id, lba, b)) = q.next_submit() {
            v.push((id, lba, b[0]));
        }
        v
    }

    #[test]
    fn a_job_goes_out_phase_by_phase() {
        let mut q = WriteQueue::new();
        q.push(
            vec![5],
            vec![
                (2, 1, blk(3)),
                (0, 100, blk(1)),
                (0, 101, blk(1)),
                (1, 10, blk(2)),
            ],
            "a",
        );
        let s = drain(&mut q);
        assert_eq!(
            s.iter().map(|x| x.1).collect::<Vec<_>>(),
            vec![100, 101],
            "data blocks first"
        );
        assert!(q.busy(Some(5)) && !q.busy(Some(6)));
        assert_eq!(q.complete(s[0].0, true), Some(100));
        assert!(drain(&mut q).is_empty(), "one data block still in flight");
        q.complete(s[1].0, true);
        let s = drain(&mut q);
        assert_eq!(s.iter().map(|x| x.1).collect::<Vec<_>>(), vec![10]);
        q.complete(s[0].0, true);
        let s = drain(&mut q);
        assert_eq!(s.iter().map(|x| x.1).collect::<Vec<_>>(), vec![1]);
        assert!(q.take_finished().is_empty());
        q.complete(s[0].0, true);
        let f = q.take_finished();
        assert_eq!(f.len(), 1);
        assert_eq!(
            (&f[0].inos[..], f[0].failed, f[0].then),
            (&[5][..], false, "a")
        );
        assert!(q.is_idle());
    }

    #[test]
    fn writes_of_one_block_go_out_one_at_a_time_in_staging_order() {
        // (phase 0: checksum table, DATA_PHASE: data)
        let mut q = WriteQueue::new();
        q.push(
            vec![1],
            vec![(0, 10, blk(1)), (DATA_PHASE, 100, blk(1))],
            "a",
        );
        q.push(
            vec![2],
            vec![(0, 10, blk(2)), (DATA_PHASE, 101, blk(2))],
            "b",
        );
        q.push(
            vec![3],
            vec![(0, 11, blk(3)), (DATA_PHASE, 100, blk(3))],
            "c",
        );
        let s = drain(&mut q);
        // a's table block; b's waits behind it, and c's table behind a's
        // write of data block 100 (c's entry keeps a's bytes as "before").
        assert_eq!(
            s.iter().map(|x| (x.1, x.2)).collect::<Vec<_>>(),
            vec![(10, 1)]
        );
        q.complete(s[0].0, true);
        let s = drain(&mut q);
        assert_eq!(
            s.iter().map(|x| (x.1, x.2)).collect::<Vec<_>>(),
            vec![(100, 1), (10, 2)],
            "a's data, and b's table block now that a's landed"
        );
        q.complete(s[1].0, true);
        let s2 = drain(&mut q);
        assert_eq!(
            s2.iter().map(|x| (x.1, x.2)).collect::<Vec<_>>(),
            vec![(101, 2)]
        );
        q.complete(s[0].0, true);
        let s3 = drain(&mut q);
        assert_eq!(
            s3.iter().map(|x| (x.1, x.2)).collect::<Vec<_>>(),
            vec![(11, 3)],
            "c's table once a's data block landed"
        );
        q.complete(s2[0].0, true);
        q.complete(s3[0].0, true);
        let s4 = drain(&mut q);
        assert_eq!(
            s4.iter().map(|x| (x.1, x.2)).collect::<Vec<_>>(),
            vec![(100, 3)]
        );
        q.complete(s4[0].0, true);
        let order: Vec<_> = q.take_finished().into_iter().map(|f| f.then).collect();
        assert_eq!(order, vec!["a", "b", "c"]);
        assert!(q.is_idle());
        assert_eq!(q.stats().max_in_flight, 2);
    }

    #[test]
    fn a_barrier_job_waits_for_every_earlier_job_and_holds_every_later_one() {
        let mut q = WriteQueue::new();
        q.push(vec![1], vec![(0, 100, blk(1))], "a");
        q.push_barrier(vec![2], vec![(0, 200, blk(2)), (2, 1, blk(2))], "unlink");
        q.push(vec![3], vec![(0, 300, blk(3))], "c");
        let s = drain(&mut q);
        assert_eq!(
            s.iter().map(|x| x.1).collect::<Vec<_>>(),
            vec![100],
            "only the job before the barrier: neither the barrier (another \
             block) nor the job after it"
        );
        assert!(q.busy(Some(2)) && q.busy(Some(3)));
        q.complete(s[0].0, true);
        let s = drain(&mut q);
        assert_eq!(s.iter().map(|x| x.1).collect::<Vec<_>>(), vec![200]);
        q.complete(s[0].0, true);
        let s = drain(&mut q);
        assert_eq!(
            s.iter().map(|x| x.1).collect::<Vec<_>>(),
            vec![1],
            "the barrier's next phase; c still waits"
        );
        q.complete(s[0].0, true);
        let s = drain(&mut q);
        assert_eq!(s.iter().map(|x| x.1).collect::<Vec<_>>(), vec![300]);
        q.complete(s[0].0, true);
        let order: Vec<_> = q.take_finished().into_iter().map(|f| f.then).collect();
        assert_eq!(order, vec!["a", "unlink", "c"]);
        assert!(q.is_idle());
        assert_eq!(q.stats().barrier_jobs, 1);
        // A barrier pushed on an idle queue goes out at once; two in a
        // row go one after the other.
        q.push_barrier(vec![4], vec![(0, 400, blk(4))], "d");
        q.push_barrier(vec![5], vec![(0, 500, blk(5))], "e");
        let s = drain(&mut q);
        assert_eq!(s.iter().map(|x| x.1).collect::<Vec<_>>(), vec![400]);
        q.complete(s[0].0, false);
        let s = drain(&mut q);
        assert_eq!(s.iter().map(|x| x.1).collect::<Vec<_>>(), vec![500]);
        q.complete(s[0].0, true);
        let f = q.take_finished();
        assert_eq!(
            f.iter().map(|f| (f.then, f.failed)).collect::<Vec<_>>(),
            vec![("d", true), ("e", false)]
        );
    }

    #[test]
    fn a_failed_write_fails_its_job_and_the_queue_goes_on() {
        let mut q = WriteQueue::new();
        q.push(
            vec![1],
            vec![(0, 100, blk(1)), (0, 101, blk(1)), (1, 10, blk(1))],
            "a",
        );
        q.push(vec![2], vec![(0, 100, blk(2))], "b");
        let s = drain(&mut q);
        assert_eq!(s.len(), 2, "a's first phase");
        q.complete(s[0].0, false);
        let s2 = drain(&mut q);
        assert_eq!(s2.len(), 1, "b's write of the block");
        assert!(q.take_skipped().is_empty(), "a's first phase is not done");
        assert_eq!(q.complete(999, true), None, "unknown id");
        assert_eq!(q.complete(s[1].0, true), Some(101));
        assert_eq!(q.complete(s[1].0, true), None, "completed twice");
        // a's next phase is never sent: it would land over a failed one.
        assert_eq!(q.take_skipped(), vec![10]);
        assert!(drain(&mut q).is_empty());
        q.complete(s2[0].0, true);
        let f = q.take_finished();
        assert_eq!(
            f.iter().map(|f| (f.then, f.failed)).collect::<Vec<_>>(),
            vec![("a", true), ("b", false)]
        );
        assert_eq!(q.stats().failed, 1);
        assert!(q.is_idle());
    }

    #[test]
    fn a_job_without_writes_finishes_at_once_and_ids_are_marked() {
        let mut q: WriteQueue<&'static str> = WriteQueue::new();
        q.push(vec![1], Vec::new(), "empty");
        assert!(!q.busy(None));
        assert!(!q.is_idle(), "finished, not taken");
        assert_eq!(q.take_finished()[0].then, "empty");
        q.push(vec![1], vec![(0, 7, blk(0))], "x");
        let (id, _, _) = q.next_submit().unwrap();
        assert_ne!(id & WRITE_ID, 0);
        assert!(q.busy(None));
    }

    #[test]
    fn contiguous_ready_blocks_go_as_one_run_and_keep_every_order() {
        let mut q: WriteQueue<&'static str> = WriteQueue::new();
        // A first job writes block 13; the second writes data 10..=13
        // and 16, then checksums (block 2), then its record (block 1).
        q.push(vec![9], vec![(0, 13, blk(0))], "first");
        let mut w: Vec<(u8, u64, Box<[u8; BLOCK_SIZE]>)> =
            (10..14).map(|l| (0u8, l as u64, blk(l as u8))).collect();
        w.push((0, 16, blk(16)));
        w.push((1, 2, blk(2)));
        w.push((2, 1, blk(1)));
        q.push(vec![9], w, "second");
        // The first job's block 13 goes alone (10..12 are not after it);
        // the second job's 10, 11, 12 go as one run, stopping at 13 (its
        // earlier write is in flight).
        let (id13, lba, bufs) = q.next_submit_run(8).unwrap();
        assert_eq!((lba, bufs.len()), (13, 1));
        let (id10, lba, bufs) = q.next_submit_run(8).unwrap();
        assert_eq!((lba, bufs.len()), (10, 3));
        assert_eq!(bufs[2][0], 12);
        let (id16, lba, _) = q.next_submit_run(8).unwrap();
        assert_eq!(lba, 16);
        assert!(q.next_submit_run(8).is_none(), "13 of the second job waits");
        assert_eq!(q.complete_run(id13, true), vec![13]);
        let (id13b, lba, _) = q.next_submit_run(8).unwrap();
        assert_eq!(lba, 13);
        assert_eq!(q.complete_run(id10, true), vec![10, 11, 12]);
        assert_eq!(q.complete_run(id16, true), vec![16]);
        assert!(q.next_submit_run(8).is_none(), "checksums after the data");
        assert_eq!(q.complete_run(id13b, true), vec![13]);
        let (ids, lba, _) = q.next_submit_run(8).unwrap();
        assert_eq!(lba, 2);
        q.complete_run(ids, true);
        let (idr, lba, _) = q.next_submit_run(8).unwrap();
        assert_eq!(lba, 1);
        q.complete_run(idr, true);
        let done: Vec<&str> = q.take_finished().into_iter().map(|f| f.then).collect();
        assert_eq!(done, vec!["first", "second"]);
        let s = q.stats();
        assert_eq!((s.submitted, s.write_ios), (8, 6));
        assert!(q.complete_run(idr, true).is_empty(), "completed twice");
    }
}
