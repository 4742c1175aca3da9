//! `onecopy-ctl`: the helper `qemu-run.sh` uses to talk to a running cluster.
//!
//! ```text
//! onecopy-ctl wait-ready --run-dir D [--nodes N] [--timeout-ms T] [--since-ms EPOCH_MS]
//! onecopy-ctl exec --run-dir D [--timeout-ms T] 'K: command'...
//! onecopy-ctl attach --run-dir D [--node K]
//! onecopy-ctl trace --run-dir D -o FILE.json [--timeout-ms T]
//! ```
//!
//! Exit status: 0 success, 1 failure (not ready, a command answered
//! `error:` or timed out), 2 wrong usage.
#![forbid(unsafe_code)]

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use onecopy_tests::ready::{wait_ready, WaitOutcome};
use onecopy_tests::{parse_exec_spec, Console, Error, Instance, RunDir, Status};

const USAGE: &str = "\
usage: onecopy-ctl wait-ready --run-dir D [--nodes N] [--timeout-ms T] [--since-ms EPOCH_MS]
       onecopy-ctl exec --run-dir D [--timeout-ms T] 'K: command'...
       onecopy-ctl attach --run-dir D [--node K]
       onecopy-ctl trace --run-dir D -o FILE.json [--timeout-ms T]

  wait-ready  wait until the directory is ready and every node joined; print the
              elapsed milliseconds (since --since-ms, default START_MS from
              cluster.env); exit 1 with the reason on a failure or timeout
              (default 30000 ms)
  exec        run each command on node K's shell in order; print its output
              prefixed with [nK]; exit 1 if any answered error: or timed out
              (--timeout-ms per command, default 60000)
  attach      connect the terminal to an instance's serial console (K = 0 is
              the directory; default 1); Ctrl-] detaches. Put the terminal in
              raw mode first (qemu-run.sh does: stty raw -echo)
  trace       run `trace dump` on the directory's console and every node's
              shell, put their events on the directory's clock (printing
              each instance's TSC offset and its uncertainty: the skew
              check) and write them as Chrome trace-event JSON (Perfetto);
              exit 1 if an instance gave no dump (the others are written)";

fn usage_error(msg: &str) -> ExitCode {
    eprintln!("onecopy-ctl: error: {msg}\n{USAGE}");
    ExitCode::from(2)
}

/// Parsed `--flag value` options and positional arguments.
struct Args {
    flags: BTreeMap<String, String>,
    positional: Vec<String>,
}

fn parse_args(args: &[String], with_value: &[&str]) -> Result<Args, String> {
    let mut flags = BTreeMap::new();
    let mut positional = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--" {
            positional.extend(it.by_ref().cloned());
            break;
        }
        if let Some(name) = a.strip_prefix("--") {
            let (name, inline) = match name.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (name, None),
            };
            if !with_value.contains(&name) {
                return Err(format!("unknown option --{name}"));
            }
            let v = match inline {
                Some(v) => v,
                None => it
                    .next()
                    .cloned()
                    .ok_or_else(|| format!("--{name} needs a value"))?,
            };
            flags.insert(name.to_string(), v);
        } else {
            positional.push(a.clone());
        }
    }
    Ok(Args { flags, positional })
}

impl Args {
    fn run_dir(&self) -> Result<RunDir, String> {
        let d = self
            .flags
            .get("run-dir")
            .ok_or_else(|| "--run-dir is required".to_string())?;
        let p = PathBuf::from(d);
        if !p.is_dir() {
            return Err(format!("run dir {d} does not exist"));
        }
        Ok(RunDir::new(p))
    }

    fn number(&self, name: &str, default: u64, max: u64) -> Result<u64, String> {
        match self.flags.get(name) {
            None => Ok(default),
            Some(v) => match v.parse::<u64>() {
                Ok(n) if n <= max => Ok(n),
                _ => Err(format!(
                    "--{name} must be an integer in 0..={max}, got {v:?}"
                )),
            },
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn cluster_nodes(run: &RunDir, args: &Args) -> Result<u8, String> {
    if args.flags.contains_key("nodes") {
        let n = args.number("nodes", 0, 16)?;
        if n == 0 {
            return Err("--nodes must be in 1..=16".into());
        }
        return Ok(n as u8);
    }
    run.nodes().ok_or_else(|| {
        format!(
            "no NODES in {}/cluster.env (is a cluster running there?)",
            run.path().display()
        )
    })
}

fn cmd_wait_ready(args: &[String]) -> ExitCode {
    let a = match parse_args(args, &["run-dir", "nodes", "timeout-ms", "since-ms"]) {
        Ok(a) => a,
        Err(e) => return usage_error(&e),
    };
    if !a.positional.is_empty() {
        return usage_error(&format!("unexpected argument {:?}", a.positional[0]));
    }
    let parsed = (|| {
        let run = a.run_dir()?;
        let nodes = cluster_nodes(&run, &a)?;
        let timeout = a.number("timeout-ms", 30_000, 3_600_000)?;
        let since = match a.flags.get("since-ms") {
            Some(_) => a.number("since-ms", 0, u64::MAX)?,
            None => run
                .env()
                .get("START_MS")
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(now_ms),
        };
        Ok::<_, String>((run, nodes, timeout, since))
    })();
    let (run, nodes, timeout, since) = match parsed {
        Ok(v) => v,
        Err(e) => return usage_error(&e),
    };
    match wait_ready(&run, nodes, Duration::from_millis(timeout)) {
        WaitOutcome::Ready(_) => {
            println!("{}", now_ms().saturating_sub(since));
            ExitCode::SUCCESS
        }
        WaitOutcome::Failed(reason, p) => {
            eprintln!("not ready: {reason} ({})", p.summary());
            ExitCode::from(1)
        }
        WaitOutcome::TimedOut(p) => {
            eprintln!("not ready: timed out after {timeout} ms ({})", p.summary());
            ExitCode::from(1)
        }
    }
}

fn print_line(node: u8, line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "[n{node}] {line}");
    let _ = out.flush();
}

fn cmd_exec(args: &[String]) -> ExitCode {
    let a = match parse_args(args, &["run-dir", "timeout-ms", "nodes"]) {
        Ok(a) => a,
        Err(e) => return usage_error(&e),
    };
    let parsed = (|| {
        let run = a.run_dir()?;
        let nodes = cluster_nodes(&run, &a)?;
        let timeout = a.number("timeout-ms", 60_000, 3_600_000)?.max(1);
        if a.positional.is_empty() {
            return Err("exec needs at least one 'K: command'".to_string());
        }
        let specs = a
            .positional
            .iter()
            .map(|s| parse_exec_spec(s, nodes))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((run, specs, Duration::from_millis(timeout)))
    })();
    let (run, specs, timeout) = match parsed {
        Ok(v) => v,
        Err(e) => return usage_error(&e),
    };
    let mut consoles: BTreeMap<u8, Console> = BTreeMap::new();
    let mut broken: BTreeMap<u8, &'static str> = BTreeMap::new();
    let mut failed = false;
    for (node, cmd) in specs {
        print_line(node, &format!("n{node}> {cmd}"));
        if let Some(why) = broken.get(&node) {
            print_line(node, &format!("error: skipped ({why})"));
            failed = true;
            continue;
        }
        let start = Instant::now();
        let console = match consoles.entry(node) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(v) => {
                let path = run.socket_path(Instance::Node(node));
                match Console::connect(&path, node, timeout) {
                    Ok(c) => v.insert(c),
                    Err(e) => {
                        print_line(node, &format!("error: cannot reach the shell: {e}"));
                        broken.insert(node, "its shell could not be reached");
                        failed = true;
                        continue;
                    }
                }
            }
        };
        let left = timeout.saturating_sub(start.elapsed());
        match console.exec(&cmd, left) {
            Ok(out) => {
                for l in &out.lines {
                    print_line(node, l);
                }
                print_line(node, &out.status.to_string());
                if let Status::Error(_) = out.status {
                    failed = true;
                }
                if out.closed {
                    consoles.remove(&node);
                    broken.insert(node, "its console closed: the instance exited");
                }
            }
            Err(Error::Timeout { partial, .. }) => {
                if !partial.is_empty() {
                    print_line(node, &format!("(partial answer: {partial:?})"));
                }
                print_line(
                    node,
                    &format!(
                        "error: no answer within {} ms (timed out)",
                        timeout.as_millis()
                    ),
                );
                consoles.remove(&node);
                broken.insert(node, "an earlier command on this node timed out");
                failed = true;
            }
            Err(e) => {
                print_line(node, &format!("error: {e}"));
                consoles.remove(&node);
                broken.insert(node, "its console failed earlier");
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn cmd_attach(args: &[String]) -> ExitCode {
    let a = match parse_args(args, &["run-dir", "node"]) {
        Ok(a) => a,
        Err(e) => return usage_error(&e),
    };
    let parsed = (|| {
        let run = a.run_dir()?;
        let k = a.number("node", 1, 16)? as u8;
        if let Some(n) = run.nodes() {
            if k > n {
                return Err(format!("no node {k} in a cluster of {n} nodes"));
            }
        }
        Ok((run, Instance::from_number(k)))
    })();
    let (run, inst) = match parsed {
        Ok(v) => v,
        Err(e) => return usage_error(&e),
    };
    let stream = match connect_console(&run.socket_path(inst)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("onecopy-ctl: {e}\r");
            return ExitCode::from(1);
        }
    };
    // What the instance printed before we connected is only in its log.
    print_log_tail(&run.log(inst), 16, &inst.label());
    let reader = match stream.try_clone() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("onecopy-ctl: {e}\r");
            return ExitCode::from(1);
        }
    };
    let label = inst.label();
    std::thread::spawn(move || copy_console_out(reader, &label));
    copy_stdin_in(stream, &inst.label());
    ExitCode::SUCCESS
}

/// Connect to an instance's console socket, retrying for 10 s while QEMU
/// has not created it yet.
fn connect_console(path: &std::path::Path) -> Result<UnixStream, String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match UnixStream::connect(path) {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() >= deadline => {
                return Err(format!("cannot connect to {}: {e}", path.display()))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// The banner and the last `lines` lines of the console's log.
fn print_log_tail(log: &str, lines: usize, label: &str) {
    let tail_start = log
        .char_indices()
        .filter(|&(_, c)| c == '\n')
        .map(|(i, _)| i + 1)
        .collect::<Vec<_>>()
        .iter()
        .rev()
        .nth(lines - 1)
        .copied()
        .unwrap_or(0);
    let mut out = std::io::stdout().lock();
    let _ = write!(
        out,
        "[attached to {label} console; Ctrl-] detaches]\r\n{}",
        &log[tail_start..]
    );
    let _ = out.flush();
}

/// The console's output to stdout until it closes; then the process ends.
fn copy_console_out(mut reader: UnixStream, label: &str) {
    let mut buf = [0u8; 4096];
    loop {
        match reader.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let mut out = std::io::stdout().lock();
                if out.write_all(&buf[..n]).and_then(|_| out.flush()).is_err() {
                    break;
                }
            }
        }
    }
    let mut out = std::io::stdout().lock();
    let _ = write!(out, "\r\n[{label} console closed]\r\n");
    let _ = out.flush();
    std::process::exit(0);
}

/// Stdin to the console until end of input or Ctrl-] (which detaches).
fn copy_stdin_in(mut writer: UnixStream, label: &str) {
    let mut stdin = std::io::stdin().lock();
    let mut buf = [0u8; 1024];
    loop {
        match stdin.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let chunk = &buf[..n];
                let (send, detach) = match chunk.iter().position(|&b| b == 0x1d) {
                    Some(i) => (&chunk[..i], true),
                    None => (chunk, false),
                };
                if writer.write_all(send).is_err() {
                    break;
                }
                if detach {
                    let mut out = std::io::stdout().lock();
                    let _ = write!(out, "\r\n[detached from {label} console]\r\n");
                    let _ = out.flush();
                    break;
                }
            }
        }
    }
}

fn cmd_trace(args: &[String]) -> ExitCode {
    let args: Vec<String> = args
        .iter()
        .map(|a| {
            if a == "-o" {
                "--output".to_string()
            } else {
                a.clone()
            }
        })
        .collect();
    let a = match parse_args(&args, &["run-dir", "output", "timeout-ms", "nodes"]) {
        Ok(a) => a,
        Err(e) => return usage_error(&e),
    };
    let parsed = (|| {
        let run = a.run_dir()?;
        let nodes = cluster_nodes(&run, &a)?;
        let timeout = a.number("timeout-ms", 60_000, 3_600_000)?.max(1);
        let out = a.flags.get("output").ok_or("trace needs -o FILE.json")?;
        if let Some(p) = a.positional.first() {
            return Err(format!("unexpected argument {p:?}"));
        }
        Ok::<_, String>((
            run,
            nodes,
            Duration::from_millis(timeout),
            PathBuf::from(out),
        ))
    })();
    let (run, nodes, timeout, out) = match parsed {
        Ok(v) => v,
        Err(e) => return usage_error(&e),
    };
    let (dumps, errors) = onecopy_tests::trace::collect(&run, nodes, timeout);
    for e in &errors {
        eprintln!("onecopy-ctl: trace: no dump from {e}");
    }
    if dumps.is_empty() {
        eprintln!("onecopy-ctl: trace: no instance gave a dump");
        return ExitCode::from(1);
    }
    let (json, aligns) = onecopy_tests::trace::merge(&dumps);
    let hz = dumps.first().map(|d| d.hz).unwrap_or(1);
    for d in &dumps {
        if d.hz.abs_diff(hz) > hz / 100 {
            println!("warning: n{} counts {} ticks/s, the directory {hz}: its timestamps are scaled wrong", d.inst, d.hz);
        }
    }
    for a in &aligns {
        println!("{}", a.describe(hz));
    }
    let text = match serde_json::to_string(&json) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("onecopy-ctl: trace: {e}");
            return ExitCode::from(1);
        }
    };
    if let Err(e) = std::fs::write(&out, text) {
        eprintln!("onecopy-ctl: trace: cannot write {}: {e}", out.display());
        return ExitCode::from(1);
    }
    let events: usize = dumps.iter().map(|d| d.events.len()).sum();
    let lost: u64 = dumps.iter().map(|d| d.lost).sum();
    println!(
        "wrote {}: {events} events from {} instances ({lost} overwritten before the dump)",
        out.display(),
        dumps.len()
    );
    if errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(sub) = args.first() else {
        return usage_error("missing subcommand");
    };
    let rest = &args[1..];
    match sub.as_str() {
        "wait-ready" => cmd_wait_ready(rest),
        "exec" => cmd_exec(rest),
        "attach" => cmd_attach(rest),
        "trace" => cmd_trace(rest),
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        other => usage_error(&format!("unknown subcommand {other:?}")),
    }
}
