//! `app varmail`: Filebench's varmail personality (a mail server: small
//! files, fsync after every append). Each thread loops over
//! `deletefile`, `createfile`, `appendfilerand`, `fsync`, `closefile`,
//! `openfile`, `readwholefile`, `appendfilerand`, `fsync`, `closefile`,
//! `openfile`, `readwholefile`, `closefile`. Defaults as in
//! `varmail.f`: 16 threads, 16 KiB mean files, one directory. The
//! mailbox a thread deletes, creates, appends to and fsyncs is this
//! node's own (`DIR/nK/`, the one it created in its previous loop is
//! deleted); the second read is of the shared fileset (round robin).
//! It exercises the write paths: strong (writes into the one copy) and
//! relaxed (private copies written back at fsync). Metric: geometric
//! mean of the per-flowop throughputs.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::{Cell, RefCell};

use super::fileset;
use super::options::Options;
use super::report::Report;
use super::rng::Rng;
use super::{AppError, Run};
use crate::task::Tasks;
pub use datasets::fileset::varmail::{plan, DIR_WIDTH, MEAN_SIZE};

/// Operation kinds.
pub const NAMES: &[&str] = &[
    "deletefile",
    "createfile",
    "appendfilerand",
    "fsync",
    "closefile",
    "openfile",
    "readwholefile",
];
/// Filebench's `nthreads`.
pub const DEFAULT_THREADS: u32 = 16;
/// Options of its own: none.
pub const OPTIONS: &[&str] = &[];

const DELETE: usize = 0;
const CREATE: usize = 1;
const APPEND: usize = 2;
const FSYNC: usize = 3;
const CLOSE: usize = 4;
const OPEN: usize = 5;
const READ: usize = 6;

/// Run it.
pub fn run(ex: &Tasks<'_>, run: &Run, _opts: &Options) -> Result<Report, AppError> {
    let (set, own, slots) = fileset::prepare(ex, run, "varmail")?;
    let m = run.meter(ex, NAMES);
    let leftovers: RefCell<Vec<String>> = RefCell::new(Vec::new());
    let result = ex.run_n(run.threads as usize, |t| {
        let slots = &slots;
        let (ex, m, set, own, leftovers) = (ex, &m, &set, &own, &leftovers);
        let mut rng = Rng::new(run.seed, 3000 + t as u64);
        async move {
            let mut prev: Option<String> = None;
            let mut k = 0u64;
            while run.begin(ex, m) {
                let path = format!("{own}/m{t}.{k}");
                k += 1;
                let step: Result<(), AppError> = async {
                    if let Some(old) = prev.take() {
                        fileset::delete(ex, m, DELETE, &old).await?;
                    }
                    let end = Cell::new(0);
                    let fd = fileset::create(ex, m, CREATE, &path, slots).await?;
                    let r = async {
                        fileset::append_rand(ex, m, APPEND, fd, &path, &end, &mut rng).await?;
                        fileset::fsync(ex, m, FSYNC, fd, &path).await
                    }
                    .await;
                    fileset::close(ex, m, CLOSE, fd, &path, slots).await?;
                    r?;
                    let fd = fileset::open(ex, m, OPEN, &path, slots).await?;
                    let r = async {
                        fileset::read_whole(ex, m, READ, fd, &path).await?;
                        fileset::append_rand(ex, m, APPEND, fd, &path, &end, &mut rng).await?;
                        fileset::fsync(ex, m, FSYNC, fd, &path).await
                    }
                    .await;
                    fileset::close(ex, m, CLOSE, fd, &path, slots).await?;
                    r?;
                    let shared = set.next_path(run.seed);
                    let fd = fileset::open(ex, m, OPEN, &shared, slots).await?;
                    let r = fileset::read_whole(ex, m, READ, fd, &shared).await;
                    fileset::close(ex, m, CLOSE, fd, &shared, slots).await?;
                    r.map(|_| ())
                }
                .await;
                prev = Some(path);
                if let Err(e) = step {
                    m.fail(e);
                    break;
                }
            }
            if let Some(p) = prev {
                leftovers.borrow_mut().push(p);
            }
        }
    });
    let cleanup = fileset::delete_leftovers(ex, &leftovers.borrow());
    run.finish(ex, "varmail", result, &m, cleanup)
        .map(|r| r.with_geomean())
}
