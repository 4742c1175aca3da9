//! The docs checked against the code (host only, part of a plain `cargo
//! test` and of `tests/run.sh --unit`): every name a reader types is
//! defined once in the code, and a list written elsewhere (the launcher's
//! shell variables, the tables of `docs/USAGE.md`) must match it.
//!
//! - `qemu-run.sh`'s `MODES`, `POLICIES`, `BOOT_OPTIONS` and
//!   `LAUNCHER_OPTIONS`, and `onecopy-bench`'s modes and policy help,
//!   against `fabric::config`;
//! - `docs/USAGE.md`'s tables (launcher flags, boot options, modes,
//!   eviction policies, shell reference) against `qemu-run.sh --help`,
//!   `fabric::config` and the shell's command table, both ways;
//! - every `qemu-run.sh --flag` written in README.md and docs/*.md exists,
//!   and every shell command written there (`-e 'K: cmd'`, `nK> cmd`) is
//!   one of the shell's;
//! - every relative link of README.md and docs/*.md points to a file;
//! - the integration tests `tests/run.sh` runs are the `[[test]]`s of
//!   `tests/Cargo.toml` that boot QEMU, and `docs/TESTING.md` names each;
//! - no issue number in the docs (outside CHANGELOG.md and the notebook)
//!   or in code comments: they say why, not when;
//! - no two source files of a crate import each other (dependencies point
//!   down), a file and its own parent module apart.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use fabric::config::{Mode, PolicyName, BOOT_OPTIONS};
use onecopy_tests::importcheck::{import_cycles, module_of};
use regex::Regex;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn read(rel: &str) -> String {
    fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// README.md and the markdown files directly in docs/ (not the notebook
/// nor the generated reports under docs/results/).
fn doc_files() -> Vec<(String, String)> {
    let mut v = vec![("README.md".to_string(), read("README.md"))];
    let mut names: Vec<String> = fs::read_dir(root().join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .collect();
    names.sort();
    for n in names {
        let rel = format!("docs/{n}");
        let text = read(&rel);
        v.push((rel, text));
    }
    v
}

/// The body of the section under `## title` (up to the next `## `).
fn section<'a>(md: &'a str, title: &str) -> &'a str {
    let head = format!("## {title}\n");
    let start = md
        .find(&head)
        .unwrap_or_else(|| panic!("no section '## {title}'"))
        + head.len();
    let rest = &md[start..];
    match rest.find("\n## ") {
        Some(end) => &rest[..end],
        None => rest,
    }
}

/// The cells of a table row, split on unescaped `|`, with `\|` unescaped.
fn cells(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = line.trim().trim_start_matches('|').chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cur.push('|');
                chars.next();
            }
            '|' => out.push(std::mem::take(&mut cur).trim().to_string()),
            _ => cur.push(c),
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// The first cell of every body row of the tables in `body`, without its
/// backticks: `` `cache stats` `` -> `cache stats`.
fn first_column(body: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_table = false;
    for line in body.lines() {
        if !line.trim_start().starts_with('|') {
            in_table = false;
            continue;
        }
        let c = cells(line);
        if !in_table {
            in_table = true; // the header row
            continue;
        }
        if c.first().is_some_and(|x| x.starts_with("---")) {
            continue;
        }
        let first = c.first().cloned().unwrap_or_default();
        let inner = first
            .strip_prefix('`')
            .and_then(|x| x.split_once('`'))
            .map(|(x, _)| x.to_string())
            .unwrap_or(first);
        out.push(inner);
    }
    out
}

fn sorted(v: impl IntoIterator<Item = String>) -> BTreeSet<String> {
    v.into_iter().collect()
}

/// A `NAME="a b c"` line of qemu-run.sh, as its words.
fn script_list(name: &str) -> Vec<String> {
    file_list("qemu-run.sh", name)
}

/// A `NAME="a b c"` line of the script `rel`, as its words.
fn file_list(rel: &str, name: &str) -> Vec<String> {
    let script = read(rel);
    let prefix = format!("{name}=\"");
    let line = script
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("{rel} has no {name}=\"...\" line"));
    line[prefix.len()..]
        .trim_end_matches('"')
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

fn launcher_help() -> String {
    let out = Command::new("bash")
        .arg(root().join("qemu-run.sh"))
        .arg("--help")
        .output()
        .expect("run qemu-run.sh --help");
    assert!(out.status.success(), "qemu-run.sh --help failed");
    String::from_utf8(out.stdout).expect("utf-8 help")
}

/// The long flags `qemu-run.sh --help` lists as options.
fn launcher_flags() -> BTreeSet<String> {
    let re = Regex::new(r"(?m)^  (?:-h, )?(--[a-z][a-z0-9-]*)").unwrap();
    let help = launcher_help();
    let flags: BTreeSet<String> = re.captures_iter(&help).map(|c| c[1].to_string()).collect();
    assert!(
        flags.contains("--nodes") && flags.contains("--help"),
        "{flags:?}"
    );
    flags
}

#[test]
fn the_name_lists_match_the_kernel() {
    let modes: Vec<String> = Mode::ALL.iter().map(|m| m.as_str().to_string()).collect();
    assert_eq!(
        script_list("MODES"),
        modes,
        "qemu-run.sh MODES vs Mode::ALL"
    );
    let policies: Vec<String> = PolicyName::ALL
        .iter()
        .map(|p| p.as_str().to_string())
        .collect();
    assert_eq!(
        script_list("POLICIES"),
        policies,
        "qemu-run.sh POLICIES vs PolicyName::ALL"
    );
    let bench: Vec<String> = onecopy_tests::bench::opts::MODES
        .iter()
        .map(|m| m.to_string())
        .collect();
    assert_eq!(bench, modes, "onecopy-bench's MODES vs Mode::ALL");
    for p in &policies {
        assert!(
            onecopy_tests::bench::opts::help_text().contains(p.as_str()),
            "onecopy-bench --help does not list policy {p}"
        );
    }
    assert_eq!(
        file_list("tools/bench-policy-apps.sh", "POLICIES"),
        policies,
        "tools/bench-policy-apps.sh's POLICIES (every policy) vs PolicyName::ALL"
    );
    // The application workloads: userland::app::NAMES against the
    // launcher's --dataset check and the shell's help.
    let apps: Vec<String> = userland::app::NAMES.iter().map(|a| a.to_string()).collect();
    let script = read("qemu-run.sh");
    let dataset = Regex::new(r"\^\(([a-z|]+)\):").unwrap();
    let in_script: Vec<String> = dataset
        .captures(&script)
        .expect("qemu-run.sh's --dataset pattern")[1]
        .split('|')
        .map(str::to_string)
        .collect();
    assert_eq!(
        in_script, apps,
        "qemu-run.sh --dataset names vs userland::app::NAMES"
    );
    let app_help = userland::shell::commands()
        .iter()
        .find(|c| c.name == "app")
        .expect("app command")
        .help;
    for a in &apps {
        assert!(
            app_help.contains(a.as_str()),
            "`help app` does not name {a}"
        );
    }
    let user = BOOT_OPTIONS
        .iter()
        .filter(|o| !o.launcher_only)
        .map(|o| o.key.to_string());
    assert_eq!(
        sorted(script_list("BOOT_OPTIONS")),
        sorted(user),
        "qemu-run.sh BOOT_OPTIONS vs fabric::config::BOOT_OPTIONS"
    );
    let launcher = BOOT_OPTIONS
        .iter()
        .filter(|o| o.launcher_only)
        .map(|o| o.key.to_string());
    assert_eq!(
        sorted(script_list("LAUNCHER_OPTIONS")),
        sorted(launcher),
        "qemu-run.sh LAUNCHER_OPTIONS vs BOOT_OPTIONS' launcher_only keys"
    );
}

#[test]
fn usage_tables_match_the_code() {
    let usage = read("docs/USAGE.md");

    let table: BTreeSet<String> = first_column(section(&usage, "Launcher flags"))
        .iter()
        .filter_map(|c| c.split_whitespace().next())
        .filter(|w| w.starts_with("--"))
        .map(str::to_string)
        .collect();
    assert_eq!(
        table,
        launcher_flags(),
        "docs/USAGE.md 'Launcher flags' vs qemu-run.sh --help"
    );

    let keys = sorted(BOOT_OPTIONS.iter().map(|o| o.key.to_string()));
    assert_eq!(
        sorted(first_column(section(&usage, "Boot options"))),
        keys,
        "docs/USAGE.md 'Boot options' vs fabric::config::BOOT_OPTIONS"
    );

    let modes = sorted(Mode::ALL.iter().map(|m| m.as_str().to_string()));
    assert_eq!(
        sorted(first_column(section(&usage, "Modes"))),
        modes,
        "docs/USAGE.md 'Modes' vs Mode::ALL"
    );

    let policies = sorted(PolicyName::ALL.iter().map(|p| p.as_str().to_string()));
    assert_eq!(
        sorted(first_column(section(&usage, "Eviction policies"))),
        policies,
        "docs/USAGE.md 'Eviction policies' vs PolicyName::ALL"
    );

    let rows = first_column(section(&usage, "Shell reference"));
    let usages: Vec<String> = userland::shell::commands()
        .iter()
        .map(|c| c.usage.to_string())
        .collect();
    for r in &rows {
        assert!(
            usages.contains(r),
            "docs/USAGE.md shell reference row `{r}` is no command's usage (the shell's: {usages:#?})"
        );
    }
    for u in &usages {
        assert_eq!(
            rows.iter().filter(|r| *r == u).count(),
            1,
            "docs/USAGE.md shell reference: `{u}` must have exactly one row"
        );
    }
}

/// Lines of a markdown file with `\`-continued lines joined.
fn joined_lines(md: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in md.lines() {
        if let Some(head) = line.strip_suffix('\\') {
            cur.push_str(head);
            cur.push(' ');
            continue;
        }
        cur.push_str(line);
        out.push(std::mem::take(&mut cur));
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[test]
fn every_launcher_flag_in_the_docs_exists() {
    let flags = launcher_flags();
    let quoted = Regex::new(r#"'[^']*'|"[^"]*""#).unwrap();
    let flag = Regex::new(r"(^|[\s\[(])(--[a-z][a-z0-9-]*)").unwrap();
    let mut seen = 0;
    for (file, text) in doc_files() {
        for line in joined_lines(&text) {
            for (at, _) in line.match_indices("qemu-run.sh") {
                let rest = &line[at + "qemu-run.sh".len()..];
                // The command ends with its code span (or the line).
                let rest = rest.split('`').next().unwrap_or("");
                let rest = quoted.replace_all(rest, "");
                for c in flag.captures_iter(&rest) {
                    seen += 1;
                    assert!(
                        flags.contains(&c[2]),
                        "{file}: `qemu-run.sh ... {}` is not in qemu-run.sh --help: {line}",
                        &c[2]
                    );
                }
            }
        }
    }
    assert!(seen > 10, "found only {seen} launcher flags in the docs");
}

/// Does `cmd` start with one of the shell's command names?
fn is_shell_command(cmd: &str) -> bool {
    let words: Vec<&str> = cmd.split_whitespace().collect();
    userland::shell::commands().iter().any(|c| {
        let name: Vec<&str> = c.name.split(' ').collect();
        words.len() >= name.len() && words[..name.len()] == name[..]
    })
}

#[test]
fn every_shell_command_in_the_docs_exists() {
    let exec = Regex::new(r#"-e ?['"]\d+: ?([^'"]*)['"]"#).unwrap();
    let prompt = Regex::new(r"^n\d+> (.+)$").unwrap();
    let mut seen = 0;
    for (file, text) in doc_files() {
        for line in text.lines() {
            let mut cmds: Vec<String> = exec
                .captures_iter(line)
                .map(|c| c[1].trim().to_string())
                .collect();
            if let Some(c) = prompt.captures(line.trim_end()) {
                cmds.push(c[1].trim().to_string());
            }
            for cmd in cmds.iter().filter(|c| !c.is_empty() && !c.contains("...")) {
                seen += 1;
                assert!(
                    is_shell_command(cmd),
                    "{file}: '{cmd}' is not a shell command (userland/src/shell/commands.rs): {line}"
                );
            }
        }
    }
    assert!(seen > 5, "found only {seen} shell commands in the docs");
}

#[test]
fn relative_links_in_the_docs_point_to_files() {
    let link = Regex::new(r"\]\(([^)\s]+)\)").unwrap();
    for (file, text) in doc_files() {
        let dir = root().join(&file).parent().unwrap().to_path_buf();
        for c in link.captures_iter(&text) {
            let target = &c[1];
            if target.contains("://") || target.starts_with('#') || target.starts_with("mailto:") {
                continue;
            }
            let path = target.split('#').next().unwrap_or(target);
            assert!(
                dir.join(path).exists(),
                "{file}: link to {target}, which does not exist"
            );
        }
    }
}

/// `[[test]]` entries of tests/Cargo.toml: (name, boots QEMU).
fn cargo_tests() -> Vec<(String, bool)> {
    let toml = read("tests/Cargo.toml");
    let mut out: Vec<(String, bool)> = Vec::new();
    let mut in_test = false;
    for line in toml.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_test = line == "[[test]]";
            continue;
        }
        if !in_test {
            continue;
        }
        if let Some(n) = line.strip_prefix("name = \"") {
            out.push((n.trim_end_matches('"').to_string(), false));
        } else if line == "test = false" {
            if let Some(last) = out.last_mut() {
                last.1 = true;
            }
        }
    }
    out
}

#[test]
fn integration_tests_are_run_and_documented() {
    let tests = cargo_tests();
    let qemu: BTreeSet<String> = tests
        .iter()
        .filter(|(n, q)| *q && n != "bench")
        .map(|(n, _)| n.clone())
        .collect();
    assert!(qemu.contains("cluster"), "{tests:?}");
    let run = read("tests/run.sh");
    let line = run
        .lines()
        .find(|l| l.contains("cargo test --no-fail-fast -p onecopy-tests"))
        .expect("tests/run.sh's integration test line");
    let ran: BTreeSet<String> = Regex::new(r"--test (\w+)")
        .unwrap()
        .captures_iter(line)
        .map(|c| c[1].to_string())
        .collect();
    assert_eq!(
        ran, qemu,
        "tests/run.sh's integration tests vs tests/Cargo.toml's QEMU tests"
    );
    let testing = read("docs/TESTING.md");
    for (name, _) in &tests {
        assert!(
            testing.contains(&format!("tests/tests/{name}.rs")),
            "docs/TESTING.md does not name tests/tests/{name}.rs"
        );
    }
}

/// Files under `dir` (recursively) whose name ends with one of `exts`,
/// skipping build output.
fn source_files(dir: &Path, exts: &[&str], out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if p.is_dir() {
            if name != "target" && !name.starts_with('.') {
                source_files(&p, exts, out);
            }
        } else if exts.iter().any(|x| name.ends_with(x)) {
            out.push(p);
        }
    }
}

#[test]
fn no_issue_numbers_in_docs_or_code() {
    // Built from parts, so this file does not match itself.
    let issue = Regex::new(&format!(r"(?i)\b{}{} ?#\d+", "iss", "ue")).unwrap();
    let item = Regex::new(&format!(r"(?i)\b{}{} \d+\b", "it", "em")).unwrap();
    for (file, text) in doc_files() {
        for (n, line) in text.lines().enumerate() {
            assert!(
                !issue.is_match(line) && !item.is_match(line),
                "{file}:{}: history belongs in CHANGELOG.md: {line}",
                n + 1
            );
        }
    }
    let mut files = Vec::new();
    for d in ["kernel", "dirsvc", "userland", "tests", "tools", "boot"] {
        source_files(&root().join(d), &[".rs", ".sh", ".py", ".toml"], &mut files);
    }
    files.push(root().join("qemu-run.sh"));
    assert!(files.len() > 100, "{} files", files.len());
    for f in files {
        let text = fs::read_to_string(&f).unwrap_or_default();
        for (n, line) in text.lines().enumerate() {
            assert!(
                !issue.is_match(line),
                "{}:{}: comments say why, not when (no issue numbers): {line}",
                f.display(),
                n + 1
            );
        }
    }
}

#[test]
fn no_two_files_import_each_other() {
    let mut crates = Vec::new();
    let mut tomls = Vec::new();
    for d in ["kernel", "dirsvc", "userland", "tests", "tools", "boot"] {
        source_files(&root().join(d), &["Cargo.toml"], &mut tomls);
    }
    for t in tomls {
        let src = t.parent().expect("crate dir").join("src");
        if src.is_dir() {
            crates.push(src);
        }
    }
    assert!(crates.len() >= 10, "{crates:?}");
    let mut cycles = Vec::new();
    let mut checked = 0;
    for src in crates {
        let mut rs = Vec::new();
        source_files(&src, &[".rs"], &mut rs);
        let mut files = BTreeMap::new();
        let mut paths = BTreeMap::new();
        for f in rs {
            if let Some(m) = module_of(&src, &f) {
                files.insert(m.clone(), fs::read_to_string(&f).unwrap_or_default());
                paths.insert(m, f);
            }
        }
        checked += files.len();
        for (a, b) in import_cycles(&files) {
            let rel = |m: &Vec<String>| {
                let p: &PathBuf = &paths[m];
                p.strip_prefix(root()).unwrap_or(p).display().to_string()
            };
            cycles.push(format!("{} <-> {}", rel(&a), rel(&b)));
        }
    }
    assert!(checked > 300, "{checked} files");
    assert!(
        cycles.is_empty(),
        "files that import each other (move what both need into one of them, or a file of its own):\n{}",
        cycles.join("\n")
    );
}
