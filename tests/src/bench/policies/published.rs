//! cache_ext's published wins: the only figures of the "Eviction
//! policies" section that this run did not measure.

/// Where the figures come from.
pub const SOURCE: &str =
    "cache_ext (seed 004; its published figures, as docs/RESULTS.md quotes them)";

/// How they compare with ours.
pub const CAVEAT: &str = "cache_ext's ratios are to Linux's default page-cache policy (its baseline) on a disk-backed page cache; ours are to FIFO in the same run, where a miss is a round trip to the directory and, for a page no node holds, a virtio-blk read under TCG: compare the direction and the winner, not the digits.";

/// One published figure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Published {
    /// Our workload it belongs to (`YCSB-C`, `GET-SCAN`, `search`).
    pub workload: &'static str,
    /// Our policy that plays cache_ext's part.
    pub policy: &'static str,
    /// The gain as a ratio (1.37 = +37%).
    pub ratio: f64,
    /// As published.
    pub what: &'static str,
}

/// cache_ext's wins, one per workload.
pub const CACHE_EXT: &[Published] = &[
    Published {
        workload: "YCSB-C",
        policy: "lfu",
        ratio: 1.37,
        what: "LFU +37% throughput (YCSB-C-like zipfian kv)",
    },
    Published {
        workload: "GET-SCAN",
        policy: "get-scan",
        ratio: 1.70,
        what: "GET-SCAN policy +70% GET throughput",
    },
    Published {
        workload: "search",
        policy: "mru",
        ratio: 2.0,
        what: "MRU about 2x throughput (file search)",
    },
];

/// The published figure of a workload, if cache_ext gives one.
pub fn for_workload(workload: &str) -> Option<&'static Published> {
    CACHE_EXT.iter().find(|p| p.workload == workload)
}

/// The figure to show in (workload, policy)'s row: the published one
/// where the policy is cache_ext's, else empty.
pub fn cell(workload: &str, policy: &str) -> String {
    match for_workload(workload) {
        Some(p) if p.policy == policy => format!("{} ({:.2}x)", p.what, p.ratio),
        _ => String::new(),
    }
}
