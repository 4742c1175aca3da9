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

/// Config-space offsets and ids of `df`'s capabilities, in list order. The
/// walk is bounded (48 entries) and stops at pointers into the header, so
/// a malformed list cannot loop.
pub fn capabilities(df: DeviceFunction) -> alloc::vec::Vec<(u8, u8)> {
    let mut caps = alloc::vec::Vec::new();
    if PortCam.read_word(df, 0x04) & STATUS_CAP_LIST == 0 {
        return caps;
    }
    let mut ptr = (PortCam.read_word(df, CAP_PTR) & 0xFC) as u8;
    for _ in 0..48 {
        if ptr < 0x40 {
            break;
        }
        let w = PortCam.read_word(df, ptr);
        caps.push((ptr, (w & 0xFF) as u8));
        ptr = ((w >> 8) & 0xFC) as u8;
    }
    caps
}

/// Config-space offset of the first capability with id `id`, if any.
pub fn find_capability(df: DeviceFunction, id: u8) -> Option<u8> {
    capabilities(df)
        .into_iter()
        .find(|&(_, c)| c == id)
        .map(|(off, _)| off)
}

/// The config-space dword at `off` (4-byte aligned) of `df`.
pub fn read_config(df: DeviceFunction, off: u8) -> u32 {
    PortCam.read_word(df, off)
}

/// Map `len` bytes at `off` into memory BAR `bar` of `df` (identity,
/// uncached); the virtual address. Refuses a BAR the firmware did not
/// assign and a range outside the BAR.
pub fn map_bar_range(
    root: &mut PciRoot<PortCam>,
    df: DeviceFunction,
    bar: u8,
    off: u64,
    len: u64,
) -> Result<*mut u8, &'static str> {
    if bar > 5 {
        return Err("bad BAR index");
    }
    let info = root
        .bar_info(df, bar)
        .map_err(|_| "BAR unreadable")?
        .ok_or("BAR missing")?;
    let (pa, size) = info
        .memory_address_size()
        .ok_or("BAR is not a memory BAR")?;
    if pa == 0 || len == 0 || off.checked_add(len).is_none_or(|end| end > size) {
        return Err("range outside its BAR (BAR not assigned?)");
    }
    crate::mm::paging::identity_map(pa + off, len, true)
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
        let va = map_bar_range(root, df, bir, off, entries as u64 * 16)
            .map_err(|_| "MSI-X table outside its BAR (BAR not assigned?)")?;
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
