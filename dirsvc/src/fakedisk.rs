//! A fake asynchronous disk for host tests and simulations: an in-memory
//! disk ([`MemDisk`]) whose reads and writes submitted with
//! [`BlockDevice::submit_read`] and [`BlockDevice::submit_write`] complete
//! when the test says so, in any order, or fail.
//!
//! The test keeps a [`FakeControl`] (a handle on the same state) while the
//! [`FakeDisk`] itself lives inside the file system inside the directory.
//! A read returns the block as it was when the read was submitted (the
//! earliest a real device could read it), so a write that overtakes a read
//! in flight shows up as stale data. A write reaches the disk when it
//! completes (so a read of the disk before that sees the old bytes).
//! Synchronous reads and writes go straight to the disk.

use alloc::boxed::Box;
use alloc::rc::Rc;
use alloc::vec::Vec;
use core::cell::RefCell;

use fabric::rng::SplitMix64;
use flatfs::{BlockDevice, IoError, MemDisk, ReadDone, BLOCK_SIZE};

/// When reads in flight complete on [`BlockDevice::poll_reads`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completion {
    /// Every read in flight, in submission order.
    InOrder,
    /// A random subset, in random order (seeded).
    Random,
    /// None: only [`FakeControl::complete`] (or a wait) finishes them.
    Hold,
}

/// A read's outcome, fixed at submission.
type Outcome = Result<Box<[u8; BLOCK_SIZE]>, IoError>;

/// A request in flight.
enum Req {
    /// A read and its outcome.
    Read(Outcome),
    /// A write of one block or a run of them: the bytes, or `Err` if it
    /// is to fail.
    Write(Result<Vec<Box<[u8; BLOCK_SIZE]>>, IoError>),
    /// A flush (counted by the disk when it completes).
    Flush,
}

struct State {
    disk: MemDisk,
    depth: usize,
    /// (id, device block, the request).
    in_flight: Vec<(u64, u64, Req)>,
    done: Vec<ReadDone>,
    mode: Completion,
    rng: SplitMix64,
    /// Reads (submitted from now on) that fail, counted down.
    fail_reads: u64,
    /// Reads the device refuses to start, counted down.
    refuse_reads: u64,
    /// Writes (submitted from now on) that fail, counted down.
    fail_writes: u64,
    submitted: u64,
    writes_submitted: u64,
    /// Blocks those writes covered.
    blocks_submitted: u64,
    /// Most blocks one write request takes.
    write_run: usize,
    /// Every write request submitted: (first block, blocks).
    write_log: Vec<(u64, u64)>,
    max_in_flight: usize,
}

impl State {
    /// Finish the read at index `i` of `in_flight`.
    fn finish(&mut self, i: usize) {
        let (id, lba, req) = self.in_flight.remove(i);
        let result = match req {
            Req::Read(r) => r,
            Req::Write(Ok(bufs)) => {
                let mut r = Ok(());
                for (k, b) in bufs.iter().enumerate() {
                    r = r.and(self.disk.write_block(lba + k as u64, b));
                }
                match (r, bufs.into_iter().next()) {
                    (Ok(()), Some(b)) => Ok(b),
                    _ => Err(IoError),
                }
            }
            Req::Write(Err(e)) => Err(e),
            Req::Flush => self.disk.flush().map(|_| Box::new([0u8; BLOCK_SIZE])),
        };
        self.done.push(ReadDone { id, result });
    }

    fn complete_by_mode(&mut self) {
        match self.mode {
            Completion::InOrder => {
                while !self.in_flight.is_empty() {
                    self.finish(0);
                }
            }
            Completion::Random => {
                let n = self.in_flight.len() as u64;
                if n == 0 {
                    return;
                }
                for _ in 0..self.rng.range(0, n) {
                    let i = self.rng.range(0, self.in_flight.len() as u64 - 1) as usize;
                    self.finish(i);
                }
            }
            Completion::Hold => {}
        }
    }
}

/// The device half (give it to [`flatfs::Fs`]).
pub struct FakeDisk {
    s: Rc<RefCell<State>>,
}

/// The test's half.
#[derive(Clone)]
pub struct FakeControl {
    s: Rc<RefCell<State>>,
}

impl FakeDisk {
    /// Wrap `disk`; at most `depth` reads in flight; completions by `mode`,
    /// random choices from `seed`.
    pub fn new(
        disk: MemDisk,
        depth: usize,
        mode: Completion,
        seed: u64,
    ) -> (FakeDisk, FakeControl) {
        let s = Rc::new(RefCell::new(State {
            disk,
            depth,
            in_flight: Vec::new(),
            done: Vec::new(),
            mode,
            rng: SplitMix64::new(seed),
            fail_reads: 0,
            refuse_reads: 0,
            fail_writes: 0,
            submitted: 0,
            writes_submitted: 0,
            blocks_submitted: 0,
            write_run: 1,
            write_log: Vec::new(),
            max_in_flight: 0,
        }));
        (FakeDisk { s: s.clone() }, FakeControl { s })
    }
}

impl FakeControl {
    /// Change the completion policy.
    pub fn set_mode(&self, mode: Completion) {
        self.s.borrow_mut().mode = mode;
    }

    /// The next `n` reads submitted fail when they complete.
    pub fn fail_next_reads(&self, n: u64) {
        self.s.borrow_mut().fail_reads = n;
    }

    /// The next `n` reads submitted are refused (`submit_read` fails:
    /// they never complete).
    pub fn refuse_next_reads(&self, n: u64) {
        self.s.borrow_mut().refuse_reads = n;
    }

    /// The next `n` writes submitted fail when they complete (the disk
    /// keeps the block's old bytes).
    pub fn fail_next_writes(&self, n: u64) {
        self.s.borrow_mut().fail_writes = n;
    }

    /// Writes in flight (id, device block), in submission order.
    pub fn writes_in_flight(&self) -> Vec<(u64, u64)> {
        self.s
            .borrow()
            .in_flight
            .iter()
            .filter(|x| matches!(x.2, Req::Write(_)))
            .map(|x| (x.0, x.1))
            .collect()
    }

    /// Write requests submitted so far (a run of blocks is one).
    pub fn writes_submitted(&self) -> u64 {
        self.s.borrow().writes_submitted
    }

    /// Blocks the write requests submitted so far covered.
    pub fn blocks_submitted(&self) -> u64 {
        self.s.borrow().blocks_submitted
    }

    /// Every write request submitted so far: (first block, blocks).
    pub fn write_requests(&self) -> Vec<(u64, u64)> {
        self.s.borrow().write_log.clone()
    }

    /// Take runs of up to `n` contiguous blocks in one write request
    /// (1, the default: one block per request).
    pub fn set_write_run(&self, n: usize) {
        self.s.borrow_mut().write_run = n.max(1);
    }

    /// Requests (reads and writes) in flight (id, device block), in
    /// submission order.
    pub fn in_flight(&self) -> Vec<(u64, u64)> {
        self.s
            .borrow()
            .in_flight
            .iter()
            .map(|x| (x.0, x.1))
            .collect()
    }

    /// Complete the read in flight at position `i` (submission order);
    /// false if there is none.
    pub fn complete(&self, i: usize) -> bool {
        let mut s = self.s.borrow_mut();
        if i >= s.in_flight.len() {
            return false;
        }
        s.finish(i);
        true
    }

    /// Complete every read in flight, last submitted first.
    pub fn complete_all_reversed(&self) {
        let mut s = self.s.borrow_mut();
        while let Some(i) = s.in_flight.len().checked_sub(1) {
            s.finish(i);
        }
    }

    /// Reads submitted so far.
    pub fn submitted(&self) -> u64 {
        self.s.borrow().submitted
    }

    /// Most reads in flight at once so far.
    pub fn max_in_flight(&self) -> usize {
        self.s.borrow().max_in_flight
    }

    /// The disk under the fake (to read or corrupt it).
    pub fn with_disk<R>(&self, f: impl FnOnce(&mut MemDisk) -> R) -> R {
        f(&mut self.s.borrow_mut().disk)
    }
}

impl BlockDevice for FakeDisk {
    fn block_count(&self) -> u64 {
        self.s.borrow().disk.block_count()
    }
    fn read_block(&mut self, lba: u64, buf: &mut [u8; BLOCK_SIZE]) -> Result<(), IoError> {
        self.s.borrow_mut().disk.read_block(lba, buf)
    }
    fn write_block(&mut self, lba: u64, buf: &[u8; BLOCK_SIZE]) -> Result<(), IoError> {
        self.s.borrow_mut().disk.write_block(lba, buf)
    }
    fn flush(&mut self) -> Result<(), IoError> {
        self.s.borrow_mut().disk.flush()
    }
    fn queue_depth(&self) -> usize {
        self.s.borrow().depth
    }
    fn submit_read(&mut self, id: u64, lba: u64) -> Result<(), IoError> {
        let mut s = self.s.borrow_mut();
        if s.in_flight.len() >= s.depth || lba >= s.disk.block_count() {
            return Err(IoError);
        }
        if s.refuse_reads > 0 {
            s.refuse_reads -= 1;
            return Err(IoError);
        }
        let result = if s.fail_reads > 0 {
            s.fail_reads -= 1;
            Err(IoError)
        } else {
            let mut b = Box::new([0u8; BLOCK_SIZE]);
            s.disk.read_block(lba, &mut b).map(|_| b)
        };
        s.in_flight.push((id, lba, Req::Read(result)));
        s.submitted += 1;
        s.max_in_flight = s.max_in_flight.max(s.in_flight.len());
        Ok(())
    }
    fn submit_write(
        &mut self,
        id: u64,
        lba: u64,
        buf: Box<[u8; BLOCK_SIZE]>,
    ) -> Result<(), IoError> {
        self.submit_write_run(id, lba, alloc::vec![buf])
    }
    fn max_write_run(&self) -> usize {
        self.s.borrow().write_run
    }
    fn submit_write_run(
        &mut self,
        id: u64,
        lba: u64,
        bufs: Vec<Box<[u8; BLOCK_SIZE]>>,
    ) -> Result<(), IoError> {
        let mut s = self.s.borrow_mut();
        let n = bufs.len() as u64;
        let end = lba.checked_add(n).ok_or(IoError)?;
        if s.in_flight.len() >= s.depth
            || end > s.disk.block_count()
            || bufs.is_empty()
            || bufs.len() > s.write_run
        {
            return Err(IoError);
        }
        let req = if s.fail_writes > 0 {
            s.fail_writes -= 1;
            Req::Write(Err(IoError))
        } else {
            Req::Write(Ok(bufs))
        };
        s.in_flight.push((id, lba, req));
        s.writes_submitted += 1;
        s.blocks_submitted += n;
        s.write_log.push((lba, n));
        s.max_in_flight = s.max_in_flight.max(s.in_flight.len());
        Ok(())
    }
    fn submit_flush(&mut self, id: u64) -> Result<(), IoError> {
        let mut s = self.s.borrow_mut();
        if s.in_flight.len() >= s.depth {
            return Err(IoError);
        }
        s.in_flight.push((id, 0, Req::Flush));
        s.max_in_flight = s.max_in_flight.max(s.in_flight.len());
        Ok(())
    }
    fn poll_reads(&mut self, out: &mut Vec<ReadDone>) {
        let mut s = self.s.borrow_mut();
        s.complete_by_mode();
        out.append(&mut s.done);
    }
    fn wait_reads(&mut self, out: &mut Vec<ReadDone>) {
        let mut s = self.s.borrow_mut();
        s.complete_by_mode();
        if s.done.is_empty() && !s.in_flight.is_empty() {
            // A real device finishes something eventually: the oldest.
            s.finish(0);
        }
        out.append(&mut s.done);
    }
}
