//! virtio-net through `virtio-drivers`, as a `smoltcp` [`Device`] (the
//! `net` mode's NICs).
//!
//! Every NIC is one end of a point-to-point link (a QEMU `-netdev stream`
//! over a unix socket). `qemu-run.sh` gives each NIC a MAC of the form
//! `52:54:00:0c:SS:KK`: `SS` is 0 on the directory's side and 1 on the
//! node's side, `KK` is the node id, so the directory knows which node a
//! NIC leads to without trusting the order of PCI enumeration.

use alloc::vec::Vec;

use alloc::vec;
use smoltcp::phy::{Checksum, ChecksumCapabilities, Device, DeviceCapabilities, Medium};
use smoltcp::time::Instant;
use virtio_drivers::device::net::VirtIONetRaw;
use virtio_drivers::transport::pci::bus::PciRoot;
use virtio_drivers::transport::pci::{virtio_device_type, PciTransport};
use virtio_drivers::transport::DeviceType;

use super::hal::KernelHal;
use super::pci::{self, PortCam};
use crate::arch::interrupts;

/// Descriptors per virtqueue (receive buffers posted at once): 32 jumbo
/// buffers are 290 KiB of heap per NIC, and the directory has one NIC per
/// node.
const QUEUE: usize = 32;
/// Largest Ethernet frame we send: jumbo frames (MTU 9000, as NFS
/// servers on 10 GbE commonly use) plus 14 bytes of Ethernet header. Both
/// ends of every link are our kernels, so both post receive buffers this
/// large and QEMU's stream backend carries the frames whole.
pub const FRAME_MAX: usize = 9014;
/// Receive buffer size: a jumbo frame plus the virtio-net header.
const RX_BUF: usize = FRAME_MAX + 64;

/// One virtio-net device. Built on the raw driver so that sending never
/// waits for the device: frames are queued (up to [`QUEUE`]) and their
/// buffers reclaimed later. A sender that spun until QEMU took each frame
/// would keep QEMU's I/O thread, which moves the frames, off the core.
pub struct Nic {
    dev: VirtIONetRaw<KernelHal, PciTransport, QUEUE>,
    /// Receive buffers posted to the device, by descriptor token.
    rx: Vec<Option<Vec<u8>>>,
    /// Frames queued for sending, by descriptor token (header included).
    tx: Vec<Option<Vec<u8>>>,
    mac: [u8; 6],
    /// The PCI INTx line (8259 numbering), if it could be claimed: used
    /// only to wake a halted CPU when a frame arrives.
    irq: Option<u8>,
    /// Frames received / sent (for `cache stats`).
    pub rx_frames: u64,
    pub tx_frames: u64,
}

impl Nic {
    /// The MAC address.
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// The node id encoded in the MAC (`52:54:00:0c:SS:KK` -> `KK`), or
    /// None for a MAC that `qemu-run.sh` did not assign.
    pub fn link_id(&self) -> Option<(u8, u32)> {
        let m = self.mac;
        (m[..4] == [0x52, 0x54, 0x00, 0x0c]).then_some((m[4], m[5] as u32))
    }

    /// Whether a received frame is waiting (cheap: one read of the used
    /// ring's index), so idle links cost the polling loop almost nothing.
    pub fn rx_pending(&self) -> bool {
        self.dev.poll_receive().is_some()
    }

    /// Post the receive buffer `buf` to the device.
    fn post_rx(&mut self, mut buf: Vec<u8>) -> bool {
        // SAFETY: the buffer is stored in `self.rx` under its token right
        // below and stays there, untouched and not moved (a Vec's heap
        // storage does not move with the Vec), until the device hands the
        // token back in `receive`.
        match unsafe { self.dev.receive_begin(&mut buf) } {
            Ok(t) => match self.rx.get_mut(t as usize) {
                Some(slot @ None) => {
                    *slot = Some(buf);
                    true
                }
                _ => {
                    log::error!("virtio-net: receive token {t} already in use");
                    // The device may still write into it: never free it.
                    core::mem::forget(buf);
                    false
                }
            },
            Err(e) => {
                log::error!("virtio-net: cannot post a receive buffer: {e:?}");
                false
            }
        }
    }

    /// Reclaim the buffers of frames the device has sent.
    fn reap_tx(&mut self) {
        while let Some(t) = self.dev.poll_transmit() {
            let Some(buf) = self.tx.get_mut(t as usize).and_then(Option::take) else {
                log::error!("virtio-net: device completed unknown send token {t}");
                return;
            };
            // SAFETY: `buf` is the buffer queued under token `t` by `send`.
            if let Err(e) = unsafe { self.dev.transmit_complete(t, &buf) } {
                log::warn!("virtio-net: transmit completion: {e:?}");
            }
        }
    }

    /// A buffer for one Ethernet frame of `len` bytes, starting with the
    /// virtio-net header; returns it and the header's length.
    fn frame_buf(&self, len: usize) -> (Vec<u8>, Option<usize>) {
        let mut buf = vec![0u8; len + 16];
        match self.dev.fill_buffer_header(&mut buf) {
            Ok(h) => {
                buf.truncate(h + len);
                (buf, Some(h))
            }
            Err(e) => {
                log::warn!("virtio-net: header: {e:?}");
                buf.truncate(len);
                (buf, None)
            }
        }
    }

    /// Queue a frame built in a [`Nic::frame_buf`] buffer.
    fn send(&mut self, buf: Vec<u8>) {
        // SAFETY: the buffer is stored in `self.tx` under its token below
        // and neither read nor moved until `reap_tx` takes it back.
        match unsafe { self.dev.transmit_begin(&buf) } {
            Ok(t) => match self.tx.get_mut(t as usize) {
                Some(slot @ None) => {
                    *slot = Some(buf);
                    self.tx_frames += 1;
                }
                _ => {
                    log::error!("virtio-net: send token {t} already in use");
                    // The device may still read it: never free it.
                    core::mem::forget(buf);
                }
            },
            Err(e) => log::warn!("virtio-net: send failed: {e:?}"),
        }
    }

    /// Acknowledge the device's interrupt and unmask its line, so the next
    /// received frame wakes a halted CPU. False if the NIC has no line
    /// (callers then poll).
    pub fn arm_wakeup(&mut self) -> bool {
        let Some(line) = self.irq else {
            return false;
        };
        self.dev.ack_interrupt();
        interrupts::rearm_irq(line);
        true
    }
}

/// Find and initialise every virtio-net device.
pub fn probe_all(root: &mut PciRoot<PortCam>) -> Vec<Nic> {
    let mut out = Vec::new();
    let found: Vec<_> = pci::devices(root)
        .into_iter()
        .filter(|(_, i)| virtio_device_type(i) == Some(DeviceType::Network))
        .collect();
    for (df, _) in found {
        pci::enable(root, df);
        let line = pci::interrupt_line(df);
        let irq = interrupts::claim_irq(line).then_some(line);
        let t = match PciTransport::new::<KernelHal, _>(root, df) {
            Ok(t) => t,
            Err(e) => {
                log::error!("virtio-net at {df}: transport: {e:?}");
                continue;
            }
        };
        match VirtIONetRaw::<KernelHal, _, QUEUE>::new(t) {
            Ok(dev) => {
                let mac = dev.mac_address();
                log::info!(
                    "virtio-net at {df} (irq {line}): mac {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
                    mac[0],
                    mac[1],
                    mac[2],
                    mac[3],
                    mac[4],
                    mac[5]
                );
                let mut nic = Nic {
                    dev,
                    mac,
                    irq,
                    rx: (0..QUEUE).map(|_| None).collect(),
                    tx: (0..QUEUE).map(|_| None).collect(),
                    rx_frames: 0,
                    tx_frames: 0,
                };
                let mut posted = 0;
                while posted < QUEUE && nic.post_rx(vec![0u8; RX_BUF]) {
                    posted += 1;
                }
                if posted == 0 {
                    log::error!("virtio-net at {df}: no receive buffer could be posted");
                    continue;
                }
                out.push(nic);
            }
            Err(e) => log::error!("virtio-net at {df}: init: {e:?}"),
        }
    }
    out
}

/// A received frame, copied out of the ring (the ring buffer is recycled
/// at once).
pub struct Rx(Vec<u8>);

/// Permission to send one frame.
pub struct Tx<'a>(&'a mut Nic);

impl smoltcp::phy::RxToken for Rx {
    fn consume<R, F>(self, f: F) -> R
    where
        F: FnOnce(&[u8]) -> R,
    {
        f(&self.0)
    }
}

impl smoltcp::phy::TxToken for Tx<'_> {
    fn consume<R, F>(self, len: usize, f: F) -> R
    where
        F: FnOnce(&mut [u8]) -> R,
    {
        let (mut buf, hdr) = self.0.frame_buf(len);
        let r = f(&mut buf[hdr.unwrap_or(0)..]);
        if hdr.is_some() {
            self.0.send(buf);
        }
        r
    }
}

impl Device for Nic {
    type RxToken<'a> = Rx;
    type TxToken<'a> = Tx<'a>;

    fn receive(&mut self, _now: Instant) -> Option<(Rx, Tx<'_>)> {
        self.reap_tx();
        let t = self.dev.poll_receive()?;
        let Some(mut buf) = self.rx.get_mut(t as usize).and_then(Option::take) else {
            log::error!("virtio-net: device returned unknown receive token {t}");
            return None;
        };
        // SAFETY: `buf` is the buffer posted under token `t`.
        let done = unsafe { self.dev.receive_complete(t, &mut buf) };
        let frame = match done {
            Ok((hdr, len)) => buf.get(hdr..hdr + len).map(<[u8]>::to_vec),
            Err(e) => {
                log::warn!("virtio-net: receive: {e:?}");
                None
            }
        };
        self.post_rx(buf);
        self.rx_frames += 1;
        // A malformed completion yields an empty frame, which smoltcp drops.
        Some((Rx(frame.unwrap_or_default()), Tx(self)))
    }

    fn transmit(&mut self, _now: Instant) -> Option<Tx<'_>> {
        self.reap_tx();
        self.dev.can_send().then_some(Tx(self))
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = FRAME_MAX;
        caps.max_burst_size = None;
        // The link is a lossless unix socket between two of our own
        // kernels: checksums are left to "offload", as a real NIC would.
        let mut c = ChecksumCapabilities::ignored();
        c.ipv4 = Checksum::Both;
        caps.checksum = c;
        caps
    }
}
