use super::*;

fn parse(raw: &str, sent: &str, node: u8) -> Option<CmdOutput> {
    parse_response(raw.as_bytes(), sent.as_bytes(), node, false)
}

#[test]
fn status_lines() {
    assert_eq!(Status::parse("ok"), Some(Status::Ok));
    assert_eq!(Status::parse("ok\r"), Some(Status::Ok));
    assert_eq!(
        Status::parse("error: no such file"),
        Some(Status::Error("no such file".into()))
    );
    assert_eq!(Status::parse("error:"), Some(Status::Error(String::new())));
    assert_eq!(Status::parse("okay"), None);
    assert_eq!(Status::parse(" ok"), None);
    assert_eq!(Status::parse("errors: 3"), None);
    assert_eq!(Status::parse(""), None);
    assert_eq!(Status::Error("x".into()).to_string(), "error: x");
}

#[test]
fn log_lines() {
    assert!(is_log_line("[    0.012345] n1 INFO  text"));
    assert!(is_log_line("[12.5] dir WARN x"));
    assert!(!is_log_line("[n1] hi"));
    assert!(!is_log_line("[    0.] x"));
    assert!(!is_log_line("hello"));
    assert!(!is_log_line("[1234] x"));
}

#[test]
fn visible_text() {
    assert_eq!(visible("ab\u{8}c"), "ac");
    assert_eq!(visible("\u{1b}[1;32mgreen\u{1b}[0m"), "green");
    assert_eq!(visible("a\u{7}b\tc"), "abc");
    assert_eq!(strip_prompts("n1> n1> ls", 1), "ls");
    assert_eq!(strip_prompts("n2> ls", 1), "n2> ls");
}

#[test]
fn splits_lines() {
    let (lines, rest) = split_lines("a\r\nb\n\r\nc");
    assert_eq!(lines, vec!["a", "b", ""]);
    assert_eq!(rest, "c");
    let (lines, rest) = split_lines("");
    assert!(lines.is_empty());
    assert_eq!(rest, "");
}

#[test]
fn simple_command() {
    let raw = "cat /x\r\nhi\r\nthere\r\nok\r\nn2> ";
    let out = parse(raw, "cat /x", 2).expect("complete");
    assert_eq!(out.lines, vec!["hi", "there"]);
    assert_eq!(out.status, Status::Ok);
    assert!(out.logs.is_empty());
    assert!(!out.closed);
    assert_eq!(out.text(), "hi\nthere");
    assert_eq!(out.raw, raw);
}

#[test]
fn error_status() {
    let raw = "cat /nope\r\nerror: not found\r\nn1> ";
    let out = parse(raw, "cat /nope", 1).expect("complete");
    assert!(out.lines.is_empty());
    assert_eq!(out.error_message(), Some("not found"));
    match out.into_result() {
        Err(Error::Command { node, message, .. }) => {
            assert_eq!(node, 1);
            assert_eq!(message, "not found");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn incomplete_answers() {
    // No prompt yet.
    assert!(parse("ls\r\na\r\nok\r\n", "ls", 1).is_none());
    // Prompt of another node.
    assert!(parse("ls\r\nok\r\nn2> ", "ls", 1).is_none());
    // Echo only.
    assert!(parse("ls\r\n", "ls", 1).is_none());
    // Prompt without a status line before it.
    assert!(parse("ls\r\na\r\nn1> ", "ls", 1).is_none());
    // Partial prompt.
    assert!(parse("ls\r\nok\r\nn1>", "ls", 1).is_none());
    // A leftover status + prompt before the echo is not our answer.
    assert!(parse("ok\r\nn1> ls\r\nfile\r\n", "ls", 1).is_none());
    // Nothing at all.
    assert!(parse("", "ls", 1).is_none());
}

#[test]
fn leftovers_before_echo_become_logs() {
    let raw = "\r\nn1> ok\r\nn1> ls /\r\nt/\r\nok\r\nn1> ";
    let out = parse(raw, "ls /", 1).expect("complete");
    assert_eq!(out.lines, vec!["t/"]);
    assert_eq!(out.logs, vec!["", "n1> ok"]);
}

#[test]
fn interleaved_and_trailing_logs() {
    let raw = "nodes\r\n[    1.000000] n1 INFO  hello\r\n1 up\r\n2 up\r\nok\r\nn1> [    1.5] n1 WARN late\r\n";
    let out = parse(raw, "nodes", 1).expect("complete");
    assert_eq!(out.lines, vec!["1 up", "2 up"]);
    assert_eq!(
        out.logs,
        vec!["[    1.000000] n1 INFO  hello", "[    1.5] n1 WARN late"]
    );
    // A partial trailing log line: wait for the rest.
    assert!(parse("nodes\r\nok\r\nn1> [    1.5] n1 WA", "nodes", 1).is_none());
}

#[test]
fn output_that_looks_like_status_or_prompt() {
    // A file whose content contains "ok" and a prompt-like text.
    let raw = "cat /f\r\nok\r\nn1> fake\r\nend\r\nok\r\nn1> ";
    let out = parse(raw, "cat /f", 1).expect("complete");
    assert_eq!(out.lines, vec!["ok", "n1> fake", "end"]);
    assert_eq!(out.status, Status::Ok);
}

#[test]
fn echo_with_editing_and_truncation() {
    let raw = "wrx\u{8} \u{8}ite /a b\r\nok\r\nn3> ";
    let out = parse(raw, "write /a b", 3).expect("complete");
    assert!(out.lines.is_empty());
    let long = "a".repeat(5000);
    let raw = format!("{}\r\nerror: line too long\r\nn1> ", &long[..255]);
    let out = parse(&raw, &long, 1).expect("complete");
    assert_eq!(out.error_message(), Some("line too long"));
    assert!(is_echo("n1> ls  ", "ls", 1));
    assert!(!is_echo("lsx", "ls", 1));
    assert!(!is_echo("l", "ls", 1));
}

#[test]
fn binary_input() {
    let sent = b"\xff\xfezz\x01";
    let raw = b"\xff\xfezz\r\nerror: unknown command\r\nn1> ";
    let out = parse_response(raw, sent, 1, false).expect("complete");
    assert_eq!(out.error_message(), Some("unknown command"));
    assert!(out.lines.is_empty());
    // A filtered (empty) echo of binary input.
    let out = parse_response(b"\r\nerror: bad input\r\nn1> ", sent, 1, false).expect("complete");
    assert_eq!(out.error_message(), Some("bad input"));
    // No echo at all.
    let out = parse_response(b"error: junk\r\nn1> ", sent, 1, false).expect("complete");
    assert_eq!(out.error_message(), Some("junk"));
}

#[test]
fn closed_after_status() {
    let raw = b"shutdown\r\n[    9.0] n1 INFO  bye\r\nok\r\n";
    assert!(parse_response(raw, b"shutdown", 1, false).is_none());
    let out = parse_response(raw, b"shutdown", 1, true).expect("complete");
    assert!(out.closed);
    assert!(out.is_ok());
    assert_eq!(out.logs, vec!["[    9.0] n1 INFO  bye"]);
    // Closed without a status line: no answer.
    assert!(parse_response(b"shutdown\r\n", b"shutdown", 1, true).is_none());
    // Closed with the status but no final newline.
    let out = parse_response(b"shutdown\r\nok", b"shutdown", 1, true).expect("complete");
    assert!(out.is_ok());
}

#[test]
fn empty_output_lines_are_kept() {
    let raw = "cat /e\r\n\r\nx\r\n\r\nok\r\nn1> ";
    let out = parse(raw, "cat /e", 1).expect("complete");
    assert_eq!(out.lines, vec!["", "x", ""]);
}
