//! `app webserver`: Filebench's webserver personality. Each thread
//! loops over 10 x [`openfile` (round robin over the fileset),
//! `readwholefile` in I/Os of up to 1 MiB, `closefile`], then appends
//! 1..=16 KiB to a log file (Filebench's `appendfilerand` on its one
//! log file; here one log per node, `DIR/nK/log`). Defaults as in
//! Filebench's `webserver.f`: 100 threads, files of 16 KiB mean (gamma,
//! shape 1.5), 20 files per directory. Metric: the geometric mean of
//! the per-flowop throughputs (DPC's Filebench metric).

use alloc::format;
use core::cell::Cell;

use super::fileset::{self, FileSet};
use super::options::Options;
use super::report::Report;
use super::rng::Rng;
use super::{AppError, Run};
use crate::os::OpenFlags;
use crate::task::Tasks;
pub use datasets::fileset::webserver::{plan, DIR_WIDTH, MEAN_SIZE};

/// Operation kinds.
pub const NAMES: &[&str] = &["openfile", "readwholefile", "closefile", "appendlog"];
/// Filebench's `nthreads`.
pub const DEFAULT_THREADS: u32 = 100;
/// Files read per loop.
pub const READS_PER_LOOP: u32 = 10;
/// Options of its own: none.
pub const OPTIONS: &[&str] = &[];

/// Run it.
pub fn run(ex: &Tasks<'_>, run: &Run, opts: &Options) -> Result<Report, AppError> {
    let _ = opts;
    let set = FileSet::load(ex, &run.dir, "webserver")?;
    let own = set.own_dir(run.env.node);
    fileset::ensure_dir(ex, &own)?;
    let log = format!("{own}/log");
    let flags = OpenFlags {
        create: true,
        append: true,
        ..OpenFlags::default()
    };
    let logfd = ex
        .with_os(|os| os.open(&log, flags))
        .map_err(|e| AppError::new(format!("{log}: open: {e}")))?;
    let log_end = Cell::new(
        ex.with_os(|os| os.stat(&log))
            .map_err(|e| AppError::new(format!("{log}: stat: {e}")))?
            .size,
    );
    let slots = fileset::Slots::new(fileset::MAX_OPEN);
    let m = run.meter(ex, NAMES);
    let result = ex.run_n(run.threads as usize, |t| {
        let slots = &slots;
        let (ex, m, set, log, log_end) = (ex, &m, &set, &log, &log_end);
        let mut rng = Rng::new(run.seed, 1000 + t as u64);
        async move {
            while run.begin(ex, m) {
                let step: Result<(), AppError> = async {
                    for _ in 0..READS_PER_LOOP {
                        let path = set.next_path(run.seed);
                        let fd = fileset::open(ex, m, 0, &path, slots).await?;
                        let r = fileset::read_whole(ex, m, 1, fd, &path).await;
                        fileset::close(ex, m, 2, fd, &path, slots).await?;
                        r?;
                    }
                    fileset::append_rand(ex, m, 3, logfd, log, log_end, &mut rng).await?;
                    Ok(())
                }
                .await;
                if let Err(e) = step {
                    m.fail(e);
                    break;
                }
            }
        }
    });
    let closed = ex.with_os(|os| os.close(logfd));
    run.finish(
        ex,
        "webserver",
        result,
        &m,
        closed.map_err(|e| AppError::new(format!("{log}: close: {e}"))),
    )
    .map(|r| r.with_geomean())
}
