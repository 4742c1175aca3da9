use super::*;

/// A remote read of node 1 whose fill reads the disk, seen by node 1
/// (its clock 5000 ticks behind the directory's) and the directory,
/// with log lines and prompts around the dumps as a console shows them.
fn two_dumps() -> String {
    [
        "n1> trace dump",
        "TRACE-BEGIN inst=1 hz=1000000 now=900 events=4 lost=0",
        "TRACE 100 req_sent 0 7 20 42",
        "TRACE 700 resp_taken 0 7 0 0",
        "TRACE 710 install 0 0 0 42",
        "TRACE 880 inv_taken 0 0 0 42",
        "TRACE-END inst=1",
        "ok",
        "[    1.000000] dir info something",
        "TRACE-BEGIN inst=0 hz=1000000 now=6000 events=5 lost=0",
        "TRACE 5150 serve 1 7 20 42",
        "TRACE 5160 disk_start 1 7 0 42",
        "TRACE 5500 disk_done 1 7 0 42",
        "TRACE 5510 reply 1 7 0 0",
        "TRACE 5790 inv_sent 1 0 0 42",
        "TRACE-END inst=0",
    ]
    .join("\r\n")
}

#[test]
fn eviction_sweeps_and_tasks_become_spans_on_their_own_tracks() {
    let text = [
        "TRACE-BEGIN inst=1 hz=1000000 now=900 events=6 lost=0",
        "TRACE 100 task_switch 0 0 0 0",
        "TRACE 200 task_switch 0 0 0 1",
        "TRACE 300 evict_start 0 0 0 32",
        "TRACE 400 evict_end 0 0 0 30",
        "TRACE 500 sleep 0 0 0 0",
        "TRACE 600 wake 0 0 0 0",
        "TRACE-END inst=1",
    ]
    .join("\n");
    let (v, _) = merge(&parse_dumps(&text).unwrap());
    check_schema(&v).unwrap();
    let ev = v["traceEvents"].as_array().unwrap();
    let span = |name: &str| {
        ev.iter()
            .find(|e| e["ph"] == "X" && e["name"] == name)
            .unwrap_or_else(|| panic!("no span {name}: {v}"))
    };
    let sweep = span("eviction sweep (30 freed)");
    assert_eq!(
        (sweep["ts"].as_f64(), sweep["dur"].as_f64()),
        (Some(200.0), Some(100.0))
    );
    assert_eq!(
        (
            sweep["args"]["victims"].as_u64(),
            sweep["args"]["freed"].as_u64()
        ),
        (Some(32), Some(30))
    );
    // Task 0 runs until task 1's switch, task 1 until the sleep.
    assert_eq!(span("task 0")["dur"].as_f64(), Some(100.0));
    assert_eq!(span("task 1")["dur"].as_f64(), Some(300.0));
    assert_ne!(span("task 1")["tid"], sweep["tid"]);
    let names: Vec<&str> = ev
        .iter()
        .filter(|e| e["name"] == "thread_name")
        .filter_map(|e| e["args"]["name"].as_str())
        .collect();
    assert!(
        names.contains(&"eviction") && names.contains(&"tasks"),
        "{names:?}"
    );
}

#[test]
fn parses_dumps_among_other_lines() {
    let d = parse_dumps(&two_dumps()).unwrap();
    assert_eq!(d.len(), 2);
    assert_eq!((d[0].inst, d[0].hz, d[0].events.len()), (1, 1_000_000, 4));
    assert_eq!(
        d[0].events[0],
        TraceEvent {
            ts: 100,
            kind: "req_sent".into(),
            peer: 0,
            tag: 7,
            op: 20,
            arg: 42
        }
    );
    assert!(parse_dumps("TRACE-BEGIN inst=1 hz=1 now=0 events=0 lost=0\n").is_err());
    assert!(parse_dumps("TRACE 1 x 0 0 0 0\n").is_err());
    assert!(
        parse_dumps("TRACE-BEGIN inst=1 hz=1 now=0 events=1 lost=0\nTRACE 1 x 0\nTRACE-END\n")
            .is_err()
    );
}

#[test]
fn aligns_by_round_trips() {
    let d = parse_dumps(&two_dumps()).unwrap();
    let a = align(&d);
    let n1 = a.iter().find(|a| a.inst == 1).unwrap();
    // Request [.., 5050], answer [4810, ..], DIR_INV [4910, ..]: the
    // middle of [4910, 5050], +- 70.
    assert_eq!((n1.offset, n1.error, n1.round_trips), (4980, 70, 3));
    assert!(!n1.inconsistent);
    assert!(n1.describe(1_000_000).contains("+4980.000 us +- 70.000 us"));
}

/// Events from two instances -> valid trace-event JSON with the
/// request's hops as flows, in causal order on one time axis.
#[test]
fn merges_two_instances_into_valid_json_with_flows() {
    let d = parse_dumps(&two_dumps()).unwrap();
    let (v, _) = merge(&d);
    // Through text and back, as a file is read.
    let text = serde_json::to_string_pretty(&v).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    check_schema(&v).unwrap();
    let ev = v["traceEvents"].as_array().unwrap();
    let procs: Vec<(u64, &str)> = ev
        .iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| {
            (
                e["pid"].as_u64().unwrap(),
                e["args"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(procs, [(1, "node 1"), (u64::from(DIR_PID), "directory")]);
    let span = |name: &str| {
        ev.iter()
            .find(|e| e["ph"] == "X" && e["name"] == name)
            .unwrap_or_else(|| panic!("no span {name}: {text}"))
    };
    let req = span("request tag 7");
    let serve = span("serve n1 tag 7");
    let disk = span("disk read n1 tag 7");
    let ts = |e: &Value| e["ts"].as_f64().unwrap();
    let end = |e: &Value| ts(e) + e["dur"].as_f64().unwrap();
    assert!(ts(req) < ts(serve) && ts(serve) < ts(disk) && end(disk) <= end(serve));
    assert!(end(serve) < end(req));
    // Four hops: request -> serve -> disk start -> disk done -> reply -> answer.
    let starts = ev.iter().filter(|e| e["ph"] == "s").count();
    let finishes = ev.iter().filter(|e| e["ph"] == "f").count();
    assert_eq!((starts, finishes), (5, 5));
    let first = ev.iter().find(|e| e["ph"] == "s").unwrap();
    assert_eq!(
        (first["pid"].as_u64(), first["tid"].as_u64()),
        (Some(1), Some(1))
    );
    assert!(ev.iter().any(|e| e["ph"] == "i" && e["name"] == "inv_sent"));
    // The invalidation reaches the node after it was sent.
    let inst = |name: &str| {
        ev.iter()
            .find(|e| e["ph"] == "i" && e["name"] == name)
            .map(ts)
            .unwrap()
    };
    assert!(inst("inv_sent") < inst("inv_taken"));
}

#[test]
fn schema_check_refuses_broken_events() {
    let ok = json!({"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1.0, "dur": 1.0}]});
    check_schema(&ok).unwrap();
    for bad in [
        json!({}),
        json!({"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1.0}]}),
        json!({"traceEvents": [{"ph": "s", "id": 1, "name": "a", "pid": 1, "tid": 1, "ts": 1.0}]}),
        json!({"traceEvents": [{"ph": "s", "id": 1, "name": "a", "pid": 1, "tid": 1, "ts": 2.0},
                                   {"ph": "f", "id": 1, "name": "a", "pid": 1, "tid": 1, "ts": 1.0}]}),
        json!({"traceEvents": [{"ph": "i", "name": "a", "pid": 1, "tid": 1, "ts": 1.0}]}),
    ] {
        assert!(check_schema(&bad).is_err(), "{bad}");
    }
}

#[test]
fn inconsistent_round_trips_are_reported() {
    let mut d = parse_dumps(&two_dumps()).unwrap();
    // A second round trip that fits no common offset with the first.
    d[0].events.push(TraceEvent {
        ts: 1000,
        kind: "req_sent".into(),
        peer: 0,
        tag: 8,
        op: 1,
        arg: 0,
    });
    d[0].events.push(TraceEvent {
        ts: 1100,
        kind: "resp_taken".into(),
        peer: 0,
        tag: 8,
        op: 0,
        arg: 0,
    });
    d[1].events.push(TraceEvent {
        ts: 9000,
        kind: "serve".into(),
        peer: 1,
        tag: 8,
        op: 1,
        arg: 0,
    });
    d[1].events.push(TraceEvent {
        ts: 9010,
        kind: "reply".into(),
        peer: 1,
        tag: 8,
        op: 0,
        arg: 0,
    });
    let a = align(&d);
    assert!(a
        .iter()
        .any(|a| a.inst == 1 && a.inconsistent && a.round_trips == 5));
}
