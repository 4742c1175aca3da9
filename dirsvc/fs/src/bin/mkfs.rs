//! `mkfs`: build a onecopy disk image, optionally filled from a host folder.
//!
//! ```text
//! mkfs [--size-mb N] [--inodes N] [--from DIR] [--dataset NAME:SIZE[:SEED] ...] IMAGE
//! ```
//!
//! Options are parsed with clap (`--help`). Exit status: 0 on success, 2
//! on bad arguments, a missing folder, or data that does not fit (the
//! partial image is removed), 1 on I/O errors.

mod common;

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};
use common::FileDisk;
use fabric::proto::{Errno, MAX_NAME};
use flatfs::{Fs, BLOCK_SIZE};

const MIB: u64 = 1 << 20;

/// What mkfs does (the top of `--help`).
const ABOUT: &str = "\
Create (or overwrite) IMAGE as an empty onecopy file system, then copy the
files and subdirectories of DIR into it (symlinks and special files are
skipped with a warning).";

const AFTER_HELP: &str = "Exit status: 0 on success, 2 on bad arguments, a missing folder, or \
data that does not fit (the partial image is removed), 1 on I/O errors.";

#[derive(Debug, Parser)]
#[command(
    name = "mkfs",
    about = ABOUT,
    after_help = AFTER_HELP,
    disable_version_flag = true,
    max_term_width = 100
)]
struct Args {
    /// Image size in MiB
    #[arg(long, value_name = "N", default_value_t = 64,
          value_parser = clap::value_parser!(u64).range(1..=(1 << 24)))]
    size_mb: u64,
    /// Inode slots, rounded up to a multiple of 16
    #[arg(long, value_name = "N", default_value_t = 1024,
          value_parser = clap::value_parser!(u32).range(1..))]
    inodes: u32,
    /// Folder to copy into the image
    #[arg(long, value_name = "DIR")]
    from: Option<PathBuf>,
    /// An application workload's dataset (webserver, fileserver, varmail,
    /// kv, infer, ann, search; SIZE like 64m; SEED default 1), generated
    /// deterministically into /apps/NAME; repeatable; --size-mb and
    /// --inodes grow to fit it
    #[arg(long = "dataset", value_name = "NAME:SIZE[:SEED]", value_parser = datasets::parse_spec)]
    datasets: Vec<(String, u64, u64)>,
    /// The image file
    #[arg(value_name = "IMAGE")]
    image: PathBuf,
}

/// Why mkfs stopped: the message and the exit status.
struct Fail(String, u8);

/// The command line (clap prints the help or the error and exits 0 or
/// 2); a dataset named twice is refused like any other bad argument.
fn parse_args() -> Args {
    let args = Args::parse();
    for (i, d) in args.datasets.iter().enumerate() {
        if args.datasets[..i].iter().any(|e| e.0 == d.0) {
            Args::command()
                .error(
                    ErrorKind::ArgumentConflict,
                    format!("--dataset: {} given twice", d.0),
                )
                .exit();
        }
    }
    args
}

#[derive(Default)]
struct Counts {
    files: u64,
    dirs: u64,
    bytes: u64,
}

/// What a "does not fit" message needs to say.
struct Ctx<'a> {
    image: &'a str,
    from: &'a Path,
    size_mb: u64,
    inodes: u64,
}

/// Copy the contents of host folder `src` into directory `dst` of the image.
fn copy_tree(
    fs: &mut Fs<FileDisk>,
    src: &Path,
    dst: &str,
    n: &mut Counts,
    ctx: &Ctx,
) -> Result<(), Fail> {
    let io_fail = |p: &Path, e: std::io::Error| Fail(format!("mkfs: {}: {e}", p.display()), 2);
    let mut entries: Vec<fs::DirEntry> = fs::read_dir(src)
        .map_err(|e| io_fail(src, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| io_fail(src, e))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let host = entry.path();
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            return Err(Fail(
                format!("mkfs: {}: name is not valid UTF-8", host.display()),
                2,
            ));
        };
        if name.len() > MAX_NAME {
            return Err(Fail(
                format!(
                    "mkfs: {}: name longer than {MAX_NAME} bytes",
                    host.display()
                ),
                2,
            ));
        }
        let path = format!("{}/{name}", dst.trim_end_matches('/'));
        let meta = fs::symlink_metadata(&host).map_err(|e| io_fail(&host, e))?;
        let ft = meta.file_type();
        let fs_fail = |e: Errno| match e {
            Errno::NoSpace => Fail(
                format!(
                    "mkfs: {}: {} does not fit in {} MiB with {} inodes \
                     (no space left at {}; try a larger --size-mb or --inodes)",
                    ctx.image,
                    ctx.from.display(),
                    ctx.size_mb,
                    ctx.inodes,
                    host.display()
                ),
                2,
            ),
            Errno::Io => Fail(format!("mkfs: {}: I/O error writing {path}", ctx.image), 1),
            e => Fail(format!("mkfs: {}: {path}: {e}", host.display()), 2),
        };
        if ft.is_dir() {
            fs.mkdir(&path).map_err(fs_fail)?;
            n.dirs += 1;
            copy_tree(fs, &host, &path, n, ctx)?;
        } else if ft.is_file() {
            let ino = fs.create(&path, true).map_err(fs_fail)?.ino;
            let mut file = fs::File::open(&host).map_err(|e| io_fail(&host, e))?;
            let mut buf = vec![0u8; 256 * BLOCK_SIZE];
            let mut off = 0u64;
            loop {
                let got = file.read(&mut buf).map_err(|e| io_fail(&host, e))?;
                if got == 0 {
                    break;
                }
                fs.write(ino, off, &buf[..got]).map_err(fs_fail)?;
                off += got as u64;
            }
            n.files += 1;
            n.bytes += off;
        } else {
            let what = if ft.is_symlink() {
                "symlink"
            } else {
                "special file"
            };
            eprintln!("mkfs: warning: skipping {} ({what})", host.display());
        }
    }
    Ok(())
}

fn run(args: &Args, created: &mut bool) -> Result<String, Fail> {
    let image = args.image.display().to_string();
    if let Some(dir) = &args.from {
        match fs::metadata(dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(Fail(format!("mkfs: {}: not a directory", dir.display()), 2)),
            Err(e) => return Err(Fail(format!("mkfs: {}: {e}", dir.display()), 2)),
        }
    }
    // Plan the datasets first: the image grows to hold them.
    let mut plans = Vec::new();
    let (mut size_mb, mut inodes) = (args.size_mb, u64::from(args.inodes));
    let (mut need_blocks, mut need_inodes) = (0u64, 0u64);
    for (name, size, seed) in &args.datasets {
        let ds = datasets::plan(name, *size, *seed, &format!("/apps/{name}"))
            .map_err(|e| Fail(format!("mkfs: --dataset: {e}"), 2))?;
        let (b, i) = flatfs::dataset::needs(&ds);
        need_blocks += b;
        need_inodes += i;
        plans.push(ds);
    }
    if !plans.is_empty() {
        // Room for the datasets, the inode table, checksums and --from.
        let want_inodes = (inodes + need_inodes + 2).next_multiple_of(16);
        inodes = inodes.max(want_inodes);
        let meta = inodes / 16 + (need_blocks / 1023) + 64;
        let want_mb = (need_blocks + meta).div_ceil(MIB / BLOCK_SIZE as u64) + args.size_mb;
        size_mb = size_mb.max(want_mb);
    }
    let inodes = u32::try_from(inodes)
        .map_err(|_| Fail(format!("mkfs: {image}: {inodes} inodes is too many"), 2))?;
    let args = &Args {
        size_mb,
        inodes,
        from: args.from.clone(),
        datasets: args.datasets.clone(),
        image: args.image.clone(),
    };
    let blocks = args.size_mb * (MIB / BLOCK_SIZE as u64);
    let disk = FileDisk::create(&args.image, blocks)
        .map_err(|e| Fail(format!("mkfs: {image}: {e}"), 1))?;
    *created = true;
    let mut fs = Fs::format(disk, args.inodes).map_err(|e| match e {
        Errno::NoSpace => Fail(
            format!(
                "mkfs: {image}: {} MiB cannot hold {} inodes and any data",
                args.size_mb, args.inodes
            ),
            2,
        ),
        e => Fail(format!("mkfs: {image}: format: {e}"), 1),
    })?;
    let mut n = Counts::default();
    if let Some(dir) = &args.from {
        let ctx = Ctx {
            image: &image,
            from: dir,
            size_mb: args.size_mb,
            inodes: fs.stats().inodes_total,
        };
        copy_tree(&mut fs, dir, "/", &mut n, &ctx)?;
    }
    for ds in &plans {
        flatfs::dataset::write(&mut fs, ds).map_err(|(path, e)| match e {
            Errno::NoSpace => Fail(
                format!(
                    "mkfs: {image}: dataset {} does not fit in {} MiB ({path}; try a larger --size-mb)",
                    ds.app, args.size_mb
                ),
                2,
            ),
            e => Fail(format!("mkfs: {image}: dataset {}: {path}: {e}", ds.app), 1),
        })?;
        n.files += ds.files.len() as u64;
        n.dirs += ds.dirs.len() as u64;
        n.bytes += ds.bytes();
    }
    fs.sync()
        .map_err(|e| Fail(format!("mkfs: {image}: sync: {e}"), 1))?;
    let inodes = fs.stats().inodes_total;
    fs.into_device()
        .sync_all()
        .map_err(|e| Fail(format!("mkfs: {image}: sync: {e}"), 1))?;
    Ok(format!(
        "mkfs: {image}: {} MiB, {inodes} inodes, {} files, {} dirs, {} KiB data",
        args.size_mb,
        n.files,
        n.dirs,
        n.bytes.div_ceil(1024)
    ))
}

fn main() -> ExitCode {
    let args = parse_args();
    let mut created = false;
    match run(&args, &mut created) {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(Fail(msg, code)) => {
            eprintln!("{msg}");
            // Do not leave a half-filled image behind.
            if created {
                let _ = fs::remove_file(&args.image);
            }
            ExitCode::from(code)
        }
    }
}
