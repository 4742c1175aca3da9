//! The Filebench-style workloads' dataset: a fileset of files of
//! gamma-distributed sizes (shape 1.5) in directories of `width` files,
//! described by a manifest.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec;

use crate::data::{manifest, DataFile, Dataset, Pattern};
use crate::rng::{hash2, Rng};

/// Path of file `i` of a fileset in `dir`.
pub fn file_path(dir: &str, width: u64, i: u64) -> String {
    format!("{dir}/d{:04}/f{:06}", i / width.max(1), i)
}

/// Size of file `i` of a dataset with `seed` and `mean`.
pub fn file_size(seed: u64, mean: u64, i: u64) -> u64 {
    Rng::new(seed, i).gamma15(mean)
}

/// Plan a fileset of about `size` bytes of files averaging `mean` bytes.
pub fn plan(
    app: &'static str,
    size: u64,
    seed: u64,
    root: &str,
    mean: u64,
    width: u64,
) -> Result<Dataset, String> {
    let files = (size / mean).max(1);
    let dirs_n = files.div_ceil(width);
    let mut dirs = vec![String::from(root)];
    for d in 0..dirs_n {
        dirs.push(format!("{root}/d{d:04}"));
    }
    let mut out = vec![DataFile {
        path: format!("{root}/manifest"),
        ..manifest(
            app,
            seed,
            &[("files", files), ("dirwidth", width), ("meansize", mean)],
        )
    }];
    for i in 0..files {
        out.push(DataFile {
            path: file_path(root, width, i),
            size: file_size(seed, mean, i),
            gen: Box::new(Pattern(hash2(seed, i))),
        });
    }
    Ok(Dataset {
        app,
        root: String::from(root),
        dirs,
        files: out,
    })
}

/// `webserver`'s fileset.
pub mod webserver {
    use alloc::string::String;

    use crate::data::Dataset;

    /// Filebench's `filesize` mean.
    pub const MEAN_SIZE: u64 = 16 << 10;
    /// Filebench's `meandirwidth`.
    pub const DIR_WIDTH: u64 = 20;

    /// The dataset: the fileset, about `size` bytes.
    pub fn plan(size: u64, seed: u64, root: &str) -> Result<Dataset, String> {
        super::plan("webserver", size, seed, root, MEAN_SIZE, DIR_WIDTH)
    }
}

/// `fileserver`'s fileset.
pub mod fileserver {
    use alloc::string::String;

    use crate::data::Dataset;

    /// Filebench's `filesize` mean.
    pub const MEAN_SIZE: u64 = 128 << 10;
    /// Filebench's `meandirwidth`.
    pub const DIR_WIDTH: u64 = 20;

    /// The dataset: the fileset, about `size` bytes.
    pub fn plan(size: u64, seed: u64, root: &str) -> Result<Dataset, String> {
        super::plan("fileserver", size, seed, root, MEAN_SIZE, DIR_WIDTH)
    }
}

/// `varmail`'s fileset.
pub mod varmail {
    use alloc::string::String;

    use crate::data::Dataset;

    /// Filebench's `filesize` mean.
    pub const MEAN_SIZE: u64 = 16 << 10;
    /// Filebench's `meandirwidth` (1000000: one directory).
    pub const DIR_WIDTH: u64 = 1_000_000;

    /// The dataset: the fileset, about `size` bytes.
    pub fn plan(size: u64, seed: u64, root: &str) -> Result<Dataset, String> {
        super::plan("varmail", size, seed, root, MEAN_SIZE, DIR_WIDTH)
    }
}

/// `search`'s fileset.
pub mod search {
    use alloc::string::String;

    use crate::data::Dataset;

    /// Mean file size (a source tree's files are small).
    pub const MEAN_SIZE: u64 = 16 << 10;
    /// Files per directory.
    pub const DIR_WIDTH: u64 = 50;

    /// The dataset: the fileset, about `size` bytes.
    pub fn plan(size: u64, seed: u64, root: &str) -> Result<Dataset, String> {
        super::plan("search", size, seed, root, MEAN_SIZE, DIR_WIDTH)
    }
}
