//! A node's metadata calls in two halves, for tasks
//! (`userland::os::Os::meta_start`): a call's request goes out on the
//! rings and the node returns at once; [`Node::meta_poll`] picks the
//! answer up and takes the next step (an open that truncates sends its
//! `Setattr`, an unlink its removal after the lookup), or finishes the
//! call into the VFS. Each call in flight writes its path into its own
//! sub-slot of bulk slot 0 (`Request::Path { at }`), so several are out
//! together; sub-slot 0 stays for synchronous calls.
//!
//! A `readdir` takes two or more steps: the lookup of its path, then one
//! `Readdir` per 682 entries, answered in bulk slot 3, which one readdir
//! in flight holds until it finished; a second readdir started meanwhile
//! first waits (inside `meta_start`) for the first to finish, whose result
//! is kept for its task.
//!
//! In `net` mode the calls go out over the TCP connection
//! ([`crate::netclient::NetClient::start`]) and are in flight together
//! the same way: a path is copied into its request's frame when it is
//! sent, so every call stages it at the start of slot 0 (no sub-slots;
//! an unlink restages its path for the removal), and the answers, which
//! come in the order sent, are kept for their tasks.
//!
//! An fsync or a close whose file has dirty pages in `private` mode on
//! the rings starts their write-back in flight and yields
//! ([`crate::vfs::Vfs::fsync_start`], `private/inflight.rs`): the call
//! is done (close) or sends its `Fsync` (fsync) once the writes are
//! answered.
//!
//! A truncate does the same with its file's dirty pages before its own
//! steps.
//!
//! What runs at once, inside `meta_start`: `close` in the other modes
//! (synchronous as before; a no-op in the single-copy modes but for
//! relaxed mode's private copies), the write-back before an fsync's
//! `Fsync` or a truncate's `Setattr` in the other modes (those requests
//! then go out as calls in flight; a single-copy truncate first asks the
//! size before with a `Getattr` in flight too), and any path call on the
//! rings when no sub-slot is free.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use fabric::proto::{Attr, DirEntry, Errno, Op, Request, Response, MAX_PATH};
use osapi::io::{Fd, OpenFlags};
use osapi::meta::{MetaCall, MetaDone, MetaStart, MetaTicket};

use super::Node;
use crate::env::Env;
use crate::vfs::{attr_of, OpenNext, Vfs, WbStart, WbWhy};

/// What a call in flight waits for.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// An open's lookup or create.
    Open(OpenFlags),
    /// An open's truncate to 0.
    OpenTrunc(OpenFlags),
    /// A stat's lookup.
    Stat,
    /// An unlink's lookup (then the removal, from the same sub-slot).
    UnlinkLookup(Op),
    /// An unlink's removal of inode `.0`.
    Unlink(u64),
    /// mkdir, rmdir: the answer is the result.
    Plain,
    /// fsync's flush (its write-back is done).
    Fsync,
    /// fsync's write-back job in flight (then its `Fsync` of `ino`).
    FsyncWriteBack { wb: u64, ino: u64 },
    /// close's write-back job in flight (then done).
    CloseWriteBack { wb: u64 },
    /// A truncate's write-back job in flight (then the truncate's own
    /// steps, see [`Node::send_truncate`]).
    TruncWriteBack { wb: u64, fd: Fd, size: u64 },
    /// A truncate's `Getattr` of the size before (then its `Setattr`).
    TruncOld { ino: u64, gen: u64, size: u64 },
    /// A truncate's `Setattr` of generation `gen` of `ino` (`old`: the
    /// size before, if asked; a growth refused as `Busy` is asked again
    /// until `busy_until`).
    Trunc {
        ino: u64,
        gen: u64,
        size: u64,
        old: Option<u64>,
        busy_until: u64,
    },
    /// A readdir's lookup of its path (then its `Readdir`s).
    ReaddirLookup,
    /// A readdir's `Readdir` of directory `.0`; the entries so far are in
    /// the job.
    Readdir(u64),
}

#[derive(Debug)]
struct Job {
    tag: u32,
    op: Op,
    step: Step,
    /// Byte offset of the sub-slot of bulk slot 0 holding the path.
    sub: Option<usize>,
    /// The path's length.
    len: u32,
    /// A readdir's entries so far.
    entries: Vec<DirEntry>,
    /// `net` mode: the path, restaged for a next step (an unlink's
    /// removal after its lookup); the rings keep it in the sub-slot.
    path: Option<alloc::string::String>,
}

/// The calls in flight and the free path sub-slots.
#[derive(Debug, Default)]
pub struct MetaJobs {
    jobs: BTreeMap<u64, Job>,
    next: u64,
    free: Vec<usize>,
    /// Sub-slots that exist (bulk slot 0 / [`MAX_PATH`]).
    subs: usize,
    /// Calls started in flight, and the most in flight together.
    pub started: u64,
    /// Most calls in flight together.
    pub max_in_flight: usize,
    /// The readdir in flight, which holds bulk slot 3 (its ticket).
    dir_holder: Option<u64>,
    /// Results of calls finished before their task polled them (a
    /// readdir another readdir waited for).
    done: BTreeMap<u64, Result<MetaDone, Errno>>,
}

impl MetaJobs {
    /// A free sub-slot's byte offset. With nothing in flight every
    /// sub-slot is free again (a call given up on its timeout keeps its
    /// sub-slot until then: the directory may still read it).
    fn take_sub(&mut self, cap: usize) -> Option<usize> {
        if self.jobs.is_empty() {
            self.subs = cap / MAX_PATH;
            self.free = (1..self.subs).rev().collect();
        }
        self.free.pop().map(|k| k * MAX_PATH)
    }

    fn give_sub(&mut self, at: Option<usize>) {
        if let Some(at) = at {
            self.free.push(at / MAX_PATH);
        }
    }

    fn add(&mut self, job: Job) -> MetaTicket {
        self.next += 1;
        self.jobs.insert(self.next, job);
        self.started += 1;
        self.max_in_flight = self.max_in_flight.max(self.jobs.len());
        MetaTicket(self.next)
    }

    /// Opens in flight.
    fn opens(&self) -> usize {
        self.jobs
            .values()
            .filter(|j| matches!(j.step, Step::Open(_) | Step::OpenTrunc(_)))
            .count()
    }

    /// Calls in flight.
    pub fn in_flight(&self) -> usize {
        self.jobs.len()
    }
}

/// Where a step leads.
enum Next {
    Wait(Job),
    Done(Result<MetaDone, Errno>),
}

impl<E: Env> Node<E> {
    /// Start a metadata call (see the module doc).
    pub fn meta_start(&mut self, call: MetaCall) -> MetaStart {
        // A task's close or fsync may write back: not before a write-back
        // given up unanswered is settled (`Vfs::settle_doubts`).
        if self.link.any_in_doubt() {
            if let Err(e) = self.vfs.settle_doubts(&mut self.link) {
                return MetaStart::Done(Err(e));
            }
        }
        let r = match &call {
            MetaCall::Open { path, flags } => {
                // Every open in flight will take a descriptor.
                if self.vfs.free_fds() <= self.meta.opens() {
                    return MetaStart::Done(Err(Errno::TooManyFiles));
                }
                self.mmap_files.clear(); // sizes may change
                let op = if flags.create { Op::Create } else { Op::Lookup };
                self.send_path(op, path, flags.exclusive, Step::Open(*flags))
            }
            MetaCall::Stat { path } => self.send_path(Op::Lookup, path, false, Step::Stat),
            MetaCall::Unlink { path } => {
                self.send_path(Op::Lookup, path, false, Step::UnlinkLookup(Op::Unlink))
            }
            MetaCall::Mkdir { path } => self.send_path(Op::Mkdir, path, false, Step::Plain),
            MetaCall::Rmdir { path } => self.send_path(Op::Rmdir, path, false, Step::Plain),
            MetaCall::Fsync { fd } => self.send_fsync(*fd),
            MetaCall::Truncate { fd, size } => self.send_truncate(*fd, *size),
            MetaCall::Readdir { path } => {
                // Slot 3 is one readdir's at a time.
                if let Some(h) = self.meta.dir_holder {
                    self.meta_settle(h);
                }
                let r = self.send_path(Op::Lookup, path, false, Step::ReaddirLookup);
                if let Some(Ok(job)) = r {
                    let t = self.meta.add(job);
                    self.meta.dir_holder = Some(t.0);
                    return MetaStart::Pending(t);
                }
                r
            }
            MetaCall::Close { fd } => {
                return match self.vfs.close_start(&mut self.link, *fd) {
                    Ok(WbStart::Done) => MetaStart::Done(Ok(MetaDone::Ok)),
                    Ok(WbStart::Started(wb)) => {
                        MetaStart::Pending(self.meta.add(wb_job(Step::CloseWriteBack { wb })))
                    }
                    Err(e) => MetaStart::Done(Err(e)),
                };
            }
        };
        match r {
            Some(Ok(job)) => MetaStart::Pending(self.meta.add(job)),
            Some(Err(e)) => MetaStart::Done(Err(e)),
            None => MetaStart::Done(self.meta_sync(call)),
        }
    }

    /// Is the call of `t` finished (see `userland::os::Os::meta_poll`)?
    pub fn meta_poll(&mut self, t: MetaTicket) -> Option<Result<MetaDone, Errno>> {
        if let Some(r) = self.meta.done.remove(&t.0) {
            return Some(r);
        }
        let Some(job) = self.meta.jobs.get(&t.0) else {
            return Some(Err(Errno::Invalid));
        };
        if let Step::FsyncWriteBack { wb, .. }
        | Step::CloseWriteBack { wb }
        | Step::TruncWriteBack { wb, .. } = job.step
        {
            return self.poll_write_back(t, wb);
        }
        let r = self.link.poll_call(job.tag, job.op)?;
        let job = self.meta.jobs.remove(&t.0)?;
        match self.advance(job, r) {
            Next::Wait(job) => {
                self.meta.jobs.insert(t.0, job);
                None
            }
            Next::Done(r) => {
                if self.meta.dir_holder == Some(t.0) {
                    self.meta.dir_holder = None;
                }
                Some(r)
            }
        }
    }

    /// Run the call of ticket `h` to its end now (every step waits at
    /// most the link's call timeout) and keep its result for its task.
    fn meta_settle(&mut self, h: u64) {
        while self.meta.jobs.contains_key(&h) {
            if let Some(r) = self.meta_poll(MetaTicket(h)) {
                self.meta.done.insert(h, r);
                return;
            }
            self.meta_wait();
        }
    }

    /// `call` at once, with the synchronous operations.
    pub fn meta_sync(&mut self, call: MetaCall) -> Result<MetaDone, Errno> {
        match call {
            MetaCall::Open { path, flags } => self.open(&path, flags).map(MetaDone::Fd),
            MetaCall::Stat { path } => self.stat(&path).map(MetaDone::Attr),
            MetaCall::Close { fd } => self.close(fd).map(|()| MetaDone::Ok),
            MetaCall::Fsync { fd } => self.fsync(fd).map(|()| MetaDone::Ok),
            MetaCall::Truncate { fd, size } => self.truncate(fd, size).map(|()| MetaDone::Ok),
            MetaCall::Unlink { path } => self.unlink(&path).map(|()| MetaDone::Ok),
            MetaCall::Mkdir { path } => self.mkdir(&path).map(|()| MetaDone::Ok),
            MetaCall::Rmdir { path } => self.rmdir(&path).map(|()| MetaDone::Ok),
            MetaCall::Readdir { path } => self.readdir(&path).map(MetaDone::Entries),
        }
    }

    /// One wait step for the answers of the calls in flight.
    pub fn meta_wait(&mut self) {
        if self.meta.in_flight() > 0 {
            self.link.wait_calls(self.vfs.session());
        }
    }

    /// The calls in flight so far: (started, most in flight together).
    pub fn meta_counts(&self) -> (u64, usize) {
        (self.meta.started, self.meta.max_in_flight)
    }

    /// Send a path request from a free sub-slot; `None`: none is free
    /// (the caller runs the call synchronously).
    fn send_path(
        &mut self,
        op: Op,
        path: &str,
        exclusive: bool,
        step: Step,
    ) -> Option<Result<Job, Errno>> {
        if !self.link.rings() {
            // `net` mode: the path goes into the request's frame at once,
            // so every call stages it at the start of the slot.
            return Some(
                self.send_path_at(op, path, exclusive, step, 0)
                    .map(|mut j| {
                        j.sub = None;
                        j.path = Some(alloc::string::String::from(path));
                        j
                    }),
            );
        }
        let cap = match self.link.bulk_cap(0) {
            Ok(c) => c,
            Err(e) => return Some(Err(e)),
        };
        let at = self.meta.take_sub(cap)?;
        Some(self.send_path_at(op, path, exclusive, step, at))
    }

    fn send_path_at(
        &mut self,
        op: Op,
        path: &str,
        exclusive: bool,
        step: Step,
        at: usize,
    ) -> Result<Job, Errno> {
        let r = Vfs::path_request(&mut self.link, op, path, exclusive, at)
            .and_then(|req| self.link.start_call(&req, self.vfs.session()));
        match r {
            Ok(tag) => Ok(Job {
                tag,
                op,
                step,
                sub: Some(at),
                len: path.len() as u32,
                entries: Vec::new(),
                path: None,
            }),
            Err(e) => {
                if self.link.rings() {
                    self.meta.give_sub(Some(at));
                }
                Err(e)
            }
        }
    }

    /// fsync: its write-back (in flight where the data path can, see
    /// [`Vfs::fsync_start`]), then the flush request in flight.
    fn send_fsync(&mut self, fd: Fd) -> Option<Result<Job, Errno>> {
        let r = match self.vfs.fsync_start(&mut self.link, fd) {
            Ok((ino, WbStart::Started(wb))) => {
                return Some(Ok(wb_job(Step::FsyncWriteBack { wb, ino })))
            }
            Ok((ino, WbStart::Done)) => self.send_flush(ino),
            Err(e) => Err(e),
        };
        Some(r.map(flush_job))
    }

    /// fsync's `Fsync` of `ino`, in flight: its tag.
    fn send_flush(&mut self, ino: u64) -> Result<u32, Errno> {
        self.link
            .start_call(&Request::Fsync { ino }, self.vfs.session())
    }

    /// The job of ticket `t` waits for its write-back job `wb`: when that
    /// is done, a close is done and an fsync sends its `Fsync`.
    fn poll_write_back(&mut self, t: MetaTicket, wb: u64) -> Option<Result<MetaDone, Errno>> {
        let r = self.vfs.write_back_poll(&mut self.link, wb)?;
        let job = self.meta.jobs.remove(&t.0)?;
        match (job.step, r) {
            (Step::FsyncWriteBack { ino, .. }, Ok(())) => match self.send_flush(ino) {
                Ok(tag) => {
                    self.meta.jobs.insert(t.0, flush_job(tag));
                    None
                }
                Err(e) => Some(Err(e)),
            },
            (Step::TruncWriteBack { fd, size, .. }, Ok(())) => {
                match self.truncate_steps(fd, size) {
                    Ok(job) => {
                        self.meta.jobs.insert(t.0, job);
                        None
                    }
                    Err(e) => Some(Err(e)),
                }
            }
            (_, r) => Some(r.map(|()| MetaDone::Ok)),
        }
    }

    /// truncate: the write-back of buffered data (in flight where the
    /// data path can; then [`Node::truncate_steps`] once it is done),
    /// else [`Node::truncate_steps`] now.
    fn send_truncate(&mut self, fd: Fd, size: u64) -> Option<Result<Job, Errno>> {
        match self
            .vfs
            .write_back_start(&mut self.link, fd, WbWhy::Truncate(size))
        {
            Ok(Some(WbStart::Started(wb))) => {
                Some(Ok(wb_job(Step::TruncWriteBack { wb, fd, size })))
            }
            Err(e) => Some(Err(e)),
            Ok(_) => Some(self.truncate_steps(fd, size)),
        }
    }

    /// truncate: the local work now (what is left to write back, usually
    /// nothing after a write-back in flight), then the size before (single
    /// copy) and the `Setattr` in flight.
    fn truncate_steps(&mut self, fd: Fd, size: u64) -> Result<Job, Errno> {
        let (ino, gen) = self.vfs.truncate_prepare(&mut self.link, fd, size)?;
        let (req, step) = if self.vfs.truncate_needs_old() {
            (Request::Getattr { ino }, Step::TruncOld { ino, gen, size })
        } else {
            (
                set_size(ino, gen, size),
                Step::Trunc {
                    ino,
                    gen,
                    size,
                    old: None,
                    busy_until: self.link.deadline(),
                },
            )
        };
        match self.start(&req, step, None, 0) {
            Next::Wait(job) => Ok(job),
            Next::Done(r) => Err(r.err().unwrap_or(Errno::Io)),
        }
    }

    fn start(&mut self, req: &Request, step: Step, sub: Option<usize>, len: u32) -> Next {
        match self.link.start_call(req, self.vfs.session()) {
            Ok(tag) => Next::Wait(Job {
                tag,
                op: fabric::proto::op_of(req),
                step,
                sub,
                len,
                entries: Vec::new(),
                path: None,
            }),
            Err(e) => {
                self.meta.give_sub(sub);
                Next::Done(Err(e))
            }
        }
    }

    /// The answer `r` of `job` came: the next request, or the result.
    fn advance(&mut self, job: Job, r: Result<Response, Errno>) -> Next {
        let r = match r {
            Ok(r) => r,
            Err(e) => return self.failed(job, e),
        };
        match job.step {
            Step::UnlinkLookup(op) => self.unlink_looked_up(job, op, r),
            Step::ReaddirLookup => {
                self.meta.give_sub(job.sub);
                match attr_of(r).and_then(|a| Vfs::<E>::readdir_ino(&a)) {
                    Ok(ino) => self.start(
                        &Vfs::<E>::readdir_request(ino, 0),
                        Step::Readdir(ino),
                        None,
                        0,
                    ),
                    Err(e) => Next::Done(Err(e)),
                }
            }
            Step::Readdir(ino) => self.readdir_next(job, ino, r),
            Step::TruncOld { ino, gen, size } => match attr_of(r) {
                Ok(old) => {
                    self.vfs.learn_meta(&old);
                    let step = Step::Trunc {
                        ino,
                        gen,
                        size,
                        old: Some(old.size),
                        busy_until: self.link.deadline(),
                    };
                    self.start(&set_size(ino, gen, size), step, None, 0)
                }
                Err(e) => Next::Done(Err(e)),
            },
            step => {
                self.meta.give_sub(job.sub);
                self.finish(step, r)
            }
        }
    }

    /// `job` failed with `e`: the result, or a truncate's growth asked
    /// again.
    fn failed(&mut self, job: Job, e: Errno) -> Next {
        match (e, job.step) {
            // A growth over pages another node's shrink is still tearing
            // down: ask again (this node services its notices meanwhile,
            // it may hold some of those pages) until the teardown ended.
            (
                Errno::Busy,
                Step::Trunc {
                    ino,
                    gen,
                    size,
                    old,
                    busy_until,
                },
            ) if self.link.env.now_ns() < busy_until => {
                self.meta.give_sub(job.sub);
                let step = Step::Trunc {
                    ino,
                    gen,
                    size,
                    old,
                    busy_until,
                };
                self.start(&set_size(ino, gen, size), step, None, 0)
            }
            (Errno::Busy, _) => {
                self.meta.give_sub(job.sub);
                Next::Done(Err(Errno::Busy))
            }
            _ => {
                // Given up (or no session): the directory may still read
                // the sub-slot, so it stays taken until nothing is in
                // flight.
                if e != Errno::Unavailable {
                    self.meta.give_sub(job.sub);
                }
                Next::Done(Err(e))
            }
        }
    }

    /// An unlink's lookup answered `r`: remove the inode it found.
    fn unlink_looked_up(&mut self, job: Job, op: Op, r: Response) -> Next {
        // Pages placed under a delegation of the file go back first.
        if let (Ok(a), Some(st)) = (attr_of(r), self.vfs.data_path().single_copy()) {
            if let Err(e) = st.return_file(&mut self.link, a.ino) {
                self.meta.give_sub(job.sub);
                return Next::Done(Err(e));
            }
        }
        match (attr_of(r), job.sub, job.path) {
            // `net` mode: stage the path again and remove it.
            (Ok(a), None, Some(path)) => {
                match self.send_path(op, &path, false, Step::Unlink(a.ino)) {
                    Some(Ok(j)) => Next::Wait(j),
                    Some(Err(e)) => Next::Done(Err(e)),
                    None => Next::Done(Err(Errno::Io)),
                }
            }
            // The path is still in the job's sub-slot: remove it.
            (Ok(a), Some(at), _) => {
                let req = Request::Path {
                    op,
                    slot: 0,
                    at: at as u32,
                    len: job.len,
                    exclusive: false,
                };
                self.start(&req, Step::Unlink(a.ino), job.sub, job.len)
            }
            (r, ..) => {
                self.meta.give_sub(job.sub);
                Next::Done(r.and(Err(Errno::Io)))
            }
        }
    }

    /// A `Readdir` of directory `ino` answered `r`: its entries kept, the
    /// next `Readdir` sent, or the entries returned.
    fn readdir_next(&mut self, job: Job, ino: u64, r: Response) -> Next {
        let mut entries = job.entries;
        match Vfs::readdir_take(&mut self.link, r, &mut entries) {
            Ok(Some(cookie)) => {
                let req = Vfs::<E>::readdir_request(ino, cookie);
                match self.start(&req, Step::Readdir(ino), None, 0) {
                    Next::Wait(mut j) => {
                        j.entries = entries;
                        Next::Wait(j)
                    }
                    done => done,
                }
            }
            Ok(None) => Next::Done(Ok(MetaDone::Entries(Vfs::<E>::readdir_done(entries)))),
            Err(e) => Next::Done(Err(e)),
        }
    }

    fn finish(&mut self, step: Step, r: Response) -> Next {
        match step {
            Step::Open(flags) => {
                let looked_up = attr_of(r);
                let gen = looked_up.as_ref().map_or(0, Attr::gen);
                let a = match looked_up.and_then(|a| self.vfs.open_looked_up(a, flags)) {
                    Ok(OpenNext::Ready(a)) => a,
                    Ok(OpenNext::Truncate(ino)) => {
                        let req = Request::Setattr {
                            gen,
                            ino,
                            size: 0,
                            expect: None,
                            locked: false,
                        };
                        return self.start(&req, Step::OpenTrunc(flags), None, 0);
                    }
                    Err(e) => return Next::Done(Err(e)),
                };
                Next::Done(self.vfs.install(&a, flags).map(MetaDone::Fd))
            }
            Step::OpenTrunc(flags) => Next::Done(attr_of(r).and_then(|a| {
                self.vfs.open_truncated(&self.link.env, &a);
                self.vfs.install(&a, flags).map(MetaDone::Fd)
            })),
            Step::Stat => Next::Done(attr_of(r).map(|a| MetaDone::Attr(self.vfs.stat_attr(a)))),
            Step::Unlink(ino) => {
                self.vfs.unlinked(&self.link.env, ino);
                Next::Done(Ok(MetaDone::Ok))
            }
            Step::Plain | Step::Fsync => Next::Done(Ok(MetaDone::Ok)),
            Step::Trunc { ino, size, old, .. } => Next::Done(attr_of(r).map(|a| {
                self.vfs.truncated(&self.link.env, ino, size, old, &a);
                MetaDone::Ok
            })),
            Step::UnlinkLookup(_)
            | Step::TruncOld { .. }
            | Step::ReaddirLookup
            | Step::Readdir(_)
            | Step::FsyncWriteBack { .. }
            | Step::CloseWriteBack { .. }
            | Step::TruncWriteBack { .. } => Next::Done(Err(Errno::Io)),
        }
    }
}

/// A job that waits for no request of its own yet (a write-back job).
fn wb_job(step: Step) -> Job {
    Job {
        tag: 0,
        op: Op::Write,
        step,
        sub: None,
        len: 0,
        entries: Vec::new(),
        path: None,
    }
}

/// fsync's `Fsync` in flight as call `tag`.
fn flush_job(tag: u32) -> Job {
    Job {
        tag,
        op: Op::Fsync,
        ..wb_job(Step::Fsync)
    }
}

/// The `Setattr` of a truncate of generation `gen` of `ino` to `size`.
fn set_size(ino: u64, gen: u64, size: u64) -> Request {
    Request::Setattr {
        gen,
        ino,
        size,
        expect: None,
        locked: false,
    }
}
