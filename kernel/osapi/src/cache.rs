//! A node cache's controls and counters as the OS interface reports and
//! sets them: eviction controls, task groups, miss counters, and the
//! bounds of the directory benchmarks.

use alloc::string::String;
use alloc::vec::Vec;

use fabric::config::PolicyName;
use fabric::proto::MissStats;

/// Smallest owned-page limit `cache config limit=` accepts: two batches of
/// page requests, so a batch of misses never has to reclaim its own pages.
pub const MIN_CACHE_LIMIT: u64 = 64;

/// A node cache's eviction controls (`cache policy`, `cache config`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheControls {
    /// Eviction policy of the owned pages.
    pub policy: PolicyName,
    /// Most owned pages (`None`: the whole frame pool).
    pub limit: Option<u64>,
    /// Owned pages idle this many seconds are evicted (0: never).
    pub ttl_s: u64,
    /// Hot-page promotion (single-copy modes): a peer's page read more
    /// than this many times within the window gets a replica here (0:
    /// off; strong mode asks the directory, which revokes the replica
    /// before any store into the page).
    pub promote: u32,
    /// The promotion window, also how long an unread replica lives (ms).
    pub promote_window_ms: u64,
}

/// The default promotion window (ms).
pub const DEFAULT_PROMOTE_WINDOW_MS: u64 = 100;

impl Default for CacheControls {
    fn default() -> Self {
        CacheControls {
            policy: PolicyName::default(),
            limit: None,
            ttl_s: 0,
            promote: 0,
            promote_window_ms: DEFAULT_PROMOTE_WINDOW_MS,
        }
    }
}

/// Counters `bench miss` reads before and after its misses: the node's
/// own (`Os::miss_counters`) and the directory's per kind of miss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MissCounters {
    /// Time in round trips to the directory, node clock, since boot.
    pub round_trip_ns: u64,
    /// Time installing answers (page cache fill, frame mapping).
    pub fill_ns: u64,
    /// The directory's single-copy page fills.
    pub page_fills: MissStats,
    /// The directory's file-server reads.
    pub file_reads: MissStats,
}

/// The group of tasks started without `--group` (the node's).
pub const DEFAULT_GROUP_NAME: &str = "default";
/// Most task groups on a node, `default` included.
pub const MAX_GROUPS: usize = 16;
/// Longest task group name.
pub const MAX_GROUP_NAME: usize = 32;

/// Is `s` a usable task group name: 1 to [`MAX_GROUP_NAME`] of
/// `A-Z a-z 0-9 _ - .`?
pub fn valid_group_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_GROUP_NAME
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
}

/// A task group's settings (`cache policy NAME --group G`, `cache config
/// group=G ...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSettings {
    /// The group.
    pub name: String,
    /// Its own eviction policy (`None`: the node's).
    pub policy: Option<PolicyName>,
    /// Most pages charged to it (`None`: no limit of its own).
    pub limit: Option<u64>,
}

/// A task group as `cache groups` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheGroup {
    /// Settings.
    pub settings: GroupSettings,
    /// The policy ordering its pages (its own, or the node's).
    pub policy: PolicyName,
    /// Its pages are in lists of its own (otherwise in `default`'s).
    pub own_lists: bool,
    /// Owned pages charged to it.
    pub pages: u64,
    /// Page accesses by its tasks served without a miss.
    pub hits: u64,
    /// Misses its tasks sent.
    pub misses: u64,
    /// Its pages evicted.
    pub evictions: u64,
}

/// Largest batch of page requests `bench dir` publishes at once (a ring
/// holds 64 descriptors).
pub const MAX_DIR_BATCH: usize = 64;
/// `bench dir`'s default batch (what the data path uses).
pub const DEFAULT_DIR_BATCH: usize = 32;

/// Result of `bench ring`: round-trip times in nanoseconds, unsorted.
pub type RingSamples = Vec<u64>;
