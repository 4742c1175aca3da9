//! What the data path needs from its host, as small traits: the kernel
//! implements them over the real devices, host tests fake them (see
//! [`crate::rig`]).
//!
//! * [`Clock`]: a monotonic clock and one "wait step" while waiting for
//!   the directory (kernel: spin briefly, then `hlt`; host: run the
//!   directory and advance a fake clock).
//! * [`Mapper`]: 4 KiB page-table entries of the mmap windows (kernel:
//!   real page tables; host: a recorded map).
//! * [`Doorbell`]: interrupts between this node and the directory (kernel:
//!   ivshmem-doorbell; host and doorbells off: the no-op defaults, waits
//!   fall back to [`Clock::wait_step`]).
//! * [`FileServer`]: a file-server transport other than the rings (`net`
//!   mode's TCP connection).
//! * [`Env`]: the bundle, plus the shared region ([`SharedMem`]).

use alloc::vec::Vec;

use fabric::layout::Layout;
use fabric::proto::{Errno, Request, Response};
use fabric::shm::SharedMem;

/// Time and waiting.
pub trait Clock {
    /// A monotonic clock in nanoseconds.
    fn now_ns(&self) -> u64;
    /// One step of waiting for the directory: `spinning` during the first
    /// [`crate::wait::SPIN_NS`] of a wait (the kernel pauses), afterwards
    /// the kernel halts until the next interrupt.
    fn wait_step(&self, spinning: bool);
}

/// Doorbells: wake the directory after publishing work for it, and sleep
/// until an interrupt instead of halting until the next timer tick. The
/// defaults are "no doorbells".
pub trait Doorbell {
    /// A request or an ack was published on this node's rings: ring the
    /// directory if it sleeps (suppressed while it is awake).
    fn ring_directory(&self) {}
    /// Halt once until a doorbell (or another interrupt), unless
    /// `has_work` (checked after announcing the sleep) finds work or
    /// `deadline_ns` (on [`Clock::now_ns`]) passed. False: no doorbells
    /// here, the caller waits with [`Clock::wait_step`] instead. `quiet`:
    /// announce a quiet sleep (`fabric::doorbell::SLEEP_QUIET`: the
    /// directory may take DIR_INVs published meanwhile as acknowledged);
    /// the caller services its notices after this returns, before it
    /// touches a shared page.
    fn sleep_until_event(
        &self,
        _deadline_ns: u64,
        _quiet: bool,
        _has_work: &mut dyn FnMut() -> bool,
    ) -> bool {
        false
    }
    /// How long a wait spins before it sleeps ([`crate::wait::SPIN_NS`]
    /// without doorbells). With doorbells a short spin: a node that spins
    /// keeps its host CPU from the instance whose answer it waits for (a
    /// sharer it must wait for may run on the same host CPU), and a
    /// doorbell wakes it when the answer comes.
    fn spin_ns(&self) -> u64 {
        crate::wait::SPIN_NS
    }
}

/// Page-table entries of the mmap windows.
pub trait Mapper {
    /// Map the 4 KiB page at virtual `va` to physical `pa` (replacing an
    /// existing mapping).
    fn map_4k(&self, va: u64, pa: u64) -> Result<(), Errno>;
    /// Remove the mapping at `va`, if any, with its TLB flush.
    fn unmap_4k(&self, va: u64);
    /// Physical address of the shared region (frame `gfn` is at
    /// `shm_pa + gfn * 4096`).
    fn shm_pa(&self) -> u64;
    /// A zeroed frame for window faults on pages no longer resident (0:
    /// none, the fault is refused).
    fn zero_pa(&self) -> u64;
}

/// A file-server transport other than the rings (`net` mode): one
/// request at a time, pipelined reads, and four staging slots that play
/// the part of the bulk slots.
pub trait FileServer {
    /// One file-server request (metadata or data); a refused one is
    /// `Err` with the server's error, never `Ok(Response::Err(_))`.
    fn call(&mut self, req: &Request) -> Result<Response, Errno>;
    /// Several reads (`Request::Data` into slot 1) in flight together, each
    /// answer with its data; a refused one is `Response::Err` in place.
    fn call_batch(&mut self, reqs: &[Request]) -> Result<Vec<(Response, Vec<u8>)>, Errno>;
    /// Capacity of slot `slot`.
    fn bulk_cap(&self, slot: u32) -> Result<usize, Errno>;
    /// Put `data` at byte `at` of slot `slot`.
    fn bulk_write(&mut self, slot: u32, at: usize, data: &[u8]) -> Result<(), Errno>;
    /// Copy the head of slot `slot` into `buf`.
    fn bulk_read(&mut self, slot: u32, buf: &mut [u8]) -> Result<(), Errno>;
    /// Send `req` without waiting for its answer (a task's call in
    /// flight): its tag. `NotSupported` where the transport cannot.
    fn start(&mut self, req: &Request) -> Result<u32, Errno> {
        let _ = req;
        Err(Errno::NotSupported)
    }
    /// [`FileServer::start`] whose frame may wait for
    /// [`FileServer::send_started`] (or the next call, take or wait), so
    /// several started together go out in one segment.
    fn start_later(&mut self, req: &Request) -> Result<u32, Errno> {
        self.start(req)
    }
    /// Send the frames [`FileServer::start_later`] left waiting.
    fn send_started(&mut self) {}
    /// Send what waits and take in what arrived, once for a round of
    /// [`FileServer::take_kept`] calls.
    fn pump(&mut self) {}
    /// [`FileServer::take`] of what [`FileServer::pump`] (or any earlier
    /// take) already took in: `None` while it is in flight.
    fn take_kept(&mut self, tag: u32) -> Option<Result<Response, Errno>> {
        self.take(tag)
    }
    /// The answer to started request `tag`, taking in what arrived:
    /// `None` while it is in flight, `Unavailable` if it was lost (the
    /// connection dropped). Its payload, if any, is then in its slot.
    fn take(&mut self, tag: u32) -> Option<Result<Response, Errno>> {
        let _ = tag;
        Some(Err(Errno::NotSupported))
    }
    /// The caller of started request `tag` gave up: drop its answer.
    fn forget(&mut self, tag: u32) {
        let _ = tag;
    }
    /// Nothing else to do: wait a little for answers (halt until the
    /// NIC's interrupt or a timer).
    fn wait(&mut self) {}
}

/// A transport that does not exist (hosts without a network).
#[derive(Debug)]
pub enum NoNet {}

impl FileServer for NoNet {
    fn call(&mut self, _: &Request) -> Result<Response, Errno> {
        match *self {}
    }
    fn call_batch(&mut self, _: &[Request]) -> Result<Vec<(Response, Vec<u8>)>, Errno> {
        match *self {}
    }
    fn bulk_cap(&self, _: u32) -> Result<usize, Errno> {
        match *self {}
    }
    fn bulk_write(&mut self, _: u32, _: usize, _: &[u8]) -> Result<(), Errno> {
        match *self {}
    }
    fn bulk_read(&mut self, _: u32, _: &mut [u8]) -> Result<(), Errno> {
        match *self {}
    }
}

/// Everything the node data path runs on.
pub trait Env: Clock + Mapper + Doorbell {
    /// The shared region.
    type Mem: SharedMem + ?Sized;
    /// `net` mode's file-server transport.
    type Net: FileServer;
    /// The shared region.
    fn mem(&self) -> &Self::Mem;
    /// A fresh join nonce.
    fn nonce(&self) -> u64;
    /// The region's layout was validated (the kernel starts beating this
    /// node's heartbeat from its timer tick).
    fn layout_known(&self, _layout: &Layout, _node: u32) {}
    /// A full memory fence between this instance and the others (orders
    /// a store of our `writing` word before the load of a replica bit,
    /// see `ScState::begin_store`). The kernel's is a port read: QEMU
    /// drops a guest `mfence` under single-threaded TCG.
    fn fence(&self) {
        core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
    }
}
