//! Command-line options, parsed with clap; errors are one line, in the
//! server's own words.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::time::Duration;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{ArgAction, CommandFactory, FromArgMatches, Parser};

/// What the server does (the top of `--help`).
const ABOUT: &str = "\
QEMU ivshmem-server protocol for `-device ivshmem-doorbell,chardev=...`:
hands every client the shared-memory fd, a peer id and one eventfd per
vector for itself and for every other peer. Start it before QEMU.";

const AFTER_HELP: &str =
    "Exit status: 0 after SIGTERM/SIGINT, 1 if it cannot start or fails, 2 for bad usage.";

/// The command line as clap sees it. Every option is collected as a
/// list so that one given twice is refused by name, after its values were
/// checked in order; [`parse`] then requires --socket and --shm-path.
#[derive(Debug, Parser)]
#[command(
    name = "onecopy-ivshmem-server",
    about = ABOUT,
    after_help = AFTER_HELP,
    override_usage = "onecopy-ivshmem-server --socket PATH --shm-path PATH [options]",
    disable_version_flag = true,
    max_term_width = 100
)]
struct Cli {
    /// Unix socket to listen on (refused if a live server has it)
    #[arg(long, value_name = "PATH", action = ArgAction::Append,
          value_parser = path)]
    socket: Vec<PathBuf>,
    /// Existing shared-memory file (/dev/shm or hugetlbfs), opened
    /// read-write, never truncated
    #[arg(long, value_name = "PATH", action = ArgAction::Append,
          value_parser = path)]
    shm_path: Vec<PathBuf>,
    /// Create --shm-path with this size if it does not exist
    #[arg(long = "create-size", value_name = "MiB", action = ArgAction::Append,
          value_parser = create_size)]
    create_size_mib: Vec<u64>,
    /// Interrupt vectors per peer, 1..=64 (4)
    #[arg(long, value_name = "N", action = ArgAction::Append, value_parser = vectors)]
    vectors: Vec<u16>,
    /// Write our pid here (removed on exit)
    #[arg(long, value_name = "PATH", action = ArgAction::Append, value_parser = path)]
    pid_file: Vec<PathBuf>,
    /// Drop a client that has not read a pending message for this long
    /// (5000)
    #[arg(long = "stall-timeout-ms", value_name = "MS", action = ArgAction::Append,
          value_parser = stall_ms)]
    stall_timeout_ms: Vec<u64>,
    /// Fence failed nodes: when the directory asks (a fence request word
    /// in the region), SIGKILL that node's QEMU (pid from DIR/nodeK.pid)
    /// and confirm in the region
    #[arg(long, value_name = "DIR", action = ArgAction::Append, value_parser = path)]
    fence_run_dir: Vec<PathBuf>,
    /// Log every message sent
    #[arg(long, short = 'v')]
    verbose: bool,
}

/// The one value of an option (None if not given); given twice is an
/// error.
fn once<T>(name: &str, mut v: Vec<T>) -> Result<Option<T>, String> {
    if v.len() > 1 {
        return Err(format!("{name} given twice"));
    }
    Ok(v.pop())
}

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    Help,
    Run(Options),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub socket: PathBuf,
    pub shm_path: PathBuf,
    pub create_size_mib: Option<u64>,
    pub vectors: u16,
    pub pid_file: Option<PathBuf>,
    pub stall_timeout: Duration,
    pub verbose: bool,
    pub fence_run_dir: Option<PathBuf>,
}

pub const DEFAULT_VECTORS: u16 = 4;
pub const MAX_VECTORS: u16 = 64;
/// Largest --create-size (1 TiB).
const MAX_CREATE_MIB: u64 = 1 << 20;

/// The `--help` text.
pub fn usage() -> String {
    Cli::command().render_help().to_string()
}

/// Parse the arguments after the program name. Errors are one line.
pub fn parse<I>(args: I) -> Result<Command, String>
where
    I: IntoIterator<Item = String>,
{
    let argv = std::iter::once("onecopy-ivshmem-server".to_string()).chain(args);
    let cli = match Cli::command()
        .try_get_matches_from(argv)
        .and_then(|m| Cli::from_arg_matches(&m))
    {
        Ok(c) => c,
        Err(e) if e.kind() == ErrorKind::DisplayHelp => return Ok(Command::Help),
        Err(e) => return Err(one_line(&e)),
    };
    let socket = once("--socket", cli.socket)?.ok_or("--socket PATH is required (see --help)")?;
    let shm_path =
        once("--shm-path", cli.shm_path)?.ok_or("--shm-path PATH is required (see --help)")?;
    let create_size_mib = once("--create-size", cli.create_size_mib)?;
    let vectors = once("--vectors", cli.vectors)?.unwrap_or(DEFAULT_VECTORS);
    let pid_file = once("--pid-file", cli.pid_file)?;
    let stall_ms = once("--stall-timeout-ms", cli.stall_timeout_ms)?.unwrap_or(5000);
    let fence_run_dir = once("--fence-run-dir", cli.fence_run_dir)?;
    if socket.as_os_str().len() >= 108 {
        return Err(format!(
            "--socket path is too long for a unix socket (max 107 bytes): {}",
            socket.display()
        ));
    }
    Ok(Command::Run(Options {
        socket,
        shm_path,
        create_size_mib,
        vectors,
        pid_file,
        stall_timeout: Duration::from_millis(stall_ms),
        verbose: cli.verbose,
        fence_run_dir,
    }))
}

/// A clap error as one line naming the flag.
fn one_line(e: &clap::Error) -> String {
    let ctx = |k: ContextKind| match e.get(k) {
        Some(ContextValue::String(s)) => s.clone(),
        Some(ContextValue::Strings(v)) => v.join(", "),
        _ => String::new(),
    };
    // `--socket <PATH>` -> `--socket`.
    let flag = |k: ContextKind| {
        ctx(k)
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_string()
    };
    match e.kind() {
        ErrorKind::MissingRequiredArgument => {
            let missing = ctx(ContextKind::InvalidArg);
            let first = missing
                .split(", ")
                .next()
                .and_then(|a| a.split_whitespace().next())
                .unwrap_or("--socket")
                .to_string();
            format!("{first} PATH is required (see --help)")
        }
        ErrorKind::UnknownArgument => {
            let arg = ctx(ContextKind::InvalidArg);
            if arg.starts_with('-') {
                format!("unknown option '{arg}' (see --help)")
            } else {
                format!("unexpected argument '{arg}' (see --help)")
            }
        }
        ErrorKind::TooManyValues => {
            format!("{} takes no value", flag(ContextKind::InvalidArg))
        }
        ErrorKind::InvalidValue | ErrorKind::ValueValidation => {
            let name = flag(ContextKind::InvalidArg);
            match std::error::Error::source(e) {
                Some(why) => format!("{name} {why}"),
                None => format!("{name} needs a value"),
            }
        }
        _ => e
            .render()
            .to_string()
            .lines()
            .next()
            .unwrap_or("bad usage")
            .trim_start_matches("error: ")
            .to_string(),
    }
}

fn path(v: &str) -> Result<PathBuf, String> {
    if v.is_empty() {
        return Err("needs a value".into());
    }
    Ok(PathBuf::from(OsStr::new(v)))
}

fn number(value: &str, min: u64, max: u64) -> Result<u64, String> {
    match value.parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "must be a whole number in {min}..={max}, not '{value}'"
        )),
    }
}

fn create_size(v: &str) -> Result<u64, String> {
    number(v, 1, MAX_CREATE_MIB)
}

fn vectors(v: &str) -> Result<u16, String> {
    number(v, 1, u64::from(MAX_VECTORS)).map(|n| n as u16)
}

fn stall_ms(v: &str) -> Result<u64, String> {
    number(v, 1, 3_600_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Command, String> {
        parse(args.iter().map(|s| s.to_string()))
    }

    fn run(args: &[&str]) -> Options {
        match p(args) {
            Ok(Command::Run(o)) => o,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn defaults_and_all_options() {
        let o = run(&["--socket", "/tmp/s", "--shm-path", "/dev/shm/x"]);
        assert_eq!(o.vectors, 4);
        assert_eq!(o.create_size_mib, None);
        assert_eq!(o.pid_file, None);
        assert!(!o.verbose);
        assert_eq!(o.stall_timeout, Duration::from_secs(5));
        let o = run(&[
            "--socket=/tmp/s",
            "--shm-path=/dev/shm/x",
            "--vectors",
            "64",
            "--create-size",
            "16",
            "--pid-file",
            "/tmp/p",
            "--stall-timeout-ms=250",
            "--verbose",
        ]);
        assert_eq!(o.vectors, 64);
        assert_eq!(o.create_size_mib, Some(16));
        assert_eq!(o.pid_file, Some(PathBuf::from("/tmp/p")));
        assert_eq!(o.stall_timeout, Duration::from_millis(250));
        assert!(o.verbose);
        assert_eq!(o.fence_run_dir, None);
        let o = run(&["--socket=/s", "--shm-path=/x", "--fence-run-dir", "/r"]);
        assert_eq!(o.fence_run_dir, Some(PathBuf::from("/r")));
    }

    #[test]
    fn help() {
        assert_eq!(p(&["--help"]), Ok(Command::Help));
        assert_eq!(p(&["--socket", "x", "-h"]), Ok(Command::Help));
    }

    #[test]
    fn bad_usage_is_one_line() {
        let base = ["--socket", "/tmp/s", "--shm-path", "/dev/shm/x"];
        let cases: &[(&[&str], &str)] = &[
            (&[], "--socket PATH is required"),
            (&["--socket", "/tmp/s"], "--shm-path PATH is required"),
            (&["--socket"], "--socket needs a value"),
            (&["--socket="], "--socket needs a value"),
            (&["--bogus"], "unknown option '--bogus'"),
            (&["stray"], "unexpected argument 'stray'"),
            (
                &["--vectors", "0"],
                "--vectors must be a whole number in 1..=64",
            ),
            (&["--vectors", "65"], "1..=64, not '65'"),
            (&["--vectors", "x"], "not 'x'"),
            (&["--create-size", "0"], "--create-size must be"),
            (
                &["--socket", "/a", "--socket", "/b"],
                "--socket given twice",
            ),
            (&["--verbose=1"], "--verbose takes no value"),
        ];
        for (extra, want) in cases {
            let mut args: Vec<&str> = if extra.first() == Some(&"--socket") || extra.is_empty() {
                Vec::new()
            } else {
                base.to_vec()
            };
            args.extend_from_slice(extra);
            let err = p(&args).expect_err(want);
            assert!(err.contains(want), "{args:?}: {err}");
            assert!(!err.contains('\n'));
        }
        let long = format!("/tmp/{}", "s".repeat(120));
        let err = p(&["--socket", &long, "--shm-path", "/x"]).unwrap_err();
        assert!(err.contains("too long"), "{err}");
    }
}
