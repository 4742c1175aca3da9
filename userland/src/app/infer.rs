//! `app infer`: CPU inference of a mixture-of-experts model (DeepSeek
//! V2 Lite's shape: 64 routed experts, 6 active per token, shared
//! layers about 1/16 of the weights) memory-mapped from one weights
//! file built on the host (`DIR/weights.bin`: a header block, the
//! shared layers, then the experts, each 4 KiB aligned; weights are
//! signed bytes).
//!
//! A run decodes sequences of `--seq-len` tokens (16); threads take the
//! next sequence number from a shared counter, so the set of sequences
//! decoded does not depend on the thread count. Each token reads the
//! shared layers and its `k` experts (chosen by a hash of the token)
//! through `mmap` in 64 KiB loads (queued with the other threads'), and
//! does `--compute` (1) multiply-accumulates per weight byte with an
//! activation vector derived from the token; the sum picks the next
//! token. The checksum (a sum over sequences of a hash of each
//! sequence's tokens) is therefore the same on every node, in every
//! mode and for every thread count, if every node read the same
//! weights. `--ops N` decodes N sequences. Metric: tokens per second.

use alloc::format;
use alloc::vec;
use core::cell::Cell;

use super::dataset::Manifest;
use super::options::Options;
use super::report::{Extra, Report};
use super::rng::hash2;
use super::{AppError, Run};
use crate::os::{Errno, Fd, OpenFlags};
use crate::task::Tasks;

/// Operation kinds: one decoded token.
pub const NAMES: &[&str] = &["token"];
/// Default threads.
pub const DEFAULT_THREADS: u32 = 4;
/// Its own options.
pub const OPTIONS: &[&str] = &["seq-len", "compute"];
pub use datasets::infer::{plan, Layout, CHUNK, DIM, EXPERTS, PAGE, TOP_K, VOCAB, WEIGHTS};

/// `infer`'s own options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// `--seq-len`: tokens per sequence (1..=4096, 16).
    pub seq_len: u64,
    /// `--compute`: multiply-accumulates per weight byte (1..=64, 1).
    pub compute: u64,
}

impl Params {
    /// From the parsed options.
    pub fn from(o: &Options) -> Result<Params, AppError> {
        Ok(Params {
            seq_len: o.count("seq-len", 16, 1, 4096)?,
            compute: o.count("compute", 1, 1, 64)?,
        })
    }
}

/// The experts token `tok` uses: `TOP_K` distinct ones.
pub fn route(tok: u64) -> [u64; TOP_K as usize] {
    let mut out = [u64::MAX; TOP_K as usize];
    let mut j = 0u64;
    let mut n = 0;
    while n < out.len() {
        let e = hash2(tok, 0x100 + j) % EXPERTS;
        j += 1;
        if !out[..n].contains(&e) {
            out[n] = e;
            n += 1;
        }
    }
    out
}

/// The dot product of `w` with the activations of `tok`, `compute`
/// times (each pass with a different activation offset).
pub fn dot(w: &[u8], act: &[i8; DIM], compute: u64) -> i64 {
    let mut acc = 0i64;
    for pass in 0..compute as usize {
        let mut s = 0i64;
        for (i, &b) in w.iter().enumerate() {
            s += i64::from(b as i8) * i64::from(act[(i + pass) % DIM]);
        }
        acc = acc.wrapping_add(s);
    }
    acc
}

fn activations(tok: u64) -> [i8; DIM] {
    let mut a = [0i8; DIM];
    for (i, v) in a.iter_mut().enumerate() {
        *v = hash2(tok, i as u64) as i8;
    }
    a
}

/// Run it.
pub fn run(ex: &Tasks<'_>, run: &Run, opts: &Options) -> Result<Report, AppError> {
    let p = Params::from(opts)?;
    let man = ex.with_os(|os| Manifest::load(os, &run.dir, "infer"))?;
    if man.num("experts")? != EXPERTS || man.num("topk")? != TOP_K {
        return Err(AppError::new(format!(
            "{}/manifest: expects {EXPERTS} experts, top {TOP_K}",
            run.dir
        )));
    }
    let l = Layout {
        shared: man.num_in("shared", PAGE, 1 << 40)?,
        expert: man.num_in("expert", PAGE, 1 << 40)?,
        seed: man.num("seed")?,
    };
    let path = format!("{}/{WEIGHTS}", run.dir);
    let size = ex
        .with_os(|os| os.stat(&path))
        .map_err(|e| AppError::new(format!("{path}: {e}")))?
        .size;
    if size < l.size() {
        return Err(AppError::new(format!(
            "{path}: {size} bytes, the manifest needs {}",
            l.size()
        )));
    }
    // The weights are read through `mmap` where the mode has it; the
    // private-cache modes (`private`, `net`) have no mmap path, so there
    // the same bytes are read with `pread` through one descriptor (what
    // a page-cache mapping of a virtiofs or NFS file costs: a page-cache
    // read per page).
    let access = match ex.with_os(|os| os.mmap_io(&path, 0, 0, false, &mut [])) {
        Ok(()) => Access::Mmap,
        Err(Errno::NotSupported) => Access::Read(
            ex.with_os(|os| os.open(&path, OpenFlags::default()))
                .map_err(|e| AppError::new(format!("{path}: open: {e}")))?,
        ),
        Err(e) => return Err(AppError::new(format!("{path}: mmap: {e}"))),
    };
    let out = decode(ex, run, &p, l, &path, access);
    if let Access::Read(fd) = access {
        let closed = ex
            .with_os(|os| os.close(fd))
            .map_err(|e| AppError::new(format!("{path}: close: {e}")));
        let r = out?;
        closed?;
        return Ok(r);
    }
    out
}

/// How the weights are read.
#[derive(Debug, Clone, Copy)]
enum Access {
    /// Loads through the file's mapping.
    Mmap,
    /// `pread` through this descriptor (no mmap in the mode).
    Read(Fd),
}

/// Decodes until the run ends; the report.
fn decode(
    ex: &Tasks<'_>,
    run: &Run,
    p: &Params,
    l: Layout,
    path: &str,
    access: Access,
) -> Result<Report, AppError> {
    let m = run.meter(ex, NAMES);
    let next_seq = Cell::new(0u64);
    let checksum = Cell::new(0u64);
    let seqs_done = Cell::new(0u64);
    let result = ex.run_n(run.threads as usize, |_| {
        let (m, next_seq, checksum, seqs_done, path) =
            (&m, &next_seq, &checksum, &seqs_done, &path);
        async move {
            while run.begin(ex, m) {
                let s = next_seq.get();
                next_seq.set(s + 1);
                let mut tok = hash2(l.seed ^ run.seed, s) % VOCAB;
                let mut seq_hash = hash2(s, tok);
                for _ in 0..p.seq_len {
                    let t0 = ex.uptime_ns();
                    let act = activations(tok);
                    let mut acc = 0i64;
                    let mut read = 0u64;
                    let mut regions = vec![(l.shared_at(), l.shared)];
                    regions.extend(route(tok).iter().map(|&e| (l.expert_at(e), l.expert)));
                    for (at, len) in regions {
                        let mut off = 0;
                        while off < len {
                            let n = (len - off).min(CHUNK) as usize;
                            let done = match access {
                                Access::Mmap => ex.mmap_read(path, at + off, vec![0u8; n]).await,
                                Access::Read(fd) => ex.pread(fd, at + off, vec![0u8; n]).await,
                            };
                            if let Err(e) = done.result {
                                m.fail(AppError::new(format!(
                                    "{path}: {} at {}: {e}",
                                    access.name(),
                                    at + off
                                )));
                                return;
                            }
                            acc = acc.wrapping_add(dot(&done.buf, &act, p.compute));
                            read += n as u64;
                            off += n as u64;
                        }
                    }
                    tok = hash2(acc as u64, tok) % VOCAB;
                    seq_hash = hash2(seq_hash, tok);
                    let t1 = ex.uptime_ns();
                    run.record(ex, m, 0, t1.saturating_sub(t0), read, 0, t1);
                }
                checksum.set(checksum.get().wrapping_add(seq_hash));
                seqs_done.set(seqs_done.get() + 1);
            }
        }
    });
    let mut r = run.finish(ex, "infer", result, &m, Ok(()))?;
    r.metric = "tokens_per_s";
    r.unit = "tokens/s";
    r.throughput_milli = r.rate_milli(0);
    r.extra.push(("sequences", Extra::Uint(seqs_done.get())));
    r.extra.push(("seq_len", Extra::Uint(p.seq_len)));
    r.extra.push(("compute", Extra::Uint(p.compute)));
    r.extra
        .push(("checksum", Extra::Text(format!("{:016x}", checksum.get()))));
    r.extra.push(("access", Extra::Text(access.name().into())));
    Ok(r)
}

impl Access {
    fn name(self) -> &'static str {
        match self {
            Access::Mmap => "mmap",
            Access::Read(_) => "pread",
        }
    }
}
