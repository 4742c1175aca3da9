use super::*;

fn p(args: &[&str]) -> Result<Parsed, String> {
    parse_args(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
}

#[test]
fn defaults_and_flags() {
    assert_eq!(p(&[]), Ok(Parsed::Run(Box::default())));
    assert_eq!(p(&["--help"]), Ok(Parsed::Help));
    let Ok(Parsed::Run(o)) = p(&[
        "--quick",
        "--out",
        "/tmp/x",
        "--modes=private,strong,private",
        "--storage",
        "sata-ssd",
        "--cxl-latency-ns=300",
        "--keep-runs",
    ]) else {
        panic!("should parse")
    };
    assert!(o.quick && o.keep_runs);
    assert_eq!(o.out, Some(PathBuf::from("/tmp/x")));
    assert_eq!(o.modes, vec!["private", "strong"]);
    assert_eq!(o.storage, "sata-ssd");
    assert_eq!(o.cxl_latency_ns, 300);
    assert_eq!(o.baseline_writes, "back");
    assert!(o.doorbell);
    let Ok(Parsed::Run(o)) = p(&["--doorbell", "off"]) else {
        panic!("should parse")
    };
    assert!(!o.doorbell);
    let Ok(Parsed::Run(o)) = p(&["--baseline-writes", "through"]) else {
        panic!("should parse")
    };
    assert_eq!(o.baseline_writes, "through");
    assert_eq!(Params::from_opts(&o).baseline_writes, "through");
    assert_eq!(
        Params::from_opts(&o).to_json()["baseline_writes"],
        "through"
    );
}

#[test]
fn apps_flags() {
    let Ok(Parsed::Run(o)) = p(&["--apps", "--quick"]) else {
        panic!("should parse")
    };
    assert!(o.apps && o.quick && !o.storage_set);
    assert_eq!((o.apps_nodes.clone(), o.apps_runtime), (None, None));
    let Ok(Parsed::Run(o)) = p(&[
        "--apps",
        "--apps-nodes=4,1,2,2",
        "--apps-runtime",
        "7",
        "--apps-warmup",
        "0",
        "--storage",
        "sata-ssd",
    ]) else {
        panic!("should parse")
    };
    assert_eq!(o.apps_nodes, Some(vec![1, 2, 4]));
    assert_eq!(o.apps_runtime, Some(7));
    assert_eq!(o.apps_warmup, Some(0));
    assert!(o.storage_set);
    let Ok(Parsed::Run(o)) = p(&[
        "--apps",
        "--apps-list",
        "webserver, kv,webserver",
        "--policy=cluster",
    ]) else {
        panic!("should parse")
    };
    assert_eq!(o.apps_list, Some(vec!["webserver".into(), "kv".into()]));
    assert_eq!(o.policy.as_deref(), Some("cluster"));
    for bad in [
        &["--apps", "--apps-list", "kv,nginx"][..],
        &["--apps", "--apps-list", ""],
        &["--apps", "--policy", "LRU"],
        &["--policy", "lru"],
        &["--apps-list", "kv"],
        &["--apps", "--apps-nodes", "2,4"][..],
        &["--apps", "--apps-nodes", "0,1"],
        &["--apps", "--apps-nodes", "1,9"],
        &["--apps", "--apps-runtime", "0"],
        &["--apps-runtime", "5"],
        &["--apps", "--apps-warmup", "601"],
        &["--apps-warmup", "2"],
        &["--apps=1"],
    ] {
        assert!(p(bad).is_err(), "{bad:?} should be refused");
    }
}

#[test]
fn modes() {
    assert_eq!(
        BenchOpts::default().modes,
        vec!["strong", "relaxed", "private", "net"]
    );
    let Ok(Parsed::Run(o)) = p(&["--modes", "net, strong,net"]) else {
        panic!("should parse")
    };
    assert_eq!(o.modes, vec!["net", "strong"]);
    let e = p(&["--modes", "nfs"]).unwrap_err();
    assert!(e.contains("strong, relaxed, private, net"), "{e}");
    assert!(help_text().contains("strong,relaxed,private,net"));
    assert!(BASELINES.iter().all(|b| MODES.contains(b)));
    assert!(DEFAULT_MODES.iter().all(|m| MODES.contains(m)));
    let Ok(Parsed::Run(o)) = p(&["--modes", "daxfs,strong"]) else {
        panic!("daxfs by name")
    };
    assert_eq!(o.modes, vec!["daxfs", "strong"]);
}

#[test]
fn accel_of_every_cluster() {
    let d = BenchOpts::default();
    assert_eq!(
        (d.accel_for("strong"), d.accel_for("daxfs")),
        (None, Some("tcg-multi"))
    );
    let Ok(Parsed::Run(o)) = p(&["--modes", "strong,daxfs", "--accel", "tcg-multi"]) else {
        panic!("should parse")
    };
    assert_eq!(o.accel_for("strong"), Some("tcg-multi"));
    assert_eq!(o.accel_for("daxfs"), Some("tcg-multi"));
    let e = p(&["--modes", "strong,daxfs", "--accel", "tcg"]).unwrap_err();
    assert!(e.contains("--accel tcg cannot run daxfs"), "{e}");
    assert!(p(&["--accel", "tcg"]).is_ok(), "tcg without daxfs");
    assert!(p(&["--accel", "hvf"]).is_err());
}

#[test]
fn bad_arguments() {
    for bad in [
        &["--modes", "nfs"][..],
        &["--modes", "strong,"],
        &["--modes"],
        &["--storage", "floppy"],
        &["--cxl-latency-ns", "-1"],
        &["--cxl-latency-ns", "100001"],
        &["--out", ""],
        &["--baseline-writes", "always"],
        &["--baseline-writes"],
        &["--doorbell", "maybe"],
        &["--doorbell"],
        &["--quick=1"],
        &["extra"],
        &["--resume"],
        &["--resume", ""],
        &["--resume", "/tmp/x", "--out", "/tmp/y"],
        &["--resume", "/tmp/x", "--apps"],
        &["--policies", "--resume", "/tmp/x"],
    ] {
        assert!(p(bad).is_err(), "{bad:?} should be refused");
    }
}

#[test]
fn render_policies_and_errors() {
    assert_eq!(
        p(&["--render", "/r"]),
        Ok(Parsed::Render(PathBuf::from("/r")))
    );
    assert!(p(&["--render", "/r", "--quick"]).is_err());
    assert!(p(&["--quick", "--render=/r"]).is_err());
    let Ok(Parsed::Run(o)) = p(&["--policies", "--quick", "--out", "/o"]) else {
        panic!("should parse")
    };
    assert!(o.policies && o.quick);
    let e = p(&["--policies", "--jobs", "2"]).unwrap_err();
    assert!(
        e.contains("--policies takes only --quick and --out, not --jobs"),
        "{e}"
    );
    // Errors say what is wrong with which flag, and where to look.
    let e = p(&["--storage", "floppy"]).unwrap_err();
    assert!(e.contains("--storage") && e.contains("sata-ssd"), "{e}");
    let e = p(&["--apps-runtime", "5"]).unwrap_err();
    assert!(e.contains("--apps"), "{e}");
    let e = p(&["--job-size", "3k"]).unwrap_err();
    assert!(
        e.contains("--job-size") && e.contains("multiple of 4k"),
        "{e}"
    );
    assert!(e.contains("--help"), "{e}");
    // The last of a repeated flag wins.
    let Ok(Parsed::Run(o)) = p(&["--repeats", "2", "--repeats", "3"]) else {
        panic!("should parse")
    };
    assert_eq!(o.repeats, Some(3));
    let Ok(Parsed::Run(o)) = p(&["--resume", "/r", "--quick"]) else {
        panic!("should parse")
    };
    assert_eq!(o.resume, Some(PathBuf::from("/r")));
    let h = help_text();
    for flag in [
        "--resume <DIR>",
        "--render <DIR>",
        "--apps-nodes <LIST>",
        "partial",
    ] {
        assert!(h.contains(flag), "--help lacks {flag}:\n{h}");
    }
}

#[test]
fn overrides() {
    let Ok(Parsed::Run(o)) = p(&[
        "--jobs",
        "8",
        "--job-size=4m",
        "--lat-size",
        "16m",
        "--repeats",
        "3",
    ]) else {
        panic!("should parse")
    };
    let q = Params::from_opts(&o);
    assert_eq!(
        (q.jobs, q.job_size, q.lat_size, q.repeats),
        (8, 4 << 20, 16 << 20, 3)
    );
    assert!(pool_mib(q.fio_shm_mb, 2) >= 64.0, "{}", q.fio_shm_mb);
    assert!(q.disk_mb >= 96 + 32);
    let d = Params::from_opts(&BenchOpts::default());
    assert_eq!(d, Params::new(false));
    assert_eq!(parse_size("1536k"), Some(1536 << 10));
    assert_eq!(parse_size("4096"), Some(4096));
    for bad in ["0", "1000", "5k", "257m", "m", "", "-4k", "4g"] {
        assert_eq!(parse_size(bad), None, "{bad}");
    }
    for bad in [
        &["--jobs", "0"][..],
        &["--jobs", "65"],
        &["--repeats", "x"],
        &["--job-size", "3k"],
    ] {
        assert!(p(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn sizes() {
    assert_eq!(size_arg(4096), "4k");
    assert_eq!(size_arg(128 << 10), "128k");
    assert_eq!(size_arg(12 << 20), "12m");
    assert_eq!(size_arg(1000), "1000");
    assert_eq!(size_human(1 << 20), "1 MiB");
    assert_eq!(size_human(3 << 19), "1.5 MiB");
    assert_eq!(size_human(256 << 10), "256 KiB");
    assert!(Params::new(true).job_size <= Params::new(false).job_size);
}

#[test]
fn dilation_values_follow_the_launcher() {
    for ok in ["off", "auto", "1", "4.5", "0.10", "100", "12.25"] {
        assert!(valid_dilation(ok), "{ok}");
    }
    for bad in [
        "0", "0.05", "100.01", "4.567", "x", "-1", "1e2", "", "4.", ".5",
    ] {
        assert!(!valid_dilation(bad), "{bad}");
    }
    let Ok(Parsed::Run(o)) = p(&["--dilation", "auto"]) else {
        panic!("--dilation auto refused")
    };
    assert_eq!(o.dilation, "auto");
    assert!(p(&["--dilation", "0"]).is_err());
    assert_eq!(BenchOpts::default().dilation, "off");
}
