//! `app fileserver`: Filebench's fileserver personality. Each thread
//! loops over `createfile`, `writewholefile` (a gamma-sized file, 128
//! KiB mean, in I/Os of up to 1 MiB), `closefile`, `openfile`,
//! `appendfilerand` (1..=16 KiB), `closefile`, `openfile` of the shared
//! fileset (round robin), `readwholefile`, `closefile`, `deletefile`,
//! `statfile`. Defaults as in `fileserver.f`: 50 threads, 128 KiB mean
//! files, 20 per directory. Created, appended and deleted files are this
//! node's own (`DIR/nK/`: the file a thread created in its previous
//! loop is the one it deletes); reads and stats go to the shared
//! fileset. Metric: geometric mean of the per-flowop throughputs.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::Cell;

use super::fileset;
use super::options::Options;
use super::report::Report;
use super::rng::{hash2, Rng};
use super::{AppError, Run};
use crate::task::Tasks;
pub use datasets::fileset::fileserver::{plan, DIR_WIDTH, MEAN_SIZE};

/// Operation kinds.
pub const NAMES: &[&str] = &[
    "createfile",
    "writewholefile",
    "closefile",
    "openfile",
    "appendfilerand",
    "readwholefile",
    "deletefile",
    "statfile",
];
/// Filebench's `nthreads`.
pub const DEFAULT_THREADS: u32 = 50;
/// Options of its own: none.
pub const OPTIONS: &[&str] = &[];

const CREATE: usize = 0;
const WRITE: usize = 1;
const CLOSE: usize = 2;
const OPEN: usize = 3;
const APPEND: usize = 4;
const READ: usize = 5;
const DELETE: usize = 6;
const STAT: usize = 7;

/// Run it.
pub fn run(ex: &Tasks<'_>, run: &Run, _opts: &Options) -> Result<Report, AppError> {
    let (set, own, slots) = fileset::prepare(ex, run, "fileserver")?;
    let m = run.meter(ex, NAMES);
    let leftovers: core::cell::RefCell<Vec<String>> = core::cell::RefCell::new(Vec::new());
    let result = ex.run_n(run.threads as usize, |t| {
        let slots = &slots;
        let (ex, m, set, own, leftovers) = (ex, &m, &set, &own, &leftovers);
        let mut rng = Rng::new(run.seed, 2000 + t as u64);
        async move {
            let mut prev: Option<String> = None;
            let mut k = 0u64;
            while run.begin(ex, m) {
                let path = format!("{own}/t{t}.{k}");
                k += 1;
                let step: Result<(), AppError> = async {
                    let fd = fileset::create(ex, m, CREATE, &path, slots).await?;
                    let size = set.mean.max(1);
                    let size = Rng::new(run.seed, hash2(t as u64, k)).gamma15(size);
                    let w =
                        fileset::write_whole(ex, m, WRITE, fd, &path, size, rng.next_u64()).await;
                    fileset::close(ex, m, CLOSE, fd, &path, slots).await?;
                    w?;
                    let fd = fileset::open(ex, m, OPEN, &path, slots).await?;
                    let end = Cell::new(size);
                    let a = fileset::append_rand(ex, m, APPEND, fd, &path, &end, &mut rng).await;
                    fileset::close(ex, m, CLOSE, fd, &path, slots).await?;
                    a?;
                    let shared = set.next_path(run.seed);
                    let fd = fileset::open(ex, m, OPEN, &shared, slots).await?;
                    let r = fileset::read_whole(ex, m, READ, fd, &shared).await;
                    fileset::close(ex, m, CLOSE, fd, &shared, slots).await?;
                    r?;
                    if let Some(old) = prev.take() {
                        fileset::delete(ex, m, DELETE, &old).await?;
                    }
                    let shared = set.next_path(run.seed);
                    fileset::stat(ex, m, STAT, &shared).await?;
                    Ok(())
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
    // Leave the node's directory as it was (not timed).
    let cleanup = fileset::delete_leftovers(ex, &leftovers.borrow());
    run.finish(ex, "fileserver", result, &m, cleanup)
        .map(|r| r.with_geomean())
}
