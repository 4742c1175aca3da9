//! Host-side knowledge of the in-guest shell: the `fill` pattern and parsers
//! for the output of `sum`, `stat`, `bench ring` and the `KEY  VALUE`
//! tables of `cache stats` / `dir stats`.

use regex::Regex;
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// Byte at offset `o` of what `fill PATH SIZE` writes (the same formula as
/// `userland::pattern::byte_at`).
pub fn pattern_byte(o: u64) -> u8 {
    ((o % 251) as u8) ^ ((o >> 12) as u8)
}

/// The first `len` bytes of the fill pattern.
pub fn pattern_bytes(len: usize) -> Vec<u8> {
    (0..len as u64).map(pattern_byte).collect()
}

/// CRC-32 (IEEE, as `sum` prints it) of the first `len` bytes of the fill
/// pattern.
pub fn pattern_crc32(len: u64) -> u32 {
    let mut h = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut off = 0u64;
    while off < len {
        let n = (len - off).min(buf.len() as u64) as usize;
        for (i, b) in buf[..n].iter_mut().enumerate() {
            *b = pattern_byte(off + i as u64);
        }
        h.update(&buf[..n]);
        off += n as u64;
    }
    h.finalize()
}

/// CRC-32 (IEEE) of arbitrary bytes.
pub fn crc32(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}

fn re(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).expect("valid built-in regex"))
}

/// Parses `crc32=xxxxxxxx size=N` (output of `sum`) into `(crc, size)`.
pub fn parse_sum(text: &str) -> Option<(u32, u64)> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let c = re(&RE, r"crc32=([0-9a-fA-F]{8})\s+size=(\d+)").captures(text)?;
    Some((u32::from_str_radix(&c[1], 16).ok()?, c[2].parse().ok()?))
}

/// What `stat PATH` prints: `ino=N kind=file size=N version=N`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    /// Inode number.
    pub ino: u64,
    /// `file`, `dir`, ...
    pub kind: String,
    /// Size in bytes.
    pub size: u64,
    /// Version counter.
    pub version: u64,
}

/// Parses the output of `stat`.
pub fn parse_stat(text: &str) -> Option<Stat> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let c = re(&RE, r"ino=(\d+)\s+kind=(\w+)\s+size=(\d+)\s+version=(\d+)").captures(text)?;
    Some(Stat {
        ino: c[1].parse().ok()?,
        kind: c[2].to_string(),
        size: c[3].parse().ok()?,
        version: c[4].parse().ok()?,
    })
}

/// Parses `ring round trip: n=.. median=XXX ns p99=YYY ns ...` into
/// `(median_ns, p99_ns)`.
pub fn parse_ring_bench(text: &str) -> Option<(u64, u64)> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let c = re(&RE, r"median=(\d+)\s*ns\s+p99=(\d+)\s*ns").captures(text)?;
    Some((c[1].parse().ok()?, c[2].parse().ok()?))
}

/// Output of `cache stats` / `dir stats` on one node: `KEY  VALUE` lines,
/// the key left-aligned and padded (keys contain single spaces, so the
/// separator is two or more spaces).
#[derive(Debug, Clone)]
pub struct Stats {
    node: u8,
    cmd: String,
    map: BTreeMap<String, String>,
    /// The whole output.
    pub text: String,
}

impl Stats {
    /// Parse `text`, the output of `cmd` on `node` (kept for messages).
    pub fn parse(node: u8, cmd: &str, text: &str) -> Stats {
        static RE: OnceLock<Regex> = OnceLock::new();
        let map = text
            .lines()
            .filter_map(|l| re(&RE, r"^(\S.*?)\s{2,}(\S.*?)\s*$").captures(l))
            .map(|c| (c[1].to_string(), c[2].to_string()))
            .collect();
        Stats {
            node,
            cmd: cmd.to_string(),
            map,
            text: text.to_string(),
        }
    }

    /// The value of `key` as text; panics (with the whole output) if absent.
    pub fn get(&self, key: &str) -> &str {
        self.map.get(key).map(String::as_str).unwrap_or_else(|| {
            panic!(
                "n{}: no {key:?} in `{}` output:\n{}",
                self.node, self.cmd, self.text
            )
        })
    }

    /// The value of `key` as a number; panics if absent or not a number.
    pub fn num(&self, key: &str) -> u64 {
        let v = self.get(key);
        v.parse().unwrap_or_else(|_| {
            panic!(
                "n{}: {key:?} is not a number ({v:?}) in `{}` output:\n{}",
                self.node, self.cmd, self.text
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use userland::stats::keys::{cache, dir};

    #[test]
    fn stats_parser_reads_every_key() {
        // A table as the shell prints it (keys padded to one column), with
        // every key the kernel prints: each one comes back whole.
        let width = cache::ALL
            .iter()
            .chain(&dir::ALL)
            .map(|k| k.len())
            .max()
            .unwrap_or(0);
        for (cmd, keys) in [
            ("cache stats", &cache::ALL[..]),
            ("dir stats", &dir::ALL[..]),
        ] {
            let text: String = keys
                .iter()
                .enumerate()
                .map(|(i, k)| format!("{k:<w$}  {i}/7\n", w = width))
                .collect();
            let s = Stats::parse(2, cmd, &text);
            for (i, k) in keys.iter().enumerate() {
                assert_eq!(s.get(k), format!("{i}/7"), "{cmd}: {k:?}");
            }
        }
    }

    #[test]
    fn stats_parser() {
        let s = Stats::parse(
            1,
            "cache stats",
            "mode                       strong\n\
             resident owned pages       64\n\
             pool frames free/total     8057/8121\n\
             disk reads caused (fills)  0\n",
        );
        assert_eq!(s.get(cache::MODE), "strong");
        assert_eq!(s.num(cache::RESIDENT_OWNED), 64);
        assert_eq!(s.get(cache::POOL_FRAMES), "8057/8121");
        assert_eq!(s.num(cache::DISK_READS_FILLS), 0);
    }

    #[test]
    fn pattern() {
        assert_eq!(pattern_byte(0), 0);
        assert_eq!(pattern_byte(250), 250);
        assert_eq!(pattern_byte(251), 0);
        assert_eq!(pattern_byte(4096), ((4096 % 251) as u8) ^ 1);
        assert_eq!(pattern_bytes(3), vec![0, 1, 2]);
        for len in [0u64, 1, 4095, 4096, 65536, 65537, 200_000] {
            assert_eq!(
                pattern_crc32(len),
                crc32(&pattern_bytes(len as usize)),
                "len {len}"
            );
        }
        // The standard CRC-32 check value.
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
    }

    #[test]
    fn sum_output() {
        assert_eq!(parse_sum("crc32=cbf43926 size=9"), Some((0xcbf4_3926, 9)));
        assert_eq!(
            parse_sum("crc32=CBF43926  size=0\r"),
            Some((0xcbf4_3926, 0))
        );
        assert_eq!(parse_sum("crc32=xyz size=1"), None);
    }

    #[test]
    fn stat_output() {
        assert_eq!(
            parse_stat("ino=5 kind=file size=204800 version=3"),
            Some(Stat {
                ino: 5,
                kind: "file".into(),
                size: 204_800,
                version: 3
            })
        );
        assert_eq!(parse_stat("no such file"), None);
    }

    #[test]
    fn ring_output() {
        assert_eq!(
            parse_ring_bench("ring round trip: n=1000 median=230 ns p99=900 ns max=5000 ns"),
            Some((230, 900))
        );
        assert_eq!(parse_ring_bench("ring round trip: n=0"), None);
    }
}
