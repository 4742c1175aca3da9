//! Allocation of data blocks to a file: growing its extents from the free
//! map, and cutting them back.
//!
//! An inode record has [`MAX_EXTENTS`] extent slots. A file that grows in
//! small pieces while another file takes the blocks behind it (two nodes
//! appending to their own logs) would need a new extent for almost every
//! append and run out of slots after a few hundred KiB, with the disk
//! nearly empty. So when a file that already has blocks needs a new
//! extent, the blocks after it are **reserved** for its growth
//! ([`prealloc_blocks`]: as many as it has, 8 blocks to 64 MiB, fewer if
//! no free run holds that): later appends extend that extent in place,
//! and the file's allocation at least doubles with every extent it adds
//! (ext4's in-memory preallocation, simplified).
//!
//! A reservation lives in memory only: the blocks are marked used in the
//! free map (so other files' allocations pass them by) but belong to no
//! inode on disk, so a crash or a remount simply frees them, and nothing
//! about the on-disk format or its ordering of writes changes. They are
//! counted as free in [`Fs::stats`]; a truncate or unlink of the file
//! gives its reservation back, and when an allocation finds too little
//! space every reservation is given back and the allocation retried, so a
//! reservation never makes a write fail that would succeed without it.

use alloc::vec::Vec;

use super::disk::{Extent, Inode};
use super::{BlockDevice, Fs, MAX_EXTENTS};
use fabric::proto::Errno;

impl<D: BlockDevice> Fs<D> {
    /// Allocate blocks so that `n` (inode `ino`, not committed yet) holds
    /// `blocks` blocks: from its reservation, by extending the last extent
    /// in place while the next blocks are free, else by adding extents
    /// (first fit, or the longest free run), a new one with a reservation
    /// behind it. `NoSpace` leaves `n`, the free map and every reservation
    /// as they were, except that reservations may have been given back.
    pub(crate) fn grow(&mut self, ino: u64, n: &mut Inode, blocks: u64) -> Result<(), Errno> {
        match self.try_grow(ino, n, blocks) {
            Err(Errno::NoSpace) if self.reserved_total > 0 => {
                self.release_all();
                self.try_grow(ino, n, blocks)
            }
            r => r,
        }
    }

    /// One attempt of [`Fs::grow`]: on failure everything is rolled back.
    fn try_grow(&mut self, ino: u64, n: &mut Inode, blocks: u64) -> Result<(), Errno> {
        let have = n.allocated_blocks();
        let Some(mut want) = blocks.checked_sub(have).filter(|w| *w > 0) else {
            return Ok(());
        };
        let old_extents = n.extents.clone();
        let old_reservation = self.reserved.get(&ino).copied();
        // 1. The file's own reservation, right behind its last extent.
        if let (Some(last), Some((rs, rl))) = (n.extents.last_mut(), old_reservation) {
            if last.end() == Some(rs) {
                let take = rl.min(want).min(u64::from(u32::MAX - last.len));
                last.len += take as u32;
                want -= take;
                self.set_reservation(ino, rs + take, rl - take);
                if want == 0 {
                    return Ok(());
                }
            }
        }
        // Undo: the blocks taken go back, and the reservation is restored
        // whole (what is left of it lies inside its old range; if it was
        // released, its blocks are marked used again).
        let rollback = |fs: &mut Self, n: &mut Inode, taken: &[Extent]| {
            for e in taken {
                fs.free.set(e.start, u64::from(e.len), false);
            }
            fs.set_reservation(ino, 0, 0);
            if let Some((s, l)) = old_reservation {
                fs.free.set(s, l, true);
                fs.set_reservation(ino, s, l);
            }
            n.extents = old_extents.clone();
            Err(Errno::NoSpace)
        };
        if want > self.free.total() - self.free.used() {
            return rollback(self, n, &[]);
        }
        // What is left of a reservation is no longer behind the file's end.
        self.release(ino);
        let mut taken: Vec<Extent> = Vec::new();
        // 2. Extend the last extent in place.
        if let Some(last) = n.extents.last_mut() {
            let room = u64::from(u32::MAX - last.len).min(want);
            let end = last.end().unwrap_or(u64::MAX);
            let run = self.free.free_run_at(end, room);
            if run > 0 {
                self.free.set(end, run, true);
                taken.push(Extent {
                    start: end,
                    len: run as u32,
                });
                last.len += run as u32;
                want -= run;
            }
        }
        // 3. A new extent for a file that has blocks: with a reservation
        // behind it, as large as one free run holds (halving down to
        // PREALLOC_MIN).
        let mut spare = prealloc_blocks(have);
        while want > 0 && spare >= PREALLOC_MIN && n.extents.len() < MAX_EXTENTS {
            let ask = want.saturating_add(spare);
            if ask > u64::from(u32::MAX) {
                spare /= 2;
                continue;
            }
            if let Some((start, _)) = self.free.find(ask).filter(|(_, l)| *l == ask) {
                self.free.set(start, ask, true);
                n.extents.push(Extent {
                    start,
                    len: want as u32,
                });
                self.set_reservation(ino, start + want, spare);
                return Ok(());
            }
            spare /= 2;
        }
        // 4. Exactly what is needed, in as many extents as it takes.
        while want > 0 {
            let found = if n.extents.len() < MAX_EXTENTS {
                self.free.find(want.min(u64::from(u32::MAX)))
            } else {
                None
            };
            let Some((start, len)) = found else {
                return rollback(self, n, &taken);
            };
            self.free.set(start, len, true);
            let e = Extent {
                start,
                len: len as u32,
            };
            taken.push(e);
            n.extents.push(e);
            want -= len;
        }
        Ok(())
    }

    /// Make `(start, len)` inode `ino`'s reservation (`len` 0: none). The
    /// blocks stay marked used in the free map; only the bookkeeping moves.
    fn set_reservation(&mut self, ino: u64, start: u64, len: u64) {
        if let Some((_, l)) = self.reserved.remove(&ino) {
            self.reserved_total -= l;
        }
        if len > 0 {
            self.reserved.insert(ino, (start, len));
            self.reserved_total += len;
        }
    }

    /// Give inode `ino`'s reservation back to the free map.
    pub(crate) fn release(&mut self, ino: u64) {
        if let Some((start, len)) = self.reserved.remove(&ino) {
            self.free.set(start, len, false);
            self.reserved_total -= len;
        }
    }

    /// Give every reservation back (space is short).
    fn release_all(&mut self) {
        for (_, (start, len)) in core::mem::take(&mut self.reserved) {
            self.free.set(start, len, false);
        }
        self.reserved_total = 0;
    }

    /// Forget every reservation without touching the free map (it was
    /// rebuilt from the inode table, where reservations do not appear).
    pub(crate) fn forget_reservations(&mut self) {
        self.reserved.clear();
        self.reserved_total = 0;
    }
}

/// Fewest blocks reserved behind a growing file's new extent.
pub const PREALLOC_MIN: u64 = 8;
/// Most blocks reserved (64 MiB).
pub const PREALLOC_MAX: u64 = 16384;

/// Blocks reserved behind the new extent of a file holding `have` blocks
/// (see the module comment), if a free run holds them: none for a file
/// with no blocks yet (a file written whole takes exactly what it needs),
/// else as many as it has, within [`PREALLOC_MIN`]..=[`PREALLOC_MAX`], so
/// the file's allocation at least doubles with every new extent.
pub fn prealloc_blocks(have: u64) -> u64 {
    if have == 0 {
        0
    } else {
        have.clamp(PREALLOC_MIN, PREALLOC_MAX)
    }
}

/// Keep the first `blocks` blocks of `n`; return the extents cut off.
pub(crate) fn shrink(n: &mut Inode, blocks: u64) -> Vec<Extent> {
    let mut freed = Vec::new();
    let mut kept = 0u64;
    let mut out = Vec::new();
    for e in n.extents.drain(..) {
        let len = u64::from(e.len);
        if kept >= blocks {
            freed.push(e);
        } else if kept + len <= blocks {
            kept += len;
            out.push(e);
        } else {
            let keep = blocks - kept;
            kept = blocks;
            out.push(Extent {
                start: e.start,
                len: keep as u32,
            });
            freed.push(Extent {
                start: e.start + keep,
                len: (len - keep) as u32,
            });
        }
    }
    n.extents = out;
    freed
}
