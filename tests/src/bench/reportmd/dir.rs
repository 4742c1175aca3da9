//! report.md's directory sections: round trips, `bench dir`, and the
//! page directory's code on the host next to it.

use super::*;

/// Round trips and `bench dir`.
pub(super) fn directory_section(s: &mut String, r: &Runner, plots: &[String]) {
    let figs = &r.figures;
    let p = &r.params;
    let bases = ratio_bases(&r.opts.modes);
    let _ = writeln!(s, "\n## Directory microbenchmarks\n");
    let (host, host_s) = value_of(
        figs,
        &crate::bench::model::figure_id(GROUP_HOST, "host", "ping-pong", None, "median"),
    );
    let _ = writeln!(
        s,
        "Host ping-pong (two host threads bouncing a cache line, `onecopy-pingpong {}` x{}, median of medians): **{host_s}**.\n",
        p.pingpong_rounds, p.pingpong_repeats
    );
    if plots
        .iter()
        .any(|x| x == crate::bench::charts::ROUND_TRIPS_PNG)
    {
        let _ = writeln!(
            s,
            "![round trips]({})\n\n(groups: bench ring, bench rpc, bench read CM-R, in us; bars: {} in that order)\n",
            crate::bench::charts::ROUND_TRIPS_PNG,
            r.opts.modes.join(", ")
        );
    }
    let _ = writeln!(
        s,
        "| benchmark | scenario | mode | value | unit |{} vs host ping-pong | note |\n| --- | --- | --- | --- | --- |{} --- | --- |",
        ratio_heads(&bases),
        " --- |".repeat(bases.len())
    );
    let mut rows: Vec<(&str, String)> = vec![
        ("bench ring", "empty round trip".to_string()),
        ("bench rpc", RPC_SCENARIO.to_string()),
        ("bench read", "CM-R".to_string()),
        ("bench read", "CH-R".to_string()),
        ("bench read", "local hit".to_string()),
        ("bench read", "CM".to_string()),
    ];
    rows.extend(
        crate::bench::model::DIR_BATCHES
            .iter()
            .map(|&b| ("bench dir", crate::bench::model::dir_batch_scenario(b))),
    );
    for (b, sc) in rows {
        let sc = sc.as_str();
        for mode in &r.opts.modes {
            let f = find(
                figs,
                &crate::bench::model::figure_id(GROUP_DIR, mode, b, None, sc),
            );
            let vs_host = match (f.and_then(Figure::value), host, b) {
                (Some(v), Some(h), "bench ring" | "bench rpc") if h > 0.0 => fmt_ratio(v / h),
                _ => String::new(),
            };
            // bench rpc: which transport it went over.
            let sc_text = match f
                .and_then(|f| f.params.get("transport"))
                .and_then(Value::as_str)
            {
                Some(t) if b == "bench rpc" && !t.is_empty() => format!("{sc} over {t}"),
                _ => sc.to_string(),
            };
            let _ = writeln!(
                s,
                "| {b} | {sc_text} | {mode} | {} | {} |{} {vs_host} | {} |",
                cell(f),
                f.map(|f| f.unit.as_str()).unwrap_or(""),
                ratio_cells(figs, f, &bases),
                note_cell(f)
            );
        }
    }
    let _ = writeln!(
        s,
        "\n`bench ring`: {} empty requests through the control rings, x{} (median of the medians). \
         `bench rpc`: {} empty requests to the file server over the mode's file transport, x{} \
         (median of the medians): the shared-memory rings in strong, relaxed and private, TCP/IP \
         (smoltcp on virtio-net, a unix-socket link between the two QEMUs) in net. \
         `bench read` CM-R is the one-page lookup (one directory round trip, then a mapping; in \
         private and net a fetch of the page from the file server); \
         `bench dir` maps and drops every page of a file another node owns, {} rounds, with the \
         page requests published in batches of 1 to 64 (the data path uses 32). \
         `bench ring` runs the same code in every mode, so its \"ratio vs private\" shows the \
         run-to-run noise of this machine.",
        p.ring_rounds, p.ring_repeats, p.rpc_rounds, p.rpc_repeats, p.dir_rounds
    );
    let _ = writeln!(s, "\n{}", rpc_sentence(figs, &r.opts.modes));
}

/// The page directory's code on the host next to `bench dir` in the
/// guest, per batch size, and the directory's bytes per cached page.
pub(super) fn host_dir_section(s: &mut String, r: &Runner) {
    let figs = &r.figures;
    let host = |sc: &str| {
        find(
            figs,
            &crate::bench::model::figure_id(GROUP_HOST, "host", HOST_DIR_BENCH, None, sc),
        )
    };
    let _ = writeln!(s, "\n## Page directory: host vs in-guest\n");
    let any = host_dir_figures().first().and_then(|(sc, _)| host(sc));
    let param = |k: &str| {
        any.and_then(|f| f.params.get(k))
            .map(|v| v.to_string().trim_matches('"').to_string())
            .unwrap_or_else(|| "n/a".into())
    };
    let _ = writeln!(
        s,
        "`pagedir-bench` drives the same `PageDir` code the directory runs, by plain calls on \
         the host ({} build, {} pages of one file, {} rounds, a 4-node layout; no rings, no \
         guest): the gap to `bench dir` is what the rings, the guest and the node's side cost. \
         Host page-directory state measured there: {} bytes per cached page.\n",
        param("profile"),
        param("pages"),
        param("rounds"),
        param("bytes_per_entry")
    );
    let _ = writeln!(s, "| operation | host ops/s |\n| --- | --- |");
    for (sc, _) in host_dir_figures()
        .iter()
        .filter(|(sc, _)| !sc.starts_with("batch"))
    {
        let _ = writeln!(s, "| {sc} | {} |", cell(host(sc)));
    }
    let modes: Vec<&String> = r
        .opts
        .modes
        .iter()
        .filter(|m| m.as_str() == "strong" || m.as_str() == "relaxed")
        .collect();
    let _ = writeln!(
        s,
        "\n`bench dir` (map + drop of pages another node owns, in batches) against the same \
         loop on the host; ratio = host / in-guest.\n"
    );
    let mut head = String::from("| batch | host ops/s |");
    let mut rule = String::from("| --- | --- |");
    for m in &modes {
        let _ = write!(head, " in-guest {m} | host / {m} |");
        rule.push_str(" --- | --- |");
    }
    let _ = writeln!(s, "{head}\n{rule}");
    for b in crate::bench::model::DIR_BATCHES {
        let sc = crate::bench::model::dir_batch_scenario(b);
        let h = host(&sc);
        let mut row = format!("| {b} | {} |", cell(h));
        for m in &modes {
            let g = find(
                figs,
                &crate::bench::model::figure_id(GROUP_DIR, m, "bench dir", None, &sc),
            );
            let ratio = match (h.and_then(Figure::value), g.and_then(Figure::value)) {
                (Some(h), Some(g)) if g > 0.0 => fmt_ratio(h / g),
                _ => "n/a".into(),
            };
            let _ = write!(row, " {} | {ratio} |", cell(g));
        }
        let _ = writeln!(s, "{row}");
    }
    let guest = dir_stats_bytes(r);
    let _ = writeln!(
        s,
        "\n`dir stats` in the guest reports {} bytes per entry (the layout for up to 32 nodes, \
         files cached whole).",
        guest.unwrap_or_else(|| "n/a".into())
    );
}

/// The `bytes per entry` line of the first `dir stats` the run saved.
pub fn dir_stats_bytes(r: &Runner) -> Option<String> {
    fn scan(v: &Value) -> Option<String> {
        match v {
            Value::String(l) => {
                let rest = l.trim().strip_prefix("bytes per entry")?;
                Some(rest.trim().to_string())
            }
            Value::Array(a) => a.iter().find_map(scan),
            Value::Object(o) => o.values().find_map(scan),
            _ => None,
        }
    }
    r.clusters.iter().find_map(scan)
}
