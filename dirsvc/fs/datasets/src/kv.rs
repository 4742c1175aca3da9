//! `kv`'s dataset: one immutable sorted table (`DIR/table.sst`) of
//! 24-byte keys with 1 KiB values, three entries to a 4 KiB data block,
//! then the block index (each block's first key) and a footer block.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec;

use crate::data::{manifest, pattern_fill, DataFile, Dataset, Gen};
use crate::rng::hash2;

/// Key bytes.
pub const KEY: usize = 24;
/// Value bytes.
pub const VALUE: usize = 1024;
/// Block bytes.
pub const BLOCK: usize = 4096;
/// Entries per data block.
pub const PER_BLOCK: u64 = (BLOCK / (KEY + VALUE)) as u64;
/// Footer magic.
pub const MAGIC: &[u8; 8] = b"ONECKVT1";
/// The table's name in the dataset directory.
pub const TABLE: &str = "table.sst";

/// Key `k`: `user` and `k` in 20 decimal digits.
pub fn key_of(k: u64) -> [u8; KEY] {
    let mut out = [0u8; KEY];
    out[..4].copy_from_slice(b"user");
    let mut v = k;
    for i in (4..KEY).rev() {
        out[i] = b'0' + (v % 10) as u8;
        v /= 10;
    }
    out
}

/// Value of key `k`: its number (8 bytes, little endian), then bytes of
/// a pattern keyed by the seed and `k`.
pub fn value_of(seed: u64, k: u64, out: &mut [u8]) {
    pattern_fill(hash2(seed ^ 0x6b76, k), 0, out);
    if let Some(head) = out.get_mut(..8) {
        head.copy_from_slice(&k.to_le_bytes());
    }
}

/// The table's geometry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Table {
    /// Data blocks.
    pub blocks: u64,
    /// Keys (`blocks * PER_BLOCK`).
    pub keys: u64,
    /// Dataset seed.
    pub seed: u64,
}

impl Table {
    fn index_blocks(&self) -> u64 {
        (self.blocks * KEY as u64).div_ceil(BLOCK as u64)
    }

    /// File size: data, index, footer.
    pub fn size(&self) -> u64 {
        (self.blocks + self.index_blocks() + 1) * BLOCK as u64
    }

    fn data_block(&self, b: u64, out: &mut [u8]) {
        out.fill(0);
        for s in 0..PER_BLOCK {
            let k = b * PER_BLOCK + s;
            let at = s as usize * (KEY + VALUE);
            out[at..at + KEY].copy_from_slice(&key_of(k));
            value_of(self.seed, k, &mut out[at + KEY..at + KEY + VALUE]);
        }
    }
}

impl Gen for Table {
    fn fill(&self, offset: u64, buf: &mut [u8]) {
        let index_start = self.blocks * BLOCK as u64;
        let footer = index_start + self.index_blocks() * BLOCK as u64;
        for (i, chunk) in buf.chunks_mut(BLOCK).enumerate() {
            let at = offset + (i * BLOCK) as u64;
            let mut block = [0u8; BLOCK];
            if at < index_start {
                self.data_block(at / BLOCK as u64, &mut block);
            } else if at < footer {
                for (j, b) in block.iter_mut().enumerate() {
                    let pos = at - index_start + j as u64;
                    let entry = pos / KEY as u64;
                    if entry < self.blocks {
                        *b = key_of(entry * PER_BLOCK)[(pos % KEY as u64) as usize];
                    }
                }
            } else {
                block[..8].copy_from_slice(MAGIC);
                block[8..16].copy_from_slice(&self.blocks.to_le_bytes());
                block[16..24].copy_from_slice(&self.keys.to_le_bytes());
                block[24..32].copy_from_slice(&index_start.to_le_bytes());
            }
            let n = chunk.len();
            chunk.copy_from_slice(&block[..n]);
        }
    }
}

/// The dataset: one table of about `size` bytes.
pub fn plan(size: u64, seed: u64, root: &str) -> Result<Dataset, String> {
    let blocks = (size / BLOCK as u64).saturating_sub(2).max(1);
    let t = Table {
        blocks,
        keys: blocks * PER_BLOCK,
        seed,
    };
    let files = vec![
        DataFile {
            path: format!("{root}/manifest"),
            ..manifest("kv", seed, &[("blocks", t.blocks), ("keys", t.keys)])
        },
        DataFile {
            path: format!("{root}/{TABLE}"),
            size: t.size(),
            gen: Box::new(t),
        },
    ];
    Ok(Dataset {
        app: "kv",
        root: String::from(root),
        dirs: vec![String::from(root)],
        files,
    })
}
