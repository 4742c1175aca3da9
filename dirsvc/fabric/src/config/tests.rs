use super::*;

#[test]
fn parses_roles_and_options() {
    let c = BootConfig::parse("role=dir nodes=4").unwrap();
    assert_eq!((c.role, c.nodes), (Role::Dir, 4));
    assert_eq!(c.mode, Mode::Strong);
    let c =
        BootConfig::parse("role=node id=2 nodes=2 hb_timeout_ms=500 mode=relaxed foo=bar").unwrap();
    assert_eq!(c.mode, Mode::Relaxed);
    assert_eq!(c.role, Role::Node(2));
    assert_eq!(c.hb_timeout_ms, 500);
    assert_eq!(c.unknown, ["foo=bar"]);
    assert!(!c.doorbell);
    let c = BootConfig::parse("role=dir nodes=2 doorbell=1").unwrap();
    assert!(c.doorbell);
    let c = BootConfig::parse("role=dir nodes=2 doorbell=0").unwrap();
    assert!(!c.doorbell);
    assert!(c.disk_irq);
    let c = BootConfig::parse("role=dir nodes=2 disk_irq=0").unwrap();
    assert!(!c.disk_irq);
    assert!(c.lazy_inv);
    let c = BootConfig::parse("role=node id=1 nodes=2 lazy_inv=0").unwrap();
    assert!(!c.lazy_inv);
    assert!(!c.trace);
    let c = BootConfig::parse("role=node id=1 nodes=2 trace=1").unwrap();
    assert!(c.trace);
    assert!(BootConfig::parse("role=dir trace=2").is_err());
    assert!(c.fence);
    assert!(!BootConfig::parse("role=dir fence=0").unwrap().fence);
    assert!(BootConfig::parse("role=dir fence=2").is_err());
    assert_eq!(c.doorbell_selftest, 0);
    let c = BootConfig::parse("role=node id=1 nodes=1 doorbell_selftest=200").unwrap();
    assert_eq!(c.doorbell_selftest, 200);
    assert_eq!((c.bell_spin_us, c.dir_bell_spin_us), (20, 200));
    let c = BootConfig::parse("role=dir nodes=1 bell_spin_us=0 dir_bell_spin_us=1000").unwrap();
    assert_eq!((c.bell_spin_us, c.dir_bell_spin_us), (0, 1000));
    assert!(BootConfig::parse("role=dir bell_spin_us=x").is_err());
    assert!(BootConfig::parse("role=dir dir_bell_spin_us=99999999999").is_err());
}

#[test]
fn reclaim_watermarks_are_percent_with_high_above_low() {
    let c = BootConfig::parse("role=node id=1 nodes=1").unwrap();
    assert_eq!(
        (c.reclaim_low, c.reclaim_high),
        (DEFAULT_RECLAIM_LOW, DEFAULT_RECLAIM_HIGH)
    );
    let c = BootConfig::parse("role=node id=1 nodes=1 reclaim_low=10 reclaim_high=30").unwrap();
    assert_eq!((c.reclaim_low, c.reclaim_high), (10, 30));
    let c = BootConfig::parse("role=node id=1 nodes=1 reclaim_low=0 reclaim_high=1").unwrap();
    assert_eq!(c.reclaim_low, 0, "0 turns reclaim ahead of need off");
    let e = BootConfig::parse("role=node id=1 nodes=1 reclaim_low=20 reclaim_high=10").unwrap_err();
    assert!(
        e.contains("reclaim_high=10 must be above reclaim_low=20"),
        "{e}"
    );
    assert!(BootConfig::parse("role=node id=1 nodes=1 reclaim_low=51").is_err());
    assert!(BootConfig::parse("role=node id=1 nodes=1 reclaim_high=91").is_err());
    assert!(BootConfig::parse("role=node id=1 nodes=1 reclaim_high=0").is_err());
}

#[test]
fn every_boot_option_of_the_table_is_parsed() {
    for o in BOOT_OPTIONS {
        let line = alloc::format!("role=node id=1 nodes=2 {}={}", o.key, o.example);
        let c = BootConfig::parse(&line).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert!(c.unknown.is_empty(), "{line}: {:?}", c.unknown);
    }
    let mut keys: Vec<&str> = BOOT_OPTIONS.iter().map(|o| o.key).collect();
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), BOOT_OPTIONS.len(), "a key given twice");
    let c = BootConfig::parse("role=dir nodes=1 hb_ms=50").unwrap();
    assert_eq!(c.unknown, ["hb_ms=50"]);
}

#[test]
fn readahead_options() {
    let c = BootConfig::parse("role=node id=1 nodes=1").unwrap();
    assert_eq!((c.readahead_kb, c.faultaround_kb), (128, 64));
    let c = BootConfig::parse("role=node id=1 nodes=1 readahead_kb=0 faultaround_kb=0").unwrap();
    assert_eq!((c.readahead_kb, c.faultaround_kb), (0, 0));
    let c =
        BootConfig::parse("role=node id=1 nodes=1 readahead_kb=8192 faultaround_kb=2048").unwrap();
    assert_eq!((c.readahead_kb, c.faultaround_kb), (8192, 2048));
    let e = BootConfig::parse("role=node id=1 readahead_kb=8193").unwrap_err();
    assert!(
        e.contains("readahead_kb=8193") && e.contains("0..=8192"),
        "{e}"
    );
    let e = BootConfig::parse("role=node id=1 faultaround_kb=4096").unwrap_err();
    assert!(
        e.contains("faultaround_kb=4096") && e.contains("0..=2048"),
        "{e}"
    );
    assert!(BootConfig::parse("role=node id=1 readahead_kb=-1").is_err());
}

#[test]
fn modes_round_trip() {
    for m in Mode::ALL {
        assert_eq!(Mode::parse(m.as_str()), Some(m));
    }
    assert_eq!(Mode::ALL[0], Mode::Strong, "the default first");
    assert_eq!(Mode::parse("weak"), None);
}

#[test]
fn task_reads_option() {
    let c = BootConfig::parse("role=node id=1 nodes=1").unwrap();
    assert!(c.task_reads_each);
    let c = BootConfig::parse("role=node id=1 nodes=1 task_reads=batch").unwrap();
    assert!(!c.task_reads_each);
    let c = BootConfig::parse("role=node id=1 nodes=1 task_reads=each").unwrap();
    assert!(c.task_reads_each);
    let c = BootConfig::parse("role=node id=1 nodes=1 mode=net").unwrap();
    assert!(!c.task_reads_each, "net: batch unless asked");
    assert_eq!(c.cache_pages, None);
    let c = BootConfig::parse("role=node id=1 nodes=1 cache_pages=2048").unwrap();
    assert_eq!(c.cache_pages, Some(2048));
    let e = BootConfig::parse("role=node id=1 nodes=1 cache_pages=8").unwrap_err();
    assert!(e.contains("cache_pages"), "{e}");
    let c = BootConfig::parse("role=node id=1 nodes=1 task_reads=each mode=net").unwrap();
    assert!(c.task_reads_each);
    let e = BootConfig::parse("role=node id=1 nodes=1 task_reads=some").unwrap_err();
    assert!(e.contains("task_reads=some"), "{e}");
}

#[test]
fn ring_reads_option() {
    let c = BootConfig::parse("role=node id=1 nodes=1 mode=private").unwrap();
    assert_eq!(c.ring_reads, 32);
    let c = BootConfig::parse("role=node id=1 nodes=1 ring_reads=1").unwrap();
    assert_eq!(c.ring_reads, 1);
    assert!(c.unknown.is_empty());
}

#[test]
fn fill_depth_and_disk_latency_options() {
    let c = BootConfig::parse("role=dir nodes=2").unwrap();
    assert_eq!((c.fill_depth, c.disk_latency_us()), (32, 0));
    let c = BootConfig::parse("role=dir nodes=2 storage=sata-ssd").unwrap();
    assert_eq!(c.disk_latency_us(), 120);
    let c = BootConfig::parse("role=dir nodes=2 storage=nvme disk_lat_us=7 fill_depth=0").unwrap();
    assert_eq!((c.fill_depth, c.disk_latency_us()), (0, 7));
    assert!(BootConfig::parse("role=dir fill_depth=65").is_err());
    assert!(BootConfig::parse("role=dir disk_lat_us=100001").is_err());
    let c = BootConfig::parse("role=dir storage=sas-raid dilation_pct=450").unwrap();
    assert_eq!(c.disk_latency_us(), 450);
    let c = BootConfig::parse("role=dir disk_lat_us=10 dilation_pct=250").unwrap();
    assert_eq!(c.disk_latency_us(), 25);
    assert!(BootConfig::parse("role=dir dilation_pct=9").is_err());
    assert!(BootConfig::parse("role=dir disk_lat_us=x").is_err());
}

#[test]
fn baseline_writes_option() {
    let c = BootConfig::parse("role=node id=1 nodes=1 mode=private").unwrap();
    assert_eq!(c.baseline_writes, BaselineWrites::Back);
    let c = BootConfig::parse("role=node id=1 nodes=1 baseline_writes=through").unwrap();
    assert_eq!(c.baseline_writes, BaselineWrites::Through);
    assert!(c.unknown.is_empty());
    let c = BootConfig::parse("role=node id=1 nodes=1 baseline_writes=back").unwrap();
    assert_eq!(c.baseline_writes, BaselineWrites::Back);
    for w in [BaselineWrites::Back, BaselineWrites::Through] {
        assert_eq!(BaselineWrites::parse(w.as_str()), Some(w));
    }
    for bad in ["", "sync", "Back", "through "] {
        assert_eq!(BaselineWrites::parse(bad), None, "{bad:?}");
    }
    assert!(BootConfig::parse("role=dir baseline_writes=").is_err());
    assert!(BootConfig::parse("role=dir baseline_writes=always").is_err());
}

#[test]
fn policy_option() {
    let c = BootConfig::parse("role=node id=1 nodes=1").unwrap();
    assert_eq!(c.policy, PolicyName::Fifo);
    let c = BootConfig::parse("role=node id=1 nodes=1 policy=s3fifo").unwrap();
    assert_eq!(c.policy, PolicyName::S3Fifo);
    assert!(c.unknown.is_empty());
    let e = BootConfig::parse("role=node id=1 nodes=1 policy=random").unwrap_err();
    assert!(e.contains("fifo, lru"), "{e}");
    assert!(BootConfig::parse("role=dir policy=").is_err());
}

#[test]
fn rejects_bad_lines() {
    for bad in [
        "",
        "role=node",
        "role=node id=3 nodes=2",
        "role=cat",
        "role=dir nodes=0",
        "role=dir nodes=x",
        "role=dir hb_timeout_ms=1",
        "role=node id=99999999999999999999",
        "role=dir mode=weak",
        "role=dir doorbell=",
        "role=node id=1 nodes=1 ring_reads=0",
        "role=node id=1 nodes=1 ring_reads=33",
        "role=node id=1 nodes=1 ring_reads=x",
        "role=dir doorbell=yes",
        "role=dir disk_irq=on",
        "role=dir lazy_inv=yes",
        "role=dir doorbell=2",
        "role=dir doorbell_selftest=10001",
        "role=dir doorbell_selftest=-1",
    ] {
        assert!(BootConfig::parse(bad).is_err(), "{bad:?}");
    }
}
