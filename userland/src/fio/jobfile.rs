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
    let at = |line: usize, msg: &str| FioError::new(format!("{}:{line}: {msg}", quoted(file)));
    let mut global = Builder::new();
    let mut global_stonewall = false;
    let mut cur: Option<Section> = None;
    let mut jobs: Vec<JobSpec> = Vec::new();
    let close = |sec: Option<Section>,
                 global: &mut Builder,
                 global_stonewall: &mut bool,
                 jobs: &mut Vec<JobSpec>|
     -> Result<(), FioError> {
        let Some(sec) = sec else { return Ok(()) };
        let Some(name) = sec.job else {
            *global = sec.b;
            *global_stonewall = sec.stonewall;
            return Ok(());
        };
        if !jobs.is_empty() && !sec.stonewall {
            return Err(at(
                sec.line,
                &format!(
                    "job '{}' would run alongside the jobs before it, but jobs run one at a time here: add 'stonewall' to it (or to [global])",
                    quoted(&name)
                ),
            ));
        }
        if jobs.len() >= MAX_JOB_SECTIONS {
            return Err(at(
                sec.line,
                &format!("more than {MAX_JOB_SECTIONS} job sections"),
            ));
        }
        let spec = sec.b.finish().map_err(|e| {
            at(
                sec.line,
                &format!("job '{}': {}", quoted(&name), e.message()),
            )
        })?;
        jobs.push(spec);
        Ok(())
    };
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = strip_comment(raw).trim();
        if line.is_empty() {
            continue;
        }
        if line.contains('$') {
            return Err(at(
                n,
                "variables and expressions ('${VAR}', '$ncpus', ...) are not supported; write the value",
            ));
        }
        if let Some(rest) = line.strip_prefix('[') {
            let Some(name) = rest.strip_suffix(']').map(str::trim) else {
                return Err(at(n, "a section header is '[NAME]'"));
            };
            close(cur.take(), &mut global, &mut global_stonewall, &mut jobs)?;
            let mut b = global.clone();
            let job = if name == "global" {
                None
            } else {
                b.apply("name", Some(name))
                    .map_err(|e| at(n, e.message()))?;
                Some(String::from(name))
            };
            cur = Some(Section {
                line: n,
                job,
                b,
                stonewall: global_stonewall,
            });
            continue;
        }
        let (key, value) = match line.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim())),
            None => (line, None),
        };
        if key == "include" || key.starts_with("include ") {
            return Err(at(
                n,
                "'include' is not supported; put the options in this file",
            ));
        }
        let Some(sec) = cur.as_mut() else {
            return Err(at(
                n,
                &format!(
                    "option '{}' outside a section ([global] or [NAME])",
                    quoted(key)
                ),
            ));
        };
        if ORDERING.contains(&key) {
            match value {
                None | Some("1") => {
                    if key != "new_group" {
                        sec.stonewall = true;
                    }
                }
                Some("0") => {
                    if key != "new_group" {
                        sec.stonewall = false;
                    }
                }
                Some(v) => {
                    return Err(at(
                        n,
                        &format!(
                            "bad value '{}' for option '{key}' (0 or 1, or no value)",
                            quoted(v)
                        ),
                    ))
                }
            }
            continue;
        }
        if Builder::takes_value(key).is_none() {
            return Err(at(n, &format!("unsupported option '{}'", quoted(key))));
        }
        sec.b.apply(key, value).map_err(|e| at(n, e.message()))?;
    }
    close(cur.take(), &mut global, &mut global_stonewall, &mut jobs)?;
    if jobs.is_empty() {
        return Err(FioError::new(format!(
            "{}: no job section ([NAME] after [global])",
            quoted(file)
        )));
    }
    Ok(jobs)
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
