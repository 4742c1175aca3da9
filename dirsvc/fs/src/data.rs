//! File data: read, write and set_size, block by block, with the data
//! checksums written before the blocks they cover (see `sums`).

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use super::allocate::shrink;
use super::disk::{self, Inode};
use super::{BlockDevice, Fs, BLOCK_SIZE, BS};
use fabric::proto::{Attr, Errno, FileKind};

/// Where a block of a file comes from, for a reader that fetches it from
/// the device itself ([`Fs::block_source`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockSource {
    /// Past the end of the file: the block reads as zeros.
    Zeros,
    /// Device block `lba`; the first `len` bytes (1..=4096) are file data,
    /// the rest of the block reads as zeros.
    Disk {
        /// Device block.
        lba: u64,
        /// Bytes of file data in it.
        len: usize,
    },
}

/// Blocks needed to hold `size` bytes.
fn blocks_for(size: u64) -> u64 {
    size.div_ceil(BS)
}

impl<D: BlockDevice> Fs<D> {
    pub(crate) fn file(&self, ino: u64) -> Result<&Inode, Errno> {
        let n = self.node(ino)?;
        if n.kind != FileKind::File {
            return Err(Errno::IsDir);
        }
        Ok(n)
    }

    /// Read from `offset` into `buf`; short at the end of the file, 0 past
    /// it.
    pub fn read(&mut self, ino: u64, offset: u64, buf: &mut [u8]) -> Result<usize, Errno> {
        let n = self.file(ino)?;
        if offset >= n.size || buf.is_empty() {
            return Ok(0);
        }
        let len = (n.size - offset).min(buf.len() as u64) as usize;
        let extents = n.extents.clone();
        let mut done = 0usize;
        let mut blk = [0u8; BLOCK_SIZE];
        while done < len {
            let pos = offset + done as u64;
            let lba = disk::map_block(&extents, pos / BS).ok_or(Errno::Io)?;
            self.read_data(ino, pos / BS, lba, &mut blk)?;
            let within = (pos % BS) as usize;
            let take = (BLOCK_SIZE - within).min(len - done);
            buf[done..done + take].copy_from_slice(&blk[within..within + take]);
            done += take;
        }
        Ok(len)
    }

    /// The blocks a read of `len` bytes at `offset` needs, for a reader
    /// that fetches them from the device itself: the bytes the read returns
    /// (as [`Fs::read`]: short at the end of the file, 0 past it) and, in
    /// order, each block's number and [`BlockSource`]. The caller checks
    /// every block it reads with [`Fs::check_block`]; a change of the file
    /// in between is the caller's to order.
    pub fn read_plan(
        &self,
        ino: u64,
        offset: u64,
        len: usize,
    ) -> Result<(usize, Vec<(u64, BlockSource)>), Errno> {
        let n = self.file(ino)?;
        if offset >= n.size || len == 0 {
            return Ok((0, Vec::new()));
        }
        let len = (n.size - offset).min(len as u64) as usize;
        let (first, last) = (offset / BS, (offset + len as u64 - 1) / BS);
        let blocks = (first..=last)
            .map(|b| Ok((b, self.block_source(ino, b)?)))
            .collect::<Result<Vec<_>, Errno>>()?;
        Ok((len, blocks))
    }

    /// Where block `block` (file offset `block * 4096`) of file `ino` lives
    /// now. The caller reads it from the device and checks it with
    /// [`Fs::check_block`] before using it; a change of the file in between
    /// (a write, a truncate) is the caller's to order.
    pub fn block_source(&self, ino: u64, block: u64) -> Result<BlockSource, Errno> {
        let n = self.file(ino)?;
        let start = block.checked_mul(BS).ok_or(Errno::Invalid)?;
        if start >= n.size {
            return Ok(BlockSource::Zeros);
        }
        let lba = disk::map_block(&n.extents, block).ok_or(Errno::Io)?;
        let len = (n.size - start).min(BS) as usize;
        Ok(BlockSource::Disk { lba, len })
    }

    /// Check bytes the caller read from device block `lba` (block `block`
    /// of file `ino`, from [`Fs::block_source`]) against the block's
    /// checksum, as [`Fs::read`] does, and count the read in the stats. A
    /// mismatch is logged and is an `Io` error.
    pub fn check_block(
        &mut self,
        ino: u64,
        block: u64,
        lba: u64,
        buf: &mut [u8; BLOCK_SIZE],
    ) -> Result<(), Errno> {
        self.reads += 1;
        self.check_sum(ino, block, lba, buf)
    }

    /// Write `data` at `offset`, extending the file; a gap past the old end
    /// reads as zeros. All or nothing: on `NoSpace` nothing has changed.
    pub fn write(&mut self, ino: u64, offset: u64, data: &[u8]) -> Result<(usize, Attr), Errno> {
        let old = self.file(ino)?.clone();
        if data.is_empty() {
            return Ok((0, self.attr_of(ino, &old)));
        }
        let end = offset
            .checked_add(data.len() as u64)
            .ok_or(Errno::Invalid)?;
        let new_size = old.size.max(end);
        let mut new = old.clone();
        self.grow(ino, &mut new, blocks_for(new_size))?;
        if let Err(e) = self.fill(ino, &new, old.size, offset, data, end) {
            self.rebuild();
            return Err(e);
        }
        new.size = new_size;
        new.version = crate::namespace::next_version(new.version);
        self.commit(vec![(ino, Some(Box::new(new)))])?;
        let a = self.attr(ino)?;
        Ok((data.len(), a))
    }

    /// Hold the size recorded on the device for file `ino` at `cap` bytes
    /// at most (`None`: record its whole size again), rewriting its record
    /// if what it says changes. The file keeps its size in memory (reads,
    /// [`Fs::getattr`]); only a crash shows the held size. The directory
    /// holds a grown file's size below data still in the page cache, so a
    /// crash never shows a size over blocks nobody wrote (a page cache's
    /// ordered mode). A removal drops the hold.
    pub fn hold_size(&mut self, ino: u64, cap: Option<u64>) -> Result<(), Errno> {
        let n = self.file(ino)?.clone();
        let before = self.durable_size(ino)?;
        match cap {
            Some(c) => self.held.insert(ino, c),
            None => self.held.remove(&ino),
        };
        if self.durable_size(ino)? != before {
            self.commit(vec![(ino, Some(Box::new(n)))])?;
        }
        Ok(())
    }

    /// The size of file `ino` its record on the device says (see
    /// [`Fs::hold_size`]).
    pub fn durable_size(&self, ino: u64) -> Result<u64, Errno> {
        let size = self.node(ino)?.size;
        Ok(self.held.get(&ino).map_or(size, |&c| c.min(size)))
    }

    /// Truncate or extend to `size` bytes; an extension reads as zeros.
    pub fn set_size(&mut self, ino: u64, size: u64) -> Result<Attr, Errno> {
        let old = self.file(ino)?.clone();
        if size == old.size {
            return Ok(self.attr_of(ino, &old));
        }
        let mut new = old.clone();
        new.size = size;
        new.version = crate::namespace::next_version(new.version);
        if size > old.size {
            self.grow(ino, &mut new, blocks_for(size))?;
            if let Err(e) = self.fill(ino, &new, old.size, old.size, &[], size) {
                self.rebuild();
                return Err(e);
            }
            self.commit(vec![(ino, Some(Box::new(new)))])?;
        } else {
            self.release(ino);
            let freed = shrink(&mut new, blocks_for(size));
            self.commit(vec![(ino, Some(Box::new(new)))])?;
            for e in freed {
                self.free.set(e.start, u64::from(e.len), false);
            }
        }
        self.attr(ino)
    }

    /// Write the file range `[min(offset, old_size), end)` of `n` to disk:
    /// bytes of `data` (placed at `offset`), old bytes below `old_size`,
    /// zeros elsewhere. Blocks that keep no old byte are written without
    /// being read. The checksum-table blocks that cover the written blocks
    /// are written first, then the blocks (see `sums`: an overwrite cut by
    /// a crash leaves old or new bytes, both matching).
    fn fill(
        &mut self,
        ino: u64,
        n: &Inode,
        old_size: u64,
        offset: u64,
        data: &[u8],
        end: u64,
    ) -> Result<(), Errno> {
        let mut out = Filled::default();
        let r = self.fill_data(ino, n, (old_size, offset, end), data, &mut out);
        let s = self.write_sums(&out.dirty);
        let w = if s.is_ok() {
            out.blocks
                .iter()
                .try_for_each(|(lba, blk)| self.write_blk(*lba, blk))
        } else {
            Ok(())
        };
        if self.staged.is_none() {
            // Written synchronously: this write's job is over. (Deferred
            // writes end their job when the caller coalesces them.)
            self.sums.seal(out.touched.iter().copied());
            if s.is_ok() && w.is_ok() {
                for (lba, _) in &out.blocks {
                    self.sums.landed(*lba);
                }
            }
        }
        r.and(s).and(w)
    }

    /// Build the blocks [`Fs::fill`] writes into `out`, recording their
    /// checksums; `(old_size, offset, end)` as there.
    fn fill_data(
        &mut self,
        ino: u64,
        n: &Inode,
        (old_size, offset, end): (u64, u64, u64),
        data: &[u8],
        out: &mut Filled,
    ) -> Result<(), Errno> {
        let start = offset.min(old_size);
        let data_end = offset + data.len() as u64;
        let old_blocks = blocks_for(old_size);
        for b in start / BS..blocks_for(end) {
            let bs = b * BS;
            let be = bs + BS;
            let lba = disk::map_block(&n.extents, b).ok_or(Errno::Io)?;
            let mut blk = Box::new([0u8; BLOCK_SIZE]);
            let keep_hi = be.min(old_size);
            let keeps_old = bs < keep_hi && !(offset <= bs && data_end >= keep_hi);
            if keeps_old {
                self.read_data(ino, b, lba, &mut blk)?;
                if old_size < be {
                    blk[(old_size - bs) as usize..].fill(0);
                }
            }
            let lo = offset.max(bs);
            let hi = data_end.min(be);
            out.touched.push(lba);
            if !keeps_old && lo >= hi {
                // A block of zeros past the old end (a gap or an
                // extension): its checksum entry says "unwritten" and the
                // block itself is not written (see `sums`).
                note_dirty(&mut out.dirty, self.sums.set_unwritten(lba));
                continue;
            }
            if lo < hi {
                let src = &data[(lo - offset) as usize..(hi - offset) as usize];
                blk[(lo - bs) as usize..(hi - bs) as usize].copy_from_slice(src);
            }
            let fresh = b >= old_blocks;
            note_dirty(&mut out.dirty, self.sums.set(lba, &blk, fresh));
            out.blocks.push((lba, blk));
        }
        Ok(())
    }
}

/// What [`Fs::fill`] writes: the data blocks, the checksum-table blocks
/// that changed, and every data block whose entry changed.
#[derive(Default)]
struct Filled {
    blocks: Vec<(u64, Box<[u8; BLOCK_SIZE]>)>,
    dirty: Vec<u64>,
    touched: Vec<u64>,
}

/// Add checksum-table block `changed` (if any) to `dirty`, once.
fn note_dirty(dirty: &mut Vec<u64>, changed: Option<u64>) {
    if let Some(i) = changed {
        if !dirty.contains(&i) {
            dirty.push(i);
        }
    }
}
