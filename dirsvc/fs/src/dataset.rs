//! Workload datasets (the `datasets` crate) written straight into a
//! file system on the host (`mkfs --dataset NAME:SIZE[:SEED]`), so a
//! guest run never spends time creating them.

use alloc::format;
use alloc::string::String;
use alloc::vec;

use datasets::Dataset;
use fabric::proto::Errno;

use crate::{BlockDevice, Fs, BLOCK_SIZE};

/// Bytes written per call.
const CHUNK: usize = 256 * BLOCK_SIZE;

/// Blocks and inodes `ds` needs (data rounded up to blocks, one inode
/// per file and directory).
pub fn needs(ds: &Dataset) -> (u64, u64) {
    let blocks = ds
        .files
        .iter()
        .map(|f| f.size.div_ceil(BLOCK_SIZE as u64))
        .sum();
    (blocks, (ds.files.len() + ds.dirs.len()) as u64)
}

/// Create `ds`'s directories (existing ones are kept) and files.
/// Errors name the path.
pub fn write<D: BlockDevice>(fs: &mut Fs<D>, ds: &Dataset) -> Result<(), (String, Errno)> {
    for d in &ds.dirs {
        match fs.mkdir(d) {
            Ok(_) | Err(Errno::Exists) => {}
            Err(e) => return Err((d.clone(), e)),
        }
    }
    let mut buf = vec![0u8; CHUNK];
    for f in &ds.files {
        let ino = fs
            .create(&f.path, true)
            .map_err(|e| (f.path.clone(), e))?
            .ino;
        let mut off = 0u64;
        while off < f.size {
            let n = (f.size - off).min(CHUNK as u64) as usize;
            let chunk = &mut buf[..n];
            f.gen.fill(off, chunk);
            fs.write(ino, off, chunk)
                .map_err(|e| (format!("{} at {off}", f.path), e))?;
            off += n as u64;
        }
    }
    Ok(())
}
