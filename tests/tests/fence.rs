//! Fencing: a node the directory declared failed never touches the region
//! again once its frames (and the frames it mapped) may be reused, and a
//! dead directory is noticed by the nodes within `hb_timeout_ms`.
//!
//! * `a_paused_node_declared_failed_cannot_corrupt_other_files`: strong
//!   mode, 3 nodes. Node 2 runs a random-write fio on node 1's file; its
//!   QEMU is stopped (SIGSTOP) until the directory declares it failed;
//!   node 1 drops its cache and writes a new file `/g` (reusing frames node
//!   2 had mapped); node 2 is resumed (SIGCONT). `/g` must keep its
//!   checksum on every node and on the disk, and node 2 must be killed (by
//!   the fencer) or see its I/O fail.
//! * `a_dead_directory_fails_writes_within_the_heartbeat_timeout`: two
//!   nodes run a random read/write fio on one file; the directory is
//!   SIGKILLed; both fio jobs must end with an error within
//!   `hb_timeout_ms` plus a margin, well before their runtime.
//!
//! ```text
//! cargo test -p onecopy-tests --test fence -- --test-threads=1
//! ```

use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use onecopy_tests::shell::parse_sum;
use onecopy_tests::{
    inspect, mkfs, unique_run_dir, with_cluster, Cluster, ClusterOpts, CmdOutput, Console, Error,
    Instance, Result,
};

const CTL: &str = env!("CARGO_BIN_EXE_onecopy-ctl");
/// The directory's (and, with this change, the nodes') heartbeat timeout.
const HB_MS: u64 = 3000;

fn opts(name: &str) -> ClusterOpts {
    ClusterOpts::new(name)
        .ctl(CTL)
        .cmd_timeout(Duration::from_secs(60))
        .boot_timeout(Duration::from_secs(60))
        .append_extra(&format!("hb_timeout_ms={HB_MS}"))
}

fn fail(msg: impl Into<String>) -> Error {
    Error::Usage(msg.into())
}

fn sum(c: &mut Cluster, node: u8, path: &str) -> Result<(u32, u64)> {
    let out = c.exec_ok(node, &format!("sum {path}"))?;
    parse_sum(&out.text()).ok_or_else(|| fail(format!("n{node}: sum {path}: {out:?}")))
}

fn signal(pid: u32, sig: &str) -> bool {
    Command::new("kill")
        .args([sig, &pid.to_string()])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `cmd` on node `node` through a console of its own, in a thread:
/// its answer (or why none came) and when it came.
fn spawn_exec(
    c: &Cluster,
    node: u8,
    cmd: String,
    timeout: Duration,
) -> thread::JoinHandle<(Result<CmdOutput>, Instant)> {
    let path = c.run().socket_path(Instance::Node(node));
    thread::spawn(move || {
        let r = Console::connect(&path, node, Duration::from_secs(20))
            .and_then(|mut con| con.exec(&cmd, timeout));
        (r, Instant::now())
    })
}

/// Did a fio run end in an error (an `error:` status, or a job whose
/// `err=` is not 0)?
fn fio_failed(out: &CmdOutput) -> bool {
    let text = out.text();
    !out.is_ok() || (text.contains("err=") && !text.contains("err= 0"))
}

#[test]
fn a_paused_node_declared_failed_cannot_corrupt_other_files() {
    let run_dir = unique_run_dir("fence-pause").expect("run dir");
    let image = run_dir.join("test.img");
    mkfs(&image, 64, None).expect("mkfs");
    let mut g_sum = None;
    with_cluster(
        opts("fence-pause")
            .nodes(3)
            .mode("strong")
            .run_dir(&run_dir)
            .disk(&image),
        |c| {
            c.keep_run_dir(); // the image is examined after the cluster stops
            c.exec_ok(1, "fill /f 1m")?;
            c.exec_ok(1, "sync")?;
            c.release_console(2);
            let fio = spawn_exec(
                c,
                2,
                "fio --name=w --rw=randwrite --bs=4k --size=1m --filename=/f --runtime=30 --time_based=1"
                    .to_string(),
                Duration::from_secs(120),
            );
            thread::sleep(Duration::from_secs(3));
            let pid = c.run().pid(Instance::Node(2)).expect("node 2 pid");
            assert!(signal(pid, "-STOP"), "kill -STOP node 2");
            let declared = c.wait_log("dir", r"node 2 failed", Duration::from_secs(30));
            // Node 1 reuses its frames (node 2 had them mapped) for /g.
            let written = declared.and_then(|_| {
                c.exec_ok(1, "cache drop")?;
                c.exec_ok(1, "fill /g 1m")?;
                sum(c, 1, "/g")
            });
            // Resume node 2 whatever happened (it may be gone: fenced).
            signal(pid, "-CONT");
            let want = written?;
            g_sum = Some(want);
            // Give a resumed node time to store into what it had mapped.
            thread::sleep(Duration::from_secs(5));
            for node in [1u8, 3] {
                let got = sum(c, node, "/g")?;
                if got != want {
                    return Err(fail(format!(
                        "n{node} reads /g as {got:?} after node 2 resumed, written as {want:?}"
                    )));
                }
            }
            c.exec_ok(1, "sync")?;
            let (r, _) = fio.join().expect("fio thread");
            let killed = !c.run().alive(Instance::Node(2));
            match r {
                Ok(out) if !killed && !fio_failed(&out) => {
                    return Err(fail(format!(
                        "node 2 was declared failed, resumed, and its fio went on without an error:\n{}",
                        out.text()
                    )))
                }
                Ok(out) => eprintln!("fence-pause: node 2's fio: {}", out.text()),
                Err(e) => eprintln!("fence-pause: node 2's fio gave no answer ({e}); killed: {killed}"),
            }
            // Every node that is left still agrees.
            let got = sum(c, 3, "/g")?;
            if got != want {
                return Err(fail(format!("n3 reads /g as {got:?} at the end")));
            }
            c.stop()?;
            Ok(())
        },
    );
    let want = g_sum.expect("/g was written");
    let out = inspect(&image, &["--cat", "/g"]).expect("inspect");
    assert_eq!(out.code, Some(0), "/g: {}", out.stderr_text());
    let disk = onecopy_tests::shell::crc32(&out.stdout);
    assert_eq!(
        (disk, out.stdout.len() as u64),
        want,
        "/g on the disk differs from what node 1 wrote"
    );
    let _ = std::fs::remove_dir_all(&run_dir);
}

#[test]
fn a_dead_directory_fails_writes_within_the_heartbeat_timeout() {
    with_cluster(opts("fence-dirkill").nodes(2), |c| {
        c.exec_ok(1, "fill /f 1m")?;
        c.exec_ok(1, "sync")?;
        let job = |seed: u32| {
            format!(
                "fio --name=rw --rw=randrw --bs=4k --size=1m --filename=/f --runtime=60 --time_based=1 --randseed={seed}"
            )
        };
        c.release_console(1);
        let fios = [
            spawn_exec(c, 1, job(1), Duration::from_secs(120)),
            spawn_exec(c, 2, job(2), Duration::from_secs(120)),
        ];
        thread::sleep(Duration::from_secs(4));
        c.kill_directory()?;
        let killed = Instant::now();
        let limit = Duration::from_millis(HB_MS) + Duration::from_secs(4);
        for (i, f) in fios.into_iter().enumerate() {
            let node = i + 1;
            let (r, at) = f.join().expect("fio thread");
            let out = r?;
            let after = at.saturating_duration_since(killed);
            eprintln!(
                "fence-dirkill: n{node}'s fio ended {} ms after the kill: {}",
                after.as_millis(),
                out.error_message()
                    .map_or_else(|| out.text(), str::to_string)
            );
            if !fio_failed(&out) {
                return Err(fail(format!(
                    "n{node}'s fio ended without an error although the directory was killed:\n{}",
                    out.text()
                )));
            }
            if after > limit {
                return Err(fail(format!(
                    "n{node}'s fio failed {} ms after the directory was killed (limit {} ms)",
                    after.as_millis(),
                    limit.as_millis()
                )));
            }
        }
        // Later writes and fsyncs fail too, with a clear error.
        let out = c.exec(1, "write /after one more")?;
        if out.is_ok() {
            return Err(fail("a write succeeded with the directory dead"));
        }
        eprintln!(
            "fence-dirkill: later write: {}",
            out.error_message().unwrap_or_default()
        );
        Ok(())
    });
}
