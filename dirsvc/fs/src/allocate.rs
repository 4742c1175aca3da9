//! Allocation of data blocks to a file: growing its extents from the free
//! map, and cutting them back.

use alloc::vec::Vec;

use super::disk::{Extent, Inode};
use super::{BlockDevice, Fs, MAX_EXTENTS};
use fabric::proto::Errno;

impl<D: BlockDevice> Fs<D> {
    /// Allocate blocks so that `n` holds `blocks` blocks: extend the last
    /// extent in place while the next blocks are free, else add extents
    /// (first fit, or the longest free run). `NoSpace` leaves the free map
    /// as it was.
    pub(crate) fn grow(&mut self, n: &mut Inode, blocks: u64) -> Result<(), Errno> {
        let have = n.allocated_blocks();
        let Some(mut want) = blocks.checked_sub(have).filter(|w| *w > 0) else {
            return Ok(());
        };
        if want > self.free.total() - self.free.used() {
            return Err(Errno::NoSpace);
        }
        let mut taken: Vec<Extent> = Vec::new();
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
        while want > 0 {
            let found = if n.extents.len() < MAX_EXTENTS {
                self.free.find(want.min(u64::from(u32::MAX)))
            } else {
                None
            };
            let Some((start, len)) = found else {
                for e in taken {
                    self.free.set(e.start, u64::from(e.len), false);
                }
                return Err(Errno::NoSpace);
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
