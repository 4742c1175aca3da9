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

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::Cell;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use super::dataset::Manifest;
use super::kv::read_exact;
use super::options::Options;
use super::report::{Extra, Report};
use super::rng::Rng;
use super::{AppError, Run};
use crate::os::{Fd, OpenFlags};
use crate::task::{IoDone, IoFuture, Tasks};

/// Operation kinds: one query.
pub const NAMES: &[&str] = &["query"];
/// Default threads.
pub const DEFAULT_THREADS: u32 = 8;
/// Its own options.
pub const OPTIONS: &[&str] = &["list", "beam"];
pub use datasets::ann::{compress, dist, plan, Space, BLOCK, DEGREE, DIM, PQ, QREC, QUERIES, TOP};

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
            while run.begin(ex, m) {
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
