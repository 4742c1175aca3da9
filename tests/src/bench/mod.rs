//! `onecopy-bench`: the DPC microbenchmarks (DPC §6.2, Fig. 6-9, §6.2.5)
//! on real clusters, with results.json, report.md and PNG bar charts.
//!
//! * [`opts`]: command line and the (scaled) parameters of a run.
//! * [`model`]: what is measured: workloads, figures, their status.
//! * [`parse`]: reading the nodes' outputs (`RESULT {json}`, `bench ...`).
//! * [`runner`]: boots one cluster at a time and drives the scenarios.
//! * [`report`]: results.json, ratios vs private, DPC ratios.
//! * [`reportmd`]: report.md, one function per section.
//! * [`plot`]: grouped bar charts (scenario x mode) in PNG.
//! * [`apps`], [`policies`]: the application study (`--apps`) and the
//!   eviction-policy section (`--policies`), each its own run.
//! * [`interrupt`]: SIGINT / SIGTERM stop every cluster, the report is
//!   written marked partial.
//!
//! Nothing in a report is hard-coded except the DPC reference ratios
//! ([`report::DPC_REFS`]), which are labelled as such. A measurement that
//! failed is a [`model::Status::Failed`] with its error text and is shown
//! as "n/a", never as 0.

pub mod apps;
pub mod charts;
pub mod interrupt;
pub mod model;
pub mod opts;
pub mod parse;
pub mod plot;
pub mod policies;
pub mod provenance;
pub mod render;
pub mod report;
pub mod reportmd;
pub mod runner;

/// Writes a run's `results.json` (pretty) and `report.md` into `out`;
/// false (each failure said on stderr) if either could not be written.
pub fn write_outputs(out: &std::path::Path, json: &serde_json::Value, md: String) -> bool {
    let mut ok = true;
    for (name, text) in [
        (
            "results.json",
            serde_json::to_string_pretty(json).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}")),
        ),
        ("report.md", md),
    ] {
        if let Err(e) = std::fs::write(out.join(name), text) {
            eprintln!("onecopy-bench: error: writing {name}: {e}");
            ok = false;
        }
    }
    ok
}

/// Writes a run's `params.json` (the command line and the parameters);
/// false (said on stderr) if it could not be written.
pub fn write_params(out: &std::path::Path, params: &serde_json::Value) -> bool {
    let text =
        serde_json::to_string_pretty(params).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    match std::fs::write(out.join("params.json"), text) {
        Ok(()) => true,
        Err(e) => {
            eprintln!("onecopy-bench: error: writing params.json: {e}");
            false
        }
    }
}

/// `md` with the line that marks a report partial after its title:
/// "**partial: interrupted at STEP** (SIGNAL)".
pub fn partial_md(md: &str, step: &str, signal: &str) -> String {
    let line = format!(
        "**partial: interrupted at {step}** ({signal}): the steps after it were not run.\n\n"
    );
    match md.find("\n\n") {
        Some(i) if md.starts_with('#') => format!("{}{line}{}", &md[..i + 2], &md[i + 2..]),
        _ => format!("{line}{md}"),
    }
}

/// Formats a duration in seconds as `1m23s` / `45.6s`.
pub fn fmt_secs(s: f64) -> String {
    if s >= 60.0 {
        let m = (s / 60.0).floor();
        format!("{}m{:02.0}s", m as u64, s - m * 60.0)
    } else {
        format!("{s:.1}s")
    }
}

/// UTC calendar date and time `(y, m, d, hh, mm, ss)` of a Unix time.
pub fn utc_parts(unix_secs: u64) -> (i64, u32, u32, u32, u32, u32) {
    let days = (unix_secs / 86_400) as i64;
    let rem = unix_secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (
        y,
        m,
        d,
        (rem / 3600) as u32,
        ((rem / 60) % 60) as u32,
        (rem % 60) as u32,
    )
}

/// `YYYY-MM-DD-HHMMSS` (UTC) of a Unix time: the default results folder.
pub fn stamp(unix_secs: u64) -> String {
    let (y, mo, d, h, mi, s) = utc_parts(unix_secs);
    format!("{y:04}-{mo:02}-{d:02}-{h:02}{mi:02}{s:02}")
}

/// `YYYY-MM-DD HH:MM:SS UTC` of a Unix time.
pub fn iso(unix_secs: u64) -> String {
    let (y, mo, d, h, mi, s) = utc_parts(unix_secs);
    format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02} UTC")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(stamp(0), "1970-01-01-000000");
        assert_eq!(iso(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(stamp(1_795_000_000), "2026-11-18-110640");
        assert_eq!(iso(4_102_444_799), "2099-12-31 23:59:59 UTC");
    }

    #[test]
    fn partial_line_follows_the_title() {
        assert_eq!(
            partial_md("# T\n\nbody\n", "kv, mode strong, N=2", "SIGTERM"),
            "# T\n\n**partial: interrupted at kv, mode strong, N=2** (SIGTERM): the steps after \
             it were not run.\n\nbody\n"
        );
        assert!(partial_md("x", "s", "SIGINT").starts_with("**partial: interrupted at s**"));
    }

    #[test]
    fn seconds() {
        assert_eq!(fmt_secs(3.21), "3.2s");
        assert_eq!(fmt_secs(125.0), "2m05s");
    }
}
