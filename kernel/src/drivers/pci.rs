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

const STATUS_CAP_LIST: u32 = 1 << 20; // in the status/command dword
const CAP_PTR: u8 = 0x34;
/// Capability id of MSI-X.
pub const CAP_MSIX: u8 = 0x11;
const MSIX_ENABLE: u32 = 1 << 31; // message control bit 15, in the cap's dword
const MSIX_FUNCTION_MASK: u32 = 1 << 30; // message control bit 14

/// Config-space offset of the first capability with id `id`, if any. The
/// walk is bounded (48 entries) and ignores pointers into the header, so a
/// malformed list cannot loop.
pub fn find_capability(df: DeviceFunction, id: u8) -> Option<u8> {
    if PortCam.read_word(df, 0x04) & STATUS_CAP_LIST == 0 {
        return None;
    }
    let mut ptr = (PortCam.read_word(df, CAP_PTR) & 0xFC) as u8;
    for _ in 0..48 {
        if ptr < 0x40 {
            return None;
        }
        let w = PortCam.read_word(df, ptr);
        if (w & 0xFF) as u8 == id {
            return Some(ptr);
        }
        ptr = ((w >> 8) & 0xFC) as u8;
    }
    None
}

/// A device's MSI-X table, mapped.
pub struct Msix {
    df: DeviceFunction,
    cap: u8,
    table: *mut u32,
    /// Entries in the table.
    pub entries: u16,
}

impl Msix {
    /// Find the MSI-X capability of `df`, map its table (in the BAR it
    /// names) and return it, still disabled.
    pub fn probe(root: &mut PciRoot<PortCam>, df: DeviceFunction) -> Result<Msix, &'static str> {
        let cap = find_capability(df, CAP_MSIX).ok_or("no MSI-X capability")?;
        let ctl = PortCam.read_word(df, cap);
        let entries = (((ctl >> 16) & 0x7FF) + 1) as u16;
        let tbl = PortCam.read_word(df, cap + 4);
        let bir = (tbl & 7) as u8;
        let off = (tbl & !7) as u64;
        if bir > 5 {
            return Err("MSI-X table in a bad BAR");
        }
        let bar = root
            .bar_info(df, bir)
            .map_err(|_| "MSI-X BAR unreadable")?
            .ok_or("MSI-X BAR missing")?;
        let (pa, size) = bar
            .memory_address_size()
            .ok_or("MSI-X BAR is not a memory BAR")?;
        let len = entries as u64 * 16;
        if pa == 0 || off.checked_add(len).is_none_or(|end| end > size) {
            return Err("MSI-X table outside its BAR (BAR not assigned?)");
        }
        let va = crate::mm::paging::identity_map(pa + off, len, true)?;
        Ok(Msix {
            df,
            cap,
            table: va.cast::<u32>(),
            entries,
        })
    }

    /// Program entry `index` to deliver `vector` at the MSI `address`
    /// (fixed delivery, edge) and unmask it.
    pub fn set(&mut self, index: u16, address: u64, vector: u8) -> Result<(), &'static str> {
        if index >= self.entries {
            return Err("MSI-X entry out of range");
        }
        let e = index as usize * 4;
        let words = [address as u32, (address >> 32) as u32, vector as u32, 0];
        for (i, w) in words.iter().enumerate() {
            // SAFETY: `table` maps `entries` 16-byte entries of the device's
            // MSI-X table (identity mapped, uncached, by `probe`); `index`
            // is checked above; the table takes 32-bit accesses. The
            // control word (unmask) is written last.
            unsafe { core::ptr::write_volatile(self.table.add(e + i), *w) };
        }
        Ok(())
    }

    /// Turn MSI-X on for the function (and clear the function mask).
    pub fn enable(&mut self) {
        let ctl = PortCam.read_word(self.df, self.cap);
        PortCam.write_word(self.df, self.cap, (ctl | MSIX_ENABLE) & !MSIX_FUNCTION_MASK);
    }

    /// Is MSI-X enabled (read back from config space)?
    pub fn enabled(&self) -> bool {
        PortCam.read_word(self.df, self.cap) & (MSIX_ENABLE | MSIX_FUNCTION_MASK) == MSIX_ENABLE
    }
}
