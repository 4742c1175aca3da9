//! Workload datasets, generated deterministically from a size and a
//! seed, and what generating them needs (the workloads' randomness, the
//! `NAME:SIZE[:SEED]` syntax). The same plan is written into a disk
//! image on the host (`mkfs --dataset NAME:SIZE[:SEED]`, through
//! `flatfs::dataset`) and, in the host tests, through the OS interface
//! (`userland::app::dataset::write_os`): a run never spends guest time
//! creating its files.
//!
//! It is its own crate, below both, so the file system and its `mkfs`
//! build without the applications, and the applications read the very
//! layouts `mkfs` writes (`userland::app` re-exports each one under its
//! workload's module). It depends on `fabric` alone.
//!
//! Every dataset lives in one directory (`/apps/NAME` by default) with a
//! `manifest` of `key=value` lines that the workload reads first
//! (`app`, `format`, `seed`, then the workload's own geometry).
//!
//! * [`data`]: what every dataset is made of (files, generators, the
//!   manifest).
//! * [`kv`], [`infer`], [`ann`], [`fileset`]: each workload's layout.
//! * [`rng`]: deterministic randomness (SplitMix64 per stream, a keyed
//!   hash, gamma and zipfian draws).
//! * [`num`]: sizes and counts as users write them.
//! * [`fmath`]: `ln`, `exp` and `powf` without `std`.
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

extern crate alloc;

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

pub mod ann;
pub mod data;
pub mod fileset;
pub mod fmath;
pub mod infer;
pub mod kv;
pub mod num;
pub mod rng;

pub use data::{
    manifest, pattern_fill, Bytes, DataFile, Dataset, Gen, Pattern, FORMAT, MAX_SIZE, MIN_SIZE,
};

/// The workloads that have a dataset, as `app NAME` and `--dataset
/// NAME:SIZE` take them.
pub const NAMES: &[&str] = &[
    "webserver",
    "fileserver",
    "varmail",
    "kv",
    "infer",
    "ann",
    "search",
];

/// The seed of a dataset (and a run) that names none.
pub const DEFAULT_SEED: u64 = 1;

/// Parse `SIZE` limits and plan workload `app`'s dataset of about `size`
/// bytes under `root`.
pub fn plan(app: &str, size: u64, seed: u64, root: &str) -> Result<Dataset, String> {
    if !(MIN_SIZE..=MAX_SIZE).contains(&size) {
        return Err(format!(
            "dataset size {size} out of range ({MIN_SIZE}..={MAX_SIZE} bytes)"
        ));
    }
    let mut ds = match app {
        "webserver" => fileset::webserver::plan(size, seed, root),
        "fileserver" => fileset::fileserver::plan(size, seed, root),
        "varmail" => fileset::varmail::plan(size, seed, root),
        "kv" => kv::plan(size, seed, root),
        "infer" => infer::plan(size, seed, root),
        "ann" => ann::plan(size, seed, root),
        "search" => fileset::search::plan(size, seed, root),
        _ => return Err(format!("unknown app '{app}' (one of {})", NAMES.join(", "))),
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
    if !NAMES.contains(&name) {
        return Err(format!(
            "dataset '{spec}': unknown app '{name}' (one of {})",
            NAMES.join(", ")
        ));
    }
    let size = num::size(size)
        .ok()
        .filter(|s| (MIN_SIZE..=MAX_SIZE).contains(s))
        .ok_or_else(|| format!("dataset '{spec}': bad size '{size}' (64k..64g, like 64m)"))?;
    let seed = match seed {
        None => DEFAULT_SEED,
        Some(s) => num::parse_u64(s).ok_or_else(|| format!("dataset '{spec}': bad seed '{s}'"))?,
    };
    Ok((name.to_string(), size, seed))
}
