//! Talking to one node's shell over its serial console (a QEMU unix-socket
//! chardev), and the pure parsing of what the shell answers.
//!
//! The shell protocol (see the kernel contract): the prompt on node K is
//! exactly `nK> `; a typed line (ended by `\r`) is echoed, followed by the
//! command's output, exactly one status line (`ok` or `error: <message>`),
//! then the prompt again. Lines end in `\r\n`. Kernel log lines
//! (`[    0.012345] n1 INFO  text`) may be interleaved at any point.

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// The status line that ends every shell command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// `ok`
    Ok,
    /// `error: <message>`; holds the message.
    Error(String),
}

impl Status {
    /// Parses a status line (without line ending); `None` if it is not one.
    pub fn parse(line: &str) -> Option<Status> {
        let line = line.trim_end_matches(['\r', '\n']);
        if line == "ok" {
            Some(Status::Ok)
        } else {
            line.strip_prefix("error:")
                .map(|m| Status::Error(m.trim().to_string()))
        }
    }

    /// True for `ok`.
    pub fn is_ok(&self) -> bool {
        matches!(self, Status::Ok)
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Status::Ok => write!(f, "ok"),
            Status::Error(m) => write!(f, "error: {m}"),
        }
    }
}

/// The answer to one shell command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CmdOutput {
    /// Node the command ran on.
    pub node: u8,
    /// The command as sent (lossy UTF-8 for binary input).
    pub cmd: String,
    /// Output lines, without the echo, the status line, the prompt and any
    /// kernel log lines; `\r\n` removed.
    pub lines: Vec<String>,
    /// The status line.
    pub status: Status,
    /// Kernel log lines and stray lines seen while the command ran.
    pub logs: Vec<String>,
    /// Everything received for this command, verbatim (lossy UTF-8).
    pub raw: String,
    /// The console closed right after the status line (e.g. `shutdown`).
    pub closed: bool,
}

impl CmdOutput {
    /// True if the status line was `ok`.
    pub fn is_ok(&self) -> bool {
        self.status.is_ok()
    }

    /// The message of an `error:` status line.
    pub fn error_message(&self) -> Option<&str> {
        match &self.status {
            Status::Ok => None,
            Status::Error(m) => Some(m),
        }
    }

    /// The output lines joined with `\n` (no trailing newline).
    pub fn text(&self) -> String {
        self.lines.join("\n")
    }

    /// `Ok(self)` for an `ok` status, [`Error::Command`] otherwise.
    pub fn into_result(self) -> Result<CmdOutput> {
        match self.status {
            Status::Ok => Ok(self),
            Status::Error(message) => Err(Error::Command {
                node: self.node,
                cmd: self.cmd,
                message,
                output: self.lines,
            }),
        }
    }
}

/// The shell prompt of node `node`.
pub fn prompt(node: u8) -> String {
    format!("n{node}> ")
}

/// True for a kernel log line: `[ <seconds>.<fraction>] ...`.
pub fn is_log_line(line: &str) -> bool {
    let Some(rest) = line.trim_start().strip_prefix('[') else {
        return false;
    };
    let Some((stamp, _)) = rest.split_once(']') else {
        return false;
    };
    let stamp = stamp.trim();
    match stamp.split_once('.') {
        Some((s, frac)) => {
            !s.is_empty()
                && !frac.is_empty()
                && s.bytes().all(|b| b.is_ascii_digit())
                && frac.bytes().all(|b| b.is_ascii_digit())
        }
        None => false,
    }
}

/// Removes ANSI escape sequences and control characters, applies backspaces;
/// what a terminal would show of `s` on one line.
pub fn visible(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => {
                // CSI: ESC [ params final-byte; other escapes: ESC + one char.
                if chars.peek() == Some(&'[') {
                    chars.next();
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                } else {
                    chars.next();
                }
            }
            '\u{8}' | '\u{7f}' => {
                out.pop();
            }
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// Removes leading prompts (`nK> `, possibly repeated) from a line.
pub fn strip_prompts(line: &str, node: u8) -> &str {
    let p = prompt(node);
    let mut line = line;
    while let Some(rest) = line.strip_prefix(p.as_str()) {
        line = rest;
    }
    line
}

/// Splits received console text into complete lines (without `\r\n`) and
/// the trailing incomplete rest.
pub fn split_lines(text: &str) -> (Vec<&str>, &str) {
    let mut lines = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find('\n') {
        lines.push(rest[..i].trim_end_matches('\r'));
        rest = &rest[i + 1..];
    }
    (lines, rest)
}

/// True if `sent` consists only of printable ASCII (an echo can be matched).
fn is_plain(sent: &[u8]) -> bool {
    sent.iter().all(|b| (0x20..0x7f).contains(b))
}

/// True if `line` is the shell's echo of `sent`: equal once control
/// characters are removed, or a long enough prefix of it (a shell may cut
/// an over-long line).
pub fn is_echo(line: &str, sent: &str, node: u8) -> bool {
    let line = visible(strip_prompts(line, node));
    let line = line.trim_end();
    let sent = sent.trim_end();
    if line == sent {
        return true;
    }
    line.len() >= 32 && sent.starts_with(line)
}

/// Parses what a console returned after `sent` (without the final `\r`) was
/// typed on node `node`. Returns `None` while the answer is incomplete.
///
/// The answer is complete once, after the echo, a status line is followed by
/// the prompt and at most complete log lines. With `eof` (the console
/// closed), a status line after the echo is enough (`shutdown`).
pub fn parse_response(raw: &[u8], sent: &[u8], node: u8, eof: bool) -> Option<CmdOutput> {
    let text = String::from_utf8_lossy(raw);
    let sent_str = String::from_utf8_lossy(sent).into_owned();
    let plain = is_plain(sent);
    let p = prompt(node);

    // Find the last "<status line>\r\n<prompt>" whose remainder is only
    // complete log lines; `body` ends right after the status line.
    let mut end_of_body = None;
    if !eof || text.ends_with(&p) {
        let mut search_end = text.len();
        while let Some(i) = text[..search_end].rfind(p.as_str()) {
            let rest = &text[i + p.len()..];
            let rest_ok = rest.is_empty()
                || (rest.ends_with('\n')
                    && split_lines(rest).0.iter().all(|l| {
                        let l = strip_prompts(l, node);
                        l.trim().is_empty() || is_log_line(l)
                    }));
            let before = &text[..i];
            if rest_ok && before.ends_with('\n') {
                end_of_body = Some(i);
                break;
            }
            if i == 0 {
                break;
            }
            search_end = i;
        }
    }
    let body: &str = match end_of_body {
        Some(i) => &text[..i],
        None if eof => &text,
        None => return None,
    };
    let (mut lines, partial) = split_lines(body);
    if eof && !partial.is_empty() {
        lines.push(partial.trim_end_matches('\r'));
    }

    // The echo: the first line that matches what was sent. Binary input may
    // be echoed filtered or not at all: there, the first line that is
    // neither a log line nor a status line, if any.
    let (logs_end, out_start) = if plain {
        let echo = lines.iter().position(|l| is_echo(l, &sent_str, node))?;
        (echo, echo + 1)
    } else {
        match lines.iter().position(|l| {
            let l = strip_prompts(l, node);
            !is_log_line(l) && Status::parse(l).is_none()
        }) {
            Some(echo) => (echo, echo + 1),
            None => (0, 0),
        }
    };
    // The status: the last line after the echo that is a status line, and
    // (unless the console closed) it must be the last line of the body.
    let status_at = if end_of_body.is_some() {
        let last = lines.len().checked_sub(1)?;
        (last >= out_start && Status::parse(lines[last]).is_some()).then_some(last)?
    } else {
        (out_start..lines.len())
            .rev()
            .find(|&i| Status::parse(lines[i]).is_some())?
    };
    let status = Status::parse(lines[status_at])?;

    let mut logs: Vec<String> = lines[..logs_end].iter().map(|l| l.to_string()).collect();
    let mut out = Vec::new();
    for l in &lines[out_start..status_at] {
        if is_log_line(l) {
            logs.push(l.to_string());
        } else {
            out.push(l.to_string());
        }
    }
    if let Some(i) = end_of_body {
        let (tail, _) = split_lines(&text[i + p.len()..]);
        logs.extend(
            tail.iter()
                .map(|l| strip_prompts(l, node))
                .filter(|l| !l.trim().is_empty())
                .map(str::to_string),
        );
    }
    Some(CmdOutput {
        node,
        cmd: sent_str,
        lines: out,
        status,
        logs,
        raw: text.into_owned(),
        closed: eof,
    })
}

/// One open connection to a node's serial console.
#[derive(Debug)]
pub struct Console {
    node: u8,
    stream: UnixStream,
    /// Bytes received but not yet consumed.
    buf: Vec<u8>,
    eof: bool,
}

/// Reads once from `stream` into `buf`, waiting at most `wait`.
/// Returns the number of bytes read (0 = nothing yet), or `None` on EOF.
fn read_some(stream: &mut UnixStream, buf: &mut Vec<u8>, wait: Duration) -> Result<Option<usize>> {
    let wait = wait.max(Duration::from_millis(1));
    stream
        .set_read_timeout(Some(wait))
        .map_err(|e| Error::io("set console read timeout", e))?;
    let mut tmp = [0u8; 4096];
    match stream.read(&mut tmp) {
        Ok(0) => Ok(None),
        Ok(n) => {
            buf.extend_from_slice(&tmp[..n]);
            Ok(Some(n))
        }
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
            ) =>
        {
            Ok(Some(0))
        }
        Err(e) if e.kind() == ErrorKind::ConnectionReset => Ok(None),
        Err(e) => Err(Error::io("read from console", e)),
    }
}

impl Console {
    /// Connects to the console socket of node `node` (retrying while the
    /// socket does not exist or refuses, up to `timeout`) and synchronises
    /// with the shell: types an empty line and waits for a fresh prompt.
    pub fn connect(path: &Path, node: u8, timeout: Duration) -> Result<Console> {
        let deadline = Instant::now() + timeout;
        let stream = loop {
            match UnixStream::connect(path) {
                Ok(s) => break s,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    thread::sleep(Duration::from_millis(50));
                }
                Err(e) => {
                    return Err(Error::io(
                        format!("connect to console {} (n{node})", path.display()),
                        e,
                    ))
                }
            }
        };
        let mut console = Console {
            node,
            stream,
            buf: Vec::new(),
            eof: false,
        };
        console.sync(deadline.saturating_duration_since(Instant::now()))?;
        Ok(console)
    }

    /// Node number of this console.
    pub fn node(&self) -> u8 {
        self.node
    }

    /// Types an empty line, waits until the received text ends with the
    /// prompt, then drains whatever follows within a short quiet period.
    pub fn sync(&mut self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        let p = prompt(self.node);
        self.send(b"\r")?;
        loop {
            if String::from_utf8_lossy(&self.buf).ends_with(&p) {
                break;
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::Timeout {
                    what: format!(
                        "the prompt `{p}` of n{} (is another client attached to this console?)",
                        self.node
                    ),
                    partial: String::from_utf8_lossy(&self.buf).into_owned(),
                });
            }
            if self.read(deadline - now)?.is_none() {
                return Err(Error::Closed {
                    what: format!("the prompt `{p}` of n{}", self.node),
                    partial: String::from_utf8_lossy(&self.buf).into_owned(),
                });
            }
        }
        self.drain(Duration::from_millis(150), Duration::from_secs(2))?;
        self.buf.clear();
        Ok(())
    }

    /// Reads until nothing arrives for `quiet` (at most `max` in total).
    fn drain(&mut self, quiet: Duration, max: Duration) -> Result<()> {
        let end = Instant::now() + max;
        while Instant::now() < end {
            match self.read(quiet)? {
                None | Some(0) => break,
                Some(_) => {}
            }
        }
        Ok(())
    }

    fn read(&mut self, wait: Duration) -> Result<Option<usize>> {
        if self.eof {
            return Ok(None);
        }
        let r = read_some(&mut self.stream, &mut self.buf, wait)?;
        if r.is_none() {
            self.eof = true;
        }
        Ok(r)
    }

    fn send(&mut self, bytes: &[u8]) -> Result<()> {
        self.stream
            .set_write_timeout(Some(Duration::from_secs(30)))
            .map_err(|e| Error::io("set console write timeout", e))?;
        self.stream
            .write_all(bytes)
            .and_then(|_| self.stream.flush())
            .map_err(|e| Error::io(format!("write to console of n{}", self.node), e))
    }

    /// Runs one command line and returns its answer (an `error:` status is
    /// still `Ok(CmdOutput)`; see [`CmdOutput::into_result`]).
    pub fn exec(&mut self, cmd: &str, timeout: Duration) -> Result<CmdOutput> {
        self.exec_bytes(cmd.as_bytes(), timeout)
    }

    /// Like [`Console::exec`] for arbitrary bytes (which must not contain
    /// `\r` or `\n`; the final `\r` is added).
    pub fn exec_bytes(&mut self, cmd: &[u8], timeout: Duration) -> Result<CmdOutput> {
        if cmd.iter().any(|&b| b == b'\r' || b == b'\n') {
            return Err(Error::Usage(format!(
                "a command line may not contain \\r or \\n: {:?}",
                String::from_utf8_lossy(cmd)
            )));
        }
        let deadline = Instant::now() + timeout;
        let node = self.node;
        let what = || {
            format!(
                "the answer of n{node} to `{}`",
                String::from_utf8_lossy(cmd)
            )
        };
        // Whatever arrived while idle (asynchronous log lines) is not part
        // of this command's answer.
        self.drain(Duration::from_millis(1), Duration::from_millis(20))?;
        self.buf.clear();
        if self.eof {
            return Err(Error::Closed {
                what: what(),
                partial: String::new(),
            });
        }
        let mut line = cmd.to_vec();
        line.push(b'\r');
        self.send(&line)?;
        loop {
            if let Some(out) = parse_response(&self.buf, cmd, self.node, false) {
                self.buf.clear();
                return Ok(out);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::Timeout {
                    what: what(),
                    partial: String::from_utf8_lossy(&self.buf).into_owned(),
                });
            }
            if self
                .read((deadline - now).min(Duration::from_millis(200)))?
                .is_none()
            {
                let out = parse_response(&self.buf, cmd, self.node, true);
                let partial = String::from_utf8_lossy(&self.buf).into_owned();
                self.buf.clear();
                return out.ok_or_else(|| Error::Closed {
                    what: what(),
                    partial,
                });
            }
        }
    }

    /// Types `cmd` and returns without its answer: for a command meant to
    /// be still running when its instance is killed. Fails if the command
    /// answered (ended) within `settle`, and gives back what it printed.
    pub fn start(&mut self, cmd: &str, settle: Duration) -> Result<()> {
        if cmd.contains(['\r', '\n']) {
            return Err(Error::Usage(format!(
                "a command line may not contain \\r or \\n: {cmd:?}"
            )));
        }
        self.drain(Duration::from_millis(1), Duration::from_millis(20))?;
        self.buf.clear();
        let mut line = cmd.as_bytes().to_vec();
        line.push(b'\r');
        self.send(&line)?;
        let end = Instant::now() + settle;
        loop {
            if let Some(out) = parse_response(&self.buf, cmd.as_bytes(), self.node, false) {
                return Err(Error::Usage(format!(
                    "n{}: `{cmd}` ended within {settle:?}: {}",
                    self.node,
                    out.text()
                )));
            }
            let now = Instant::now();
            if now >= end {
                return Ok(());
            }
            if self.read(end - now)?.is_none() {
                return Err(Error::Closed {
                    what: format!("n{} while `{cmd}` ran", self.node),
                    partial: String::from_utf8_lossy(&self.buf).into_owned(),
                });
            }
        }
    }

    /// The underlying stream (for `attach`-style forwarding).
    pub fn into_stream(self) -> UnixStream {
        self.stream
    }
}

#[cfg(test)]
mod tests;
