//! The host's side of the testbed's time dilation: times the same
//! workload as the guest's `bench calibrate` (`fabric::calibrate`, the
//! page cache's hot operations) natively and prints the same line, the
//! fastest of `--repeat` runs (the host's speed, not its noise).
//! `qemu-run.sh --dilation auto` divides the guest's time per round by
//! this one.
//!
//! usage: onecopy-calibrate [--rounds N] [--repeat K]   (defaults 20000, 5)
#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::time::Instant;

use fabric::calibrate::{line, Workload, DEFAULT_ROUNDS, MAX_ROUNDS};

const USAGE: &str = "usage: onecopy-calibrate [--rounds N] [--repeat K]";

fn parse(args: &[String]) -> Result<(u32, u32), String> {
    let (mut rounds, mut repeat) = (DEFAULT_ROUNDS, 5u32);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut num = |name: &str, max: u32| -> Result<u32, String> {
            let v = it.next().ok_or_else(|| format!("{name} needs a value"))?;
            v.parse::<u32>()
                .ok()
                .filter(|n| (1..=max).contains(n))
                .ok_or_else(|| format!("{name} must be 1..={max}, got '{v}'"))
        };
        match a.as_str() {
            "--rounds" => rounds = num("--rounds", MAX_ROUNDS)?,
            "--repeat" => repeat = num("--repeat", 100)?,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    Ok((rounds, repeat))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (rounds, repeat) = match parse(&args) {
        Ok(v) => v,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("onecopy-calibrate: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let mut w = Workload::new();
    let _ = w.run(rounds.min(1000));
    // The checksum printed is the first timed run's, which is what the
    // guest's one timed run (after the same warm-up) prints: equal
    // checksums show both sides ran the same work.
    let mut best = u64::MAX;
    let mut first = None;
    for _ in 0..repeat {
        let t0 = Instant::now();
        let sum = w.run(rounds);
        let ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
        best = best.min(ns);
        first.get_or_insert(sum);
    }
    println!("{}", line(rounds, best, first.unwrap_or(0)));
    ExitCode::SUCCESS
}
