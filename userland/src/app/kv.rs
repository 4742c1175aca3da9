//! `app kv`: RocksDB's `db_bench readrandom` over one immutable sorted
//! table. The table (`DIR/table.sst`, built on the host) holds 24-byte
//! keys (`user` and 20 decimal digits, so byte order is key order) with
//! 1 KiB values, three entries to a 4 KiB data block; after the data
//! blocks comes the block index (each block's first key) and a footer
//! block. A run reads the footer and the index into memory (not timed),
//! then each thread does point lookups: pick a key (uniform, or
//! `--dist zipf:THETA`, YCSB's scrambled zipfian), binary-search the
//! in-memory index for its block, read the block (queued with the other
//! threads' reads), find the key and check its value. Metric: lookups
//! per second. With `--scan-frac F` a fraction F of the operations
//! are range scans instead (cache_ext's GET-SCAN mix, see [`super::scan`]):
//! `--scan-len N` consecutive blocks from a random start, each block's
//! first key checked, reported as operation kind `scan`; lookups per
//! second stay the headline.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::Cell;

use super::dataset::Manifest;
use super::options::{bad, parse_fraction, Options};
use super::report::{Extra, Report};
use super::rng::{Rng, Zipf, MAX_ZIPF_ITEMS};
use super::scan::{self, ScanMix};
use super::{AppError, Run};
use crate::os::OpenFlags;
use crate::task::Tasks;

/// Operation kinds.
pub const NAMES: &[&str] = &["get"];
/// Operation kinds with a scan mix.
pub const NAMES_SCAN: &[&str] = &["get", "scan"];
/// Default threads (db_bench `--threads`).
pub const DEFAULT_THREADS: u32 = 16;
/// Its own options.
pub const OPTIONS: &[&str] = &["dist", "scan-frac", "scan-len", "scan-group"];
pub use datasets::kv::{key_of, plan, value_of, Table, BLOCK, KEY, MAGIC, PER_BLOCK, TABLE, VALUE};

/// Key choice.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Dist {
    /// Every key alike.
    Uniform,
    /// YCSB's scrambled zipfian with this exponent.
    Zipf(f64),
}

/// `kv`'s own options.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// `--dist uniform|zipf:THETA` (uniform).
    pub dist: Dist,
    /// `--scan-frac`, `--scan-len`, `--scan-group` (no scans).
    pub scan: ScanMix,
}

impl Params {
    /// From the parsed options (errors name the option).
    pub fn from(o: &Options) -> Result<Params, AppError> {
        let dist = match o.take("dist") {
            None | Some("uniform") => Dist::Uniform,
            Some(v) => match v.strip_prefix("zipf:").and_then(parse_fraction) {
                Some(t) if t > 0.0 && t < 1.0 => Dist::Zipf(t),
                _ => return Err(bad("dist", v, "uniform or zipf:THETA with 0 < THETA < 1")),
            },
        };
        let scan = ScanMix::from(o)?;
        Ok(Params { dist, scan })
    }
}

/// Scramble rank `r` of `n` keys into a key (a fixed permutation that
/// spreads the hot keys over the table).
fn scramble(r: u64, n: u64) -> u64 {
    // Multiplying by a constant coprime to n permutes 0..n.
    let mut p = 0x9e37_79b9_7f4a_7c15u64 % n.max(1);
    while gcd(p, n) != 1 {
        p += 1;
    }
    ((u128::from(r) * u128::from(p)) % u128::from(n.max(1))) as u64
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Run it.
pub fn run(ex: &Tasks<'_>, run: &Run, opts: &Options) -> Result<Report, AppError> {
    let params = Params::from(opts)?;
    let man = ex.with_os(|os| Manifest::load(os, &run.dir, "kv"))?;
    let t = Table {
        blocks: man.num_in("blocks", 1, 1 << 34)?,
        keys: man.num("keys")?,
        seed: man.num("seed")?,
    };
    if t.keys != t.blocks * PER_BLOCK {
        return Err(AppError::new(format!(
            "{}/manifest: keys {} != blocks {} x {PER_BLOCK}",
            run.dir, t.keys, t.blocks
        )));
    }
    params.scan.check(t.blocks)?;
    // The command's group, which scans return to.
    let home = opts
        .group
        .as_deref()
        .unwrap_or(crate::os::DEFAULT_GROUP_NAME);
    if let Some(g) = &params.scan.group {
        ex.with_os(|os| scan::enter(os, g).and_then(|()| scan::enter(os, home)))?;
    }
    let zipf = match params.dist {
        Dist::Uniform => None,
        Dist::Zipf(theta) => {
            if t.keys > MAX_ZIPF_ITEMS {
                return Err(AppError::new(format!(
                    "--dist zipf: {} keys, at most {MAX_ZIPF_ITEMS}",
                    t.keys
                )));
            }
            Zipf::new(t.keys, theta)
        }
    };
    let path = format!("{}/{TABLE}", run.dir);
    let fd = ex
        .with_os(|os| os.open(&path, OpenFlags::default()))
        .map_err(|e| AppError::new(format!("{path}: open: {e}")))?;
    let out = lookups(ex, run, &t, zipf.as_ref(), &params.scan, home, fd, &path);
    let closed = ex
        .with_os(|os| os.close(fd))
        .map_err(|e| AppError::new(format!("{path}: close: {e}")));
    let mut r = out?;
    closed?;
    r.metric = "lookups_per_s";
    r.unit = "lookups/s";
    r.throughput_milli = r.rate_milli(0);
    r.extra.push((
        "dist",
        Extra::Text(match params.dist {
            Dist::Uniform => String::from("uniform"),
            Dist::Zipf(th) => format!("zipf:{}", (th * 1000.0 + 0.5) as u64 as f64 / 1000.0),
        }),
    ));
    if params.scan.on() {
        r.extra
            .push(("scan_frac", Extra::Text(params.scan.frac_text())));
        r.extra.push(("scan_len", Extra::Uint(params.scan.len)));
        r.extra.push((
            "scan_group",
            Extra::Text(String::from(params.scan.group.as_deref().unwrap_or(home))),
        ));
    }
    Ok(r)
}

#[allow(clippy::too_many_arguments)]
fn lookups(
    ex: &Tasks<'_>,
    run: &Run,
    t: &Table,
    zipf: Option<&Zipf>,
    mix: &ScanMix,
    home: &str,
    fd: crate::os::Fd,
    path: &str,
) -> Result<Report, AppError> {
    let index = read_index(ex, t, fd, path)?;
    let m = run.meter(ex, if mix.on() { NAMES_SCAN } else { NAMES });
    let sum = Cell::new(0u64);
    let scanned = Cell::new(0u64);
    let index = &index;
    let result = ex.run_n(run.threads as usize, |th| {
        let (m, sum, scanned) = (&m, &sum, &scanned);
        let mut rng = Rng::new(run.seed, 4000 + th as u64);
        async move {
            while run.begin(ex, m) {
                if mix.is_scan(m.started()) {
                    let start = rng.below(t.blocks - mix.len + 1);
                    let t0 = ex.uptime_ns();
                    let r = ex.with_os(|os| scan_run(os, mix, home, fd, start, path));
                    let t1 = ex.uptime_ns();
                    if let Err(e) = r {
                        m.fail(e);
                        break;
                    }
                    scanned.set(scanned.get() + mix.len * PER_BLOCK);
                    m.record(1, t1.saturating_sub(t0), mix.len * BLOCK as u64, 0, t1);
                    continue;
                }
                let k = match zipf {
                    None => rng.below(t.keys),
                    Some(z) => scramble(z.sample(&mut rng), t.keys),
                };
                let key = key_of(k);
                let lo = block_of(index, t.blocks, &key);
                let t0 = ex.uptime_ns();
                let done = ex.pread(fd, lo * BLOCK as u64, vec![0u8; BLOCK]).await;
                match done.result {
                    Ok(n) if n == BLOCK => {}
                    Ok(n) => {
                        m.fail(AppError::new(format!(
                            "{path}: block {lo}: short read ({n} bytes)"
                        )));
                        break;
                    }
                    Err(e) => {
                        m.fail(AppError::new(format!("{path}: block {lo}: {e}")));
                        break;
                    }
                }
                match value_in_block(&done.buf, &key, k) {
                    Some(v) => sum.set(sum.get().wrapping_add(v)),
                    None => {
                        m.fail(AppError::new(format!(
                            "{path}: key {k} not found in block {lo} (corrupt table?)"
                        )));
                        break;
                    }
                }
                let t1 = ex.uptime_ns();
                m.record(0, t1.saturating_sub(t0), BLOCK as u64, 0, t1);
            }
        }
    });
    let mut r = run.finish(ex, "kv", result, &m, Ok(()))?;
    r.extra.push(("keys", Extra::Uint(t.keys)));
    r.extra.push(("value_checksum", Extra::Uint(sum.get())));
    if mix.on() {
        r.extra.push(("scan_keys", Extra::Uint(scanned.get())));
    }
    Ok(r)
}

/// The table's index (each block's first key), found through its footer,
/// which must match the manifest `t` (not timed).
fn read_index(
    ex: &Tasks<'_>,
    t: &Table,
    fd: crate::os::Fd,
    path: &str,
) -> Result<Vec<u8>, AppError> {
    let footer_at = t.size() - BLOCK as u64;
    let mut foot = vec![0u8; BLOCK];
    read_exact(ex, fd, footer_at, &mut foot, path)?;
    let u = |i: usize| u64::from_le_bytes(foot[i..i + 8].try_into().unwrap_or([0; 8]));
    if &foot[..8] != MAGIC || u(8) != t.blocks || u(16) != t.keys {
        return Err(AppError::new(format!(
            "{path}: footer does not match the manifest (not a kv table of this format)"
        )));
    }
    let index_at = u(24);
    let mut index = vec![0u8; (t.blocks * KEY as u64) as usize];
    read_exact(ex, fd, index_at, &mut index, path)?;
    Ok(index)
}

/// The block that holds `key`: the last of `blocks` whose first key in
/// `index` is at most `key` (binary search).
fn block_of(index: &[u8], blocks: u64, key: &[u8]) -> u64 {
    let (mut lo, mut hi) = (0u64, blocks);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        let at = (mid * KEY as u64) as usize;
        if index[at..at + KEY] <= key[..KEY] {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Key number `k` (bytes `key`) in a block read from the table: the
/// checksum word of its value, or `None` if the block does not hold it
/// (or its value is not `k`'s: a corrupt table).
fn value_in_block(block: &[u8], key: &[u8], k: u64) -> Option<u64> {
    let at = (0..PER_BLOCK as usize)
        .map(|s| s * (KEY + VALUE))
        .find(|&at| block[at..at + KEY] == key[..KEY])?;
    let v = &block[at + KEY..at + KEY + VALUE];
    if v[..8] != k.to_le_bytes() {
        return None;
    }
    Some(u64::from_le_bytes(v[8..16].try_into().unwrap_or([0; 8])))
}

/// One range scan: `mix.len` blocks from block `start`, read in
/// [`scan::CHUNK_BLOCKS`]-block I/Os (synchronously, in the scan group if
/// there is one, then back in `home`), each block's first key checked.
fn scan_run(
    os: &mut dyn crate::os::Os,
    mix: &ScanMix,
    home: &str,
    fd: crate::os::Fd,
    start: u64,
    path: &str,
) -> Result<(), AppError> {
    if let Some(g) = &mix.group {
        scan::enter(os, g)?;
    }
    let mut buf = vec![0u8; (scan::CHUNK_BLOCKS as usize) * BLOCK];
    let mut res = Ok(());
    let mut b = start;
    while b < start + mix.len && res.is_ok() {
        let n = (start + mix.len - b).min(scan::CHUNK_BLOCKS);
        let want = n as usize * BLOCK;
        let chunk = &mut buf[..want];
        res = match crate::os::positioned_io(os, fd, b * BLOCK as u64, false, chunk) {
            Ok(k) if k == want => (0..n)
                .find(|&i| {
                    let at = i as usize * BLOCK;
                    chunk[at..at + KEY] != key_of((b + i) * PER_BLOCK)
                })
                .map_or(Ok(()), |i| {
                    Err(AppError::new(format!(
                        "{path}: scan: block {} does not start with its key (corrupt table?)",
                        b + i
                    )))
                }),
            Ok(k) => Err(AppError::new(format!(
                "{path}: scan: block {b}: short read ({k} of {want} bytes)"
            ))),
            Err(e) => Err(AppError::new(format!("{path}: scan: block {b}: {e}"))),
        };
        b += n;
    }
    if mix.group.is_some() {
        let back = scan::enter(os, home);
        res?;
        back
    } else {
        res
    }
}

/// Read `buf.len()` bytes at `off` (setup reads, synchronous).
pub fn read_exact(
    ex: &Tasks<'_>,
    fd: crate::os::Fd,
    off: u64,
    buf: &mut [u8],
    path: &str,
) -> Result<(), AppError> {
    let n = ex
        .with_os(|os| crate::os::positioned_io(os, fd, off, false, buf))
        .map_err(|e| AppError::new(format!("{path}: read at {off}: {e}")))?;
    if n != buf.len() {
        return Err(AppError::new(format!(
            "{path}: read at {off}: short ({n} of {} bytes)",
            buf.len()
        )));
    }
    Ok(())
}
