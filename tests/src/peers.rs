//! Doorbell peer ids as the integration tests see them: the one an
//! instance logged at boot, the one the region's doorbell table holds for
//! it (read from the host's view of the shared-region file), and a polling
//! wait for either to change.

use std::fs;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use fabric::doorbell::{ENTRY, TABLE};
use regex::Regex;

use crate::{Cluster, Error, Result};

fn fail(msg: String) -> Error {
    Error::Usage(msg)
}

/// The peer id in an instance's boot line (`doorbell: peer id P, vectors
/// N, ...`) in `log`.
pub fn logged_peer(log: &str) -> Option<u16> {
    let re = Regex::new(r"doorbell: peer id (\d+), vectors").expect("static regex");
    re.captures(log).and_then(|c| c[1].parse().ok())
}

/// Waits for instance `name`'s boot line (`doorbell: peer id P, vectors
/// N, msix on`) and returns P; fewer than the three vectors the protocol
/// uses is an error.
pub fn boot_peer(c: &Cluster, name: &str) -> Result<u16> {
    let line = c.wait_log(
        name,
        r"doorbell: peer id \d+, vectors \d+, msix on",
        Duration::from_secs(20),
    )?;
    let re = Regex::new(r"peer id (\d+), vectors (\d+)").expect("static regex");
    let caps = re
        .captures(&line)
        .ok_or_else(|| fail(format!("{name}: no peer id in {line:?}")))?;
    let vectors: u32 = caps[2].parse().unwrap_or(0);
    if vectors < 3 {
        return Err(fail(format!("{name}: only {vectors} vectors: {line:?}")));
    }
    caps[1]
        .parse()
        .map_err(|_| fail(format!("{name}: bad peer id in {line:?}")))
}

/// The shared-region file of the running cluster (`SHM_PATH` in its
/// `cluster.env`).
pub fn shm_path(c: &Cluster) -> Result<PathBuf> {
    c.run()
        .env()
        .get("SHM_PATH")
        .map(PathBuf::from)
        .ok_or_else(|| fail("no SHM_PATH in cluster.env".into()))
}

/// The peer id the region's doorbell table holds for `instance` (0 = the
/// directory, K = node K), or `None` when the entry is empty or the file
/// cannot be read.
pub fn table_peer(shm: &Path, instance: usize) -> Option<u16> {
    let bytes = fs::read(shm).ok()?;
    let off = TABLE + instance * ENTRY;
    let v = u32::from_le_bytes(bytes.get(off..off + 4)?.try_into().ok()?);
    (v != 0 && v - 1 <= 0xFFFF).then(|| (v - 1) as u16)
}

/// Polls `f` every 50 ms until it holds or `timeout` passes.
pub fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) -> Result<()> {
    let deadline = Instant::now() + timeout;
    while !f() {
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: what.to_string(),
                partial: String::new(),
            });
        }
        thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}
