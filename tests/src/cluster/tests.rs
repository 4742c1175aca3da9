use super::*;

#[test]
fn tails() {
    assert_eq!(tail_lines("a\nb\nc\n", 2), "b\nc");
    assert_eq!(tail_lines("a", 5), "a");
    assert_eq!(tail_lines("", 5), "");
}

#[test]
fn host_commands_time_out() {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "echo out; echo err >&2; exit 3"]);
    let out = run_with_timeout(cmd, Duration::from_secs(10)).unwrap();
    assert_eq!(out.code, Some(3));
    assert_eq!(out.stdout_text(), "out\n");
    assert_eq!(out.stderr_text(), "err\n");
    let mut cmd = Command::new("sleep");
    cmd.arg("30");
    let start = Instant::now();
    let out = run_with_timeout(cmd, Duration::from_millis(200)).unwrap();
    assert!(out.timed_out);
    assert_eq!(out.code, None);
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn run_dirs_are_unique() {
    let a = unique_run_dir("unit test/x").unwrap();
    let b = unique_run_dir("unit test/x").unwrap();
    assert_ne!(a, b);
    assert!(a
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with("unit_test_x-"));
    fs::remove_dir(&a).unwrap();
    fs::remove_dir(&b).unwrap();
}
