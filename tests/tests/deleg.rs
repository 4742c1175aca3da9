//! Integration test of delegated ownership (strong mode, boot option
//! `delegation=1`): node 1 writes a file whole, its pages placed under a
//! delegation with no request per page, while node 2 reads the file; the
//! reader's first page request recalls the range, and every read sees a
//! prefix of what node 1 wrote (never zeros, never torn), then the whole.
//!
//! Needs the release kernel and host tools (`tests/run.sh` builds them):
//!
//! ```text
//! cargo build --release -p onecopy-kernel --target x86_64-unknown-none
//! cargo build --release -p flatfs --bins
//! cargo test -p onecopy-tests --test deleg -- --test-threads=1
//! ```

use std::time::Duration;

use onecopy_tests::shell::{parse_sum, pattern_crc32};
use onecopy_tests::{with_cluster, Cluster, ClusterOpts, Error, Result};
use userland::stats::keys::dir;

const CTL: &str = env!("CARGO_BIN_EXE_onecopy-ctl");

fn opts(name: &str) -> ClusterOpts {
    ClusterOpts::new(name)
        .ctl(CTL)
        .cmd_timeout(Duration::from_secs(60))
        .boot_timeout(Duration::from_secs(60))
        .mode("strong")
        .append_extra("delegation=1")
}

fn fail(msg: impl Into<String>) -> Error {
    Error::Usage(msg.into())
}

/// `sum PATH` on `node`: `(crc, size)`.
fn sum(c: &mut Cluster, node: u8, path: &str) -> Result<(u32, u64)> {
    let out = c.exec_ok(node, &format!("sum {path}"))?;
    parse_sum(&out.text()).ok_or_else(|| fail(format!("n{node}: no crc: {out:?}")))
}

/// The directory's delegation counters (`dir stats`): granted, recalled,
/// returned, pages.
fn delegations(c: &mut Cluster, node: u8) -> Result<[u64; 4]> {
    let s = c.stats(node, "dir stats")?;
    let line = s.get(dir::DELEGATIONS).to_string();
    let field = |name: &str| -> Result<u64> {
        line.split(", ")
            .find_map(|f| f.strip_prefix(name)?.trim().parse().ok())
            .ok_or_else(|| fail(format!("no {name:?} in {line:?}")))
    };
    Ok([
        field("granted ")?,
        field("recalled ")?,
        field("returned ")?,
        field("pages ")?,
    ])
}

#[test]
fn a_reader_during_the_holders_writes_recalls_and_sees_every_byte() {
    with_cluster(opts("deleg"), |c| {
        let size = 4u64 << 20;
        for round in 0..3 {
            let path = format!("/d{round}");
            c.exec_ok(1, &format!("write {path} x"))?;
            // Node 1 rewrites the file whole while node 2 reads it: what
            // node 2 reads is a prefix of the pattern, whatever its size.
            let fill = format!("fill {path} 4m");
            let read = format!("sum {path}");
            let outs = c.exec_together(&[(1, fill.as_str()), (2, read.as_str())])?;
            let got = parse_sum(&outs[1].text())
                .ok_or_else(|| fail(format!("n2: no crc: {:?}", outs[1])))?;
            if got != (pattern_crc32(got.1), got.1) && got.1 > 2 {
                return Err(fail(format!(
                    "round {round}: n2 read {got:?} during the write"
                )));
            }
            // After the write, node 2 reads it whole: a range still held
            // by node 1 is recalled now.
            let want = (pattern_crc32(size), size);
            assert_eq!(sum(c, 2, &path)?, want, "round {round}: n2");
            assert_eq!(sum(c, 1, &path)?, want, "round {round}: n1");
        }
        let [granted, recalled, returned, pages] = delegations(c, 1)?;
        assert!(granted >= 2, "delegations granted: {granted}");
        assert!(recalled >= 1, "recalls: {recalled}");
        assert!(
            returned >= recalled && pages > 0,
            "returned {returned}, pages {pages}"
        );
        // Written back and read again from the disk.
        c.exec_ok(1, "sync")?;
        c.exec_ok(2, "cache drop")?;
        c.exec_ok(1, "cache drop")?;
        assert_eq!(sum(c, 2, "/d2")?, (pattern_crc32(size), size));
        Ok(())
    });
}
