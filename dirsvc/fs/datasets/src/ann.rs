//! `ann`'s dataset: `DIR/index.bin` (a header block, then one 4 KiB
//! block per point: its full vector and its neighbour list), `DIR/pq.bin`
//! (every point's compressed vector) and `DIR/queries.bin` (query
//! vectors with their true nearest neighbours). The points are a 3-D
//! lattice embedded in 128 dimensions; each point's neighbours are its
//! nearest points among the cells around it plus a few random long links.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use crate::data::{manifest, Bytes, DataFile, Dataset, Gen};
use crate::rng::{hash2, Rng};

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
/// Bytes of an index block (one point each).
pub const BLOCK: u64 = 4096;
/// Bytes of one query record: its vector, then its true neighbours.
pub const QREC: usize = DIM + TOP * 4;

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
