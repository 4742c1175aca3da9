//! What every dataset is made of: files whose bytes a generator
//! produces at any offset, the directories they live in, and the
//! manifest a workload reads first.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use crate::rng::hash2;

/// The dataset format the workloads understand (`format=` in the
/// manifest).
pub const FORMAT: u64 = 1;
/// Largest dataset [`plan`] builds (a disk image holds it).
pub const MAX_SIZE: u64 = 64 << 30;
/// Smallest dataset.
pub const MIN_SIZE: u64 = 64 << 10;

/// Produces a file's bytes at any 4 KiB-aligned offset.
pub trait Gen {
    /// Fill `buf` with the file's bytes at `offset` (a multiple of 4096;
    /// `buf` may run past the end of the file: those bytes are
    /// unspecified).
    fn fill(&self, offset: u64, buf: &mut [u8]);
}

/// Bytes held in memory (manifests, small tables).
pub struct Bytes(pub Vec<u8>);

impl Gen for Bytes {
    fn fill(&self, offset: u64, buf: &mut [u8]) {
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        for (i, b) in buf.iter_mut().enumerate() {
            *b = self.0.get(start.saturating_add(i)).copied().unwrap_or(0);
        }
    }
}

/// Pseudo-random bytes keyed by `key`: byte `o` is byte `o % 8` of
/// `hash2(key, o / 8)`.
pub struct Pattern(pub u64);

impl Gen for Pattern {
    fn fill(&self, offset: u64, buf: &mut [u8]) {
        pattern_fill(self.0, offset, buf);
    }
}

/// [`Pattern`]'s bytes (`offset` a multiple of 8).
pub fn pattern_fill(key: u64, offset: u64, buf: &mut [u8]) {
    for (i, chunk) in buf.chunks_mut(8).enumerate() {
        let w = hash2(key, offset / 8 + i as u64).to_le_bytes();
        chunk.copy_from_slice(&w[..chunk.len()]);
    }
}

/// One file of a dataset.
pub struct DataFile {
    /// Absolute path.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// Its bytes.
    pub gen: Box<dyn Gen>,
}

/// Directories and files of one workload's dataset.
pub struct Dataset {
    /// The workload.
    pub app: &'static str,
    /// The root directory.
    pub root: String,
    /// Directories to create, parents first (the root included).
    pub dirs: Vec<String>,
    /// Files.
    pub files: Vec<DataFile>,
}

impl Dataset {
    /// Total bytes of file data.
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }
}

/// `app=NAME`, `format=1`, `seed=S`, then `rest`, one `key=value` a
/// line.
pub fn manifest(app: &str, seed: u64, rest: &[(&str, u64)]) -> DataFile {
    let mut text = format!("app={app}\nformat={FORMAT}\nseed={seed}\n");
    for (k, v) in rest {
        text.push_str(&format!("{k}={v}\n"));
    }
    DataFile {
        path: String::new(),
        size: text.len() as u64,
        gen: Box::new(Bytes(text.into_bytes())),
    }
}
