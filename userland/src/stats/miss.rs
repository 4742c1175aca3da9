//! `bench miss`: one cache miss split into phases, from the node's and the
//! directory's own clocks (the two are not comparable, so only durations
//! measured on one clock are combined).
//!
//! The node times each miss's whole read call (`total`) and, inside it,
//! its round trips to the directory and its own installing of the answers
//! (`fill/map`); the directory sums its service time per phase (lookup,
//! disk read, fill, reply; [`MissStats`]). Per miss, on average:
//!
//! * node: call + copy out = total - round trips - fill/map (the system
//!   call, building the request, copying the page out to the caller);
//! * transport = round trips - the directory's service time (publishing on
//!   the rings, doorbells and wakeups, the directory's polling delay);
//! * directory: lookup, disk read, fill, reply (its own means);
//! * node: fill/map.
//!
//! They add up to the mean total (up to rounding).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use crate::fio::json::{self, JsonWriter};
use fabric::proto::MissStats;

/// What one `bench miss` run measured (deltas over the timed misses).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MissRun {
    /// The cache mode.
    pub mode: String,
    /// How each page was read (`read`, `batch`: `bench miss`'s path).
    pub path: &'static str,
    /// Misses the node timed.
    pub misses: u64,
    /// Sum of their read calls, node clock.
    pub total_ns: u64,
    /// Median of their read calls.
    pub median_ns: u64,
    /// Time in round trips to the directory during them, node clock.
    pub round_trip_ns: u64,
    /// Time installing the answers, node clock.
    pub node_fill_ns: u64,
    /// The directory's service times of this mode's kind of miss.
    pub dir: MissStats,
}

/// One phase: its name, its JSON key and its mean per miss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Phase {
    /// Printed name.
    pub name: &'static str,
    /// Key in the `RESULT` json.
    pub key: &'static str,
    /// Mean per miss, in nanoseconds.
    pub mean_ns: u64,
}

/// The phases of a run, in the order a miss goes through them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Breakdown {
    /// Node call, transport, directory lookup/disk/fill/reply, node fill.
    pub phases: Vec<Phase>,
    /// Mean total per miss (the phases' sum, up to rounding).
    pub total_ns: u64,
    /// The directory timed some misses: its phases are measured (else they
    /// are 0 and transport holds the whole round trip).
    pub dir_timed: bool,
}

/// Split a run into phases; an error if there is nothing to split.
pub fn breakdown(run: &MissRun) -> Result<Breakdown, &'static str> {
    if run.misses == 0 {
        return Err("no misses timed");
    }
    let n = run.misses;
    let total = run.total_ns / n;
    let rt = run.round_trip_ns / n;
    let fill = run.node_fill_ns / n;
    let d = &run.dir;
    let (lookup, disk, dfill, reply) = match d.count {
        0 => (0, 0, 0, 0),
        k => (
            d.lookup_ns / k,
            d.disk_ns / k,
            d.fill_ns / k,
            d.reply_ns / k,
        ),
    };
    let service = lookup + disk + dfill + reply;
    let phase = |name, key, mean_ns| Phase { name, key, mean_ns };
    Ok(Breakdown {
        phases: alloc::vec![
            phase(
                "node: call + copy out",
                "node_call",
                total.saturating_sub(rt).saturating_sub(fill)
            ),
            phase("transport", "transport", rt.saturating_sub(service)),
            phase("directory: lookup", "dir_lookup", lookup),
            phase("directory: disk read", "dir_disk", disk),
            phase("directory: fill", "dir_fill", dfill),
            phase("directory: reply", "dir_reply", reply),
            phase("node: fill/map", "node_fill", fill),
        ],
        total_ns: total,
        dir_timed: d.count > 0,
    })
}

/// `12.34` for nanoseconds as microseconds with two decimals.
fn us(ns: u64) -> String {
    format!("{}.{:02}", ns / 1000, (ns % 1000) / 10)
}

/// `12.3%` of `total` (0 for an empty total).
fn share(part: u64, total: u64) -> String {
    let pm = (part as u128 * 1000)
        .checked_div(total as u128)
        .unwrap_or(0);
    format!("{}.{}%", pm / 10, pm % 10)
}

/// A `dir stats` value: how many misses of a kind the directory timed and
/// its mean time per phase, `n=64 lookup=1.00 disk=80.00 fill=3.00
/// reply=0.50 us`.
pub fn service_line(m: &MissStats) -> String {
    let mean = |ns: u64| us(ns.checked_div(m.count).unwrap_or(0));
    format!(
        "n={} lookup={} disk={} fill={} reply={} us",
        m.count,
        mean(m.lookup_ns),
        mean(m.disk_ns),
        mean(m.fill_ns),
        mean(m.reply_ns)
    )
}

/// What `bench miss` prints: a header, one line per phase (mean us and
/// share of the total), the total, and the `RESULT {json}` line.
pub fn render(run: &MissRun, b: &Breakdown) -> String {
    let mut out = format!(
        "bench miss: {} cold 4 KiB misses, mode {}, path {}, directory timed {} of them{}\n",
        run.misses,
        run.mode,
        run.path,
        run.dir.count,
        if b.dir_timed {
            ""
        } else {
            " (its phases are not measured here: transport holds the whole round trip)"
        }
    );
    out.push_str(&format!(
        "{:<24} {:>10} {:>7}\n",
        "phase", "mean us", "share"
    ));
    for p in &b.phases {
        out.push_str(&format!(
            "{:<24} {:>10} {:>7}\n",
            p.name,
            us(p.mean_ns),
            share(p.mean_ns, b.total_ns)
        ));
    }
    out.push_str(&format!(
        "{:<24} {:>10} {:>7}  (median {} us)\n",
        "total",
        us(b.total_ns),
        "100.0%",
        us(run.median_ns)
    ));
    let mut w = JsonWriter::new();
    w.begin(None)
        .string(Some("bench"), "miss")
        .string(Some("mode"), &run.mode)
        .uint("misses", run.misses)
        .uint("dir_timed", run.dir.count)
        .uint("total_mean_ns", b.total_ns)
        .uint("total_median_ns", run.median_ns)
        .string(Some("path"), run.path)
        .begin(Some("phases_ns"));
    for p in &b.phases {
        w.uint(p.key, p.mean_ns);
    }
    w.end().begin(Some("share"));
    for p in &b.phases {
        let pm = (p.mean_ns as u128 * 1000)
            .checked_div(b.total_ns as u128)
            .unwrap_or(0) as u64;
        w.number(p.key, &json::milli(pm));
    }
    w.end().end();
    out.push_str("RESULT ");
    out.push_str(&w.finish());
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run() -> MissRun {
        MissRun {
            mode: String::from("strong"),
            path: "read",
            misses: 4,
            total_ns: 4 * 100_000,
            median_ns: 99_000,
            round_trip_ns: 4 * 90_000,
            node_fill_ns: 4 * 2_000,
            dir: MissStats {
                count: 4,
                lookup_ns: 4 * 1_000,
                disk_ns: 4 * 80_000,
                fill_ns: 4 * 3_000,
                reply_ns: 4 * 500,
            },
        }
    }

    fn mean(b: &Breakdown, key: &str) -> u64 {
        b.phases.iter().find(|p| p.key == key).unwrap().mean_ns
    }

    #[test]
    fn phases_add_up_to_the_total() {
        let b = breakdown(&run()).unwrap();
        assert_eq!(b.total_ns, 100_000);
        assert_eq!(mean(&b, "node_call"), 8_000);
        assert_eq!(mean(&b, "transport"), 90_000 - 84_500);
        assert_eq!(mean(&b, "dir_lookup"), 1_000);
        assert_eq!(mean(&b, "dir_disk"), 80_000);
        assert_eq!(mean(&b, "dir_fill"), 3_000);
        assert_eq!(mean(&b, "dir_reply"), 500);
        assert_eq!(mean(&b, "node_fill"), 2_000);
        let sum: u64 = b.phases.iter().map(|p| p.mean_ns).sum();
        assert_eq!(sum, b.total_ns);
        assert!(b.dir_timed);
    }

    #[test]
    fn the_directory_means_are_over_the_misses_it_timed() {
        // It timed 2 of 4 (the others were not fills): its means are per
        // timed miss, the node's per node miss.
        let mut r = run();
        r.dir = MissStats {
            count: 2,
            lookup_ns: 2_000,
            disk_ns: 100_000,
            fill_ns: 0,
            reply_ns: 0,
        };
        let b = breakdown(&r).unwrap();
        assert_eq!(mean(&b, "dir_disk"), 50_000);
        assert_eq!(mean(&b, "transport"), 90_000 - 51_000);
    }

    #[test]
    fn without_directory_timings_transport_is_the_whole_round_trip() {
        let mut r = run();
        r.dir = MissStats::default();
        let b = breakdown(&r).unwrap();
        assert!(!b.dir_timed);
        assert_eq!(mean(&b, "transport"), 90_000);
        assert!(render(&r, &b).contains("its phases are not measured here"));
    }

    #[test]
    fn inconsistent_clocks_give_zeros_not_wraps() {
        // A directory service longer than the node's round trip (a clock
        // that drifted) and node phases longer than the total.
        let mut r = run();
        r.dir.disk_ns = 4 * 200_000;
        r.round_trip_ns = 4 * 150_000;
        let b = breakdown(&r).unwrap();
        assert_eq!(mean(&b, "transport"), 0);
        assert_eq!(mean(&b, "node_call"), 0);
    }

    #[test]
    fn dir_stats_line_shows_means_per_timed_miss() {
        assert_eq!(
            service_line(&run().dir),
            "n=4 lookup=1.00 disk=80.00 fill=3.00 reply=0.50 us"
        );
        assert_eq!(
            service_line(&MissStats::default()),
            "n=0 lookup=0.00 disk=0.00 fill=0.00 reply=0.00 us"
        );
    }

    #[test]
    fn no_misses_is_an_error() {
        let r = MissRun::default();
        assert!(breakdown(&r).is_err());
    }

    #[test]
    fn render_prints_one_line_per_phase_and_the_result_json() {
        let r = run();
        let b = breakdown(&r).unwrap();
        let out = render(&r, &b);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 1 + 1 + 7 + 1 + 1, "{out}");
        assert!(lines[0].starts_with("bench miss: 4 cold 4 KiB misses, mode strong, path read"));
        assert!(lines[2].starts_with("node: call + copy out"));
        assert!(
            lines[2].contains("8.00") && lines[2].ends_with("8.0%"),
            "{}",
            lines[2]
        );
        assert!(lines[5].starts_with("directory: disk read") && lines[5].ends_with("80.0%"));
        assert!(lines[9].starts_with("total") && lines[9].contains("100.00"));
        let json = lines[10].strip_prefix("RESULT ").unwrap();
        assert!(json.starts_with("{\"bench\":\"miss\",\"mode\":\"strong\",\"misses\":4,"));
        assert!(json.contains("\"phases_ns\":{\"node_call\":8000,\"transport\":5500,"));
        assert!(json.contains("\"dir_disk\":0.800"), "{json}");
    }
}
