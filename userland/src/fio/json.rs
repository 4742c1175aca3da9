//! A tiny JSON writer: objects, strings, integers and pre-formatted
//! numbers, with commas and string escapes handled.

use alloc::format;
use alloc::string::String;

/// Builds one JSON document in a string.
#[derive(Debug, Default)]
pub struct JsonWriter {
    out: String,
    need_comma: bool,
}

impl JsonWriter {
    /// An empty document.
    pub fn new() -> JsonWriter {
        JsonWriter::default()
    }

    fn member(&mut self, key: Option<&str>) {
        if self.need_comma {
            self.out.push(',');
        }
        if let Some(k) = key {
            push_str_lit(&mut self.out, k);
            self.out.push(':');
        }
    }

    /// Open an object (as the member `key`, or at the top level).
    pub fn begin(&mut self, key: Option<&str>) -> &mut Self {
        self.member(key);
        self.out.push('{');
        self.need_comma = false;
        self
    }

    /// Close the innermost object.
    pub fn end(&mut self) -> &mut Self {
        self.out.push('}');
        self.need_comma = true;
        self
    }

    /// Open an array member.
    pub fn begin_array(&mut self, key: &str) -> &mut Self {
        self.member(Some(key));
        self.out.push('[');
        self.need_comma = false;
        self
    }

    /// Close the innermost array.
    pub fn end_array(&mut self) -> &mut Self {
        self.out.push(']');
        self.need_comma = true;
        self
    }

    /// A string member (`key` is `None` inside an array).
    pub fn string(&mut self, key: Option<&str>, v: &str) -> &mut Self {
        self.member(key);
        push_str_lit(&mut self.out, v);
        self.need_comma = true;
        self
    }

    /// An unsigned integer member.
    pub fn uint(&mut self, key: &str, v: u64) -> &mut Self {
        self.number(key, &format!("{v}"))
    }

    /// A boolean member.
    pub fn boolean(&mut self, key: &str, v: bool) -> &mut Self {
        self.number(key, if v { "true" } else { "false" })
    }

    /// A number member given as JSON text (e.g. `12.345`); the caller
    /// guarantees it is a valid JSON number.
    pub fn number(&mut self, key: &str, text: &str) -> &mut Self {
        self.member(Some(key));
        self.out.push_str(text);
        self.need_comma = true;
        self
    }

    /// The document.
    pub fn finish(self) -> String {
        self.out
    }
}

/// A thousandths fixed-point value as a JSON number: `12345` -> `12.345`.
pub fn milli(v: u64) -> String {
    format!("{}.{:03}", v / 1000, v % 1000)
}

/// Append `s` as a JSON string literal.
pub fn push_str_lit(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\u{:04x}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
