//! Line framing, argument counts, paths, `help`.

use super::*;

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
            "bench ring [COUNT] | bench rpc [COUNT] | bench pingpong [COUNT] | bench atomics [COUNT|reset] | bench doorbell [COUNT] | bench trace [COUNT] | bench calibrate [ROUNDS] | bench read PATH | bench miss [N] [read|batch] | bench inv PATH | bench dir PATH [ROUNDS] [BATCH]",
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
