//! Property-based fuzzing of the shell (extends `tests.rs` and the seeded
//! byte fuzzing of `line.rs`): lines built from the command grammar with
//! garbage arguments, and arbitrary bytes typed through the line editor,
//! run on the [`MockOs`]. Every line prints nothing (blank), or ends with
//! exactly one status line, `ok` or `error: ...`; nothing panics and no
//! descriptor leaks.
//!
//! Budget: `cases` below (override with `PROPTEST_CASES=N`); failures are
//! persisted in `userland/proptest-regressions/shell.txt` (committed) and
//! replayed first on every run.

use super::*;
use crate::line::LineEditor;
use crate::mock::MockOs;
use alloc::string::ToString;
use alloc::vec::Vec;
use proptest::prelude::*;
use proptest::test_runner::Config;

fn cases(default: u32) -> Config {
    onecopy_fuzzcfg::config(default, "proptest-regressions/shell.txt")
}

/// Argument words: paths, sizes and counts (kept small enough for the
/// mock: at most a few MiB), options, and garbage.
fn word() -> impl Strategy<Value = String> {
    let fixed = prop::sample::select(vec![
        "/",
        "/f",
        "/d",
        "/d/g",
        "/nope",
        "/d/",
        "//f",
        "/f/x",
        "/.",
        "/..",
        "f",
        "",
        "\"\"",
        "\"/my file\"",
        "\"unterminated",
        "0",
        "1",
        "7",
        "4096",
        "4k",
        "64k",
        "1m",
        "-1",
        "99999999999999999999999",
        "0x10",
        "1x",
        "abc",
        "k",
        "--name=j",
        "--rw=randwrite",
        "--bs=4k",
        "--size=16k",
        "--size=",
        "--rw",
        "--nonsense=1",
        "--numjobs=0",
        "--runtime=1",
        "--fsync=1",
        "--bs=3",
        "=",
        "--",
        "\t",
        "\\",
        "'",
    ])
    .prop_map(str::to_string);
    prop_oneof![
        4 => fixed,
        1 => "[ -~]{0,12}",
        1 => proptest::collection::vec(any::<char>(), 0..6).prop_map(|c| c.into_iter().collect()),
    ]
}

/// A line: a known command (or a near miss) and a few words.
fn line() -> impl Strategy<Value = String> {
    let names: Vec<&'static str> = commands()
        .iter()
        .map(|c| c.name)
        .filter(|n| *n != "shutdown")
        .chain(["bench", "cache", "dir", "LS", "fio2"])
        .collect();
    (
        prop::sample::select(names),
        proptest::collection::vec(word(), 0..5),
        prop::sample::select(vec![" ", "  ", "\t", " \r"]),
    )
        .prop_map(|(name, words, sep)| {
            let mut l = name.to_string();
            for w in words {
                l.push_str(sep);
                l.push_str(&w);
            }
            l
        })
}

fn os() -> MockOs {
    let mut os = MockOs::new();
    os.put("/f", b"hello\n");
    os.put("/d/g", &[0xff, 0, 7, b'\n', 0x1b]);
    os.put("/my file", b"x");
    os
}

/// Run `line` and check the framing of what it printed.
fn check(os: &mut MockOs, shell: &mut Shell, line: &str) -> Result<(), TestCaseError> {
    let outcome = shell.execute(os, line);
    let out = os.take_out();
    prop_assert_eq!(os.open_fds(), 0, "descriptor leaked by {:?}", line);
    if outcome == Outcome::Shutdown {
        prop_assert_eq!(line.split_whitespace().next(), Some("shutdown"));
        return Ok(());
    }
    if line.trim().is_empty() {
        prop_assert_eq!(out, "");
        return Ok(());
    }
    let body = out.strip_suffix('\n');
    prop_assert!(body.is_some(), "{:?}: no final newline: {:?}", line, out);
    let last = body
        .unwrap_or_default()
        .rsplit('\n')
        .next()
        .unwrap_or_default();
    prop_assert!(
        last == "ok" || last.starts_with("error: "),
        "{:?}: no status line: {:?}",
        line,
        out
    );
    Ok(())
}

proptest! {
    #![proptest_config(cases(3000))]

    #[test]
    fn grammar_lines_end_with_one_status(lines in proptest::collection::vec(line(), 1..6)) {
        let mut os = os();
        let mut shell = Shell::new(1);
        for l in lines {
            check(&mut os, &mut shell, &l)?;
        }
    }

    #[test]
    fn arbitrary_bytes_through_the_line_editor(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut os = os();
        let mut shell = Shell::new(1);
        let mut ed = LineEditor::new();
        for b in bytes {
            if let Some(l) = ed.feed(b, &mut |_| {}) {
                check(&mut os, &mut shell, &l)?;
            }
        }
    }

    #[test]
    fn arbitrary_strings_as_lines(l in any::<String>()) {
        let mut os = os();
        let mut shell = Shell::new(1);
        check(&mut os, &mut shell, &l)?;
    }
}
