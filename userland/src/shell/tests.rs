//! Shell tests over the in-memory [`MockOs`].

use super::node::format_uptime;
use super::*;
use crate::mock::MockOs;
use crate::os::{LocalityRange, PolicyName};
use crate::pattern;
use alloc::string::ToString;

/// Run one line on node 1, return everything printed.
fn run(os: &mut MockOs, line: &str) -> String {
    let outcome = Shell::new(1).execute(os, line);
    assert_eq!(outcome, Outcome::Continue, "{line:?}");
    assert_eq!(os.open_fds(), 0, "descriptor leaked by {line:?}");
    os.take_out()
}

/// Run a line that must succeed; return its output without the status.
fn ok(os: &mut MockOs, line: &str) -> String {
    let out = run(os, line);
    let body = out
        .strip_suffix("ok\n")
        .unwrap_or_else(|| panic!("{line:?} did not succeed: {out:?}"));
    assert!(body.is_empty() || body.ends_with('\n'), "{out:?}");
    body.to_string()
}

/// Run a line that must fail; return the message after `error: `.
fn err(os: &mut MockOs, line: &str) -> String {
    let out = run(os, line);
    let body = out
        .strip_suffix('\n')
        .unwrap_or_else(|| panic!("{line:?}: no newline: {out:?}"));
    let last = body.rsplit('\n').next().unwrap_or(body);
    let msg = last
        .strip_prefix("error: ")
        .unwrap_or_else(|| panic!("{line:?} did not fail: {out:?}"));
    msg.to_string()
}

fn os_with(files: &[(&str, &[u8])]) -> MockOs {
    let mut os = MockOs::new();
    for (p, d) in files {
        os.put(p, d);
    }
    os
}

// --- framing -----------------------------------------------------------

#[test]
fn prompt_format() {
    assert_eq!(Shell::new(1).prompt(), "n1> ");
    assert_eq!(Shell::new(0).prompt(), "n0> ");
    assert_eq!(Shell::new(65535).prompt(), "n65535> ");
    assert_eq!(Shell::new(7).node_id(), 7);
}

#[test]
fn empty_and_whitespace_lines_print_nothing() {
    let mut os = MockOs::new();
    for line in ["", " ", "\t  ", "\n", " \r\n "] {
        assert_eq!(run(&mut os, line), "", "{line:?}");
    }
}

#[test]
fn unknown_command() {
    let mut os = MockOs::new();
    assert_eq!(
        run(&mut os, "lss"),
        "error: unknown command 'lss' (try 'help')\n"
    );
    assert_eq!(err(&mut os, "  LS  /"), "unknown command 'LS' (try 'help')");
    assert_eq!(err(&mut os, r#""""#), "unknown command '' (try 'help')");
}

#[test]
fn long_unknown_command_is_shortened() {
    let mut os = MockOs::new();
    let word = "x".repeat(4000);
    let msg = err(&mut os, &word);
    assert!(msg.len() < 120, "{msg}");
    assert!(msg.contains("..."));
}

#[test]
fn quoted_names_work_and_control_chars_stay_on_one_line() {
    let mut os = os_with(&[("/my file", b"hi\n")]);
    assert_eq!(ok(&mut os, r#"cat "/my file""#), "hi\n");
    let out = run(&mut os, "cat \"a\nb\x1bc\"");
    assert_eq!(out, "error: cat: /a?b?c: not found\n");
}

#[test]
fn status_line_starts_a_line() {
    let mut os = os_with(&[("/f", b"no newline")]);
    assert_eq!(run(&mut os, "cat /f"), "no newline\nok\n");
}

#[test]
fn argument_counts_print_usage() {
    let mut os = MockOs::new();
    for (line, usage) in [
        ("cat", "cat PATH"),
        ("cat /a /b", "cat PATH"),
        ("ls / /", "ls [PATH]"),
        ("write /a", "write PATH TEXT"),
        ("write", "write PATH TEXT"),
        ("append /a", "append PATH TEXT"),
        ("fill /a", "fill PATH SIZE"),
        ("fill /a 1 2", "fill PATH SIZE"),
        ("sum", "sum PATH"),
        ("stat", "stat PATH"),
        ("truncate /a", "truncate PATH SIZE"),
        ("rm", "rm PATH"),
        ("rm /a /b", "rm PATH"),
        ("mkdir", "mkdir PATH"),
        ("rmdir", "rmdir PATH"),
        ("sync now", "sync"),
        ("nodes -a", "nodes"),
        ("uptime x", "uptime"),
        ("shutdown now", "shutdown"),
        ("bench ring 1 2", "bench ring [COUNT]"),
        ("help a b", "help [COMMAND]"),
        (
            "bench",
            "bench ring [COUNT] | bench rpc [COUNT] | bench pingpong [COUNT] | bench atomics [COUNT|reset] | bench doorbell [COUNT] | bench read PATH | bench miss [N] | bench inv PATH | bench dir PATH [ROUNDS] [BATCH]",
        ),
    ] {
        assert_eq!(err(&mut os, line), format!("usage: {usage}"), "{line}");
    }
}

#[test]
fn errno_is_printed_through_display() {
    for e in Errno::ALL {
        let mut os = MockOs::new();
        os.fail("stat", 0, e);
        assert_eq!(err(&mut os, "stat x"), format!("stat: /x: {e}"));
        assert!(!e.to_string().is_empty());
    }
}

#[test]
fn paths_are_absolute_and_normalised() {
    let mut os = MockOs::new();
    ok(&mut os, "mkdir d");
    ok(&mut os, "write d//f hello");
    ok(&mut os, "cat /d//f/");
    ok(&mut os, "ls d/");
    assert_eq!(os.paths, ["/d", "/d/f", "/d/f", "/d", "/d"]);
    assert_eq!(os.file("/d/f"), Some(&b"hello\n"[..]));
}

#[test]
fn dot_and_dotdot_are_refused() {
    // `/a` does not exist: `/a/../b` must not become `/b`.
    let mut os = MockOs::new();
    assert_eq!(
        err(&mut os, "mkdir /a/../b"),
        "mkdir: /a/../b: invalid argument ('.' and '..' are not allowed in paths)"
    );
    for line in [
        "write /./x hi",
        "cat ../x",
        "ls /.",
        "ls .",
        "rm /x/..",
        "fill /a/./f 4k",
    ] {
        let e = err(&mut os, line);
        assert!(e.contains("invalid argument ('.' and '..'"), "{line}: {e}");
    }
    assert!(os.paths.is_empty(), "reached the OS: {:?}", os.paths);
    assert!(os.file("/b").is_none());
    ok(&mut os, "ls /");
}

// --- help ----------------------------------------------------------------

#[test]
fn help_lists_every_command() {
    let mut os = MockOs::new();
    let out = ok(&mut os, "help");
    for c in commands() {
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with(c.usage))
            .unwrap_or_else(|| panic!("{} missing from help", c.name));
        assert!(line.ends_with(c.help), "{line}");
    }
    assert_eq!(out.lines().count(), commands().len() + 1);
}

#[test]
fn help_for_one_command() {
    let mut os = MockOs::new();
    let out = ok(&mut os, "help cat");
    assert_eq!(out.lines().count(), 1);
    assert!(out.contains("cat PATH"));
    assert!(ok(&mut os, "help bench").contains("bench ring [COUNT]"));
    assert!(ok(&mut os, "help \"bench ring\"").contains("bench ring [COUNT]"));
    assert_eq!(
        err(&mut os, "help nope"),
        "help: no command 'nope' (try 'help')"
    );
}

#[test]
fn command_table_is_consistent() {
    let cmds = commands();
    for (i, c) in cmds.iter().enumerate() {
        assert!(c.usage.starts_with(c.name), "{c:?}");
        assert!(!c.help.is_empty() && !c.help.contains('\n'));
        assert!(c.min_args <= c.max_args);
        assert!(cmds[..i].iter().all(|d| d.name != c.name), "dup {}", c.name);
    }
}

// --- ls ------------------------------------------------------------------

#[test]
fn ls_root_and_dirs() {
    let mut os = os_with(&[("/b.txt", b"12345"), ("/a/x", b""), ("/a/y", b"")]);
    assert_eq!(ok(&mut os, "ls"), "d          2 a/\n-          5 b.txt\n");
    assert_eq!(ok(&mut os, "ls /"), ok(&mut os, "ls"));
    assert_eq!(ok(&mut os, "ls a"), "-          0 x\n-          0 y\n");
    ok(&mut os, "mkdir /e");
    assert_eq!(ok(&mut os, "ls /e"), "");
}

#[test]
fn ls_file_lists_just_that_file() {
    let mut os = os_with(&[("/d/big", &[0u8; 123_456])]);
    assert_eq!(ok(&mut os, "ls d/big"), "-     123456 /d/big\n");
}

#[test]
fn ls_errors() {
    let mut os = os_with(&[("/f", b"x")]);
    assert_eq!(err(&mut os, "ls /nope"), "ls: /nope: not found");
    assert_eq!(err(&mut os, "ls /f/g"), "ls: /f/g: not a directory");
    os.fail("readdir", 0, Errno::Unavailable);
    assert_eq!(err(&mut os, "ls"), "ls: /: directory unavailable");
}

// --- cat -----------------------------------------------------------------

#[test]
fn cat_prints_text() {
    let mut os = os_with(&[("/f", b"line 1\n\tline 2\n")]);
    assert_eq!(ok(&mut os, "cat /f"), "line 1\n\tline 2\n");
}

#[test]
fn cat_replaces_unprintable_bytes() {
    let mut os = os_with(&[("/bin", b"a\x00b\r\xffc\x7f\n")]);
    assert_eq!(ok(&mut os, "cat bin"), "a.b..c.\n");
}

#[test]
fn cat_empty_file_prints_nothing() {
    let mut os = os_with(&[("/e", b"")]);
    assert_eq!(run(&mut os, "cat /e"), "ok\n");
}

#[test]
fn cat_large_file_with_short_reads() {
    let text: Vec<u8> = (0..20_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let mut os = os_with(&[("/big", &text)]);
    os.max_io = 1000;
    let out = ok(&mut os, "cat /big");
    assert_eq!(out.len(), text.len() + 1);
    assert_eq!(&out.as_bytes()[..text.len()], &text[..]);
}

#[test]
fn cat_errors() {
    let mut os = os_with(&[("/f", b"x"), ("/d/g", b"y")]);
    assert_eq!(err(&mut os, "cat /x"), "cat: /x: not found");
    assert_eq!(err(&mut os, "cat /d"), "cat: /d: is a directory");
    assert_eq!(err(&mut os, "cat /f/x"), "cat: /f/x: not a directory");
    os.fail("open", 0, Errno::TooManyFiles);
    assert_eq!(err(&mut os, "cat /f"), "cat: /f: too many open files");
}

#[test]
fn cat_read_error_midway_keeps_one_status_line() {
    let mut os = os_with(&[("/f", b"abcdefghij")]);
    os.max_io = 4;
    os.fail("read", 1, Errno::Io);
    assert_eq!(run(&mut os, "cat /f"), "abcd\nerror: cat: /f: I/O error\n");
}

#[test]
fn cat_close_error_is_reported() {
    let mut os = os_with(&[("/f", b"abc\n")]);
    os.fail("close", 0, Errno::Io);
    assert_eq!(run(&mut os, "cat /f"), "abc\nerror: cat: /f: I/O error\n");
}

// --- write / append ------------------------------------------------------

#[test]
fn write_creates_and_truncates() {
    let mut os = MockOs::new();
    assert_eq!(run(&mut os, "write /f hello world"), "ok\n");
    assert_eq!(os.file("/f"), Some(&b"hello world\n"[..]));
    ok(&mut os, "write f bye");
    assert_eq!(os.file("/f"), Some(&b"bye\n"[..]));
}

#[test]
fn write_text_is_verbatim() {
    let mut os = MockOs::new();
    ok(&mut os, "write /f   a  b\t\"c\"   ");
    assert_eq!(os.file("/f"), Some(&b"a  b\t\"c\"\n"[..]));
    ok(&mut os, r#"write /f "  quoted  text ""#);
    assert_eq!(os.file("/f"), Some(&b"  quoted  text \n"[..]));
    ok(&mut os, r#"write /f """#);
    assert_eq!(os.file("/f"), Some(&b"\n"[..]));
    ok(&mut os, r#"write "/a file" "x" "y""#);
    assert_eq!(os.file("/a file"), Some(&b"\"x\" \"y\"\n"[..]));
    ok(&mut os, r#"write /g say "hi"#);
    assert_eq!(os.file("/g"), Some(&b"say \"hi\n"[..]));
}

#[test]
fn append_creates_and_appends() {
    let mut os = MockOs::new();
    ok(&mut os, "append /log one");
    ok(&mut os, "append /log two  words");
    assert_eq!(os.file("/log"), Some(&b"one\ntwo  words\n"[..]));
    assert_eq!(ok(&mut os, "cat /log"), "one\ntwo  words\n");
}

#[test]
fn write_with_short_writes() {
    let mut os = MockOs::new();
    os.max_io = 3;
    ok(&mut os, "write /f 0123456789");
    assert_eq!(os.file("/f"), Some(&b"0123456789\n"[..]));
}

#[test]
fn write_errors() {
    let mut os = os_with(&[("/f", b"x")]);
    ok(&mut os, "mkdir /d");
    assert_eq!(err(&mut os, "write /d x"), "write: /d: is a directory");
    assert_eq!(err(&mut os, "write /no/f x"), "write: /no/f: not found");
    assert_eq!(
        err(&mut os, "append /f/g x"),
        "append: /f/g: not a directory"
    );
    let long = "n".repeat(60);
    assert_eq!(
        err(&mut os, &format!("write /{long} x")),
        format!("write: /{long}: name too long")
    );
    os.capacity = 3;
    assert_eq!(err(&mut os, "write /g hello"), "write: /g: no space left");
    os.capacity = 1 << 20;
    os.fail("write", 0, Errno::Refused);
    assert_eq!(err(&mut os, "append /f x"), "append: /f: refused");
}

// --- fill / sum ----------------------------------------------------------

#[test]
fn fill_writes_the_pattern_in_64k_chunks() {
    let mut os = MockOs::new();
    assert_eq!(ok(&mut os, "fill /p 200k"), "wrote 204800 bytes\n");
    let data = os.file("/p").unwrap();
    assert_eq!(data.len(), 204_800);
    assert_eq!(pattern::first_mismatch(data, 0), None);
    assert_eq!(os.write_sizes, [65536, 65536, 65536, 8192]);
}

#[test]
fn fill_sizes() {
    let mut os = MockOs::new();
    assert_eq!(ok(&mut os, "fill /p 0"), "wrote 0 bytes\n");
    assert_eq!(os.file("/p"), Some(&[][..]));
    assert_eq!(ok(&mut os, "fill /p 1"), "wrote 1 bytes\n");
    assert_eq!(ok(&mut os, "fill /p 1M"), "wrote 1048576 bytes\n");
    assert_eq!(ok(&mut os, "fill /p 4097"), "wrote 4097 bytes\n");
    // Truncates what was there.
    assert_eq!(os.file("/p").map(<[u8]>::len), Some(4097));
}

#[test]
fn fill_with_short_writes_is_still_the_pattern() {
    let mut os = MockOs::new();
    os.max_io = 1000;
    ok(&mut os, "fill /p 70000");
    assert_eq!(pattern::first_mismatch(os.file("/p").unwrap(), 0), None);
}

#[test]
fn fill_errors() {
    let mut os = MockOs::new();
    assert_eq!(
        run(&mut os, "fill /p 12q"),
        "error: fill: bad size '12q' (examples: 4096, 64k, 1m)\n"
    );
    assert_eq!(os.file("/p"), None, "bad size must not create the file");
    assert_eq!(
        err(&mut os, "fill /p 99999999999t"),
        "fill: bad size '99999999999t' (examples: 4096, 64k, 1m)"
    );
    os.capacity = 100_000;
    assert_eq!(
        err(&mut os, "fill /p 1m"),
        "fill: /p: no space left after writing 100000 of 1048576 bytes; the partial file was removed"
    );
    assert_eq!(os.file("/p"), None, "the partial file is gone");
    ok(&mut os, "fill /p 4k");
    // If it cannot be removed, the message says it is still there.
    os.fail("unlink", 0, Errno::Io);
    assert_eq!(
        err(&mut os, "fill /p 1m"),
        "fill: /p: no space left after writing 100000 of 1048576 bytes; the partial file remains (removing it: I/O error)"
    );
    assert_eq!(os.file("/p").map(<[u8]>::len), Some(100_000));
    assert_eq!(err(&mut os, "fill / 1"), "fill: /: is a directory");
}

#[test]
fn sum_prints_crc_and_size() {
    let mut os = os_with(&[("/c", b"123456789"), ("/e", b"")]);
    assert_eq!(ok(&mut os, "sum /c"), "crc32=cbf43926 size=9\n");
    assert_eq!(ok(&mut os, "sum /e"), "crc32=00000000 size=0\n");
    ok(&mut os, "fill /p 300k");
    let expected = crc32fast::hash(os.file("/p").unwrap());
    assert_eq!(
        ok(&mut os, "sum p"),
        format!("crc32={expected:08x} size=307200\n")
    );
}

#[test]
fn sum_errors() {
    let mut os = os_with(&[("/c", b"123456789")]);
    assert_eq!(err(&mut os, "sum /x"), "sum: /x: not found");
    os.fail("read", 0, Errno::Io);
    assert_eq!(run(&mut os, "sum /c"), "error: sum: /c: I/O error\n");
}

// --- stat / truncate / rm / mkdir / rmdir / sync ---------------------------

#[test]
fn stat_file_and_dir() {
    let mut os = os_with(&[("/d/f", b"abc")]);
    assert_eq!(
        ok(&mut os, "stat /d/f"),
        "ino=3 kind=file size=3 version=1\n"
    );
    assert_eq!(ok(&mut os, "stat d"), "ino=2 kind=dir size=1 version=1\n");
    assert_eq!(ok(&mut os, "stat /"), "ino=1 kind=dir size=1 version=1\n");
    assert_eq!(err(&mut os, "stat /d/x"), "stat: /d/x: not found");
}

#[test]
fn truncate_grows_shrinks_and_creates() {
    let mut os = os_with(&[("/f", b"abcdef")]);
    ok(&mut os, "truncate /f 2");
    assert_eq!(os.file("/f"), Some(&b"ab"[..]));
    ok(&mut os, "truncate /f 4");
    assert_eq!(os.file("/f"), Some(&b"ab\0\0"[..]));
    ok(&mut os, "truncate /new 1k");
    assert_eq!(os.file("/new").map(<[u8]>::len), Some(1024));
}

#[test]
fn truncate_errors() {
    let mut os = os_with(&[("/f", b"abcdef")]);
    assert_eq!(
        err(&mut os, "truncate /f x"),
        "truncate: bad size 'x' (examples: 4096, 64k, 1m)"
    );
    assert_eq!(err(&mut os, "truncate / 0"), "truncate: /: is a directory");
    assert_eq!(
        err(&mut os, "truncate /f 1g"),
        "truncate: /f: no space left"
    );
    assert_eq!(os.file("/f"), Some(&b"abcdef"[..]));
}

#[test]
fn rm_mkdir_rmdir() {
    let mut os = os_with(&[("/f", b"x")]);
    ok(&mut os, "mkdir /d");
    ok(&mut os, "mkdir /d/e");
    assert_eq!(err(&mut os, "mkdir /d"), "mkdir: /d: already exists");
    assert_eq!(err(&mut os, "mkdir /x/y"), "mkdir: /x/y: not found");
    assert_eq!(err(&mut os, "rmdir /d"), "rmdir: /d: directory not empty");
    assert_eq!(err(&mut os, "rmdir /f"), "rmdir: /f: not a directory");
    assert_eq!(err(&mut os, "rm /d"), "rm: /d: is a directory");
    assert_eq!(err(&mut os, "rm /nope"), "rm: /nope: not found");
    ok(&mut os, "rmdir d/e");
    ok(&mut os, "rmdir d");
    ok(&mut os, "rm f");
    assert_eq!(ok(&mut os, "ls"), "");
}

#[test]
fn sync_ok_and_error() {
    let mut os = MockOs::new();
    ok(&mut os, "sync");
    assert_eq!(os.syncs, 1);
    os.fail("sync", 0, Errno::Unavailable);
    assert_eq!(run(&mut os, "sync"), "error: sync: directory unavailable\n");
}

// --- nodes / uptime / bench / shutdown -------------------------------------

#[test]
fn nodes_table() {
    let mut os = MockOs::new();
    assert_eq!(
        ok(&mut os, "nodes"),
        "epoch=3\n\
         \x20 dir  up       heartbeat=1000 epoch=3\n\
         * 1    up       heartbeat=420 epoch=3\n\
         \x20 2    joining  heartbeat=7 epoch=0\n"
    );
}

#[test]
fn nodes_sanitises_state() {
    let mut os = MockOs::new();
    os.cluster.nodes[2].state = "bad\nstate".to_string();
    let out = ok(&mut os, "nodes");
    assert_eq!(out.lines().count(), 4);
    assert!(out.contains("bad?state"));
}

#[test]
fn uptime_format() {
    let mut os = MockOs::new();
    os.now_ns = 12_345_678_901;
    assert_eq!(ok(&mut os, "uptime"), "up 12.345678 s\n");
    assert_eq!(format_uptime(0), "up 0.000000 s");
    assert_eq!(format_uptime(999), "up 0.000000 s");
    assert_eq!(format_uptime(1_000_001_000), "up 1.000001 s");
    assert_eq!(format_uptime(u64::MAX), "up 18446744073.709551 s");
}

#[test]
fn bench_ring_reports_percentiles() {
    let mut os = MockOs::new();
    os.ring_samples = (1..=100).collect();
    assert_eq!(
        ok(&mut os, "bench ring 100"),
        "ring round trip: n=100 median=50 ns p99=99 ns min=1 ns max=100 ns\n"
    );
    let out = ok(&mut os, "bench ring");
    assert!(out.starts_with("ring round trip: n=10000 "), "{out}");
    ok(&mut os, "bench ring 1000000");
}

#[test]
fn bench_rpc_names_its_transport() {
    let mut os = MockOs::new();
    os.ring_samples = (1..=100).collect();
    assert_eq!(
        ok(&mut os, "bench rpc 100"),
        "rpc round trip over ring: n=100 median=50 ns p99=99 ns min=1 ns max=100 ns\n"
    );
    assert_eq!(
        err(&mut os, "bench rpc 0"),
        "bench rpc: bad count '0' (1 to 1000000)"
    );
    os.fail("bench_rpc", 0, Errno::Unavailable);
    assert_eq!(
        err(&mut os, "bench rpc 5"),
        "bench rpc: directory unavailable"
    );
}

#[test]
fn bench_dir_checks_its_batch() {
    let mut os = MockOs::new();
    for bad in ["0", "65", "x", "-1"] {
        assert_eq!(
            err(&mut os, &format!("bench dir /f 1 {bad}")),
            format!("bench dir: bad batch '{bad}' (1 to 64)")
        );
    }
    // A good batch reaches the OS (the mock has no page directory).
    assert!(err(&mut os, "bench dir /f 1 64").contains("not supported"));
}

#[test]
fn bench_ring_errors() {
    let mut os = MockOs::new();
    for bad in ["0", "1000001", "abc", "-5", "1k", "99999999999999999999999"] {
        assert_eq!(
            err(&mut os, &format!("bench ring {bad}")),
            format!("bench ring: bad count '{bad}' (1 to 1000000)")
        );
    }
    assert_eq!(
        err(&mut os, "bench foo"),
        "bench: unknown subcommand 'foo' (try 'help')"
    );
    os.fail("bench_ring", 0, Errno::Unavailable);
    assert_eq!(
        err(&mut os, "bench ring 5"),
        "bench ring: directory unavailable"
    );
    let mut os = MockOs::new();
    os.ring_samples.clear();
    assert_eq!(err(&mut os, "bench ring 5"), "bench ring: no samples");
}

#[test]
fn shutdown_prints_ok_and_stops() {
    let mut os = MockOs::new();
    let mut sh = Shell::new(2);
    assert_eq!(sh.execute(&mut os, "shutdown"), Outcome::Shutdown);
    assert_eq!(os.take_out(), "ok\n");
    assert_eq!(sh.execute(&mut os, "shutdown x"), Outcome::Continue);
    assert_eq!(os.take_out(), "error: usage: shutdown\n");
}

// --- robustness ------------------------------------------------------------

/// Check the output contract for one line; returns the output.
fn check_contract(os: &mut MockOs, sh: &mut Shell, line: &str) -> String {
    let outcome = sh.execute(os, line);
    let out = os.take_out();
    assert_eq!(os.open_fds(), 0, "descriptor leaked by {line:?}");
    if line.trim().is_empty() {
        assert_eq!(out, "", "{line:?}");
        return out;
    }
    assert!(out.ends_with('\n'), "{line:?}: {out:?}");
    let lines: Vec<&str> = out.lines().collect();
    let is_status = |l: &str| l == "ok" || l.starts_with("error: ");
    let last = lines.last().copied().unwrap_or("");
    assert!(is_status(last), "{line:?}: {out:?}");
    if !line.trim_start().starts_with("cat") {
        let statuses = lines.iter().filter(|l| is_status(l)).count();
        assert_eq!(statuses, 1, "{line:?}: {out:?}");
    }
    if outcome == Outcome::Shutdown {
        assert_eq!(out, "ok\n");
    }
    for p in &os.paths {
        assert!(p.starts_with('/'), "{line:?} passed {p:?}");
    }
    out
}

#[test]
fn every_one_and_two_char_command_keeps_the_contract() {
    let mut os = os_with(&[("/a", b"x\n"), ("/d/f", b"y")]);
    let mut sh = Shell::new(1);
    let printable: Vec<char> = (0x20u8..0x7f).map(char::from).collect();
    for &a in &printable {
        check_contract(&mut os, &mut sh, &a.to_string());
        for &b in &printable {
            let line: String = [a, b].iter().collect();
            check_contract(&mut os, &mut sh, &line);
        }
    }
}

/// xorshift64*: a tiny deterministic generator for the fuzz tests.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

fn random_line(rng: &mut Rng) -> String {
    const WORDS: &[&str] = &[
        "help", "ls", "cat", "write", "append", "fill", "sum", "stat", "truncate", "rm", "mkdir",
        "rmdir", "sync", "nodes", "uptime", "bench", "ring", "shutdown", "/", "/a", "a", "/d",
        "d/f", "/d/f", "..", ".", "//", "\"", "\"\"", "\"a b\"", "0", "1", "64k", "1m", "12q",
        "4096", "-1", "1000001", "k", "x", "é", "\t", " ",
    ];
    let mut line = String::new();
    let n = rng.below(6);
    for i in 0..n {
        if i > 0 {
            line.push(' ');
        }
        match rng.below(4) {
            0 => {
                // Random bytes, printable or not.
                for _ in 0..rng.below(8) {
                    let c = match rng.below(3) {
                        0 => char::from(rng.below(0x80) as u8),
                        _ => char::from(0x20 + rng.below(0x5f) as u8),
                    };
                    line.push(c);
                }
            }
            _ => line.push_str(rng.pick(WORDS)),
        }
    }
    line
}

#[test]
fn random_lines_keep_the_contract() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut os = os_with(&[("/a", b"x\n"), ("/d/f", b"y")]);
    os.capacity = 1 << 20;
    let mut sh = Shell::new(1);
    for i in 0..5000 {
        let line = random_line(&mut rng);
        check_contract(&mut os, &mut sh, &line);
        if i % 500 == 0 {
            // Occasionally fail a random operation to exercise error paths.
            let ops = [
                "open", "read", "write", "close", "stat", "readdir", "mkdir", "unlink",
            ];
            let op = ops[rng.below(ops.len())];
            os.fail(
                op,
                rng.below(3) as u32,
                Errno::ALL[rng.below(Errno::ALL.len())],
            );
        }
    }
}

#[test]
fn every_command_with_every_errno_keeps_the_contract() {
    let lines = [
        "ls",
        "ls /a",
        "cat /a",
        "write /a t",
        "append /a t",
        "fill /a 100k",
        "sum /a",
        "stat /a",
        "truncate /a 5",
        "rm /a",
        "mkdir /n",
        "rmdir /d",
        "sync",
        "nodes",
        "uptime",
        "bench ring 3",
        "help",
    ];
    let ops = [
        "open",
        "read",
        "write",
        "truncate",
        "close",
        "stat",
        "readdir",
        "mkdir",
        "rmdir",
        "unlink",
        "sync",
        "bench_ring",
    ];
    for line in lines {
        for op in ops {
            for e in Errno::ALL {
                for after in 0..2 {
                    let mut os = os_with(&[("/a", b"x\n"), ("/d/f", b"y")]);
                    os.max_io = 40_000;
                    os.fail(op, after, e);
                    let mut sh = Shell::new(1);
                    check_contract(&mut os, &mut sh, line);
                }
            }
        }
    }
}

#[test]
fn bench_atomics_counts_resets_and_refuses_bad_counts() {
    let mut os = MockOs::new();
    assert_eq!(
        ok(&mut os, "bench atomics 1000"),
        "atomics: 1000 increments in 1 us (1 ns each); probe 0 -> 1000\n"
    );
    assert_eq!(
        ok(&mut os, "bench atomics reset"),
        "atomics probe reset (was 1000)\n"
    );
    assert_eq!(os.atomic_probe, 0);
    for bad in ["0", "-1", "x", "100000001"] {
        assert_eq!(
            err(&mut os, &format!("bench atomics {bad}")),
            format!("bench atomics: bad count '{bad}' (1 to 100000000, or reset)")
        );
    }
    assert_eq!(os.atomic_probe, 0, "a refused count changes nothing");
    os.fail("bench_atomics", 0, Errno::Unavailable);
    assert_eq!(
        err(&mut os, "bench atomics 5"),
        "bench atomics: directory unavailable"
    );
}

#[test]
fn bench_doorbell_reports_percentiles_or_not_supported() {
    let mut os = MockOs::new();
    assert_eq!(
        err(&mut os, "bench doorbell 10"),
        "bench doorbell: not supported"
    );
    os.doorbells = true;
    os.ring_samples = (1..=100).collect();
    assert_eq!(
        ok(&mut os, "bench doorbell 100"),
        "doorbell round trip: n=100 median=50 ns p99=99 ns min=1 ns max=100 ns mean=50 ns\n"
    );
    assert_eq!(
        err(&mut os, "bench doorbell 0"),
        "bench doorbell: bad count '0' (1 to 1000000)"
    );
    os.fail("bench_doorbell", 0, Errno::Unavailable);
    assert_eq!(
        err(&mut os, "bench doorbell 5"),
        "bench doorbell: directory unavailable"
    );
}

// --- app -----------------------------------------------------------------

#[test]
fn app_runs_a_workload_and_refuses_bad_input() {
    let mut os = MockOs::new();
    os.capacity = 64 << 20;
    os.can_seek = true;
    let ds = crate::app::dataset::plan("kv", 256 << 10, 1, "/apps/kv").unwrap();
    crate::app::dataset::write_os(&mut os, &ds).unwrap();
    let out = ok(&mut os, "app kv --ops 20 --threads 4");
    assert!(out.starts_with("app kv on node 1"), "{out}");
    assert_eq!(out.lines().filter(|l| l.starts_with("RESULT {")).count(), 1);
    assert!(
        err(&mut os, "app").starts_with("usage: app NAME"),
        "missing NAME"
    );
    assert_eq!(
        err(&mut os, "app nope"),
        "app: unknown app 'nope' (one of webserver, fileserver, varmail, kv, infer, ann, search)"
    );
    assert_eq!(
        err(&mut os, "app kv --threads 0"),
        "app: bad value '0' for --threads (1..=256)"
    );
    assert!(err(&mut os, "app ann --ops 1").contains("--dataset ann:SIZE"));
    assert!(ok(&mut os, "help app").contains("app NAME [--runtime S]"));
}

// --- cache policy, cache config, locality ----------------------------------

#[test]
fn cache_policy_shows_and_sets_and_names_the_valid_ones_on_error() {
    let mut os = MockOs::new();
    let out = ok(&mut os, "cache policy");
    assert!(out.starts_with("policy     fifo\n"), "{out}");
    assert!(out
        .contains("available  fifo, lru, clock, lfu, mru, s3fifo, sieve, arc, get-scan, cluster"));
    let out = ok(&mut os, "cache policy s3fifo");
    assert!(out.starts_with("policy     s3fifo\n"), "{out}");
    assert_eq!(os.controls.unwrap().policy, PolicyName::S3Fifo);
    let e = err(&mut os, "cache policy random");
    assert_eq!(
        e,
        "cache policy: unknown policy 'random' (valid: fifo, lru, clock, lfu, mru, s3fifo, sieve, arc, get-scan, cluster)"
    );
    assert_eq!(os.controls.unwrap().policy, PolicyName::S3Fifo, "unchanged");
    assert_eq!(
        err(&mut os, "cache policy lru mru"),
        "usage: cache policy [NAME] [--group G]"
    );
    os.controls = None;
    assert_eq!(err(&mut os, "cache policy"), "cache policy: not supported");
    assert_eq!(
        err(&mut os, "cache policy lru"),
        "cache policy: not supported"
    );
}

#[test]
fn cache_config_shows_sets_all_or_nothing_and_explains_bad_input() {
    let mut os = MockOs::new();
    assert_eq!(
        ok(&mut os, "cache config"),
        "policy  fifo\nlimit   none\nttl     off\n"
    );
    assert_eq!(
        ok(&mut os, "cache config ttl=30 limit=128"),
        "policy  fifo\nlimit   128\nttl     30\n"
    );
    assert_eq!(
        ok(&mut os, "cache config limit=none policy=lfu ttl=0"),
        "policy  lfu\nlimit   none\nttl     off\n"
    );
    for (line, msg) in [
        ("cache config foo=1", "unknown key 'foo' (valid: ttl, limit, policy, group)"),
        ("cache config ttl", "'ttl': expected KEY=VALUE"),
        ("cache config ttl=abc", "ttl=abc: expected seconds, 0 (off) to 2592000"),
        ("cache config ttl=-1", "ttl=-1: expected seconds, 0 (off) to 2592000"),
        ("cache config ttl=2592001", "ttl=2592001: expected seconds, 0 (off) to 2592000"),
        (
            "cache config limit=x",
            "limit=x: expected pages, 64 to 4294967296 (0 or none: the pool)",
        ),
        (
            "cache config limit=63",
            "limit=63: expected pages, 64 to 4294967296 (0 or none: the pool)",
        ),
        (
            "cache config policy=nope",
            "policy=nope: expected one of fifo, lru, clock, lfu, mru, s3fifo, sieve, arc, get-scan, cluster",
        ),
    ] {
        assert_eq!(err(&mut os, line), alloc::format!("cache config: {msg}"), "{line}");
    }
    // A bad word anywhere leaves everything as it was.
    err(&mut os, "cache config ttl=5 limit=x");
    let k = os.controls.unwrap();
    assert_eq!((k.ttl_s, k.limit, k.policy), (0, None, PolicyName::Lfu));
}

#[test]
fn locality_prints_each_run() {
    let mut os = MockOs::new();
    os.locality.insert(
        "/f".to_string(),
        alloc::vec![
            LocalityRange {
                first: 0,
                pages: 16,
                owner: 1,
                sharers: 2
            },
            LocalityRange {
                first: 16,
                pages: 32,
                owner: 0,
                sharers: 0
            },
        ],
    );
    os.locality.insert("/empty".to_string(), alloc::vec![]);
    assert_eq!(
        ok(&mut os, "locality /f"),
        "pages 0-15 owner=1 sharers=2\npages 16-47 on disk only\n"
    );
    assert_eq!(ok(&mut os, "locality empty"), "/empty: no pages\n");
    assert_eq!(err(&mut os, "locality /nope"), "locality: /nope: not found");
    assert_eq!(err(&mut os, "locality"), "usage: locality PATH");
    // A bogus run from the OS prints, without panicking.
    os.locality.insert(
        "/odd".to_string(),
        alloc::vec![LocalityRange {
            first: u64::MAX,
            pages: 0,
            owner: 3,
            sharers: 0
        }],
    );
    ok(&mut os, "locality /odd");
}

// --- bench miss ----------------------------------------------------------

fn miss_os() -> MockOs {
    use crate::os::{MissCounters, MissStats};
    let mut os = MockOs::new();
    os.can_seek = true;
    os.miss_per_read = Some(MissCounters {
        round_trip_ns: 90_000,
        fill_ns: 2_000,
        page_fills: MissStats {
            count: 1,
            lookup_ns: 1_000,
            disk_ns: 80_000,
            fill_ns: 3_000,
            reply_ns: 500,
        },
        file_reads: MissStats::default(),
    });
    os
}

#[test]
fn bench_miss_splits_every_miss_into_phases_and_removes_its_file() {
    let mut os = miss_os();
    let out = ok(&mut os, "bench miss 8");
    assert!(
        out.starts_with(
            "bench miss: 8 cold 4 KiB misses, mode unknown, directory timed 8 of them\n"
        ),
        "{out}"
    );
    // Each read takes 100 us on the mock's clock: 90 in round trips (84.5
    // of them the directory's service), 2 installing.
    for (phase, us) in [
        ("node: call + copy out", "8.00"),
        ("transport", "5.50"),
        ("directory: lookup", "1.00"),
        ("directory: disk read", "80.00"),
        ("directory: fill", "3.00"),
        ("directory: reply", "0.50"),
        ("node: fill/map", "2.00"),
        ("total", "100.00"),
    ] {
        let line = out
            .lines()
            .find(|l| l.starts_with(phase))
            .unwrap_or_else(|| panic!("no {phase} line in {out}"));
        assert!(line.contains(us), "{line}");
    }
    assert!(out
        .contains("RESULT {\"bench\":\"miss\",\"mode\":\"unknown\",\"misses\":8,\"dir_timed\":8,"));
    assert_eq!(os.file("/bench-miss"), None, "the scratch file is removed");
    assert_eq!(os.reads, 9, "page 0 untimed, then 8 misses");
    assert!(os.syncs >= 1);
}

#[test]
fn bench_miss_errors_are_one_line_and_leave_no_file() {
    let mut os = miss_os();
    for n in ["0", "1025", "x"] {
        assert_eq!(
            err(&mut os, &format!("bench miss {n}")),
            format!("bench miss: bad count '{n}' (1 to 1024)")
        );
    }
    // No cache drop or counters here (the default mock): a clear error.
    let mut os = MockOs::new();
    os.can_seek = true;
    assert_eq!(
        err(&mut os, "bench miss 2"),
        "bench miss: /bench-miss: cache drop: not supported"
    );
    assert_eq!(os.file("/bench-miss"), None);
}
