//! The command table and `help`.

use alloc::format;
use alloc::vec::Vec;

use super::bench::*;
use super::control::*;
use super::files::*;
use super::groups::cmd_cache_groups;
use super::miss::cmd_bench_miss;
use super::node::*;
use super::{quoted, Args, Command, Ctx, Error};

pub(super) const MANY: usize = usize::MAX;

pub(super) static COMMANDS: &[Command] = &[
    Command {
        name: "help",
        usage: "help [COMMAND]",
        help: "list commands, or describe one",
        min_args: 0,
        max_args: 1,
        run: cmd_help,
    },
    Command {
        name: "ls",
        usage: "ls [PATH]",
        help: "list a directory (default /) or show one file",
        min_args: 0,
        max_args: 1,
        run: cmd_ls,
    },
    Command {
        name: "cat",
        usage: "cat PATH",
        help: "print a file as text (unprintable bytes as '.')",
        min_args: 1,
        max_args: 1,
        run: cmd_cat,
    },
    Command {
        name: "write",
        usage: "write PATH TEXT",
        help: "create or truncate a file and write TEXT plus a newline",
        min_args: 2,
        max_args: MANY,
        run: cmd_write,
    },
    Command {
        name: "append",
        usage: "append PATH TEXT",
        help: "append TEXT plus a newline to a file (created if missing)",
        min_args: 2,
        max_args: MANY,
        run: cmd_append,
    },
    Command {
        name: "fill",
        usage: "fill PATH SIZE",
        help: "create or truncate a file and write SIZE bytes of the test pattern",
        min_args: 2,
        max_args: 2,
        run: cmd_fill,
    },
    Command {
        name: "sum",
        usage: "sum PATH",
        help: "print the CRC-32 and size of a file",
        min_args: 1,
        max_args: 1,
        run: cmd_sum,
    },
    Command {
        name: "stat",
        usage: "stat PATH",
        help: "print inode number, kind, size and version",
        min_args: 1,
        max_args: 1,
        run: cmd_stat,
    },
    Command {
        name: "truncate",
        usage: "truncate PATH SIZE",
        help: "set a file's size (created if missing)",
        min_args: 2,
        max_args: 2,
        run: cmd_truncate,
    },
    Command {
        name: "rm",
        usage: "rm PATH",
        help: "remove a file",
        min_args: 1,
        max_args: 1,
        run: cmd_rm,
    },
    Command {
        name: "mkdir",
        usage: "mkdir PATH",
        help: "create a directory",
        min_args: 1,
        max_args: 1,
        run: cmd_mkdir,
    },
    Command {
        name: "rmdir",
        usage: "rmdir PATH",
        help: "remove an empty directory",
        min_args: 1,
        max_args: 1,
        run: cmd_rmdir,
    },
    Command {
        name: "sync",
        usage: "sync",
        help: "flush everything this node holds to stable storage",
        min_args: 0,
        max_args: 0,
        run: cmd_sync,
    },
    Command {
        name: "nodes",
        usage: "nodes",
        help: "show cluster membership, heartbeats and epochs (* = this node)",
        min_args: 0,
        max_args: 0,
        run: cmd_nodes,
    },
    Command {
        name: "uptime",
        usage: "uptime",
        help: "time since boot",
        min_args: 0,
        max_args: 0,
        run: cmd_uptime,
    },
    Command {
        name: "trace",
        usage: "trace on|off|clear|dump",
        help: "the protocol timeline of this instance: record events (requests, answers, fills, invalidations, acks, doorbells, sleeps) with TSC timestamps into its private ring (on), stop (off), forget them (clear), or print them, one `TRACE` line each (dump; qemu-run.sh trace merges every instance's dump into Perfetto's JSON)",
        min_args: 1,
        max_args: 1,
        run: cmd_trace,
    },
    Command {
        name: "bench ring",
        usage: "bench ring [COUNT]",
        help: "time COUNT empty round trips to the directory (default 10000)",
        min_args: 0,
        max_args: 1,
        run: cmd_bench_ring,
    },
    Command {
        name: "bench rpc",
        usage: "bench rpc [COUNT]",
        help: "time COUNT empty file-server requests over this mode's file transport (the rings, or TCP in net mode)",
        min_args: 0,
        max_args: 1,
        run: cmd_bench_rpc,
    },
    Command {
        name: "bench pingpong",
        usage: "bench pingpong [COUNT]",
        help: "COUNT bare cache-line round trips with the directory (the floor for bench ring)",
        min_args: 0,
        max_args: 1,
        run: cmd_bench_pingpong,
    },
    Command {
        name: "bench atomics",
        usage: "bench atomics [COUNT|reset]",
        help: "COUNT (default 1000000) lock-xadd increments of the region's atomics probe, or reset it to 0: run it on two nodes at once to see whether read-modify-writes are atomic across instances",
        min_args: 0,
        max_args: 1,
        run: cmd_bench_atomics,
    },
    Command {
        name: "bench doorbell",
        usage: "bench doorbell [COUNT]",
        help: "time COUNT doorbell round trips with the directory (halted, woken only by the doorbell)",
        min_args: 0,
        max_args: 1,
        run: cmd_bench_doorbell,
    },
    Command {
        name: "bench trace",
        usage: "bench trace [COUNT]",
        help: "the protocol timeline's cost: COUNT (default 100000) calls of its record with recording off, COUNT with it on, and COUNT iterations of an empty loop of the same shape (the baseline), interleaved in 5 rounds; ns per call of each and the differences to the baseline. Recording is left on or off as found; the timeline is cleared",
        min_args: 0,
        max_args: 1,
        run: cmd_bench_trace,
    },
    Command {
        name: "bench calibrate",
        usage: "bench calibrate [ROUNDS]",
        help: "time ROUNDS (default 20000) rounds of the page cache's hot operations (a 4 KiB copy, 8 hash lookups, a descriptor through a ring), the same code onecopy-calibrate times on the host: their ratio is the testbed's time dilation (qemu-run.sh --dilation auto)",
        min_args: 0,
        max_args: 1,
        run: cmd_bench_calibrate,
    },
    Command {
        name: "bench read",
        usage: "bench read PATH",
        help: "time a 4 KiB read of every page of PATH once (CM, CM-R, CH-R or local hit, by residency)",
        min_args: 1,
        max_args: 1,
        run: cmd_bench_read,
    },
    Command {
        name: "bench miss",
        usage: "bench miss [N] [read|batch]",
        help: "N cold 4 KiB misses (default 64, at most 1024) of a scratch file /bench-miss in this mode, each one read call (read, the default) or one batch of one I/O as fio's libaio sends (batch), split into phases: node call, transport, directory lookup/disk read/fill/reply, node fill/map (mean us, share; RESULT json)",
        min_args: 0,
        max_args: 2,
        run: cmd_bench_miss,
    },
    Command {
        name: "bench inv",
        usage: "bench inv PATH",
        help: "time a synchronous invalidation of every page of PATH this node owns, one at a time (private/net: drop each page of our own copy)",
        min_args: 1,
        max_args: 1,
        run: cmd_bench_inv,
    },
    Command {
        name: "bench dir",
        usage: "bench dir PATH [ROUNDS] [BATCH]",
        help: "directory throughput: map and drop every page of PATH (owned by another node), BATCH page requests at a time (1..64, default 32)",
        min_args: 1,
        max_args: 3,
        run: cmd_bench_dir,
    },
    Command {
        name: "cache stats",
        usage: "cache stats",
        help: "page-cache mode and counters of this node",
        min_args: 0,
        max_args: 0,
        run: cmd_cache_stats,
    },
    Command {
        name: "cache drop",
        usage: "cache drop",
        help: "give back every cached page of this node through the protocol (daxfs: free the shared slots this node filled that no reader has pinned)",
        min_args: 0,
        max_args: 0,
        run: cmd_cache_drop,
    },
    Command {
        name: "cache hold",
        usage: "cache hold PATH PAGE claim|pin",
        help: "daxfs mode, for failure tests: claim page PAGE of PATH in the shared slot cache (PENDING, no fill asked) or pin it (filled first), and keep the claim or pin until this node fails",
        min_args: 3,
        max_args: 3,
        run: cmd_cache_hold,
    },
    Command {
        name: "cache policy",
        usage: "cache policy [NAME] [--group G]",
        help: "show the eviction policy of this node's owned pages and the available names, or set it by name; --group G: task group G's own policy (the group is made if missing)",
        min_args: 0,
        max_args: 3,
        run: cmd_cache_policy,
    },
    Command {
        name: "cache config",
        usage: "cache config [group=G] [KEY=VALUE ...]",
        help: "show or set eviction controls: ttl=SECONDS (idle pages evicted; 0 off), limit=PAGES (owned pages, 64 or more; 0/none: the pool), policy=NAME, promote=N (single-copy modes: a peer's page read more than N times in the window gets a local read-only replica; strong mode revokes it before any write; 0 off), promote_window_ms=MS (default 100); with group=G, task group G's limit=PAGES (pages charged to it; 0/none: no limit of its own) and policy=NAME",
        min_args: 0,
        max_args: 8,
        run: cmd_cache_config,
    },
    Command {
        name: "cache readahead",
        usage: "cache readahead [KB [FAULTAROUND_KB]]",
        help: "show or set, at run time, the largest readahead window of a sequential reader (KB, 0 off; boot option readahead_kb) and the mmap fault-around block (FAULTAROUND_KB, 0 off; boot option faultaround_kb); open files start over at their next read",
        min_args: 0,
        max_args: 2,
        run: cmd_cache_readahead,
    },
    Command {
        name: "cache groups",
        usage: "cache groups",
        help: "task groups of this node's cache: policy, limit, pages charged, hits, misses, evictions",
        min_args: 0,
        max_args: 0,
        run: cmd_cache_groups,
    },
    Command {
        name: "locality",
        usage: "locality PATH",
        help: "where the pages of PATH live, per run of pages: owner node and sharers, or on disk only (asks the directory)",
        min_args: 1,
        max_args: 1,
        run: cmd_locality,
    },
    Command {
        name: "mmap-read",
        usage: "mmap-read PATH",
        help: "map a file (zero copy) and print the crc32 of its bytes read through the mapping",
        min_args: 1,
        max_args: 1,
        run: cmd_mmap_read,
    },
    Command {
        name: "dir stats",
        usage: "dir stats",
        help: "directory counters: entries, bytes per entry, ops, batches, disk I/O",
        min_args: 0,
        max_args: 0,
        run: cmd_dir_stats,
    },
    Command {
        name: "fio",
        usage: "fio [--output-format=F] --OPT=VALUE ... | JOBFILE",
        help: "fio subset with fio's syntax (--size required): name rw|readwrite rwmixread rwmixwrite bs|blocksize size filename directory numjobs iodepth runtime time_based ioengine invalidate fsync ramp_time randseed random_distribution group_reporting description direct=0 buffered=1 thread; or a job file of these ([global], [job], stonewall, new_group), its jobs one after another; not fio's: --group NAME (the jobs' task group); --output-format=normal (summary + RESULT {json}) | json | json+ (fio's JSON)",
        min_args: 1,
        max_args: MANY,
        run: cmd_fio,
    },
    Command {
        name: "app",
        usage: "app NAME [--runtime S] [--warmup S] [--threads N] [--seed X] [--ops N] [--dir PATH] ...",
        help: "run a workload over its dataset (webserver fileserver varmail kv infer ann search), after --warmup S uncounted (0: none): summary + RESULT {json} of the measured phase",
        min_args: 1,
        max_args: MANY,
        run: cmd_app,
    },
    Command {
        name: "shutdown",
        usage: "shutdown",
        help: "shut this node down",
        min_args: 0,
        max_args: 0,
        run: cmd_shutdown,
    },
];

pub(super) fn cmd_help(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let selected: Vec<&Command> = match args.get(0) {
        None => COMMANDS.iter().collect(),
        Some(name) => COMMANDS
            .iter()
            .filter(|c| c.name == name || c.name.split(' ').next() == Some(name))
            .collect(),
    };
    if selected.is_empty() {
        return Err(Error::Msg(format!(
            "no command '{}' (try 'help')",
            quoted(args.get(0).unwrap_or(""))
        )));
    }
    if args.len() == 0 {
        ctx.println("commands (paths are absolute; relative ones start at /):");
    }
    let width = selected.iter().map(|c| c.usage.len()).max().unwrap_or(0);
    for c in selected {
        ctx.println(&format!("  {:<width$}  {}", c.usage, c.help));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::COMMANDS;

    /// `help fio` names every option the fio parser takes.
    #[test]
    fn fio_help_names_every_fio_option() {
        let fio = COMMANDS.iter().find(|c| c.name == "fio").expect("fio");
        let words: alloc::vec::Vec<&str> = fio
            .help
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .collect();
        for key in crate::fio::options::option_names().chain(["group"]) {
            assert!(
                words.contains(&key) || words.contains(&alloc::format!("--{key}").as_str()),
                "help fio omits --{key}: {}",
                fio.help
            );
        }
    }
}
