//! `app ann`: DiskANN-style search over a disk-resident graph index
//! built on the host. `DIR/index.bin`: a header block, then one 4 KiB
//! block per point holding its full vector (128 bytes) and its
//! neighbour list (32 ids); `DIR/pq.bin`: every point's compressed
//! vector (16 bytes: the mean of each 8 dimensions), loaded into memory
//! at the start; `DIR/queries.bin`: query vectors with their true 10
//! nearest neighbours (brute force on the host).
//!
//! The points are a 3-D lattice embedded in 128 dimensions (a fixed
//! random linear map plus noise); each point's neighbours are its
//! nearest points among the lattice cells around it plus a few random
//! long links, so the graph is navigable as a Vamana graph is.
//!
//! A query is a greedy beam search from the fixed entry point: keep the
//! `--list` (32) best candidates by compressed distance, read the
//! `--beam` (4) best unvisited ones' blocks together (queued with the
//! other threads' reads), rank the visited points by full distance, add
//! their neighbours, until no candidate is unvisited; the answer is the
//! 10 nearest visited points. Metric: queries per second, and recall@10
//! against the brute-force truth over every query run.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::Cell;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use super::dataset::{manifest, Bytes, DataFile, Dataset, Gen, Manifest};
use super::kv::read_exact;
use super::options::Options;
use super::report::{Extra, Report};
use super::rng::{hash2, Rng};
use super::{AppError, Run};
use crate::os::{Fd, OpenFlags};
use crate::task::{IoDone, IoFuture, Tasks};

/// Operation kinds: one query.
pub const NAMES: &[&str] = &["query"];
/// Default threads.
pub const DEFAULT_THREADS: u32 = 8;
/// Its own options.
pub const OPTIONS: &[&str] = &["list", "beam"];
/// Vector dimensions.
pub const DIM: usize = 128;
/// Neighbours per point.
pub const DEGREE: usize = 32;
/// Compressed vector bytes.
pub const PQ: usize = 16;
/// Answers per query.
pub const TOP: usize = 10;
/// Queries in the dataset.
pub const QUERIES: u64 = 100;
const BLOCK: u64 = 4096;
const QREC: usize = DIM + TOP * 4;

/// The index's geometry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Space {
    /// Points.
    pub n: u64,
    /// Lattice side.
    pub side: u64,
    /// Dataset seed.
    pub seed: u64,
}

impl Space {
    /// A space of `n` points.
    pub fn new(n: u64, seed: u64) -> Space {
        let mut side = 1;
        while side * side * side < n {
            side += 1;
        }
        Space { n, side, seed }
    }

    fn cell(&self, i: u64) -> [i64; 3] {
        let s = self.side;
        [(i % s) as i64, ((i / s) % s) as i64, (i / (s * s)) as i64]
    }

    /// The vector at latent position `pos` with noise key `key`.
    fn embed(&self, pos: [f64; 3], key: u64) -> [u8; DIM] {
        let mut v = [0u8; DIM];
        let half = self.side as f64 / 2.0;
        let scale = 90.0 / (1.8 * half.max(1.0));
        for (d, out) in v.iter_mut().enumerate() {
            let mut x = 128.0;
            for (c, p) in pos.iter().enumerate() {
                let a = (hash2(self.seed ^ 0xa11, (d * 3 + c) as u64) % 2001) as f64 / 1000.0 - 1.0;
                x += a * (p - half) * scale;
            }
            x += (hash2(key, d as u64) % 5) as f64 - 2.0;
            *out = x.clamp(0.0, 255.0) as u8;
        }
        v
    }

    /// Point `i`'s vector.
    pub fn vector(&self, i: u64) -> [u8; DIM] {
        let c = self.cell(i);
        let j = |k: u64| (hash2(self.seed ^ i, k) % 601) as f64 / 1000.0 - 0.3;
        let pos = [c[0] as f64 + j(1), c[1] as f64 + j(2), c[2] as f64 + j(3)];
        self.embed(pos, hash2(self.seed, i))
    }

    /// Point `i`'s neighbours: the nearest of the cells within 2 in each
    /// lattice direction, and 4 random long links.
    pub fn neighbours(&self, i: u64) -> [u32; DEGREE] {
        let me = self.vector(i);
        let c = self.cell(i);
        let s = self.side as i64;
        let mut cand: Vec<(u64, u64)> = Vec::new();
        for dz in -2..=2i64 {
            for dy in -2..=2i64 {
                for dx in -2..=2i64 {
                    let (x, y, z) = (c[0] + dx, c[1] + dy, c[2] + dz);
                    if x < 0 || y < 0 || z < 0 || x >= s || y >= s || z >= s {
                        continue;
                    }
                    let j = (x + y * s + z * s * s) as u64;
                    if j == i || j >= self.n {
                        continue;
                    }
                    cand.push((dist(&me, &self.vector(j)), j));
                }
            }
        }
        cand.sort_unstable();
        let mut out = [u32::MAX; DEGREE];
        let near = DEGREE - 4;
        let mut k = 0;
        for &(_, j) in cand.iter().take(near) {
            out[k] = j as u32;
            k += 1;
        }
        let mut r = Rng::new(self.seed ^ 0x10_4b, i);
        let mut tries = 0;
        while k < DEGREE && tries < 64 && self.n > 1 {
            tries += 1;
            let j = r.below(self.n);
            if j != i && !out[..k].contains(&(j as u32)) {
                out[k] = j as u32;
                k += 1;
            }
        }
        out
    }

    /// The entry point: the lattice centre (or the last point).
    pub fn entry(&self) -> u64 {
        let h = self.side / 2;
        (h + h * self.side + h * self.side * self.side).min(self.n - 1)
    }

    /// Query `q`'s vector.
    pub fn query(&self, q: u64) -> [u8; DIM] {
        let mut r = Rng::new(self.seed ^ 0x9e, q);
        let layers = self.n.div_ceil(self.side * self.side).max(1);
        let span = |r: &mut Rng, m: u64| r.below(m.saturating_sub(1).max(1) * 1000) as f64 / 1000.0;
        let pos = [
            span(&mut r, self.side),
            span(&mut r, self.side),
            span(&mut r, layers),
        ];
        self.embed(pos, hash2(self.seed ^ 0x9e, q))
    }

    /// The true `TOP` nearest points of `v` (brute force), nearest first.
    pub fn truth(&self, v: &[u8; DIM]) -> [u32; TOP] {
        let mut best: Vec<(u64, u64)> = Vec::with_capacity(TOP + 1);
        for i in 0..self.n {
            let d = dist(v, &self.vector(i));
            if best.len() < TOP || d < best[best.len() - 1].0 {
                let at = best.partition_point(|&(bd, bi)| (bd, bi) < (d, i));
                best.insert(at, (d, i));
                best.truncate(TOP);
            }
        }
        let mut out = [u32::MAX; TOP];
        for (o, (_, i)) in out.iter_mut().zip(best) {
            *o = i as u32;
        }
        out
    }
}

/// Squared L2 distance.
pub fn dist(a: &[u8], b: &[u8]) -> u64 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| {
            let d = i64::from(x) - i64::from(y);
            (d * d) as u64
        })
        .sum()
}

/// The compressed form of a vector.
pub fn compress(v: &[u8; DIM]) -> [u8; PQ] {
    let mut out = [0u8; PQ];
    for (o, chunk) in out.iter_mut().zip(v.chunks(DIM / PQ)) {
        *o = (chunk.iter().map(|&b| u32::from(b)).sum::<u32>() / (DIM / PQ) as u32) as u8;
    }
    out
}

struct Index(Space);

impl Gen for Index {
    fn fill(&self, offset: u64, buf: &mut [u8]) {
        for (k, chunk) in buf.chunks_mut(BLOCK as usize).enumerate() {
            let b = offset / BLOCK + k as u64;
            let mut block = vec![0u8; BLOCK as usize];
            if b == 0 {
                block[..8].copy_from_slice(b"ONECANN1");
                block[8..16].copy_from_slice(&self.0.n.to_le_bytes());
            } else if b <= self.0.n {
                let i = b - 1;
                block[..DIM].copy_from_slice(&self.0.vector(i));
                for (j, id) in self.0.neighbours(i).iter().enumerate() {
                    let at = DIM + j * 4;
                    block[at..at + 4].copy_from_slice(&id.to_le_bytes());
                }
            }
            let n = chunk.len();
            chunk.copy_from_slice(&block[..n]);
        }
    }
}

struct Pq(Space);

impl Gen for Pq {
    fn fill(&self, offset: u64, buf: &mut [u8]) {
        for (k, b) in buf.iter_mut().enumerate() {
            let pos = offset + k as u64;
            let i = pos / PQ as u64;
            *b = if i < self.0.n {
                compress(&self.0.vector(i))[(pos % PQ as u64) as usize]
            } else {
                0
            };
        }
    }
}

/// The dataset: about `size` bytes of index.
pub fn plan(size: u64, seed: u64, root: &str) -> Result<Dataset, String> {
    let n = (size / BLOCK).saturating_sub(1).max(16);
    let sp = Space::new(n, seed);
    let mut queries = Vec::with_capacity(QUERIES as usize * QREC);
    for q in 0..QUERIES {
        let v = sp.query(q);
        queries.extend_from_slice(&v);
        for id in sp.truth(&v) {
            queries.extend_from_slice(&id.to_le_bytes());
        }
    }
    let files = vec![
        DataFile {
            path: format!("{root}/manifest"),
            ..manifest(
                "ann",
                seed,
                &[
                    ("points", n),
                    ("dim", DIM as u64),
                    ("degree", DEGREE as u64),
                    ("entry", sp.entry()),
                    ("queries", QUERIES),
                ],
            )
        },
        DataFile {
            path: format!("{root}/index.bin"),
            size: (n + 1) * BLOCK,
            gen: Box::new(Index(sp)),
        },
        DataFile {
            path: format!("{root}/pq.bin"),
            size: n * PQ as u64,
            gen: Box::new(Pq(sp)),
        },
        DataFile {
            path: format!("{root}/queries.bin"),
            size: queries.len() as u64,
            gen: Box::new(Bytes(queries)),
        },
    ];
    Ok(Dataset {
        app: "ann",
        root: String::from(root),
        dirs: vec![String::from(root)],
        files,
    })
}

/// `ann`'s own options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// `--list`: candidate list size L (10..=256, 32).
    pub list: usize,
    /// `--beam`: blocks read together per step W (1..=16, 4).
    pub beam: usize,
}

impl Params {
    /// From the parsed options.
    pub fn from(o: &Options) -> Result<Params, AppError> {
        Ok(Params {
            list: o.count("list", 32, TOP as u64, 256)? as usize,
            beam: o.count("beam", 4, 1, 16)? as usize,
        })
    }
}

/// Wait for every I/O of a step together.
struct JoinAll<'t, 'a> {
    futs: Vec<Option<IoFuture<'t, 'a>>>,
    out: Vec<Option<IoDone>>,
}

impl Future for JoinAll<'_, '_> {
    type Output = Vec<IoDone>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Vec<IoDone>> {
        let this = self.get_mut();
        let mut pending = false;
        for (f, o) in this.futs.iter_mut().zip(this.out.iter_mut()) {
            if let Some(fut) = f {
                match Pin::new(fut).poll(cx) {
                    Poll::Ready(d) => {
                        *o = Some(d);
                        *f = None;
                    }
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            return Poll::Pending;
        }
        Poll::Ready(this.out.iter_mut().filter_map(Option::take).collect())
    }
}

/// What a run loads before it starts.
struct Loaded {
    n: u64,
    entry: u64,
    pq: Vec<u8>,
    queries: Vec<u8>,
}

fn load(ex: &Tasks<'_>, dir: &str) -> Result<Loaded, AppError> {
    let man = ex.with_os(|os| Manifest::load(os, dir, "ann"))?;
    if man.num("dim")? != DIM as u64 || man.num("degree")? != DEGREE as u64 {
        return Err(AppError::new(format!(
            "{dir}/manifest: expects dim {DIM}, degree {DEGREE}"
        )));
    }
    let n = man.num_in("points", 1, u64::from(u32::MAX - 1))?;
    let entry = man.num_in("entry", 0, n - 1)?;
    let q = man.num_in("queries", 1, 1 << 20)?;
    let mut pq = vec![0u8; n as usize * PQ];
    let mut queries = vec![0u8; q as usize * QREC];
    for (name, buf) in [("pq.bin", &mut pq), ("queries.bin", &mut queries)] {
        let path = format!("{dir}/{name}");
        let fd = ex
            .with_os(|os| os.open(&path, OpenFlags::default()))
            .map_err(|e| AppError::new(format!("{path}: open: {e}")))?;
        let r = read_exact(ex, fd, 0, buf, &path);
        let _ = ex.with_os(|os| os.close(fd));
        r?;
    }
    Ok(Loaded {
        n,
        entry,
        pq,
        queries,
    })
}

/// Run it.
pub fn run(ex: &Tasks<'_>, run: &Run, opts: &Options) -> Result<Report, AppError> {
    let p = Params::from(opts)?;
    let d = load(ex, &run.dir)?;
    let path = format!("{}/index.bin", run.dir);
    let fd = ex
        .with_os(|os| os.open(&path, OpenFlags::default()))
        .map_err(|e| AppError::new(format!("{path}: open: {e}")))?;
    let out = search_all(ex, run, &p, &d, fd, &path);
    let closed = ex.with_os(|os| os.close(fd));
    let mut r = out?;
    closed.map_err(|e| AppError::new(format!("{path}: close: {e}")))?;
    r.metric = "queries_per_s";
    r.unit = "queries/s";
    r.throughput_milli = r.rate_milli(0);
    r.extra.push(("list", Extra::Uint(p.list as u64)));
    r.extra.push(("beam", Extra::Uint(p.beam as u64)));
    Ok(r)
}

fn search_all(
    ex: &Tasks<'_>,
    run: &Run,
    p: &Params,
    d: &Loaded,
    fd: Fd,
    path: &str,
) -> Result<Report, AppError> {
    let m = run.meter(ex, NAMES);
    let hits = Cell::new(0u64);
    let asked = Cell::new(0u64);
    let reads = Cell::new(0u64);
    let nq = (d.queries.len() / QREC) as u64;
    let result = ex.run_n(run.threads as usize, |t| {
        let (m, hits, asked, reads) = (&m, &hits, &asked, &reads);
        let mut rng = Rng::new(run.seed, 5000 + t as u64);
        async move {
            while m.begin(ex.uptime_ns()) {
                let qi = rng.below(nq) as usize;
                let rec = &d.queries[qi * QREC..(qi + 1) * QREC];
                let t0 = ex.uptime_ns();
                match search(ex, p, d, fd, &rec[..DIM]).await {
                    Ok((found, blocks)) => {
                        let truth: Vec<u32> = rec[DIM..]
                            .chunks(4)
                            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                            .collect();
                        let h = found.iter().filter(|id| truth.contains(id)).count();
                        hits.set(hits.get() + h as u64);
                        asked.set(asked.get() + TOP as u64);
                        reads.set(reads.get() + blocks);
                        let t1 = ex.uptime_ns();
                        m.record(0, t1.saturating_sub(t0), blocks * BLOCK, 0, t1);
                    }
                    Err(e) => {
                        m.fail(AppError::new(format!("{path}: {e}")));
                        break;
                    }
                }
            }
        }
    });
    let mut r = run.finish(ex, "ann", result, &m, Ok(()))?;
    let recall = (hits.get() * 1000).checked_div(asked.get()).unwrap_or(0);
    r.extra.push(("recall_at_10", Extra::Milli(recall)));
    r.extra.push(("points", Extra::Uint(d.n)));
    r.extra.push(("blocks_read", Extra::Uint(reads.get())));
    Ok(r)
}

/// One query: the `TOP` nearest visited points and the blocks read.
async fn search(
    ex: &Tasks<'_>,
    p: &Params,
    d: &Loaded,
    fd: Fd,
    q: &[u8],
) -> Result<(Vec<u32>, u64), String> {
    let mut qv = [0u8; DIM];
    qv.copy_from_slice(q);
    let qc = compress(&qv);
    let pq_dist = |i: u64| {
        let at = i as usize * PQ;
        dist(&qc, &d.pq[at..at + PQ])
    };
    let mut seen = vec![0u64; (d.n as usize).div_ceil(64)];
    let mark = |seen: &mut Vec<u64>, i: u64| -> bool {
        let (w, b) = ((i / 64) as usize, i % 64);
        let was = seen[w] >> b & 1 == 1;
        seen[w] |= 1 << b;
        !was
    };
    // (compressed distance, id, visited)
    let mut list: Vec<(u64, u64, bool)> = vec![(pq_dist(d.entry), d.entry, false)];
    mark(&mut seen, d.entry);
    let mut results: Vec<(u64, u32)> = Vec::new();
    let mut blocks = 0u64;
    loop {
        let pick: Vec<usize> = list
            .iter()
            .enumerate()
            .filter(|(_, c)| !c.2)
            .take(p.beam)
            .map(|(i, _)| i)
            .collect();
        if pick.is_empty() {
            break;
        }
        let ids: Vec<u64> = pick.iter().map(|&i| list[i].1).collect();
        for &i in &pick {
            list[i].2 = true;
        }
        let futs = ids
            .iter()
            .map(|&id| Some(ex.pread(fd, (id + 1) * BLOCK, vec![0u8; BLOCK as usize])))
            .collect();
        let dones = JoinAll {
            futs,
            out: (0..ids.len()).map(|_| None).collect(),
        }
        .await;
        for (id, done) in ids.iter().zip(dones) {
            match done.result {
                Ok(n) if n == BLOCK as usize => {}
                Ok(n) => return Err(format!("block {}: short read ({n} bytes)", id + 1)),
                Err(e) => return Err(format!("block {}: {e}", id + 1)),
            }
            blocks += 1;
            let b = &done.buf;
            results.push((dist(&qv, &b[..DIM]), *id as u32));
            for k in 0..DEGREE {
                let at = DIM + k * 4;
                let nb = u64::from(u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]));
                if nb >= d.n || !mark(&mut seen, nb) {
                    continue;
                }
                let dn = pq_dist(nb);
                if list.len() >= p.list && dn >= list[list.len() - 1].0 {
                    continue;
                }
                let at = list.partition_point(|c| c.0 <= dn);
                list.insert(at, (dn, nb, false));
                list.truncate(p.list);
            }
        }
    }
    results.sort_unstable();
    Ok((results.iter().take(TOP).map(|r| r.1).collect(), blocks))
}
