//! Random argument vectors never panic.

use super::*;

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
}

fn random_arg(rng: &mut Rng) -> String {
    const KEYS: &[&str] = &[
        "name",
        "rw",
        "readwrite",
        "rwmixread",
        "rwmixwrite",
        "bs",
        "blocksize",
        "size",
        "filename",
        "directory",
        "numjobs",
        "iodepth",
        "runtime",
        "time_based",
        "ioengine",
        "invalidate",
        "fsync",
        "ramp_time",
        "randseed",
        "random_distribution",
        "group_reporting",
        "foo",
        "",
        "BS",
    ];
    const VALUES: &[&str] = &[
        "",
        "zipf:0.99",
        "0",
        "1",
        "2",
        "4k",
        "8k",
        "16k",
        "64k",
        "1m",
        "16m",
        "17m",
        "1g",
        "2t",
        "512",
        "513",
        "read",
        "write",
        "randread",
        "randwrite",
        "rw",
        "randrw",
        "psync",
        "sync",
        "mmap",
        "libaio",
        "10",
        "1ms",
        "50us",
        "1x",
        "-1",
        "0x10",
        "0x",
        "/f",
        "/d",
        "a/b",
        "..",
        "é",
        "\u{0}",
        "99999999999999999999",
        "64",
        "65",
        "256",
        "257",
        "100",
        "101",
    ];
    let mut a = String::new();
    match rng.below(10) {
        0 => {
            for _ in 0..rng.below(8) {
                a.push(char::from(rng.below(0x80) as u8));
            }
        }
        1 => a.push_str(&format!("-{}", KEYS[rng.below(KEYS.len())])),
        _ => {
            a.push_str("--");
            a.push_str(KEYS[rng.below(KEYS.len())]);
            if rng.below(5) != 0 {
                a.push('=');
                a.push_str(VALUES[rng.below(VALUES.len())]);
            }
        }
    }
    a
}

#[test]
fn random_argument_vectors_never_panic() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let mut ran = 0;
    for i in 0..4000 {
        let n = rng.below(8);
        let mut owned: Vec<String> = (0..n).map(|_| random_arg(&mut rng)).collect();
        if i % 2 == 0 {
            owned.push(String::from("--size=16k"));
        }
        let args: Vec<&str> = owned.iter().map(String::as_str).collect();
        let Ok(spec) = parse(&args) else {
            let e = parse(&args).unwrap_err();
            assert!(e.message().len() < 200, "{e}");
            assert!(!e.message().contains('\n'));
            continue;
        };
        // Run the small ones on the fake, with a bounded clock budget.
        let small = spec.size.saturating_mul(u64::from(spec.numjobs)) <= 1 << 20
            && spec.runtime_ns <= 100_000
            && spec.ramp_ns <= 100_000;
        if !small {
            continue;
        }
        let mut os = FakeOs::new();
        os.dirs.insert("/d".to_string());
        os.can_mmap = i % 3 != 0;
        os.can_seek = i % 5 != 0;
        os.uptime_tick = 1;
        if i % 7 == 0 {
            os.fault = Some(
                [
                    ("read", 3, Errno::Io),
                    ("write", 20, Errno::NoSpace),
                    ("open", 1, Errno::TooManyFiles),
                ][rng.below(3)],
            );
        }
        let limits = Limits {
            reservoir: 64,
            stuck_ios: 10_000,
        };
        match run_with(&mut os, &spec, &env(), limits) {
            Ok(r) => {
                ran += 1;
                assert!(jsonck::parse(&r.json()).is_ok(), "{}", r.json());
                let s = r.summary();
                assert!(s.ends_with('\n'));
                if !spec.time_based && r.elapsed_ns > 0 && !r.hit_runtime {
                    assert_eq!(
                        r.read.ios + r.write.ios,
                        spec.ios_per_job() * u64::from(spec.numjobs),
                        "{args:?}"
                    );
                }
            }
            Err(e) => assert!(!format!("{e}").contains('\n')),
        }
        assert_eq!(os.open_fds(), 0, "{args:?}");
    }
    assert!(ran > 50, "only {ran} runs");
}
