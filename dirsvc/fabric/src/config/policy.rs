//! The names of the node cache's eviction policies (`policy=NAME` at boot,
//! `qemu-run.sh --policy NAME`, `cache policy NAME` in the shell): defined
//! once here so the launcher's boot line, the kernel and the shell agree.
//! The policies themselves live in `nodepath::policy`.

/// An eviction policy of the node's owned pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PolicyName {
    /// Install order (the behaviour before policies existed; the default).
    #[default]
    Fifo,
    /// Least recently used.
    Lru,
    /// CLOCK (second chance).
    Clock,
    /// Least frequently used (batch scoring).
    Lfu,
    /// Most recently used.
    Mru,
    /// S3-FIFO: small / main / ghost FIFO queues.
    S3Fifo,
    /// SIEVE.
    Sieve,
    /// Adaptive replacement cache.
    Arc,
    /// Two lists by the accessing group: scans go first.
    GetScan,
    /// Cluster-aware LRU: pages mapped by more nodes are evicted last.
    Cluster,
}

impl PolicyName {
    /// Every policy, in the order `cache policy` lists them.
    pub const ALL: [PolicyName; 10] = [
        PolicyName::Fifo,
        PolicyName::Lru,
        PolicyName::Clock,
        PolicyName::Lfu,
        PolicyName::Mru,
        PolicyName::S3Fifo,
        PolicyName::Sieve,
        PolicyName::Arc,
        PolicyName::GetScan,
        PolicyName::Cluster,
    ];

    /// The name on the boot line and in the shell.
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyName::Fifo => "fifo",
            PolicyName::Lru => "lru",
            PolicyName::Clock => "clock",
            PolicyName::Lfu => "lfu",
            PolicyName::Mru => "mru",
            PolicyName::S3Fifo => "s3fifo",
            PolicyName::Sieve => "sieve",
            PolicyName::Arc => "arc",
            PolicyName::GetScan => "get-scan",
            PolicyName::Cluster => "cluster",
        }
    }

    /// Parse a name (exact, lower case).
    pub fn parse(s: &str) -> Option<PolicyName> {
        PolicyName::ALL.into_iter().find(|p| p.as_str() == s)
    }

    /// The valid names, comma-separated (for error messages).
    pub fn names() -> alloc::string::String {
        let v: alloc::vec::Vec<&str> = PolicyName::ALL.iter().map(|p| p.as_str()).collect();
        v.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_ones_are_refused() {
        for p in PolicyName::ALL {
            assert_eq!(PolicyName::parse(p.as_str()), Some(p));
        }
        for bad in ["", "LRU", "lru ", "s3-fifo", "random"] {
            assert_eq!(PolicyName::parse(bad), None, "{bad:?}");
        }
        assert_eq!(PolicyName::default(), PolicyName::Fifo);
        assert!(PolicyName::names().starts_with("fifo, lru, clock"));
    }
}
