//! PCI configuration space through the legacy 0xCF8/0xCFC ports, as a
//! `virtio-drivers` [`ConfigurationAccess`] so its `PciRoot` can enumerate
//! and read BARs for every driver.

use virtio_drivers::transport::pci::bus::{
    Command, ConfigurationAccess, DeviceFunction, DeviceFunctionInfo, PciRoot,
};

use crate::arch::{inl, outl};

/// Configuration mechanism #1.
pub struct PortCam;

fn address(df: DeviceFunction, off: u8) -> u32 {
    0x8000_0000
        | (df.bus as u32) << 16
        | (df.device as u32 & 0x1f) << 11
        | (df.function as u32 & 0x7) << 8
        | (off as u32 & 0xfc)
}

impl ConfigurationAccess for PortCam {
    fn read_word(&self, df: DeviceFunction, off: u8) -> u32 {
        outl(0xCF8, address(df, off));
        inl(0xCFC)
    }

    fn write_word(&mut self, df: DeviceFunction, off: u8, data: u32) {
        outl(0xCF8, address(df, off));
        outl(0xCFC, data);
    }

    unsafe fn unsafe_clone(&self) -> Self {
        PortCam
    }
}

/// The root complex.
pub fn root() -> PciRoot<PortCam> {
    PciRoot::new(PortCam)
}

/// Every function on bus 0 (QEMU's `pc` machine puts all devices there).
pub fn devices(root: &PciRoot<PortCam>) -> alloc::vec::Vec<(DeviceFunction, DeviceFunctionInfo)> {
    root.enumerate_bus(0).collect()
}

/// Turn on memory decoding and bus mastering for a device.
pub fn enable(root: &mut PciRoot<PortCam>, df: DeviceFunction) {
    let (_, cmd) = root.get_status_command(df);
    root.set_command(
        df,
        cmd | Command::MEMORY_SPACE | Command::IO_SPACE | Command::BUS_MASTER,
    );
}

/// The INTx line the firmware (SeaBIOS) routed a device to, from the
/// Interrupt Line register (0xFF: none).
pub fn interrupt_line(df: DeviceFunction) -> u8 {
    (PortCam.read_word(df, 0x3C) & 0xFF) as u8
}
