//! Simulations and regression tests of the node data path.
//!
//! * [`datapath`]: a seeded simulation of the real data path (nodes over
//!   the host rig) with faults, checking single-copy and read invariants
//!   against the history ([`history`]).
//! * [`protocol`]: the older model simulation of the protocol over
//!   [`crate::pagecache::NodeCache`] and the real page directory.
//! * [`regress`]: focused tests of fixed defects over the host rig.

mod datapath;
mod history;
mod protocol;
mod regress;

/// `ONECOPY_SIM_LOG=debug` (or `trace`, `info`): the data path's and the
/// directory's log lines on stderr while replaying a seed.
pub(crate) fn init_log() {
    struct Stderr;
    impl log::Log for Stderr {
        fn enabled(&self, _: &log::Metadata) -> bool {
            true
        }
        fn log(&self, r: &log::Record) {
            eprintln!("{} {}: {}", r.level(), r.target(), r.args());
        }
        fn flush(&self) {}
    }
    static LOGGER: Stderr = Stderr;
    let level = match std::env::var("ONECOPY_SIM_LOG").as_deref() {
        Ok("trace") => log::LevelFilter::Trace,
        Ok("debug") => log::LevelFilter::Debug,
        Ok("info") => log::LevelFilter::Info,
        _ => return,
    };
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(level);
    }
}
