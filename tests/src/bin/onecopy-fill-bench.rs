//! A directory that never blocks on storage, measured:
//! the same workloads on a cluster whose directory fills pages
//! synchronously (`fill_depth=0`, the behaviour before) and on one with
//! asynchronous fills (the default), booted one after the other in one run,
//! so the ratios compare like with like.
//!
//! Figures (1 directory + 2 nodes, strong mode, `--storage P`):
//!
//! * lookup quiet: node 2's `bench read /hot` (one-page lookups of pages
//!   node 1 owns, CM-R) on an otherwise idle cluster;
//! * lookup under fills: the same while node 1 reads a cold file
//!   (`sum /cold`: every page a miss the directory fills from disk);
//! * CM read: node 1's `fio` 4k random reads, libaio, iodepth 32, on a
//!   file cached nowhere (IOPS and bandwidth).
//!
//! `--busy writebacks`: node 1's busy work is `sync` of a file it just
//! wrote (`fill /wb`, every page dirty in its frames: the directory writes
//! each page back) instead of the cold read. `--depths A,B` compares two
//! `fill_depth` values (`default` for the boot default) instead of 0 and
//! the default.
//!
//! Prints a table and one `RESULT {json}` line. Needs a release build
//! (`qemu-run.sh` is started with `--no-build`).
//!
//! usage: onecopy-fill-bench [--storage P] [--cold-mb N] [--fio-mb N] [--rounds N]
//!        [--busy fills|writebacks] [--depths A,B]
#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::thread;
use std::time::Duration;

use onecopy_tests::bench::parse;
use onecopy_tests::{Cluster, ClusterOpts, Console, Error, Result};
use serde_json::json;

struct Opts {
    storage: String,
    cold_mb: u32,
    fio_mb: u32,
    rounds: u32,
    /// Node 1's busy work: "fills" (cold read) or "writebacks" (sync).
    busy: String,
    /// The two `fill_depth` values compared (`None`: the boot default).
    depths: [Option<u32>; 2],
}

const USAGE: &str = "usage: onecopy-fill-bench [--storage none|nvme|sata-ssd|sas-raid] [--cold-mb N] [--fio-mb N] [--rounds N] [--busy fills|writebacks] [--depths A,B]";

/// A `fill_depth` value: 0..=64 or `default`.
fn depth(v: &str) -> std::result::Result<Option<u32>, String> {
    if v == "default" {
        return Ok(None);
    }
    v.parse::<u32>()
        .ok()
        .filter(|n| *n <= 64)
        .map(Some)
        .ok_or_else(|| format!("a depth is 0..=64 or 'default', got '{v}'"))
}

fn usage(msg: &str) -> ExitCode {
    eprintln!("onecopy-fill-bench: error: {msg}");
    eprintln!("{USAGE}");
    ExitCode::from(2)
}

fn parse_opts() -> std::result::Result<Opts, String> {
    let mut o = Opts {
        storage: "sata-ssd".into(),
        cold_mb: 8,
        fio_mb: 4,
        rounds: 3,
        busy: "fills".into(),
        depths: [Some(0), None],
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or_else(|| format!("{a} needs a value"));
        let num = |v: String, lo: u32, hi: u32| -> std::result::Result<u32, String> {
            v.parse::<u32>()
                .ok()
                .filter(|n| (lo..=hi).contains(n))
                .ok_or_else(|| format!("{a} must be {lo}..={hi}, got '{v}'"))
        };
        match a.as_str() {
            "--storage" => {
                let v = val()?;
                if !["none", "nvme", "sata-ssd", "sas-raid"].contains(&v.as_str()) {
                    return Err(format!("unknown storage profile '{v}'"));
                }
                o.storage = v;
            }
            "--cold-mb" => o.cold_mb = num(val()?, 1, 32)?,
            "--fio-mb" => o.fio_mb = num(val()?, 1, 32)?,
            "--rounds" => o.rounds = num(val()?, 1, 20)?,
            "--busy" => {
                let v = val()?;
                if !["fills", "writebacks"].contains(&v.as_str()) {
                    return Err(format!("--busy is fills or writebacks, got '{v}'"));
                }
                o.busy = v;
            }
            "--depths" => {
                let v = val()?;
                let (a, b) = v
                    .split_once(',')
                    .ok_or_else(|| format!("--depths wants A,B, got '{v}'"))?;
                o.depths = [depth(a)?, depth(b)?];
            }
            "-h" | "--help" => return Err("help".into()),
            _ => return Err(format!("unknown argument '{a}'")),
        }
    }
    Ok(o)
}

/// What one cluster measured.
/// One `bench read`: median, mean and p99 of its lookups (us).
#[derive(Debug, Default, Clone, Copy)]
struct Lookups {
    median: f64,
    mean: f64,
    p99: f64,
}

#[derive(Debug, Default, Clone)]
struct Side {
    fill_depth: String,
    quiet: Vec<Lookups>,
    busy: Vec<Lookups>,
    /// Lookups that ran entirely while the cold read was still going.
    overlapped: u32,
    cold_ms: f64,
    fio_iops: f64,
    fio_kib: f64,
    fio_depth: f64,
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    if s.is_empty() {
        return f64::NAN;
    }
    s[s.len() / 2]
}

fn lines(out: &onecopy_tests::CmdOutput) -> Vec<String> {
    out.text().lines().map(str::to_string).collect()
}

/// `bench read`'s median, mean and p99 (us).
fn bench_read(c: &mut Cluster, node: u8, path: &str) -> Result<Lookups> {
    let out = c.exec_ok(node, &format!("bench read {path}"))?;
    let s = parse::summary(&lines(&out), "median").map_err(Error::Usage)?;
    Ok(Lookups {
        median: s.median / 1000.0,
        mean: s.mean.unwrap_or(f64::NAN) / 1000.0,
        p99: s.p99.unwrap_or(f64::NAN) / 1000.0,
    })
}

/// The median over runs of one statistic of each run.
fn over(v: &[Lookups], f: impl Fn(&Lookups) -> f64) -> f64 {
    median(&v.iter().map(f).collect::<Vec<_>>())
}

fn measure(o: &Opts, fill_depth: Option<u32>) -> Result<Side> {
    let mut side = Side {
        fill_depth: fill_depth.map_or("default (32)".into(), |d| d.to_string()),
        ..Side::default()
    };
    let extra = fill_depth.map_or(String::new(), |d| format!("fill_depth={d}"));
    let mut opts = ClusterOpts::new("fill-bench")
        .nodes(2)
        .mode("strong")
        .storage(&o.storage);
    if !extra.is_empty() {
        opts = opts.append_extra(&extra);
    }
    let mut c = Cluster::start(opts)?;
    let long = Duration::from_secs(600);
    // Node 1 goes through its own console (it runs beside node 2 below).
    let n1_sock = c.run().socket_path(onecopy_tests::Instance::Node(1));
    let mut n1 = Console::connect(&n1_sock, 1, Duration::from_secs(30))?;
    for cmd in [
        format!("fill /cold {}m", o.cold_mb),
        format!("fill /fio {}m", o.fio_mb),
        "sync".into(),
        "cache drop".into(),
        "fill /hot 256k".into(),
    ] {
        n1.exec(&cmd, long)?.into_result()?;
    }
    for _ in 0..o.rounds {
        // Quiet: node 2 looks up node 1's pages, then forgets them.
        side.quiet.push(bench_read(&mut c, 2, "/hot")?);
        c.exec_ok(2, "cache drop")?;
        // Under fills: node 1 reads the cold file meanwhile (or writes a
        // file back: `--busy writebacks`).
        let writebacks = o.busy == "writebacks";
        if writebacks {
            n1.exec(&format!("fill /wb {}m", o.cold_mb), long)?
                .into_result()?;
        }
        let (busy, cold) = thread::scope(|s| -> Result<(Vec<(Lookups, bool)>, f64)> {
            let cold = s.spawn(|| -> Result<f64> {
                let t = std::time::Instant::now();
                let cmd = if writebacks { "sync" } else { "sum /cold" };
                n1.exec(cmd, long)?.into_result()?;
                Ok(t.elapsed().as_secs_f64() * 1000.0)
            });
            thread::sleep(Duration::from_millis(200));
            let mut got = Vec::new();
            while !cold.is_finished() && got.len() < 20 {
                let l = bench_read(&mut c, 2, "/hot")?;
                got.push((l, !cold.is_finished()));
                c.exec_ok(2, "cache drop")?;
            }
            let ms = cold
                .join()
                .map_err(|_| Error::Usage("cold reader panicked".into()))??;
            Ok((got, ms))
        })?;
        for (l, overlapped) in busy {
            if overlapped {
                side.busy.push(l);
                side.overlapped += 1;
            }
        }
        side.cold_ms = side.cold_ms.max(cold);
        // Forget the cold file again (written back, cached nowhere).
        n1.exec("sync", long)?.into_result()?;
        n1.exec("cache drop", long)?.into_result()?;
        n1.exec("fill /hot 256k", long)?.into_result()?;
    }
    let out = n1
        .exec(
            &format!(
                "fio --name=cm --rw=randread --bs=4k --size={}m --filename=/fio --ioengine=libaio --iodepth=32",
                o.fio_mb
            ),
            long,
        )?
        .into_result()?;
    let text = out.text();
    let result = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("RESULT "))
        .ok_or_else(|| Error::Usage("fio printed no RESULT line".into()))?;
    let v: serde_json::Value = serde_json::from_str(result)
        .map_err(|e| Error::Usage(format!("fio RESULT is not json: {e}")))?;
    side.fio_iops = v["read"]["iops"].as_f64().unwrap_or(f64::NAN);
    side.fio_kib = v["read"]["bw_kib"].as_f64().unwrap_or(f64::NAN);
    side.fio_depth = v["effective_iodepth"].as_f64().unwrap_or(f64::NAN);
    let dir = c.log("dir");
    for what in ["page fills in flight", "block writes in flight"] {
        if let Some(l) = dir.lines().rfind(|l| l.contains(what)) {
            eprintln!("  {}", l.trim());
        }
    }
    c.stop()?;
    Ok(side)
}

fn main() -> ExitCode {
    let o = match parse_opts() {
        Ok(o) => o,
        Err(e) if e == "help" => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => return usage(&e),
    };
    let mut sides = Vec::new();
    for &depth in &o.depths {
        eprintln!(
            "onecopy-fill-bench: storage {}, fill_depth {}",
            o.storage,
            depth.map_or("default".into(), |d: u32| d.to_string())
        );
        match measure(&o, depth) {
            Ok(s) => sides.push(s),
            Err(e) => {
                eprintln!("onecopy-fill-bench: error: {e}");
                return ExitCode::from(1);
            }
        }
    }
    let (b, a) = (&sides[0], &sides[1]);
    print_table(&o, b, a);
    print_result(&o, b, a);
    if b.overlapped == 0 || a.overlapped == 0 {
        eprintln!("onecopy-fill-bench: no lookup overlapped the cold read; raise --cold-mb");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

/// The median over the runs of figure `f` of side `s`'s quiet or busy
/// lookups.
fn med(s: &Side, busy: bool, f: fn(&Lookups) -> f64) -> f64 {
    over(if busy { &s.busy } else { &s.quiet }, f)
}

/// The before/after table and each side's ratio of busy to quiet lookups.
fn print_table(o: &Opts, b: &Side, a: &Side) {
    let row = |name: &str, before: f64, after: f64, unit: &str, better_low: bool| {
        let ratio = if better_low {
            before / after
        } else {
            after / before
        };
        println!("| {name} | {before:.1} {unit} | {after:.1} {unit} | {ratio:.2}x |");
    };
    let name = |d: Option<u32>| d.map_or("default".to_string(), |d| d.to_string());
    println!(
        "storage {}; busy work: {}; before = fill_depth={}, after = fill_depth={} (0: synchronous disk)",
        o.storage,
        if o.busy == "writebacks" { "node 1 syncs a dirty file (write-backs)" } else { "node 1 reads a cold file (fills)" },
        name(o.depths[0]),
        name(o.depths[1])
    );
    println!("| figure | before | after | after vs before |");
    println!("| --- | --- | --- | --- |");
    for (name, f) in [
        ("median", (|l: &Lookups| l.median) as fn(&Lookups) -> f64),
        ("mean", |l: &Lookups| l.mean),
        ("p99", |l: &Lookups| l.p99),
    ] {
        row(
            &format!("CM-R lookup {name}, quiet"),
            med(b, false, f),
            med(a, false, f),
            "us",
            true,
        );
        row(
            &format!("CM-R lookup {name}, node 1 reading a cold file"),
            med(b, true, f),
            med(a, true, f),
            "us",
            true,
        );
    }
    row(
        "node 1's busy work (cold sum, or sync), longest",
        b.cold_ms,
        a.cold_ms,
        "ms",
        true,
    );
    row(
        "CM 4k randread IOPS, libaio iodepth 32",
        b.fio_iops,
        a.fio_iops,
        "",
        false,
    );
    row(
        "CM 4k randread bandwidth",
        b.fio_kib / 1024.0,
        a.fio_kib / 1024.0,
        "MiB/s",
        false,
    );
    for s in [b, a] {
        println!(
            "fill_depth {}: lookup under fills / quiet: median {:.2}x, mean {:.2}x, p99 {:.2}x ({} bench reads overlapped the cold read)",
            s.fill_depth,
            med(s, true, |l| l.median) / med(s, false, |l| l.median),
            med(s, true, |l| l.mean) / med(s, false, |l| l.mean),
            med(s, true, |l| l.p99) / med(s, false, |l| l.p99),
            s.overlapped
        );
    }
}

/// The `RESULT {json}` line: both sides' figures.
fn print_result(o: &Opts, b: &Side, a: &Side) {
    let j = |s: &Side| {
        json!({
            "fill_depth": s.fill_depth,
            "lookup_quiet_us": s.quiet.iter().map(|l| json!({"median": l.median, "mean": l.mean, "p99": l.p99})).collect::<Vec<_>>(),
            "lookup_under_fills_us": s.busy.iter().map(|l| json!({"median": l.median, "mean": l.mean, "p99": l.p99})).collect::<Vec<_>>(),
            "overlapped": s.overlapped,
            "cold_read_ms": s.cold_ms,
            "fio_cm_iops": s.fio_iops,
            "fio_cm_kib_s": s.fio_kib,
            "fio_effective_iodepth": s.fio_depth,
        })
    };
    println!(
        "RESULT {}",
        json!({"storage": o.storage, "busy": o.busy, "before": j(b), "after": j(a)})
    );
}
