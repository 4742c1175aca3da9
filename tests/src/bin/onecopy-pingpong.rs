//! The physical limit for a directory round trip on this machine: two host
//! threads bounce a cache line through shared memory, like a node and the
//! directory bounce a descriptor through a ring. Prints the median and p99
//! round trip in nanoseconds, so `bench ring` can be reported as a ratio
//! measured in the same run.
//!
//! usage: onecopy-pingpong [ROUNDS]   (default 200000)
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

#[repr(align(128))]
struct Line(AtomicU64);

fn main() {
    let rounds: u64 = match std::env::args().nth(1) {
        None => 200_000,
        Some(s) => match s.parse() {
            Ok(n) if n > 0 && n <= 100_000_000 => n,
            _ => {
                eprintln!("onecopy-pingpong: error: ROUNDS must be 1..=100000000, got '{s}'");
                std::process::exit(2);
            }
        },
    };
    let ping = Arc::new(Line(AtomicU64::new(0)));
    let pong = Arc::new(Line(AtomicU64::new(0)));
    let (p2, q2) = (Arc::clone(&ping), Arc::clone(&pong));
    let echo = std::thread::spawn(move || {
        for i in 1..=rounds {
            while p2.0.load(Ordering::Acquire) != i {
                std::hint::spin_loop();
            }
            q2.0.store(i, Ordering::Release);
        }
    });
    let mut samples = Vec::with_capacity(rounds as usize);
    for i in 1..=rounds {
        let t0 = Instant::now();
        ping.0.store(i, Ordering::Release);
        while pong.0.load(Ordering::Acquire) != i {
            std::hint::spin_loop();
        }
        samples.push(t0.elapsed().as_nanos() as u64);
    }
    echo.join().expect("echo thread");
    samples.sort_unstable();
    let pct = |p: usize| samples[(samples.len() - 1) * p / 1000];
    println!(
        "host ping-pong round trip: n={} median={} ns p99={} ns min={} ns",
        rounds,
        pct(500),
        pct(990),
        samples[0]
    );
}
