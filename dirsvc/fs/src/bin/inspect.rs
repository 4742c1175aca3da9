//! `inspect`: validate a onecopy disk image and list it, or print one file.
//!
//! ```text
//! inspect IMAGE              summary line + tree (path, kind, size, version)
//! inspect IMAGE --check      validate the metadata and every data block
//! inspect IMAGE --cat PATH   write the file's bytes to stdout
//! inspect IMAGE --blocks PATH  where the file's blocks are on the image
//! ```
//!
//! The image is opened read-only and mounted with the same validation the
//! directory kernel runs. Options are parsed with clap (`--help`). Exit
//! status: 0 ok, 1 bad image / bad data block / missing path / I/O error,
//! 2 bad arguments.

mod common;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{ArgGroup, Parser};
use common::FileDisk;
use fabric::proto::{Attr, FileKind};
use flatfs::{Fs, BLOCK_SIZE, ROOT_INO, VERSION};

/// What inspect does (the top of `--help`).
const ABOUT: &str = "\
Validate a onecopy disk image (read-only) and list its tree: one line per
inode with path, kind, size (bytes; entries for a directory) and version.";

const AFTER_HELP: &str =
    "Exit status: 0 ok, 1 bad image / bad data block / missing path / I/O error, 2 bad arguments.";

#[derive(Debug, Parser)]
#[command(
    name = "inspect",
    about = ABOUT,
    after_help = AFTER_HELP,
    disable_version_flag = true,
    max_term_width = 100,
    group(ArgGroup::new("mode").args(["check", "cat", "blocks"]))
)]
struct Args {
    /// The image file
    #[arg(value_name = "IMAGE")]
    image: PathBuf,
    /// Validate the metadata, then read every data block of every file and
    /// check it against its checksum: print "IMAGE: ok (...)", or the
    /// problem, or one line per bad data block (inode, path, block, device
    /// block) and a count (exit 1)
    #[arg(long)]
    check: bool,
    /// Write the bytes of file PATH to stdout
    #[arg(long, value_name = "PATH")]
    cat: Option<String>,
    /// One line per block of file PATH: block index, device block, byte
    /// offset in the image
    #[arg(long, value_name = "PATH")]
    blocks: Option<String>,
}

enum Mode {
    List,
    Check,
    Cat(String),
    Blocks(String),
}

impl Args {
    fn mode(self) -> (PathBuf, Mode) {
        let mode = match (self.check, self.cat, self.blocks) {
            (true, _, _) => Mode::Check,
            (_, Some(p), _) => Mode::Cat(p),
            (_, _, Some(p)) => Mode::Blocks(p),
            _ => Mode::List,
        };
        (self.image, mode)
    }
}

/// Every inode under `dir`, depth first, entries sorted by name.
fn walk(
    fs: &mut Fs<FileDisk>,
    dir: u64,
    prefix: &str,
    out: &mut Vec<(String, Attr)>,
) -> Result<(), String> {
    let mut entries = Vec::new();
    let mut cookie = 0;
    loop {
        let (page, next) = fs
            .readdir(dir, cookie, 256)
            .map_err(|e| format!("readdir {prefix}/: {e}"))?;
        entries.extend(page);
        if next == 0 {
            break;
        }
        cookie = next;
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    for e in entries {
        let path = format!("{prefix}/{}", e.name);
        out.push((path.clone(), e.attr));
        if e.attr.kind == FileKind::Dir {
            walk(fs, e.attr.ino, &path, out)?;
        }
    }
    Ok(())
}

fn list(fs: &mut Fs<FileDisk>, image: &str) -> Result<(), String> {
    let g = fs.geometry();
    let st = fs.stats();
    let bytes = g.total_blocks * BLOCK_SIZE as u64;
    let size = if bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes >> 10)
    };
    println!(
        "{image}: onecopy v{VERSION}, {size} ({} blocks), {}/{} inodes used, {}/{} data blocks used",
        g.total_blocks,
        st.inodes_used,
        st.inodes_total,
        st.blocks_used,
        st.blocks_total
    );
    let root = fs.getattr(ROOT_INO).map_err(|e| format!("root: {e}"))?;
    let mut rows = vec![(String::from("/"), root)];
    walk(fs, ROOT_INO, "", &mut rows)?;
    let width = rows.iter().map(|(p, _)| p.len()).max().unwrap_or(1);
    let mut out = std::io::stdout().lock();
    for (path, a) in rows {
        let kind = match a.kind {
            FileKind::File => "file",
            FileKind::Dir => "dir",
        };
        let line = format!("{path:<width$}  {kind:<4}  {:>12}  v{}", a.size, a.version);
        if writeln!(out, "{line}").is_err() {
            break; // stdout closed (e.g. piped into head)
        }
    }
    Ok(())
}

fn cat(fs: &mut Fs<FileDisk>, path: &str) -> Result<(), String> {
    let a = fs.lookup(path).map_err(|e| format!("{path}: {e}"))?;
    if a.kind == FileKind::Dir {
        return Err(format!("{path}: is a directory"));
    }
    let mut out = std::io::stdout().lock();
    let mut buf = vec![0u8; 256 * BLOCK_SIZE];
    let mut off = 0u64;
    while off < a.size {
        let n = fs
            .read(a.ino, off, &mut buf)
            .map_err(|e| format!("{path}: read at {off}: {e}"))?;
        if n == 0 {
            break;
        }
        out.write_all(&buf[..n])
            .map_err(|e| format!("{path}: stdout: {e}"))?;
        off += n as u64;
    }
    out.flush().map_err(|e| format!("{path}: stdout: {e}"))
}

fn blocks(fs: &mut Fs<FileDisk>, path: &str) -> Result<(), String> {
    let a = fs.lookup(path).map_err(|e| format!("{path}: {e}"))?;
    let lbas = fs.file_blocks(a.ino).map_err(|e| format!("{path}: {e}"))?;
    let mut out = std::io::stdout().lock();
    for (i, lba) in lbas.into_iter().enumerate() {
        let off = lba * BLOCK_SIZE as u64;
        writeln!(out, "{i} {lba} {off}").map_err(|e| format!("{path}: stdout: {e}"))?;
    }
    Ok(())
}

/// `--check`: the mount has validated the metadata; read every data block.
fn check(fs: &mut Fs<FileDisk>, image: &str) -> Result<(), String> {
    let bad = fs
        .check_data()
        .map_err(|e| format!("reading data blocks: {e}"))?;
    let st = fs.stats();
    if bad.is_empty() {
        println!(
            "{image}: ok ({} inodes used, {} blocks used, every data block matches its checksum)",
            st.inodes_used, st.blocks_used
        );
        return Ok(());
    }
    let mut paths = Vec::new();
    walk(fs, ROOT_INO, "", &mut paths)?;
    for b in &bad {
        let path = paths
            .iter()
            .find(|(_, a)| a.ino == b.ino)
            .map_or("?", |(p, _)| p.as_str());
        println!(
            "{image}: inode {} ({path}) block {} (device block {}): data checksum mismatch",
            b.ino, b.block, b.lba
        );
    }
    Err(format!("{} bad data block(s)", bad.len()))
}

fn main() -> ExitCode {
    // clap prints the help or the error and exits 0 or 2.
    let (image_path, mode) = Args::parse().mode();
    let image = image_path.display().to_string();
    let disk = match FileDisk::open_read_only(&image_path) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("inspect: {image}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut fs = match Fs::mount(disk) {
        Ok(fs) => fs,
        Err(e) => {
            eprintln!("inspect: {image}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match mode {
        Mode::Check => check(&mut fs, &image),
        Mode::List => list(&mut fs, &image),
        Mode::Cat(path) => cat(&mut fs, &path),
        Mode::Blocks(path) => blocks(&mut fs, &path),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("inspect: {image}: {msg}");
            ExitCode::FAILURE
        }
    }
}
