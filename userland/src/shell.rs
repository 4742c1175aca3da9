//! The in-guest shell: a table of commands over the [`Os`] trait.
//!
//! The kernel owns the console loop: it feeds bytes to a
//! [`LineEditor`](crate::line::LineEditor), prints [`Shell::prompt`], and
//! hands every finished line to [`Shell::execute`].
//!
//! # Output contract
//!
//! Scripts (the host integration tests, the benchmark runner) rely on it:
//!
//! * An empty or whitespace-only line prints nothing.
//! * Every other line prints the command's output, if any, then **exactly
//!   one status line**: `ok` on success or `error: <message>` on failure.
//!   The message is a single line, such as `cat: /x: not found`,
//!   `usage: cat PATH` or `unknown command 'lss' (try 'help')`. The status
//!   line always starts at the beginning of a line.
//! * Lines end in `\n`; the console turns that into CRLF.
//! * `execute` does not print the prompt.
//!
//! # Words and paths
//!
//! Words are split at whitespace; double quotes group words (see
//! [`parse::words`]). `write` and `append` take the rest of the line after
//! the path verbatim (trimmed; one pair of enclosing quotes is removed).
//! There is no working directory: relative paths are resolved against `/`,
//! and the shell always hands normalised absolute paths to the OS (see
//! [`parse::path`]).
//!
//! # Adding a command
//!
//! Add a handler `fn(&mut Ctx, &Args) -> Result<(), Error>` to the module
//! for its job (`files`, `node`, `bench`, `control`) and one [`Command`] entry to
//! `COMMANDS` (in `commands`). Names of several words (`bench ring`,
//! `cache stats`) are subcommands: the longest matching name wins, and a
//! known first word with an unknown second word gets a helpful error.
//! Handlers return messages *without* the command name; the dispatcher
//! prefixes it (`"/x: not found"` becomes `cat: /x: not found`).

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use crate::os::{Errno, Fd, OpenFlags, Os};
use crate::parse::{self, Word};

mod bench;
mod cachearg;
mod commands;
mod control;
mod files;
mod groups;
mod miss;
mod node;

use commands::COMMANDS;

/// What the console loop should do after a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Print the prompt and read the next line.
    Continue,
    /// The user asked to shut the node down (`shutdown`).
    Shutdown,
}

/// Default number of round trips for `bench ring`.
pub const BENCH_RING_DEFAULT: usize = 10_000;
/// Largest number of round trips `bench ring` accepts.
pub const BENCH_RING_MAX: usize = 1_000_000;
/// Chunk size for `fill` writes and `sum` reads.
pub const IO_CHUNK: usize = 64 * 1024;
/// Longest user word quoted back in an error message.
const MAX_QUOTED: usize = 48;

/// One shell command: its name, documentation and handler.
pub struct Command {
    /// The words that select the command: `"ls"`, or `"bench ring"` for a
    /// subcommand.
    pub name: &'static str,
    /// Synopsis shown by `help` and in `usage:` errors, e.g. `cat PATH`.
    pub usage: &'static str,
    /// One-line description shown by `help`.
    pub help: &'static str,
    /// Fewest argument words accepted after the name.
    pub min_args: usize,
    /// Most argument words accepted after the name.
    pub max_args: usize,
    /// The implementation.
    run: fn(&mut Ctx<'_>, &Args<'_>) -> Result<(), Error>,
}

impl core::fmt::Debug for Command {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Command")
            .field("name", &self.name)
            .field("usage", &self.usage)
            .finish_non_exhaustive()
    }
}

/// Every command the shell knows, in `help` order.
pub fn commands() -> &'static [Command] {
    COMMANDS
}

/// The shell of one node.
#[derive(Debug, Clone)]
pub struct Shell {
    node_id: u16,
}

impl Shell {
    /// A shell for node `node_id`.
    pub fn new(node_id: u16) -> Shell {
        Shell { node_id }
    }

    /// The node this shell runs on.
    pub fn node_id(&self) -> u16 {
        self.node_id
    }

    /// The prompt, exactly `"n{id}> "`.
    pub fn prompt(&self) -> String {
        format!("n{}> ", self.node_id)
    }

    /// Run one command line; see the [module docs](self) for the output
    /// contract. Never panics, whatever the line and whatever the OS
    /// returns.
    pub fn execute(&mut self, os: &mut dyn Os, line: &str) -> Outcome {
        let words = parse::words(line);
        if words.is_empty() {
            return Outcome::Continue;
        }
        let mut ctx = Ctx {
            os,
            at_line_start: true,
            shutdown: false,
        };
        let result = dispatch(&mut ctx, line, &words);
        if !ctx.at_line_start {
            ctx.print("\n");
        }
        match result {
            Ok(()) => ctx.print("ok\n"),
            Err(msg) => {
                let mut status = String::with_capacity(msg.len() + 8);
                status.push_str("error: ");
                status.push_str(&one_line(&msg));
                status.push('\n');
                ctx.print(&status);
            }
        }
        if ctx.shutdown {
            Outcome::Shutdown
        } else {
            Outcome::Continue
        }
    }
}

/// Find the command for `words` and run it; the error is the full status
/// message (after `error: `).
fn dispatch(ctx: &mut Ctx<'_>, line: &str, words: &[Word]) -> Result<(), String> {
    let first = words.first().map_or("", |w| w.text.as_str());
    let mut best: Option<(&Command, usize)> = None;
    for cmd in COMMANDS {
        let n = cmd.name.split(' ').count();
        let matches = words.len() >= n
            && cmd
                .name
                .split(' ')
                .zip(words)
                .all(|(a, b)| a == b.text.as_str());
        if matches && best.is_none_or(|(_, m)| n > m) {
            best = Some((cmd, n));
        }
    }
    let Some((cmd, n)) = best else {
        return Err(no_such_command(first, words.get(1)));
    };
    let args = Args {
        line,
        words: words.get(n..).unwrap_or(&[]),
    };
    let result = if args.len() < cmd.min_args || args.len() > cmd.max_args {
        Err(Error::Usage)
    } else {
        (cmd.run)(ctx, &args)
    };
    result.map_err(|e| match e {
        Error::Usage => format!("usage: {}", cmd.usage),
        Error::Msg(m) => format!("{}: {}", cmd.name, m),
    })
}

/// The message for a line that matches no command: an unknown command, or
/// a command group (`bench`) with a missing or unknown subcommand.
fn no_such_command(first: &str, second: Option<&Word>) -> String {
    let group: Vec<&Command> = COMMANDS
        .iter()
        .filter(|c| c.name.split(' ').next() == Some(first) && c.name.contains(' '))
        .collect();
    if group.is_empty() {
        return format!("unknown command '{}' (try 'help')", quoted(first));
    }
    match second {
        Some(sub) => format!(
            "{}: unknown subcommand '{}' (try 'help')",
            first,
            quoted(&sub.text)
        ),
        None => {
            let usages: Vec<&str> = group.iter().map(|c| c.usage).collect();
            format!("usage: {}", usages.join(" | "))
        }
    }
}

/// Why a command failed.
enum Error {
    /// Wrong arguments: the dispatcher prints the command's usage.
    Usage,
    /// Anything else; the dispatcher prefixes the command name.
    Msg(String),
}

impl From<String> for Error {
    fn from(s: String) -> Error {
        Error::Msg(s)
    }
}

/// A user path, normalised; `.` and `..` are an "invalid argument" error.
fn user_path(p: &str) -> Result<String, Error> {
    parse::path(p).map_err(|e| {
        let inv = Errno::Invalid;
        Error::Msg(format!("{}: {inv} ({e})", one_line(&quoted(p))))
    })
}

/// An error about `path`: `"<path>: <errno>"`.
fn at(path: &str) -> impl FnOnce(Errno) -> Error + '_ {
    move |e| Error::Msg(format!("{path}: {e}"))
}

/// Replace control characters so a message stays on one line.
fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// A user-supplied word, shortened for quoting in a message.
fn quoted(s: &str) -> String {
    let mut out: String = s.chars().take(MAX_QUOTED).collect();
    if out.len() < s.len() {
        out.push_str("...");
    }
    out
}

/// What a command handler works with: the OS and the console.
struct Ctx<'a> {
    os: &'a mut dyn Os,
    /// True when the last thing printed ended a line (or nothing was).
    at_line_start: bool,
    /// Set by `shutdown`.
    shutdown: bool,
}

impl Ctx<'_> {
    /// Print text, tracking whether a line is open.
    fn print(&mut self, s: &str) {
        if let Some(last) = s.chars().last() {
            self.os.print(s);
            self.at_line_start = last == '\n';
        }
    }

    /// Print one line (a newline is added).
    fn println(&mut self, s: &str) {
        let mut line = String::with_capacity(s.len() + 1);
        line.push_str(s);
        line.push('\n');
        self.print(&line);
    }

    /// Open `path`, run `f` on the descriptor and close it again, even if
    /// `f` failed (a close error is reported only if `f` succeeded).
    fn with_file<T>(
        &mut self,
        path: &str,
        flags: OpenFlags,
        f: impl FnOnce(&mut Ctx<'_>, Fd) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let fd = self.os.open(path, flags).map_err(at(path))?;
        let result = f(self, fd);
        let closed = self.os.close(fd);
        let value = result?;
        closed.map_err(at(path))?;
        Ok(value)
    }

    /// Write all of `data`; a write that makes no progress is an I/O error.
    fn write_all(&mut self, fd: Fd, data: &[u8]) -> Result<(), Errno> {
        self.write_all_counted(fd, data, &mut 0)
    }

    /// [`Ctx::write_all`], adding every byte written to `written` (so a
    /// failure can say how far it got).
    fn write_all_counted(
        &mut self,
        fd: Fd,
        mut data: &[u8],
        written: &mut u64,
    ) -> Result<(), Errno> {
        while !data.is_empty() {
            let n = self.os.write(fd, data)?;
            if n == 0 {
                return Err(Errno::Io);
            }
            data = data.get(n..).ok_or(Errno::Io)?;
            *written = written.saturating_add(n as u64);
        }
        Ok(())
    }

    /// Read the file to its end in chunks of `chunk` bytes, handing each
    /// chunk to `f`. Returns the number of bytes read.
    fn read_all(
        &mut self,
        fd: Fd,
        chunk: usize,
        mut f: impl FnMut(&mut Ctx<'_>, &[u8]),
    ) -> Result<u64, Errno> {
        let mut buf = vec![0u8; chunk];
        let mut total = 0u64;
        loop {
            let n = self.os.read(fd, &mut buf)?;
            if n == 0 {
                return Ok(total);
            }
            let data = buf.get(..n).ok_or(Errno::Io)?;
            total = total.saturating_add(n as u64);
            f(self, data);
        }
    }
}

/// The argument words of a command (after its name).
struct Args<'a> {
    line: &'a str,
    words: &'a [Word],
}

impl Args<'_> {
    /// Number of argument words.
    fn len(&self) -> usize {
        self.words.len()
    }

    /// Argument `i` (quotes removed), or `None`.
    fn get(&self, i: usize) -> Option<&str> {
        self.words.get(i).map(|w| w.text.as_str())
    }

    /// Argument `i` as a normalised absolute path.
    fn path(&self, i: usize) -> Result<String, Error> {
        user_path(self.get(i).ok_or(Error::Usage)?)
    }

    /// Argument `i` as a size (`64k`), for command errors.
    fn size(&self, i: usize) -> Result<u64, Error> {
        let s = self.get(i).ok_or(Error::Usage)?;
        parse::size(s).map_err(|_| {
            Error::Msg(format!(
                "bad size '{}' (examples: 4096, 64k, 1m)",
                quoted(s)
            ))
        })
    }

    /// The raw text after argument `i`, with one pair of enclosing quotes
    /// removed (see [`parse::unquote`]).
    fn text_after(&self, i: usize) -> Result<&str, Error> {
        let w = self.words.get(i).ok_or(Error::Usage)?;
        let rest = self.line.get(w.end..).ok_or(Error::Usage)?;
        Ok(parse::unquote(rest))
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod fuzz;
