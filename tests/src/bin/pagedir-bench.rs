//! The page directory's own speed on the host: the same
//! `dirsvc::pagedir::PageDir` code the directory runs in the guest, driven
//! by plain calls (no rings, no guest), so the report can put `bench dir`
//! beside what the code itself costs.
//!
//! Figures (operations per second, over `--pages` pages of one file,
//! `--rounds` times; a 4-node cluster, node 1 owns, node 2 maps):
//!
//! * lookup: READ by node 2 of a page node 1 owns and node 2 maps (Shared)
//! * map: READ miss by node 1, then the fill's completion (Fill, filled)
//! * drop: DROP by node 2 of a page it maps
//! * inv0 / inv1: INV by node 1 of a page with 0 sharers / with node 2 as
//!   sharer (INV, then node 2's ack)
//! * batch B: what `bench dir` does: node 2 maps B pages node 1 owns (READ
//!   -> Shared), then drops them, B requests at a time; map + drop count
//!   as two operations, as in the guest
//!
//! Prints one line per figure and `RESULT {json}`.
//!
//! usage: pagedir-bench [--pages N] [--rounds R]   (defaults 8192, 20)
#![forbid(unsafe_code)]

use std::hint::black_box;
use std::time::Instant;

use dirsvc::pagedir::PageDir;
use fabric::layout::Layout;
use fabric::proto::{PageKey, PageReq};

/// Batch sizes, as `bench dir` in the report.
const BATCHES: [usize; 7] = [1, 2, 4, 8, 16, 32, 64];
const INO: u64 = 1;

struct Bench {
    l: Layout,
    d: PageDir,
    keys: Vec<PageKey>,
    tag: u32,
}

impl Bench {
    fn frame(&self, node: u8, i: usize) -> u64 {
        self.l.pool_gfns(u32::from(node)).0 + i as u64
    }

    fn req(&mut self, node: u8, req: PageReq) {
        self.tag = self.tag.wrapping_add(1);
        black_box(self.d.handle(&self.l, node, self.tag, req));
    }

    /// Node 1 reads every page from "disk" (READ miss, fill done).
    fn map_all(&mut self) {
        for i in 0..self.keys.len() {
            let (key, frame) = (self.keys[i], self.frame(1, i));
            self.req(1, PageReq::Read { key, frame });
            black_box(self.d.filled(key, true));
        }
    }

    /// Node 2 maps every page.
    fn share_all(&mut self) {
        for i in 0..self.keys.len() {
            let (key, frame) = (self.keys[i], self.frame(2, i));
            self.req(2, PageReq::Read { key, frame });
        }
    }

    /// Node 2 drops every page.
    fn drop_all(&mut self) {
        for i in 0..self.keys.len() {
            let key = self.keys[i];
            self.req(2, PageReq::Drop { key, dirty: false });
        }
    }

    /// Node 1 invalidates every page, node 2 acks where it maps.
    fn inv_all(&mut self, sharer: bool) {
        for i in 0..self.keys.len() {
            let key = self.keys[i];
            self.req(1, PageReq::Inv { key, dirty: false });
            if sharer {
                black_box(self.d.ack(2, key, false));
            }
        }
    }

    /// `bench dir`'s loop: map and drop, `b` requests at a time.
    fn map_drop_batches(&mut self, b: usize) {
        let keys = std::mem::take(&mut self.keys);
        for (c, chunk) in keys.chunks(b).enumerate() {
            for (j, key) in chunk.iter().enumerate() {
                let frame = self.frame(2, c * b + j);
                self.req(2, PageReq::Read { key: *key, frame });
            }
            for key in chunk {
                self.req(
                    2,
                    PageReq::Drop {
                        key: *key,
                        dirty: false,
                    },
                );
            }
        }
        self.keys = keys;
    }
}

/// Operations per second of `timed` over `rounds` rounds of `ops` each,
/// with `reset` (untimed) before every round.
fn rate(
    b: &mut Bench,
    rounds: u32,
    ops: usize,
    reset: impl Fn(&mut Bench),
    timed: impl Fn(&mut Bench),
) -> f64 {
    let mut secs = 0.0;
    for _ in 0..rounds {
        reset(b);
        let t = Instant::now();
        timed(b);
        secs += t.elapsed().as_secs_f64();
    }
    (ops as f64 * f64::from(rounds)) / secs.max(1e-9)
}

fn arg(args: &[String], name: &str, default: u64, max: u64) -> Result<u64, String> {
    match args.iter().position(|a| a == name) {
        None => Ok(default),
        Some(i) => match args.get(i + 1).map(|s| s.parse::<u64>()) {
            Some(Ok(n)) if n >= 1 && n <= max => Ok(n),
            _ => Err(format!("{name} takes a number 1..={max}")),
        },
    }
}

fn parse(args: &[String]) -> Result<(usize, u32), String> {
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--pages" | "--rounds" => i += 2,
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    let pages = arg(args, "--pages", 8192, 65_536)? as usize;
    let rounds = arg(args, "--rounds", 20, 10_000)? as u32;
    Ok((pages, rounds))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (pages, rounds) = match parse(&args) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("pagedir-bench: error: {e}\nusage: pagedir-bench [--pages N] [--rounds R]");
            std::process::exit(2);
        }
    };
    let l = match Layout::compute(1 << 30, 4) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("pagedir-bench: error: layout: {e:?}");
            std::process::exit(1);
        }
    };
    let mut b = Bench {
        l,
        d: PageDir::for_nodes(4),
        keys: (0..pages as u64)
            .map(|idx| PageKey { ino: INO, idx })
            .collect(),
        tag: 0,
    };
    let n = pages;
    // Every figure starts from and returns to an empty directory.
    let map = rate(&mut b, rounds, n, |b| b.inv_all(false), Bench::map_all);
    b.share_all();
    let bytes = b.d.bytes_per_entry();
    let lookup = rate(&mut b, rounds, n, |_| {}, Bench::share_all);
    let drop = rate(&mut b, rounds, n, Bench::share_all, Bench::drop_all);
    let inv0 = rate(&mut b, rounds, n, Bench::map_all, |b| b.inv_all(false));
    let inv1 = rate(
        &mut b,
        rounds,
        n,
        |b| {
            b.map_all();
            b.share_all();
        },
        |b| b.inv_all(true),
    );
    b.map_all();
    let mut batches = Vec::new();
    for size in BATCHES {
        let r = rate(&mut b, rounds, 2 * n, |_| {}, |b| b.map_drop_batches(size));
        batches.push((size, r));
    }
    if !b.d.entries().all(|(_, e)| e.sharers == 0) || b.d.len() != n {
        eprintln!("pagedir-bench: error: the directory did not end where it started");
        std::process::exit(1);
    }
    let profile = if cfg!(debug_assertions) {
        "dev"
    } else {
        "release"
    };
    println!("pagedir-bench: {n} pages, {rounds} rounds, {profile} build");
    println!("lookup (READ hit -> Shared): {lookup:.0} ops/s");
    println!("map (READ miss -> Fill, filled): {map:.0} ops/s");
    println!("drop (DROP by a sharer): {drop:.0} ops/s");
    println!("invalidate, 0 sharers (INV): {inv0:.0} ops/s");
    println!("invalidate, 1 sharer (INV + ack): {inv1:.0} ops/s");
    for (size, r) in &batches {
        println!("map + drop, batch of {size}: {r:.0} ops/s");
    }
    println!("bytes per entry: {bytes:.2}");
    let batch_json: Vec<String> = batches
        .iter()
        .map(|(s, r)| format!("\"{s}\":{r:.0}"))
        .collect();
    println!(
        "RESULT {{\"pages\":{n},\"rounds\":{rounds},\"profile\":\"{profile}\",\"lookup\":{lookup:.0},\"map\":{map:.0},\"drop\":{drop:.0},\"inv0\":{inv0:.0},\"inv1\":{inv1:.0},\"batch\":{{{}}},\"bytes_per_entry\":{bytes:.2}}}",
        batch_json.join(",")
    );
}
