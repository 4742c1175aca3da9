//! The keys of the `KEY  VALUE` tables printed by `cache stats` and
//! `dir stats`, defined once for the kernel that prints them and the host
//! tests that read them. A key is printed left-aligned and padded, and
//! parsers split a line at the first run of two or more spaces, so a key
//! never contains two spaces in a row (checked by the tests below).

/// `cache stats` (one node's page cache).
pub mod cache {
    /// Page-cache mode (`strong`, `relaxed`, `private`, `net`).
    pub const MODE: &str = "mode";
    /// The launcher's storage profile.
    pub const STORAGE_PROFILE: &str = "storage profile";
    /// Emulated CXL latency per copy from a peer's frame.
    pub const CXL_LATENCY_NS: &str = "cxl latency (ns)";

    /// Private-cache modes: pages cached.
    pub const RESIDENT_PRIVATE: &str = "resident pages (private copies)";
    /// Private-cache modes: pages fetched from the directory.
    pub const DISK_READS_PAGES: &str = "disk reads caused (pages)";
    /// Single-copy modes: WRITEBACKs sent by tasks' fsyncs in flight.
    pub const TASK_WRITEBACK_PAGES: &str = "task write-back pages sent";
    /// Single-copy modes: page READs of tasks' I/Os sent without waiting
    /// (each task runs when its own pages are in, boot option
    /// `task_reads`), and the most in flight together (`sent/max`).
    pub const TASK_READS: &str = "task read misses in flight (sent/max)";
    /// Private-cache modes: tasks' writes that waited for room (a
    /// write-back of the oldest dirty pages in flight) instead of writing
    /// back inside their flush (`task_reads=each`).
    pub const TASK_ROOM_WAITS: &str = "task writes that waited for room";
    /// Private-cache modes: write policy (`back` or `through`, boot option
    /// `baseline_writes`).
    pub const BASELINE_WRITES: &str = "baseline writes";
    /// Private-cache modes: dirty pages not yet written back.
    pub const DIRTY_PAGES: &str = "dirty pages";
    /// Private-cache modes: pages written back to the file server.
    pub const PAGES_WRITTEN_BACK: &str = "pages written back";
    /// `private` mode on the rings: tasks' write-backs (fsync, close,
    /// truncate) sent without waiting, and the most in flight together
    /// (`jobs/max`); the single-copy modes: tasks' fsyncs whose dirty
    /// frames' WRITEBACKs went out without waiting, the same way.
    pub const TASK_WRITE_BACKS: &str = "task write-backs in flight (jobs/max)";
    /// `private` mode: groups of file-server reads sent together over the
    /// rings, and the reads in them (`groups/reads`).
    pub const RING_READ_GROUPS: &str = "ring read groups/reads";
    /// `private` mode: most file-server reads in flight together over the
    /// rings (boot option `ring_reads` caps it).
    pub const RING_READS_MAX: &str = "ring reads in flight (max)";
    /// `private` and `relaxed` modes: groups of write-backs sent together
    /// over the rings, and the writes in them (`groups/writes`).
    pub const RING_WRITE_GROUPS: &str = "ring write groups/writes";
    /// `private` and `relaxed` modes: most write-backs in flight together
    /// over the rings (a 64 KiB write slot holds 16 pages).
    pub const RING_WRITES_MAX: &str = "ring writes in flight (max)";
    /// `net` mode: state of the TCP connection to the directory.
    pub const NET_CONNECTION: &str = "net connection";
    /// `net` mode: RPCs sent.
    pub const NET_RPCS: &str = "net rpcs";
    /// `net` mode: `sent/received` payload bytes.
    pub const NET_BYTES: &str = "net bytes sent/received";
    /// `net` mode: `sent/received` Ethernet frames.
    pub const NET_FRAMES: &str = "net frames sent/received";
    /// `net` mode: NIC interrupts that woke the node.
    pub const NET_WAKEUPS: &str = "net wakeup interrupts";
    /// `daxfs` mode: slots of the shared page cache.
    pub const DAXFS_SLOTS: &str = "daxfs slots";
    /// `daxfs` mode: page reads that found the page VALID in a slot.
    pub const DAXFS_HITS: &str = "daxfs hits";
    /// `daxfs` mode: misses this node claimed (PENDING) and had filled.
    pub const DAXFS_CLAIMS: &str = "daxfs claims";
    /// `daxfs` mode: lookups that waited for another node's claim (or a
    /// full window) before they went on.
    pub const DAXFS_WAITS: &str = "daxfs waits";
    /// `daxfs` mode: pages the directory filled into slots, cluster-wide.
    pub const DAXFS_FILLS: &str = "daxfs fills (directory)";
    /// `daxfs` mode: MH-clock sweeps this node won (it cleared a window's
    /// reference bits) / lost (another node advanced the hand first).
    pub const DAXFS_SWEEPS: &str = "daxfs sweeps won/lost";

    /// Single-copy modes: pages owned (in our frames).
    pub const RESIDENT_OWNED: &str = "resident owned pages";
    /// Peer frames mapped (always 0 in the private-cache modes).
    pub const REMOTE_MAPPINGS: &str = "remote mappings";
    /// Single-copy modes: relaxed-mode private copies.
    pub const PRIVATE_COPIES: &str = "private copies";
    /// Single-copy modes: `free/total` frames of our pool.
    pub const POOL_FRAMES: &str = "pool frames free/total";
    /// Hits in our own frames (or private cache).
    pub const HITS_LOCAL: &str = "hits local";
    /// Hits in a peer's frame.
    pub const HITS_REMOTE: &str = "hits remote";
    /// Single-copy modes: hits in a relaxed-mode private copy.
    pub const HITS_PRIVATE: &str = "hits private";
    /// Misses.
    pub const MISSES: &str = "misses";
    /// Single-copy modes: our frames filled from disk by the directory.
    pub const DISK_READS_FILLS: &str = "disk reads caused (fills)";
    /// Single-copy modes: misses answered with a peer's frame.
    pub const REMOTE_MAPS: &str = "remote maps (CM-R)";
    /// Single-copy modes: `Retry` answers.
    pub const RETRIES: &str = "retries";
    /// Single-copy modes: our pages invalidated (BATCH_INV).
    pub const INVALIDATIONS_SENT: &str = "invalidations sent";
    /// Single-copy modes: the INV requests those pages went in (one per
    /// contiguous run of a file's pages).
    pub const INVALIDATION_ENTRIES: &str = "invalidation entries sent";
    /// Single-copy modes: DIR_INVs received.
    pub const INVALIDATIONS_RECEIVED: &str = "invalidations received";
    /// Single-copy modes: remote mappings dropped.
    pub const REMOTE_DROPS: &str = "remote drops";
    /// Single-copy modes: write-backs asked for.
    pub const WRITEBACKS: &str = "write-backs";
    /// Single-copy modes: mappings refused (frame not exported).
    pub const REFUSED_MAPPINGS: &str = "refused mappings";
    /// Single-copy modes: batches of page requests sent (one round trip
    /// to the directory each, up to 32 requests).
    pub const PAGE_BATCHES: &str = "page request batches";
    /// Single-copy modes: reads served by replicas of peers' pages
    /// (hot-page promotion).
    pub const HITS_REPLICA: &str = "hits replica";
    /// Single-copy modes: peers' pages replicated here (promotions).
    pub const PROMOTIONS: &str = "promotions";
    /// Single-copy modes: replicas dropped (cold, or the file reopened).
    pub const DEMOTIONS: &str = "demotions";
    /// Strong mode: replicas dropped because a write to the page was
    /// coming (the directory's REVOKE, or this node's own store).
    pub const REVOCATIONS: &str = "replicas revoked";
    /// Strong mode: promotions the directory refused.
    pub const PROMOTIONS_REFUSED: &str = "promotions refused";
    /// Single-copy modes: pages replicated here now (4 KiB of node memory
    /// each).
    pub const REPLICA_PAGES: &str = "replica pages";
    /// Single-copy modes: page faults in the mmap windows.
    pub const MMAP_FAULTS: &str = "mmap page faults";
    /// Single-copy modes: mmap faults on pages invalidated meanwhile.
    pub const MMAP_EVICTED_FAULTS: &str = "mmap faults on evicted pages";
    /// Single-copy modes: cached pages mapped around an mmap fault (boot
    /// option `faultaround_kb`).
    pub const FAULTAROUND_PAGES: &str = "fault-around pages mapped";
    /// Every mode: pages fetched by readahead beyond what reads asked for
    /// (boot option `readahead_kb`).
    pub const READAHEAD_PAGES: &str = "readahead pages";
    /// Every mode: readahead pages a read later found cached.
    pub const READAHEAD_HITS: &str = "readahead hits";
    /// Every mode: readahead pages gone (evicted, invalidated) before a
    /// read reached them, counted when a read reaches them or the file is
    /// closed.
    pub const READAHEAD_WASTED: &str = "readahead wasted";
    /// Every mode with frames: pages reclaimed ahead of need (free frames
    /// under the low mark, boot options `reclaim_low` / `reclaim_high`).
    pub const RECLAIMS_AHEAD: &str = "reclaims ahead of need (pages)";
    /// Every mode with frames: misses that found no free frame and waited
    /// for reclaim.
    pub const MISSES_WAITED_RECLAIM: &str = "misses that waited for reclaim";
    /// Every mode with frames: the low and high marks of free frames
    /// (`low/high` frames; `off` with `reclaim_low=0`).
    pub const RECLAIM_WATERMARKS: &str = "reclaim watermarks (frames low/high)";

    /// Relaxed mode: the most KiB of private copies staged at once (copied
    /// out for the file-server writes) by one write-back.
    pub const PRIVATE_STAGED: &str = "private copies staged for write-back (KiB, most)";

    /// Doorbells: `on` or `off` (ivshmem-plain, or `net` mode).
    pub const DOORBELLS: &str = "doorbells";
    /// Doorbell interrupts received on vector 0 ("request").
    pub const DOORBELL_RECEIVED_REQUEST: &str = "doorbells received (request)";
    /// Doorbell interrupts received on vector 1 ("notify": DIR_INV).
    pub const DOORBELL_RECEIVED_NOTIFY: &str = "doorbells received (notify)";
    /// Doorbell interrupts received on vector 2 ("response").
    pub const DOORBELL_RECEIVED_RESPONSE: &str = "doorbells received (response)";
    /// Doorbells this node rang.
    pub const DOORBELL_RUNG: &str = "doorbells rung";
    /// Rings skipped because the target was awake (event suppression).
    pub const DOORBELL_SUPPRESSED: &str = "doorbells suppressed";
    /// Deferred suppression checks that came due and fenced (the others
    /// were dropped without a fence: the directory had taken the work).
    pub const DOORBELL_FENCED_CHECKS: &str = "doorbell checks fenced";
    /// Doorbells rung by a deferred check that came due (the directory
    /// had gone to sleep meanwhile).
    pub const DOORBELL_LATE_RINGS: &str = "doorbells rung late";
    /// Rings impossible: the target had no peer id published.
    pub const DOORBELL_NO_PEER: &str = "doorbells without a peer";
    /// Halts until a doorbell (or the self-armed timer).
    pub const DOORBELL_SLEEPS: &str = "doorbell sleeps";
    /// Tickless: interrupts of the self-armed APIC timer (wait deadlines,
    /// housekeeping beats); there is no periodic tick.
    pub const TIMER_INTERRUPTS: &str = "timer interrupts (tickless)";
    /// The node's kernel heap: KiB in live allocations, the most ever in
    /// live allocations (high mark), and its size (`in use/high/size`).
    pub const KERNEL_HEAP: &str = "kernel heap (KiB in use/high/size)";

    /// Every key, in the order the single-copy modes print them, then the
    /// keys only the private-cache modes print, then the doorbell keys and the heap.
    pub const ALL: [&str; 73] = [
        MODE,
        STORAGE_PROFILE,
        CXL_LATENCY_NS,
        RESIDENT_OWNED,
        REMOTE_MAPPINGS,
        PRIVATE_COPIES,
        POOL_FRAMES,
        HITS_LOCAL,
        HITS_REMOTE,
        HITS_PRIVATE,
        MISSES,
        DISK_READS_FILLS,
        REMOTE_MAPS,
        RETRIES,
        INVALIDATIONS_SENT,
        INVALIDATION_ENTRIES,
        INVALIDATIONS_RECEIVED,
        REMOTE_DROPS,
        WRITEBACKS,
        REFUSED_MAPPINGS,
        PAGE_BATCHES,
        HITS_REPLICA,
        PROMOTIONS,
        DEMOTIONS,
        REVOCATIONS,
        PROMOTIONS_REFUSED,
        REPLICA_PAGES,
        MMAP_FAULTS,
        MMAP_EVICTED_FAULTS,
        FAULTAROUND_PAGES,
        READAHEAD_PAGES,
        READAHEAD_HITS,
        READAHEAD_WASTED,
        RECLAIMS_AHEAD,
        MISSES_WAITED_RECLAIM,
        RECLAIM_WATERMARKS,
        PRIVATE_STAGED,
        TASK_WRITEBACK_PAGES,
        TASK_READS,
        TASK_ROOM_WAITS,
        RESIDENT_PRIVATE,
        DISK_READS_PAGES,
        BASELINE_WRITES,
        DIRTY_PAGES,
        PAGES_WRITTEN_BACK,
        TASK_WRITE_BACKS,
        RING_READ_GROUPS,
        RING_READS_MAX,
        RING_WRITE_GROUPS,
        RING_WRITES_MAX,
        NET_CONNECTION,
        NET_RPCS,
        NET_BYTES,
        NET_FRAMES,
        NET_WAKEUPS,
        DAXFS_SLOTS,
        DAXFS_HITS,
        DAXFS_CLAIMS,
        DAXFS_WAITS,
        DAXFS_SWEEPS,
        DAXFS_FILLS,
        DOORBELLS,
        DOORBELL_RECEIVED_REQUEST,
        DOORBELL_RECEIVED_NOTIFY,
        DOORBELL_RECEIVED_RESPONSE,
        DOORBELL_RUNG,
        DOORBELL_SUPPRESSED,
        DOORBELL_FENCED_CHECKS,
        DOORBELL_LATE_RINGS,
        DOORBELL_NO_PEER,
        DOORBELL_SLEEPS,
        TIMER_INTERRUPTS,
        KERNEL_HEAP,
    ];
}

/// `dir stats` (the directory's counters, as a node fetches them).
pub mod dir {
    /// Entries in the page directory.
    pub const PAGE_ENTRIES: &str = "page entries";
    /// Bytes of memory per page-directory entry.
    pub const BYTES_PER_ENTRY: &str = "bytes per entry";
    /// Requests served since boot.
    pub const REQUESTS_SERVED: &str = "requests served";
    /// Page requests handled.
    pub const PAGE_REQUESTS: &str = "page requests";
    /// Pages filled from disk.
    pub const FILLS: &str = "fills from disk";
    /// Remote mappings granted.
    pub const REMOTE_MAPPINGS_GRANTED: &str = "remote mappings granted";
    /// DIR_INVs sent.
    pub const INVALIDATIONS_SENT: &str = "invalidations sent (DIR_INV)";
    /// Invalidation notices sent: all, DIR_INVs (one page each) and
    /// INV_RANGEs (a run of a file's pages each).
    pub const INV_NOTICES: &str = "invalidation notices (DIR_INV + INV_RANGE)";
    /// Their acks taken: all, INV_ACKs and INV_RANGE acks.
    pub const INV_ACKS: &str = "invalidation acks (INV_ACK + INV_RANGE)";
    /// Pages the INV_RANGEs covered.
    pub const INV_RANGE_PAGES: &str = "pages in INV_RANGEs";
    /// Delegations (strong mode, `delegation=1`): granted, denied,
    /// recalled, given back, pages learnt from the holders' lists,
    /// requests that waited for a recall.
    pub const DELEGATIONS: &str = "delegations";
    /// Pages written back.
    pub const WRITEBACKS: &str = "write-backs";
    /// Most requests served from one node in one sweep.
    pub const LARGEST_BATCH: &str = "largest batch (requests/sweep)";
    /// Disk blocks read.
    pub const DISK_BLOCKS_READ: &str = "disk blocks read";
    /// Disk blocks written.
    pub const DISK_BLOCKS_WRITTEN: &str = "disk blocks written";
    /// `used/total` inodes.
    pub const INODES: &str = "inodes used/total";
    /// `used/total` data blocks.
    pub const BLOCKS: &str = "blocks used/total";
    /// The directory's service time of page fills, per phase (mean us).
    pub const MISS_PAGE_FILLS: &str = "miss service, page fills";
    /// The directory's service time of file-server reads, per phase.
    pub const MISS_FILE_READS: &str = "miss service, file reads";

    /// Every key, in the order `dir stats` prints them.
    pub const ALL: [&str; 19] = [
        PAGE_ENTRIES,
        BYTES_PER_ENTRY,
        REQUESTS_SERVED,
        PAGE_REQUESTS,
        FILLS,
        REMOTE_MAPPINGS_GRANTED,
        INVALIDATIONS_SENT,
        INV_NOTICES,
        INV_ACKS,
        INV_RANGE_PAGES,
        DELEGATIONS,
        WRITEBACKS,
        LARGEST_BATCH,
        DISK_BLOCKS_READ,
        DISK_BLOCKS_WRITTEN,
        INODES,
        BLOCKS,
        MISS_PAGE_FILLS,
        MISS_FILE_READS,
    ];
}

#[cfg(test)]
mod tests {
    use super::{cache, dir};

    #[test]
    fn keys_are_unique_and_parse_as_one_column() {
        for all in [&cache::ALL[..], &dir::ALL[..]] {
            for (i, k) in all.iter().enumerate() {
                assert!(!all[..i].contains(k), "{k:?} twice");
                assert!(!k.is_empty() && k.trim() == *k, "{k:?} padded");
                assert!(!k.contains("  ") && !k.contains('\t'), "{k:?}");
            }
        }
    }
}
