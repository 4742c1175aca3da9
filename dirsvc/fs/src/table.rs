//! The cached inode table: finding a record, encoding a table block, and
//! committing changed records to the device.

use alloc::boxed::Box;
use alloc::vec::Vec;

use super::disk::{self, Inode, TABLE_START};
use super::{BlockDevice, Fs, BLOCK_SIZE, RECORDS_PER_BLOCK, RECORD_SIZE};
use fabric::proto::Errno;

impl<D: BlockDevice> Fs<D> {
    /// Encode table block `b` (0-based within the table) from the cache.
    pub(crate) fn table_block(&self, b: u64) -> [u8; BLOCK_SIZE] {
        let mut buf = [0u8; BLOCK_SIZE];
        let first = b as usize * RECORDS_PER_BLOCK;
        for (i, chunk) in buf.chunks_exact_mut(RECORD_SIZE).enumerate() {
            let idx = first + i;
            let ino = idx as u64 + 1;
            let node = self.table.get(idx).and_then(|s| s.as_deref());
            match (node, self.held.get(&ino)) {
                (Some(n), Some(&cap)) if cap < n.size => {
                    let mut n = n.clone();
                    n.size = cap;
                    disk::encode_record(ino, Some(&n), chunk);
                }
                _ => disk::encode_record(ino, node, chunk),
            }
        }
        buf
    }

    /// Install new records into the cache and write their table blocks, in
    /// the order of their first change (one write per distinct block). On a
    /// write failure the cache keeps only what reached the disk and the
    /// derived state is rebuilt from it.
    pub(crate) fn commit(&mut self, changes: Vec<(u64, Option<Box<Inode>>)>) -> Result<(), Errno> {
        let per = RECORDS_PER_BLOCK as u64;
        let mut blocks: Vec<u64> = Vec::new();
        for (ino, _) in &changes {
            let b = (ino - 1) / per;
            if !blocks.contains(&b) {
                blocks.push(b);
            }
        }
        for blk in blocks {
            let mut old = Vec::new();
            for (ino, node) in changes.iter().filter(|(ino, _)| (ino - 1) / per == blk) {
                let slot = &mut self.table[(ino - 1) as usize];
                old.push((*ino, core::mem::replace(slot, node.clone())));
            }
            let buf = self.table_block(blk);
            if let Err(e) = self.write_blk(TABLE_START + blk, &buf) {
                for (ino, node) in old.into_iter().rev() {
                    self.table[(ino - 1) as usize] = node;
                }
                self.rebuild();
                return Err(e);
            }
        }
        Ok(())
    }

    pub(crate) fn node(&self, ino: u64) -> Result<&Inode, Errno> {
        let i = usize::try_from(ino.checked_sub(1).ok_or(Errno::NotFound)?)
            .map_err(|_| Errno::NotFound)?;
        self.table
            .get(i)
            .and_then(|s| s.as_deref())
            .ok_or(Errno::NotFound)
    }

    pub(crate) fn free_slot(&self) -> Option<usize> {
        self.table.iter().position(|s| s.is_none())
    }
}
