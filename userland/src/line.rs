//! A minimal line editor for the serial console.
//!
//! [`LineEditor`] is fed one raw byte at a time and hands back a complete
//! line when the user presses Enter. It echoes what the user should see
//! through a callback, so it knows nothing about the console itself:
//!
//! | byte(s)                | effect                                           | echo          |
//! | ---------------------- | ------------------------------------------------ | ------------- |
//! | printable ASCII        | appended (up to [`MAX_LINE`] bytes, then a bell) | the byte / `\x07` |
//! | `0x08` / `0x7f`        | erase the last character                         | `"\x08 \x08"` |
//! | CR or LF               | end of line (CRLF and LFCR count once)           | `"\r\n"`      |
//! | Ctrl-C (`0x03`)        | discard the line, yield an empty line            | `"^C\r\n"`    |
//! | Ctrl-U (`0x15`)        | erase the whole line                             | one `"\x08 \x08"` per char |
//! | ESC sequences          | swallowed (arrow keys and friends)               | nothing       |
//! | other control, `>= 0x80` | ignored                                        | nothing       |

use alloc::string::String;
use alloc::vec::Vec;

/// Longest line the editor accepts, in bytes; further characters are
/// dropped and answered with a bell (`0x07`).
pub const MAX_LINE: usize = 4096;

const BS: u8 = 0x08;
const DEL: u8 = 0x7f;
const CTRL_C: u8 = 0x03;
const CTRL_U: u8 = 0x15;
const ESC: u8 = 0x1b;
const BELL: u8 = 0x07;
const CR: u8 = b'\r';
const LF: u8 = b'\n';

/// Echo that erases one character on a terminal.
const ERASE: &[u8] = b"\x08 \x08";

/// Where the editor is inside a terminal escape sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Escape {
    /// Not in an escape sequence.
    #[default]
    None,
    /// Just saw ESC.
    Start,
    /// In a CSI sequence (`ESC [` params... final).
    Csi,
    /// After `ESC O`: one more byte ends the sequence.
    Ss3,
}

/// Turns raw console bytes into lines; see the [module docs](self) for the
/// key bindings.
#[derive(Debug, Clone, Default)]
pub struct LineEditor {
    /// The line being edited (printable ASCII only).
    buf: String,
    /// The line-ending byte that just ended a line, if the previous byte
    /// was one: the other half of a CRLF / LFCR pair is then swallowed.
    last_eol: Option<u8>,
    /// Escape-sequence state.
    escape: Escape,
}

impl LineEditor {
    /// An editor with an empty line.
    pub fn new() -> LineEditor {
        LineEditor::default()
    }

    /// The line typed so far (not yet ended).
    pub fn current(&self) -> &str {
        &self.buf
    }

    /// Forget the line typed so far, without echoing anything.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.escape = Escape::None;
    }

    /// Feed one byte from the console. `echo` receives the bytes to send
    /// back to the terminal. Returns the finished line when `byte` ends it
    /// (Enter, or Ctrl-C which yields an empty line).
    pub fn feed(&mut self, byte: u8, echo: &mut dyn FnMut(&[u8])) -> Option<String> {
        let last_eol = self.last_eol.take();

        if self.escape != Escape::None && self.in_escape(byte) {
            return None;
        }

        match byte {
            CR | LF => {
                if let Some(prev) = last_eol {
                    if prev != byte {
                        // Second half of CRLF or LFCR: already ended.
                        return None;
                    }
                }
                self.last_eol = Some(byte);
                echo(b"\r\n");
                Some(core::mem::take(&mut self.buf))
            }
            BS | DEL => {
                if self.buf.pop().is_some() {
                    echo(ERASE);
                }
                None
            }
            CTRL_C => {
                self.buf.clear();
                echo(b"^C\r\n");
                Some(String::new())
            }
            CTRL_U => {
                if !self.buf.is_empty() {
                    let mut out = Vec::with_capacity(self.buf.len() * ERASE.len());
                    for _ in 0..self.buf.len() {
                        out.extend_from_slice(ERASE);
                    }
                    self.buf.clear();
                    echo(&out);
                }
                None
            }
            ESC => {
                self.escape = Escape::Start;
                None
            }
            0x20..=0x7e => {
                if self.buf.len() < MAX_LINE {
                    self.buf.push(char::from(byte));
                    echo(&[byte]);
                } else {
                    echo(&[BELL]);
                }
                None
            }
            _ => None,
        }
    }

    /// Advance the escape-sequence state with `byte`. Returns `true` if the
    /// byte was consumed by the sequence; `false` if the sequence was
    /// abandoned and the byte must be handled normally (a control byte such
    /// as Enter in the middle of a sequence).
    fn in_escape(&mut self, byte: u8) -> bool {
        if byte < 0x20 || byte == DEL {
            // Control bytes abort any sequence (a second ESC restarts one).
            self.escape = Escape::None;
            return false;
        }
        self.escape = match (self.escape, byte) {
            (Escape::Start, b'[') => Escape::Csi,
            (Escape::Start, b'O') => Escape::Ss3,
            // Parameter and intermediate bytes keep the CSI going.
            (Escape::Csi, 0x20..=0x3f) => Escape::Csi,
            // A final byte (or anything else) ends the sequence; after a
            // bare ESC the next byte (Alt-x) is dropped as well.
            _ => Escape::None,
        };
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feed every byte, collecting the echo and the finished lines.
    fn run(ed: &mut LineEditor, input: &[u8]) -> (Vec<String>, Vec<u8>) {
        let mut lines = Vec::new();
        let mut echoed = Vec::new();
        for &b in input {
            if let Some(l) = ed.feed(b, &mut |e| echoed.extend_from_slice(e)) {
                lines.push(l);
            }
        }
        (lines, echoed)
    }

    fn feed_all(input: &[u8]) -> (Vec<String>, Vec<u8>) {
        run(&mut LineEditor::new(), input)
    }

    #[test]
    fn printable_chars_are_appended_and_echoed() {
        let mut ed = LineEditor::new();
        let (lines, echo) = run(&mut ed, b"ls /a");
        assert!(lines.is_empty());
        assert_eq!(echo, b"ls /a");
        assert_eq!(ed.current(), "ls /a");
    }

    #[test]
    fn cr_ends_line() {
        let (lines, echo) = feed_all(b"help\r");
        assert_eq!(lines, ["help"]);
        assert_eq!(echo, b"help\r\n");
    }

    #[test]
    fn lf_ends_line() {
        let (lines, echo) = feed_all(b"help\n");
        assert_eq!(lines, ["help"]);
        assert_eq!(echo, b"help\r\n");
    }

    #[test]
    fn crlf_and_lfcr_end_one_line() {
        assert_eq!(feed_all(b"a\r\nb\r\n").0, ["a", "b"]);
        assert_eq!(feed_all(b"a\n\rb\n\r").0, ["a", "b"]);
        let (_, echo) = feed_all(b"a\r\n");
        assert_eq!(echo, b"a\r\n");
    }

    #[test]
    fn repeated_enter_gives_empty_lines() {
        assert_eq!(feed_all(b"\r\r").0, ["", ""]);
        assert_eq!(feed_all(b"\n\n").0, ["", ""]);
        // CRLF CRLF: two lines, not four.
        assert_eq!(feed_all(b"\r\n\r\n").0, ["", ""]);
    }

    #[test]
    fn lf_after_other_byte_is_a_new_line() {
        // The CRLF pairing only applies to directly adjacent bytes.
        assert_eq!(feed_all(b"a\rb\n").0, ["a", "b"]);
    }

    #[test]
    fn backspace_and_delete_erase_one_char() {
        let (lines, echo) = feed_all(b"lx\x08s\x7f\x7fls\r");
        assert_eq!(lines, ["ls"]);
        assert_eq!(echo, b"lx\x08 \x08s\x08 \x08\x08 \x08ls\r\n");
    }

    #[test]
    fn backspace_on_empty_line_echoes_nothing() {
        let (lines, echo) = feed_all(b"\x08\x7fa\r");
        assert_eq!(lines, ["a"]);
        assert_eq!(echo, b"a\r\n");
    }

    #[test]
    fn ctrl_c_discards_line() {
        let mut ed = LineEditor::new();
        let (lines, echo) = run(&mut ed, b"rm /x\x03");
        assert_eq!(lines, [""]);
        assert_eq!(echo, b"rm /x^C\r\n");
        assert_eq!(ed.current(), "");
        assert_eq!(run(&mut ed, b"ls\r").0, ["ls"]);
    }

    #[test]
    fn ctrl_u_clears_line() {
        let mut ed = LineEditor::new();
        let (lines, echo) = run(&mut ed, b"abc\x15");
        assert!(lines.is_empty());
        assert_eq!(echo, b"abc\x08 \x08\x08 \x08\x08 \x08");
        assert_eq!(ed.current(), "");
        let (lines, echo) = run(&mut ed, b"\x15ls\r");
        assert_eq!(lines, ["ls"]);
        assert_eq!(echo, b"ls\r\n");
    }

    #[test]
    fn control_and_non_ascii_bytes_are_ignored() {
        let mut input = Vec::new();
        input.extend_from_slice(b"a");
        for b in 0u8..0x20 {
            if ![BS, CTRL_C, CTRL_U, ESC, CR, LF].contains(&b) {
                input.push(b);
            }
        }
        input.extend(0x80u8..=0xff);
        input.extend_from_slice(b"b\r");
        let (lines, echo) = feed_all(&input);
        assert_eq!(lines, ["ab"]);
        assert_eq!(echo, b"ab\r\n");
    }

    #[test]
    fn arrow_keys_are_swallowed() {
        // Up, Down, Right, Left, Home (SS3), Delete (CSI 3 ~), Alt-x.
        let (lines, echo) = feed_all(b"l\x1b[A\x1b[B\x1b[C\x1b[D\x1bOH\x1b[3~\x1bxs\r");
        assert_eq!(lines, ["ls"]);
        assert_eq!(echo, b"ls\r\n");
    }

    #[test]
    fn enter_inside_escape_sequence_still_ends_line() {
        assert_eq!(feed_all(b"ls\x1b[\r").0, ["ls"]);
        assert_eq!(feed_all(b"ls\x1b\r").0, ["ls"]);
    }

    #[test]
    fn line_length_is_capped_with_bell() {
        let mut input = alloc::vec![b'x'; MAX_LINE + 3];
        input.push(b'\r');
        let (lines, echo) = feed_all(&input);
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].len(), MAX_LINE);
        assert_eq!(echo.len(), MAX_LINE + 3 + 2);
        assert_eq!(&echo[MAX_LINE..MAX_LINE + 3], &[BELL; 3]);
        assert_eq!(&echo[MAX_LINE + 3..], b"\r\n");
    }

    #[test]
    fn backspace_after_cap_makes_room_again() {
        let mut ed = LineEditor::new();
        run(&mut ed, &alloc::vec![b'x'; MAX_LINE]);
        let (_, echo) = run(&mut ed, b"y\x08z");
        assert_eq!(echo, b"\x07\x08 \x08z");
        assert!(ed.current().ends_with("xz"));
    }

    #[test]
    fn clear_forgets_the_line() {
        let mut ed = LineEditor::new();
        run(&mut ed, b"abc\x1b[");
        ed.clear();
        assert_eq!(run(&mut ed, b"A\r").0, ["A"]);
    }

    #[test]
    fn random_bytes_never_panic_and_lines_are_printable() {
        let mut seed = 0x1234_5678_9abc_def0u64;
        let mut ed = LineEditor::new();
        for _ in 0..200_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let b = (seed >> 24) as u8;
            if let Some(l) = ed.feed(b, &mut |_| {}) {
                assert!(l.len() <= MAX_LINE);
                assert!(l.bytes().all(|c| (0x20..0x7f).contains(&c)));
            }
        }
    }
}
