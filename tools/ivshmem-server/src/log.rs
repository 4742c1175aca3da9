//! One-line logging on stderr.

use std::fmt::Arguments;

pub const PROG: &str = "onecopy-ivshmem-server";

#[derive(Clone, Copy, Debug)]
pub struct Log {
    verbose: bool,
}

impl Log {
    pub fn new(verbose: bool) -> Self {
        Log { verbose }
    }

    pub fn verbose(&self) -> bool {
        self.verbose
    }

    pub fn info(&self, args: Arguments) {
        eprintln!("{PROG}: {args}");
    }

    pub fn warn(&self, args: Arguments) {
        eprintln!("{PROG}: warning: {args}");
    }

    /// Only with --verbose.
    pub fn debug(&self, args: Arguments) {
        if self.verbose {
            eprintln!("{PROG}: {args}");
        }
    }
}
