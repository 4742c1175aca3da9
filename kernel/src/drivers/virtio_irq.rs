//! The directory disk's completion interrupt: virtio-blk's MSI-X entry 0
//! delivers [`interrupts::DISK_VECTOR`] to this CPU, and queue 0 is bound
//! to that entry.
//!
//! `virtio-drivers` 0.13 keeps the common configuration structure (virtio
//! 1.2, 4.1.4.3) crate-private, so the two MSI-X vector registers
//! (`config_msix_vector`, `queue_msix_vector`) are reached here: the
//! vendor capability of type 1 (common configuration) names the BAR and
//! the offset of that structure. Nothing else of it is touched; the
//! transport keeps doing the rest.
//!
//! Binding needs the local APIC (doorbell mode enables it). Once bound,
//! the device interrupts only while the driver has its used-buffer
//! notifications on ([`super::blkdev::BlkDev::set_notify`]): the directory
//! turns them on right before it halts for the disk, and off again after.

use virtio_drivers::transport::pci::bus::{DeviceFunction, PciRoot};

use super::pci::{self, Msix, PortCam};
use crate::arch::{apic, interrupts};

/// PCI capability id of the virtio vendor-specific capabilities.
const CAP_VENDOR: u8 = 0x09;
/// `cfg_type` of the common configuration structure.
const CFG_COMMON: u8 = 1;
/// Size of the common configuration structure (virtio 1.2, 4.1.4.3).
const COMMON_LEN: u64 = 0x38;
/// Offsets in the common configuration structure.
const MSIX_CONFIG: usize = 0x10;
const QUEUE_SELECT: usize = 0x16;
const QUEUE_MSIX_VECTOR: usize = 0x1A;
/// "No vector" in the MSI-X vector registers.
const NO_VECTOR: u16 = 0xFFFF;

/// The MSI-X entry queue 0 signals through.
const ENTRY: u16 = 0;

fn write16(base: *mut u8, off: usize, v: u16) {
    // SAFETY: `base` maps the device's common configuration structure
    // (`COMMON_LEN` bytes, identity mapped uncached by `bind`); `off` is one
    // of the 2-byte aligned register offsets above, inside it.
    unsafe { core::ptr::write_volatile(base.add(off).cast::<u16>(), v) }
}

fn read16(base: *mut u8, off: usize) -> u16 {
    // SAFETY: see `write16`.
    unsafe { core::ptr::read_volatile(base.add(off).cast::<u16>()) }
}

/// Where `df`'s common configuration structure lives: (BAR, offset).
fn common_cfg(df: DeviceFunction) -> Option<(u8, u64)> {
    pci::capabilities(df)
        .into_iter()
        .filter(|&(_, id)| id == CAP_VENDOR)
        .find_map(|(off, _)| {
            // cap_vndr, cap_next, cap_len, cfg_type | bar, id, padding |
            // offset | length
            let w0 = pci::read_config(df, off);
            let w1 = pci::read_config(df, off.checked_add(4)?);
            let offset = pci::read_config(df, off.checked_add(8)?);
            let length = pci::read_config(df, off.checked_add(12)?);
            let cfg_type = (w0 >> 24) as u8;
            let bar = (w1 & 0xFF) as u8;
            (cfg_type == CFG_COMMON && u64::from(length) >= COMMON_LEN)
                .then_some((bar, u64::from(offset)))
        })
}

/// Bind queue 0 of the (initialised, running) virtio-blk device `df` to
/// MSI-X entry 0, which delivers [`interrupts::DISK_VECTOR`] here. `Err`
/// says why not (the driver then polls, as without doorbells).
pub fn bind(root: &mut PciRoot<PortCam>, df: DeviceFunction) -> Result<(), &'static str> {
    if !apic::enabled() {
        return Err("the local APIC is off (doorbells off)");
    }
    let (bar, off) = common_cfg(df).ok_or("no common configuration capability")?;
    let common = pci::map_bar_range(root, df, bar, off, COMMON_LEN)?;
    let mut msix = Msix::probe(root, df)?;
    msix.set(ENTRY, apic::msi_address(), interrupts::DISK_VECTOR)?;
    msix.enable();
    if !msix.enabled() {
        return Err("MSI-X did not turn on");
    }
    write16(common, MSIX_CONFIG, NO_VECTOR); // no configuration-change interrupts
    write16(common, QUEUE_SELECT, 0);
    write16(common, QUEUE_MSIX_VECTOR, ENTRY);
    if read16(common, QUEUE_MSIX_VECTOR) != ENTRY {
        return Err("the device refused the queue's MSI-X vector");
    }
    Ok(())
}
