//! fio job files: the ini syntax of `fio FILE`.
//!
//! ```text
//! ; comment          # comment too
//! [global]
//! rw=randread
//! bs=4k
//! size=16m
//!
//! [one]
//! numjobs=2
//!
//! [two]
//! stonewall
//! rw=write
//! ```
//!
//! * `[global]` options apply to every job section after it (a later
//!   `[global]` adds to them); every other `[NAME]` is a job named `NAME`.
//! * A line is `key=value` (spaces around `=` allowed) or a bare flag;
//!   `;` and `#` start a comment (a whole line, or after a blank).
//! * The options are the command line's (see [`super::options`]), plus
//!   `stonewall` / `wait_for_previous` (wait for the jobs before) and
//!   `new_group` (a new reporting group). The runner runs one job section
//!   at a time, each its own reporting group, so every job after the first
//!   must have `stonewall` (or `wait_for_previous`, in its section or in
//!   `[global]`): a file whose jobs fio would run together is refused
//!   rather than run differently.
//! * Not supported, refused with the line: any other option (by name),
//!   `${VAR}` and `$`-expressions, `include`, options before the first
//!   section.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::options::{quoted, Builder, JobSpec};
use super::FioError;

/// Longest job file read (bytes).
pub const MAX_JOB_FILE: usize = 64 << 10;
/// Most job sections in one file.
pub const MAX_JOB_SECTIONS: usize = 64;

/// Options of job files only, all flags: they order jobs and groups.
const ORDERING: &[&str] = &["stonewall", "wait_for_previous", "new_group"];

/// One section being read.
struct Section {
    /// Line of its `[NAME]`.
    line: usize,
    /// `None`: `[global]`.
    job: Option<String>,
    b: Builder,
    stonewall: bool,
}

/// Parse the text of job file `file` (its name only prefixes error
/// messages: `FILE:LINE: ...`) into its jobs, in order.
pub fn parse_jobfile(file: &str, text: &str) -> Result<Vec<JobSpec>, FioError> {
    let mut r = Reader::new(file);
    for (i, raw) in text.lines().enumerate() {
        r.line(i + 1, strip_comment(raw).trim())?;
    }
    r.finish()
}

/// A job file being read, line by line.
struct Reader<'a> {
    file: &'a str,
    /// The `[global]` options so far (every later section starts from them).
    global: Builder,
    global_stonewall: bool,
    /// The section being read.
    cur: Option<Section>,
    jobs: Vec<JobSpec>,
}

impl<'a> Reader<'a> {
    fn new(file: &'a str) -> Self {
        Reader {
            file,
            global: Builder::new(),
            global_stonewall: false,
            cur: None,
            jobs: Vec::new(),
        }
    }

    /// An error at line `n`: `FILE:N: msg`.
    fn at(&self, n: usize, msg: &str) -> FioError {
        FioError::new(format!("{}:{n}: {msg}", quoted(self.file)))
    }

    /// Line `n`, its comment stripped and trimmed.
    fn line(&mut self, n: usize, line: &str) -> Result<(), FioError> {
        if line.is_empty() {
            return Ok(());
        }
        if line.contains('$') {
            return Err(self.at(
                n,
                "variables and expressions ('${VAR}', '$ncpus', ...) are not supported; write the value",
            ));
        }
        if let Some(rest) = line.strip_prefix('[') {
            let Some(name) = rest.strip_suffix(']').map(str::trim) else {
                return Err(self.at(n, "a section header is '[NAME]'"));
            };
            return self.header(n, name);
        }
        let (key, value) = match line.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim())),
            None => (line, None),
        };
        self.option(n, key, value)
    }

    /// `[name]` at line `n`: the section before it ends.
    fn header(&mut self, n: usize, name: &str) -> Result<(), FioError> {
        self.close()?;
        let mut b = self.global.clone();
        let job = if name == "global" {
            None
        } else {
            b.apply("name", Some(name))
                .map_err(|e| self.at(n, e.message()))?;
            Some(String::from(name))
        };
        self.cur = Some(Section {
            line: n,
            job,
            b,
            stonewall: self.global_stonewall,
        });
        Ok(())
    }

    /// `key[=value]` at line `n`, in the current section.
    fn option(&mut self, n: usize, key: &str, value: Option<&str>) -> Result<(), FioError> {
        if key == "include" || key.starts_with("include ") {
            return Err(self.at(
                n,
                "'include' is not supported; put the options in this file",
            ));
        }
        if self.cur.is_none() {
            return Err(self.at(
                n,
                &format!(
                    "option '{}' outside a section ([global] or [NAME])",
                    quoted(key)
                ),
            ));
        }
        if ORDERING.contains(&key) {
            let on = match value {
                None | Some("1") => true,
                Some("0") => false,
                Some(v) => {
                    return Err(self.at(
                        n,
                        &format!(
                            "bad value '{}' for option '{key}' (0 or 1, or no value)",
                            quoted(v)
                        ),
                    ))
                }
            };
            if key != "new_group" {
                if let Some(sec) = self.cur.as_mut() {
                    sec.stonewall = on;
                }
            }
            return Ok(());
        }
        if Builder::takes_value(key).is_none() {
            return Err(self.at(n, &format!("unsupported option '{}'", quoted(key))));
        }
        let applied = match self.cur.as_mut() {
            Some(sec) => sec.b.apply(key, value),
            None => Ok(()),
        };
        applied.map_err(|e| self.at(n, e.message()))
    }

    /// The current section ends: `[global]` becomes the options every
    /// later section starts from, a job is checked and kept.
    fn close(&mut self) -> Result<(), FioError> {
        let Some(sec) = self.cur.take() else {
            return Ok(());
        };
        let Some(name) = sec.job else {
            self.global = sec.b;
            self.global_stonewall = sec.stonewall;
            return Ok(());
        };
        if !self.jobs.is_empty() && !sec.stonewall {
            return Err(self.at(
                sec.line,
                &format!(
                    "job '{}' would run alongside the jobs before it, but jobs run one at a time here: add 'stonewall' to it (or to [global])",
                    quoted(&name)
                ),
            ));
        }
        if self.jobs.len() >= MAX_JOB_SECTIONS {
            return Err(self.at(
                sec.line,
                &format!("more than {MAX_JOB_SECTIONS} job sections"),
            ));
        }
        let spec = sec.b.finish().map_err(|e| {
            self.at(
                sec.line,
                &format!("job '{}': {}", quoted(&name), e.message()),
            )
        })?;
        self.jobs.push(spec);
        Ok(())
    }

    /// The end of the file: its jobs, at least one.
    fn finish(mut self) -> Result<Vec<JobSpec>, FioError> {
        self.close()?;
        if self.jobs.is_empty() {
            return Err(FioError::new(format!(
                "{}: no job section ([NAME] after [global])",
                quoted(self.file)
            )));
        }
        Ok(self.jobs)
    }
}

/// `line` without its comment: from a `;` or `#` that starts the line or
/// follows a blank.
fn strip_comment(line: &str) -> &str {
    let mut prev_blank = true;
    for (i, c) in line.char_indices() {
        if (c == ';' || c == '#') && prev_blank {
            return &line[..i];
        }
        prev_blank = c.is_whitespace();
    }
    line
}
