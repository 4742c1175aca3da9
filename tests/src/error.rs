//! The one error type of the harness.

use std::fmt;
use std::path::PathBuf;

/// Everything that can go wrong while driving a cluster.
#[derive(Debug)]
pub enum Error {
    /// An I/O operation failed; `context` says which.
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A wait ran out of time.
    Timeout {
        /// What was awaited.
        what: String,
        /// Whatever had been received so far (may be empty).
        partial: String,
    },
    /// A console closed (the instance exited) before the answer was complete.
    Closed {
        /// What was awaited.
        what: String,
        /// Whatever had been received so far (may be empty).
        partial: String,
    },
    /// A shell command answered `error: ...` where `ok` was required.
    Command {
        /// Node the command ran on.
        node: u8,
        /// The command line.
        cmd: String,
        /// The message after `error: `.
        message: String,
        /// The command's output lines.
        output: Vec<String>,
    },
    /// `qemu-run.sh` failed to bring the cluster up.
    Launch {
        /// Exit status of qemu-run.sh (`None` if killed or timed out).
        status: Option<i32>,
        /// Its combined output.
        output: String,
        /// The run directory (logs are there).
        run_dir: PathBuf,
    },
    /// Wrong use of the harness (bad node number, malformed spec, ...).
    Usage(String),
}

impl Error {
    /// Wraps an I/O error with a description of what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { context, source } => write!(f, "{context}: {source}"),
            Error::Timeout { what, partial } => {
                write!(f, "timed out waiting for {what}")?;
                if !partial.is_empty() {
                    write!(f, "; received so far: {partial:?}")?;
                }
                Ok(())
            }
            Error::Closed { what, partial } => {
                write!(
                    f,
                    "console closed (instance exited?) while waiting for {what}"
                )?;
                if !partial.is_empty() {
                    write!(f, "; received so far: {partial:?}")?;
                }
                Ok(())
            }
            Error::Command {
                node,
                cmd,
                message,
                output,
            } => {
                write!(f, "n{node}: `{cmd}` failed: error: {message}")?;
                if !output.is_empty() {
                    write!(f, " (output: {output:?})")?;
                }
                Ok(())
            }
            Error::Launch {
                status,
                output,
                run_dir,
            } => {
                match status {
                    Some(s) => write!(f, "qemu-run.sh exited with status {s}")?,
                    None => write!(f, "qemu-run.sh did not finish")?,
                }
                write!(f, " (run dir {}):\n{output}", run_dir.display())
            }
            Error::Usage(msg) => write!(f, "{msg}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Result with the harness [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
