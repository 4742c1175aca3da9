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
//! Add a handler `fn(&mut Ctx, &Args) -> Result<(), Error>` and one
//! [`Command`] entry to `COMMANDS`. Names of several words (`bench ring`,
//! `cache stats`) are subcommands: the longest matching name wins, and a
//! known first word with an unknown second word gets a helpful error.
//! Handlers return messages *without* the command name; the dispatcher
//! prefixes it (`"/x: not found"` becomes `cat: /x: not found`).

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use crate::os::{Errno, Fd, FileKind, OpenFlags, Os};
use crate::parse::{self, Word};
use crate::pattern;
use crate::stats::Summary;

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
/// Chunk size for `cat` reads (bounds the text printed at once).
const CAT_CHUNK: usize = 4096;
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

const MANY: usize = usize::MAX;

static COMMANDS: &[Command] = &[
    Command {
        name: "help",
        usage: "help [COMMAND]",
        help: "list commands, or describe one",
        min_args: 0,
        max_args: 1,
        run: cmd_help,
    },
    Command {
        name: "ls",
        usage: "ls [PATH]",
        help: "list a directory (default /) or show one file",
        min_args: 0,
        max_args: 1,
        run: cmd_ls,
    },
    Command {
        name: "cat",
        usage: "cat PATH",
        help: "print a file as text (unprintable bytes as '.')",
        min_args: 1,
        max_args: 1,
        run: cmd_cat,
    },
    Command {
        name: "write",
        usage: "write PATH TEXT",
        help: "create or truncate a file and write TEXT plus a newline",
        min_args: 2,
        max_args: MANY,
        run: cmd_write,
    },
    Command {
        name: "append",
        usage: "append PATH TEXT",
        help: "append TEXT plus a newline to a file (created if missing)",
        min_args: 2,
        max_args: MANY,
        run: cmd_append,
    },
    Command {
        name: "fill",
        usage: "fill PATH SIZE",
        help: "create or truncate a file and write SIZE bytes of the test pattern",
        min_args: 2,
        max_args: 2,
        run: cmd_fill,
    },
    Command {
        name: "sum",
        usage: "sum PATH",
        help: "print the CRC-32 and size of a file",
        min_args: 1,
        max_args: 1,
        run: cmd_sum,
    },
    Command {
        name: "stat",
        usage: "stat PATH",
        help: "print inode number, kind, size and version",
        min_args: 1,
        max_args: 1,
        run: cmd_stat,
    },
    Command {
        name: "truncate",
        usage: "truncate PATH SIZE",
        help: "set a file's size (created if missing)",
        min_args: 2,
        max_args: 2,
        run: cmd_truncate,
    },
    Command {
        name: "rm",
        usage: "rm PATH",
        help: "remove a file",
        min_args: 1,
        max_args: 1,
        run: cmd_rm,
    },
    Command {
        name: "mkdir",
        usage: "mkdir PATH",
        help: "create a directory",
        min_args: 1,
        max_args: 1,
        run: cmd_mkdir,
    },
    Command {
        name: "rmdir",
        usage: "rmdir PATH",
        help: "remove an empty directory",
        min_args: 1,
        max_args: 1,
        run: cmd_rmdir,
    },
    Command {
        name: "sync",
        usage: "sync",
        help: "flush everything this node holds to stable storage",
        min_args: 0,
        max_args: 0,
        run: cmd_sync,
    },
    Command {
        name: "nodes",
        usage: "nodes",
        help: "show cluster membership, heartbeats and epochs (* = this node)",
        min_args: 0,
        max_args: 0,
        run: cmd_nodes,
    },
    Command {
        name: "uptime",
        usage: "uptime",
        help: "time since boot",
        min_args: 0,
        max_args: 0,
        run: cmd_uptime,
    },
    Command {
        name: "bench ring",
        usage: "bench ring [COUNT]",
        help: "time COUNT empty round trips to the directory (default 10000)",
        min_args: 0,
        max_args: 1,
        run: cmd_bench_ring,
    },
    Command {
        name: "bench rpc",
        usage: "bench rpc [COUNT]",
        help: "time COUNT empty file-server requests over this mode's file transport (the rings, or TCP in net mode)",
        min_args: 0,
        max_args: 1,
        run: cmd_bench_rpc,
    },
    Command {
        name: "bench pingpong",
        usage: "bench pingpong [COUNT]",
        help: "COUNT bare cache-line round trips with the directory (the floor for bench ring)",
        min_args: 0,
        max_args: 1,
        run: cmd_bench_pingpong,
    },
    Command {
        name: "bench doorbell",
        usage: "bench doorbell [COUNT]",
        help: "time COUNT doorbell round trips with the directory (halted, woken only by the doorbell)",
        min_args: 0,
        max_args: 1,
        run: cmd_bench_doorbell,
    },
    Command {
        name: "bench read",
        usage: "bench read PATH",
        help: "time a 4 KiB read of every page of PATH once (CM, CM-R, CH-R or local hit, by residency)",
        min_args: 1,
        max_args: 1,
        run: cmd_bench_read,
    },
    Command {
        name: "bench inv",
        usage: "bench inv PATH",
        help: "time a synchronous invalidation of every page of PATH this node owns, one at a time (private/net: drop each page of our own copy)",
        min_args: 1,
        max_args: 1,
        run: cmd_bench_inv,
    },
    Command {
        name: "bench dir",
        usage: "bench dir PATH [ROUNDS] [BATCH]",
        help: "directory throughput: map and drop every page of PATH (owned by another node), BATCH page requests at a time (1..64, default 32)",
        min_args: 1,
        max_args: 3,
        run: cmd_bench_dir,
    },
    Command {
        name: "cache stats",
        usage: "cache stats",
        help: "page-cache mode and counters of this node",
        min_args: 0,
        max_args: 0,
        run: cmd_cache_stats,
    },
    Command {
        name: "cache drop",
        usage: "cache drop",
        help: "give back every cached page of this node through the protocol",
        min_args: 0,
        max_args: 0,
        run: cmd_cache_drop,
    },
    Command {
        name: "mmap-read",
        usage: "mmap-read PATH",
        help: "map a file (zero copy) and print the crc32 of its bytes read through the mapping",
        min_args: 1,
        max_args: 1,
        run: cmd_mmap_read,
    },
    Command {
        name: "dir stats",
        usage: "dir stats",
        help: "directory counters: entries, bytes per entry, ops, batches, disk I/O",
        min_args: 0,
        max_args: 0,
        run: cmd_dir_stats,
    },
    Command {
        name: "fio",
        usage: "fio --OPT=VALUE ...",
        help: "fio subset (--size required; name rw bs filename directory numjobs iodepth runtime time_based ioengine invalidate fsync ramp_time randseed): summary + RESULT {json}",
        min_args: 1,
        max_args: MANY,
        run: cmd_fio,
    },
    Command {
        name: "shutdown",
        usage: "shutdown",
        help: "shut this node down",
        min_args: 0,
        max_args: 0,
        run: cmd_shutdown,
    },
];

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

// ---------------------------------------------------------------------------
// Handlers.

fn cmd_help(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let selected: Vec<&Command> = match args.get(0) {
        None => COMMANDS.iter().collect(),
        Some(name) => COMMANDS
            .iter()
            .filter(|c| c.name == name || c.name.split(' ').next() == Some(name))
            .collect(),
    };
    if selected.is_empty() {
        return Err(Error::Msg(format!(
            "no command '{}' (try 'help')",
            quoted(args.get(0).unwrap_or(""))
        )));
    }
    if args.len() == 0 {
        ctx.println("commands (paths are absolute; relative ones start at /):");
    }
    let width = selected.iter().map(|c| c.usage.len()).max().unwrap_or(0);
    for c in selected {
        ctx.println(&format!("  {:<width$}  {}", c.usage, c.help));
    }
    Ok(())
}

fn cmd_ls(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let path = match args.get(0) {
        Some(p) => user_path(p)?,
        None => String::from("/"),
    };
    let attr = ctx.os.stat(&path).map_err(at(&path))?;
    if attr.kind == FileKind::File {
        ctx.println(&ls_line(attr.kind, attr.size, &path));
        return Ok(());
    }
    let entries = ctx.os.readdir(&path).map_err(at(&path))?;
    let mut out = String::new();
    for e in &entries {
        out.push_str(&ls_line(e.attr.kind, e.attr.size, &e.name));
        out.push('\n');
    }
    ctx.print(&out);
    Ok(())
}

/// One `ls` line: kind, size right-aligned, name (`/` after directories).
fn ls_line(kind: FileKind, size: u64, name: &str) -> String {
    let (k, slash) = match kind {
        FileKind::Dir => ('d', "/"),
        FileKind::File => ('-', ""),
    };
    format!("{} {:>10} {}{}", k, size, one_line(name), slash)
}

fn cmd_cat(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let path = args.path(0)?;
    ctx.with_file(&path, OpenFlags::default(), |ctx, fd| {
        ctx.read_all(fd, CAT_CHUNK, |ctx, data| {
            let text: String = data.iter().map(|&b| printable(b)).collect();
            ctx.print(&text);
        })
        .map_err(at(&path))
    })?;
    // The dispatcher ends an unterminated last line before the status.
    Ok(())
}

/// How `cat` shows one byte.
fn printable(b: u8) -> char {
    match b {
        b'\n' | b'\t' | 0x20..=0x7e => char::from(b),
        _ => '.',
    }
}

fn cmd_write(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let flags = OpenFlags {
        create: true,
        truncate: true,
        ..OpenFlags::default()
    };
    write_text(ctx, args, flags)
}

fn cmd_append(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let flags = OpenFlags {
        create: true,
        append: true,
        ..OpenFlags::default()
    };
    write_text(ctx, args, flags)
}

/// `write` / `append`: the text after the path, plus a newline.
fn write_text(ctx: &mut Ctx<'_>, args: &Args<'_>, flags: OpenFlags) -> Result<(), Error> {
    let path = args.path(0)?;
    let mut data = String::from(args.text_after(0)?);
    data.push('\n');
    ctx.with_file(&path, flags, |ctx, fd| {
        ctx.write_all(fd, data.as_bytes()).map_err(at(&path))
    })
}

fn cmd_fill(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let path = args.path(0)?;
    let size = args.size(1)?;
    let flags = OpenFlags {
        create: true,
        truncate: true,
        ..OpenFlags::default()
    };
    let mut write_failed = false;
    let r = ctx.with_file(&path, flags, |ctx, fd| {
        let chunk = usize::try_from(size).map_or(IO_CHUNK, |s| s.min(IO_CHUNK));
        let mut buf = vec![0u8; chunk];
        let mut written = 0u64;
        while written < size {
            let n = usize::try_from(size - written).map_or(chunk, |r| r.min(chunk));
            let part = buf.get_mut(..n).ok_or(Error::Usage)?;
            pattern::fill(part, written);
            if let Err(e) = ctx.write_all_counted(fd, part, &mut written) {
                write_failed = true;
                return Err(Error::Msg(format!(
                    "{path}: {e} after writing {written} of {size} bytes"
                )));
            }
        }
        ctx.println(&format!("wrote {written} bytes"));
        Ok(())
    });
    match r {
        // A partial file (e.g. 66 MB of a fill that ran out of space) only
        // wastes the space: remove it, or say that it is still there.
        Err(Error::Msg(m)) if write_failed => Err(Error::Msg(match ctx.os.unlink(&path) {
            Ok(()) => format!("{m}; the partial file was removed"),
            Err(e) => format!("{m}; the partial file remains (removing it: {e})"),
        })),
        r => r,
    }
}

fn cmd_sum(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let path = args.path(0)?;
    let mut hasher = crc32fast::Hasher::new();
    let size = ctx.with_file(&path, OpenFlags::default(), |ctx, fd| {
        ctx.read_all(fd, IO_CHUNK, |_, data| hasher.update(data))
            .map_err(at(&path))
    })?;
    ctx.println(&format!("crc32={:08x} size={}", hasher.finalize(), size));
    Ok(())
}

fn cmd_stat(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let path = args.path(0)?;
    let a = ctx.os.stat(&path).map_err(at(&path))?;
    let kind = match a.kind {
        FileKind::File => "file",
        FileKind::Dir => "dir",
    };
    ctx.println(&format!(
        "ino={} kind={} size={} version={}",
        a.ino, kind, a.size, a.version
    ));
    Ok(())
}

fn cmd_truncate(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let path = args.path(0)?;
    let size = args.size(1)?;
    let flags = OpenFlags {
        create: true,
        ..OpenFlags::default()
    };
    ctx.with_file(&path, flags, |ctx, fd| {
        ctx.os.truncate(fd, size).map_err(at(&path))
    })
}

fn cmd_rm(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let path = args.path(0)?;
    ctx.os.unlink(&path).map_err(at(&path))
}

fn cmd_mkdir(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let path = args.path(0)?;
    ctx.os.mkdir(&path).map_err(at(&path))
}

fn cmd_rmdir(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let path = args.path(0)?;
    ctx.os.rmdir(&path).map_err(at(&path))
}

fn cmd_sync(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> Result<(), Error> {
    ctx.os.sync().map_err(|e| Error::Msg(format!("{e}")))
}

fn cmd_nodes(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> Result<(), Error> {
    let info = ctx.os.cluster();
    let mut out = format!("epoch={}\n", info.epoch);
    for n in &info.nodes {
        let mark = if n.id == info.self_id { '*' } else { ' ' };
        let id = if n.id == 0 {
            String::from("dir")
        } else {
            format!("{}", n.id)
        };
        out.push_str(&format!(
            "{} {:<4} {:<8} heartbeat={} epoch={}\n",
            mark,
            id,
            one_line(&n.state),
            n.heartbeat,
            n.epoch
        ));
    }
    ctx.print(&out);
    Ok(())
}

fn print_pairs(ctx: &mut Ctx<'_>, pairs: &[(String, String)]) {
    let width = pairs.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (k, v) in pairs {
        out.push_str(&format!("{:<width$}  {}\n", one_line(k), one_line(v)));
    }
    ctx.print(&out);
}

fn cmd_cache_stats(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> Result<(), Error> {
    let pairs = ctx
        .os
        .cache_stats()
        .map_err(|e| Error::Msg(format!("{e}")))?;
    print_pairs(ctx, &pairs);
    Ok(())
}

fn cmd_cache_drop(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> Result<(), Error> {
    let line = ctx
        .os
        .cache_drop()
        .map_err(|e| Error::Msg(format!("{e}")))?;
    ctx.println(&line);
    Ok(())
}

fn cmd_mmap_read(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let path = args.path(0)?;
    let (crc, size) = ctx.os.mmap_read(&path).map_err(at(&path))?;
    ctx.println(&format!("crc32={crc:08x} size={size}"));
    Ok(())
}

fn cmd_dir_stats(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> Result<(), Error> {
    let pairs = ctx.os.dir_stats().map_err(|e| Error::Msg(format!("{e}")))?;
    print_pairs(ctx, &pairs);
    Ok(())
}

fn cmd_uptime(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> Result<(), Error> {
    ctx.println(&format_uptime(ctx.os.uptime_ns()));
    Ok(())
}

/// `up S.UUUUUU s` for a time in nanoseconds.
fn format_uptime(ns: u64) -> String {
    format!(
        "up {}.{:06} s",
        ns / 1_000_000_000,
        (ns % 1_000_000_000) / 1000
    )
}

/// Print `LABEL: n=.. median=.. ns p99=.. ns min=.. ns max=.. ns`.
fn print_summary(ctx: &mut Ctx<'_>, label: &str, samples: &mut [u64]) -> Result<(), Error> {
    let s = Summary::from_samples(samples).ok_or_else(|| Error::Msg(String::from("no samples")))?;
    ctx.println(&format!(
        "{label}: n={} median={} ns p99={} ns min={} ns max={} ns mean={} ns",
        s.count, s.median, s.p99, s.min, s.max, s.mean
    ));
    Ok(())
}

fn cmd_bench_read(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let path = args.path(0)?;
    let mut samples = ctx.os.bench_read(&path).map_err(at(&path))?;
    print_summary(ctx, "read 4k", &mut samples)
}

fn cmd_bench_inv(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let path = args.path(0)?;
    let mut samples = ctx.os.bench_inv(&path).map_err(at(&path))?;
    print_summary(ctx, "invalidate 1 page", &mut samples)
}

fn cmd_bench_dir(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let path = args.path(0)?;
    let rounds = match args.get(1) {
        None => 10,
        Some(s) => parse::u64_dec(s)
            .ok()
            .filter(|r| (1..=100_000).contains(r))
            .ok_or_else(|| Error::Msg(format!("bad rounds '{}' (1 to 100000)", quoted(s))))?
            as u32,
    };
    let max = crate::os::MAX_DIR_BATCH;
    let batch = match args.get(2) {
        None => crate::os::DEFAULT_DIR_BATCH,
        Some(s) => parse::u64_dec(s)
            .ok()
            .filter(|b| (1..=max as u64).contains(b))
            .ok_or_else(|| Error::Msg(format!("bad batch '{}' (1 to {max})", quoted(s))))?
            as usize,
    };
    let (ops, ns) = ctx.os.bench_dir(&path, rounds, batch).map_err(at(&path))?;
    let per_sec = ops
        .saturating_mul(1_000_000_000)
        .checked_div(ns)
        .unwrap_or(0);
    ctx.println(&format!(
        "directory page ops: n={ops} in {} us = {per_sec} ops/s (batch {batch})",
        ns / 1000
    ));
    Ok(())
}

fn cmd_bench_pingpong(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let count = bench_count(args)?;
    let mut samples = ctx
        .os
        .bench_pingpong(count)
        .map_err(|e| Error::Msg(format!("{e}")))?;
    print_summary(ctx, "cache-line round trip", &mut samples)
}

fn cmd_bench_doorbell(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let count = bench_count(args)?;
    let mut samples = ctx
        .os
        .bench_doorbell(count)
        .map_err(|e| Error::Msg(format!("{e}")))?;
    print_summary(ctx, "doorbell round trip", &mut samples)
}

/// The optional COUNT of `bench ring` / `bench pingpong` / `bench doorbell`.
fn bench_count(args: &Args<'_>) -> Result<usize, Error> {
    Ok(match args.get(0) {
        None => BENCH_RING_DEFAULT,
        Some(s) => parse::u64_dec(s)
            .ok()
            .and_then(|c| usize::try_from(c).ok())
            .filter(|c| (1..=BENCH_RING_MAX).contains(c))
            .ok_or_else(|| {
                Error::Msg(format!(
                    "bad count '{}' (1 to {})",
                    quoted(s),
                    BENCH_RING_MAX
                ))
            })?,
    })
}

fn cmd_bench_ring(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let count = bench_count(args)?;
    let mut samples = ctx
        .os
        .bench_ring(count)
        .map_err(|e| Error::Msg(format!("{e}")))?;
    let s = Summary::from_samples(&mut samples)
        .ok_or_else(|| Error::Msg(String::from("no samples")))?;
    ctx.println(&format!(
        "ring round trip: n={} median={} ns p99={} ns min={} ns max={} ns",
        s.count, s.median, s.p99, s.min, s.max
    ));
    Ok(())
}

fn cmd_bench_rpc(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let count = bench_count(args)?;
    let (transport, mut samples) = ctx
        .os
        .bench_rpc(count)
        .map_err(|e| Error::Msg(format!("{e}")))?;
    let s = Summary::from_samples(&mut samples)
        .ok_or_else(|| Error::Msg(String::from("no samples")))?;
    ctx.println(&format!(
        "rpc round trip over {transport}: n={} median={} ns p99={} ns min={} ns max={} ns",
        s.count, s.median, s.p99, s.min, s.max
    ));
    Ok(())
}

fn cmd_fio(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let argv: Vec<&str> = args.words.iter().map(|w| w.text.as_str()).collect();
    let out = crate::fio::command(&mut *ctx.os, &argv)
        .map_err(|e| Error::Msg(String::from(e.message())))?;
    ctx.print(&out);
    Ok(())
}

fn cmd_shutdown(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> Result<(), Error> {
    ctx.shutdown = true;
    Ok(())
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod fuzz;
