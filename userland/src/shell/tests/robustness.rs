//! The shell's contract under arbitrary input.

use super::*;

// --- robustness ------------------------------------------------------------

/// Check the output contract for one line; returns the output.
fn check_contract(os: &mut MockOs, sh: &mut Shell, line: &str) -> String {
    let outcome = sh.execute(os, line);
    let out = os.take_out();
    assert_eq!(os.open_fds(), 0, "descriptor leaked by {line:?}");
    if line.trim().is_empty() {
        assert_eq!(out, "", "{line:?}");
        return out;
    }
    assert!(out.ends_with('\n'), "{line:?}: {out:?}");
    let lines: Vec<&str> = out.lines().collect();
    let is_status = |l: &str| l == "ok" || l.starts_with("error: ");
    let last = lines.last().copied().unwrap_or("");
    assert!(is_status(last), "{line:?}: {out:?}");
    if !line.trim_start().starts_with("cat") {
        let statuses = lines.iter().filter(|l| is_status(l)).count();
        assert_eq!(statuses, 1, "{line:?}: {out:?}");
    }
    if outcome == Outcome::Shutdown {
        assert_eq!(out, "ok\n");
    }
    for p in &os.paths {
        assert!(p.starts_with('/'), "{line:?} passed {p:?}");
    }
    out
}

#[test]
fn every_one_and_two_char_command_keeps_the_contract() {
    let mut os = os_with(&[("/a", b"x\n"), ("/d/f", b"y")]);
    let mut sh = Shell::new(1);
    let printable: Vec<char> = (0x20u8..0x7f).map(char::from).collect();
    for &a in &printable {
        check_contract(&mut os, &mut sh, &a.to_string());
        for &b in &printable {
            let line: String = [a, b].iter().collect();
            check_contract(&mut os, &mut sh, &line);
        }
    }
}

/// xorshift64*: a tiny deterministic generator for the fuzz tests.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

fn random_line(rng: &mut Rng) -> String {
    const WORDS: &[&str] = &[
        "help", "ls", "cat", "write", "append", "fill", "sum", "stat", "truncate", "rm", "mkdir",
        "rmdir", "sync", "nodes", "uptime", "bench", "ring", "shutdown", "/", "/a", "a", "/d",
        "d/f", "/d/f", "..", ".", "//", "\"", "\"\"", "\"a b\"", "0", "1", "64k", "1m", "12q",
        "4096", "-1", "1000001", "k", "x", "é", "\t", " ",
    ];
    let mut line = String::new();
    let n = rng.below(6);
    for i in 0..n {
        if i > 0 {
            line.push(' ');
        }
        match rng.below(4) {
            0 => {
                // Random bytes, printable or not.
                for _ in 0..rng.below(8) {
                    let c = match rng.below(3) {
                        0 => char::from(rng.below(0x80) as u8),
                        _ => char::from(0x20 + rng.below(0x5f) as u8),
                    };
                    line.push(c);
                }
            }
            _ => line.push_str(rng.pick(WORDS)),
        }
    }
    line
}

#[test]
fn random_lines_keep_the_contract() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut os = os_with(&[("/a", b"x\n"), ("/d/f", b"y")]);
    os.capacity = 1 << 20;
    let mut sh = Shell::new(1);
    for i in 0..5000 {
        let line = random_line(&mut rng);
        check_contract(&mut os, &mut sh, &line);
        if i % 500 == 0 {
            // Occasionally fail a random operation to exercise error paths.
            let ops = [
                "open", "read", "write", "close", "stat", "readdir", "mkdir", "unlink",
            ];
            let op = ops[rng.below(ops.len())];
            os.fail(
                op,
                rng.below(3) as u32,
                Errno::ALL[rng.below(Errno::ALL.len())],
            );
        }
    }
}

#[test]
fn every_command_with_every_errno_keeps_the_contract() {
    let lines = [
        "ls",
        "ls /a",
        "cat /a",
        "write /a t",
        "append /a t",
        "fill /a 100k",
        "sum /a",
        "stat /a",
        "truncate /a 5",
        "rm /a",
        "mkdir /n",
        "rmdir /d",
        "sync",
        "nodes",
        "uptime",
        "bench ring 3",
        "help",
    ];
    let ops = [
        "open",
        "read",
        "write",
        "truncate",
        "close",
        "stat",
        "readdir",
        "mkdir",
        "rmdir",
        "unlink",
        "sync",
        "bench_ring",
    ];
    for line in lines {
        for op in ops {
            for e in Errno::ALL {
                for after in 0..2 {
                    let mut os = os_with(&[("/a", b"x\n"), ("/d/f", b"y")]);
                    os.max_io = 40_000;
                    os.fail(op, after, e);
                    let mut sh = Shell::new(1);
                    check_contract(&mut os, &mut sh, line);
                }
            }
        }
    }
}

#[test]
fn bench_atomics_counts_resets_and_refuses_bad_counts() {
    let mut os = MockOs::new();
    assert_eq!(
        ok(&mut os, "bench atomics 1000"),
        "atomics: 1000 increments in 1 us (1 ns each); probe 0 -> 1000\n"
    );
    assert_eq!(
        ok(&mut os, "bench atomics reset"),
        "atomics probe reset (was 1000)\n"
    );
    assert_eq!(os.atomic_probe, 0);
    for bad in ["0", "-1", "x", "100000001"] {
        assert_eq!(
            err(&mut os, &format!("bench atomics {bad}")),
            format!("bench atomics: bad count '{bad}' (1 to 100000000, or reset)")
        );
    }
    assert_eq!(os.atomic_probe, 0, "a refused count changes nothing");
    os.fail("bench_atomics", 0, Errno::Unavailable);
    assert_eq!(
        err(&mut os, "bench atomics 5"),
        "bench atomics: directory unavailable"
    );
}

#[test]
fn bench_trace_prints_ns_per_call_and_differences() {
    let mut os = MockOs::new();
    assert_eq!(
        ok(&mut os, "bench trace 1000"),
        "trace record: n=1000 x 2 rounds, ns per call: baseline=1.00 off=1.50 on=20.00 off-baseline=+0.50 on-baseline=+19.00 (timeline cleared)\n"
    );
    for bad in ["0", "-1", "x", "10000001"] {
        assert_eq!(
            err(&mut os, &format!("bench trace {bad}")),
            format!("bench trace: bad count '{bad}' (1 to 10000000)")
        );
    }
    os.fail("bench_trace", 0, Errno::NotSupported);
    assert_eq!(
        err(&mut os, "bench trace"),
        format!("bench trace: {}", Errno::NotSupported)
    );
}

#[test]
fn bench_doorbell_reports_percentiles_or_not_supported() {
    let mut os = MockOs::new();
    assert_eq!(
        err(&mut os, "bench doorbell 10"),
        "bench doorbell: not supported"
    );
    os.doorbells = true;
    os.ring_samples = (1..=100).collect();
    assert_eq!(
        ok(&mut os, "bench doorbell 100"),
        "doorbell round trip: n=100 median=50 ns p99=99 ns min=1 ns max=100 ns mean=50 ns\n"
    );
    assert_eq!(
        err(&mut os, "bench doorbell 0"),
        "bench doorbell: bad count '0' (1 to 1000000)"
    );
    os.fail("bench_doorbell", 0, Errno::Unavailable);
    assert_eq!(
        err(&mut os, "bench doorbell 5"),
        "bench doorbell: directory unavailable"
    );
}
