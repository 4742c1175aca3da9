//! The ivshmem-plain device (1af4:1110): BAR2 is the shared region.

use fabric::shm::RawShm;
use virtio_drivers::transport::pci::bus::PciRoot;

use super::pci::{self, PortCam};

const VENDOR: u16 = 0x1af4;
const DEVICE: u16 = 0x1110;

/// Find the device, enable it, map BAR2 and wrap it.
pub fn probe(root: &mut PciRoot<PortCam>) -> Result<RawShm, &'static str> {
    let (df, _) = pci::devices(root)
        .into_iter()
        .find(|(_, i)| i.vendor_id == VENDOR && i.device_id == DEVICE)
        .ok_or("no ivshmem device (1af4:1110) on PCI bus 0")?;
    pci::enable(root, df);
    let bar = root
        .bar_info(df, 2)
        .map_err(|_| "ivshmem BAR2 unreadable")?
        .ok_or("ivshmem BAR2 missing")?;
    let (pa, size) = bar
        .memory_address_size()
        .ok_or("ivshmem BAR2 is not a memory BAR")?;
    if pa == 0 || size == 0 {
        return Err("ivshmem BAR2 not assigned by the firmware");
    }
    log::info!("ivshmem at {df}: BAR2 {pa:#x}, {} MiB", size >> 20);
    let va = crate::mm::paging::identity_map(pa, size, false)?;
    // SAFETY: BAR2 of the ivshmem device is `size` bytes of shared memory,
    // identity mapped just above and never referenced by Rust references;
    // it stays mapped for the kernel's lifetime. The BAR is 4 KiB aligned.
    Ok(unsafe { RawShm::new(va, size as usize) })
}
