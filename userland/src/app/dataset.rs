//! Workload datasets, generated deterministically from a size and a
//! seed. The same plan is written into a disk image on the host
//! (`mkfs --dataset NAME:SIZE[:SEED]`) and, in the host tests, through
//! an [`Os`]: a run never spends guest time creating its files.
//!
//! Every dataset lives in one directory (`/apps/NAME` by default) with a
//! `manifest` of `key=value` lines that the workload reads first
//! (`app`, `format`, `seed`, then the workload's own geometry).

use alloc::boxed::Box;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

use super::rng::hash2;
use super::AppError;
use crate::os::{Errno, OpenFlags, Os};

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

/// Parse `SIZE` limits and plan workload `app`'s dataset of about `size`
/// bytes under `root`.
pub fn plan(app: &str, size: u64, seed: u64, root: &str) -> Result<Dataset, String> {
    if !(MIN_SIZE..=MAX_SIZE).contains(&size) {
        return Err(format!(
            "dataset size {size} out of range ({MIN_SIZE}..={MAX_SIZE} bytes)"
        ));
    }
    let mut ds = match app {
        "webserver" => super::webserver::plan(size, seed, root),
        "fileserver" => super::fileserver::plan(size, seed, root),
        "varmail" => super::varmail::plan(size, seed, root),
        "kv" => super::kv::plan(size, seed, root),
        "infer" => super::infer::plan(size, seed, root),
        "ann" => super::ann::plan(size, seed, root),
        "search" => super::search::plan(size, seed, root),
        _ => {
            return Err(format!(
                "unknown app '{app}' (one of {})",
                super::NAMES.join(", ")
            ))
        }
    }?;
    // Parents of the root first.
    let mut parents = Vec::new();
    let mut p = String::new();
    for comp in root.split('/').filter(|c| !c.is_empty()) {
        p.push('/');
        p.push_str(comp);
        parents.push(p.clone());
    }
    parents.pop();
    parents.append(&mut ds.dirs);
    ds.dirs = parents;
    Ok(ds)
}

/// The `app` arguments of the host tools: `NAME:SIZE[:SEED]` (SIZE like
/// `64m`), as `(name, size, seed)`.
pub fn parse_spec(spec: &str) -> Result<(String, u64, u64), String> {
    let mut parts = spec.split(':');
    let name = parts.next().unwrap_or("");
    let size = parts
        .next()
        .ok_or_else(|| format!("dataset '{spec}': expected NAME:SIZE[:SEED] (e.g. kv:64m)"))?;
    let seed = parts.next();
    if parts.next().is_some() {
        return Err(format!("dataset '{spec}': expected NAME:SIZE[:SEED]"));
    }
    if !super::NAMES.contains(&name) {
        return Err(format!(
            "dataset '{spec}': unknown app '{name}' (one of {})",
            super::NAMES.join(", ")
        ));
    }
    let size = crate::parse::size(size)
        .ok()
        .filter(|s| (MIN_SIZE..=MAX_SIZE).contains(s))
        .ok_or_else(|| format!("dataset '{spec}': bad size '{size}' (64k..64g, like 64m)"))?;
    let seed = match seed {
        None => super::options::DEFAULT_SEED,
        Some(s) => super::options::parse_u64(s)
            .ok_or_else(|| format!("dataset '{spec}': bad seed '{s}'"))?,
    };
    Ok((name.to_string(), size, seed))
}

/// Write `ds` through `os` (host tests; the guest normally finds it on
/// the disk image). Existing directories are kept, files replaced.
pub fn write_os(os: &mut dyn Os, ds: &Dataset) -> Result<(), AppError> {
    for d in &ds.dirs {
        match os.mkdir(d) {
            Ok(()) | Err(Errno::Exists) => {}
            Err(e) => return Err(AppError::new(format!("{d}: mkdir: {e}"))),
        }
    }
    let mut buf = vec![0u8; 64 << 10];
    for f in &ds.files {
        let flags = OpenFlags {
            create: true,
            truncate: true,
            ..OpenFlags::default()
        };
        let fd = os
            .open(&f.path, flags)
            .map_err(|e| AppError::new(format!("{}: create: {e}", f.path)))?;
        let mut off = 0u64;
        let mut res = Ok(());
        while off < f.size {
            let n = usize::try_from((f.size - off).min(buf.len() as u64)).unwrap_or(buf.len());
            let chunk = &mut buf[..n];
            f.gen.fill(off, chunk);
            let mut done = 0;
            while done < n {
                match os.write(fd, &chunk[done..]) {
                    Ok(0) => {
                        res = Err(AppError::new(format!("{}: write: no progress", f.path)));
                        break;
                    }
                    Ok(k) => done += k,
                    Err(e) => {
                        res = Err(AppError::new(format!("{}: write: {e}", f.path)));
                        break;
                    }
                }
            }
            if res.is_err() {
                break;
            }
            off += n as u64;
        }
        let closed = os.close(fd);
        res?;
        closed.map_err(|e| AppError::new(format!("{}: close: {e}", f.path)))?;
    }
    Ok(())
}

/// A manifest as read back: `key=value` pairs.
#[derive(Debug, Clone)]
pub struct Manifest {
    path: String,
    pairs: Vec<(String, String)>,
}

/// Most bytes of a manifest.
const MAX_MANIFEST: usize = 4096;

impl Manifest {
    /// Read `DIR/manifest` and check it is workload `app`'s, format
    /// [`FORMAT`].
    pub fn load(os: &mut dyn Os, dir: &str, app: &str) -> Result<Manifest, AppError> {
        let path = format!("{}/manifest", dir.trim_end_matches('/'));
        let hint = format!(
            "build it on the host: qemu-run.sh --dataset {app}:SIZE (or mkfs --dataset {app}:SIZE)"
        );
        let fd = os
            .open(&path, OpenFlags::default())
            .map_err(|e| AppError::new(format!("{path}: {e}: no {app} dataset here ({hint})")))?;
        let mut buf = vec![0u8; MAX_MANIFEST];
        let mut n = 0;
        let mut res = Ok(());
        while n < buf.len() {
            match os.read(fd, &mut buf[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) => {
                    res = Err(AppError::new(format!("{path}: read: {e}")));
                    break;
                }
            }
        }
        let _ = os.close(fd);
        res?;
        let text = core::str::from_utf8(&buf[..n])
            .map_err(|_| AppError::new(format!("{path}: not text")))?;
        let pairs = text
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect();
        let m = Manifest { path, pairs };
        let found = m.text("app")?;
        if found != app {
            return Err(AppError::new(format!(
                "{}: a {found} dataset, not {app} ({hint})",
                m.path
            )));
        }
        let format = m.num("format")?;
        if format != FORMAT {
            return Err(AppError::new(format!(
                "{}: format {format}, this build reads format {FORMAT} ({hint})",
                m.path
            )));
        }
        Ok(m)
    }

    /// The text of `key`.
    pub fn text(&self, key: &str) -> Result<&str, AppError> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .ok_or_else(|| AppError::new(format!("{}: no '{key}'", self.path)))
    }

    /// `key` as an integer.
    pub fn num(&self, key: &str) -> Result<u64, AppError> {
        let v = self.text(key)?;
        crate::parse::u64_dec(v)
            .map_err(|_| AppError::new(format!("{}: '{key}={v}' is not a number", self.path)))
    }

    /// `key` as an integer in `lo..=hi`.
    pub fn num_in(&self, key: &str, lo: u64, hi: u64) -> Result<u64, AppError> {
        let v = self.num(key)?;
        if (lo..=hi).contains(&v) {
            Ok(v)
        } else {
            Err(AppError::new(format!(
                "{}: '{key}={v}' out of range {lo}..={hi}",
                self.path
            )))
        }
    }
}
