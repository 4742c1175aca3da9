//! The applications of the study and what the report calls them (the
//! options check `--apps-list` against it, the plan runs it).

/// One application of the study.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct App {
    /// `app NAME`.
    pub name: &'static str,
    /// What DPC's Fig. 10 calls it (the report prints `name (dpc_name)`).
    pub dpc_name: &'static str,
    /// Counted in the geomean DPC reports (its five applications).
    pub in_geomean: bool,
}

/// The applications, in report order: DPC's five of Fig. 10, then
/// varmail (Filebench's fsync-heavy personality, not in DPC's set).
pub const APPS: &[App] = &[
    App {
        name: "kv",
        dpc_name: "RocksDB",
        in_geomean: true,
    },
    App {
        name: "ann",
        dpc_name: "DiskANN",
        in_geomean: true,
    },
    App {
        name: "infer",
        dpc_name: "DeepSeek",
        in_geomean: true,
    },
    App {
        name: "webserver",
        dpc_name: "Webserver",
        in_geomean: true,
    },
    App {
        name: "fileserver",
        dpc_name: "Fileserver",
        in_geomean: true,
    },
    App {
        name: "varmail",
        dpc_name: "not in DPC",
        in_geomean: false,
    },
];
