//! Small parsers shared by the shell and the benchmarks: word splitting
//! with quotes, path normalisation, sizes (`64k`, `1m`) and counts.
//!
//! Nothing here panics, whatever the input.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// One word of a command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    /// The word with its quotes removed.
    pub text: String,
    /// Byte offset in the line where the word starts (its first character
    /// or opening quote).
    pub start: usize,
    /// Byte offset just past the word (after a closing quote).
    pub end: usize,
}

/// Split a line into words.
///
/// Words are separated by whitespace. Double quotes group words: inside
/// them whitespace is part of the word, and the quotes themselves are
/// removed (`a"b c"d` is the one word `ab cd`; `""` is an empty word).
/// There are no escapes; an unterminated quote runs to the end of the line.
pub fn words(line: &str) -> Vec<Word> {
    let mut out = Vec::new();
    let mut cur: Option<Word> = None;
    let mut quoted = false;
    for (i, c) in line.char_indices() {
        if !quoted && c.is_whitespace() {
            if let Some(w) = cur.take() {
                out.push(w);
            }
            continue;
        }
        let w = cur.get_or_insert_with(|| Word {
            text: String::new(),
            start: i,
            end: i,
        });
        w.end = i + c.len_utf8();
        if c == '"' {
            quoted = !quoted;
        } else {
            w.text.push(c);
        }
    }
    if let Some(w) = cur {
        out.push(w);
    }
    out
}

/// Remove one pair of double quotes if they enclose the whole (trimmed)
/// text and there is no other quote inside; otherwise return the trimmed
/// text unchanged. Used for `write PATH TEXT`, whose text is verbatim.
pub fn unquote(text: &str) -> &str {
    let t = text.trim();
    if t.len() >= 2 && t.starts_with('"') && t.ends_with('"') {
        let inner = &t[1..t.len() - 1];
        if !inner.contains('"') {
            return inner;
        }
    }
    t
}

/// A path with a `.` or `..` component, which [`path`] refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DotComponent;

impl fmt::Display for DotComponent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("'.' and '..' are not allowed in paths")
    }
}

/// Turn a user path into a normalised absolute path.
///
/// Relative paths are resolved against `/` (there is no working
/// directory); empty components are dropped. `.` and `..` components are
/// refused, as the file server does: resolving `..` here, without looking
/// at the directories, made `mkdir /a/../b` succeed when `/a` does not
/// exist. The result starts with `/` and has no trailing slash, except `/`
/// itself.
pub fn path(p: &str) -> Result<String, DotComponent> {
    if p.split('/').any(|c| c == "." || c == "..") {
        return Err(DotComponent);
    }
    Ok(normalize(p))
}

/// [`path`] without the check: only empty components are dropped (a `.`
/// or `..` stays, and the file server refuses it).
pub fn normalize(p: &str) -> String {
    let parts: Vec<&str> = p.split('/').filter(|c| !c.is_empty()).collect();
    if parts.is_empty() {
        return String::from("/");
    }
    let mut out = String::with_capacity(p.len() + 1);
    for c in parts {
        out.push('/');
        out.push_str(c);
    }
    out
}

pub use datasets::num::{size, u64_dec, NumError};

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(line: &str) -> Vec<String> {
        words(line).into_iter().map(|w| w.text).collect()
    }

    #[test]
    fn words_split_on_whitespace() {
        assert_eq!(texts("  ls   /a\t/b  "), ["ls", "/a", "/b"]);
        assert!(texts("").is_empty());
        assert!(texts(" \t ").is_empty());
    }

    #[test]
    fn words_quotes_group() {
        assert_eq!(texts(r#"cat "/my file" x"#), ["cat", "/my file", "x"]);
        assert_eq!(texts(r#"a"b c"d"#), ["ab cd"]);
        assert_eq!(texts(r#"x "" y"#), ["x", "", "y"]);
        assert_eq!(texts(r#"x "unterminated  q"#), ["x", "unterminated  q"]);
        assert_eq!(texts(r#"""#), [""]);
    }

    #[test]
    fn words_record_offsets() {
        let line = r#"write "/a b"  hello world "#;
        let w = words(line);
        assert_eq!(w.len(), 4);
        assert_eq!(&line[w[1].start..w[1].end], r#""/a b""#);
        assert_eq!(&line[w[1].end..], "  hello world ");
        let line = "é ü";
        let w = words(line);
        assert_eq!(&line[w[1].start..w[1].end], "ü");
    }

    #[test]
    fn unquote_only_whole_quoted_text() {
        assert_eq!(unquote(r#" "hello  world" "#), "hello  world");
        assert_eq!(unquote(r#""""#), "");
        assert_eq!(unquote(r#""a" "b""#), r#""a" "b""#);
        assert_eq!(unquote(r#"say "hi""#), r#"say "hi""#);
        assert_eq!(unquote(r#"""#), r#"""#);
        assert_eq!(unquote("  plain text "), "plain text");
    }

    #[test]
    fn paths_are_normalised() {
        let ok = |p| path(p).unwrap();
        assert_eq!(ok("/"), "/");
        assert_eq!(ok(""), "/");
        assert_eq!(ok("a"), "/a");
        assert_eq!(ok("a/b/"), "/a/b");
        assert_eq!(ok("//a//b"), "/a/b");
        assert_eq!(ok("/a/...b"), "/a/...b");
        assert_eq!(ok("/a/..b/.c"), "/a/..b/.c");
        assert_eq!(normalize("//a/./b/"), "/a/./b");
    }

    #[test]
    fn dot_components_are_refused() {
        for p in [
            "/a/../b", "/a/./b", "..", ".", "/..", "a/..", "/a/b/.", "../../x",
        ] {
            assert_eq!(path(p), Err(DotComponent), "{p}");
        }
        assert_eq!(
            DotComponent.to_string(),
            "'.' and '..' are not allowed in paths"
        );
    }

    #[test]
    fn decimal() {
        assert_eq!(u64_dec("0"), Ok(0));
        assert_eq!(u64_dec("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(u64_dec("18446744073709551616"), Err(NumError::Overflow));
        assert_eq!(u64_dec(""), Err(NumError::Empty));
        assert_eq!(u64_dec("+1"), Err(NumError::Invalid));
        assert_eq!(u64_dec("1 "), Err(NumError::Invalid));
        assert_eq!(u64_dec("٣"), Err(NumError::Invalid));
    }

    #[test]
    fn sizes_plain_and_suffixed() {
        assert_eq!(size("0"), Ok(0));
        assert_eq!(size("4096"), Ok(4096));
        assert_eq!(size("12b"), Ok(12));
        assert_eq!(size("64k"), Ok(64 << 10));
        assert_eq!(size("64K"), Ok(64 << 10));
        assert_eq!(size("64kb"), Ok(64 << 10));
        assert_eq!(size("64KiB"), Ok(64 << 10));
        assert_eq!(size("1m"), Ok(1 << 20));
        assert_eq!(size("3M"), Ok(3 << 20));
        assert_eq!(size("2g"), Ok(2 << 30));
        assert_eq!(size("1G"), Ok(1 << 30));
        assert_eq!(size("1t"), Ok(1 << 40));
        assert_eq!(size(" 8k "), Ok(8 << 10));
    }

    #[test]
    fn sizes_rejected() {
        for bad in ["12q", "k", "1.5m", "-1", "1 k", "1kk", "0x10", "m1", "1e3"] {
            assert_eq!(size(bad), Err(NumError::Invalid), "{bad}");
        }
        assert_eq!(size(""), Err(NumError::Empty));
        assert_eq!(size("   "), Err(NumError::Empty));
        assert_eq!(size("16777216t"), Err(NumError::Overflow));
        assert_eq!(size("99999999999999999999"), Err(NumError::Overflow));
        assert_eq!(size("16777215t"), Ok(16_777_215u64 << 40));
    }

    #[test]
    fn num_error_display() {
        assert_eq!(alloc::format!("{}", NumError::Invalid), "not a number");
    }
}
