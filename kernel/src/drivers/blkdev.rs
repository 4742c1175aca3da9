//! The virtio-blk device at the virtqueue level, on `virtio-drivers`'
//! transport and queue types: `virtio-drivers` 0.13 (the newest release)
//! fixes its own block driver's queue at 16 entries, so this driver sets
//! the queue up itself with [`QUEUE_SIZE`] entries and speaks the block
//! request format (virtio 1.2, 5.2.6) directly.
//!
//! A [`Request`] owns its buffers; the device holds it (in this struct)
//! from [`BlkDev::submit`] until [`BlkDev::pop`] hands it back, so no
//! buffer can be touched or freed while the device may access it.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use flatfs::BLOCK_SIZE;
use virtio_drivers::queue::VirtQueue;
use virtio_drivers::transport::pci::PciTransport;
use virtio_drivers::transport::Transport;

use super::hal::KernelHal;

/// Entries in the request queue. With indirect descriptors (QEMU offers
/// them) every request takes one entry; without, three.
pub const QUEUE_SIZE: usize = 64;

/// Most blocks of one write request (128 KiB).
pub const MAX_WRITE_RUN: usize = 32;

const QUEUE: u16 = 0;
const T_IN: u32 = 0;
const T_OUT: u32 = 1;
const T_FLUSH: u32 = 4;
const S_OK: u8 = 0;

bitflags::bitflags! {
    /// The feature bits this driver negotiates.
    #[derive(Copy, Clone, Debug, Default, Eq, PartialEq)]
    struct Features: u64 {
        const RO = 1 << 5;
        const FLUSH = 1 << 9;
        const RING_INDIRECT_DESC = 1 << 28;
        const VERSION_1 = 1 << 32;
    }
}

/// What a request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Read one block into the buffer.
    Read,
    /// Write the buffer to one block.
    Write,
    /// Make completed writes durable.
    Flush,
}

/// One block request and its buffers.
pub struct Request {
    /// What it does.
    pub kind: Kind,
    header: Box<[u8; 16]>,
    /// The block's bytes (read into, or written from).
    pub buf: Box<[u8; BLOCK_SIZE]>,
    /// A write of a run: the blocks after the first, in order.
    more: Vec<Box<[u8; BLOCK_SIZE]>>,
    status: Box<[u8; 1]>,
}

impl Request {
    /// A request of `kind` on 4 KiB block `lba` (ignored for a flush);
    /// `buf` is the data to write, or the buffer to read into.
    pub fn new(kind: Kind, lba: u64, buf: Box<[u8; BLOCK_SIZE]>) -> Request {
        let (t, sector) = match kind {
            Kind::Read => (T_IN, lba * (BLOCK_SIZE as u64 / 512)),
            Kind::Write => (T_OUT, lba * (BLOCK_SIZE as u64 / 512)),
            Kind::Flush => (T_FLUSH, 0),
        };
        let mut header = Box::new([0u8; 16]);
        header[0..4].copy_from_slice(&t.to_le_bytes());
        header[8..16].copy_from_slice(&sector.to_le_bytes());
        Request {
            kind,
            header,
            buf,
            more: Vec::new(),
            status: Box::new([0xFF]),
        }
    }

    /// A write of the consecutive blocks from `lba` (one request, one
    /// completion); `None` for no blocks.
    pub fn write_run(lba: u64, bufs: Vec<Box<[u8; BLOCK_SIZE]>>) -> Option<Request> {
        let mut it = bufs.into_iter();
        let mut r = Request::new(Kind::Write, lba, it.next()?);
        r.more = it.collect();
        Some(r)
    }

    /// Did the device report success?
    pub fn ok(&self) -> bool {
        self.status[0] == S_OK
    }
}

/// The device and its request queue.
pub struct BlkDev {
    transport: PciTransport,
    queue: VirtQueue<KernelHal, QUEUE_SIZE>,
    sectors: u64,
    indirect: bool,
    /// Requests the device holds, by token.
    held: BTreeMap<u16, Request>,
}

impl BlkDev {
    /// Negotiate features, set up the request queue and start the device.
    pub fn new(mut transport: PciTransport) -> Result<BlkDev, &'static str> {
        // No VIRTIO_F_EVENT_IDX: with it, `virtio-drivers` asks for an
        // interrupt after every completion and ignores `set_dev_notify`;
        // without it the avail ring's flag turns completion interrupts on
        // only while the directory halts for the disk.
        let want =
            Features::RO | Features::FLUSH | Features::RING_INDIRECT_DESC | Features::VERSION_1;
        let got = transport.begin_init(want);
        let sectors = transport
            .read_consistent(|| {
                let lo: u32 = transport.read_config_space(0)?;
                let hi: u32 = transport.read_config_space(4)?;
                Ok(u64::from(lo) | u64::from(hi) << 32)
            })
            .map_err(|_| "virtio-blk: cannot read the capacity")?;
        let indirect = got.contains(Features::RING_INDIRECT_DESC);
        let queue = VirtQueue::new(&mut transport, QUEUE, indirect, false)
            .map_err(|_| "virtio-blk: the device's queue is smaller than ours")?;
        transport.finish_init();
        Ok(BlkDev {
            transport,
            queue,
            sectors,
            indirect,
            held: BTreeMap::new(),
        })
    }

    /// Capacity in 512-byte sectors.
    pub fn sectors(&self) -> u64 {
        self.sectors
    }

    /// Most requests the queue holds at once.
    pub fn max_requests(&self) -> usize {
        if self.indirect {
            QUEUE_SIZE
        } else {
            QUEUE_SIZE / 3
        }
    }

    /// Most blocks one write request carries: a run takes one entry of
    /// the queue with indirect descriptors (its segments, two more than
    /// its blocks, well within the device's `seg_max`); without, every
    /// block would take an entry of its own, so a write is one block.
    pub fn max_write_run(&self) -> usize {
        if self.indirect {
            MAX_WRITE_RUN
        } else {
            1
        }
    }

    /// Requests the device holds.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Turn the device's used-buffer notifications off (this driver polls)
    /// and acknowledge any pending interrupt.
    pub fn quiet(&mut self) {
        self.queue.set_dev_notify(false);
        let _ = self.transport.ack_interrupt();
    }

    /// Turn the device's used-buffer notifications (completion
    /// interrupts) on or off.
    pub fn set_notify(&mut self, on: bool) {
        self.queue.set_dev_notify(on);
    }

    /// Has the device finished a request [`BlkDev::pop`] has not taken?
    pub fn has_used(&self) -> bool {
        self.queue.can_pop()
    }

    /// Hand `r` to the device; its token. `Err` gives it back (queue full).
    pub fn submit(&mut self, mut r: Request) -> Result<u16, Request> {
        let Request {
            kind,
            header,
            buf,
            more,
            status,
        } = &mut r;

        // SAFETY: the buffers are boxed inside `r`, which is moved into
        // `held` right below and stays there, untouched, until `pop` takes
        // it out after the device returned the token; moving the `Request`
        // does not move the boxed bytes the descriptors point at.
        let token = unsafe {
            match kind {
                Kind::Read => self
                    .queue
                    .add(&[&header[..]], &mut [&mut buf[..], &mut status[..]]),
                Kind::Write => {
                    // The header, then every block of the run.
                    let outs = write_parts(header, buf, more);
                    self.queue.add(&outs, &mut [&mut status[..]])
                }
                Kind::Flush => self.queue.add(&[&header[..]], &mut [&mut status[..]]),
            }
        };
        let Ok(token) = token else {
            return Err(r);
        };
        self.held.insert(token, r);
        if self.queue.should_notify() {
            self.transport.notify(QUEUE);
        }
        Ok(token)
    }

    /// The next request the device finished: its token and the request
    /// (buffers and status). `None` if none finished, or if the used ring
    /// names a token this driver never handed out (a broken device: the
    /// requests it holds then time out in the caller).
    pub fn pop(&mut self) -> Option<(u16, Request)> {
        let token = self.queue.peek_used()?;
        let Some(mut r) = self.held.remove(&token) else {
            log::error!("virtio-blk: unknown token {token} in the used ring");
            return None;
        };
        let Request {
            kind,
            header,
            buf,
            more,
            status,
        } = &mut r;
        // SAFETY: the same buffers `submit` added with this token.
        let popped = unsafe {
            match kind {
                Kind::Read => {
                    self.queue
                        .pop_used(token, &[&header[..]], &mut [&mut buf[..], &mut status[..]])
                }
                Kind::Write => {
                    let outs = write_parts(header, buf, more);
                    self.queue.pop_used(token, &outs, &mut [&mut status[..]])
                }
                Kind::Flush => self
                    .queue
                    .pop_used(token, &[&header[..]], &mut [&mut status[..]]),
            }
        };
        if popped.is_err() {
            status[0] = 0xFF; // report it failed
        }
        Some((token, r))
    }
}

/// A write's device-readable buffers, in order: the header, then every
/// block of the run.
fn write_parts<'a>(
    header: &'a [u8; 16],
    buf: &'a [u8; BLOCK_SIZE],
    more: &'a [Box<[u8; BLOCK_SIZE]>],
) -> Vec<&'a [u8]> {
    let mut outs: Vec<&[u8]> = Vec::with_capacity(2 + more.len());
    outs.push(&header[..]);
    outs.push(&buf[..]);
    outs.extend(more.iter().map(|b| &b[..]));
    outs
}

impl Drop for BlkDev {
    fn drop(&mut self) {
        // The device must not touch the queue's memory once it is freed.
        self.transport.queue_unset(QUEUE);
    }
}
