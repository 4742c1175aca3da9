//! The PVH `hvm_start_info` handed over by QEMU: command line and memory map.

use alloc::string::String;

const START_MAGIC: u32 = 0x336e_c578;
const MAX_REGIONS: usize = 32;

/// A usable RAM range from the boot memory map.
#[derive(Clone, Copy, Debug, Default)]
pub struct Region {
    /// Physical start.
    pub start: u64,
    /// Physical end (exclusive).
    pub end: u64,
}

/// What the kernel keeps of the start info.
pub struct BootInfo {
    /// Usable RAM regions.
    pub regions: [Region; MAX_REGIONS],
    /// How many of `regions` are valid.
    pub nregions: usize,
    /// Command line bytes (copied before the memory is reused).
    pub cmdline: [u8; 512],
    /// Length of `cmdline`.
    pub cmdline_len: usize,
}

impl BootInfo {
    /// The command line as text (lossy).
    pub fn cmdline(&self) -> String {
        String::from_utf8_lossy(&self.cmdline[..self.cmdline_len]).into_owned()
    }
}

/// Read the start info at physical address `pa` (identity mapped).
pub fn parse(pa: u64) -> Result<BootInfo, &'static str> {
    let mut bi = BootInfo {
        regions: [Region::default(); MAX_REGIONS],
        nregions: 0,
        cmdline: [0; 512],
        cmdline_len: 0,
    };
    if pa == 0 || pa >= 0x1_0000_0000 {
        return Err("no PVH start info");
    }
    // SAFETY: the first 4 GiB are identity mapped by the boot trampoline and
    // QEMU placed a `hvm_start_info` (at least 56 bytes) at `pa`; it is read
    // with unaligned volatile loads and never written.
    let rd32 = |off: u64| unsafe { core::ptr::read_unaligned((pa + off) as *const u32) };
    // SAFETY: as above.
    let rd64 = |off: u64| unsafe { core::ptr::read_unaligned((pa + off) as *const u64) };
    if rd32(0) != START_MAGIC {
        return Err("bad PVH start info magic");
    }
    let version = rd32(4);
    let cmdline_pa = rd64(24);
    if cmdline_pa != 0 && cmdline_pa < 0x1_0000_0000 {
        for i in 0..bi.cmdline.len() {
            // SAFETY: the command line is a NUL-terminated string QEMU
            // placed in identity-mapped low memory; reading stops at NUL or
            // at the buffer size.
            let b = unsafe { core::ptr::read((cmdline_pa + i as u64) as *const u8) };
            if b == 0 {
                break;
            }
            bi.cmdline[i] = b;
            bi.cmdline_len = i + 1;
        }
    }
    if version < 1 {
        return Err("PVH start info without a memory map (version 0)");
    }
    let map_pa = rd64(40);
    let entries = rd32(48).min(128) as u64;
    for i in 0..entries {
        let e = map_pa + i * 24;
        // SAFETY: the memory map entries are 24-byte records QEMU placed in
        // identity-mapped low memory; `entries` is capped above.
        let (addr, size, kind) = unsafe {
            (
                core::ptr::read_unaligned(e as *const u64),
                core::ptr::read_unaligned((e + 8) as *const u64),
                core::ptr::read_unaligned((e + 16) as *const u32),
            )
        };
        if kind == 1 && size > 0 && bi.nregions < MAX_REGIONS {
            bi.regions[bi.nregions] = Region {
                start: addr,
                end: addr.saturating_add(size),
            };
            bi.nregions += 1;
        }
    }
    Ok(bi)
}
