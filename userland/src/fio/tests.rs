use alloc::collections::BTreeSet;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

use super::offsets::{Ddir, Mix, OffsetGen, Permutation, SplitMix64};
use super::options::{time_ns, DEFAULT_RANDSEED};
use super::report::{human, Samples};
use super::runner::{run_with, Limits};
use super::*;
use crate::mock::MockOs;
use crate::os::Errno;
use crate::pattern;
use crate::shell::{Outcome, Shell};

/// Run one shell line on the mock; no descriptor may leak.
fn shell(os: &mut MockOs, line: &str) -> String {
    let mut sh = Shell::new(1);
    assert_eq!(sh.execute(os, line), Outcome::Continue);
    assert_eq!(os.open_fds(), 0, "descriptor leaked by {line:?}");
    os.take_out()
}

mod fake;
mod io_batch;
mod jsonck;
mod libaio;
mod tasks;
mod zipf;

use fake::{Batcher, FakeOs, Op};

fn p(args: &[&str]) -> JobSpec {
    parse(args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn perr(args: &[&str]) -> String {
    match parse(args) {
        Ok(s) => panic!("{args:?} accepted: {s:?}"),
        Err(e) => format!("{e}"),
    }
}

fn env() -> RunEnv {
    RunEnv {
        node: 1,
        mode: String::from("onecopy"),
        busy_instances: 2,
        vcpus_per_instance: 1,
    }
}

fn run_fake(os: &mut FakeOs, args: &[&str]) -> Report {
    let spec = p(args);
    let r = run_with(os, &spec, &env(), Limits::default()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(os.open_fds(), 0, "descriptor leaked");
    r
}

/// `run_fake` through a [`fake::Batcher`].
fn run_b(b: &mut Batcher<'_>, args: &[&str]) -> crate::fio::Report {
    let spec = p(args);
    let r = run_with(b, &spec, &env(), Limits::default()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(b.inner.open_fds(), 0, "descriptor leaked");
    r
}

fn run_err(os: &mut FakeOs, args: &[&str]) -> String {
    let spec = p(args);
    let e = match run_with(os, &spec, &env(), Limits::default()) {
        Ok(r) => panic!("{args:?} ran: {r:?}"),
        Err(e) => format!("{e}"),
    };
    assert_eq!(os.open_fds(), 0, "descriptor leaked");
    e
}

fn offsets(args: &[&str], job: u32, n: usize, dir: Ddir) -> Vec<u64> {
    let s = p(args);
    let mut g = OffsetGen::new(&s, job);
    (0..n).map(|_| g.next_offset(dir)).collect()
}

mod fio_json;
mod jobfile;
mod offset_gen;
mod parse;
mod render;
mod robust;
mod run;
mod shell_cmd;
