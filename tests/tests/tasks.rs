//! Integration tests of tasks on a node: every fio
//! job is a task, and the I/Os of all waiting jobs go out together, so
//! `fio --ioengine=psync --numjobs=8` on cold reads has more than one I/O
//! in flight, as fio's RESULT line reports (`effective_iodepth`, the mean
//! per flush, and `max_iodepth`).
//!
//! ```text
//! cargo test -p onecopy-tests --test tasks -- --test-threads=1
//! ```
//!
//! These tests check behaviour (the depth fio measured, the data), never
//! timing.

use std::time::Duration;

use onecopy_tests::{with_cluster, Cluster, ClusterOpts, Error, Result};
use serde_json::Value;

const CTL: &str = env!("CARGO_BIN_EXE_onecopy-ctl");

fn opts(name: &str) -> ClusterOpts {
    ClusterOpts::new(name)
        .ctl(CTL)
        .cmd_timeout(Duration::from_secs(120))
        .boot_timeout(Duration::from_secs(60))
}

fn fail(msg: String) -> Error {
    Error::Usage(msg)
}

/// Run `fio ARGS` on `node`; its RESULT json.
fn fio(c: &mut Cluster, node: u8, args: &str) -> Result<Value> {
    let out = c.exec_ok(node, &format!("fio {args}"))?.text();
    let line = out
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("RESULT "))
        .ok_or_else(|| fail(format!("n{node}: no RESULT line: {out}")))?;
    let v: Value = serde_json::from_str(line)
        .map_err(|e| fail(format!("n{node}: RESULT json: {e}: {line}")))?;
    if !out.contains("as tasks, waiting I/Os flushed together") {
        return Err(fail(format!(
            "n{node}: fio did not run its jobs as tasks: {out}"
        )));
    }
    Ok(v)
}

fn num(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} missing in {v}"))
}

/// Depth and I/O count checks of a cold-read run of `jobs` jobs.
fn check_depth(mode: &str, v: &Value, jobs: u64, ios: u64) {
    let eff = num(v, "effective_iodepth");
    let max = num(v, "max_iodepth");
    assert!(
        eff > 1,
        "{mode}: effective_iodepth {eff} (one I/O in flight): {v}"
    );
    assert!(
        eff <= jobs && max <= jobs,
        "{mode}: more in flight than jobs: {v}"
    );
    assert_eq!(max, jobs, "{mode}: the jobs never all waited together: {v}");
    assert_eq!(num(&v["read"], "ios"), ios, "{mode}: {v}");
}

/// psync numjobs=8 on cold reads, single-copy (strong): node 2's jobs
/// read files node 1 laid out, after dropping its cache (misses of
/// pages node 1 owns, CM-R), then its own files after a cache drop (CM
/// from the disk).
#[test]
fn psync_numjobs_8_has_several_ios_in_flight_strong() {
    with_cluster(opts("tasks-strong"), |c| {
        let job = "--name=t --rw=randread --bs=4k --size=64k --numjobs=8 --ioengine=psync";
        // Node 1 lays the files out (and keeps owning their pages).
        fio(c, 1, &format!("{job} --invalidate=0"))?;
        let v = fio(c, 2, job)?;
        check_depth("strong CM-R", &v, 8, 8 * 16);
        let v = fio(c, 2, &format!("{job} --filename=/own"))?;
        check_depth("strong one file", &v, 8, 8 * 16);
        // The data read through the tasks is the data written.
        let out = c.exec_ok(2, "sum /t.3.0")?.text();
        let out1 = c.exec_ok(1, "sum /t.3.0")?.text();
        assert_eq!(out, out1, "n1 and n2 read different bytes");
        Ok(())
    });
}

/// mmap jobs are tasks too: their loads' misses are resolved together.
#[test]
fn mmap_numjobs_4_has_several_ios_in_flight() {
    with_cluster(opts("tasks-mmap"), |c| {
        let job = "--name=m --rw=randread --bs=4k --size=64k --numjobs=4 --ioengine=mmap";
        fio(c, 1, &format!("{job} --invalidate=0"))?;
        let v = fio(c, 2, job)?;
        check_depth("strong mmap", &v, 4, 4 * 16);
        Ok(())
    });
}

/// Private mode: the tasks' misses go to the file server together, as
/// several ring requests in flight.
#[test]
fn psync_numjobs_8_has_several_ios_in_flight_private() {
    with_cluster(opts("tasks-private").mode("private"), |c| {
        let job = "--name=p --rw=randread --bs=4k --size=64k --numjobs=8 --ioengine=psync";
        fio(c, 1, &format!("{job} --invalidate=0"))?;
        let v = fio(c, 2, job)?;
        check_depth("private", &v, 8, 8 * 16);
        Ok(())
    });
}

/// `task read misses in flight (sent/max)` of `node`'s `cache stats`.
fn task_reads(c: &mut Cluster, node: u8) -> Result<(u64, u64)> {
    use userland::stats::keys::cache as k;
    let s = c.stats(node, "cache stats")?;
    let v = s.get(k::TASK_READS).to_string();
    v.split_once('/')
        .and_then(|(a, b)| Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?)))
        .ok_or_else(|| fail(format!("{}: {v:?}", k::TASK_READS)))
}

/// Tasks' reads one by one (`task_reads=each`, the default): cold psync
/// reads of 8 jobs send their misses as calls in flight of their own,
/// several at once (strong: page READs, also for 8 mmap jobs' loads;
/// `private`: file-server reads; `net`: reads over the connection),
/// and read the bytes node 1 wrote; with `task_reads=batch` none is sent
/// that way (every flush is one batch), and the data is the same.
#[test]
fn tasks_reads_are_in_flight_one_by_one_and_batch_boots_the_old_way() {
    for (mode, extra) in [
        ("strong", "task_reads=each"),
        ("private", "task_reads=each"),
        ("net", "task_reads=each"),
        ("strong", "task_reads=batch"),
    ] {
        let name = format!("tasks-reads-{mode}-{}", &extra[11..]);
        with_cluster(opts(&name).mode(mode).append_extra(extra), |c| {
            let job = "--name=r --rw=randread --bs=4k --size=64k --numjobs=8 --ioengine=psync";
            fio(c, 1, &format!("{job} --invalidate=0"))?;
            c.exec_ok(1, "sync")?;
            let v = fio(c, 2, job)?;
            check_depth(&name, &v, 8, 8 * 16);
            let (sent, max) = task_reads(c, 2)?;
            let ok = if extra.ends_with("batch") {
                sent == 0
            } else {
                sent >= 16 && max >= 2
            };
            if !ok {
                return Err(fail(format!(
                    "{name}: {sent} reads sent one by one, at most {max} in flight"
                )));
            }
            if mode == "strong" {
                // Mapped loads (fio's mmap engine) go the same way.
                let mjob = "--name=m --rw=randread --bs=4k --size=64k --numjobs=8 --ioengine=mmap";
                fio(c, 1, &mjob.replace("randread", "randwrite"))?;
                c.exec_ok(1, "sync")?;
                c.exec_ok(1, "cache drop")?;
                let v = fio(c, 2, mjob)?;
                check_depth(&format!("{name} mmap"), &v, 8, 8 * 16);
                let (after, max) = task_reads(c, 2)?;
                let ok = if extra.ends_with("batch") {
                    after == 0
                } else {
                    after >= sent + 16 && max >= 2
                };
                if !ok {
                    return Err(fail(format!(
                        "{name} mmap: {} loads' reads sent one by one, at most {max} in flight",
                        after - sent
                    )));
                }
            }
            for f in ["/r.0.0", "/r.7.0", "/m.0.0", "/m.7.0"] {
                if mode != "strong" && f.starts_with("/m") {
                    continue;
                }
                let mine = c.exec_ok(1, &format!("sum {f}"))?.text();
                let theirs = c.exec_ok(2, &format!("sum {f}"))?.text();
                if mine != theirs {
                    return Err(fail(format!("{name} {f}: n1 {mine:?}, n2 {theirs:?}")));
                }
            }
            Ok(())
        });
    }
}

/// Private mode under memory pressure (`cache_pages=256`, 1 MiB, against
/// 8 jobs writing 256 KiB each at random): a job's write to an uncached
/// page with the cache full of dirty pages waits for room made by a
/// write-back in flight (`cache stats` counts those writes), and every
/// byte reaches the file server: node 2, which never wrote, reads the
/// same files as node 1 after its sync.
#[test]
fn writes_under_memory_pressure_wait_for_room_in_flight() {
    use onecopy_tests::shell::parse_sum;
    use userland::stats::keys::cache as k;
    let o = opts("tasks-room")
        .mode("private")
        .append_extra("cache_pages=256");
    with_cluster(o, |c| {
        let job = "--name=w --rw=randwrite --bs=4k --size=256k --numjobs=8 --ioengine=psync";
        fio(c, 1, job)?;
        let s = c.stats(1, "cache stats")?;
        let waits: u64 = s.get(k::TASK_ROOM_WAITS).parse().unwrap_or(0);
        if waits == 0 {
            return Err(fail(format!(
                "no write waited for room: {} = {:?}",
                k::TASK_ROOM_WAITS,
                s.get(k::TASK_ROOM_WAITS)
            )));
        }
        c.exec_ok(1, "sync")?;
        for f in ["/w.0.0", "/w.3.0", "/w.7.0"] {
            let mine = parse_sum(&c.exec_ok(1, &format!("sum {f}"))?.text());
            let theirs = parse_sum(&c.exec_ok(2, &format!("sum {f}"))?.text());
            if mine.is_none() || mine != theirs {
                return Err(fail(format!("{f}: n1 {mine:?}, n2 {theirs:?}")));
            }
        }
        Ok(())
    });
}

/// Private mode: a job's fsync sends its file's dirty pages and yields,
/// so several jobs' write-backs are in flight together (`cache stats`
/// counts them), and the bytes reach the file server: node 2 reads what
/// node 1's jobs wrote. Strong mode: the same with the dirty frames'
/// WRITEBACKs; relaxed: with the private copies' writes (fio's full-page
/// writes); `net` mode: with the writes over the connection.
#[test]
fn private_fsyncs_of_several_jobs_are_in_flight_together() {
    fsyncs_in_flight("private")
}

#[test]
fn strong_fsyncs_of_several_jobs_are_in_flight_together() {
    fsyncs_in_flight("strong")
}

#[test]
fn net_fsyncs_of_several_jobs_are_in_flight_together() {
    fsyncs_in_flight("net")
}

#[test]
fn relaxed_fsyncs_of_several_jobs_are_in_flight_together() {
    fsyncs_in_flight("relaxed")
}

fn fsyncs_in_flight(mode: &str) {
    use onecopy_tests::shell::parse_sum;
    use userland::stats::keys::cache as k;
    with_cluster(opts(&format!("tasks-{mode}-fsync")).mode(mode), |c| {
        let job =
            "--name=w --rw=randwrite --bs=4k --size=32k --numjobs=8 --ioengine=psync --fsync=1";
        fio(c, 1, job)?;
        let s = c.stats(1, "cache stats")?;
        let v = s.get(k::TASK_WRITE_BACKS).to_string();
        let (jobs, max) = v
            .split_once('/')
            .and_then(|(a, b)| Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?)))
            .ok_or_else(|| fail(format!("{}: {v:?}", k::TASK_WRITE_BACKS)))?;
        if jobs < 8 * 8 || max < 2 {
            return Err(fail(format!(
                "{jobs} write-backs, at most {max} in flight together (8 jobs x 8 fsyncs)"
            )));
        }
        for f in ["/w.0.0", "/w.7.0"] {
            let mine = c.exec_ok(1, &format!("sum {f}"))?.text();
            let theirs = c.exec_ok(2, &format!("sum {f}"))?.text();
            let (a, b) = (parse_sum(&mine), parse_sum(&theirs));
            if a.is_none() || a != b {
                return Err(fail(format!("{f}: n1 {mine:?}, n2 {theirs:?}")));
            }
        }
        Ok(())
    });
}
