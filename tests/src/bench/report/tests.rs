use super::headline::*;
use super::*;
use crate::bench::model::{figure_id, GROUP_FIO, GROUP_INV};

fn fig(mode: &str, w: &str, e: &str, sc: &str, v: Status, lower: bool) -> Figure {
    let mut f = Figure::new(GROUP_FIO, mode, w, Some(e), sc, "m", "u", lower);
    f.status = v;
    f
}

#[test]
fn ratios() {
    let figs = vec![
        fig(
            "strong",
            "read-lat",
            "libaio",
            "CM-R",
            Status::Ok(10.0),
            true,
        ),
        fig(
            "private",
            "read-lat",
            "libaio",
            "CM-R",
            Status::Ok(30.0),
            true,
        ),
        fig(
            "strong",
            "read-bw",
            "libaio",
            "CH-R",
            Status::Ok(400.0),
            false,
        ),
        fig(
            "private",
            "read-bw",
            "libaio",
            "CH-R",
            Status::Ok(100.0),
            false,
        ),
        fig("strong", "write-lat", "mmap", "CH-R", Status::Ok(5.0), true),
        fig(
            "private",
            "write-lat",
            "mmap",
            "CH-R",
            Status::NotApplicable("not supported".into()),
            true,
        ),
    ];
    assert_eq!(ratio_vs_private(&figs, &figs[0]), Some(3.0));
    assert_eq!(ratio_vs_private(&figs, &figs[1]), None);
    assert_eq!(ratio_vs_private(&figs, &figs[2]), Some(4.0));
    assert_eq!(ratio_vs_private(&figs, &figs[4]), None);
    assert_eq!(better_ratio(0.0, 1.0, true), None);
    let h = headlines(&figs, &["strong".into(), "private".into()]);
    assert!(h.iter().all(|h| h.mode == "strong"));
    assert_eq!(h[0].ratio, Some(3.0));
    assert_eq!(h[2].ratio, Some(4.0));
    let mmap = h.iter().find(|h| h.key == "mmap-write-chr").unwrap();
    assert_eq!(mmap.ratio, None);
    assert!(
        mmap.detail.contains("n/a (not supported in this mode)"),
        "{}",
        mmap.detail
    );
    assert!(h
        .iter()
        .any(|h| h.key == "invalidation" && h.ratio.is_none()));
    assert_eq!(
        figure_id(GROUP_FIO, "strong", "read-lat", Some("libaio"), "CM-R"),
        figs[0].id
    );
}

#[test]
fn net_baseline() {
    let modes: Vec<String> = ["strong", "relaxed", "private", "net"]
        .iter()
        .map(|m| m.to_string())
        .collect();
    let mut figs = Vec::new();
    // read-lat CM-R (us), read-bw CH-R / CM-R (MiB/s), read-iops.
    for (m, lat, bw_chr, bw_cmr, iops_chr, iops_cmr) in [
        ("strong", 10.0, 400.0, 300.0, 4000.0, 3000.0),
        ("relaxed", 20.0, 200.0, 150.0, 2000.0, 1500.0),
        ("private", 30.0, 100.0, 8.0, 1000.0, 50.0),
        ("net", 100.0, 100.0, 2.0, 1000.0, 10.0),
    ] {
        figs.push(fig(m, "read-lat", "libaio", "CM-R", Status::Ok(lat), true));
        figs.push(fig(
            m,
            "read-bw",
            "libaio",
            "CH-R",
            Status::Ok(bw_chr),
            false,
        ));
        figs.push(fig(
            m,
            "read-bw",
            "libaio",
            "CM-R",
            Status::Ok(bw_cmr),
            false,
        ));
        figs.push(fig(
            m,
            "read-iops",
            "libaio",
            "CH-R",
            Status::Ok(iops_chr),
            false,
        ));
        figs.push(fig(
            m,
            "read-iops",
            "libaio",
            "CM-R",
            Status::Ok(iops_cmr),
            false,
        ));
        let mut r = Figure::new(
            GROUP_DIR,
            m,
            "bench rpc",
            None,
            RPC_SCENARIO,
            "m",
            "ns",
            true,
        );
        r.status = Status::Ok(if m == "net" { 500_000.0 } else { 2000.0 });
        figs.push(r);
    }
    for m in ["private", "net"] {
        figs.push(fig(
            m,
            "write-lat",
            "mmap",
            "CH-R",
            Status::NotApplicable("fio: ioengine=mmap not supported in this mode".into()),
            true,
        ));
    }
    // Every figure of net has its ratio vs private, and strong vs net.
    let net_lat = &figs[18];
    assert_eq!(
        (net_lat.mode.as_str(), net_lat.workload.as_str()),
        ("net", "read-lat")
    );
    assert_eq!(ratio_vs_private(&figs, net_lat), Some(0.3));
    assert_eq!(ratio_vs(&figs, net_lat, "net"), None);
    assert_eq!(ratio_vs(&figs, &figs[0], "net"), Some(10.0));
    assert_eq!(ratio_vs(&figs, &figs[2], "net"), Some(150.0));
    assert_eq!(ratio_bases(&modes), vec!["private", "net"]);
    assert_eq!(ratio_bases(&["strong".to_string()]), vec!["private"]);
    assert_eq!(
        ratio_cell(&figs, Some(net_lat), "net"),
        "1 (baseline)".to_string()
    );
    assert_eq!(
        ratio_cells(&figs, Some(net_lat), &["private", "net"]),
        " 0.30x | 1 (baseline) |"
    );

    for (m, sc, v) in [
        ("strong", "1 sharer", 1000.0),
        ("strong", "0 sharers", 10.0),
        ("private", "0 sharers", 4.0),
        ("net", "0 sharers", 2.0),
    ] {
        let mut f = Figure::new(GROUP_INV, m, "bench inv", None, sc, "m", "us", true);
        f.status = Status::Ok(v);
        figs.push(f);
    }
    let h = headlines(&figs, &modes);
    let get = |mode: &str, base: &str, row: &str| {
        h.iter()
            .find(|x| x.mode == mode && x.baseline == base && x.row == row)
            .unwrap_or_else(|| panic!("{mode} vs {base}: {row}"))
    };
    assert_eq!(get("strong", "private", ROW_CMR_LAT).ratio, Some(3.0));
    assert_eq!(get("strong", "net", ROW_CMR_LAT).ratio, Some(10.0));
    assert_eq!(get("strong", "net", ROW_BW_CHR).ratio, Some(4.0));
    assert_eq!(get("strong", "net", ROW_BW_CMR).ratio, Some(200.0));
    assert_eq!(get("strong", "net", ROW_IOPS_CMR).ratio, Some(400.0));
    assert_eq!(get("relaxed", "net", ROW_IOPS_CHR).ratio, Some(2.0));
    assert_eq!(get("strong", "net", ROW_RPC).ratio, Some(250.0));
    assert_eq!(get("net", "private", ROW_RPC).ratio, Some(0.004));
    assert_eq!(get("net", "private", ROW_BW_CMR).ratio, Some(12.5));
    assert_eq!(get("strong", "private", ROW_INV_BASE).ratio, Some(250.0));
    assert_eq!(get("strong", "net", ROW_INV_BASE).ratio, Some(500.0));
    assert_eq!(get("strong", "", ROW_INV1).ratio, Some(100.0));
    assert_eq!(get("relaxed", "net", ROW_INV_BASE).ratio, None);
    assert_eq!(headline_dpc(get("strong", "net", ROW_CMR_LAT)), Some(0));
    assert_eq!(headline_dpc(get("strong", "net", ROW_BW_CMR)), None);
    assert_eq!(headline_dpc(get("strong", "", ROW_CM_CMR)), None);
    assert_eq!(
        headline_dpc(get("strong", "private", ROW_INV_BASE)),
        Some(4)
    );
    assert_eq!(headline_dpc(get("net", "private", ROW_CMR_LAT)), None);
    let mmap = get("strong", "net", ROW_MMAP);
    assert_eq!(mmap.ratio, None);
    assert!(mmap.detail.contains("not supported"), "{}", mmap.detail);
    // net is a baseline: no within-mode rows, no invalidation, no mmap,
    // never compared with itself; private is never the compared mode.
    assert!(h
        .iter()
        .all(|x| x.mode != "private" && x.mode != x.baseline));
    assert!(!h
        .iter()
        .any(|x| x.mode == "net" && (x.baseline != "private" || x.key == "invalidation")));
    assert_eq!(
        headline_columns(&h),
        vec![
            ("strong".to_string(), "private".to_string()),
            ("strong".into(), "net".into()),
            ("relaxed".into(), "private".into()),
            ("relaxed".into(), "net".into()),
            ("net".into(), "private".into()),
        ]
    );
    let t = headline_table(&h);
    assert!(t.starts_with(
        "| comparison | strong vs private | strong vs net | relaxed vs private | relaxed vs net | net vs private | DPC published (vs Virtiofs) |"
    ), "{t}");
    let row = t.lines().find(|l| l.contains("CM-R read latency")).unwrap();
    assert_eq!(
        row,
        format!("| {ROW_CMR_LAT} | 3.00x | 10.0x | 1.50x | 5.00x | 0.30x | 2.60x |")
    );
    // A within-mode row shows in both of the mode's columns, "-" for net.
    let row = t
        .lines()
        .find(|l| l.starts_with("| same, CM / CM-R"))
        .unwrap();
    assert_eq!(row.matches("n/a").count(), 4, "{row}");
    assert!(row.ends_with("| - | - |"), "{row}");
    let row = t
        .lines()
        .find(|l| l.contains("this with 1 sharer"))
        .unwrap();
    assert!(
        row.ends_with("| 250x | 500x | n/a | n/a | - | 9.06x |"),
        "{row}"
    );
    let rpc = rpc_sentence(&figs, &modes);
    assert!(rpc.contains("over TCP (net) 500000 ns"), "{rpc}");
    assert!(rpc.contains("**250x**"), "{rpc}");
    assert_eq!(
        rpc_sentence(&[], &modes),
        "No `bench rpc` figure in this run."
    );
}

#[test]
fn answers() {
    assert_eq!(
        node_answer("n2: fio --x: error: fio: ioengine=mmap not supported in this mode"),
        "error: fio: ioengine=mmap not supported in this mode"
    );
    assert_eq!(node_answer("boot failed"), "boot failed");
}

#[test]
fn dpc_refs_are_labelled() {
    for (k, d, v) in DPC_REFS {
        assert!(d.contains("DPC"), "{k}");
        assert!(*v > 1.0);
    }
}
