//! The data-path simulation's history and checker: every write (and
//! unlink) of every file with its logical start and end, what failures
//! may have lost, and which reads are legal (see [`candidates`] and
//! [`legal`]).

use std::collections::BTreeMap;

use fabric::config::Mode;

/// The history of one run.
#[derive(Default)]
pub(super) struct History {
    /// Every write (or unlink) of every file, in start order.
    pub hist: BTreeMap<String, Vec<Rec>>,
    /// Logical time: every start and end of an operation ticks it.
    pub now: u64,
    /// The first invariant broken.
    pub bad: Option<String>,
    /// See `RunStats::digest`.
    pub digest: u64,
    /// The run's mode (the append rule depends on it).
    pub mode: Option<Mode>,
}

impl History {
    pub(super) fn tick(&mut self) -> u64 {
        self.now += 1;
        self.now
    }

    /// A write of `file` by `k` starts: its record's index.
    pub(super) fn begin_write(&mut self, file: &str, k: u32, data: Vec<u8>) -> usize {
        let start = self.tick();
        let h = self
            .hist
            .entry(file.to_string())
            .or_insert_with(|| vec![Rec::initial()]);
        h.push(Rec {
            data,
            writer: k,
            start,
            end: None,
            ok: false,
            durable: false,
            lossy: false,
            zeros_ok: false,
        });
        h.len() - 1
    }

    /// The write `i` of `file` returned. A failed one stays open (its
    /// dirty pages may still go out) until its writer writes back.
    pub(super) fn end_write(&mut self, file: &str, i: usize, ok: bool) {
        let t = self.tick();
        let r = &mut self.hist.get_mut(file).expect("begun")[i];
        r.ok = ok;
        if ok {
            r.end = Some(t);
            let k = r.writer;
            self.wrote_back(k, Some(file), t);
        }
    }

    /// Node `k` wrote back what it had of `file` (every file: `None`)
    /// successfully, as of time `t`: its failed writes are over.
    pub(super) fn wrote_back(&mut self, k: u32, file: Option<&str>, t: u64) {
        for (name, h) in self.hist.iter_mut() {
            if file.is_some_and(|f| f != name) {
                continue;
            }
            for r in h
                .iter_mut()
                .filter(|r| r.writer == k && !r.ok && r.end.is_none())
            {
                r.end = Some(t);
            }
        }
    }

    /// Node `k`'s fsync of `file` (`None`: its sync) that started at `t0`
    /// succeeded: its writes completed before are durable.
    pub(super) fn synced(&mut self, k: u32, file: Option<&str>, t0: u64) {
        let t = self.tick();
        for (name, h) in self.hist.iter_mut() {
            if file.is_some_and(|f| f != name) {
                continue;
            }
            for r in h.iter_mut() {
                if r.writer == k && r.ok && r.end.is_some_and(|e| e < t0) {
                    r.durable = true;
                }
            }
        }
        self.wrote_back(k, file, t);
    }

    /// A failure: every write not durable may be lost (and, `zeros`, read
    /// as zeros), if `who` says it was exposed.
    pub(super) fn may_lose(&mut self, zeros: bool, who: impl Fn(&Rec) -> bool) {
        for h in self.hist.values_mut() {
            for r in h.iter_mut().filter(|r| !r.durable && who(r)) {
                r.lossy = true;
                r.zeros_ok |= zeros;
            }
        }
    }

    /// `ONECOPY_SIM_PAGES=1`: where each page of a bad read came from
    /// (which write of which file had those bytes at that page, any
    /// offset).
    pub(super) fn page_origins(&self, got: &[u8]) -> String {
        let mut out = String::new();
        for (i, page) in got.chunks(4096).enumerate() {
            let mut from = Vec::new();
            if page.iter().all(|&b| b == 0) {
                from.push("zeros".to_string());
            }
            for (name, h) in &self.hist {
                for (j, r) in h.iter().enumerate() {
                    for (pi, p2) in r.data.chunks(4096).enumerate() {
                        if p2.len() >= page.len() && p2[..page.len()] == *page {
                            from.push(format!(
                                "{name}#{j}p{pi}(w{} t{}..{:?})",
                                r.writer, r.start, r.end
                            ));
                        }
                    }
                }
            }
            out.push_str(&format!("\n  page {i}: {}", from.join(" ")));
        }
        out
    }

    /// Check a read of `file` that ran from `rs` to now.
    pub(super) fn check_read(&mut self, k: u32, file: &str, rs: u64, got: &[u8], at_end: bool) {
        if file == APPEND_FILE {
            return self.check_appends(k, rs, got, at_end);
        }
        let re = self.tick();
        self.digest = fold(
            self.digest,
            &[
                u64::from(k),
                rs,
                re,
                bytes_digest(file.as_bytes()),
                bytes_digest(got),
            ],
        );
        let empty = vec![Rec::initial()];
        let h = self.hist.get(file).unwrap_or(&empty);
        let cands = candidates(h, rs, re);
        if legal(&cands, got) || self.bad.is_some() {
            return;
        }
        let zeros = got.iter().filter(|&&b| b == 0).count();
        let which = h.iter().position(|r| r.data == got);
        let desc: Vec<String> = cands
            .iter()
            .map(|c| {
                format!(
                    "[writer {} t {}..{:?} ok {} durable {} lossy {} len {}]",
                    c.writer,
                    c.start,
                    c.end,
                    c.ok,
                    c.durable,
                    c.lossy,
                    c.data.len()
                )
            })
            .collect();
        let old = which.map(|i| {
            let r = &h[i];
            format!(
                "it is write #{i} (writer {}, t {}..{:?}, ok {})",
                r.writer, r.start, r.end, r.ok
            )
        });
        let pages = if std::env::var_os("ONECOPY_SIM_PAGES").is_some() {
            self.page_origins(got)
        } else {
            String::new()
        };
        self.bad = Some(format!(
            "{}node {k} read {file} (t {rs}..{re}): {} bytes ({zeros} zero), {}; legal: {}{pages}",
            if at_end { "at the end " } else { "" },
            got.len(),
            old.unwrap_or_else(|| "bytes no write produced".into()),
            desc.join(" ")
        ));
    }
}

/// After a directory crash, no page of a file reads as zeros that nobody
/// wrote: a file's recorded size never covers data not yet on the disk
/// (the directory holds a grown size below the cached pages under it
/// until they are written back, `dirsvc/src/server/ordered.rs`). A crash
/// may still lose an unsynced write, showing an older version, or the
/// empty file its truncation left (see [`legal`]). `false`: the checker
/// also lets a crash show an unsynced write's size over zeros.
pub(super) const STRICT_DIR_CRASH: bool = true;

/// One write of a file (a whole-file write, or an unlink: empty data).
#[derive(Debug, Clone)]
pub(super) struct Rec {
    data: Vec<u8>,
    writer: u32,
    /// Logical time it started.
    start: u64,
    /// When it returned (`None`: under way, or failed and its data may
    /// still go out: it stays concurrent with everything until its writer
    /// writes the file back successfully).
    end: Option<u64>,
    /// It returned success.
    ok: bool,
    /// Covered by the writer's successful fsync or sync.
    durable: bool,
    /// A failure may have lost it: it supersedes nothing.
    lossy: bool,
    /// Its pages may read as zeros (lost frames whose size survived).
    zeros_ok: bool,
}

impl Rec {
    fn initial() -> Rec {
        Rec {
            data: Vec::new(),
            writer: 0,
            start: 0,
            end: Some(0),
            ok: true,
            durable: true,
            lossy: false,
            zeros_ok: false,
        }
    }
    /// Completed, kept: every read that starts later sees it or newer.
    fn settled(&self) -> bool {
        self.ok && !self.lossy && self.end.is_some()
    }
}

/// The records a read that ran from `rs` to `re` may return: every write
/// that started before the read ended and that no settled write which
/// started after it ended had completed before the read started.
fn candidates(h: &[Rec], rs: u64, re: u64) -> Vec<&Rec> {
    h.iter()
        .filter(|w| w.start < re)
        .filter(|w| {
            let Some(e) = w.end else { return true };
            !h.iter()
                .any(|w2| w2.settled() && w2.start > e && w2.end.is_some_and(|e2| e2 < rs))
        })
        .collect()
}

/// Is `got` a legal read among `cands`: exactly one of them or, when more
/// than one version is possible, every page from one of them (a page is
/// atomic, a file is not); a page of zeros only where a candidate may have
/// lost its frames; empty only where a truncation may be under way (or
/// the file was removed or never written).
fn legal(cands: &[&Rec], got: &[u8]) -> bool {
    if cands.iter().any(|c| c.data == got) {
        return true;
    }
    let open = |c: &Rec| c.end.is_none() || !c.ok;
    if got.is_empty() {
        // A lost whole-file write may leave its truncation behind (its
        // data not yet on the disk when the directory crashed).
        return cands
            .iter()
            .any(|c| c.data.is_empty() || open(c) || c.lossy);
    }
    let any_len = cands.iter().any(|c| open(c));
    if !any_len && !cands.iter().any(|c| c.data.len() == got.len()) {
        return false;
    }
    if cands.len() < 2 && !cands.iter().any(|c| c.zeros_ok || open(c)) {
        return false;
    }
    got.chunks(4096).enumerate().all(|(i, page)| {
        let (a, b) = (i * 4096, i * 4096 + page.len());
        cands.iter().any(|c| {
            (c.data.len() >= b && c.data[a..b] == *page)
                || (c.zeros_ok && c.data.len() >= b && page.iter().all(|&x| x == 0))
        })
    })
}

pub(super) fn fold(mut d: u64, xs: &[u64]) -> u64 {
    for &x in xs {
        d = fabric::rng::mix64(d ^ x);
    }
    d
}

fn bytes_digest(b: &[u8]) -> u64 {
    b.chunks(8).fold(b.len() as u64, |d, c| {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        fold(d, &[u64::from_le_bytes(w)])
    })
}

/// The history's digest (see [`RunStats::digest`]).
pub(super) fn hist_digest(w: &History) -> u64 {
    let mut d = w.digest;
    for (name, h) in &w.hist {
        d = fold(d, &[bytes_digest(name.as_bytes())]);
        for r in h {
            d = fold(
                d,
                &[
                    bytes_digest(&r.data),
                    u64::from(r.writer),
                    r.start,
                    r.end.map_or(u64::MAX, |e| e),
                    u64::from(r.ok)
                        | u64::from(r.durable) << 1
                        | u64::from(r.lossy) << 2
                        | u64::from(r.zeros_ok) << 3,
                ],
            );
        }
    }
    d
}

/// The file every node appends to (`O_APPEND`), one line per append.
pub(super) const APPEND_FILE: &str = "/a";

/// Every appended line has this length and ends in a newline: two
/// appends that collide (which relaxed, `private` and `net` mode allow,
/// as NFS) overwrite whole lines, so every line of the file is one
/// append's line; a line crosses page boundaries now and then.
pub(super) const LINE: usize = 100;

/// The line node `writer`'s append number `seq` writes (no zero byte).
pub(super) fn append_line(seq: u64, writer: u32) -> Vec<u8> {
    let mut l = format!("a{writer} {seq:08} ").into_bytes();
    while l.len() < LINE - 1 {
        l.push(b'a' + ((seq as usize + l.len()) % 26) as u8);
    }
    l.push(b'\n');
    l
}

impl History {
    /// `got` as read from [`APPEND_FILE`]: which append each line is
    /// (`?`: none), for failure reports; empty for another file's bytes.
    pub(super) fn append_lines(&self, got: &[u8]) -> String {
        let Some(h) = self.hist.get(APPEND_FILE) else {
            return String::new();
        };
        let recs: Vec<&Rec> = h.iter().filter(|r| !r.data.is_empty()).collect();
        if got.is_empty() || !recs.iter().any(|r| got.starts_with(&r.data)) {
            return String::new();
        }
        let lines: Vec<String> = got
            .chunks(LINE)
            .map(|l| match recs.iter().position(|r| r.data == l) {
                Some(j) => format!("#{} (node {})", j + 1, recs[j].writer),
                None => "?".into(),
            })
            .collect();
        format!("\n  lines: {}", lines.join(" "))
    }

    /// Check a read of [`APPEND_FILE`] that ran from `rs` to now. In every
    /// mode: the file is whole lines, each one of an append that started
    /// before the read ended (never zeros or bytes of no append), none
    /// twice; every append that completed before the read started and no
    /// failure may have lost is there, unless (relaxed, `private`, `net`)
    /// another append overlapped it in time and took its place. Strong
    /// mode (atomic appends): no such exception, and an append that
    /// completed before another started comes before it in the file.
    fn check_appends(&mut self, k: u32, rs: u64, got: &[u8], at_end: bool) {
        let re = self.tick();
        self.digest = fold(
            self.digest,
            &[u64::from(k), rs, re, bytes_digest(got), 0xa99e0d],
        );
        if self.bad.is_some() {
            return;
        }
        let strong = self.mode == Some(Mode::Strong);
        let empty = Vec::new();
        let h = self.hist.get(APPEND_FILE).unwrap_or(&empty);
        let recs: Vec<&Rec> = h.iter().filter(|r| !r.data.is_empty()).collect();
        let verdict = append_lines(&recs, got, re)
            .and_then(|pos| completed_appends_kept(&recs, &pos, rs, strong));
        if let Err(why) = verdict {
            let at = if at_end { "at the end " } else { "" };
            let read = format!("{at}node {k} read {APPEND_FILE} (t {rs}..{re})");
            self.bad = Some(append_failure(&read, &recs, got, &why));
        }
    }
}

/// The append file `got`, read until `re`, line by line: each line the
/// bytes of one append of `recs` that started before `re`, none twice.
/// Returns each present append's line.
fn append_lines(recs: &[&Rec], got: &[u8], re: u64) -> Result<BTreeMap<usize, usize>, String> {
    if !got.len().is_multiple_of(LINE) {
        let zeros = got.iter().filter(|&&b| b == 0).count();
        return Err(format!("not whole lines ({zeros} zero bytes)"));
    }
    // Position in the file of each record present.
    let mut pos: BTreeMap<usize, usize> = BTreeMap::new();
    for (i, slot) in got.chunks(LINE).enumerate() {
        let Some(j) = recs.iter().position(|r| r.data == slot) else {
            let zeros = slot.iter().filter(|&&b| b == 0).count();
            return Err(format!("line {i} is no append's ({zeros} zero bytes)"));
        };
        if recs[j].start >= re {
            return Err(format!("line {i} is of an append that started later"));
        }
        if let Some(first) = pos.insert(j, i) {
            return Err(format!("the append at line {first} is also at line {i}"));
        }
    }
    Ok(pos)
}

/// Every append of `recs` that completed before the read started (at
/// `rs`) and no failure may have lost is at its line in `pos`, unless
/// (not `strong`) another append overlapped it in time; `strong`
/// (atomic appends): those come in the order they completed.
fn completed_appends_kept(
    recs: &[&Rec],
    pos: &BTreeMap<usize, usize>,
    rs: u64,
    strong: bool,
) -> Result<(), String> {
    let overlaps = |a: &Rec, b: &Rec| {
        let a_end = a.end.unwrap_or(u64::MAX);
        let b_end = b.end.unwrap_or(u64::MAX);
        b.start < a_end && a.start < b_end
    };
    for (j, r) in recs.iter().enumerate() {
        if !r.settled() || r.end.is_some_and(|e| e >= rs) {
            continue;
        }
        if !pos.contains_key(&j) {
            let collided = !strong
                && recs
                    .iter()
                    .enumerate()
                    .any(|(j2, r2)| j2 != j && overlaps(r, r2));
            if !collided {
                return Err(format!(
                    "the completed append of node {} (t {}..{:?}, durable {}) is missing",
                    r.writer, r.start, r.end, r.durable
                ));
            }
            continue;
        }
        if !strong {
            continue;
        }
        // Atomic appends are ordered by completion.
        let p = pos[&j];
        let e = r.end.unwrap_or(u64::MAX);
        for (&j2, &p2) in pos {
            if recs[j2].start > e && p2 < p {
                return Err(format!(
                    "the append at line {p2} started after the one at line {p} completed, yet comes first"
                ));
            }
        }
    }
    Ok(())
}

/// An illegal read of the append file (`read`: who read it when, `why`):
/// the file line by line (which append) and every append (its writer and
/// span).
fn append_failure(read: &str, recs: &[&Rec], got: &[u8], why: &str) -> String {
    let lines: Vec<String> = got
        .chunks(LINE)
        .map(|l| match recs.iter().position(|r| r.data == l) {
            Some(j) => format!("#{}", j + 1),
            None => "?".into(),
        })
        .collect();
    let all: Vec<String> = recs
        .iter()
        .enumerate()
        .map(|(j, r)| {
            format!(
                "#{} node {} t {}..{:?} ok {} durable {} lossy {}",
                j + 1,
                r.writer,
                r.start,
                r.end,
                r.ok,
                r.durable,
                r.lossy
            )
        })
        .collect();
    format!(
        "{read}: {} bytes, {} lines: {why}\n  lines: {}\n  appends: {}",
        got.len(),
        got.len() / LINE,
        lines.join(" "),
        all.join("; ")
    )
}
