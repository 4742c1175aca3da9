//! `app search`: cache_ext's file search (seed 004: ripgrep over a source
//! tree, run again and again). The dataset is a fileset (files
//! `DIR/dNNNN/fNNNNNN` of gamma(1.5) sizes, 16 KiB mean, 50 to a
//! directory; see [`super::fileset`]). Each pass reads every file whole,
//! in the same order (file 0 to the last; the threads take the next file
//! in turn, so the order over the run is one loop), and counts the
//! occurrences of a byte pattern (`--pattern TEXT`, default `oc`;
//! overlapping occurrences count, matches across I/O boundaries too).
//! `--passes N` ends the run after N passes (0: at `--runtime`).
//! Metric: passes per second; also MB/s, the matches per pass (the same
//! for any thread count, mode and run: a pass that counts a file
//! differently than an earlier pass is an error) and the matches in all.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::{Cell, RefCell};

use super::fileset::{self, FileSet};
use super::options::{bad, Options};
use super::report::{Extra, Report};
use super::{AppError, Run};
use crate::os::OpenFlags;
use crate::task::Tasks;
pub use datasets::fileset::search::{plan, DIR_WIDTH, MEAN_SIZE};

/// Operation kinds: one file searched.
pub const NAMES: &[&str] = &["searchfile"];
/// Default threads (ripgrep runs a thread per core; a few here).
pub const DEFAULT_THREADS: u32 = 8;
/// Its own options.
pub const OPTIONS: &[&str] = &["passes", "pattern"];
/// The default pattern.
pub const DEFAULT_PATTERN: &str = "oc";
/// Longest pattern.
pub const MAX_PATTERN: usize = 64;
/// Bytes per read.
pub const IO: usize = 64 << 10;
/// Largest `--passes`.
pub const MAX_PASSES: u64 = 1 << 20;

/// `search`'s own options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    /// `--passes N` (0: until `--runtime`).
    pub passes: u64,
    /// `--pattern TEXT`.
    pub pattern: Vec<u8>,
}

impl Params {
    /// From the parsed options (errors name the option).
    pub fn from(o: &Options) -> Result<Params, AppError> {
        let passes = o.count("passes", 0, 1, MAX_PASSES)?;
        let pattern = match o.take("pattern") {
            None => Vec::from(DEFAULT_PATTERN.as_bytes()),
            Some(p) if !p.is_empty() && p.len() <= MAX_PATTERN => Vec::from(p.as_bytes()),
            Some(p) => return Err(bad("pattern", p, "1 to 64 bytes")),
        };
        Ok(Params { passes, pattern })
    }
}

/// Occurrences of `pat` in `buf` (overlapping).
pub fn count(buf: &[u8], pat: &[u8]) -> u64 {
    if pat.is_empty() || buf.len() < pat.len() {
        return 0;
    }
    buf.windows(pat.len()).filter(|w| *w == pat).count() as u64
}

/// Counts a pattern over a stream of chunks: the last `pat.len() - 1`
/// bytes of a chunk are kept so that matches across chunks count once.
pub struct Counter<'p> {
    pat: &'p [u8],
    tail: Vec<u8>,
    /// Matches so far.
    pub matches: u64,
}

impl<'p> Counter<'p> {
    /// A counter of `pat` (not empty).
    pub fn new(pat: &'p [u8]) -> Counter<'p> {
        Counter {
            pat,
            tail: Vec::new(),
            matches: 0,
        }
    }

    /// The next bytes of the stream.
    pub fn feed(&mut self, chunk: &[u8]) {
        let keep = self.pat.len().saturating_sub(1);
        // Matches that start in the tail and end in this chunk.
        let head = &chunk[..chunk.len().min(keep)];
        let mut joint = core::mem::take(&mut self.tail);
        let from_tail = joint.len();
        joint.extend_from_slice(head);
        self.matches += joint
            .windows(self.pat.len())
            .take(from_tail)
            .filter(|w| *w == self.pat)
            .count() as u64;
        self.matches += count(chunk, self.pat);
        // The new tail: the stream's last `keep` bytes.
        let mut tail = joint;
        tail.extend_from_slice(&chunk[head.len()..]);
        let cut = tail.len().saturating_sub(keep);
        tail.drain(..cut);
        self.tail = tail;
    }
}

/// Run it.
pub fn run(ex: &Tasks<'_>, run: &Run, opts: &Options) -> Result<Report, AppError> {
    let params = Params::from(opts)?;
    let set = FileSet::load(ex, &run.dir, "search")?;
    let files = set.files;
    // Per file: its matches as the first pass counted them.
    let per_file: RefCell<Vec<Option<u64>>> = RefCell::new(vec![None; files as usize]);
    let next = Cell::new(0u64);
    let done = Cell::new(0u64);
    let total = Cell::new(0u64);
    let limit = params.passes.saturating_mul(files);
    let pat = &params.pattern[..];
    let m = run.meter(ex, NAMES);
    let result = ex.run_n(run.threads as usize, |_| {
        let (m, set, per_file, next, done, total) = (&m, &set, &per_file, &next, &done, &total);
        async move {
            loop {
                let i = next.get();
                if limit > 0 && i >= limit {
                    break;
                }
                if !run.begin(ex, m) {
                    break;
                }
                next.set(i + 1);
                let f = i % files;
                let path = fileset::file_path(&set.dir, set.width, f);
                let t0 = ex.uptime_ns();
                let r = search_file(ex, &path, pat).await;
                let t1 = ex.uptime_ns();
                let (bytes, n) = match r {
                    Ok(v) => v,
                    Err(e) => {
                        m.fail(e);
                        break;
                    }
                };
                let mut seen = per_file.borrow_mut();
                match seen[f as usize] {
                    Some(k) if k != n => {
                        m.fail(AppError::new(format!(
                            "{path}: {n} matches in pass {}, {k} before (the file changed?)",
                            i / files
                        )));
                        break;
                    }
                    _ => seen[f as usize] = Some(n),
                }
                total.set(total.get() + n);
                done.set(done.get() + 1);
                m.record(0, t1.saturating_sub(t0), bytes, 0, t1);
            }
        }
    });
    let mut r = run.finish(ex, "search", result, &m, Ok(()))?;
    let seen = per_file.borrow();
    let complete = seen.iter().all(Option::is_some);
    r.metric = "passes_per_s";
    r.unit = "passes/s";
    r.throughput_milli = r.rate_milli(0) / files.max(1);
    let mb_milli = if r.elapsed_ns > 0 {
        (u128::from(r.bytes_read()) * 1_000_000_000 * 1000 / (u128::from(r.elapsed_ns) * 1_000_000))
            as u64
    } else {
        0
    };
    r.extra.push(("mb_per_s", Extra::Milli(mb_milli)));
    r.extra.push(("files", Extra::Uint(files)));
    r.extra.push(("files_searched", Extra::Uint(done.get())));
    r.extra
        .push(("passes_done", Extra::Uint(done.get() / files.max(1))));
    r.extra.push((
        "pattern",
        Extra::Text(String::from_utf8_lossy(pat).into_owned()),
    ));
    r.extra.push(("matches", Extra::Uint(total.get())));
    if complete {
        let per_pass = seen.iter().map(|n| n.unwrap_or(0)).sum();
        r.extra.push(("matches_per_pass", Extra::Uint(per_pass)));
    }
    Ok(r)
}

/// Open `path`, read it whole in [`IO`]-byte reads (queued with the other
/// tasks' reads), close it: its bytes and its matches.
async fn search_file(ex: &Tasks<'_>, path: &str, pat: &[u8]) -> Result<(u64, u64), AppError> {
    let fd = ex
        .open(path, OpenFlags::default())
        .await
        .map_err(|e| AppError::new(format!("{path}: open: {e}")))?;
    let mut c = Counter::new(pat);
    let mut off = 0u64;
    let mut res = Ok(());
    loop {
        let done = ex.pread(fd, off, vec![0u8; IO]).await;
        match done.result {
            Ok(n) => {
                c.feed(&done.buf[..n]);
                off += n as u64;
                if n < IO {
                    break;
                }
            }
            Err(e) => {
                res = Err(AppError::new(format!("{path}: read at {off}: {e}")));
                break;
            }
        }
    }
    let closed = ex.close(fd).await;
    res?;
    closed.map_err(|e| AppError::new(format!("{path}: close: {e}")))?;
    Ok((off, c.matches))
}
