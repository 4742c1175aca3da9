//! Command-line options.

use std::path::PathBuf;
use std::time::Duration;

pub const USAGE: &str = "\
usage: onecopy-ivshmem-server --socket PATH --shm-path PATH [options]

QEMU ivshmem-server protocol for `-device ivshmem-doorbell,chardev=...`:
hands every client the shared-memory fd, a peer id and one eventfd per
vector for itself and for every other peer. Start it before QEMU.

  --socket PATH         unix socket to listen on (refused if a live server has it)
  --shm-path PATH       existing shared-memory file (/dev/shm or hugetlbfs),
                        opened read-write, never truncated
  --create-size MiB     create --shm-path with this size if it does not exist
  --vectors N           interrupt vectors per peer, 1..=64 (4)
  --pid-file PATH       write our pid here (removed on exit)
  --stall-timeout-ms MS drop a client that has not read a pending message for
                        this long (5000)
  --fence-run-dir DIR   fence failed nodes: when the directory asks (a fence
                        request word in the region), SIGKILL that node's QEMU
                        (pid from DIR/nodeK.pid) and confirm in the region
  --verbose             log every message sent
  --help                this text

Exit status: 0 after SIGTERM/SIGINT, 1 if it cannot start or fails, 2 for bad usage.";

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

/// Parse the arguments after the program name. Errors are one line.
pub fn parse<I>(args: I) -> Result<Command, String>
where
    I: IntoIterator<Item = String>,
{
    let mut socket = None;
    let mut shm_path = None;
    let mut create_size_mib = None;
    let mut vectors = None;
    let mut pid_file = None;
    let mut stall_ms = None;
    let mut fence_run_dir = None;
    let mut verbose = false;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        match name.as_str() {
            "--help" | "-h" => return Ok(Command::Help),
            "--verbose" | "-v" => {
                if inline.is_some() {
                    return Err("--verbose takes no value".into());
                }
                verbose = true;
                continue;
            }
            "--socket" | "--shm-path" | "--create-size" | "--vectors" | "--pid-file"
            | "--stall-timeout-ms" | "--fence-run-dir" => {}
            _ if name.starts_with('-') => {
                return Err(format!("unknown option '{name}' (see --help)"))
            }
            _ => return Err(format!("unexpected argument '{arg}' (see --help)")),
        }
        let value = match inline.or_else(|| args.next()) {
            Some(v) if !v.is_empty() => v,
            _ => return Err(format!("{name} needs a value")),
        };
        let slot_taken = match name.as_str() {
            "--socket" => socket.replace(PathBuf::from(&value)).is_some(),
            "--shm-path" => shm_path.replace(PathBuf::from(&value)).is_some(),
            "--pid-file" => pid_file.replace(PathBuf::from(&value)).is_some(),
            "--fence-run-dir" => fence_run_dir.replace(PathBuf::from(&value)).is_some(),
            "--create-size" => create_size_mib
                .replace(number(&name, &value, 1, MAX_CREATE_MIB)?)
                .is_some(),
            "--vectors" => vectors
                .replace(number(&name, &value, 1, u64::from(MAX_VECTORS))? as u16)
                .is_some(),
            _ => stall_ms
                .replace(number(&name, &value, 1, 3_600_000)?)
                .is_some(),
        };
        if slot_taken {
            return Err(format!("{name} given twice"));
        }
    }
    let socket = socket.ok_or("--socket PATH is required (see --help)")?;
    let shm_path = shm_path.ok_or("--shm-path PATH is required (see --help)")?;
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
        vectors: vectors.unwrap_or(DEFAULT_VECTORS),
        pid_file,
        stall_timeout: Duration::from_millis(stall_ms.unwrap_or(5000)),
        verbose,
        fence_run_dir,
    }))
}

fn number(name: &str, value: &str, min: u64, max: u64) -> Result<u64, String> {
    match value.parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "{name} must be a whole number in {min}..={max}, not '{value}'"
        )),
    }
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
