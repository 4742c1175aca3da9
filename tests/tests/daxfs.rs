//! Integration tests of `daxfs` mode (DaxFS's decentralized design: the
//! nodes share one page cache of slots in the region, claimed and
//! published by compare-and-swap; the directory only fills misses): the
//! launcher's refusal without atomics across instances, two nodes reading
//! one file at once through one filled copy per page, then seeing each
//! other's writes, and the three steps of DaxFS's multi-host validation
//! gate: atomicity (four nodes claim the same uncached pages at once: one
//! fill per page, right bytes everywhere), publish/observe (an append on
//! one node is read on the others as whole records, never torn, never a
//! size without its data) and crash (a node SIGKILLed while it holds a
//! claim and a pin wedges nothing). The clusters boot with `--accel
//! tcg-multi`.
//!
//! Needs the release kernel and host tools (`tests/run.sh` builds them):
//!
//! ```text
//! cargo test -p onecopy-tests --test daxfs -- --test-threads=1
//! ```
//!
//! Tests assert on behaviour (contents, counters, errors), never on timing.

use std::path::Path;
use std::time::{Duration, Instant};

use onecopy_tests::shell::{parse_sum, pattern_crc32};
use onecopy_tests::{
    qemu_run, serial_guard, unique_run_dir, with_cluster, ClusterOpts, Error, Result,
};
use userland::stats::keys::cache;

const CTL: &str = env!("CARGO_BIN_EXE_onecopy-ctl");

fn opts(name: &str) -> ClusterOpts {
    ClusterOpts::new(name)
        .ctl(CTL)
        .mode("daxfs")
        .accel("tcg-multi")
        .cmd_timeout(Duration::from_secs(120))
        .boot_timeout(Duration::from_secs(120))
}

/// Single-threaded TCG does not make `lock cmpxchg` atomic across
/// instances: the launcher refuses `--mode daxfs` with it, in one line,
/// before it builds or starts anything.
#[test]
fn daxfs_without_atomics_across_instances_is_refused() {
    let _serial = serial_guard();
    let run_dir = unique_run_dir("daxfs-refused").expect("run dir");
    std::fs::remove_dir(&run_dir).expect("remove the empty run dir");
    let rd = run_dir.to_string_lossy().into_owned();
    let args = [
        "--no-build",
        "--run-dir",
        &rd,
        "--mode",
        "daxfs",
        "--accel",
        "tcg",
        "-e",
        "1: uptime",
    ];
    let out = qemu_run(&args, Path::new(CTL), Duration::from_secs(60)).expect("run qemu-run.sh");
    let err = out.stderr_text();
    assert_eq!(out.code, Some(2), "exit status; output:\n{}", out.text());
    assert!(out.stdout.is_empty(), "stdout: {}", out.stdout_text());
    let line = err.trim_end();
    assert_eq!(line.lines().count(), 1, "one line: {err:?}");
    for needle in [
        "qemu-run.sh: error: ",
        "--mode daxfs",
        "atomics",
        "tcg-multi",
    ] {
        assert!(line.contains(needle), "no {needle:?} in {line:?}");
    }
    assert!(!run_dir.exists(), "created the run dir");
}

/// Two nodes read the same 256 KiB file at once: both get the right
/// bytes, and the directory filled each page once (the loser of a claim
/// waits for the winner's fill or hits the published slot). A write on
/// one node is then read on the other, although the other had the old
/// page in a slot.
#[test]
fn two_nodes_read_one_filled_copy_and_see_each_others_writes() {
    with_cluster(opts("daxfs-read"), |c| {
        let size = 256 * 1024u64;
        let pages = size / 4096;
        c.exec_ok(1, "fill /f 256k")?;
        let outs = c.exec_together(&[(1, "sum /f"), (2, "sum /f")])?;
        let want = (pattern_crc32(size), size);
        for (k, out) in outs.iter().enumerate() {
            let got = parse_sum(&out.text())
                .unwrap_or_else(|| panic!("n{}: sum printed no crc: {out:?}", k + 1));
            assert_eq!(got, want, "n{} sum /f", k + 1);
        }
        let mut claims = 0;
        for k in 1..=2 {
            let s = c.stats(k, "cache stats")?;
            let t = &s.text;
            assert_eq!(s.get(cache::MODE), "daxfs", "n{k}: {t}");
            assert_eq!(
                s.num(cache::DAXFS_FILLS),
                pages,
                "n{k}: one fill per page: {t}"
            );
            assert_eq!(s.num(cache::RESIDENT_PRIVATE), 0, "n{k}: {t}");
            claims += s.num(cache::DAXFS_CLAIMS);
        }
        assert_eq!(claims, pages, "one claim per page cluster-wide");

        // Publish/observe through the file server's write path.
        c.exec_ok(1, "write /w first-version")?;
        assert_eq!(c.exec_ok(2, "cat /w")?.text().trim(), "first-version");
        c.exec_ok(1, "write /w second-version-longer")?;
        assert_eq!(
            c.exec_ok(2, "cat /w")?.text().trim(),
            "second-version-longer"
        );
        c.exec_ok(2, "write /w from-node-2")?;
        assert_eq!(c.exec_ok(1, "cat /w")?.text().trim(), "from-node-2");
        Ok(())
    });
}

fn fail(msg: impl Into<String>) -> Error {
    Error::Usage(msg.into())
}

/// The CRC-32 and size `sum` printed.
fn sum_of(out: &onecopy_tests::CmdOutput) -> (u32, u64) {
    parse_sum(&out.text()).unwrap_or_else(|| panic!("n{}: sum printed no crc: {out:?}", out.node))
}

/// Validation gate, atomicity: four nodes read the same uncached file at
/// once, three times over (three files): every node gets the right bytes,
/// the directory filled each page exactly once (its cluster-wide fill
/// counter equals the pages) and the nodes claimed each page once between
/// them (the losers of a claim waited for the winner's fill or hit it).
#[test]
fn four_nodes_reading_the_same_pages_at_once_fill_each_page_once() {
    with_cluster(opts("daxfs-atomic").nodes(4), |c| {
        let size = 128 * 1024u64;
        let pages = size / 4096;
        let files = 3u64;
        for f in 0..files {
            c.exec_ok(1, &format!("fill /a{f} 128k"))?;
        }
        for f in 0..files {
            let cmd = format!("sum /a{f}");
            let cmd = cmd.as_str();
            let outs = c.exec_together(&[(1, cmd), (2, cmd), (3, cmd), (4, cmd)])?;
            for out in &outs {
                let out = out.clone().into_result()?;
                assert_eq!(
                    sum_of(&out),
                    (pattern_crc32(size), size),
                    "n{} {cmd}",
                    out.node
                );
            }
        }
        let mut claims = 0;
        let mut waits = 0;
        for k in 1..=4 {
            let s = c.stats(k, "cache stats")?;
            let t = &s.text;
            assert_eq!(
                s.num(cache::DAXFS_FILLS),
                files * pages,
                "n{k}: one fill per page: {t}"
            );
            claims += s.num(cache::DAXFS_CLAIMS);
            waits += s.num(cache::DAXFS_WAITS);
        }
        assert_eq!(claims, files * pages, "one claim per page cluster-wide");
        eprintln!("daxfs atomicity: {claims} claims, {waits} waits on another node's claim");
        Ok(())
    });
}

/// Record `i` of the append log: 255 checkable bytes and a newline.
fn record(i: usize) -> String {
    let body: String = (0..230)
        .map(|j| char::from(b'a' + ((i * 7 + j) % 26) as u8))
        .collect();
    let r = format!("rec-{i:05}-{body}");
    let crc = onecopy_tests::shell::crc32(r.as_bytes());
    format!("{r}-{crc:08x}-{}", "z".repeat(255 - r.len() - 10))
}

/// Checks a `cat` of the log: whole records from the first, in order;
/// returns how many.
fn check_log(out: &onecopy_tests::CmdOutput, what: &str) -> Result<usize> {
    let text = out.text();
    let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    for (i, l) in lines.iter().enumerate() {
        if *l != record(i) {
            return Err(fail(format!(
                "n{} {what}: line {i} is not record {i} (torn, stale or a size without its data):\n got  {l:?}\n want {:?}",
                out.node,
                record(i)
            )));
        }
    }
    Ok(lines.len())
}

/// Validation gate, publish/observe: node 1 appends checksummed 256-byte
/// records to a log (it grows across pages: every append changes the
/// last page, whose cached copy the append frees or retires) while nodes
/// 2 and 3 read the whole log at the same time. Every read is whole
/// records in order (never a torn page, never a size whose bytes are not
/// there yet), and holds at least every record whose append was answered
/// before the read began.
#[test]
fn appends_on_one_node_are_read_whole_on_the_others() {
    with_cluster(opts("daxfs-publish").nodes(3), |c| {
        let rounds = 48;
        c.exec_ok(1, &format!("write /log {}", record(0)))?;
        for i in 1..rounds {
            // Records whose append was answered before this round.
            let answered = i;
            let append = format!("append /log {}", record(i));
            let outs =
                c.exec_together(&[(1, append.as_str()), (2, "cat /log"), (3, "cat /log")])?;
            let mut it = outs.into_iter();
            it.next().expect("the append's answer").into_result()?;
            for out in it {
                let out = out.into_result()?;
                let n = check_log(&out, &format!("round {i}"))?;
                if n < answered || n > answered + 1 {
                    return Err(fail(format!(
                        "n{} round {i}: {n} records, expected {answered} or {}",
                        out.node,
                        answered + 1
                    )));
                }
            }
        }
        for k in 1..=3 {
            let out = c.exec_ok(k, "cat /log")?;
            assert_eq!(check_log(&out, "final")?, rounds, "n{k}");
        }
        Ok(())
    });
}

/// Validation gate, crash: node 1 holds a claim of a page of /g (PENDING,
/// its fill never asked) and a pin of the page of /h, then its QEMU is
/// SIGKILLed. A write to /h on node 2 while the pin is held is read whole
/// on node 3 (the stale pinned copy is retired, not served); node 2's
/// read of /g, started right after the kill, waits on the dead node's
/// claim only until the directory fails node 1 (heartbeat timeout) and
/// gives its claim and pin back, then reads the right bytes, well within
/// its wait limit; the cache keeps working after.
#[test]
fn a_node_killed_holding_a_claim_and_a_pin_wedges_nothing() {
    with_cluster(opts("daxfs-crash").nodes(3), |c| {
        let size = 64 * 1024u64;
        c.exec_ok(1, "fill /g 64k")?;
        c.exec_ok(1, "write /h old-text")?;
        assert_eq!(c.exec_ok(3, "cat /h")?.text().trim(), "old-text");
        let out = c.exec_ok(1, "cache hold /g 3 claim")?;
        assert!(out.text().contains("PENDING"), "{out:?}");
        let out = c.exec_ok(1, "cache hold /h 0 pin")?;
        assert!(out.text().contains("pinned"), "{out:?}");

        // A write while the pin is held: answered, and read whole.
        c.exec_ok(2, "write /h new-text-after-the-pin")?;
        assert_eq!(
            c.exec_ok(3, "cat /h")?.text().trim(),
            "new-text-after-the-pin",
            "the stale pinned copy was served after the write"
        );

        let waits_before = c.stats(2, "cache stats")?.num(cache::DAXFS_WAITS);
        c.kill_node(1)?;
        let t0 = Instant::now();
        let out = c.exec_ok(2, "sum /g")?;
        let took = t0.elapsed();
        assert_eq!(sum_of(&out), (pattern_crc32(size), size), "n2 sum /g");
        let s = c.stats(2, "cache stats")?;
        assert!(
            s.num(cache::DAXFS_WAITS) > waits_before,
            "n2 did not wait on the dead node's claim: {}",
            s.text
        );
        // The wait ends once the directory gave the claim back: within
        // the node's wait limit (10 s), whatever the machine's load.
        assert!(
            took < Duration::from_secs(10),
            "n2 waited {took:?} for the dead node's claim"
        );
        let line = c.wait_log(
            "dir",
            r"daxfs: node 1: 1 claim\(s\) and 1 pin\(s\) given back",
            Duration::from_secs(30),
        )?;
        eprintln!("{line}; n2's read of /g took {took:?} after the kill");

        // Nothing is wedged: the pinned page is rewritten and read again.
        c.exec_ok(2, "write /h third")?;
        assert_eq!(c.exec_ok(3, "cat /h")?.text().trim(), "third");
        let out = c.exec_ok(3, "sum /g")?;
        assert_eq!(sum_of(&out), (pattern_crc32(size), size), "n3 sum /g");
        Ok(())
    });
}
